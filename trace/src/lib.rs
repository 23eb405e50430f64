//! Tracing as a user sees it, above the mechanism (`ftrace`) and the ring
//! buffer (`ring_buffer`): Linux's `kernel/trace/trace*.c` in small.
//!
//! - **trace arrays** ([`instance`]): the top level and every instance,
//!   each with its buffer, tracer, options and filters;
//! - **tracers** ([`tracer`]): `nop`, `function`, `function_graph`, and
//!   `cat trace` / `trace_pipe`; the stack tracer ([`stack_tracer`]) and
//!   the function profiler ([`profiler`]);
//! - **events**: records ([`event`]), the scheduler's ([`sched`]),
//!   synthetic ones ([`synth`]), per-array enables ([`event_arrays`]),
//!   filters ([`event_filter`]), triggers ([`event_trigger`]) and
//!   histograms ([`hist`]);
//! - **output** ([`output`], [`print_modes`]) and export ([`export`],
//!   [`stream`]).
//!
//! The logic half builds anywhere and is unit tested on the host; the rest
//! exists only in the kernel build.
#![no_std]

extern crate alloc;

pub mod cmdlines;
pub mod error_log;
pub mod event;
pub mod event_filter;
pub mod event_trigger;
pub mod hist;
pub mod hist_expr;
pub mod output;
pub mod pid_list;
pub mod print_modes;
pub mod profile;
pub mod stream;
pub mod synth;

#[cfg(target_os = "none")]
pub mod event_arrays;
#[cfg(target_os = "none")]
pub mod event_pid;
#[cfg(target_os = "none")]
pub mod event_state;
#[cfg(target_os = "none")]
pub mod export;
#[cfg(target_os = "none")]
pub mod func_probe;
#[cfg(target_os = "none")]
pub mod instance;
#[cfg(target_os = "none")]
pub mod printk;
#[cfg(target_os = "none")]
pub mod profiler;
#[cfg(target_os = "none")]
pub mod sched;
#[cfg(target_os = "none")]
pub mod stack_tracer;
#[cfg(target_os = "none")]
pub mod tracer;

/// Starts the trace arrays at boot, after the mechanism (`ftrace::init`):
/// the trace clock, the top level's buffers, the arrays.
#[cfg(target_os = "none")]
pub fn init() {
    ring_buffer::clock::init();
    ring_buffer::trace_buffer::init(arch::smp::possible_cpus());
    instance::init();
}
