//! Locks for code that interrupts may share.

use crate::irq::IrqGuard;

/// A spin lock that masks interrupts on this CPU while held (Linux's
/// `spin_lock_irqsave`): an interrupt handler taking it can never spin on a
/// holder it interrupted, and the holder is never preempted. Keep the
/// critical sections short.
pub struct SpinLock<T> {
    inner: spin::Mutex<T>,
}

/// Holds a [`SpinLock`]; unlocks, then restores the interrupt flag, when
/// dropped.
pub struct SpinGuard<'a, T> {
    // Field order is drop order: the lock is released before interrupts
    // come back.
    guard: spin::MutexGuard<'a, T>,
    _irq: IrqGuard,
}

impl<T> SpinLock<T> {
    /// A lock around `value`.
    pub const fn new(value: T) -> Self {
        SpinLock { inner: spin::Mutex::new(value) }
    }

    /// Masks interrupts, then spins until the lock is free.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let irq = IrqGuard::new();
        SpinGuard { guard: self.inner.lock(), _irq: irq }
    }

    /// The lock if it is free now, with interrupts masked while held.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        let irq = IrqGuard::new();
        self.inner.try_lock().map(|guard| SpinGuard { guard, _irq: irq })
    }
}

impl<T> core::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> core::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}
