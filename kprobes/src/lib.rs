//! kprobes: a probe on (almost) any instruction of the kernel, with pre-
//! and post-handlers that see every register, and kretprobes.
//!
//! # Two ways in
//!
//! - **At a function's entry** (`SYM` or `SYM+0` of a function with an
//!   ftrace site) a probe is an ftrace ops asking for `SAVE_REGS`: the site
//!   calls the full-registers trampoline, no breakpoint is involved, and the
//!   function shows in `enabled_functions` (Linux's `KPROBES_ON_FTRACE`).
//! - **Anywhere else** the instruction is replaced by a breakpoint
//!   (`arch::kprobes`). At the trap the pre-handler runs, then the displaced
//!   instruction either runs out of line in a slot and traps again, or is
//!   simulated; then the post-handler runs and execution goes on after it.
//!   Where the architecture can (`arch::kprobes::BOOSTS`), a hit with no
//!   post-handler runs a copy that jumps back by itself: one trap, not two
//!   (after Linux's "boost").
//!   Probes at one address share its breakpoint (Linux's aggregate
//!   probes): each hit runs all their pre-handlers, the instruction once,
//!   then all their post-handlers.
//!
//! Breakpoints go in and out with the text patcher's cross-CPU protocol,
//! like ftrace sites.
//!
//! # Where probes may go
//!
//! [`probe::resolve`] accepts an address inside a function that has an
//! ftrace site (the kernel's own code), at an instruction boundary (decoded
//! from the function's start), not inside the site's own instructions past
//! its first, and an instruction the architecture can step or simulate
//! (`register_kprobe` also asks it whether the place is inside a sequence
//! a breakpoint would break: `arch::kprobes::check_context`).
//! Everything the probe machinery runs (the architecture crate: exception
//! entry and trampolines; the tracing crates; `core`) has no ftrace site,
//! so it is refused: that is the blacklist, by construction, that Linux
//! keeps with `NOKPROBE_SYMBOL`.
//!
//! # Recursion
//!
//! Handlers run with interrupts masked, one at a time per CPU, in a state
//! each CPU keeps ([`probe`]'s control block). A probe hit while a handler
//! runs on the same CPU is counted as missed, and its instruction runs
//! without handlers.
//!
//! # Kretprobes
//!
//! [`kretprobe`] puts a `SAVE_REGS` ops at the function's entry that hooks
//! the call's return on the shared return hook (`rethook`, full
//! registers), with per-call data words and at most `maxactive` calls
//! hooked at once; calls past that are counted in `nmissed`.
#![no_std]

extern crate alloc;

pub mod location;

#[cfg(target_os = "none")]
pub mod kretprobe;
#[cfg(target_os = "none")]
pub mod probe;

#[cfg(target_os = "none")]
pub use kretprobe::{register_kretprobe, Kretprobe, KretprobeConfig, RegisteredKretprobe};
pub use location::Location;
#[cfg(all(target_os = "none", feature = "test-hooks"))]
pub use probe::step_traps_here;
#[cfg(target_os = "none")]
pub use probe::{register_kprobe, Kprobe, KprobeConfig, KprobeError, RegisteredKprobe};
