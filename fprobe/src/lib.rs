//! fprobe: entry and exit probes on many functions at once, on the sparse
//! `FtraceRegs` (the events that ride on them are the `probe_events`
//! crate's).
//!
//! The seeds' point: a probe on thousands of functions must not pay for a full
//! register save, and an exit handler needs the function's entry arguments as
//! well as its return value. So probes run on the ARGS trampoline and the
//! shared return hook, and save the arguments in the per-call data when asked.
//!
//! The probes exist only in the kernel build.
#![no_std]

extern crate alloc;

#[cfg(target_os = "none")]
mod probe;

#[cfg(target_os = "none")]
pub use probe::*;
