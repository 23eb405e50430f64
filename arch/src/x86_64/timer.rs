//! The periodic tick and the cycle counter.
//!
//! At boot the 8254 PIT (channel 0, through the 8259 PIC) ticks on the boot
//! CPU, long enough to calibrate the TSC and the local APIC timer against
//! it; then every CPU's own APIC timer ticks (the PIT is masked).

use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};

use super::pic;
use crate::time::{ticks, HZ};
use x86_64::instructions::port::Port;

/// The PIT's IRQ line.
pub(crate) const PIT_IRQ: u8 = 0;

const PIT_INPUT_HZ: u64 = 1_193_182;
const PIT_CHANNEL0: u16 = 0x40;
const PIT_COMMAND: u16 = 0x43;

static CYCLES_PER_SECOND: AtomicU64 = AtomicU64::new(0);

/// Programs the PIT to interrupt [`HZ`] times a second and unmasks its IRQ.
pub(crate) fn init() {
    let divisor = (PIT_INPUT_HZ / HZ) as u16;
    // SAFETY: the PIT ports belong to this driver.
    unsafe {
        Port::<u8>::new(PIT_COMMAND).write(0x34); // channel 0, lo/hi byte, rate generator
        Port::<u8>::new(PIT_CHANNEL0).write(divisor as u8);
        Port::<u8>::new(PIT_CHANNEL0).write((divisor >> 8) as u8);
    }
    pic::init(1 << PIT_IRQ | 1 << super::console::IRQ);
}

/// Measures the TSC rate over the PIT's ticks. Needs interrupts enabled.
///
/// Over 100 ticks: each end of the window is a tick interrupt's arrival,
/// which QEMU can deliver late by a fraction of a millisecond; over 20
/// ticks that made the trace clock run some 5% slow.
pub(crate) fn calibrate() {
    const SAMPLE_TICKS: u64 = 100;
    let start_tick = ticks();
    while ticks() == start_tick {
        core::hint::spin_loop();
    }
    let (tick0, tsc0) = (ticks(), cycles());
    while ticks() < tick0 + SAMPLE_TICKS {
        core::hint::spin_loop();
    }
    let elapsed = cycles() - tsc0;
    CYCLES_PER_SECOND.store(elapsed * HZ / SAMPLE_TICKS, Ordering::Relaxed);
}

/// Moves the boot CPU's tick from the PIT to its local APIC timer, after
/// measuring that timer against the PIT. Interrupts enabled.
pub(crate) fn start_apic_timer() {
    super::lapic::enable();
    super::lapic::calibrate(
        |ticks| {
            let start = crate::time::ticks();
            while crate::time::ticks() < start + ticks {
                core::hint::spin_loop();
            }
        },
        10,
    );
    pic::mask(PIT_IRQ);
    super::lapic::start_timer();
}

/// Waits `us` microseconds (busy, on the TSC).
pub(crate) fn delay_us(us: u64) {
    let end = cycles() + cycles_per_second() * us / 1_000_000;
    while cycles() < end {
        core::hint::spin_loop();
    }
}

/// The cycle counter (RDTSC).
#[inline(always)]
pub fn cycles() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: rdtsc reads the time-stamp counter; it has no other effect.
    unsafe { asm!("rdtsc", out("eax") low, out("edx") high, options(nomem, nostack, preserves_flags)) };
    (u64::from(high) << 32) | u64::from(low)
}

/// Cycle counter increments per second, as calibrated at boot.
pub fn cycles_per_second() -> u64 {
    CYCLES_PER_SECOND.load(Ordering::Relaxed)
}
