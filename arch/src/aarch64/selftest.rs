//! Helpers for the in-kernel tests of the tracing trampolines.

use core::arch::naked_asm;

use super::ftrace::Insn;

/// Callee-saved registers [`call_with_marked_registers`] sets, and to what.
pub const MARKED_REGISTERS: &[(&str, u64)] = &[
    ("x19", 0x1919),
    ("x20", 0x2020),
    ("x21", 0x2121),
    ("x22", 0x2222),
    ("x23", 0x2323),
    ("x24", 0x2424),
    ("x25", 0x2525),
    ("x26", 0x2626),
    ("x27", 0x2727),
    ("x28", 0x2828),
];

/// The flags register, the bits set before the call, and their value: Z and C.
pub const MARKED_FLAGS: (&str, u64, u64) = ("pstate", 0x6000_0000, 0x6000_0000);

/// A harmless instruction that is neither the site's NOP nor a call
/// (`mov x16, x16`; x16 is a scratch register at calls). Tests write it into
/// a site to play a corrupted site.
pub const CORRUPT_INSN: Insn = 0xaa10_03f0_u32.to_le_bytes();

/// Calls `target` with the [`MARKED_REGISTERS`] and [`MARKED_FLAGS`] set, and
/// returns zero if every marked register still holds its value afterwards
/// (non-zero otherwise).
///
/// # Safety
/// `target` must be an `extern "C" fn()` that returns normally.
#[unsafe(naked)]
pub unsafe extern "C" fn call_with_marked_registers(target: extern "C" fn()) -> u64 {
    naked_asm!(
        "stp x29, x30, [sp, #-96]!",
        "mov x29, sp",
        "stp x19, x20, [sp, #16]",
        "stp x21, x22, [sp, #32]",
        "stp x23, x24, [sp, #48]",
        "stp x25, x26, [sp, #64]",
        "stp x27, x28, [sp, #80]",
        "mov x19, #0x1919",
        "mov x20, #0x2020",
        "mov x21, #0x2121",
        "mov x22, #0x2222",
        "mov x23, #0x2323",
        "mov x24, #0x2424",
        "mov x25, #0x2525",
        "mov x26, #0x2626",
        "mov x27, #0x2727",
        "mov x28, #0x2828",
        "mov x9, #0x60000000",
        "msr nzcv, x9",
        "blr x0",
        "mov x9, #0x1919",
        "eor x0, x19, x9",
        "mov x9, #0x2020",
        "eor x9, x20, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2121",
        "eor x9, x21, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2222",
        "eor x9, x22, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2323",
        "eor x9, x23, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2424",
        "eor x9, x24, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2525",
        "eor x9, x25, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2626",
        "eor x9, x26, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2727",
        "eor x9, x27, x9",
        "orr x0, x0, x9",
        "mov x9, #0x2828",
        "eor x9, x28, x9",
        "orr x0, x0, x9",
        "ldp x19, x20, [sp, #16]",
        "ldp x21, x22, [sp, #32]",
        "ldp x23, x24, [sp, #48]",
        "ldp x25, x26, [sp, #64]",
        "ldp x27, x28, [sp, #80]",
        "ldp x29, x30, [sp], #96",
        "ret",
    )
}

/// A scratch register no function prologue touches, which a full entry save
/// holds and restores: tests write it in a callback and read it first thing
/// in the traced function, to see that the write landed (x17, which the
/// full-registers trampoline once left alone).
pub const SCRATCH_REGISTER: &str = "x17";

/// Reads [`SCRATCH_REGISTER`]. Inline, so that it reads the register as the
/// calling function found it.
#[inline(always)]
pub fn scratch_register() -> u64 {
    let value: u64;
    // SAFETY: reads a register.
    unsafe { core::arch::asm!("mov {}, x17", out(reg) value, options(nomem, nostack, preserves_flags)) };
    value
}
