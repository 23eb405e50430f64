//! Leaving QEMU through the `isa-debug-exit` device at port 0xf4.
//!
//! QEMU exits with status `(value << 1) | 1` for a `value` written there, so
//! status 0 cannot be produced directly. The kernel writes `0x10 + code`
//! (statuses 33 and 35) and `qemu-run.sh` maps them back to 0 and 1; any
//! other status (QEMU's own errors, a triple fault) stays distinguishable.

use crate::ExitCode;
use x86_64::instructions::port::Port;

const DEBUG_EXIT_PORT: u16 = 0xf4;
const EXIT_BASE: u32 = 0x10;

/// Writes the exit value; if the device is absent, halts forever.
pub fn exit(code: ExitCode) -> ! {
    // SAFETY: port 0xf4 is QEMU's debug-exit device; writing it ends the VM.
    unsafe { Port::new(DEBUG_EXIT_PORT).write(EXIT_BASE + code as u32) };
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}
