//! The GICv2 of QEMU `virt`: distributor at 0x0800_0000, CPU interface at
//! 0x0801_0000. The distributor is shared; the CPU interface and the
//! registers of interrupts 0-31 (SGIs and PPIs) are banked per CPU, so each
//! CPU enables its own timer and IPIs ([`init_cpu`]).

use core::ptr::{read_volatile, write_volatile};

const DISTRIBUTOR: usize = 0x0800_0000;
const CPU_INTERFACE: usize = 0x0801_0000;

const GICD_CTLR: usize = DISTRIBUTOR;
const GICD_ISENABLER: usize = DISTRIBUTOR + 0x100;
const GICD_IPRIORITYR: usize = DISTRIBUTOR + 0x400;
const GICD_ITARGETSR: usize = DISTRIBUTOR + 0x800;
const GICD_SGIR: usize = DISTRIBUTOR + 0xf00;
const GICC_CTLR: usize = CPU_INTERFACE;
const GICC_PMR: usize = CPU_INTERFACE + 0x4;
const GICC_IAR: usize = CPU_INTERFACE + 0xc;
const GICC_EOIR: usize = CPU_INTERFACE + 0x10;

const SPURIOUS: u32 = 1023;
const PRIORITY: u8 = 0xa0;

fn write(register: usize, value: u32) {
    // SAFETY: GIC registers at fixed addresses, mapped as device memory.
    unsafe { write_volatile(register as *mut u32, value) }
}

fn read(register: usize) -> u32 {
    // SAFETY: as for `write`.
    unsafe { read_volatile(register as *const u32) }
}

/// Writes the byte-sized register of `intid` in the array at `base`.
fn write_byte(base: usize, intid: u32, value: u8) {
    // SAFETY: the priority and target registers are byte-accessible, one
    // byte per INTID.
    unsafe { write_volatile((base + intid as usize) as *mut u8, value) };
}

/// Enables `intid` (its priority, and for a shared interrupt, CPU 0 as its
/// target).
fn enable(intid: u32) {
    write_byte(GICD_IPRIORITYR, intid, PRIORITY);
    if intid >= 32 {
        write_byte(GICD_ITARGETSR, intid, 0x01);
    }
    write(GICD_ISENABLER + 4 * (intid as usize / 32), 1 << (intid % 32));
}

/// Enables the distributor and the shared interrupts `spis` (boot CPU, once).
pub(crate) fn init(spis: &[u32]) {
    write(GICD_CTLR, 1);
    for &intid in spis {
        enable(intid);
    }
}

/// Enables this CPU's interface and its own interrupts `private` (SGIs and
/// PPIs, banked per CPU).
pub(crate) fn init_cpu(private: &[u32]) {
    for &intid in private {
        enable(intid);
    }
    write(GICC_PMR, 0xf0);
    write(GICC_CTLR, 1);
}

/// An acknowledged interrupt: its ID, and the raw value the end of
/// interrupt must give back (for an SGI it also names the sender).
#[derive(Clone, Copy)]
pub(crate) struct Acknowledged {
    pub intid: u32,
    raw: u32,
}

/// Acknowledges the highest-priority pending interrupt, if any.
pub(crate) fn acknowledge() -> Option<Acknowledged> {
    let raw = read(GICC_IAR);
    let intid = raw & 0x3ff;
    (intid != SPURIOUS).then_some(Acknowledged { intid, raw })
}

/// Signals the end of handling an interrupt.
pub(crate) fn end_of_interrupt(interrupt: Acknowledged) {
    write(GICC_EOIR, interrupt.raw);
}

/// Sends software-generated interrupt `intid` (0-15) to CPU interface
/// `cpu` (the CPU's number on QEMU `virt`).
pub(crate) fn send_sgi(cpu: usize, intid: u32) {
    // The stores the target will read (an IPI's call, its pending count)
    // must be visible before it can take the interrupt: the register
    // write is a Device access, which normal stores are not ordered
    // before without a barrier (Linux's GIC driver has the same one).
    // SAFETY: a barrier only.
    unsafe { core::arch::asm!("dmb ishst", options(nostack, preserves_flags)) };
    write(GICD_SGIR, (1 << (16 + cpu)) | intid);
}
