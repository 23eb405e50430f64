//! In-kernel tests, run under QEMU by `cargo test` (see `crate::testing`).

mod basics;
mod events;
mod examples;
mod fprobe;
mod ftrace;
mod kprobes;
mod rethook;
mod tour;
mod tracefs;
mod tracers;

/// Every recorded event on every CPU, oldest first: (timestamp, payload).
fn recorded_events() -> alloc::vec::Vec<(u64, alloc::vec::Vec<u8>)> {
    let snapshots = ::trace::array::instances::top().buffer().snapshot_all();
    trace::output::pipe::merged(&snapshots)
        .expect("room to list the events")
        .into_iter()
        .map(|(time, _, payload)| (time, payload.to_vec()))
        .collect()
}

/// `echo TEXT > PATH`, which must succeed.
fn write_file(path: &str, text: &str) {
    crate::tracefs::write(path, text, ::ftrace::FilterMode::Replace).unwrap_or_else(|error| panic!("{path} <- {text}: {error}"));
}

/// `cat PATH`, which must succeed.
fn read_file(path: &str) -> alloc::string::String {
    let mut out = alloc::string::String::new();
    crate::tracefs::read(path, &mut out).unwrap_or_else(|error| panic!("{path}: {error}"));
    out
}
