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
use core::mem::{offset_of, size_of};

/// A switched-out task: its stack pointer.
#[repr(C)]
#[derive(Debug, Default)]
pub struct TaskContext {
    sp: usize,
}

/// What a switched-out task keeps on top of its stack, lowest address
/// first: the callee-saved registers a switch stores (AAPCS64's x19-x28,
/// and the frame record).
#[repr(C)]
#[derive(Default)]
struct SwitchFrame {
    /// x19: a new task's entry function.
    x19: u64,
    /// x20: a new task's argument.
    x20: u64,
    x21_x28: [u64; 8],
    /// x29, the frame pointer: null for a new task, so backtraces end.
    fp: u64,
    /// x30: where the switch returns to (`task_entry` for a new task).
    lr: u64,
}

// The switch stores register pairs (`stp`): each pair's second register
// right after its first, and sp stays 16-byte aligned.
const _: () = {
    assert!(offset_of!(SwitchFrame, x20) == offset_of!(SwitchFrame, x19) + 8);
    assert!(offset_of!(SwitchFrame, x21_x28) == offset_of!(SwitchFrame, x20) + 8);
    assert!(offset_of!(SwitchFrame, fp) == offset_of!(SwitchFrame, x21_x28) + 64);
    assert!(offset_of!(SwitchFrame, lr) == offset_of!(SwitchFrame, fp) + 8);
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
            x19: entry as *const () as u64,
            x20: arg as u64,
            lr: task_entry as *const () as u64,
            ..SwitchFrame::default()
        };
        let sp = stack_top - size_of::<SwitchFrame>();
        // SAFETY: the caller gives us the stack; `sp` is inside it, 16-byte
        // aligned (the top is, and the frame's size is a multiple of 16).
        unsafe { (sp as *mut SwitchFrame).write(frame) };
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
        "sub sp, sp, #{size}",
        "stp x19, x20, [sp, #{x19}]",
        "stp x21, x22, [sp, #{x21}]",
        "stp x23, x24, [sp, #({x21} + 16)]",
        "stp x25, x26, [sp, #({x21} + 32)]",
        "stp x27, x28, [sp, #({x21} + 48)]",
        "stp x29, x30, [sp, #{fp}]",
        "mov x9, sp",
        "str x9, [x0, #{sp}]",
        "ldr x9, [x1, #{sp}]",
        "mov sp, x9",
        "ldp x19, x20, [sp, #{x19}]",
        "ldp x21, x22, [sp, #{x21}]",
        "ldp x23, x24, [sp, #({x21} + 16)]",
        "ldp x25, x26, [sp, #({x21} + 32)]",
        "ldp x27, x28, [sp, #({x21} + 48)]",
        "ldp x29, x30, [sp, #{fp}]",
        "add sp, sp, #{size}",
        "ret",
        size = const size_of::<SwitchFrame>(),
        x19 = const offset_of!(SwitchFrame, x19),
        x21 = const offset_of!(SwitchFrame, x21_x28),
        fp = const offset_of!(SwitchFrame, fp),
        sp = const offset_of!(TaskContext, sp),
    )
}
