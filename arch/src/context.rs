//! Which context each CPU is running in: a task, softirq-like deferred work,
//! a hardware interrupt, or an NMI-like synchronous exception (a breakpoint
//! or a fault, which can arrive anywhere, interrupt handlers included).
//! Exception entry switches it and switches it back; the tracer keeps its
//! recursion bits and graph markers per context (as Linux's
//! `trace_recursion` does), so a traced function interrupted by a traced
//! interrupt handler is not mistaken for recursion.

/// An execution context, from the least to the most urgent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Context {
    /// A task (normal kernel code).
    Normal = 0,
    /// Deferred interrupt work run with interrupts enabled (the tick's
    /// bottom half).
    Softirq = 1,
    /// A hardware interrupt handler.
    Irq = 2,
    /// A synchronous exception (breakpoint, fault): it may interrupt any
    /// other context, as an NMI may.
    Nmi = 3,
}

impl Context {
    /// How many contexts there are (for per-context arrays).
    pub const COUNT: usize = 4;

    /// The context a per-CPU context byte names. The byte only ever holds
    /// a `Context as u8` (`enter`, `leave`, `reset`), so its two low bits
    /// are the whole value: masking them is all the decoding (a match with
    /// a fallback would cost the traced path a compare and a move on every
    /// recursion check and event header).
    #[inline(always)]
    pub(crate) fn from_u8(value: u8) -> Context {
        match value & 3 {
            0 => Context::Normal,
            1 => Context::Softirq,
            2 => Context::Irq,
            _ => Context::Nmi,
        }
    }
}

/// The context this CPU is running in (one instruction: safe where the
/// task can be preempted).
#[inline(always)]
pub fn current() -> Context {
    Context::from_u8(crate::cpu::context_byte())
}

/// Called by exception entry and by softirq-like work: switches to
/// `context`, returns the previous one.
///
/// The read and the write are two instructions, and need not be one: an
/// interrupt between them leaves the context as it found it (interrupts
/// nest), and a task preempted between them was in normal context and
/// writes the CPU it runs on, as it should.
#[inline(always)]
pub(crate) fn enter(context: Context) -> Context {
    let previous = current();
    crate::cpu::set_context_byte(context as u8);
    previous
}

/// Called on the way out with what [`enter`] returned.
#[inline(always)]
pub(crate) fn leave(previous: Context) {
    crate::cpu::set_context_byte(previous as u8);
}

/// Forgets any context an abandoned exception handler left behind (the test
/// framework resumes in normal context after an expected panic).
pub fn reset() {
    crate::cpu::set_context_byte(Context::Normal as u8);
}
