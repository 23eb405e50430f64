//! x86_64 single-step (see `crate::step`): the trap flag, RFLAGS.TF. With
//! it set, the CPU takes a debug exception (`#DB`, a trap: after the
//! instruction) at every instruction; every exception and interrupt entry
//! clears it, and `iretq` puts back the interrupted context's.

use core::arch::asm;

/// RFLAGS.TF.
const TF: u64 = 1 << 8;
/// DR6.BS: the debug exception was a single step.
const DR6_BS: u64 = 1 << 14;
/// DR6 as the processor leaves it with no condition recorded.
const DR6_CLEAR: u64 = 0xffff_0ff0;

/// Turns stepping on in the calling code: a debug exception after every
/// instruction from the one after the `popfq` on.
#[inline(always)]
pub fn begin() {
    // SAFETY: sets RFLAGS.TF through the stack (no red zone in the kernel);
    // the debug exception handler takes every step.
    unsafe { asm!("pushfq", "or qword ptr [rsp], {tf}", "popfq", tf = const TF) };
}

/// Turns stepping off (the `popfq` that clears the flag still traps once).
#[inline(always)]
pub fn end() {
    // SAFETY: clears RFLAGS.TF, as above.
    unsafe { asm!("pushfq", "and qword ptr [rsp], {mask}", "popfq", mask = const !(TF as i64) as i32) };
}

/// Whether the debug exception being handled is a single step, clearing
/// the debug status for the next one (the processor never clears it).
pub(crate) fn take_single_step() -> bool {
    let status: u64;
    // SAFETY: reads and resets DR6 at CPL 0.
    unsafe {
        asm!("mov {}, dr6", out(reg) status, options(nomem, nostack, preserves_flags));
        asm!("mov dr6, {}", in(reg) DR6_CLEAR, options(nomem, nostack, preserves_flags));
    }
    status & DR6_BS != 0
}
