//! Trace events: the typed records the tracers and the kernel write into
//! the ring buffer, and what tracefs lets a user do with them.
//!
//! - [`record`]: the records' layouts (the common header, the function,
//!   graph, stack, print and scheduler records) and their `format` text;
//! - `sched`: the scheduler's events and the task start/exit hooks;
//! - [`synth`]: synthetic events, defined at run time;
//! - `state`, `arrays`: each event's switches, filter and triggers, in the
//!   top level and in instances;
//! - [`filter`]: the filter language (`events/GROUP/EVENT/filter`);
//! - [`trigger`]: event triggers (`events/GROUP/EVENT/trigger`);
//! - [`hist`]: histogram triggers and their inter-event variables;
//! - `pid`: `set_event_pid` and `set_event_notrace_pid`.

pub mod filter;
pub mod hist;
pub mod record;
pub mod synth;
pub mod trigger;

#[cfg(target_os = "none")]
// unsafe: an event's per-array state, made lazily by a compare-and-swap
// and freed after a grace period, read by tracing code without a lock.
#[allow(unsafe_code)]
pub mod arrays;
#[cfg(target_os = "none")]
pub mod pid;
#[cfg(target_os = "none")]
pub mod sched;
#[cfg(target_os = "none")]
pub mod state;
