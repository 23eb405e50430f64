//! Trace arrays: the top level of tracefs and its instances, each with its
//! buffer, tracer, options and filters (Linux's `struct trace_array`).
//!
//! - `trace_array`: one array, what it owns and its switches;
//! - `options`: the `trace_options` flags every array has;
//! - `instances`: the top level and the `instances/` directory;
//! - [`error_log`]: the refused commands each array keeps;
//! - [`pid_list`]: the pid lists the function and event pid filters share.

pub mod error_log;
pub mod pid_list;

#[cfg(target_os = "none")]
// unsafe: an instance is leaked at `mkdir` and freed by its deferred
// free after `rmdir`'s grace period; tracing code finds it by slot.
#[allow(unsafe_code)]
pub mod instances;
#[cfg(target_os = "none")]
pub mod options;
#[cfg(target_os = "none")]
// unsafe: `buffer_made`, the tracers' read of a buffer made before
// their ops could be registered, without the `Once` check.
#[allow(unsafe_code)]
pub mod trace_array;
