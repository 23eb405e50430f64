//! The trace ring buffer, apart from everything that traces: Linux's
//! `kernel/trace/ring_buffer.c` in small. It knows pages, records of raw
//! bytes and timestamps, never what a record means (the `trace` crate's
//! records) nor what is traced (the `ftrace` mechanism).
//!
//! - [`per_cpu`]: one CPU's ring of pages in Linux's ring-buffer page
//!   format (trace-cmd reads the pages as they are), one writer that takes
//!   no lock, readers that never see a torn record (Linux's
//!   `ring_buffer_per_cpu`);
//! - [`trace_buffer`]: one ring per CPU, the `tracing_on` switch and the
//!   snapshot's spare set (Linux's `trace_buffer`), one per trace array;
//! - [`payload`]: a record's bytes, 4-byte aligned, written with whole
//!   stores;
//! - [`clock`]: the trace clocks (`trace_clock`).
#![no_std]

extern crate alloc;

pub mod payload;
pub mod per_cpu;

#[cfg(target_os = "none")]
pub mod clock;
#[cfg(target_os = "none")]
pub mod trace_buffer;
