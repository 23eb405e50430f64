//! The 16550 UART on COM1 (I/O port 0x3f8), transmit polled, receive
//! interrupt-driven (see `crate::input`).

use x86_64::instructions::port::Port;

const COM1: u16 = 0x3f8;
const DATA: u16 = COM1;
const INTERRUPT_ENABLE: u16 = COM1 + 1;
const LINE_CONTROL: u16 = COM1 + 3;
const MODEM_CONTROL: u16 = COM1 + 4;
const LINE_STATUS: u16 = COM1 + 5;

const LSR_DATA_READY: u8 = 1 << 0;
const LSR_TX_EMPTY: u8 = 1 << 5;

fn outb(port: u16, value: u8) {
    // SAFETY: COM1's registers are I/O ports owned by this driver; writing them
    // has no memory-safety effect.
    unsafe { Port::new(port).write(value) }
}

fn inb(port: u16) -> u8 {
    // SAFETY: as for `outb`; reading the UART registers is side-effect free
    // apart from consuming a received byte, which is what `read_byte` wants.
    unsafe { Port::new(port).read() }
}

/// The UART's IRQ line (COM1).
pub(crate) const IRQ: u8 = 4;

const IER_RECEIVED_DATA: u8 = 1 << 0;
const MCR_OUT2: u8 = 1 << 3; // gates the UART's interrupt line on PCs

/// 115200 baud, 8N1, interrupts off until [`set_receive_interrupt`]. The
/// FIFO control register is left alone: enabling the FIFOs resets them,
/// which would drop input QEMU delivered before this ran (piped commands
/// arrive at once).
pub(crate) fn init() {
    outb(INTERRUPT_ENABLE, 0x00);
    outb(LINE_CONTROL, 0x80); // divisor latch access
    outb(DATA, 0x01); // divisor 1: 115200 baud
    outb(INTERRUPT_ENABLE, 0x00);
    outb(LINE_CONTROL, 0x03); // 8 bits, no parity, one stop bit
    outb(MODEM_CONTROL, 0x03 | MCR_OUT2); // DTR | RTS | OUT2
}

/// Turns the received-data interrupt on or off.
pub fn set_receive_interrupt(enabled: bool) {
    outb(INTERRUPT_ENABLE, if enabled { IER_RECEIVED_DATA } else { 0 });
}

/// Sends one byte, waiting for room in the transmitter.
pub fn write_byte(byte: u8) {
    while inb(LINE_STATUS) & LSR_TX_EMPTY == 0 {
        core::hint::spin_loop();
    }
    outb(DATA, byte);
}

/// The byte the UART holds, if any (`crate::input` keeps what arrived).
pub fn poll_byte() -> Option<u8> {
    (inb(LINE_STATUS) & LSR_DATA_READY != 0).then(|| inb(DATA))
}
