//! CPU control: interrupt flag, idling, breakpoints, frame pointer, stacks.

use core::arch::asm;

use crate::percpu::offsets;

/// The word at byte `OFFSET` of this CPU's `CpuLocal`: one load through
/// `gs`, with no load of the base first.
#[inline(always)]
fn gs_word<const OFFSET: usize>() -> usize {
    let value: usize;
    // SAFETY: `gs` points at this CPU's `CpuLocal` (`percpu::install`), and
    // every caller names the offset of one of its word-sized fields, or of
    // an aligned word of smaller ones (`sched_state`).
    unsafe {
        asm!("mov {}, qword ptr gs:[{off}]", out(reg) value, off = const OFFSET, options(nostack, readonly, preserves_flags))
    };
    value
}

/// This CPU's index (0 for the boot CPU).
#[inline(always)]
pub fn id() -> usize {
    gs_word::<{ offsets::CPU }>()
}

// The current task's words below are read and written with one
// `gs`-relative instruction each. That is what makes them safe in code that
// can be preempted: a task moved to another CPU between loading the
// per-CPU base and loading a field through it would read the CPU it left
// (another task's state); one instruction cannot be split that way.

/// This CPU's `CpuLocal::context` byte.
#[inline(always)]
pub(crate) fn context_byte() -> u8 {
    let value: u8;
    // SAFETY: as in `gs_word`, for the one-byte `context` field.
    unsafe {
        asm!("mov {}, byte ptr gs:[{off}]", out(reg_byte) value, off = const offsets::CONTEXT, options(nostack, readonly, preserves_flags))
    };
    value
}

/// Sets this CPU's `CpuLocal::context` byte.
#[inline(always)]
pub(crate) fn set_context_byte(value: u8) {
    // SAFETY: as in `gs_word`; the byte is this CPU's to write.
    unsafe {
        asm!("mov byte ptr gs:[{off}], {}", in(reg_byte) value, off = const offsets::CONTEXT, options(nostack, preserves_flags))
    };
}

/// The current task's tracing state pointer, `CpuLocal::task_trace` (the
/// traced path reads it several times a call).
#[inline(always)]
pub(crate) fn task_trace_word() -> usize {
    gs_word::<{ offsets::TASK_TRACE }>()
}

/// Sets `CpuLocal::task_trace` (at a task switch).
#[inline(always)]
pub(crate) fn set_task_trace_word(value: usize) {
    // SAFETY: as in `gs_word`; the word is this CPU's to write.
    unsafe {
        asm!("mov qword ptr gs:[{off}], {}", in(reg) value, off = const offsets::TASK_TRACE, options(nostack, preserves_flags))
    };
}

/// The current task, `CpuLocal::task`.
#[inline(always)]
pub(crate) fn task_word() -> usize {
    gs_word::<{ offsets::TASK }>()
}

/// This CPU's reschedule request and preempt count, as an event header
/// records them: one load of the word holding both (and the context), so
/// both come from the same CPU.
#[inline(always)]
pub(crate) fn sched_state() -> (bool, u32) {
    const _: () = assert!(offsets::CONTEXT.is_multiple_of(8));
    const _: () = assert!(offsets::NEED_RESCHED == offsets::CONTEXT + 1);
    const _: () = assert!(offsets::PREEMPT_COUNT == offsets::CONTEXT + 4);
    let word = gs_word::<{ offsets::CONTEXT }>();
    ((word >> 8) & 0xff != 0, (word >> 32) as u32)
}

/// The address of this CPU's `CpuLocal` (its first field points at itself).
#[inline(always)]
pub(crate) fn percpu_base() -> usize {
    gs_word::<{ offsets::SELF }>()
}

/// Points `gs` at this CPU's `CpuLocal`.
pub(crate) fn set_percpu_base(address: usize) {
    x86_64::registers::model_specific::GsBase::write(x86_64::VirtAddr::new(address as u64));
}

/// A serialising instruction: the CPU refetches instructions after it.
#[inline(always)]
pub fn serialize() {
    // SAFETY: cpuid has no effect but its output registers (rbx is
    // reserved by LLVM, hence the save); the `xor` changes the flags.
    unsafe { asm!("push rbx", "xor eax, eax", "cpuid", "pop rbx", out("eax") _, out("ecx") _, out("edx") _) };
}

/// Whether maskable interrupts are enabled (RFLAGS.IF).
#[inline(always)]
pub fn interrupts_enabled() -> bool {
    x86_64::instructions::interrupts::are_enabled()
}

/// Enables maskable interrupts.
#[inline(always)]
pub fn enable_interrupts() {
    x86_64::instructions::interrupts::enable();
}

/// Disables maskable interrupts.
#[inline(always)]
pub fn disable_interrupts() {
    x86_64::instructions::interrupts::disable();
}

/// Enables interrupts and sleeps until one arrives, with no window in which an
/// interrupt could be missed (`sti` takes effect after the following `hlt`).
#[inline(always)]
pub fn wait_for_interrupt() {
    x86_64::instructions::interrupts::enable_and_hlt();
}

/// Executes a breakpoint instruction (`int3`). The exception handler reports
/// it and execution continues after it.
#[inline(always)]
pub fn breakpoint() {
    // SAFETY: int3 traps to our handler, which returns to the next instruction.
    unsafe { asm!("int3", options(nomem, nostack)) };
}

/// The current frame pointer (RBP). Frame records have the same layout on both
/// architectures: `[fp] = caller's fp`, `[fp + 8] = return address`.
#[inline(always)]
pub fn frame_pointer() -> usize {
    let fp: usize;
    // SAFETY: reads a register.
    unsafe { asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags)) };
    fp
}

/// The current stack pointer.
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads a register.
    unsafe { asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

extern "C" {
    static __boot_stack_top: u8;
}

/// Abandons the current stack: resets the stack pointer to the top of the boot
/// stack and calls `f` with a null frame pointer. Used to resume the test run
/// after an expected panic, which may have happened deep inside an exception.
///
/// # Safety
/// Nothing on the abandoned stack may be used again (no live borrows into it,
/// no lock guards the rest of the kernel waits on).
pub unsafe fn reset_stack_and_call(f: extern "C" fn() -> !) -> ! {
    // SAFETY: the boot stack is ours; the caller guarantees nothing on it is
    // still needed. The stack top is 16-byte aligned, as a call expects.
    unsafe {
        asm!(
            "mov rsp, {top}",
            "xor ebp, ebp",
            "call {f}",
            "ud2",
            top = in(reg) core::ptr::addr_of!(__boot_stack_top),
            f = in(reg) f,
            options(noreturn)
        )
    }
}

/// KVM or TCG, from the hypervisor's CPUID leaf (0x4000_0000) signature.
pub fn accelerator() -> crate::Accelerator {
    // The hypervisor leaf returns zeros or a vendor signature.
    let leaf = core::arch::x86_64::__cpuid(0x4000_0000);
    let mut signature = [0u8; 12];
    signature[0..4].copy_from_slice(&leaf.ebx.to_le_bytes());
    signature[4..8].copy_from_slice(&leaf.ecx.to_le_bytes());
    signature[8..12].copy_from_slice(&leaf.edx.to_le_bytes());
    match &signature {
        b"KVMKVMKVM\0\0\0" => crate::Accelerator::Kvm,
        b"TCGTCGTCGTCG" => crate::Accelerator::Tcg,
        _ => crate::Accelerator::Unknown,
    }
}
