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
    gic::init_cpu(&[VIRTUAL_TIMER_INTID, super::smp::SGI_RESCHEDULE, super::smp::SGI_CALL, super::smp::SGI_WAKE]);
    rearm();
    // SAFETY: CNTV_CTL_EL0 = ENABLE, interrupt unmasked.
    unsafe { asm!("msr cntv_ctl_el0, {}", in(reg) 1u64, options(nomem, nostack)) };
}

/// Schedules the next tick one period from now.
pub(crate) fn rearm() {
    // SAFETY: writes the timer's countdown register.
    unsafe { asm!("msr cntv_tval_el0, {}", in(reg) frequency() / HZ, options(nomem, nostack)) };
}

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
