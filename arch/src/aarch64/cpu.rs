//! CPU control: interrupt mask, idling, breakpoints, frame pointer, stacks.

use core::arch::asm;

use crate::percpu::CpuLocal;

/// This CPU's index (0 for the boot CPU), from its `CpuLocal`.
#[inline(always)]
pub fn id() -> usize {
    // SAFETY: `tpidr_el1` points at this CPU's `CpuLocal` (`percpu::install`).
    unsafe { (*(percpu_base() as *const CpuLocal)).cpu }
}

// The current task's tracing state and the context live in registers of
// their own, not in `CpuLocal`: reaching a `CpuLocal` field takes two
// instructions (`mrs` of the base, then a load), and a task preempted and
// moved to another CPU between them would read the CPU it left, another
// task's state. One `mrs` cannot be split that way (x86_64 has the same
// guarantee from its one `gs`-relative load). Nothing runs at EL0 here, so
// the EL0 thread register `tpidr_el0` is free for the current task's
// tracing state; the context byte goes in `contextidr_el1`, a software
// context ID register (Linux may put a pid there for trace hardware).
// Each CPU writes its own at a task switch and at exception entry and exit.

/// This CPU's context byte (`contextidr_el1`).
#[inline(always)]
pub(crate) fn context_byte() -> u8 {
    let value: usize;
    // SAFETY: reads a system register.
    unsafe { asm!("mrs {}, contextidr_el1", out(reg) value, options(nomem, nostack, preserves_flags)) };
    value as u8
}

/// Sets this CPU's context byte.
#[inline(always)]
pub(crate) fn set_context_byte(value: u8) {
    // SAFETY: `contextidr_el1` only names the context to trace hardware,
    // which this kernel does not use; a direct read after this write
    // observes it (same register, program order).
    unsafe { asm!("msr contextidr_el1, {}", in(reg) value as usize, options(nomem, nostack, preserves_flags)) };
}

/// The current task's tracing state pointer (`tpidr_el0`).
#[inline(always)]
pub(crate) fn task_trace_word() -> usize {
    let value: usize;
    // SAFETY: reads a system register.
    unsafe { asm!("mrs {}, tpidr_el0", out(reg) value, options(nomem, nostack, preserves_flags)) };
    value
}

/// Sets the current task's tracing state pointer (at a task switch).
#[inline(always)]
pub(crate) fn set_task_trace_word(value: usize) {
    // SAFETY: `tpidr_el0` is the kernel's to use (no EL0 code runs).
    unsafe { asm!("msr tpidr_el0, {}", in(reg) value, options(nomem, nostack, preserves_flags)) };
}

/// The current task, `CpuLocal::task`, read with interrupts masked (so
/// with no preemption between the base and the field).
#[inline(always)]
pub(crate) fn task_word() -> usize {
    crate::irq::without_interrupts(|| crate::percpu::this().task.load(core::sync::atomic::Ordering::Relaxed))
}

/// This CPU's reschedule request and preempt count, as an event header
/// records them, read with interrupts masked (as [`task_word`]).
#[inline(always)]
pub(crate) fn sched_state() -> (bool, u32) {
    use core::sync::atomic::Ordering::Relaxed;
    crate::irq::without_interrupts(|| {
        let this = crate::percpu::this();
        (this.need_resched.load(Relaxed), this.preempt_count.load(Relaxed))
    })
}

/// The address of this CPU's `CpuLocal`.
#[inline(always)]
pub(crate) fn percpu_base() -> usize {
    let base: usize;
    // SAFETY: reads a system register.
    unsafe { asm!("mrs {}, tpidr_el1", out(reg) base, options(nomem, nostack, preserves_flags)) };
    base
}

/// Points `tpidr_el1` at this CPU's `CpuLocal`.
pub(crate) fn set_percpu_base(address: usize) {
    // SAFETY: `tpidr_el1` is the kernel's to use; nothing else reads it.
    unsafe { asm!("msr tpidr_el1, {}", in(reg) address, options(nomem, nostack, preserves_flags)) };
}

/// A barrier and instruction synchronisation: the CPU refetches
/// instructions after it.
#[inline(always)]
pub fn serialize() {
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack, preserves_flags)) };
}

/// Whether IRQs are unmasked (DAIF.I clear).
#[inline(always)]
pub fn interrupts_enabled() -> bool {
    let daif: u64;
    // SAFETY: reads a system register.
    unsafe { asm!("mrs {}, daif", out(reg) daif, options(nomem, nostack, preserves_flags)) };
    daif & (1 << 7) == 0
}

// Masking and unmasking are compiler barriers (no `nomem`), as x86_64's
// `cli`/`sti` and Linux's are: the state masking protects (per-CPU data,
// the ring buffer's writer) must be read and written between them, not
// moved across by the compiler.

/// Unmasks IRQs.
#[inline(always)]
pub fn enable_interrupts() {
    // SAFETY: unmasking IRQs; the vector table is installed before boot
    // enables them for the first time.
    unsafe { asm!("msr daifclr, #2", options(nostack, preserves_flags)) };
}

/// Masks IRQs.
#[inline(always)]
pub fn disable_interrupts() {
    // SAFETY: masking IRQs touches no memory (a barrier for the compiler
    // only).
    unsafe { asm!("msr daifset, #2", options(nostack, preserves_flags)) };
}

/// Sleeps until an interrupt is pending, then unmasks IRQs so it is taken.
/// `wfi` wakes on a pending interrupt even while masked, so none is missed.
#[inline(always)]
pub fn wait_for_interrupt() {
    // SAFETY: wfi only waits; unmasking as in `enable_interrupts`.
    unsafe { asm!("wfi", "msr daifclr, #2", options(nostack, preserves_flags)) };
}

/// Executes a breakpoint instruction (`brk #0`). The exception handler reports
/// it and execution continues after it.
#[inline(always)]
pub fn breakpoint() {
    // SAFETY: brk traps to our handler, which resumes at the next instruction.
    unsafe { asm!("brk #0", options(nomem, nostack)) };
}

/// The current frame pointer (x29). Frame records have the same layout on both
/// architectures: `[fp] = caller's fp`, `[fp + 8] = return address`.
#[inline(always)]
pub fn frame_pointer() -> usize {
    let fp: usize;
    // SAFETY: reads a register.
    unsafe { asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags)) };
    fp
}

/// The current stack pointer.
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads a register.
    unsafe { asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

extern "C" {
    static __boot_stack_top: u8;
}

/// Abandons the current stack: resets the stack pointer to the top of the boot
/// stack and calls `f` with a null frame pointer. Used to resume the test run
/// after an expected panic, which may have happened inside an exception.
///
/// # Safety
/// Nothing on the abandoned stack may be used again (no live borrows into it,
/// no lock guards the rest of the kernel waits on).
pub unsafe fn reset_stack_and_call(f: extern "C" fn() -> !) -> ! {
    // SAFETY: the boot stack is ours; the caller guarantees nothing on it is
    // still needed. The stack top is 16-byte aligned.
    unsafe {
        asm!(
            "mov sp, {top}",
            "mov x29, xzr",
            "mov x30, xzr",
            "br {f}",
            top = in(reg) core::ptr::addr_of!(__boot_stack_top),
            f = in(reg) f,
            options(noreturn)
        )
    }
}

/// The guest cannot ask on aarch64; QEMU runs it under TCG on this project's
/// (x86_64) hosts, so that is what it is.
pub fn accelerator() -> crate::Accelerator {
    crate::Accelerator::Tcg
}
