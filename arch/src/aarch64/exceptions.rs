//! aarch64 exception entry.
//!
//! Design: the vector table (`VBAR_EL1`) has 16 slots of 0x80 bytes. Each slot
//! makes room for a [`PtRegs`], saves x0/x1, puts its slot number in x0 and
//! branches to the common entry, which saves the remaining registers, sp,
//! ELR (pc) and SPSR (pstate), links a frame record so backtraces continue into
//! the interrupted code, and calls `aarch64_trap`. On return it restores
//! every register from the (possibly modified) `PtRegs` and `eret`s, so a
//! handler resumes elsewhere by changing `pc`.
//!
//! Stack overflow: exceptions at EL1 are taken on the stack the kernel runs
//! on, so a fault in the guard page under the boot stack would fault again
//! on the slot's first store, and again, each round lower, until it wrote
//! past the guard page. So before storing anything each slot checks that sp
//! leaves room for a `PtRegs` above the bottom of the stack this CPU runs
//! on (`CpuLocal::stack_bottom`, which the scheduler updates at every
//! switch; x0 waits in SP_EL0, unused by the kernel). If not, it switches to
//! this CPU's overflow stack (keeping the old sp in TPIDRRO_EL0; sp itself
//! holds the stack's offset while x0 takes the base) and enters the common
//! code with `OVERFLOW` added to its slot number; the handler reports a
//! kernel stack overflow and panics, with the overflow stack's bottom as the
//! one the slots check from then on. (TPIDR_EL0 and CONTEXTIDR_EL1 hold the
//! task's tracing state and the context: see `cpu`.)
//!
//! Invariants: every offset comes from `offset_of!`; sp stays 16-byte aligned
//! (SCTLR_EL1.SA checks it). Handlers run with IRQs masked. The kernel never
//! uses FP/SIMD (softfloat target), so q0-q31 need no saving.
//!
//! Failure modes: an exception without a handler or exception-table fixup
//! prints a report (name, ESR, faulting address, register dump) and panics; a
//! `brk` that is not a kprobe's is reported and execution continues after it.

use core::arch::global_asm;
use core::mem::{offset_of, size_of};

use super::regs::PtRegs;
use super::{gic, timer};
use crate::context::{self, Context};
use crate::fault::{self, RecoveredFault};
use crate::kprobes::Trap;

/// Vector slots: which of the 16 entries was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
enum Slot {
    CurrentSp0Sync = 0,
    CurrentSpxSync = 4,
    CurrentSpxIrq = 5,
    CurrentSpxFiq = 6,
    CurrentSpxSError = 7,
}

const FRAME_SIZE: usize = size_of::<PtRegs>();
const X0: usize = offset_of!(PtRegs, regs);
/// Added to the slot number of an exception taken with the stack exhausted.
const OVERFLOW: u64 = 16;

global_asm!(
    r#"
    .pushsection .text.entry, "ax"
    .balign 0x800
    .global aarch64_vectors
    .type aarch64_vectors, %function
aarch64_vectors:
    .set slot, 0
    .rept 16
    .balign 0x80
    msr sp_el0, x0                      /* no store may come before the check */
    mrs x0, tpidr_el1
    ldr x0, [x0, #{stack_bottom}]       /* this CPU's current stack */
    add x0, x0, #{frame_size}
    cmp sp, x0
    mrs x0, sp_el0
    b.lo 1f
    sub sp, sp, #{frame_size}
    stp x0, x1, [sp, #{x0}]
    mov x0, #slot
    b aarch64_exception_common
1:  mov x0, sp
    msr tpidrro_el0, x0                 /* the exhausted sp, for the report */
    mrs x0, tpidr_el1
    ldr x0, [x0, #{cpu}]
    add x0, x0, #1
    lsl x0, x0, #{overflow_shift}
    mov sp, x0                          /* the top's offset (nothing uses sp yet) */
    adrp x0, {overflow_stacks}
    add x0, x0, :lo12:{overflow_stacks}
    add sp, sp, x0                      /* plus the base: this CPU's overflow stack */
    mrs x0, sp_el0
    sub sp, sp, #{frame_size}
    stp x0, x1, [sp, #{x0}]
    mov x0, #(slot + {overflow})
    b aarch64_exception_common
    .set slot, slot + 1
    .endr
    .size aarch64_vectors, . - aarch64_vectors

    .type aarch64_exception_common, %function
aarch64_exception_common:
    stp x2, x3, [sp, #({x0} + 2 * 8)]
    stp x4, x5, [sp, #({x0} + 4 * 8)]
    stp x6, x7, [sp, #({x0} + 6 * 8)]
    stp x8, x9, [sp, #({x0} + 8 * 8)]
    stp x10, x11, [sp, #({x0} + 10 * 8)]
    stp x12, x13, [sp, #({x0} + 12 * 8)]
    stp x14, x15, [sp, #({x0} + 14 * 8)]
    stp x16, x17, [sp, #({x0} + 16 * 8)]
    stp x18, x19, [sp, #({x0} + 18 * 8)]
    stp x20, x21, [sp, #({x0} + 20 * 8)]
    stp x22, x23, [sp, #({x0} + 22 * 8)]
    stp x24, x25, [sp, #({x0} + 24 * 8)]
    stp x26, x27, [sp, #({x0} + 26 * 8)]
    stp x28, x29, [sp, #({x0} + 28 * 8)]
    str x30, [sp, #({x0} + 30 * 8)]
    add x1, sp, #{frame_size}
    str x1, [sp, #{sp}]
    mrs x1, elr_el1
    mrs x2, spsr_el1
    str x1, [sp, #{pc}]
    str x2, [sp, #{pstate}]
    /* Frame record: the interrupted code looks like our caller. */
    stp x29, x1, [sp, #{stackframe}]
    add x29, sp, #{stackframe}
    mov x1, x0
    mov x0, sp
    bl {trap}
    /* A backtrace's return address here: the record above holds the
       interrupted pc itself (see `handler_return`). */
    .global aarch64_trap_returned
aarch64_trap_returned:
    ldr x1, [sp, #{pc}]
    ldr x2, [sp, #{pstate}]
    msr elr_el1, x1
    msr spsr_el1, x2
    ldp x0, x1, [sp, #({x0} + 0 * 8)]
    ldp x2, x3, [sp, #({x0} + 2 * 8)]
    ldp x4, x5, [sp, #({x0} + 4 * 8)]
    ldp x6, x7, [sp, #({x0} + 6 * 8)]
    ldp x8, x9, [sp, #({x0} + 8 * 8)]
    ldp x10, x11, [sp, #({x0} + 10 * 8)]
    ldp x12, x13, [sp, #({x0} + 12 * 8)]
    ldp x14, x15, [sp, #({x0} + 14 * 8)]
    ldp x16, x17, [sp, #({x0} + 16 * 8)]
    ldp x18, x19, [sp, #({x0} + 18 * 8)]
    ldp x20, x21, [sp, #({x0} + 20 * 8)]
    ldp x22, x23, [sp, #({x0} + 22 * 8)]
    ldp x24, x25, [sp, #({x0} + 24 * 8)]
    ldp x26, x27, [sp, #({x0} + 26 * 8)]
    ldp x28, x29, [sp, #({x0} + 28 * 8)]
    ldr x30, [sp, #({x0} + 30 * 8)]
    add sp, sp, #{frame_size}
    eret
    .size aarch64_exception_common, . - aarch64_exception_common
    .popsection
"#,
    frame_size = const FRAME_SIZE,
    x0 = const X0,
    sp = const offset_of!(PtRegs, sp),
    pc = const offset_of!(PtRegs, pc),
    pstate = const offset_of!(PtRegs, pstate),
    stackframe = const offset_of!(PtRegs, stackframe),
    overflow = const OVERFLOW,
    stack_bottom = const crate::percpu::offsets::STACK_BOTTOM,
    cpu = const crate::percpu::offsets::CPU,
    overflow_shift = const OVERFLOW_STACK_SHIFT,
    overflow_stacks = sym OVERFLOW_STACKS,
    trap = sym aarch64_trap,
);

/// Each CPU's stack for exceptions taken with its stack exhausted.
const OVERFLOW_STACK_SHIFT: usize = 14;
#[repr(C, align(16))]
struct OverflowStack([u8; 1 << OVERFLOW_STACK_SHIFT]);
static OVERFLOW_STACKS: crate::cell::BootCell<[OverflowStack; crate::MAX_CPUS]> =
    crate::cell::BootCell::new([const { OverflowStack([0; 1 << OVERFLOW_STACK_SHIFT]) }; crate::MAX_CPUS]);

extern "C" {
    static aarch64_vectors: u8;
    static aarch64_trap_returned: u8;
}

/// The return address of the exception entry's call into its handler: in
/// a backtrace, the frame after it is the interrupted code's own pc (the
/// record the entry links), an exact address, not a return address.
pub fn handler_return() -> usize {
    core::ptr::addr_of!(aarch64_trap_returned) as usize
}

/// Installs the vector table, and (test builds) lets a context that
/// unmasks debug exceptions step (`crate::step`).
pub(crate) fn init() {
    let vectors = core::ptr::addr_of!(aarch64_vectors) as u64;
    // SAFETY: the table is 2 KiB aligned and every slot branches to the
    // common entry, which preserves the interrupted context.
    unsafe { core::arch::asm!("msr vbar_el1, {}", "isb", in(reg) vectors, options(nostack)) };
    #[cfg(feature = "test-hooks")]
    super::step::init_cpu();
}

/// Exception classes (ESR_EL1.EC) the kernel names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Unknown,
    FpAccess,
    IllegalState,
    Svc,
    SystemRegister,
    InstructionAbort,
    PcAlignment,
    DataAbort,
    SpAlignment,
    SError,
    Breakpoint,
    Other(u64),
}

impl Class {
    fn from_esr(esr: u64) -> Class {
        match esr >> 26 {
            0x00 => Class::Unknown,
            0x07 => Class::FpAccess,
            0x0e => Class::IllegalState,
            0x15 => Class::Svc,
            0x18 => Class::SystemRegister,
            0x20 | 0x21 => Class::InstructionAbort,
            0x22 => Class::PcAlignment,
            0x24 | 0x25 => Class::DataAbort,
            0x26 => Class::SpAlignment,
            0x2f => Class::SError,
            0x3c => Class::Breakpoint,
            other => Class::Other(other),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::Unknown => "undefined instruction",
            Class::FpAccess => "FP/SIMD access trap",
            Class::IllegalState => "illegal execution state",
            Class::Svc => "supervisor call",
            Class::SystemRegister => "system register trap",
            Class::InstructionAbort => "instruction abort",
            Class::PcAlignment => "PC alignment fault",
            Class::DataAbort => "data abort",
            Class::SpAlignment => "SP alignment fault",
            Class::SError => "SError interrupt",
            Class::Breakpoint => "breakpoint (brk)",
            Class::Other(_) => "unexpected exception",
        }
    }

    /// Whether FAR_EL1 holds the faulting address for this class.
    fn has_address(self) -> bool {
        matches!(self, Class::InstructionAbort | Class::DataAbort | Class::PcAlignment)
    }
}

fn read_esr() -> u64 {
    let esr: u64;
    // SAFETY: reads a system register.
    unsafe { core::arch::asm!("mrs {}, esr_el1", out(reg) esr, options(nomem, nostack)) };
    esr
}

fn read_far() -> usize {
    let far: usize;
    // SAFETY: reads a system register.
    unsafe { core::arch::asm!("mrs {}, far_el1", out(reg) far, options(nomem, nostack)) };
    far
}

/// Prints an exception report: name, ESR, faulting address where there is
/// one, and the register dump.
fn report(name: &str, esr: u64, regs: &PtRegs, address: Option<usize>) {
    use core::fmt::Write;
    let mut console = crate::print::lock();
    let _ = write!(console, "exception: {name}, ESR {esr:#x} (class {:#x})", esr >> 26);
    if let Some(address) = address {
        let _ = write!(console, ", address {address:#018x}");
    }
    let _ = write!(console, "\n  at pc {:#018x} ", regs.pc);
    let _ = crate::print::write_code_address(&mut console, regs.ip());
    let _ = write!(console, "\n{regs}");
}

fn unhandled(name: &str, esr: u64, regs: &PtRegs, address: Option<usize>) -> ! {
    report(name, esr, regs, address);
    crate::fault::report_stack(regs.sp());
    crate::flight::print();
    match address {
        Some(address) => panic!("unhandled {name} at pc {:#x}, address {:#x}", regs.pc, address),
        None => panic!("unhandled {name} at pc {:#x}", regs.pc),
    }
}

fn synchronous(regs: &mut PtRegs) {
    let esr = read_esr();
    let class = Class::from_esr(esr);
    let address = class.has_address().then(read_far);
    match class {
        Class::Breakpoint => {
            let trap = match (esr & 0xffff) as u16 {
                super::kprobes::PROBE_IMM => Some(Trap::Probe),
                super::kprobes::STEP_DONE_IMM => Some(Trap::StepDone),
                _ => None,
            };
            if let Some(trap) = trap {
                if crate::kprobes::trap(trap, regs.ip(), regs) {
                    return;
                }
                let mut now = [0u8; 4];
                if trap == Trap::Probe && crate::text::read(regs.ip(), &mut now).is_ok() && now != super::kprobes::BREAKPOINT {
                    // A probe removed as this CPU reached it (or a stale
                    // translation of it): run what is there now.
                    return;
                }
            }
            fault::note_breakpoint(regs.ip());
            report(class.name(), esr, regs, None);
            regs.set_ip(regs.ip() + 4);
        }
        Class::DataAbort => match fault::search_exception_table(regs.ip()) {
            Some(fixup) => {
                fault::note_recovered(RecoveredFault { ip: regs.ip(), address });
                regs.set_ip(fixup);
            }
            None => unhandled(class.name(), esr, regs, address),
        },
        _ => unhandled(class.name(), esr, regs, address),
    }
}

/// An exception taken with the stack exhausted (see the module
/// documentation): nothing can run on that stack any more.
fn stack_overflow(regs: &mut PtRegs) -> ! {
    // From now on this CPU runs on its overflow stack: its bottom is the one
    // the vector slots check, so an exception the report takes (a fault a
    // fixup recovers from while it walks a broken frame chain) is taken
    // normally, as Linux's entry does on its overflow stack, instead of
    // starting this stack again over the frames in use.
    let cpu = crate::percpu::this().cpu;
    let overflow_stack = OVERFLOW_STACKS.as_ptr() as usize + (cpu << OVERFLOW_STACK_SHIFT);
    crate::percpu::set_stack_bottom(overflow_stack);
    let sp: u64;
    // SAFETY: reads a system register the vector slot wrote.
    unsafe { core::arch::asm!("mrs {}, tpidrro_el0", out(reg) sp, options(nomem, nostack)) };
    regs.sp = sp;
    let esr = read_esr();
    let class = Class::from_esr(esr);
    let address = class.has_address().then(read_far);
    report("kernel stack overflow", esr, regs, address);
    panic!("kernel stack overflow at pc {:#x}, sp {sp:#x}", regs.pc)
}

fn irq() {
    let Some(interrupt) = gic::acknowledge() else { return };
    // Completed before the handler runs, so that an abandoned handler (a panic
    // in a test that expects one) cannot block later interrupts.
    gic::end_of_interrupt(interrupt);
    match interrupt.intid {
        timer::VIRTUAL_TIMER_INTID => {
            timer::rearm();
            crate::time::tick();
        }
        super::console::INTID => crate::input::on_interrupt(),
        sgi => {
            if let Some(ipi) = super::interrupts::ipi_of(sgi) {
                crate::smp::handle_ipi(ipi);
            }
        }
    }
}

/// PSTATE.I: IRQs masked.
const PSTATE_I: u64 = 1 << 7;

/// A software step exception (`crate::step`): out of line, so that the
/// other exceptions' dispatch carries none of it.
#[cfg(feature = "test-hooks")]
#[cold]
#[inline(never)]
fn software_step(regs: &mut PtRegs) {
    crate::step::handle(regs);
    super::step::emulate_exclusive(regs);
    super::step::rearm(regs);
}

/// The common exception dispatcher, called by the entry assembly with the
/// vector slot that was taken.
extern "C" fn aarch64_trap(regs: &mut PtRegs, slot: u64) {
    // Only test builds step (`crate::step`): the shipped kernel's other
    // exceptions pay nothing for it.
    #[cfg(feature = "test-hooks")]
    if slot == Slot::CurrentSpxSync as u64 && super::step::is_step(read_esr()) {
        return software_step(regs);
    }
    let interrupt = slot == Slot::CurrentSpxIrq as u64;
    let previous = context::enter(if interrupt { Context::Irq } else { Context::Nmi });
    dispatch(regs, slot);
    context::leave(previous);
    if interrupt {
        crate::irq_exit::exit(previous, regs.pstate & PSTATE_I == 0);
    }
}

fn dispatch(regs: &mut PtRegs, slot: u64) {
    if slot >= OVERFLOW {
        stack_overflow(regs);
    }
    match slot {
        s if s == Slot::CurrentSpxSync as u64 => synchronous(regs),
        s if s == Slot::CurrentSpxIrq as u64 => irq(),
        s if s == Slot::CurrentSpxFiq as u64 => unhandled("FIQ", 0, regs, None),
        s if s == Slot::CurrentSpxSError as u64 => unhandled("SError", read_esr(), regs, None),
        s if s == Slot::CurrentSp0Sync as u64 => unhandled("exception on SP_EL0", read_esr(), regs, None),
        _ => unhandled("exception from a lower exception level", read_esr(), regs, None),
    }
}
