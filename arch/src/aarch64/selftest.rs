//! Helpers for the in-kernel tests of the tracing trampolines.

use core::arch::naked_asm;

use super::ftrace::Insn;
use crate::ftrace_abi::Saved;
use crate::selftest::{caller_sp, mark, EveryRegisterCall, POISON, POISON_BYTES};

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

// ---- every register, for the register-table tests ----

/// Every general register [`call_with_every_register`](crate::selftest::call_with_every_register) sets before its
/// call (x9 but for the call: it holds the target), and to what (each
/// value distinct); x0-x18 are also what [`mark_caller_saved_registers`]
/// leaves.
pub const EVERY_REGISTER: &[(&str, u64)] = &[
    ("x0", mark(0x40)),
    ("x1", mark(0x41)),
    ("x2", mark(0x42)),
    ("x3", mark(0x43)),
    ("x4", mark(0x44)),
    ("x5", mark(0x45)),
    ("x6", mark(0x46)),
    ("x7", mark(0x47)),
    ("x8", mark(0x48)),
    ("x9", mark(0x49)),
    ("x10", mark(0x4a)),
    ("x11", mark(0x4b)),
    ("x12", mark(0x4c)),
    ("x13", mark(0x4d)),
    ("x14", mark(0x4e)),
    ("x15", mark(0x4f)),
    ("x16", mark(0x50)),
    ("x17", mark(0x51)),
    ("x18", mark(0x52)),
    ("x19", mark(0x53)),
    ("x20", mark(0x54)),
    ("x21", mark(0x55)),
    ("x22", mark(0x56)),
    ("x23", mark(0x57)),
    ("x24", mark(0x58)),
    ("x25", mark(0x59)),
    ("x26", mark(0x5a)),
    ("x27", mark(0x5b)),
    ("x28", mark(0x5c)),
    ("x29", mark(0x5d)),
];

/// `REG = mark(0xN)`, in three instructions.
macro_rules! mark {
    ($reg:literal, $n:literal) => {
        concat!("movz ", $reg, ", #0x", $n, "\n", "movk ", $reg, ", #0x", $n, ", lsl #16\n", "movk ", $reg, ", #0x5eed, lsl #48")
    };
}

/// Fills the [`POISON_BYTES`] under the stack pointer with [`POISON`]
/// (operands `poison_bytes`, `p0` to `p3`: its four halfwords; clobbers
/// x10-x12 and the flags).
macro_rules! poison_stack {
    () => {
        "mov x10, sp\nsub x11, x10, #{poison_bytes}\nmovz x12, #{p0}\nmovk x12, #{p1}, lsl #16\n\
         movk x12, #{p2}, lsl #32\nmovk x12, #{p3}, lsl #48\n3: str x12, [x11], #8\ncmp x11, x10\nb.lo 3b"
    };
}

/// The harness of [`call_with_every_register`](crate::selftest::call_with_every_register).
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn every_register_harness() -> u64 {
    naked_asm!(
        "stp x29, x30, [sp, #-112]!",
        "mov x29, sp",
        "stp x19, x20, [sp, #16]",
        "stp x21, x22, [sp, #32]",
        "stp x23, x24, [sp, #48]",
        "stp x25, x26, [sp, #64]",
        "stp x27, x28, [sp, #80]",
        "mrs x9, daif",
        "str x9, [sp, #96]",
        "msr daifset, #2",
        poison_stack!(),
        "adrp x10, {caller_sp}",
        "add x10, x10, :lo12:{caller_sp}",
        "mov x11, sp",
        "str x11, [x10]",
        "adrp x9, {target}",
        "ldr x9, [x9, :lo12:{target}]",
        "mov x10, #0x60000000",
        "msr nzcv, x10",
        mark!("x0", "40"),
        mark!("x1", "41"),
        mark!("x2", "42"),
        mark!("x3", "43"),
        mark!("x4", "44"),
        mark!("x5", "45"),
        mark!("x6", "46"),
        mark!("x7", "47"),
        mark!("x8", "48"),
        mark!("x10", "4a"),
        mark!("x11", "4b"),
        mark!("x12", "4c"),
        mark!("x13", "4d"),
        mark!("x14", "4e"),
        mark!("x15", "4f"),
        mark!("x16", "50"),
        mark!("x17", "51"),
        mark!("x18", "52"),
        mark!("x19", "53"),
        mark!("x20", "54"),
        mark!("x21", "55"),
        mark!("x22", "56"),
        mark!("x23", "57"),
        mark!("x24", "58"),
        mark!("x25", "59"),
        mark!("x26", "5a"),
        mark!("x27", "5b"),
        mark!("x28", "5c"),
        mark!("x29", "5d"),
        "blr x9",
        "mov x0, xzr",
        mark!("x9", "53"),
        "eor x9, x19, x9",
        "orr x0, x0, x9",
        mark!("x9", "54"),
        "eor x9, x20, x9",
        "orr x0, x0, x9",
        mark!("x9", "55"),
        "eor x9, x21, x9",
        "orr x0, x0, x9",
        mark!("x9", "56"),
        "eor x9, x22, x9",
        "orr x0, x0, x9",
        mark!("x9", "57"),
        "eor x9, x23, x9",
        "orr x0, x0, x9",
        mark!("x9", "58"),
        "eor x9, x24, x9",
        "orr x0, x0, x9",
        mark!("x9", "59"),
        "eor x9, x25, x9",
        "orr x0, x0, x9",
        mark!("x9", "5a"),
        "eor x9, x26, x9",
        "orr x0, x0, x9",
        mark!("x9", "5b"),
        "eor x9, x27, x9",
        "orr x0, x0, x9",
        mark!("x9", "5c"),
        "eor x9, x28, x9",
        "orr x0, x0, x9",
        "ldr x9, [sp, #96]",
        "msr daif, x9",
        "ldp x19, x20, [sp, #16]",
        "ldp x21, x22, [sp, #32]",
        "ldp x23, x24, [sp, #48]",
        "ldp x25, x26, [sp, #64]",
        "ldp x27, x28, [sp, #80]",
        "ldp x29, x30, [sp], #112",
        "ret",
        poison_bytes = const POISON_BYTES,
        p0 = const POISON & 0xffff,
        p1 = const (POISON >> 16) & 0xffff,
        p2 = const (POISON >> 32) & 0xffff,
        p3 = const POISON >> 48,
        caller_sp = sym crate::selftest::CALLER_SP,
        target = sym crate::selftest::TARGET,
    )
}

/// Sets every caller-saved register (x0-x18) to its [`EVERY_REGISTER`]
/// mark, after poisoning the stack under the caller's, and answers x0's
/// mark: the last act of a traced function whose return save a test reads
/// (the function returns the answer, and its epilogue touches only
/// callee-saved registers).
#[inline(always)]
pub fn mark_caller_saved_registers() -> u64 {
    let x0: u64;
    // SAFETY: writes registers it declares clobbered and the free stack
    // under the stack pointer.
    unsafe {
        core::arch::asm!(
            poison_stack!(),
            mark!("x1", "41"),
            mark!("x2", "42"),
            mark!("x3", "43"),
            mark!("x4", "44"),
            mark!("x5", "45"),
            mark!("x6", "46"),
            mark!("x7", "47"),
            mark!("x8", "48"),
            mark!("x9", "49"),
            mark!("x10", "4a"),
            mark!("x11", "4b"),
            mark!("x12", "4c"),
            mark!("x13", "4d"),
            mark!("x14", "4e"),
            mark!("x15", "4f"),
            mark!("x16", "50"),
            mark!("x17", "51"),
            mark!("x18", "52"),
            mark!("x0", "40"),
            poison_bytes = const POISON_BYTES,
            p0 = const POISON & 0xffff,
            p1 = const (POISON >> 16) & 0xffff,
            p2 = const (POISON >> 32) & 0xffff,
            p3 = const POISON >> 48,
            out("x0") x0,
            out("x1") _,
            out("x2") _,
            out("x3") _,
            out("x4") _,
            out("x5") _,
            out("x6") _,
            out("x7") _,
            out("x8") _,
            out("x9") _,
            out("x10") _,
            out("x11") _,
            out("x12") _,
            out("x13") _,
            out("x14") _,
            out("x15") _,
            out("x16") _,
            out("x17") _,
            out("x18") _,
        )
    };
    x0
}

/// What register `name` must hold in a save of kind `saved` taken inside a
/// [`call_with_every_register`](crate::selftest::call_with_every_register) call of `call.function`, a function that
/// ends with [`mark_caller_saved_registers`] when a return save is read:
/// `(mask, value)`, the bits of the register that are known and what they
/// are.
pub fn expected_in_save(name: &str, saved: Saved, call: EveryRegisterCall) -> (u64, u64) {
    let caller_sp = caller_sp();
    let at_entry = matches!(saved, Saved::EntryArgs | Saved::EntryFull);
    const NZCV: u64 = 0xf000_0000;
    const I: u64 = 1 << 7;
    match name {
        "sp" => (!0, caller_sp),
        "pc" => (!0, if at_entry { call.function } else { call.return_address } as u64),
        // The return address; a return leaves it in lr as a `ret` does.
        "x30" => (!0, call.return_address as u64),
        // The site's `mov x9, x30` ran before the trampoline.
        "x9" if at_entry => (!0, call.return_address as u64),
        // Masked interrupts; the flags the harness set, at entry.
        "pstate" => match at_entry {
            true => (NZCV | I, 0x6000_0000 | I),
            false => (I, I),
        },
        _ => (!0, EVERY_REGISTER.iter().find(|(register, _)| *register == name).map_or(POISON, |(_, value)| *value)),
    }
}
