//! The interrupt vectors the kernel gives its inter-processor interrupts,
//! in one place that the entry code and the code that sends them both read
//! (neither reaches into the other for them).

use crate::smp::Ipi;

/// The interrupt vector of each IPI.
pub(crate) const fn ipi_vector(ipi: Ipi) -> u8 {
    match ipi {
        Ipi::Reschedule => 0xf0,
        Ipi::Call => 0xf1,
        Ipi::Wake => 0xf2,
    }
}
