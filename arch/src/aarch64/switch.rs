//! Switching between tasks: each task's callee-saved registers (x19-x30)
//! live on its own stack while it is switched out, and [`TaskContext`]
//! keeps only its stack pointer.
//!
//! A switch stores x19-x30 below sp, saves sp, loads the next task's sp,
//! loads the same registers and returns (through x30) into the next task.
//! A new task's stack is built to look switched-out: x30 is `task_entry`,
//! which calls the task's entry function (x19) with its argument (x20),
//! frame pointer null so backtraces end there.

use core::arch::naked_asm;

/// A switched-out task: its stack pointer.
#[repr(C)]
#[derive(Debug, Default)]
pub struct TaskContext {
    sp: usize,
}

/// Words a switch saves: x19-x28, x29, x30.
const SAVED_WORDS: usize = 12;

impl TaskContext {
    /// A task that will start `entry(arg)` on the stack whose top (16-byte
    /// aligned) is `stack_top`, with interrupts as the switch leaves them
    /// (masked: the entry function enables them).
    ///
    /// # Safety
    /// `stack_top` is the top of a stack no one else uses, with room for the
    /// task.
    pub unsafe fn new(stack_top: usize, entry: extern "C" fn(usize) -> !, arg: usize) -> TaskContext {
        let mut words = [0u64; SAVED_WORDS];
        words[0] = entry as *const () as u64; // x19
        words[1] = arg as u64; // x20
        words[11] = task_entry as *const () as u64; // x30
        let sp = stack_top - SAVED_WORDS * 8;
        // SAFETY: the caller gives us the stack; `sp` is inside it.
        unsafe { core::ptr::copy_nonoverlapping(words.as_ptr(), sp as *mut u64, SAVED_WORDS) };
        TaskContext { sp }
    }
}

/// The first code of every task: `entry(arg)`.
#[unsafe(naked)]
extern "C" fn task_entry() -> ! {
    naked_asm!("mov x0, x20", "mov x29, xzr", "blr x19", "brk #1")
}

/// Saves the running task's state in `prev` and resumes the task `next`
/// describes; returns when something switches back to `prev`.
///
/// # Safety
/// Interrupts masked; `next` is a switched-out task (or a new one) that
/// nothing else resumes at the same time; `prev` stays valid while the task
/// is switched out.
#[unsafe(naked)]
pub unsafe extern "C" fn switch(prev: *mut TaskContext, next: *const TaskContext) {
    naked_asm!(
        "sub sp, sp, #96",
        "stp x19, x20, [sp, #0]",
        "stp x21, x22, [sp, #16]",
        "stp x23, x24, [sp, #32]",
        "stp x25, x26, [sp, #48]",
        "stp x27, x28, [sp, #64]",
        "stp x29, x30, [sp, #80]",
        "mov x9, sp",
        "str x9, [x0]",
        "ldr x9, [x1]",
        "mov sp, x9",
        "ldp x19, x20, [sp, #0]",
        "ldp x21, x22, [sp, #16]",
        "ldp x23, x24, [sp, #32]",
        "ldp x25, x26, [sp, #48]",
        "ldp x27, x28, [sp, #64]",
        "ldp x29, x30, [sp, #80]",
        "add sp, sp, #96",
        "ret",
    )
}
