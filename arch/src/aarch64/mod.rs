//! aarch64 on QEMU `virt`: PL011 console, GICv2, generic timer, semihosting exit.

pub const NAME: &str = "aarch64";

/// Whether a store may be unaligned: no. The kernel's target
/// (`aarch64-unknown-none-softfloat`) is built with `strict-align`, so the
/// compiler splits any store it cannot prove aligned into byte stores.
pub const UNALIGNED_STORES: bool = false;

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

mod gic;
mod interrupts;
mod semihosting;
