//! Dynamic probe events, above the probes they ride on and the trace
//! layer they record into: Linux's `trace_probe.c`, `trace_fprobe.c` and
//! `trace_kprobe.c` in small.
//!
//! - [`definition`]: the language (`f:[GRP/]EVENT SYM[%return] [FETCHARGS]`,
//!   `p:`, `r:`), parsed and checked;
//! - [`layout`]: how an event's fetch args lie in its record;
//! - [`events`]: the defined events (`dynamic_events`, `kprobe_events`,
//!   `events/GRP/EVENT/...`, `kprobe_profile`), compiled against the
//!   registers their probe saves, and their traced path.
//!
//! The language and the layouts are architecture-neutral and host tested;
//! the events exist only in the kernel build.
#![no_std]

extern crate alloc;

pub mod definition;
pub mod layout;

#[cfg(target_os = "none")]
pub mod events;
