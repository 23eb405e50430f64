//! Single-step debug exceptions: an exception after every instruction of a
//! chosen stretch of code, for the tests that torture live patching (test
//! builds only: the shipped kernel neither steps nor checks for a step).
//!
//! # Design
//!
//! Stepping belongs to one context. [`begin`] turns it on in the code that
//! calls it and [`end`] turns it off: on x86_64 the trap flag (RFLAGS.TF),
//! on aarch64 the debug mask (PSTATE.D cleared, with MDSCR_EL1.SS and KDE
//! set on every CPU when it comes up, so that only a context with debug
//! exceptions unmasked steps). Every exception and interrupt entry clears
//! TF or sets D, and the interrupted context's flag is saved with it: a
//! stepped task that is interrupted, preempted or moved to another CPU steps
//! again when it resumes, its handlers never step, and no other task does.
//! (A stepped task must not switch away by itself: the flag is the CPU's,
//! and the next task would step.)
//!
//! After each instruction the CPU takes a debug exception and the
//! architecture's dispatcher calls `handle`, which runs the hook a test
//! installed ([`set_hook`]) and then checks what every exception must leave
//! alone: the interrupted context comes back exactly (every field of its
//! `PtRegs`), and so does the word at its stack pointer. A hook may ask for
//! a reschedule ([`StepAction::Reschedule`]); `handle` then switches tasks
//! as a timer interrupt's exit would, only where the interrupted context
//! could be preempted (the hook is told whether it can), so a test can move
//! a task to another CPU at any instruction where an interrupt could.
//!
//! # Failure modes
//!
//! Nothing here panics (the handler runs inside anything, the tracing
//! paths included): a context or stack word that changed is counted and the
//! first one kept ([`violations`]), for the test to assert on. A debug
//! exception with no hook installed is counted as stray and resumes.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::cell::AtomicFn;
use crate::context::{self, Context};
use crate::regs::PtRegs;

pub use crate::imp::step::{begin, end};

/// What a hook asks of the step handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepAction {
    /// Resume the stepped context.
    Continue,
    /// Switch tasks before resuming (where the context may be preempted),
    /// as a timer interrupt's exit would.
    Reschedule,
}

/// A step hook: the stepped context's registers, after one instruction,
/// and whether that context may be preempted there (a
/// [`StepAction::Reschedule`] is honoured only then: interrupts and
/// preemption were enabled in a task). It must not change the registers,
/// take a lock the stepped code may hold, or allocate.
pub type StepHook = fn(regs: &PtRegs, preemptible: bool) -> StepAction;

static HOOK: AtomicFn<StepHook> = AtomicFn::none();
static STEPS: AtomicU64 = AtomicU64::new(0);
static STRAY: AtomicU64 = AtomicU64::new(0);
static RESCHEDULES: AtomicU64 = AtomicU64::new(0);
static VIOLATIONS: AtomicU64 = AtomicU64::new(0);
/// The first violation: the instruction pointer and stack pointer it was
/// seen at, and what changed (a [`Violation`] as a number).
static FIRST_VIOLATION: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];

/// What a step handler found changed across its own run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A register of the interrupted context.
    Context = 1,
    /// The word at the interrupted stack pointer.
    StackWord = 2,
}

/// Installs (or, with `None`, removes) the hook every step runs.
pub fn set_hook(hook: Option<StepHook>) {
    match hook {
        Some(hook) => HOOK.store(hook),
        None => HOOK.clear(),
    }
}

/// Counters since boot: steps taken, steps with no hook (stray),
/// reschedules done, violations found.
pub fn counters() -> (u64, u64, u64, u64) {
    let load = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
    (load(&STEPS), load(&STRAY), load(&RESCHEDULES), load(&VIOLATIONS))
}

/// The first violation seen since boot: (ip, sp, what changed).
pub fn first_violation() -> Option<(usize, usize, Violation)> {
    let what = match FIRST_VIOLATION[2].load(Ordering::SeqCst) {
        1 => Violation::Context,
        2 => Violation::StackWord,
        _ => return None,
    };
    Some((FIRST_VIOLATION[0].load(Ordering::SeqCst), FIRST_VIOLATION[1].load(Ordering::SeqCst), what))
}

/// How many violations were found since boot (see [`first_violation`]).
pub fn violations() -> u64 {
    VIOLATIONS.load(Ordering::SeqCst)
}

fn violation(regs: &PtRegs, what: Violation) {
    if VIOLATIONS.fetch_add(1, Ordering::SeqCst) == 0 {
        FIRST_VIOLATION[0].store(regs.ip(), Ordering::SeqCst);
        FIRST_VIOLATION[1].store(regs.sp(), Ordering::SeqCst);
        FIRST_VIOLATION[2].store(what as usize, Ordering::SeqCst);
    }
}

/// Whether a step handler may switch tasks before resuming `regs` (asked
/// before the handler enters its own context): the interrupted code ran a
/// task with interrupts and preemption enabled (what a timer interrupt's
/// exit asks before it preempts).
fn may_reschedule(regs: &PtRegs) -> bool {
    context::current() == Context::Normal && regs.interrupts_were_enabled() && crate::preempt::count() == 0
}

/// The debug exception of a step, from the architecture's dispatcher, with
/// interrupts masked, before it enters any context of its own.
pub(crate) fn handle(regs: &mut PtRegs) {
    STEPS.fetch_add(1, Ordering::Relaxed);
    let Some(hook) = HOOK.load() else {
        STRAY.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let before = *regs;
    let word = crate::fault::read_u64_nofault(regs.sp());
    let preemptible = may_reschedule(regs);
    let previous = context::enter(Context::Nmi);
    let action = hook(regs, preemptible);
    context::leave(previous);
    if action == StepAction::Reschedule && preemptible {
        RESCHEDULES.fetch_add(1, Ordering::Relaxed);
        crate::sched::preempt();
    }
    if *regs != before {
        violation(&before, Violation::Context);
    }
    if crate::fault::read_u64_nofault(regs.sp()) != word {
        violation(&before, Violation::StackWord);
    }
}
