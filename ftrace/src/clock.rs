//! The trace clock: nanoseconds since boot, from the cycle counter.
//!
//! `ns = (cycles - boot) * mult >> 32`, with `mult` computed once from the
//! counter's frequency, so a timestamp costs a counter read, a subtraction
//! and a multiplication.

use core::sync::atomic::{AtomicU64, Ordering};

static BOOT_CYCLES: AtomicU64 = AtomicU64::new(0);
static MULT: AtomicU64 = AtomicU64::new(0);
const SHIFT: u32 = 32;

/// Starts the clock at zero now.
pub fn init() {
    let hz = arch::timer::cycles_per_second().max(1);
    MULT.store(((1_000_000_000u128 << SHIFT) / u128::from(hz)) as u64, Ordering::Relaxed);
    BOOT_CYCLES.store(arch::timer::cycles(), Ordering::Relaxed);
}

/// Nanoseconds since [`init`].
#[inline(always)]
pub fn now_ns() -> u64 {
    cycles_to_ns(arch::timer::cycles().wrapping_sub(BOOT_CYCLES.load(Ordering::Relaxed)))
}

/// Converts a cycle count to nanoseconds.
#[inline(always)]
pub fn cycles_to_ns(cycles: u64) -> u64 {
    ((u128::from(cycles) * u128::from(MULT.load(Ordering::Relaxed))) >> SHIFT) as u64
}
