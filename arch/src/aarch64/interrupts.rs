//! The GIC interrupt IDs the kernel gives its inter-processor interrupts
//! (software-generated interrupts), in one place that the entry code, the
//! timer's per-CPU setup and the code that sends them all read.

use crate::smp::Ipi;

/// The SGIs the IPIs use.
pub(crate) const SGI_RESCHEDULE: u32 = 1;
pub(crate) const SGI_CALL: u32 = 2;
pub(crate) const SGI_WAKE: u32 = 3;

/// The SGI an IPI is sent as.
pub(crate) fn sgi(ipi: Ipi) -> u32 {
    match ipi {
        Ipi::Reschedule => SGI_RESCHEDULE,
        Ipi::Call => SGI_CALL,
        Ipi::Wake => SGI_WAKE,
    }
}

/// The IPI an SGI carries.
pub(crate) fn ipi_of(intid: u32) -> Option<Ipi> {
    match intid {
        SGI_RESCHEDULE => Some(Ipi::Reschedule),
        SGI_CALL => Some(Ipi::Call),
        SGI_WAKE => Some(Ipi::Wake),
        _ => None,
    }
}
