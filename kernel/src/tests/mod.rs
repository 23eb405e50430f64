//! In-kernel tests, run under QEMU by `cargo test` (see `crate::testing`).

mod basics;
mod ftrace;
mod fprobe;
mod graph;
mod instances;
mod tracefs;
mod sched;

/// Every recorded event on every CPU, oldest first: (timestamp, payload).
fn recorded_events() -> alloc::vec::Vec<(u64, alloc::vec::Vec<u8>)> {
    let snapshots = ::ftrace::instance::top().buffer().snapshot_all();
    ::ftrace::tracer::merged(&snapshots).into_iter().map(|(time, _, payload)| (time, payload.to_vec())).collect()
}
