//! Console input: bytes the UART received, waiting for the shell.
//!
//! The UART interrupts when a byte arrives; its handler (`on_interrupt`)
//! moves every byte the UART holds into a ring here, so input arriving at
//! once (a pipe, a paste) never waits for the reader to poll. The reader
//! ([`read_byte`]) takes the oldest byte. Both drain the UART under one
//! lock, so bytes come out in the order they arrived whatever CPU runs the
//! handler. When the ring is full the handler leaves bytes in the UART and
//! masks its receive interrupt; the reader unmasks it as it makes room.

use crate::console;
use crate::sync::SpinLock;

const CAPACITY: usize = 4096;

struct Ring {
    bytes: [u8; CAPACITY],
    head: usize,
    len: usize,
}

impl Ring {
    /// Moves what the UART holds into the ring, while there is room.
    fn drain_uart(&mut self) {
        while self.len < CAPACITY {
            let Some(byte) = console::poll_byte() else { return };
            self.bytes[(self.head + self.len) % CAPACITY] = byte;
            self.len += 1;
        }
        console::set_receive_interrupt(false);
    }

    /// Removes the first `byte` waiting, wherever it is among the others.
    fn remove(&mut self, byte: u8) -> bool {
        let at = |ring: &Ring, i: usize| (ring.head + i) % CAPACITY;
        let Some(found) = (0..self.len).find(|&i| self.bytes[at(self, i)] == byte) else { return false };
        for i in found..self.len - 1 {
            self.bytes[at(self, i)] = self.bytes[at(self, i + 1)];
        }
        self.len -= 1;
        true
    }

    fn pop(&mut self) -> Option<u8> {
        if self.len == 0 {
            return None;
        }
        let byte = self.bytes[self.head];
        self.head = (self.head + 1) % CAPACITY;
        self.len -= 1;
        Some(byte)
    }
}

static INPUT: SpinLock<Ring> = SpinLock::new(Ring { bytes: [0; CAPACITY], head: 0, len: 0 });

/// The UART's receive interrupt: called by the architecture's interrupt
/// handler.
pub(crate) fn on_interrupt() {
    INPUT.lock().drain_uart();
}

/// The next byte typed, if any.
pub fn read_byte() -> Option<u8> {
    let mut ring = INPUT.lock();
    ring.drain_uart();
    let byte = ring.pop();
    if ring.len < CAPACITY {
        console::set_receive_interrupt(true);
    }
    byte
}

/// The next byte typed, if any, left in place for [`read_byte`] (so a
/// command that runs until a key is pressed leaves the key to the shell).
pub fn peek_byte() -> Option<u8> {
    let mut ring = INPUT.lock();
    ring.drain_uart();
    (ring.len > 0).then(|| ring.bytes[ring.head])
}

/// Whether `byte` was typed, among whatever else is waiting; it is taken,
/// the rest left in order (a long command's ^C, behind the commands a
/// script typed ahead).
pub fn take_typed(byte: u8) -> bool {
    let mut ring = INPUT.lock();
    ring.drain_uart();
    let found = ring.remove(byte);
    if found {
        console::set_receive_interrupt(true);
    }
    found
}
