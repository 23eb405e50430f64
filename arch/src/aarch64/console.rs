//! The PL011 UART of QEMU `virt` at 0x0900_0000, transmit polled,
//! receive interrupt-driven (see `crate::input`).
//! QEMU's model needs no set-up: it is enabled at reset.

use core::ptr::{read_volatile, write_volatile};

const UART_BASE: usize = 0x0900_0000;
const DATA: usize = UART_BASE;
const FLAGS: usize = UART_BASE + 0x18;
const INTERRUPT_MASK: usize = UART_BASE + 0x38;
const FLAG_RX_EMPTY: u32 = 1 << 4;
const FLAG_TX_FULL: u32 = 1 << 5;
/// Receive and receive-timeout interrupts.
const RECEIVE_INTERRUPTS: u32 = (1 << 4) | (1 << 6);

/// The UART's interrupt on QEMU `virt`: SPI 1.
pub(crate) const INTID: u32 = 33;

fn flags() -> u32 {
    // SAFETY: the PL011 flag register is a device register at a fixed address
    // that the page tables map as device memory (or MMU off: also device).
    unsafe { read_volatile(FLAGS as *const u32) }
}

/// Sends one byte, waiting for room in the transmit FIFO.
pub fn write_byte(byte: u8) {
    while flags() & FLAG_TX_FULL != 0 {
        core::hint::spin_loop();
    }
    // SAFETY: writing the data register queues one byte for transmission.
    unsafe { write_volatile(DATA as *mut u32, u32::from(byte)) };
}

/// Turns the receive interrupts on or off.
pub fn set_receive_interrupt(enabled: bool) {
    // SAFETY: the interrupt mask register, a device register at a fixed
    // address.
    unsafe { write_volatile(INTERRUPT_MASK as *mut u32, if enabled { RECEIVE_INTERRUPTS } else { 0 }) };
}

/// The byte the UART holds, if any (`crate::input` keeps what arrived).
pub fn poll_byte() -> Option<u8> {
    if flags() & FLAG_RX_EMPTY != 0 {
        return None;
    }
    // SAFETY: reading the data register pops one received byte.
    Some(unsafe { read_volatile(DATA as *const u32) } as u8)
}
