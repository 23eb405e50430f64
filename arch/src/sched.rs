//! What the kernel's scheduler provides to the layers under it (this
//! crate's sleeping locks and interrupt exit, the tracer's grace periods):
//! a few functions the kernel defines, linked by name as `kernel_main` is.
//! Before the scheduler runs, there is no task: [`current_task`] is 0 and
//! callers fall back to spinning.

extern "Rust" {
    fn kernel_sched_current() -> usize;
    fn kernel_sched_block();
    fn kernel_sched_wake(task: usize);
    fn kernel_sched_yield();
    fn kernel_sched_preempt();
    fn kernel_sched_tick();
}

/// The running task (an opaque non-zero handle), or 0 before the scheduler
/// runs and in interrupt context.
pub fn current_task() -> usize {
    if crate::context::current() != crate::context::Context::Normal {
        return 0;
    }
    // SAFETY: defined by the kernel with this signature; callable anywhere.
    unsafe { kernel_sched_current() }
}

/// Puts the current task to sleep until [`wake`] names it; returns at once
/// if it was named since it last slept. Task context only.
pub fn block() {
    // SAFETY: as above; the kernel checks the context itself.
    unsafe { kernel_sched_block() }
}

/// Wakes `task` (from [`current_task`]), or makes its next [`block`] return
/// at once. Any context.
pub fn wake(task: usize) {
    // SAFETY: as above.
    unsafe { kernel_sched_wake(task) }
}

/// Lets other runnable tasks run first (task context), or spins once.
pub fn yield_now() {
    if current_task() == 0 {
        core::hint::spin_loop();
        return;
    }
    // SAFETY: as above.
    unsafe { kernel_sched_yield() }
}

/// Switches tasks from interrupt exit (see `crate::irq_exit::exit`).
pub(crate) fn preempt() {
    // SAFETY: as above; called with interrupts masked, in normal context,
    // at the end of an interrupt that came from a preemptible task.
    unsafe { kernel_sched_preempt() }
}

/// The scheduler's share of the timer interrupt (interrupt context).
pub(crate) fn tick() {
    // SAFETY: as above.
    unsafe { kernel_sched_tick() }
}
