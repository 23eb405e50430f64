//! The function-tracing mechanism, the Linux ftrace core in small: what
//! turns a compiler's patchable entry into a call of a tracing callback,
//! and a function's return into a call of another. Nothing here records or
//! prints: the ring buffer is the `ring_buffer` crate, the tracers and
//! events above both are the `trace` crate.
//!
//! From the machine up (as Linux's `kernel/trace/ftrace.c` and `fgraph.c`):
//!
//! - **patch sites** ([`patch`]): every function compiled with a
//!   patchable entry is a site; its entry remembers what its bytes hold, so
//!   every patch is verified before it is written;
//! - **ops** ([`ops`], [`FtraceOps`]): a callback, its flags and filters; a
//!   site with one ops calls it through the per-site literal with no list
//!   walk;
//! - **the registry** ([`registry`]: [`register`], [`set_filter`], ...):
//!   recomputes the plan ([`patch::plan`]) and patches exactly the sites a
//!   change affects, in one batch;
//! - **recursion** ([`recursion`]) and **per-task state** ([`task`]);
//! - **the return hook** ([`graph`]): one shadow return stack per task and
//!   one pair of return trampolines per architecture (sparse and full
//!   registers), under both the function-graph API ([`graph::fgraph`]) and
//!   rethook (the `rethook` crate);
//! - **lifetimes** ([`deferred`]): what tracing code may still be using is
//!   freed only after a grace period;
//! - **names** ([`symbols`]) and C numbers ([`number`]).
//!
//! The logic half (symbol table format, globs and filters, the plan, the
//! shadow stack's layout) builds anywhere and is unit tested on the host.
//! The machine half exists only in the kernel build, where it reaches the
//! hardware through the `arch` crate. Nothing here is compiled with
//! patchable entries: the tracer never traces itself.
#![no_std]

extern crate alloc;

/// The object that holds field `$field` at `$ptr`: `$ptr` stepped back by
/// the field's offset, as a `*const $Type`. Sound to dereference only if
/// `$ptr` was made from a pointer to that whole object (not from a
/// reference to the field alone), and the object is alive.
#[macro_export]
macro_rules! container_of {
    ($ptr:expr, $Type:ty, $field:ident) => {
        ($ptr as *const _ as *const u8).wrapping_sub(::core::mem::offset_of!($Type, $field)) as *const $Type
    };
}

/// The inverse of [`container_of!`]: field `$field` of the `$Type` at
/// `$ptr`, as a raw pointer made from the pointer to the whole object (so
/// `container_of!` can step back from it to the whole object again).
#[macro_export]
macro_rules! field_of {
    ($ptr:expr, $Type:ty, $field:ident) => {
        ($ptr as *const $Type).wrapping_byte_add(::core::mem::offset_of!($Type, $field)) as *const _
    };
}

pub mod graph;
pub mod number;
pub mod patch;
pub mod symbols;

#[cfg(target_os = "none")]
pub mod deferred;
#[cfg(target_os = "none")]
pub mod ops;
#[cfg(target_os = "none")]
pub mod recursion;
#[cfg(target_os = "none")]
pub mod registry;
#[cfg(target_os = "none")]
pub mod task;

#[cfg(target_os = "none")]
pub use arch::ftrace_abi::{FtraceRegs, PtRegs, RegisterError, Saved, SavedRegs, Trampoline};
#[cfg(all(target_os = "none", feature = "test-hooks"))]
pub use ops::empty_literal;
#[cfg(target_os = "none")]
pub use ops::{Callback, FtraceFunc, FtraceOps, OpsFlags};
#[cfg(target_os = "none")]
pub use patch::sites::last_refusal;
#[cfg(all(target_os = "none", feature = "test-hooks"))]
pub use registry::return_to_service;
#[cfg(target_os = "none")]
pub use registry::{
    filter_names, for_each_site, is_enabled, is_registered, register, set_enabled, set_filter, set_filter_ips, site, total_info,
    unregister, update_stats, FilterKind, FtraceError, InitInfo, SiteInfo, TotalInfo, UpdateStats,
};
pub use symbols::glob::{FilterMode, FunctionFilterError};

/// Starts function tracing at boot (after the scheduler gave the boot CPU a
/// task, and before the other CPUs start): checks the symbol and site
/// tables and builds the site table (preparing each site where the
/// architecture needs it). The trace buffers and arrays are the `trace`
/// crate's to start.
#[cfg(target_os = "none")]
pub fn init() -> Result<InitInfo, FtraceError> {
    registry::init()
}
