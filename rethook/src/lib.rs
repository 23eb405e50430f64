//! rethook: run a handler when a hooked call returns.
//!
//! Linux has two ways to hijack a function's return, the function-graph
//! return stack and rethook, and its developers want them to be one. Here
//! they are: a rethook is one more user of ftrace's shadow return stack
//! ([`ftrace::graph::retstack`]), next to the function-graph users, with the same
//! return trampoline. One difference stays visible: a rethook's calls do not
//! count toward the function-graph depth (`retstack::Depth::Uncounted`), as
//! Linux's kretprobes, on rethook, leave `function_graph`'s depth alone.
//!
//! A [`Rethook`] owns a pool of nodes allocated when it is created, so the
//! traced path never allocates or locks: an entry callback takes a node
//! ([`Rethook::try_get`], from per-CPU rings, see [`pool`]), fills its data
//! words, and hooks the current call with it ([`RethookNode::hook`]). When the
//! call returns, the handler runs with the node, the rethook's private data,
//! the real return address and the return registers: by default only the
//! sparse return save (the return-value registers, the frame and stack
//! pointers: a light `FtraceRegs`); a [`RethookMode::FullRegs`] rethook
//! gets a full `PtRegs` through `fregs.regs()`, for kretprobe-style users.
//! The node then goes back to the pool. An empty pool counts a miss and the call runs
//! unhooked. A node hooks for the rethook it came from, and a node taken but
//! not hooked (dropped, or refused by `hook`) goes back to its pool.
//!
//! # Stopping and freeing while calls are in flight
//!
//! [`Rethook::stop`] makes `try_get` fail and turns the handler off; hooked
//! calls still return normally. A rethook counts references: one for the
//! handle, one per node out of the pool. Dropping the handle stops it and
//! lets go of the handle's reference (after a grace period); each return
//! puts its node back and lets go of the node's. If the handle's goes last,
//! the rethook is freed right there (normal context, the grace period
//! over); if a return's goes last, it queues the free (`ftrace::deferred`),
//! which runs in normal context after another grace period. A return that cannot run the handler (inside another return
//! callback) counts a miss and releases its node the same way. A call whose
//! task exits never returns: its node is released when the task is, and no
//! miss is counted (as Linux's `rethook_flush_task`). The return path never
//! allocates or frees.
#![no_std]

extern crate alloc;

#[cfg(target_os = "none")]
mod hook;
pub mod pool;

#[cfg(target_os = "none")]
pub use hook::*;
