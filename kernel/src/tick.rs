//! Kernel work on every timer tick, in interrupt context. It is ordinary
//! traced code, so the tracer can be watched handling interrupts.

use core::sync::atomic::{AtomicU64, Ordering};

static TICKS_SEEN: AtomicU64 = AtomicU64::new(0);

/// Runs on every timer interrupt.
#[inline(never)]
pub fn on_tick() {
    TICKS_SEEN.fetch_add(1, Ordering::Relaxed);
}

/// Ticks [`on_tick`] has seen.
#[cfg_attr(not(test), allow(dead_code))]
pub fn seen() -> u64 {
    TICKS_SEEN.load(Ordering::Relaxed)
}

/// Installs [`on_tick`] as the timer's hook.
pub fn init() {
    arch::time::set_tick_hook(on_tick);
}
