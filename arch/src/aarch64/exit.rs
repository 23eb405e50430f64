//! Leaving QEMU through semihosting `SYS_EXIT_EXTENDED`: QEMU exits with the
//! subcode as its status, so `ExitCode::Success` is status 0.

use super::semihosting::{self, Operation, APPLICATION_EXIT};
use crate::ExitCode;

/// Asks QEMU to exit; if semihosting is off, waits forever.
pub fn exit(code: ExitCode) -> ! {
    let mut block = [APPLICATION_EXIT, code as u64];
    // SAFETY: SYS_EXIT_EXTENDED takes a two-word block (reason, subcode).
    unsafe { semihosting::call(Operation::ExitExtended, block.as_mut_ptr()) };
    loop {
        super::cpu::disable_interrupts();
        aarch64_cpu::asm::wfe();
    }
}
