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
use core::mem::{offset_of, size_of};

/// A switched-out task: its stack pointer.
#[repr(C)]
#[derive(Debug, Default)]
pub struct TaskContext {
    sp: usize,
}

/// What a switched-out task keeps on top of its stack, lowest address
/// first: the callee-saved registers a switch pushes (last pushed first),
/// then where the switch returns to.
#[repr(C)]
#[derive(Default)]
struct SwitchFrame {
    r15: u64,
    r14: u64,
    /// A new task's argument.
    r13: u64,
    /// A new task's entry function.
    r12: u64,
    rbx: u64,
    /// Null for a new task, so backtraces end.
    rbp: u64,
    /// Where the switch returns to (`task_entry` for a new task).
    ret: u64,
    /// Leaves a new task's stack as a call would: 8 below the aligned top.
    pad: u64,
}

// `switch` pushes rbp, rbx, r12-r15 in that order, and pops them back.
const _: () = {
    assert!(offset_of!(SwitchFrame, r15) == 0);
    assert!(offset_of!(SwitchFrame, r14) == 8);
    assert!(offset_of!(SwitchFrame, r13) == 16);
    assert!(offset_of!(SwitchFrame, r12) == 24);
    assert!(offset_of!(SwitchFrame, rbx) == 32);
    assert!(offset_of!(SwitchFrame, rbp) == 40);
    assert!(offset_of!(SwitchFrame, ret) == 48);
    assert!(size_of::<SwitchFrame>().is_multiple_of(16));
};

impl TaskContext {
    /// A task that will start `entry(arg)` on the stack whose top (16-byte
    /// aligned) is `stack_top`, with interrupts as the switch leaves them
    /// (masked: the entry function enables them).
    ///
    /// # Safety
    /// `stack_top` is the top of a stack no one else uses, with room for the
    /// task.
    pub unsafe fn new(stack_top: usize, entry: extern "C" fn(usize) -> !, arg: usize) -> TaskContext {
        let frame = SwitchFrame {
            r13: arg as u64,
            r12: entry as *const () as u64,
            ret: task_entry as *const () as u64,
            ..SwitchFrame::default()
        };
        let sp = stack_top - size_of::<SwitchFrame>();
        // SAFETY: the caller gives us the stack; `sp` is inside it, aligned
        // (the top is, and the frame's size is a multiple of 16).
        unsafe { (sp as *mut SwitchFrame).write(frame) };
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
        "mov [rdi + {sp}], rsp",
        "mov rsp, [rsi + {sp}]",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
        sp = const offset_of!(TaskContext, sp),
    )
}
