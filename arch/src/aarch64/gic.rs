//! The GICv2 of QEMU `virt`: distributor at 0x0800_0000, CPU interface at
//! 0x0801_0000. Only what one CPU and a few private interrupts need.

use core::ptr::{read_volatile, write_volatile};

const DISTRIBUTOR: usize = 0x0800_0000;
const CPU_INTERFACE: usize = 0x0801_0000;

const GICD_CTLR: usize = DISTRIBUTOR;
const GICD_ISENABLER: usize = DISTRIBUTOR + 0x100;
const GICD_IPRIORITYR: usize = DISTRIBUTOR + 0x400;
const GICC_CTLR: usize = CPU_INTERFACE;
const GICC_PMR: usize = CPU_INTERFACE + 0x4;
const GICC_IAR: usize = CPU_INTERFACE + 0xc;
const GICC_EOIR: usize = CPU_INTERFACE + 0x10;

const SPURIOUS: u32 = 1023;

fn write(register: usize, value: u32) {
    // SAFETY: GIC registers at fixed addresses, mapped as device memory.
    unsafe { write_volatile(register as *mut u32, value) }
}

fn read(register: usize) -> u32 {
    // SAFETY: as for `write`.
    unsafe { read_volatile(register as *const u32) }
}

const GICD_ITARGETSR: usize = DISTRIBUTOR + 0x800;

/// Enables the distributor and CPU interface and unmasks `intids`; shared
/// peripheral interrupts (32 and up) go to CPU 0.
pub(crate) fn init(intids: &[u32]) {
    write(GICD_CTLR, 1);
    for &intid in intids {
        let byte = |base: usize, value: u8| {
            // SAFETY: the priority and target registers are byte-accessible,
            // one byte per INTID.
            unsafe { write_volatile((base + intid as usize) as *mut u8, value) };
        };
        byte(GICD_IPRIORITYR, 0xa0);
        if intid >= 32 {
            byte(GICD_ITARGETSR, 0x01);
        }
        write(GICD_ISENABLER + 4 * (intid as usize / 32), 1 << (intid % 32));
    }
    write(GICC_PMR, 0xf0);
    write(GICC_CTLR, 1);
}

/// Acknowledges the highest-priority pending interrupt, if any.
pub(crate) fn acknowledge() -> Option<u32> {
    let intid = read(GICC_IAR) & 0x3ff;
    (intid != SPURIOUS).then_some(intid)
}

/// Signals the end of handling `intid`.
pub(crate) fn end_of_interrupt(intid: u32) {
    write(GICC_EOIR, intid);
}
