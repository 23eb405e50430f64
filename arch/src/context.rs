//! Which context each CPU is running in: normal code, a hardware interrupt, or
//! a synchronous exception. Exception entry switches it and switches it back;
//! the tracer's recursion guard keeps one bit per context, so a traced
//! function interrupted by a traced interrupt handler is not mistaken for
//! recursion.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::{cpu, MAX_CPUS};

/// An execution context, innermost first in priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Context {
    Normal = 0,
    Irq = 1,
    Exception = 2,
}

impl Context {
    /// How many contexts there are (for per-context arrays).
    pub const COUNT: usize = 3;

    fn from_u8(value: u8) -> Context {
        match value {
            1 => Context::Irq,
            2 => Context::Exception,
            _ => Context::Normal,
        }
    }
}

static CURRENT: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(Context::Normal as u8) }; MAX_CPUS];

/// The context this CPU is running in.
#[inline(always)]
pub fn current() -> Context {
    Context::from_u8(CURRENT[cpu::id()].load(Ordering::Relaxed))
}

/// Called by exception entry: switches to `context`, returns the previous one.
#[inline(always)]
pub(crate) fn enter(context: Context) -> Context {
    Context::from_u8(CURRENT[cpu::id()].swap(context as u8, Ordering::Relaxed))
}

/// Called by exception exit with what [`enter`] returned.
#[inline(always)]
pub(crate) fn leave(previous: Context) {
    CURRENT[cpu::id()].store(previous as u8, Ordering::Relaxed);
}

/// Forgets any context an abandoned exception handler left behind (the test
/// framework resumes in normal context after an expected panic).
pub fn reset() {
    CURRENT[cpu::id()].store(Context::Normal as u8, Ordering::Relaxed);
}
