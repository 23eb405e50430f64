//! The periodic tick and the cycle counter.
//!
//! At boot the 8254 PIT (channel 0, through the 8259 PIC) ticks on the boot
//! CPU, long enough to calibrate the TSC and the local APIC timer against
//! it; then every CPU's own APIC timer ticks (the PIT is masked).

use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};

use super::pic;
use crate::time::HZ;
use x86_64::instructions::port::Port;

/// The PIT's IRQ line.
pub(crate) const PIT_IRQ: u8 = 0;

const PIT_INPUT_HZ: u64 = 1_193_182;
const PIT_CHANNEL0: u16 = 0x40;
const PIT_CHANNEL2: u16 = 0x42;
const PIT_COMMAND: u16 = 0x43;
/// The keyboard controller's port B: bit 0 gates PIT channel 2, bit 1
/// feeds the speaker, bit 5 reads channel 2's output.
const PORT_B: u16 = 0x61;

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

/// Measures the TSC rate against the PIT's own count, as Linux's
/// `pit_calibrate_tsc` does: channel 2 counts down 50 ms in mode 0 while
/// the TSC is read, polling its output bit. (Counting tick interrupts
/// instead measured their delivery too, which QEMU can make late: the
/// trace clock ran a few percent slow.)
pub(crate) fn calibrate() {
    const WINDOW_MS: u64 = 50;
    let latch = (PIT_INPUT_HZ * WINDOW_MS / 1000) as u16;
    // SAFETY: the PIT and port B belong to this driver; channel 2 drives
    // only the speaker, kept off.
    let elapsed = unsafe {
        let mut port_b = Port::<u8>::new(PORT_B);
        let gate = (port_b.read() & !0x02) | 0x01; // gate on, speaker off
        port_b.write(gate);
        Port::<u8>::new(PIT_COMMAND).write(0xb0); // channel 2, lo/hi byte, mode 0
        Port::<u8>::new(PIT_CHANNEL2).write(latch as u8);
        Port::<u8>::new(PIT_CHANNEL2).write((latch >> 8) as u8);
        let start = cycles();
        while port_b.read() & 0x20 == 0 {
            core::hint::spin_loop();
        }
        cycles() - start
    };
    CYCLES_PER_SECOND.store(elapsed * 1000 / WINDOW_MS, Ordering::Relaxed);
}

/// Moves the boot CPU's tick from the PIT to its local APIC timer, after
/// measuring that timer against the TSC ([`calibrate`] measured it first).
/// Waiting for PIT ticks instead would start anywhere inside a tick and
/// make the APIC's tick a few percent fast. Interrupts enabled.
pub(crate) fn start_apic_timer() {
    super::lapic::enable();
    super::lapic::calibrate(|ticks| delay_us(ticks * 1_000_000 / crate::time::HZ), 100);
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

/// The name `trace_clock` gives [`cycles`] read raw: Linux's x86 trace
/// clock (its `ARCH_TRACE_CLOCKS`), the TSC.
pub const TRACE_CLOCK: Option<&str> = Some("x86-tsc");

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
