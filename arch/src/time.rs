//! Tick counting shared by both timers.
//!
//! Each CPU's timer interrupts [`HZ`] times a second and calls `tick`: the
//! boot CPU's ticks count time ([`ticks`]), every CPU's drive the scheduler
//! (in interrupt context) and leave softirq-like work for interrupt exit,
//! which runs the one hook the kernel may install ([`set_tick_hook`]) in the
//! `Softirq` context with interrupts enabled (it must not block).

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Timer interrupts per second.
pub const HZ: u64 = 1000;

static TICKS: AtomicU64 = AtomicU64::new(0);
static TICK_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Timer interrupts taken since boot.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// Installs `hook` to run on every timer interrupt (replacing any earlier one).
pub fn set_tick_hook(hook: fn()) {
    TICK_HOOK.store(hook as usize, Ordering::Release);
}

/// Called by the architecture's timer interrupt handler.
pub(crate) fn tick() {
    if crate::cpu::id() == 0 {
        TICKS.fetch_add(1, Ordering::Relaxed);
    }
    crate::percpu::this().softirq_pending.store(true, Ordering::Relaxed);
    crate::sched::tick();
}

/// Runs the tick hook (softirq-like work, see `crate::irq::exit`).
pub(crate) fn run_tick_hook() {
    let hook = TICK_HOOK.load(Ordering::Acquire);
    if hook != 0 {
        // SAFETY: the only non-zero values stored are `fn()` pointers
        // (`set_tick_hook`), and function pointers round-trip through usize.
        let hook: fn() = unsafe { core::mem::transmute::<usize, fn()>(hook) };
        hook();
    }
}
