//! Arm semihosting: requests to the debugger (here QEMU, run with
//! `-semihosting`) through `hlt #0xf000`.

use core::arch::asm;

/// The semihosting operations the kernel uses.
#[repr(u64)]
#[derive(Clone, Copy)]
pub(crate) enum Operation {
    Open = 0x01,
    Close = 0x02,
    Write = 0x05,
    GetCommandLine = 0x15,
    ExitExtended = 0x20,
}

/// `ADP_Stopped_ApplicationExit`: the reason code for a normal exit.
pub(crate) const APPLICATION_EXIT: u64 = 0x20026;

/// Issues `operation` with its parameter block; returns the result register.
///
/// # Safety
/// `block` must point to the parameter block `operation` expects, valid for
/// the reads and writes the operation performs.
pub(crate) unsafe fn call(operation: Operation, block: *mut u64) -> u64 {
    let result: u64;
    // SAFETY: the caller provides a valid parameter block; QEMU reads and
    // writes only that block and returns in x0.
    unsafe {
        asm!("hlt #0xf000", inout("x0") operation as u64 => result, in("x1") block, options(nostack));
    }
    result
}
