//! The return hook: how a function's return becomes a call of a tracing
//! callback, for the function-graph API and for rethook.
//!
//! - [`retstack`]: the entry side (swap the return address for the return
//!   trampoline's) and the return side (call the handlers, give the real
//!   return address back);
//! - [`shadow`]: the per-task shadow return stack the two sides share
//!   (its layout is unit tested on the host);
//! - [`fgraph`]: the function-graph API (`register_graph` and friends)
//!   over the return hook, as Linux's `fgraph.c`;
//! - [`unwind`]: walking a call chain whose return addresses the hook may
//!   have replaced.

#[cfg(target_os = "none")]
pub mod fgraph;
#[cfg(target_os = "none")]
pub mod retstack;
// Its mutators are the return hook's (`retstack`), which only the kernel
// build has: elsewhere only the host tests use them.
#[cfg_attr(not(any(test, target_os = "none")), allow(dead_code))]
pub mod shadow;
#[cfg(target_os = "none")]
pub mod unwind;
