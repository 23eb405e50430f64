//! Tick counting shared by both timers.
//!
//! Each architecture programs its own periodic interrupt at [`HZ`] and calls
//! [`tick`] from the interrupt; the kernel may install one hook that runs on
//! every tick (in interrupt context, so it must not block or allocate).

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
    TICKS.fetch_add(1, Ordering::Relaxed);
    let hook = TICK_HOOK.load(Ordering::Acquire);
    if hook != 0 {
        // SAFETY: the only non-zero values stored are `fn()` pointers
        // (`set_tick_hook`), and function pointers round-trip through usize.
        let hook: fn() = unsafe { core::mem::transmute::<usize, fn()>(hook) };
        hook();
    }
}
