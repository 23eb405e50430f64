//! In-kernel tests, run under QEMU by `cargo test` (see `crate::testing`).

mod basics;
mod ftrace;
mod fprobe;
mod graph;
mod sched;
