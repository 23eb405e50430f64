//! Switching between tasks: each task's callee-saved registers live on its
//! own stack while it is switched out, and [`TaskContext`] keeps only its
//! stack pointer.
//!
//! A switch pushes rbp, rbx and r12-r15, saves rsp, loads the next task's
//! rsp, pops the same registers and returns into the next task. A new
//! task's stack is built to look switched-out: its first "return" goes to
//! `task_entry`, which calls the task's entry function with its argument
//! (kept in r12 and r13) on an aligned stack, frame pointer null so
//! backtraces end there.

use core::arch::naked_asm;

/// A switched-out task: its stack pointer.
#[repr(C)]
#[derive(Debug, Default)]
pub struct TaskContext {
    sp: usize,
}

/// Registers a switch saves on the stack, then the return address.
const SAVED_WORDS: usize = 6;

impl TaskContext {
    /// A task that will start `entry(arg)` on the stack whose top (16-byte
    /// aligned) is `stack_top`, with interrupts as the switch leaves them
    /// (masked: the entry function enables them).
    ///
    /// # Safety
    /// `stack_top` is the top of a stack no one else uses, with room for the
    /// task.
    pub unsafe fn new(stack_top: usize, entry: extern "C" fn(usize) -> !, arg: usize) -> TaskContext {
        let words = [0u64, 0, arg as u64, entry as *const () as u64, 0, 0, task_entry as *const () as u64, 0];
        let sp = stack_top - words.len() * 8;
        // SAFETY: the caller gives us the stack; `sp` is inside it.
        unsafe { core::ptr::copy_nonoverlapping(words.as_ptr(), sp as *mut u64, words.len()) };
        const _: () = assert!(SAVED_WORDS + 2 == 8);
        TaskContext { sp }
    }
}

/// The first code of every task: `entry(arg)`.
#[unsafe(naked)]
extern "C" fn task_entry() -> ! {
    naked_asm!("mov rdi, r13", "and rsp, -16", "call r12", "ud2")
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
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "mov [rdi], rsp",
        "mov rsp, [rsi]",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
    )
}
