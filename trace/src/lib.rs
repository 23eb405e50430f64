//! Tracing as a user sees it, above the mechanism (`ftrace`) and the ring
//! buffer (`ring_buffer`): Linux's `kernel/trace/trace*.c` in small.
//!
//! - **trace arrays** ([`array`](mod@array)): the top level and every instance, each
//!   with its buffer, tracer, options and filters;
//! - **tracers** (`tracers`): `nop`, `function`, `function_graph`, the
//!   function commands and the stack tracer; the function profiler
//!   ([`profile`]);
//! - **events** ([`events`]): the records' layouts, the scheduler's
//!   events, synthetic events, filters, triggers and histograms;
//! - **output** ([`output`]): `cat trace` and `trace_pipe` in Linux's
//!   formats; **export** ([`export`]): the stream the host reads;
//! - the task names traces show ([`cmdlines`]) and `trace_printk!`
//!   (`printk`).
//!
//! The logic half builds anywhere and is unit tested on the host; the rest
//! exists only in the kernel build.
#![no_std]
// Unsafe stays in the crates that own the memory; the few modules here
// that need it say why where they are declared.
#![deny(unsafe_code)]

extern crate alloc;

pub mod array;
pub mod cmdlines;
pub mod events;
pub mod export;
pub mod output;
pub mod profile;

#[cfg(target_os = "none")]
pub mod printk;
#[cfg(target_os = "none")]
pub mod stack_trace;
#[cfg(target_os = "none")]
pub mod task_names;
#[cfg(target_os = "none")]
pub mod tracers;

/// Starts the trace arrays at boot, after the mechanism (`ftrace::init`):
/// the trace clock, the top level's buffers, the arrays.
#[cfg(target_os = "none")]
pub fn init() {
    ring_buffer::clock::init();
    ring_buffer::trace_buffer::init(arch::smp::possible_cpus());
    array::instances::init();
}
