//! The periodic tick (EL1 virtual timer, PPI 27 through the GIC) and the cycle
//! counter (CNTVCT_EL0, whose frequency CNTFRQ_EL0 states).

use core::arch::asm;

use super::gic;
use crate::time::HZ;

/// The virtual timer's interrupt ID.
pub(crate) const VIRTUAL_TIMER_INTID: u32 = 27;

fn frequency() -> u64 {
    let freq: u64;
    // SAFETY: reads a system register.
    unsafe { asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack)) };
    freq
}

/// Starts the boot CPU's tick (and the interrupt controller).
pub(crate) fn init() {
    gic::init(&[super::console::INTID]);
    init_cpu();
}

/// Starts this CPU's tick, and enables its interrupt-controller interface
/// for the tick and the IPIs.
pub(crate) fn init_cpu() {
    use super::interrupts::{SGI_CALL, SGI_RESCHEDULE, SGI_WAKE};
    gic::init_cpu(&[VIRTUAL_TIMER_INTID, SGI_RESCHEDULE, SGI_CALL, SGI_WAKE]);
    set_deadline(cycles() + frequency() / HZ);
    // SAFETY: CNTV_CTL_EL0 = ENABLE, interrupt unmasked.
    unsafe { asm!("msr cntv_ctl_el0, {}", in(reg) 1u64, options(nomem, nostack)) };
}

/// Schedules the next tick one period after the one just taken: an
/// absolute deadline (CNTV_CVAL_EL0), so the time the interrupt took to
/// arrive is not lost at every tick (a countdown from now, TVAL, would
/// make the tick count run slow: some 4% under QEMU). When whole periods
/// went by (the CPU was held up), the next deadline is the first one still
/// ahead, in step with the others: those ticks are lost rather than taken
/// back to back.
pub(crate) fn rearm() {
    let period = frequency() / HZ;
    let last = deadline();
    let missed = cycles().saturating_sub(last) / period;
    set_deadline(last + (missed + 1) * period);
}

/// The tick's deadline, in cycles.
fn deadline() -> u64 {
    let value: u64;
    // SAFETY: reads a system register.
    unsafe { asm!("mrs {}, cntv_cval_el0", out(reg) value, options(nomem, nostack)) };
    value
}

fn set_deadline(cycles: u64) {
    // SAFETY: writes the timer's compare register (the interrupt fires
    // once the virtual count reaches it).
    unsafe { asm!("msr cntv_cval_el0, {}", in(reg) cycles, options(nomem, nostack)) };
}

/// The name `trace_clock` would give [`cycles`] read raw: none, as Linux
/// has no arm64 trace clock of its own.
pub const TRACE_CLOCK: Option<&str> = None;

/// The cycle counter (the virtual count).
#[inline(always)]
pub fn cycles() -> u64 {
    let count: u64;
    // SAFETY: reads the counter; the isb keeps it from being read early.
    unsafe { asm!("isb", "mrs {}, cntvct_el0", out(reg) count, options(nomem, nostack)) };
    count
}

/// Counter increments per second.
pub fn cycles_per_second() -> u64 {
    frequency()
}
