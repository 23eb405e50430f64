//! x86_64 function tracing: site geometry, instruction encodings, the two
//! entry trampolines and the two return trampolines.
//!
//! # A site
//!
//! Every traced function `F` is compiled with `-Zpatchable-function-entry=13,8`:
//!
//! ```text
//! F-8:  90 90 90 90 90 90 90 90    the ops literal (never executed)
//! F:    0f 1f 44 00 08             5-byte NOP  <->  call ftrace_caller / ftrace_regs_caller
//! F+5:  the function's prologue
//! ```
//!
//! # The trampolines
//!
//! Entered by the site's `call`, so `[rsp]` is `F+5` and `[rsp+8]` the
//! caller's return address. Each builds a `CallerFrame` on the stack:
//! an `FtraceRegs` (sparse in `ftrace_caller`, full in `ftrace_regs_caller`)
//! and two frame records, one for the traced function and one for its
//! caller, so that backtraces taken inside a callback show both. It then
//! calls `literal->func(F, parent_ip, literal, &fregs)`.
//!
//! Around the call the trampoline keeps the running task's counters
//! (`TrampolineCounters`, through `%gs`): `active` up before it reads the
//! literal, down after the callbacks, and `exits` up when that reaches
//! zero, so a grace period can tell when no task still uses an ops.
//!
//! Afterwards it resumes at `F+5`, or at the new instruction pointer if a
//! callback changed it (`IPMODIFY`, or `override_function_with_return`, which
//! points it at `ftrace_just_return`, a lone `ret`). Both cases run the
//! same code: the resume address replaces `F+5` in the slot the site's `call`
//! pushed, and a single `ret` jumps there with the function's entry stack;
//! `ftrace_regs_caller` also restores RFLAGS with `popfq`, from the frame's
//! last word. Both come from the trampoline's own frame, never from the saved
//! `rsp`: a callback that changes that moves nothing (as in Linux). The final
//! stack pointer is set in one instruction, so an interrupt can never land on
//! a half-built return slot.
//!
//! # The return trampolines
//!
//! A hooked function returns to `return_to_handler` instead of its caller (the
//! return hook replaced the return address at entry). RSP is then just above
//! the popped return address, so 16-byte aligned, and RAX:RDX hold the return
//! value. The trampoline saves the return registers (all of them in
//! `return_to_handler_regs`) in an `FtraceRegs`, links a frame record so
//! backtraces taken in a return callback continue into the caller, and calls
//! `ftrace_return_to_handler(&fregs)`, which answers the real return address.
//! It then restores the (possibly changed) registers and returns there through
//! the frame's last word, so no register is needed to hold the target.
//!
//! Both directions share the register save and restore sequences below.

use core::arch::global_asm;
use core::mem::{offset_of, size_of};

use crate::ftrace_abi::{
    FtraceRegs, OutOfRange, PtRegs, Saved, COUNTERS_ACTIVE, COUNTERS_EXITS, FTRACE_REGS_ENTRY_SP, FTRACE_REGS_PT,
    FTRACE_REGS_SAVED, SITE_CALL_FUNC, SITE_CALL_SPARSE_FUNC,
};
use crate::percpu::offsets::TASK_TRACE;

/// Bytes of the patchable instruction at a site.
pub const INSN_LEN: usize = 5;
/// A patchable instruction.
pub type Insn = [u8; INSN_LEN];
/// Where the patchable instruction sits, from the function's address.
pub const CALL_OFFSET: usize = 0;
// The trampolines find F as their return address minus INSN_LEN alone.
const _: () = assert!(CALL_OFFSET == 0);
/// Bytes of the last instruction of every trampoline (`ret`).
pub const RETURN_INSN_LEN: usize = 1;
/// The compiled NOP at the call slot.
pub const NOP: Insn = [0x0f, 0x1f, 0x44, 0x00, 0x08];
/// The bytes of an unused ops literal (the compiler's prefix NOPs).
pub const LITERAL_NOPS: u64 = 0x9090_9090_9090_9090;

/// `call target` placed at `at`.
pub fn call_insn(at: usize, target: usize) -> Result<Insn, OutOfRange> {
    let displacement = (target as i64).wrapping_sub((at + INSN_LEN) as i64);
    let rel = i32::try_from(displacement).map_err(|_| OutOfRange { from: at, to: target })?;
    let b = rel.to_le_bytes();
    Ok([0xe8, b[0], b[1], b[2], b[3]])
}

/// Whether `address` is kernel text right after a call instruction: what
/// every real return address is. The return hook checks each return
/// address it answers, so a shadow-stack word gone wrong stops with a
/// report instead of a jump anywhere: [`follows_direct_call`] first (the
/// compiler's usual call, one compare), this for the rest.
pub fn follows_call(address: usize) -> bool {
    let text = crate::layout::text();
    if address < text.start + MAX_CALL_LEN || address > text.end {
        return false;
    }
    // SAFETY: kernel text (checked just above), always mapped readable.
    let direct = unsafe { follows_direct_call(address) };
    direct || (2..=MAX_CALL_LEN).any(|len| indirect_call_len(address - len) == Some(len))
}

/// Whether the 5 bytes before `address` are a `call rel32`: reads one
/// byte, checks nothing else.
///
/// # Safety
/// `address - 5` must be readable: a return address the kernel recorded
/// (if it has gone wrong so badly that the read faults, the fault is
/// reported too).
#[inline(always)]
pub unsafe fn follows_direct_call(address: usize) -> bool {
    // SAFETY: the caller's promise.
    unsafe { *((address - CALL_REL32_LEN) as *const u8) == 0xe8 }
}

/// The length of `call rel32`.
const CALL_REL32_LEN: usize = 5;

/// The longest near indirect call: a REX prefix, `ff`, ModRM, SIB and a
/// 32-bit displacement.
const MAX_CALL_LEN: usize = 8;

/// If the bytes at `at` (kernel text, at least [`MAX_CALL_LEN`] of them)
/// are a near indirect call (`ff /2`, with a REX prefix or not), its
/// length: the ModRM form decides how many SIB and displacement bytes
/// follow.
fn indirect_call_len(at: usize) -> Option<usize> {
    // SAFETY: the caller's promise: kernel text, always mapped readable.
    let byte = |offset: usize| unsafe { *((at + offset) as *const u8) };
    let rex = usize::from(byte(0) & 0xf0 == 0x40);
    if byte(rex) != 0xff {
        return None;
    }
    let modrm = byte(rex + 1);
    let (mode, reg, rm) = (modrm >> 6, (modrm >> 3) & 7, modrm & 7);
    if reg != 2 {
        return None;
    }
    let sib = usize::from(mode != 3 && rm == 4);
    let base = if sib == 1 { byte(rex + 2) & 7 } else { rm };
    let displacement = match mode {
        0 if rm == 5 || sib == 1 && base == 5 => 4,
        1 => 1,
        2 => 4,
        _ => 0,
    };
    Some(rex + 2 + sib + displacement)
}

/// Instructions each site needs changed once at boot, before it is first
/// enabled: (offset from the function, compiled bytes, prepared bytes). On
/// x86_64 the compiled NOP is already the disabled state: nothing.
pub const PREPARE: &[(usize, Insn, Insn)] = &[];

/// The entry trampolines' stack frame, lowest address first.
#[repr(C)]
pub(crate) struct CallerFrame {
    pub(crate) fregs: FtraceRegs,
    /// Frame record of the traced function: (caller record, F+5).
    pub(crate) function_record: [u64; 2],
    /// Frame record of the caller: (caller's rbp, parent ip).
    pub(crate) callsite_record: [u64; 2],
}

/// The return trampolines' stack frame, lowest address first.
#[repr(C)]
pub(crate) struct ReturnFrame {
    pub(crate) fregs: FtraceRegs,
    /// Frame record: (caller's rbp, address inside the trampoline); after
    /// the callbacks, (RFLAGS, real return address) for `popfq; ret`.
    pub(crate) record: [u64; 2],
}

const FRAME: usize = size_of::<CallerFrame>();
const RETURN_FRAME: usize = size_of::<ReturnFrame>();
/// Where `PtRegs` sits in both frames (the shared macros address it so).
const PT: usize = offset_of!(CallerFrame, fregs) + FTRACE_REGS_PT;

const _: () = {
    // Entered with rsp 16-byte aligned (the traced function's caller had it
    // at 8 mod 16 after its call; the site's call pushed 8 more).
    assert!(FRAME.is_multiple_of(16));
    // ftrace_regs_caller parks RFLAGS just below the resume slot, on the
    // frame's last word, which is no longer needed by then.
    assert!(offset_of!(CallerFrame, callsite_record) + 16 == FRAME);
    // The callbacks get `&fregs` as the frame's own address.
    assert!(offset_of!(CallerFrame, fregs) == 0);
    // A hooked function returns with rsp 16-byte aligned.
    assert!(RETURN_FRAME.is_multiple_of(16));
    assert!(offset_of!(ReturnFrame, fregs) + FTRACE_REGS_PT == PT);
    // `popfq; ret` from the record: it must be the frame's last 16 bytes.
    assert!(offset_of!(ReturnFrame, record) + 16 == RETURN_FRAME);
};

global_asm!(
    r#"
    /* The registers meaningful at function entry: what ftrace_caller saves
       (and, but for rsi/rdi/rcx/r8/r9, what return_to_handler saves). */
    .macro ftrace_save_entry_regs
    movq %rdi, {pt}+{rdi}(%rsp)
    movq %rsi, {pt}+{rsi}(%rsp)
    movq %rdx, {pt}+{rdx}(%rsp)
    movq %rcx, {pt}+{rcx}(%rsp)
    movq %r8, {pt}+{r8}(%rsp)
    movq %r9, {pt}+{r9}(%rsp)
    movq %rax, {pt}+{rax}(%rsp)
    movq %rbp, {pt}+{rbp}(%rsp)
    .endm

    .macro ftrace_restore_entry_regs
    movq {pt}+{rdi}(%rsp), %rdi
    movq {pt}+{rsi}(%rsp), %rsi
    movq {pt}+{rdx}(%rsp), %rdx
    movq {pt}+{rcx}(%rsp), %rcx
    movq {pt}+{r8}(%rsp), %r8
    movq {pt}+{r9}(%rsp), %r9
    movq {pt}+{rax}(%rsp), %rax
    movq {pt}+{rbp}(%rsp), %rbp
    .endm

    /* Everything else a full save adds: the other registers, RFLAGS, the
       segment selectors, and the PtRegs fields only exceptions use. Must come
       first after the frame is allocated with lea, which keeps RFLAGS. */
    .macro ftrace_save_rest_regs
    movq %rbx, {pt}+{rbx}(%rsp)
    movq %r10, {pt}+{r10}(%rsp)
    movq %r11, {pt}+{r11}(%rsp)
    movq %r12, {pt}+{r12}(%rsp)
    movq %r13, {pt}+{r13}(%rsp)
    movq %r14, {pt}+{r14}(%rsp)
    movq %r15, {pt}+{r15}(%rsp)
    pushfq
    popq {pt}+{rflags}(%rsp)
    movq %cs, %rax
    movq %rax, {pt}+{cs}(%rsp)
    movq %ss, %rax
    movq %rax, {pt}+{ss}(%rsp)
    movq $-1, {pt}+{vector}(%rsp)
    movq $0, {pt}+{error_code}(%rsp)
    .endm

    .macro ftrace_restore_rest_regs
    movq {pt}+{rbx}(%rsp), %rbx
    movq {pt}+{r10}(%rsp), %r10
    movq {pt}+{r11}(%rsp), %r11
    movq {pt}+{r12}(%rsp), %r12
    movq {pt}+{r13}(%rsp), %r13
    movq {pt}+{r14}(%rsp), %r14
    movq {pt}+{r15}(%rsp), %r15
    .endm

    /* Entry, middle part: fill rsp/rip and the frame records, then call
       the literal's handler at offset `func` (literal->func or
       literal->sparse_func)(ip = F, parent_ip, literal, &fregs), the task's
       `active` counter raised around it (rax is saved by now). */
    .macro ftrace_call_ops func
    movq %gs:{task_trace}, %rax
    incl {active}(%rax)
    leaq ({frame} + 8)(%rsp), %rax      /* the function's entry rsp: at the return address */
    movq %rax, {pt}+{rsp}(%rsp)
    movq %rax, {entry_sp}(%rsp)
    movq {frame}(%rsp), %rax            /* F+5, pushed by the site's call */
    movq ({frame} + 8)(%rsp), %rsi      /* the caller's return address: parent_ip */
    movq %rbp, {callsite}(%rsp)
    movq %rsi, {callsite}+8(%rsp)
    leaq {callsite}(%rsp), %rbp
    movq %rbp, {function_record}(%rsp)
    movq %rax, {function_record}+8(%rsp)
    leaq {function_record}(%rsp), %rbp
    movq -({insn_len} + {literal_bytes})(%rax), %rdx  /* the ops literal at F-8 */
    leaq -{insn_len}(%rax), %rdi        /* ip = F */
    movq %rdi, {pt}+{rip}(%rsp)
    movq %rsp, %rcx                     /* &fregs */
    call *\func(%rdx)
    movq %gs:{task_trace}, %rax         /* the same task, maybe another CPU */
    decl {active}(%rax)
    jnz 1f
    incl {exits}(%rax)
1:
    .endm

    /* rax = where to resume (F+5, or the ip a callback set). */
    .macro ftrace_resume_target
    movq {pt}+{rip}(%rsp), %rax
    movq {function_record}+8(%rsp), %rdx
    leaq -{insn_len}(%rdx), %rcx
    cmpq %rax, %rcx
    cmoveq %rdx, %rax
    .endm

    /* Return, middle part: rsp as the caller sees it, the frame record,
       then ftrace_return_to_handler(&fregs); rax = the real return address. */
    .macro ftrace_return_call_handler saved, trampoline
    leaq {return_frame}(%rsp), %rax
    movq %rax, {pt}+{rsp}(%rsp)
    movq $\saved, {saved}(%rsp)
    movq %rbp, {record}(%rsp)
    leaq \trampoline(%rip), %rax
    movq %rax, {record}+8(%rsp)
    leaq {record}(%rsp), %rbp
    movq %rsp, %rdi
    call ftrace_return_to_handler
    .endm

    .pushsection .text.ftrace, "ax"
    .p2align 4
    .global ftrace_caller
    .type ftrace_caller, @function
ftrace_caller:
    subq ${frame}, %rsp
    ftrace_save_entry_regs
    movq ${saved_args}, {saved}(%rsp)
    ftrace_call_ops {sparse_func}
    ftrace_resume_target
    movq %rax, {frame}(%rsp)            /* over F+5, in the site call's own slot */
    ftrace_restore_entry_regs
    leaq {frame}(%rsp), %rsp
    ret
    .size ftrace_caller, . - ftrace_caller

    .p2align 4
    .global ftrace_regs_caller
    .type ftrace_regs_caller, @function
ftrace_regs_caller:
    leaq -{frame}(%rsp), %rsp           /* lea: RFLAGS must reach pushfq unchanged */
    ftrace_save_entry_regs
    ftrace_save_rest_regs
    movq ${saved_full}, {saved}(%rsp)
    ftrace_call_ops {func}
    ftrace_resume_target
    movq %rax, {frame}(%rsp)            /* over F+5, in the site call's own slot */
    movq {pt}+{rflags}(%rsp), %rax
    movq %rax, ({frame} - 8)(%rsp)      /* the frame's last word */
    ftrace_restore_entry_regs
    ftrace_restore_rest_regs
    leaq ({frame} - 8)(%rsp), %rsp      /* lea: RFLAGS stay as restored below */
    popfq
    ret
    .size ftrace_regs_caller, . - ftrace_regs_caller

    .p2align 4
    .global return_to_handler
    .type return_to_handler, @function
return_to_handler:
    leaq -{return_frame}(%rsp), %rsp
    movq %rax, {pt}+{rax}(%rsp)
    movq %rdx, {pt}+{rdx}(%rsp)
    movq %rbp, {pt}+{rbp}(%rsp)
    ftrace_return_call_handler {saved_return}, return_to_handler
    movq %rax, {record}+8(%rsp)
    movq {pt}+{rax}(%rsp), %rax
    movq {pt}+{rdx}(%rsp), %rdx
    movq {pt}+{rbp}(%rsp), %rbp
    leaq {record}+8(%rsp), %rsp
    ret
    .size return_to_handler, . - return_to_handler

    .p2align 4
    .global return_to_handler_regs
    .type return_to_handler_regs, @function
return_to_handler_regs:
    leaq -{return_frame}(%rsp), %rsp    /* lea: RFLAGS must reach pushfq unchanged */
    ftrace_save_entry_regs
    ftrace_save_rest_regs
    ftrace_return_call_handler {saved_return_full}, return_to_handler_regs
    movq %rax, {record}+8(%rsp)
    movq {pt}+{rflags}(%rsp), %rax
    movq %rax, {record}(%rsp)
    ftrace_restore_entry_regs
    ftrace_restore_rest_regs
    leaq {record}(%rsp), %rsp
    popfq
    ret
    .size return_to_handler_regs, . - return_to_handler_regs
    .popsection
"#,
    frame = const FRAME,
    return_frame = const RETURN_FRAME,
    pt = const PT,
    saved = const offset_of!(CallerFrame, fregs) + FTRACE_REGS_SAVED,
    entry_sp = const offset_of!(CallerFrame, fregs) + FTRACE_REGS_ENTRY_SP,
    saved_args = const Saved::EntryArgs as u64,
    saved_full = const Saved::EntryFull as u64,
    saved_return = const Saved::Return as u64,
    saved_return_full = const Saved::ReturnFull as u64,
    callsite = const offset_of!(CallerFrame, callsite_record),
    function_record = const offset_of!(CallerFrame, function_record),
    record = const offset_of!(ReturnFrame, record),
    insn_len = const INSN_LEN,
    literal_bytes = const crate::ftrace_abi::LITERAL_BYTES,
    func = const SITE_CALL_FUNC,
    sparse_func = const SITE_CALL_SPARSE_FUNC,
    task_trace = const TASK_TRACE,
    active = const COUNTERS_ACTIVE,
    exits = const COUNTERS_EXITS,
    rsp = const offset_of!(PtRegs, rsp),
    rip = const offset_of!(PtRegs, rip),
    rdi = const offset_of!(PtRegs, rdi),
    rsi = const offset_of!(PtRegs, rsi),
    rdx = const offset_of!(PtRegs, rdx),
    rcx = const offset_of!(PtRegs, rcx),
    r8 = const offset_of!(PtRegs, r8),
    r9 = const offset_of!(PtRegs, r9),
    rax = const offset_of!(PtRegs, rax),
    rbp = const offset_of!(PtRegs, rbp),
    rbx = const offset_of!(PtRegs, rbx),
    r10 = const offset_of!(PtRegs, r10),
    r11 = const offset_of!(PtRegs, r11),
    r12 = const offset_of!(PtRegs, r12),
    r13 = const offset_of!(PtRegs, r13),
    r14 = const offset_of!(PtRegs, r14),
    r15 = const offset_of!(PtRegs, r15),
    rflags = const offset_of!(PtRegs, rflags),
    cs = const offset_of!(PtRegs, cs),
    ss = const offset_of!(PtRegs, ss),
    vector = const offset_of!(PtRegs, vector),
    error_code = const offset_of!(PtRegs, error_code),
    options(att_syntax)
);

// What `override_function_with_return` resumes at: returning from here is
// returning from the skipped function, through its return address as it
// stands (a return hook may have replaced it).
global_asm!(
    r#"
    .pushsection .text.ftrace, "ax"
    .p2align 4
    .global ftrace_just_return
    .type ftrace_just_return, @function
ftrace_just_return:
    ret
    .size ftrace_just_return, . - ftrace_just_return
    .popsection
"#,
    options(att_syntax)
);
