//! The legacy 8259 interrupt controllers, remapped above the exception vectors.

use x86_64::instructions::port::Port;

/// Vector of IRQ 0 (the PIT) after remapping; IRQ n arrives at `IRQ_BASE + n`.
pub(crate) const IRQ_BASE: u8 = 32;

const MASTER_COMMAND: u16 = 0x20;
const MASTER_DATA: u16 = 0x21;
const SLAVE_COMMAND: u16 = 0xa0;
const SLAVE_DATA: u16 = 0xa1;
const END_OF_INTERRUPT: u8 = 0x20;

fn outb(port: u16, value: u8) {
    // SAFETY: the PIC ports belong to this driver.
    unsafe { Port::new(port).write(value) }
}

/// Remaps both PICs to `IRQ_BASE..IRQ_BASE + 16` and unmasks only `irqs`.
pub(crate) fn init(unmasked_irqs: u16) {
    outb(MASTER_COMMAND, 0x11); // ICW1: init, expect ICW4
    outb(SLAVE_COMMAND, 0x11);
    outb(MASTER_DATA, IRQ_BASE); // ICW2: vector offsets
    outb(SLAVE_DATA, IRQ_BASE + 8);
    outb(MASTER_DATA, 4); // ICW3: slave on IRQ 2
    outb(SLAVE_DATA, 2);
    outb(MASTER_DATA, 0x01); // ICW4: 8086 mode
    outb(SLAVE_DATA, 0x01);
    let mask = !(unmasked_irqs | 1 << 2); // keep the cascade open
    outb(MASTER_DATA, mask as u8);
    outb(SLAVE_DATA, (mask >> 8) as u8);
}

/// Masks `irq` (the boot code masks the PIT once the APIC timers run).
pub(crate) fn mask(irq: u8) {
    let port = if irq < 8 { MASTER_DATA } else { SLAVE_DATA };
    // SAFETY: the PIC's mask register belongs to this driver.
    let current: u8 = unsafe { Port::new(port).read() };
    outb(port, current | 1 << (irq % 8));
}

/// Acknowledges `irq`. Sent before the handler runs, so that an abandoned
/// handler (a panic in a test that expects one) cannot block later ticks.
pub(crate) fn end_of_interrupt(irq: u8) {
    if irq >= 8 {
        outb(SLAVE_COMMAND, END_OF_INTERRUPT);
    }
    outb(MASTER_COMMAND, END_OF_INTERRUPT);
}
