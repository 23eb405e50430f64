//! Tick counting shared by both timers.
//!
//! Each CPU's timer interrupts [`HZ`] times a second and calls `tick`: the
//! boot CPU's ticks count time ([`ticks`]), every CPU's drive the scheduler
//! (in interrupt context) and leave softirq-like work for interrupt exit,
//! which runs the one hook the kernel may install ([`set_tick_hook`]) in the
//! `Softirq` context with interrupts enabled (it must not block).

use core::sync::atomic::{AtomicU64, Ordering};

/// Timer interrupts per second.
pub const HZ: u64 = 1000;

static TICKS: AtomicU64 = AtomicU64::new(0);
static TICK_HOOK: crate::cell::AtomicFn<fn()> = crate::cell::AtomicFn::none();

/// Timer interrupts taken since boot.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// Installs `hook` as the tick's softirq-like work (replacing any earlier
/// one): interrupt exit runs it when a tick is pending (see the module
/// documentation).
pub fn set_tick_hook(hook: fn()) {
    TICK_HOOK.store(hook);
}

/// Called by the architecture's timer interrupt handler.
pub(crate) fn tick() {
    if crate::cpu::id() == 0 {
        TICKS.fetch_add(1, Ordering::Relaxed);
    }
    crate::percpu::this().softirq_pending.store(true, Ordering::Relaxed);
    crate::sched::tick();
}

/// Runs the tick hook (softirq-like work, see `crate::irq_exit::exit`).
pub(crate) fn run_tick_hook() {
    if let Some(hook) = TICK_HOOK.load() {
        hook();
    }
}
