//! The recursion guard: at most one tracing callback per CPU per context.
//!
//! A callback that calls a traced function would re-enter the tracer; an
//! interrupt arriving inside a callback must still be traced. So each CPU has
//! one bit per [`Context`](arch::context::Context): entering a callback sets
//! the current context's bit, and finding it already set means recursion (the
//! caller counts a miss and returns). Only the owning CPU touches its word and
//! interrupts nest strictly, so a plain load and store suffice: an interrupt
//! between them sets and clears its own bit before we resume.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

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

/// How many distinct recursion sites [`recursed_functions`] remembers.
pub const RECURSED_MAX: usize = 32;

static RECURSED: [(AtomicUsize, AtomicUsize); RECURSED_MAX] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; RECURSED_MAX];

/// Remembers that a callback recursed into function `ip` (called from
/// `parent_ip`), once per function, as Linux's `recursed_functions` does.
/// Lock-free and allocation-free: it runs on the traced path.
pub fn note_recursion(ip: usize, parent_ip: usize) {
    for (slot_ip, slot_parent) in &RECURSED {
        match slot_ip.compare_exchange(0, ip, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => {
                slot_parent.store(parent_ip, Ordering::Relaxed);
                return;
            }
            Err(existing) if existing == ip => return,
            Err(_) => {}
        }
    }
}

/// The functions recursion was caught in: (function, its caller).
pub fn recursed_functions() -> impl Iterator<Item = (usize, usize)> {
    RECURSED
        .iter()
        .map(|(ip, parent)| (ip.load(Ordering::Relaxed), parent.load(Ordering::Relaxed)))
        .take_while(|&(ip, _)| ip != 0)
}

/// Forgets the recorded recursion sites (`echo > recursed_functions`).
pub fn clear_recursed_functions() {
    for (ip, parent) in &RECURSED {
        ip.store(0, Ordering::Relaxed);
        parent.store(0, Ordering::Relaxed);
    }
}
