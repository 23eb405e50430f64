//! Preemption control: while this CPU's preempt count is above zero, the
//! scheduler does not switch tasks on it (interrupts still run). Spin locks
//! need nothing more: they mask interrupts, and a task is only ever
//! preempted from an interrupt.

use core::sync::atomic::Ordering;

use crate::irq::IrqGuard;
use crate::percpu;

/// Disables preemption on this CPU.
#[inline]
pub fn disable() {
    // Interrupts masked for the read-modify-write: an interrupt between the
    // read and the write could preempt and migrate us, and the write would
    // then land on another CPU's count.
    let _irq = IrqGuard::new();
    let count = &percpu::this().preempt_count;
    count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Enables preemption again (a reschedule waits for the next interrupt).
#[inline]
pub fn enable() {
    let _irq = IrqGuard::new();
    let count = &percpu::this().preempt_count;
    count.store(count.load(Ordering::Relaxed).saturating_sub(1), Ordering::Relaxed);
}

/// This CPU's preempt count.
#[inline]
pub fn count() -> u32 {
    percpu::this().preempt_count.load(Ordering::Relaxed)
}

/// Preemption stays disabled while the guard lives.
pub struct Guard(());

impl Guard {
    /// Disables preemption until dropped.
    pub fn new() -> Guard {
        disable();
        Guard(())
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        enable();
    }
}

/// Forgets a count an abandoned flow of control left (the test framework
/// resuming after an expected panic).
pub fn reset() {
    percpu::this().preempt_count.store(0, Ordering::Relaxed);
}
