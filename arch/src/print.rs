//! Formatted output on the serial console, and the lock that keeps lines whole.
//!
//! The lock is taken with interrupts masked, so an interrupt handler that
//! prints cannot deadlock against the code it interrupted. It is re-entrant on
//! the CPU that holds it: a synchronous exception raised *while printing* (a
//! fault in a `Display` impl, a panic) still gets its report out, interleaved
//! rather than deadlocked. Newlines go out as CR LF, as a terminal expects.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::{console, cpu, irq::IrqGuard};

const UNOWNED: usize = usize::MAX;

/// The CPU that holds the console, or `UNOWNED`.
static OWNER: AtomicUsize = AtomicUsize::new(UNOWNED);

/// Exclusive use of the console until dropped.
pub struct ConsoleGuard {
    reentered: bool,
    _irq: IrqGuard,
}

/// Takes the console lock.
pub fn lock() -> ConsoleGuard {
    let irq = IrqGuard::new();
    let me = cpu::id();
    if OWNER.load(Ordering::Relaxed) == me {
        return ConsoleGuard { reentered: true, _irq: irq };
    }
    while OWNER.compare_exchange_weak(UNOWNED, me, Ordering::Acquire, Ordering::Relaxed).is_err() {
        core::hint::spin_loop();
    }
    ConsoleGuard { reentered: false, _irq: irq }
}

/// Forgets any holder of the console lock. For the panic path and for the test
/// framework resuming after an expected panic, whose abandoned stack may still
/// "hold" it.
pub fn force_unlock() {
    OWNER.store(UNOWNED, Ordering::Release);
}

impl Drop for ConsoleGuard {
    fn drop(&mut self) {
        if !self.reentered {
            OWNER.store(UNOWNED, Ordering::Release);
        }
    }
}

impl Write for ConsoleGuard {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.write_bytes(s.as_bytes());
        Ok(())
    }
}

impl ConsoleGuard {
    /// Writes raw bytes, turning `\n` into `\r\n`.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                console::write_byte(b'\r');
            }
            console::write_byte(byte);
        }
    }
}

/// Writes a code address the way reports show it (`function+0x1c/0x60`).
pub type Symbolizer = fn(&mut dyn Write, usize) -> fmt::Result;

static SYMBOLIZER: crate::cell::AtomicFn<Symbolizer> = crate::cell::AtomicFn::none();

/// Installs the symbolizer exception reports use (the kernel provides one once
/// its symbol table is checked).
pub fn set_symbolizer(symbolizer: Symbolizer) {
    SYMBOLIZER.store(symbolizer);
}

/// Writes `address` through the installed symbolizer, or as a bare address.
pub fn write_code_address(out: &mut dyn Write, address: usize) -> fmt::Result {
    match SYMBOLIZER.load() {
        None => write!(out, "{address:#x}"),
        Some(symbolizer) => symbolizer(out, address),
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let mut console = lock();
    let _ = console.write_fmt(args);
}

/// Prints to the serial console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => ($crate::print::_print(format_args!($($arg)*)));
}

/// Prints to the serial console, with a newline.
#[macro_export]
macro_rules! println {
    () => ($crate::print!("\n"));
    ($($arg:tt)*) => ($crate::print::_print(format_args!("{}\n", format_args!($($arg)*))));
}
