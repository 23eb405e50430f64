//! The recursion guard: at most one tracing callback of each kind per task
//! per context.
//!
//! A callback that calls a traced function would re-enter the tracer; an
//! interrupt arriving inside a callback must still be traced. So each task
//! has, per [`Context`](arch::context::Context), two bits (Linux's
//! `trace_recursion` banks):
//!
//! - the **entry** bit, held while entry callbacks run ([`try_enter`]);
//! - the **return** bit, held while return callbacks run
//!   ([`try_enter_return`]).
//!
//! An entry callback may not start while either bit of its context is held:
//! nothing called from inside a callback is hooked. A return callback may
//! not start while the return bit is held; it *may* start inside an entry
//! callback, because the call returning was hooked by an ops without the
//! guard (the API allows it) and its return must not be lost. A return that
//! cannot run its callbacks is counted as missed by its users and releases
//! what its entry reserved (see `crate::graph::retstack`).
//!
//! Only the owning task (and the interrupts nesting on it) touch its bits,
//! and interrupts nest strictly, so a plain load and store suffice: an
//! interrupt between them sets and clears its own bit before we resume.

use core::sync::atomic::{AtomicUsize, Ordering};

use arch::context;

use crate::task::{self, TaskTrace};

const RETURN_SHIFT: u32 = 8;

/// Proof that the current task entered a callback in the current context;
/// clears the bit when dropped.
pub struct RecursionGuard {
    task: &'static TaskTrace,
    bit: u32,
}

#[inline(always)]
fn context_bit() -> u32 {
    1 << context::current() as u32
}

#[inline(always)]
fn acquire(task: &'static TaskTrace, blocked_by: u32, bit: u32) -> Option<RecursionGuard> {
    let active = task.recursion.load(Ordering::Relaxed);
    if active & blocked_by != 0 {
        return None;
    }
    task.recursion.store(active | bit, Ordering::Relaxed);
    Some(RecursionGuard { task, bit })
}

/// Enters entry callbacks, or `None` if this context is already inside a
/// callback of either kind.
#[inline(always)]
pub fn try_enter() -> Option<RecursionGuard> {
    let bit = context_bit();
    acquire(task::current(), bit | bit << RETURN_SHIFT, bit)
}

/// Enters return callbacks for `task` (the current one), or `None` if this
/// context is already running return callbacks.
#[inline(always)]
pub fn try_enter_return(task: &'static TaskTrace) -> Option<RecursionGuard> {
    let bit = context_bit() << RETURN_SHIFT;
    acquire(task, bit, bit)
}

impl Drop for RecursionGuard {
    #[inline(always)]
    fn drop(&mut self) {
        let word = &self.task.recursion;
        word.store(word.load(Ordering::Relaxed) & !self.bit, Ordering::Relaxed);
    }
}

/// Whether the current task is inside a callback in any context.
pub fn in_callback() -> bool {
    task::current().recursion.load(Ordering::Relaxed) != 0
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
