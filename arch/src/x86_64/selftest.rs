//! Helpers for the in-kernel tests of the tracing trampolines.

use core::arch::naked_asm;

use x86_64::instructions::segmentation::{Segment, CS, SS};

use super::ftrace::Insn;
use crate::ftrace_abi::Saved;
use crate::selftest::{caller_sp, mark, EveryRegisterCall, POISON, POISON_BYTES};

/// Callee-saved registers [`call_with_marked_registers`] sets, and to what.
pub const MARKED_REGISTERS: &[(&str, u64)] = &[
    ("rbx", 0x1111_2222_3333_0001),
    ("r12", 0x1111_2222_3333_0012),
    ("r13", 0x1111_2222_3333_0013),
    ("r14", 0x1111_2222_3333_0014),
    ("r15", 0x1111_2222_3333_0015),
];

/// The flags register, the bits set before the call, and their value: the
/// carry flag (`stc`).
pub const MARKED_FLAGS: (&str, u64, u64) = ("rflags", 1, 1);

/// A harmless instruction that is neither the site's NOP nor a call: another
/// 5-byte NOP encoding (displacement 0 instead of 8). Tests write it into a
/// site to play a corrupted site.
pub const CORRUPT_INSN: Insn = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// Calls `target` with the [`MARKED_REGISTERS`] and [`MARKED_FLAGS`] set, and
/// returns zero if every marked register still holds its value afterwards
/// (non-zero otherwise).
///
/// # Safety
/// `target` must be an `extern "C" fn()` that returns normally.
#[unsafe(naked)]
pub unsafe extern "C" fn call_with_marked_registers(target: extern "C" fn()) -> u64 {
    naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",
        "movabs rbx, {rbx}",
        "movabs r12, {r12}",
        "movabs r13, {r13}",
        "movabs r14, {r14}",
        "movabs r15, {r15}",
        "stc",
        "call rdi",
        "movabs rax, {rbx}",
        "xor rax, rbx",
        "movabs rcx, {r12}",
        "xor rcx, r12",
        "or rax, rcx",
        "movabs rcx, {r13}",
        "xor rcx, r13",
        "or rax, rcx",
        "movabs rcx, {r14}",
        "xor rcx, r14",
        "or rax, rcx",
        "movabs rcx, {r15}",
        "xor rcx, r15",
        "or rax, rcx",
        "add rsp, 8",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
        rbx = const 0x1111_2222_3333_0001u64,
        r12 = const 0x1111_2222_3333_0012u64,
        r13 = const 0x1111_2222_3333_0013u64,
        r14 = const 0x1111_2222_3333_0014u64,
        r15 = const 0x1111_2222_3333_0015u64,
    )
}

/// A scratch register no function prologue touches, which a full entry save
/// holds and restores: tests write it in a callback and read it first thing
/// in the traced function, to see that the write landed.
pub const SCRATCH_REGISTER: &str = "r11";

/// Reads [`SCRATCH_REGISTER`]. Inline, so that it reads the register as the
/// calling function found it.
#[inline(always)]
pub fn scratch_register() -> u64 {
    let value: u64;
    // SAFETY: reads a register.
    unsafe { core::arch::asm!("mov {}, r11", out(reg) value, options(nomem, nostack, preserves_flags)) };
    value
}

// ---- every register, for the register-table tests ----

/// Every general register [`call_with_every_register`](crate::selftest::call_with_every_register) sets before its
/// call, and to what (each value distinct); the caller-saved ones are also
/// what [`mark_caller_saved_registers`] leaves.
pub const EVERY_REGISTER: &[(&str, u64)] = &[
    ("rax", mark(1)),
    ("rbx", mark(2)),
    ("rcx", mark(3)),
    ("rdx", mark(4)),
    ("rsi", mark(5)),
    ("rdi", mark(6)),
    ("rbp", mark(7)),
    ("r8", mark(8)),
    ("r9", mark(9)),
    ("r10", mark(10)),
    ("r11", mark(11)),
    ("r12", mark(12)),
    ("r13", mark(13)),
    ("r14", mark(14)),
    ("r15", mark(15)),
];

/// `movabs REG, mark(N)`, N in hex.
macro_rules! mark {
    ($reg:literal, $n:literal) => {
        concat!("movabs ", $reg, ", 0x5eed000000", $n, "00", $n)
    };
}

/// Fills the [`POISON_BYTES`] under the stack pointer with [`POISON`]
/// (operands `poison_bytes`, `poison_words`, `poison`; clobbers rax, rcx,
/// rdi).
macro_rules! poison_stack {
    () => {
        "lea rdi, [rsp - {poison_bytes}]\nmov rcx, {poison_words}\nmovabs rax, {poison}\nrep stosq"
    };
}

/// The harness of [`call_with_every_register`](crate::selftest::call_with_every_register).
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn every_register_harness() -> u64 {
    naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "pushfq",
        "cli",
        // 16-byte aligned here: the return address and seven pushes.
        poison_stack!(),
        "mov qword ptr [rip + {caller_sp}], rsp",
        mark!("rax", "01"),
        mark!("rbx", "02"),
        mark!("rcx", "03"),
        mark!("rdx", "04"),
        mark!("rsi", "05"),
        mark!("rdi", "06"),
        mark!("rbp", "07"),
        mark!("r8", "08"),
        mark!("r9", "09"),
        mark!("r10", "0a"),
        mark!("r11", "0b"),
        mark!("r12", "0c"),
        mark!("r13", "0d"),
        mark!("r14", "0e"),
        mark!("r15", "0f"),
        "stc",
        "call qword ptr [rip + {target}]",
        mark!("rax", "02"),
        "xor rax, rbx",
        mark!("rcx", "07"),
        "xor rcx, rbp",
        "or rax, rcx",
        mark!("rcx", "0c"),
        "xor rcx, r12",
        "or rax, rcx",
        mark!("rcx", "0d"),
        "xor rcx, r13",
        "or rax, rcx",
        mark!("rcx", "0e"),
        "xor rcx, r14",
        "or rax, rcx",
        mark!("rcx", "0f"),
        "xor rcx, r15",
        "or rax, rcx",
        "popfq",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
        poison_bytes = const POISON_BYTES,
        poison_words = const POISON_BYTES / 8,
        poison = const POISON,
        caller_sp = sym crate::selftest::CALLER_SP,
        target = sym crate::selftest::TARGET,
    )
}

/// Sets every caller-saved register to its [`EVERY_REGISTER`] mark, after
/// poisoning the stack under the caller's, and answers rax's mark: the last
/// act of a traced function whose return save a test reads (the function
/// returns the answer, and its epilogue touches only callee-saved
/// registers).
#[inline(always)]
pub fn mark_caller_saved_registers() -> u64 {
    let rax: u64;
    // SAFETY: writes registers it declares clobbered and the free stack
    // under the stack pointer (no red zone in the kernel).
    unsafe {
        core::arch::asm!(
            poison_stack!(),
            mark!("rcx", "03"),
            mark!("rdx", "04"),
            mark!("rsi", "05"),
            mark!("rdi", "06"),
            mark!("r8", "08"),
            mark!("r9", "09"),
            mark!("r10", "0a"),
            mark!("r11", "0b"),
            mark!("rax", "01"),
            poison_bytes = const POISON_BYTES,
            poison_words = const POISON_BYTES / 8,
            poison = const POISON,
            out("rax") rax,
            out("rcx") _,
            out("rdx") _,
            out("rsi") _,
            out("rdi") _,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        )
    };
    rax
}

/// What register `name` must hold in a save of kind `saved` taken inside a
/// [`call_with_every_register`](crate::selftest::call_with_every_register) call of `call.function`, a function that
/// ends with [`mark_caller_saved_registers`] when a return save is read:
/// `(mask, value)`, the bits of the register that are known and what they
/// are.
pub fn expected_in_save(name: &str, saved: Saved, call: EveryRegisterCall) -> (u64, u64) {
    let caller_sp = caller_sp();
    let at_entry = matches!(saved, Saved::EntryArgs | Saved::EntryFull);
    const IF: u64 = 1 << 9;
    const CF: u64 = 1;
    match name {
        // At entry the call's return address is on the stack.
        "rsp" => (!0, if at_entry { caller_sp - 8 } else { caller_sp }),
        "rip" => (!0, if at_entry { call.function } else { call.return_address } as u64),
        // Masked interrupts; the carry flag the harness set, at entry.
        "rflags" => match at_entry {
            true => (IF | CF, CF),
            false => (IF, 0),
        },
        "cs" => (0xffff, u64::from(CS::get_reg().0)),
        "ss" => (0xffff, u64::from(SS::get_reg().0)),
        _ => (!0, EVERY_REGISTER.iter().find(|(register, _)| *register == name).map_or(POISON, |(_, value)| *value)),
    }
}
