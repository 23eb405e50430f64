//! Helpers for the in-kernel tests of the tracing trampolines: the
//! architecture's marking harnesses and fixtures (its `selftest` module,
//! re-exported here), and the architecture-neutral half of the
//! every-register harness, [`call_with_every_register`].

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::ftrace_abi::{FtraceRegs, FTRACE_REGS_PT};
pub use crate::imp::selftest::*;

/// What [`call_with_every_register`] fills the stack under its frame with,
/// and `mark_caller_saved_registers` the stack under its caller's: a save
/// slot that still holds it was never written by the trampoline.
pub const POISON: u64 = 0x0b5e_55ed_0b5e_55ed;
/// How many bytes under the stack pointer are poisoned: more than any
/// trampoline frame.
pub(crate) const POISON_BYTES: usize = 2048;

/// The value register number `n` is marked with (each architecture's
/// `EVERY_REGISTER` and its harness's assembly spell it out).
pub(crate) const fn mark(n: u64) -> u64 {
    0x5eed_0000_0000_0000 | n << 16 | n
}

/// The function [`call_with_every_register`] calls (its harness reads it).
pub(crate) static TARGET: AtomicUsize = AtomicUsize::new(0);
/// The stack pointer just before that call (its harness writes it).
pub(crate) static CALLER_SP: AtomicUsize = AtomicUsize::new(0);

/// What a save taken during a [`call_with_every_register`] call must hold.
#[derive(Clone, Copy, Debug)]
pub struct EveryRegisterCall {
    /// The function called.
    pub function: usize,
    /// Where its call returns to, in the harness.
    pub return_address: usize,
}

/// Calls `target` with every register of `EVERY_REGISTER` set, the flags
/// `MARKED_FLAGS` names set, interrupts masked, and the 2 KiB under its
/// frame poisoned with [`POISON`]; returns zero if the callee-saved
/// registers came back (non-zero otherwise).
///
/// # Safety
/// `target` must be the address of an `extern "C"` function of no
/// arguments (its result, if any, is dropped) that returns normally, that
/// nothing walks the frame pointers of while it runs (the frame pointer
/// holds a mark), and that runs with interrupts masked.
pub unsafe fn call_with_every_register(target: usize) -> u64 {
    TARGET.store(target, Ordering::SeqCst);
    // SAFETY: the caller's promises are this harness's.
    unsafe { crate::imp::selftest::every_register_harness() }
}

/// The stack pointer the harness had just before its call.
pub(crate) fn caller_sp() -> u64 {
    CALLER_SP.load(Ordering::SeqCst) as u64
}

/// The word at `offset` in the save's `PtRegs`, whether or not the save
/// recorded it: the tests compare it with [`POISON`] to see what a
/// trampoline really wrote.
pub fn raw_saved_word(fregs: &FtraceRegs, offset: usize) -> u64 {
    assert!(offset + 8 <= core::mem::size_of::<crate::regs::PtRegs>() && offset.is_multiple_of(8));
    // SAFETY: in bounds of the save (checked), aligned, and stack memory the
    // harness wrote before the trampoline built its frame there.
    unsafe { core::ptr::read_volatile((fregs as *const FtraceRegs as *const u8).add(FTRACE_REGS_PT + offset) as *const u64) }
}
