//! Wait queues: tasks sleeping until a condition holds.

use alloc::collections::VecDeque;
use alloc::sync::Arc;

use arch::sync::SpinLock;

use super::{block, current_arc, wake, Task};

/// Tasks waiting for something; whoever makes it happen wakes them.
pub struct WaitQueue {
    waiters: SpinLock<VecDeque<Arc<Task>>>,
}

impl WaitQueue {
    /// An empty queue.
    pub const fn new() -> WaitQueue {
        WaitQueue { waiters: SpinLock::new(VecDeque::new()) }
    }

    /// Sleeps until `condition()` holds (checked before sleeping and after
    /// every wake-up, so a wake-up between the check and the sleep is not
    /// lost). Spins if there is no scheduler yet.
    pub fn wait_until(&self, mut condition: impl FnMut() -> bool) {
        let Some(me) = current_arc() else {
            while !condition() {
                core::hint::spin_loop();
            }
            return;
        };
        loop {
            if condition() {
                return;
            }
            self.waiters.lock().push_back(me.clone());
            if condition() {
                self.remove(&me);
                return;
            }
            block();
            self.remove(&me);
        }
    }

    fn remove(&self, task: &Arc<Task>) {
        self.waiters.lock().retain(|waiter| !Arc::ptr_eq(waiter, task));
    }

    /// Wakes every waiter (each re-checks its condition).
    pub fn wake_all(&self) {
        let waiters: VecDeque<Arc<Task>> = core::mem::take(&mut *self.waiters.lock());
        for task in &waiters {
            wake(task);
        }
    }
}

impl Default for WaitQueue {
    fn default() -> Self {
        Self::new()
    }
}
