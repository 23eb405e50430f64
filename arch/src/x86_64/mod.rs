//! x86_64 under QEMU: PVH boot, 16550 console, 8259 PIC (the UART's interrupt;
//! the PIT's, only while it calibrates at boot), local APIC timers and IPIs,
//! TSC.

pub const NAME: &str = "x86_64";

/// Whether a store may be unaligned: x86_64 stores any width at any address.
pub const UNALIGNED_STORES: bool = true;

pub mod boot;
pub mod channel;
pub mod console;
pub mod cpu;
pub mod disasm;
pub mod exceptions;
pub mod exit;
pub mod ftrace;
pub mod kprobes;
pub mod mm;
pub mod patch;
pub mod regs;
pub mod selftest;
pub mod smp;
#[cfg(feature = "test-hooks")]
pub mod step;
pub mod switch;
pub mod timer;

mod gdt;
mod interrupts;
mod lapic;
mod pic;
