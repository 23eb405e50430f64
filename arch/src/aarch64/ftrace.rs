//! aarch64 function tracing: site geometry, instruction encodings, the two
//! entry trampolines and the two return trampolines.
//!
//! # A site
//!
//! Every traced function `F` is compiled with `-Zpatchable-function-entry=4,2`
//! (and 8-byte function alignment, so the literal is aligned):
//!
//! ```text
//! F-8:  nop; nop          the ops literal (never executed)
//! F:    nop               -> `mov x9, x30` once at boot (PREPARE)
//! F+4:  nop               <-> `bl ftrace_caller` / `bl ftrace_regs_caller`
//! F+8:  the function's prologue
//! ```
//!
//! Enabling and disabling then flip one 4-byte instruction, which a single
//! aligned store changes atomically. `x9` is a temporary register at function
//! entry (AAPCS64), free to carry the caller's return address.
//!
//! # The trampolines
//!
//! Entered by the `bl` with x30 = `F+8` and x9 = the caller's return address.
//! Each builds a `CallerFrame`: an `FtraceRegs` (sparse in `ftrace_caller`,
//! full in `ftrace_regs_caller`) whose x30 slot holds the *traced function's*
//! return address (x9), and two frame records so that backtraces taken inside
//! a callback show the traced function and its caller. It calls
//! `literal->func(F, parent_ip, literal, &fregs)`, where the literal is the
//! doubleword at `F-8 = x30-16`.
//!
//! Around the call the trampoline keeps the running task's counters
//! (`TrampolineCounters`, through `tpidr_el0`): `active` up before it reads
//! the literal, down after the callbacks, and `exits` up when that reaches
//! zero, so a grace period can tell when no task still uses an ops.
//!
//! Afterwards it restores the saved registers, puts the (possibly changed)
//! return address back in x30 and the stack pointer back (from its own
//! frame: a callback that changes the saved sp moves nothing, as in Linux),
//! and branches through x9 to `F+8`, or to the instruction pointer a
//! callback set (`IPMODIFY`; `override_function_with_return` sets it to
//! `ftrace_just_return`, a lone `ret` through x30, skipping the function).
//! x9 is the one register the site itself already uses (`mov x9, x30`), so
//! the branch clobbers nothing the function could see: every other register
//! a save holds is restored, x16 and x17 included.
//!
//! # The return trampolines
//!
//! A hooked function returns to `return_to_handler` instead of its caller (the
//! return hook replaced the link register at entry). sp and x29 are then the
//! caller's again and x0-x7 hold the return value. The trampoline saves the
//! return registers (all of them in `return_to_handler_regs`) in an
//! `FtraceRegs`, links a frame record so backtraces taken in a return callback
//! continue into the caller, calls `ftrace_return_to_handler(&fregs)`, which
//! answers the real return address, restores the (possibly changed) registers
//! and returns there.
//!
//! Both directions share the register save and restore sequences below.

use core::arch::global_asm;
use core::mem::{offset_of, size_of};

use crate::ftrace_abi::{
    FtraceRegs, OutOfRange, PtRegs, Saved, COUNTERS_ACTIVE, COUNTERS_EXITS, FTRACE_REGS_PT, FTRACE_REGS_SAVED, SITE_CALL_FUNC,
    SITE_CALL_SPARSE_FUNC,
};

/// Bytes of the patchable instruction at a site.
pub const INSN_LEN: usize = 4;
/// A patchable instruction.
pub type Insn = [u8; INSN_LEN];
/// Where the patchable instruction sits, from the function's address.
pub const CALL_OFFSET: usize = 4;
/// Bytes of the last instruction of every trampoline (`ret`, `br`).
pub const RETURN_INSN_LEN: usize = 4;

/// Whether `address` is kernel text right after a call instruction (`bl`
/// or `blr`): what every real return address is. The return hook checks
/// each return address it answers, so a shadow-stack word gone wrong stops
/// with a report instead of a jump anywhere: [`follows_direct_call`] first,
/// this for the rest.
pub fn follows_call(address: usize) -> bool {
    let text = crate::layout::text();
    if address < text.start + INSN_LEN || address > text.end || !address.is_multiple_of(INSN_LEN) {
        return false;
    }
    // SAFETY: kernel text (checked just above), always mapped readable.
    let insn = unsafe { *((address - INSN_LEN) as *const u32) };
    insn & 0xfc00_0000 == 0x9400_0000 || insn & 0xffff_fc1f == 0xd63f_0000
}

/// Whether the instruction before `address` is a `bl`: reads it, checks
/// nothing else.
///
/// # Safety
/// `address - 4` must be readable: a return address the kernel recorded
/// (if it has gone wrong so badly that the read faults, the fault is
/// reported too).
#[inline(always)]
pub unsafe fn follows_direct_call(address: usize) -> bool {
    // SAFETY: the caller's promise (an unaligned read of text is allowed).
    unsafe { core::ptr::read_unaligned((address - INSN_LEN) as *const u32) & 0xfc00_0000 == 0x9400_0000 }
}

/// The compiled NOP.
pub const NOP: Insn = 0xd503_201f_u32.to_le_bytes();
/// `mov x9, x30` (orr x9, xzr, x30).
pub const MOV_X9_X30: Insn = 0xaa1e_03e9_u32.to_le_bytes();
/// The bytes of an unused ops literal (the compiler's two prefix NOPs).
pub const LITERAL_NOPS: u64 = 0xd503_201f_d503_201f;

/// Instructions each site needs changed once at boot, before it is first
/// enabled: (offset from the function, compiled bytes, prepared bytes).
pub const PREPARE: &[(usize, Insn, Insn)] = &[(0, NOP, MOV_X9_X30)];

/// `bl target` placed at `at`; `bl` reaches +-128 MiB.
pub fn call_insn(at: usize, target: usize) -> Result<Insn, OutOfRange> {
    let offset = (target as i64).wrapping_sub(at as i64);
    if offset % 4 != 0 || !(-(1 << 27)..(1 << 27)).contains(&offset) {
        return Err(OutOfRange { from: at, to: target });
    }
    let imm26 = ((offset >> 2) as u32) & 0x03ff_ffff;
    Ok((0x9400_0000 | imm26).to_le_bytes())
}

/// The entry trampolines' stack frame, lowest address first.
#[repr(C)]
pub(crate) struct CallerFrame {
    pub(crate) fregs: FtraceRegs,
    /// Frame record of the traced function: (caller record, F+8).
    pub(crate) function_record: FrameRecord,
    /// Frame record of the caller: (caller's x29, parent ip).
    pub(crate) callsite_record: FrameRecord,
}

/// An AAPCS64 frame record, as `stp x29, x30` stores it.
#[repr(C)]
pub(crate) struct FrameRecord {
    fp: u64,
    lr: u64,
}

/// The return trampolines' stack frame, lowest address first.
#[repr(C)]
pub(crate) struct ReturnFrame {
    pub(crate) fregs: FtraceRegs,
    /// Frame record: (caller's x29, address inside the trampoline).
    pub(crate) record: FrameRecord,
}

const FRAME: usize = size_of::<CallerFrame>();
const RETURN_FRAME: usize = size_of::<ReturnFrame>();
/// Where `PtRegs` sits in both frames (the shared macros address it so).
const PT: usize = offset_of!(CallerFrame, fregs) + FTRACE_REGS_PT;
const X0: usize = PT + offset_of!(PtRegs, regs);

const _: () = {
    assert!(FRAME.is_multiple_of(16) && RETURN_FRAME.is_multiple_of(16), "sp stays 16-byte aligned");
    assert!(FRAME <= 504 && RETURN_FRAME <= 504, "stp/ldp immediate offsets reach the whole frame");
    assert!(offset_of!(CallerFrame, fregs) == 0, "callbacks get &fregs = sp");
    assert!(offset_of!(ReturnFrame, fregs) + FTRACE_REGS_PT == PT);
    assert!(offset_of!(PtRegs, pc) == offset_of!(PtRegs, sp) + 8, "one stp stores sp and pc");
    assert!(COUNTERS_EXITS == COUNTERS_ACTIVE + 4, "one ldp/stp reaches both counters");
};

global_asm!(
    r#"
    /* What a return save keeps: x0-x7, the return value (x8 carries
       nothing back to the caller, and the return save does not record it). */
    .macro ftrace_save_return_regs
    stp x0, x1, [sp, #({x0} + 0 * 8)]
    stp x2, x3, [sp, #({x0} + 2 * 8)]
    stp x4, x5, [sp, #({x0} + 4 * 8)]
    stp x6, x7, [sp, #({x0} + 6 * 8)]
    .endm

    .macro ftrace_restore_return_regs
    ldp x0, x1, [sp, #({x0} + 0 * 8)]
    ldp x2, x3, [sp, #({x0} + 2 * 8)]
    ldp x4, x5, [sp, #({x0} + 4 * 8)]
    ldp x6, x7, [sp, #({x0} + 6 * 8)]
    .endm

    /* The argument registers and x8 (the indirect result register): what
       ftrace_caller saves (and return_to_handler_regs, with the rest). */
    .macro ftrace_save_arg_regs
    ftrace_save_return_regs
    str x8, [sp, #({x0} + 8 * 8)]
    .endm

    .macro ftrace_restore_arg_regs
    ftrace_restore_return_regs
    ldr x8, [sp, #({x0} + 8 * 8)]
    .endm

    /* Everything else a full save adds: x9-x28 and PSTATE (NZCV, DAIF,
       EL1h). x9 holds the caller's return address by now (the site's
       `mov x9, x30`): the restore leaves it, the branch uses it. */
    .macro ftrace_save_rest_regs
    stp xzr, xzr, [sp, #({pt} + {stackframe})]  /* the frame records are the trampoline's own */
    str x9, [sp, #({x0} + 9 * 8)]
    stp x10, x11, [sp, #({x0} + 10 * 8)]
    stp x12, x13, [sp, #({x0} + 12 * 8)]
    stp x14, x15, [sp, #({x0} + 14 * 8)]
    stp x16, x17, [sp, #({x0} + 16 * 8)]
    stp x18, x19, [sp, #({x0} + 18 * 8)]
    stp x20, x21, [sp, #({x0} + 20 * 8)]
    stp x22, x23, [sp, #({x0} + 22 * 8)]
    stp x24, x25, [sp, #({x0} + 24 * 8)]
    stp x26, x27, [sp, #({x0} + 26 * 8)]
    str x28, [sp, #({x0} + 28 * 8)]
    mrs x10, nzcv
    mrs x11, daif
    orr x10, x10, x11
    mov x11, #5                         /* EL1h: CurrentEL 1, SPSel 1 */
    orr x10, x10, x11
    str x10, [sp, #({pt} + {pstate})]
    .endm

    .macro ftrace_restore_rest_regs
    ldr x10, [sp, #({pt} + {pstate})]
    msr nzcv, x10
    ldp x10, x11, [sp, #({x0} + 10 * 8)]
    ldp x12, x13, [sp, #({x0} + 12 * 8)]
    ldp x14, x15, [sp, #({x0} + 14 * 8)]
    ldp x16, x17, [sp, #({x0} + 16 * 8)]
    ldp x18, x19, [sp, #({x0} + 18 * 8)]
    ldp x20, x21, [sp, #({x0} + 20 * 8)]
    ldp x22, x23, [sp, #({x0} + 22 * 8)]
    ldp x24, x25, [sp, #({x0} + 24 * 8)]
    ldp x26, x27, [sp, #({x0} + 26 * 8)]
    ldr x28, [sp, #({x0} + 28 * 8)]
    .endm

    /* Entry, middle part: the save's tag and entry sp, sp, pc, the frame
       records, then the literal's handler at offset `func` (literal->func
       or literal->sparse_func)(ip = F, parent_ip = x9, literal, &fregs). */
    .macro ftrace_call_ops saved, func
    mrs x10, tpidr_el0                  /* the task's state: one instruction */
    ldr w11, [x10, #{active}]
    add w11, w11, #1
    str w11, [x10, #{active}]
    stp x29, x9, [sp, #({x0} + 29 * 8)] /* fp; lr: the traced function's return address */
    add x10, sp, #{frame}
    mov x11, #\saved
    stp x11, x10, [sp, #{saved}]        /* saved, entry_sp: adjacent (checked in ftrace_abi) */
    sub x0, x30, #{call_end}            /* ip = F (x0 is saved already) */
    stp x10, x0, [sp, #({pt} + {sp})]   /* sp, pc: adjacent (checked above) */
    stp x29, x9, [sp, #{callsite}]
    add x29, sp, #{callsite}
    stp x29, x30, [sp, #{function_record}]
    add x29, sp, #{function_record}
    ldur x2, [x30, #-({call_end} + {literal_bytes})] /* the ops literal at F-8 */
    mov x1, x9
    mov x3, sp
    ldr x4, [x2, #\func]
    blr x4
    mrs x10, tpidr_el0                  /* the same task, maybe another CPU */
    ldp w11, w12, [x10, #{active}]      /* active, exits: adjacent (checked above) */
    subs w11, w11, #1
    b.ne 1f
    add w12, w12, #1                    /* left the outermost trampoline */
1:  stp w11, w12, [x10, #{active}]
    .endm

    /* x9 = where to resume: F+8, or the ip a callback set. Before the
       register restore: it uses x10 and x11. */
    .macro ftrace_resume_target
    ldr x9, [sp, #({pt} + {pc})]
    ldr x10, [sp, #{function_record_lr}]
    sub x11, x10, #{call_end}
    cmp x9, x11
    csel x9, x10, x9, eq
    .endm

    /* Entry, last part: fp, lr (maybe changed by the return hook), sp. */
    .macro ftrace_resume
    ldp x29, x30, [sp, #({x0} + 29 * 8)]
    add sp, sp, #{frame}
    br x9
    .endm

    /* Return, middle part: fp, sp as the caller sees them, the frame record,
       then ftrace_return_to_handler(&fregs); x30 = the real return address. */
    .macro ftrace_return_call_handler saved
    str x29, [sp, #({x0} + 29 * 8)]
    add x9, sp, #{return_frame}
    str x9, [sp, #({pt} + {sp})]
    mov x9, #\saved
    str x9, [sp, #{saved}]
    stp x29, x30, [sp, #{record}]       /* x30: the trampoline itself */
    add x29, sp, #{record}
    mov x0, sp
    bl ftrace_return_to_handler
    mov x30, x0
    .endm

    .pushsection .text.ftrace, "ax"
    .p2align 3
    .global ftrace_caller
    .type ftrace_caller, %function
ftrace_caller:
    sub sp, sp, #{frame}
    ftrace_save_arg_regs
    ftrace_call_ops {saved_args}, {sparse_func}
    ftrace_resume_target
    ftrace_restore_arg_regs
    ftrace_resume
    .size ftrace_caller, . - ftrace_caller

    .p2align 3
    .global ftrace_regs_caller
    .type ftrace_regs_caller, %function
ftrace_regs_caller:
    sub sp, sp, #{frame}
    ftrace_save_arg_regs
    ftrace_save_rest_regs
    ftrace_call_ops {saved_full}, {func}
    ftrace_resume_target
    ftrace_restore_arg_regs
    ftrace_restore_rest_regs
    ftrace_resume
    .size ftrace_regs_caller, . - ftrace_regs_caller

    .p2align 3
    .global return_to_handler
    .type return_to_handler, %function
return_to_handler:
    sub sp, sp, #{return_frame}
    ftrace_save_return_regs
    ftrace_return_call_handler {saved_return}
    ftrace_restore_return_regs
    ldr x29, [sp, #({x0} + 29 * 8)]
    add sp, sp, #{return_frame}
    ret
    .size return_to_handler, . - return_to_handler

    .p2align 3
    .global return_to_handler_regs
    .type return_to_handler_regs, %function
return_to_handler_regs:
    sub sp, sp, #{return_frame}
    ftrace_save_arg_regs
    ftrace_save_rest_regs
    ftrace_return_call_handler {saved_return_full}
    ftrace_restore_arg_regs
    ftrace_restore_rest_regs
    ldr x9, [sp, #({x0} + 9 * 8)]
    ldr x29, [sp, #({x0} + 29 * 8)]
    add sp, sp, #{return_frame}
    ret
    .size return_to_handler_regs, . - return_to_handler_regs
    .popsection
"#,
    frame = const FRAME,
    return_frame = const RETURN_FRAME,
    pt = const PT,
    x0 = const X0,
    sp = const offset_of!(PtRegs, sp),
    pc = const offset_of!(PtRegs, pc),
    pstate = const offset_of!(PtRegs, pstate),
    stackframe = const offset_of!(PtRegs, stackframe),
    saved = const offset_of!(CallerFrame, fregs) + FTRACE_REGS_SAVED,
    saved_args = const Saved::EntryArgs as u64,
    saved_full = const Saved::EntryFull as u64,
    saved_return = const Saved::Return as u64,
    saved_return_full = const Saved::ReturnFull as u64,
    callsite = const offset_of!(CallerFrame, callsite_record),
    function_record = const offset_of!(CallerFrame, function_record),
    function_record_lr = const offset_of!(CallerFrame, function_record) + offset_of!(FrameRecord, lr),
    call_end = const CALL_OFFSET + INSN_LEN,
    literal_bytes = const crate::ftrace_abi::LITERAL_BYTES,
    record = const offset_of!(ReturnFrame, record),
    func = const SITE_CALL_FUNC,
    sparse_func = const SITE_CALL_SPARSE_FUNC,
    active = const COUNTERS_ACTIVE,
);

// What `override_function_with_return` resumes at: returning from here is
// returning from the skipped function, through its return address as it
// stands in x30 (a return hook may have replaced it).
global_asm!(
    r#"
    .pushsection .text.ftrace, "ax"
    .p2align 3
    .global ftrace_just_return
    .type ftrace_just_return, %function
ftrace_just_return:
    ret
    .size ftrace_just_return, . - ftrace_just_return
    .popsection
"#
);
