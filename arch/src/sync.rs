//! Locks: a spin lock for what interrupts may share, and a sleeping mutex
//! for long critical sections in task context.

use alloc::collections::VecDeque;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

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

/// A lock whose waiters sleep (Linux's `mutex`): for long critical sections
/// in task context, such as changing what is traced. Waiters queue in
/// arrival order and the unlocker wakes the first; before the scheduler
/// runs (or outside task context) a waiter spins instead.
///
/// No lost wake-up: a waiter queues itself and re-checks the lock under the
/// queue's lock, and the scheduler's `block` returns at once when `wake`
/// came first.
pub struct Mutex<T> {
    locked: AtomicBool,
    waiters: SpinLock<VecDeque<usize>>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at
// a time (`locked`); T moves between tasks with it.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Mutex<T> {}

/// Holds a [`Mutex`]; unlocks and wakes the first waiter when dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    /// A mutex around `value`.
    pub const fn new(value: T) -> Self {
        Mutex { locked: AtomicBool::new(false), waiters: SpinLock::new(VecDeque::new()), value: UnsafeCell::new(value) }
    }

    fn try_acquire(&self) -> bool {
        self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// The lock if it is free now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.try_acquire().then_some(MutexGuard { mutex: self })
    }

    /// Waits (asleep, in task context) until the lock is free, and takes it.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        loop {
            if self.try_acquire() {
                return MutexGuard { mutex: self };
            }
            let me = crate::sched::current_task();
            if me == 0 {
                core::hint::spin_loop();
                continue;
            }
            {
                let mut waiters = self.waiters.lock();
                if self.try_acquire() {
                    return MutexGuard { mutex: self };
                }
                waiters.push_back(me);
            }
            crate::sched::block();
            // A wake-up meant for something else may have ended the sleep
            // early: leave the queue either way, then try again.
            self.waiters.lock().retain(|&task| task != me);
        }
    }
}

impl<T> Mutex<T> {
    /// Releases the lock whatever holds it.
    ///
    /// # Safety
    /// The holder is gone for good (its stack abandoned) and never touches
    /// the value again.
    pub unsafe fn force_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock: no other reference exists.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and the guard is borrowed mutably.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.locked.store(false, Ordering::Release);
        // Woken with the queue still locked: a waiter leaves the queue
        // under that lock before it can return (and exit), so the task
        // named here lives until `wake` is done with it. (Nothing takes a
        // queue's lock under the scheduler's.)
        let mut waiters = self.mutex.waiters.lock();
        if let Some(task) = waiters.pop_front() {
            crate::sched::wake(task);
        }
    }
}
