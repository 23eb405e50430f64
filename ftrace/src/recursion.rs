//! The recursion guard: at most one tracing callback per CPU per context.
//!
//! A callback that calls a traced function would re-enter the tracer; an
//! interrupt arriving inside a callback must still be traced. So each CPU has
//! one bit per [`Context`](arch::context::Context): entering a callback sets
//! the current context's bit, and finding it already set means recursion (the
//! caller counts a miss and returns). Only the owning CPU touches its word and
//! interrupts nest strictly, so a plain load and store suffice: an interrupt
//! between them sets and clears its own bit before we resume.

use core::sync::atomic::{AtomicU32, Ordering};

use arch::{context, cpu, MAX_CPUS};

static ACTIVE: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// Proof that this CPU entered a callback in the current context; clears the
/// bit when dropped.
pub struct RecursionGuard {
    bit: u32,
}

/// Enters a callback, or `None` if this context is already inside one.
#[inline(always)]
pub fn try_enter() -> Option<RecursionGuard> {
    let bit = 1 << context::current() as u32;
    let word = &ACTIVE[cpu::id()];
    let active = word.load(Ordering::Relaxed);
    if active & bit != 0 {
        return None;
    }
    word.store(active | bit, Ordering::Relaxed);
    Some(RecursionGuard { bit })
}

impl Drop for RecursionGuard {
    #[inline(always)]
    fn drop(&mut self) {
        let word = &ACTIVE[cpu::id()];
        word.store(word.load(Ordering::Relaxed) & !self.bit, Ordering::Relaxed);
    }
}

/// Whether this CPU is inside a callback in any context.
pub fn in_callback() -> bool {
    ACTIVE[cpu::id()].load(Ordering::Relaxed) != 0
}

/// Forgets guards held by an abandoned stack (the test framework resuming
/// after an expected panic inside a callback).
pub fn reset() {
    ACTIVE[cpu::id()].store(0, Ordering::Relaxed);
}
