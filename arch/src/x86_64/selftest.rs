//! Helpers for the in-kernel tests of the tracing trampolines.

use core::arch::naked_asm;

use super::ftrace::Insn;

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
