//! x86_64 exception and interrupt entry.
//!
//! Design: one 16-byte stub per vector (0..`STUB_COUNT`) pushes a zero
//! error code where the CPU pushes none, then the vector number, and jumps to
//! a common entry; `#BP`'s stub goes through `x86_64_int3_entry` first,
//! which copies the hardware frame six words lower (an 8-byte pad keeps the
//! stack 16-byte aligned), leaving a gap under the interrupted stack
//! pointer for text patching's emulated calls. The common entry completes a [`PtRegs`] on the stack (the
//! CPU already pushed its tail), links a frame record so backtraces continue
//! into the interrupted code, and calls `x86_64_trap` with a pointer to it.
//! On return it restores every register from the (possibly modified) `PtRegs`
//! and `iretq`s, so a handler can resume anywhere by changing `rip`.
//!
//! Invariants: every offset the assembly uses comes from `offset_of!`; the
//! stack is 16-byte aligned at the call (checked below). Handlers run with
//! interrupts masked (interrupt gates); after a hardware interrupt,
//! `crate::irq_exit::exit` may enable them for the tick's softirq-like work and
//! may switch tasks, as Linux's `irq_exit` does. Double faults
//! run on their own stack (IST), so a kernel stack overflow is still reported.
//!
//! Failure modes: an exception without a handler or an exception-table fixup
//! prints a report (name, error code, faulting address, register dump) and
//! panics; a breakpoint that is neither a text patch's nor a kprobe's is
//! reported and execution continues after it.

use core::arch::global_asm;
use core::mem::{offset_of, size_of};

use super::interrupts::ipi_vector;
use super::regs::PtRegs;
use super::{gdt, lapic, pic};
use crate::context::{self, Context};
use crate::fault::{self, RecoveredFault};
use crate::kprobes::Trap;
use crate::smp::Ipi;

/// Vectors with entry stubs: all of them (exceptions, the remapped PIC's
/// IRQs, the local APIC's timer, IPIs and spurious vector).
const STUB_COUNT: usize = 256;
const STUB_SIZE: usize = 16;

const BREAKPOINT: u64 = 3;
const DOUBLE_FAULT: u64 = 8;
const GENERAL_PROTECTION: u64 = 13;
const PAGE_FAULT: u64 = 14;
const TIMER_VECTOR: u64 = pic::IRQ_BASE as u64 + super::timer::PIT_IRQ as u64;
const UART_VECTOR: u64 = pic::IRQ_BASE as u64 + super::console::IRQ as u64;
const APIC_TIMER: u64 = lapic::TIMER_VECTOR as u64;
const APIC_SPURIOUS: u64 = lapic::SPURIOUS_VECTOR as u64;
const IPI_RESCHEDULE: u64 = ipi_vector(Ipi::Reschedule) as u64;
const IPI_CALL: u64 = ipi_vector(Ipi::Call) as u64;
const IPI_WAKE: u64 = ipi_vector(Ipi::Wake) as u64;
/// RFLAGS.IF: the interrupted code had interrupts enabled.
const RFLAGS_IF: u64 = 1 << 9;
const SPURIOUS_MASTER: u64 = pic::IRQ_BASE as u64 + 7;
const SPURIOUS_SLAVE: u64 = pic::IRQ_BASE as u64 + 15;

/// Bytes the common entry pushes below the hardware frame + vector: the
/// general registers (everything in `PtRegs` before `vector`).
const GPR_AREA: usize = offset_of!(PtRegs, vector);
/// A frame record (saved rbp, interrupted rip) pushed below `PtRegs`.
const FRAME_RECORD: usize = 16;

/// The hardware interrupt frame: rip, cs, rflags, rsp, ss.
const HARDWARE_FRAME: usize = size_of::<PtRegs>() - offset_of!(PtRegs, rip);
/// The `#BP` entry's pad between the hardware frame and its copy (see the
/// entry): with it, the copy and everything below stay 16-byte aligned.
const INT3_PAD: usize = 8;

// The CPU aligns RSP to 16 before pushing its frame; PtRegs and the frame
// record are multiples of 16, so the dispatcher is called on an aligned
// stack. The `#BP` entry leaves the hardware frame and the pad above a
// whole PtRegs and the frame record: aligned too.
const _: () = assert!((size_of::<PtRegs>() + FRAME_RECORD).is_multiple_of(16));
const _: () = assert!((HARDWARE_FRAME + INT3_PAD).is_multiple_of(16));

global_asm!(
    r#"
    .pushsection .text.entry, "ax"
    .p2align 4
    .global x86_64_exception_stubs
    .type x86_64_exception_stubs, @function
x86_64_exception_stubs:
    .set vector, 0
    .rept {stub_count}
0:
    .if vector == 3
    jmp x86_64_int3_entry
    .elseif vector == 1
    pushq $0
    pushq $1
    jmp x86_64_debug_common
    .else
    /* Vectors 8, 10-14, 17, 21, 29, 30 get an error code from the CPU. */
    .if (vector == 8) + ((vector >= 10) * (vector <= 14)) + (vector == 17) + (vector == 21) + (vector == 29) + (vector == 30)
    .else
    pushq $0
    .endif
    pushq $vector
    jmp x86_64_exception_common
    .endif
    /* Each stub is exactly STUB_SIZE bytes (the IDT points at stubs +
       vector * STUB_SIZE): padded with int3, an error if longer. */
    .org 0b + {stub_size}, 0xcc
    .set vector, vector + 1
    .endr
    .size x86_64_exception_stubs, . - x86_64_exception_stubs

    /* #BP: copy the five-word interrupt frame six words further down (a
       pad keeps the stack 16-byte aligned), as Linux's int3 entry does,
       leaving the old one as a gap under the interrupted stack pointer:
       the handler may emulate a call there (text patching), pushing a
       return address below that stack pointer, and iretq uses the copy.
       Each push reads the word that sits the frame and the pad above the
       slot it fills. */
    .type x86_64_int3_entry, @function
x86_64_int3_entry:
    subq ${int3_pad}, %rsp
    .rept 5
    pushq ({int3_pad} + {hardware_frame} - 8)(%rsp)
    .endr
    pushq $0
    pushq $3
    jmp x86_64_exception_common
    .size x86_64_int3_entry, . - x86_64_int3_entry

    /* The common entry: completes the PtRegs, calls `handler`, restores
       every register and returns from the exception. `returned` names the
       address after the call (backtraces recognise the main entry's). */
    .macro exception_common handler, returned
    subq ${gpr_area}, %rsp
    movq %r15, {r15}(%rsp)
    movq %r14, {r14}(%rsp)
    movq %r13, {r13}(%rsp)
    movq %r12, {r12}(%rsp)
    movq %rbp, {rbp}(%rsp)
    movq %rbx, {rbx}(%rsp)
    movq %r11, {r11}(%rsp)
    movq %r10, {r10}(%rsp)
    movq %r9, {r9}(%rsp)
    movq %r8, {r8}(%rsp)
    movq %rax, {rax}(%rsp)
    movq %rcx, {rcx}(%rsp)
    movq %rdx, {rdx}(%rsp)
    movq %rsi, {rsi}(%rsp)
    movq %rdi, {rdi}(%rsp)
    cld
    /* Frame record: the interrupted code looks like our caller. */
    pushq {rip}(%rsp)
    pushq %rbp
    movq %rsp, %rbp
    leaq {frame_record}(%rsp), %rdi
    call \handler
    /* A backtrace's return address here: the record above holds the
       interrupted rip itself (see `handler_return`). */
    .global \returned
\returned:
    addq ${frame_record}, %rsp
    movq {r15}(%rsp), %r15
    movq {r14}(%rsp), %r14
    movq {r13}(%rsp), %r13
    movq {r12}(%rsp), %r12
    movq {rbp}(%rsp), %rbp
    movq {rbx}(%rsp), %rbx
    movq {r11}(%rsp), %r11
    movq {r10}(%rsp), %r10
    movq {r9}(%rsp), %r9
    movq {r8}(%rsp), %r8
    movq {rax}(%rsp), %rax
    movq {rcx}(%rsp), %rcx
    movq {rdx}(%rsp), %rdx
    movq {rsi}(%rsp), %rsi
    movq {rdi}(%rsp), %rdi
    /* Drop the general registers, the vector and the error code. */
    addq ${rip}, %rsp
    iretq
    .endm

    .type x86_64_exception_common, @function
x86_64_exception_common:
    exception_common {trap}, x86_64_trap_returned
    .size x86_64_exception_common, . - x86_64_exception_common

    /* #DB has an entry of its own, so that the single-step handler costs
       the other exceptions' dispatch nothing. */
    .type x86_64_debug_common, @function
x86_64_debug_common:
    exception_common {debug}, x86_64_debug_returned
    .size x86_64_debug_common, . - x86_64_debug_common
    .popsection
"#,
    stub_count = const STUB_COUNT,
    stub_size = const STUB_SIZE,
    int3_pad = const INT3_PAD,
    hardware_frame = const HARDWARE_FRAME,
    gpr_area = const GPR_AREA,
    frame_record = const FRAME_RECORD,
    r15 = const offset_of!(PtRegs, r15),
    r14 = const offset_of!(PtRegs, r14),
    r13 = const offset_of!(PtRegs, r13),
    r12 = const offset_of!(PtRegs, r12),
    rbp = const offset_of!(PtRegs, rbp),
    rbx = const offset_of!(PtRegs, rbx),
    r11 = const offset_of!(PtRegs, r11),
    r10 = const offset_of!(PtRegs, r10),
    r9 = const offset_of!(PtRegs, r9),
    r8 = const offset_of!(PtRegs, r8),
    rax = const offset_of!(PtRegs, rax),
    rcx = const offset_of!(PtRegs, rcx),
    rdx = const offset_of!(PtRegs, rdx),
    rsi = const offset_of!(PtRegs, rsi),
    rdi = const offset_of!(PtRegs, rdi),
    rip = const offset_of!(PtRegs, rip),
    trap = sym x86_64_trap,
    debug = sym x86_64_debug,
    options(att_syntax)
);

extern "C" {
    static x86_64_exception_stubs: u8;
    static x86_64_trap_returned: u8;
}

/// The return address of the exception entry's call into its handler: in
/// a backtrace, the frame after it is the interrupted code's own `rip` (the
/// record the entry links), an exact address, not a return address.
pub fn handler_return() -> usize {
    core::ptr::addr_of!(x86_64_trap_returned) as usize
}

/// One 16-byte IDT gate.
#[repr(C)]
#[derive(Clone, Copy)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    type_attr: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

const INTERRUPT_GATE: u8 = 0x8e; // present, DPL 0, 64-bit interrupt gate

impl Gate {
    const MISSING: Gate = Gate { offset_low: 0, selector: 0, ist: 0, type_attr: 0, offset_mid: 0, offset_high: 0, reserved: 0 };

    fn new(handler: usize, selector: u16, ist: u8) -> Gate {
        Gate {
            offset_low: handler as u16,
            selector,
            ist,
            type_attr: INTERRUPT_GATE,
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Idt([Gate; 256]);

static IDT: crate::cell::BootCell<Idt> = crate::cell::BootCell::new(Idt([Gate::MISSING; 256]));

/// Builds the IDT (every vector enters `x86_64_trap`) and loads it on the
/// boot CPU.
pub(crate) fn init() {
    // SAFETY: boot runs on one CPU with interrupts off; nothing else touches
    // the IDT until `lidt` below publishes it.
    let idt = unsafe { IDT.get() };
    let stubs = core::ptr::addr_of!(x86_64_exception_stubs) as usize;
    let selector = gdt::kernel_code_selector();
    for (vector, gate) in idt.0.iter_mut().enumerate().take(STUB_COUNT) {
        let ist = if vector as u64 == DOUBLE_FAULT { gdt::DOUBLE_FAULT_IST as u8 } else { 0 };
        *gate = Gate::new(stubs + vector * STUB_SIZE, selector, ist);
    }
    load();
}

/// Loads the (shared) IDT on this CPU.
pub(crate) fn load() {
    let pointer = x86_64::structures::DescriptorTablePointer {
        limit: (size_of::<Idt>() - 1) as u16,
        base: x86_64::VirtAddr::from_ptr(IDT.as_ptr()),
    };
    // SAFETY: the IDT is a static that lives forever, built by `init`
    // before any CPU loads it, and every present gate points at a valid
    // entry stub.
    unsafe { x86_64::instructions::tables::lidt(&pointer) };
}

/// Exception names, indexed by vector.
const NAMES: [&str; 32] = [
    "divide error (#DE)",
    "debug (#DB)",
    "non-maskable interrupt",
    "breakpoint (#BP)",
    "overflow (#OF)",
    "bound range exceeded (#BR)",
    "invalid opcode (#UD)",
    "device not available (#NM)",
    "double fault (#DF)",
    "coprocessor segment overrun",
    "invalid TSS (#TS)",
    "segment not present (#NP)",
    "stack-segment fault (#SS)",
    "general protection fault (#GP)",
    "page fault (#PF)",
    "reserved",
    "x87 floating-point error (#MF)",
    "alignment check (#AC)",
    "machine check (#MC)",
    "SIMD floating-point error (#XM)",
    "virtualization exception (#VE)",
    "control protection (#CP)",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "hypervisor injection (#HV)",
    "VMM communication (#VC)",
    "security exception (#SX)",
    "reserved",
];

fn name(vector: u64) -> &'static str {
    NAMES.get(vector as usize).copied().unwrap_or("unexpected interrupt")
}

/// Prints an exception report: name, vector, error code, faulting address
/// where there is one, and the register dump.
fn report(regs: &PtRegs, address: Option<usize>) {
    let mut console = crate::print::lock();
    use core::fmt::Write;
    let _ = write!(console, "exception: {}, vector {}, error code {:#x}", name(regs.vector), regs.vector, regs.error_code);
    if let Some(address) = address {
        let _ = write!(console, ", address {address:#018x}");
    }
    let _ = write!(console, "\n  at ip {:#018x} ", regs.rip);
    let _ = crate::print::write_code_address(&mut console, regs.ip());
    let _ = write!(console, "\n{regs}");
}

fn unhandled(regs: &PtRegs, address: Option<usize>) -> ! {
    report(regs, address);
    crate::fault::report_stack(regs.rsp as usize);
    crate::flight::print();
    match address {
        Some(address) => panic!("unhandled {} at ip {:#x}, address {:#x}", name(regs.vector), regs.rip, address),
        None => panic!("unhandled {} at ip {:#x}", name(regs.vector), regs.rip),
    }
}

/// The debug exception's dispatcher (its own entry): a single step goes to
/// `crate::step` (test builds: the shipped kernel never steps); anything
/// else, the common dispatcher (which reports it).
extern "C" fn x86_64_debug(regs: &mut PtRegs) {
    #[cfg(feature = "test-hooks")]
    if super::step::take_single_step() {
        return crate::step::handle(regs);
    }
    x86_64_trap(regs);
}

/// The common exception dispatcher, called by the entry assembly.
extern "C" fn x86_64_trap(regs: &mut PtRegs) {
    let interrupt = regs.vector >= u64::from(pic::IRQ_BASE);
    let previous = context::enter(if interrupt { Context::Irq } else { Context::Nmi });
    dispatch(regs);
    context::leave(previous);
    if interrupt {
        crate::irq_exit::exit(previous, regs.rflags & RFLAGS_IF != 0);
    }
}

fn dispatch(regs: &mut PtRegs) {
    match regs.vector {
        BREAKPOINT => {
            if super::patch::emulate_int3(regs) {
                return;
            }
            let at = regs.ip() - 1;
            let trap = if crate::kprobes::slot_of_step_done(at).is_some() { Trap::StepDone } else { Trap::Probe };
            if crate::kprobes::trap(trap, at, regs) {
                return;
            }
            // RIP already points past the one-byte int3.
            fault::note_breakpoint(regs.ip() - 1);
            report(regs, None);
        }
        PAGE_FAULT | GENERAL_PROTECTION => {
            let address = (regs.vector == PAGE_FAULT).then(|| x86_64::registers::control::Cr2::read_raw() as usize);
            match fault::search_exception_table(regs.ip()) {
                Some(fixup) => {
                    fault::note_recovered(RecoveredFault { ip: regs.ip(), address });
                    regs.set_ip(fixup);
                }
                None => unhandled(regs, address),
            }
        }
        TIMER_VECTOR => {
            // The PIT ticks only until the APIC timers take over.
            pic::end_of_interrupt(super::timer::PIT_IRQ);
            crate::time::tick();
        }
        APIC_TIMER => {
            lapic::end_of_interrupt();
            crate::time::tick();
        }
        IPI_RESCHEDULE => {
            lapic::end_of_interrupt();
            crate::smp::handle_ipi(Ipi::Reschedule);
        }
        IPI_CALL => {
            lapic::end_of_interrupt();
            crate::smp::handle_ipi(Ipi::Call);
        }
        IPI_WAKE => lapic::end_of_interrupt(),
        APIC_SPURIOUS => {}
        UART_VECTOR => {
            pic::end_of_interrupt(super::console::IRQ);
            crate::input::on_interrupt();
        }
        DOUBLE_FAULT => {
            // A page fault that could not be delivered: with the fault in the
            // stack guard, the stack ran out (this handler has its own).
            let address = x86_64::registers::control::Cr2::read_raw() as usize;
            if crate::layout::in_stack_guard(address) {
                report(regs, Some(address));
                panic!("kernel stack overflow at ip {:#x}, address {address:#x}", regs.rip);
            }
            unhandled(regs, None)
        }
        SPURIOUS_MASTER => {}
        SPURIOUS_SLAVE => pic::end_of_interrupt(0),
        _ => unhandled(regs, None),
    }
}
