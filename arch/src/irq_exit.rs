//! What every hardware interrupt does on its way out (Linux's `irq_exit`):
//! the tick's softirq-like work, then a task switch if one is due.

use core::sync::atomic::Ordering;

use crate::context::{self, Context};
use crate::{cpu, percpu, preempt, sched, time};

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
