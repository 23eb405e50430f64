//! Interrupt masking with RAII guards, and what every interrupt does on its
//! way out.

use core::sync::atomic::Ordering;

use crate::context::{self, Context};
use crate::{cpu, percpu, preempt, sched, time};

/// Interrupts stay masked on this CPU while the guard lives; dropping it puts
/// the interrupt flag back as it was (so guards nest).
pub struct IrqGuard {
    was_enabled: bool,
}

impl IrqGuard {
    /// Masks interrupts, remembering whether they were enabled.
    #[inline(always)]
    pub fn new() -> Self {
        let was_enabled = cpu::interrupts_enabled();
        cpu::disable_interrupts();
        Self { was_enabled }
    }
}

impl Default for IrqGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for IrqGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.was_enabled {
            cpu::enable_interrupts();
        }
    }
}

/// Runs `f` with interrupts masked.
#[inline(always)]
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let _guard = IrqGuard::new();
    f()
}

/// The end of every hardware interrupt, after its handler, interrupts still
/// masked. If the interrupt came from a task running with interrupts
/// enabled (not from another handler, nor from code that masked them):
///
/// 1. runs the softirq-like work the timer left pending (the tick hook), in
///    the `Softirq` context with interrupts enabled, as Linux's `irq_exit`
///    runs softirqs;
/// 2. switches tasks if a reschedule is pending and preemption is enabled.
pub(crate) fn exit(previous: Context, interrupted_with_interrupts_on: bool) {
    if previous != Context::Normal || !interrupted_with_interrupts_on {
        return;
    }
    if percpu::this().softirq_pending.swap(false, Ordering::Relaxed) {
        let outer = context::enter(Context::Softirq);
        cpu::enable_interrupts();
        time::run_tick_hook();
        cpu::disable_interrupts();
        context::leave(outer);
    }
    if preempt::count() == 0 && percpu::need_resched() {
        sched::preempt();
    }
}
