//! Kernel work for the timer's ticks: softirq-like work that interrupt exit
//! runs (`arch::irq`), in the `Softirq` context with interrupts enabled,
//! once for the ticks pending since it last ran. It is ordinary traced code,
//! so the tracer can be watched handling interrupt work.

use core::sync::atomic::{AtomicU64, Ordering};

static TICKS_SEEN: AtomicU64 = AtomicU64::new(0);

/// Runs at interrupt exit when a tick left work pending (see above).
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
