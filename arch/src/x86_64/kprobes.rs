//! x86_64 kprobes: `int3` probes, instructions decoded with `iced-x86`.
//!
//! How each instruction runs (see `crate::kprobes`):
//! - straight-line instructions run from a slot. A hit with a post-handler
//!   to run steps the slot's first copy, `insn; int3`; any other hit is
//!   *boosted*, after Linux's x86 kprobes: it runs a copy that jumps back
//!   by itself, `insn; jmp next` (interrupts were masked at the hit) or
//!   `insn; sti; jmp next` (they were enabled: `sti` takes effect only
//!   after the next instruction, so no interrupt arrives before the `jmp`
//!   has left the slot, and no task is ever preempted inside one; Linux's
//!   boosted copy runs with interrupts as they were). A
//!   RIP-relative memory operand gets its displacement recomputed for each
//!   copy's address (slots are in kernel text, within reach of every
//!   instruction in it);
//! - `jmp rel`, `jcc rel`, `call rel32` and `ret [imm16]` are simulated;
//! - refused: indirect branches and calls, `loop`/`jrcxz`, far transfers,
//!   interrupts and system calls, and what reads or writes RFLAGS.IF
//!   (`pushf`, `popf`, `cli`, `sti`), which the step masks.
//!
//! A simulated `call` pushes below the interrupted stack pointer: the
//! `int3` entry leaves a gap there (see `exceptions`).

use core::arch::global_asm;

use iced_x86::{
    ConditionCode, Decoder, DecoderOptions, FlowControl, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
};

use super::regs::PtRegs;
use crate::ftrace_abi::ReturnSlot;
use crate::kprobes::{Execution, InsnError, ProbedInsn};

/// `int3`.
pub const BREAKPOINT: [u8; 1] = [0xcc];
/// The longest x86 instruction.
pub const MAX_INSN: usize = 15;
/// One slot: three copies of the instruction (the stepped one and the two
/// boosted ones, see the module documentation), `int3`s around them.
pub const SLOT_SIZE: usize = 64;
/// Where in a slot the stepped copy is: the instruction, then `int3`.
const STEP_COPY: usize = 0;
/// Where the boosted copy for a hit with interrupts masked is: the
/// instruction, then `jmp next`.
const BOOST_COPY: usize = 16;
/// Where the boosted copy for a hit with interrupts enabled is: the
/// instruction, `sti`, then `jmp next`.
const BOOST_STI_COPY: usize = 40;
/// `jmp rel32`.
const JMP_REL32: u8 = 0xe9;
/// `sti`.
const STI: u8 = 0xfb;
const _: () = assert!(STEP_COPY + MAX_INSN < BOOST_COPY);
const _: () = assert!(BOOST_COPY + MAX_INSN + 5 <= BOOST_STI_COPY);
const _: () = assert!(BOOST_STI_COPY + MAX_INSN + 1 + 5 <= SLOT_SIZE);
/// Hits without a post-handler skip the step-done trap (see the module
/// documentation).
pub const BOOSTS: bool = true;
/// Out-of-line slots, so breakpoint probes at once.
pub const SLOTS: usize = 64;

const RFLAGS_IF: u64 = 1 << 9;
const RFLAGS_CF: u64 = 1 << 0;
const RFLAGS_PF: u64 = 1 << 2;
const RFLAGS_ZF: u64 = 1 << 6;
const RFLAGS_SF: u64 = 1 << 7;
const RFLAGS_OF: u64 = 1 << 11;

global_asm!(
    r#"
    .pushsection .text.kprobe_slots, "ax"
    .balign 16
    .global x86_64_kprobe_slots
x86_64_kprobe_slots:
    .fill {bytes}, 1, 0xcc
    .popsection
"#,
    bytes = const SLOTS * SLOT_SIZE,
);

extern "C" {
    static x86_64_kprobe_slots: u8;
}

/// The first slot's address.
pub(crate) fn slots_start() -> usize {
    core::ptr::addr_of!(x86_64_kprobe_slots) as usize
}

/// Every way an instruction runs, by name (see [`simulation_class`]).
pub const CLASSES: &[&str] = &["step", "step (relocated)", "jmp", "jcc", "call", "ret"];

/// The name of a simulated instruction's class.
pub fn simulation_class(simulation: Simulation) -> &'static str {
    match simulation {
        Simulation::Jump { .. } => "jmp",
        Simulation::Conditional { .. } => "jcc",
        Simulation::Call { .. } => "call",
        Simulation::Return { .. } => "ret",
    }
}

/// An instruction whose effect is applied instead of running it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simulation {
    /// `jmp rel8/rel32`.
    Jump { target: usize },
    /// `jcc rel8/rel32`, taken when `condition` holds.
    Conditional { condition: ConditionCode, target: usize },
    /// `call rel32`.
    Call { target: usize },
    /// `ret` or `ret imm16` (bytes popped besides the return address).
    Return { pop: u16 },
}

/// Decodes the instruction at the start of `bytes` (at `address`).
/// No instruction sequence here breaks under a breakpoint (x86_64's atomic
/// read-modify-writes are single instructions).
pub(crate) fn check_context(_function: usize, _address: usize) -> Result<(), InsnError> {
    Ok(())
}

/// One step of `crate::kprobes::PrologueWalk`: the return address is in
/// the stack, `offset` bytes above the stack pointer, until `rbp` is
/// written (`mov %rsp,%rbp` sets the frame up).
pub(crate) fn prologue_step(slot: ReturnSlot, code: &[u8]) -> Option<ReturnSlot> {
    let ReturnSlot::Stack { offset } = slot else { return None };
    let insn = Decoder::with_ip(64, code, 0, DecoderOptions::NONE).decode();
    if insn.is_invalid() || !matches!(insn.flow_control(), FlowControl::Next | FlowControl::ConditionalBranch) {
        return None;
    }
    let mut factory = InstructionInfoFactory::new();
    let info = factory.info(&insn);
    let writes = |register: Register| {
        info.used_registers().iter().any(|used| {
            used.register().full_register() == register
                && !matches!(used.access(), OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess | OpAccess::None)
        })
    };
    let (writes_rsp, writes_rbp) = (writes(Register::RSP), writes(Register::RBP));
    if writes_rbp {
        return None; // `mov %rsp,%rbp`: the frame is set up (or rbp is lost)
    }
    if insn.op0_register().full_register() == Register::RSP {
        // `sub $N,%rsp` is followed; any other explicit change is not.
        let immediate = matches!(insn.op1_kind(), OpKind::Immediate8to64 | OpKind::Immediate32to64);
        return (insn.mnemonic() == Mnemonic::Sub && insn.op0_register() == Register::RSP && immediate)
            .then(|| ReturnSlot::Stack { offset: offset.wrapping_add(insn.immediate(1) as usize) });
    }
    // Pushes move the stack pointer down (a negative increment); a pop, or
    // a write to rsp that is not a push (`xchg`), is not a prologue's.
    let increment = insn.stack_pointer_increment();
    (increment < 0 || (increment == 0 && !writes_rsp))
        .then(|| ReturnSlot::Stack { offset: offset + increment.unsigned_abs() as usize })
}

pub(crate) fn decode(address: usize, bytes: &[u8]) -> Result<ProbedInsn, InsnError> {
    let mut decoder = Decoder::with_ip(64, bytes, address as u64, DecoderOptions::NONE);
    let insn = decoder.decode();
    if insn.is_invalid() {
        return Err(InsnError::Invalid);
    }
    let near =
        insn.op_count() > 0 && matches!(insn.op0_kind(), OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64);
    let target = insn.near_branch_target() as usize;
    let execution = match insn.flow_control() {
        FlowControl::Next => match insn.mnemonic() {
            Mnemonic::Pushf | Mnemonic::Pushfq | Mnemonic::Popf | Mnemonic::Popfq | Mnemonic::Cli | Mnemonic::Sti => {
                return Err(InsnError::Unsafe("it reads or writes the interrupt flag, which the step masks"));
            }
            Mnemonic::Hlt => return Err(InsnError::Unsafe("hlt waits for an interrupt the step masks")),
            _ => Execution::Step { relocated: insn.is_ip_rel_memory_operand() },
        },
        FlowControl::UnconditionalBranch if near => Execution::Simulate(Simulation::Jump { target }),
        // LOOPcc also has a condition code: only Jcc is simulated.
        FlowControl::ConditionalBranch if near && insn.is_jcc_short_or_near() => {
            Execution::Simulate(Simulation::Conditional { condition: insn.condition_code(), target })
        }
        FlowControl::ConditionalBranch => return Err(InsnError::Unsafe("loop, loopcc and jrcxz are not simulated")),
        FlowControl::Call if near => Execution::Simulate(Simulation::Call { target }),
        FlowControl::Return if insn.mnemonic() == Mnemonic::Ret => {
            let pop = if insn.op_count() > 0 { insn.immediate16() } else { 0 };
            Execution::Simulate(Simulation::Return { pop })
        }
        FlowControl::IndirectBranch | FlowControl::IndirectCall => {
            return Err(InsnError::Unsafe("indirect branches and calls are not simulated"))
        }
        FlowControl::Interrupt | FlowControl::Exception => {
            return Err(InsnError::Unsafe("it raises an interrupt or an exception"));
        }
        _ => return Err(InsnError::Unsafe("far and special control transfers are not simulated")),
    };
    let (stack_delta, stack_delta_known) = stack_delta(&insn).map_or((0, false), |delta| (delta, true));
    let mut probed = ProbedInsn { address, len: insn.len(), bytes: [0; MAX_INSN], execution, stack_delta, stack_delta_known };
    probed.bytes[..insn.len()].copy_from_slice(&bytes[..insn.len()]);
    Ok(probed)
}

/// How `insn` moves rsp (`ProbedInsn::stack_delta`): its pushes and pops
/// (`stack_pointer_increment`), `add`/`sub` of an immediate to rsp; `None`
/// for any other write of rsp (`mov`, `lea`, `leave`, an exchange).
fn stack_delta(insn: &iced_x86::Instruction) -> Option<isize> {
    let is_rsp =
        |operand: u32| insn.op_kind(operand) == OpKind::Register && insn.op_register(operand).full_register() == Register::RSP;
    let immediate = insn.op_count() == 2 && matches!(insn.op1_kind(), OpKind::Immediate8to64 | OpKind::Immediate32to64);
    if insn.op_count() > 0 && is_rsp(0) {
        return match insn.mnemonic() {
            Mnemonic::Sub if immediate => Some((insn.immediate(1) as i64).wrapping_neg() as isize),
            Mnemonic::Add if immediate => Some(insn.immediate(1) as i64 as isize),
            _ => None,
        };
    }
    let exchanges = matches!(insn.mnemonic(), Mnemonic::Xchg | Mnemonic::Xadd | Mnemonic::Cmpxchg);
    if exchanges && (1..insn.op_count()).any(is_rsp) || matches!(insn.mnemonic(), Mnemonic::Leave | Mnemonic::Enter) {
        return None;
    }
    Some(insn.stack_pointer_increment() as isize)
}

/// The slot's contents for `insn` at `slot`: its copies (a stepped
/// instruction's three, a simulated one's stepped copy only, never run)
/// and `int3`s.
pub(crate) fn slot_bytes(insn: &ProbedInsn, slot: usize) -> Result<[u8; SLOT_SIZE], InsnError> {
    let mut bytes = [BREAKPOINT[0]; SLOT_SIZE];
    copy_insn(insn, &mut bytes, slot, STEP_COPY)?;
    if let Execution::Step { .. } = insn.execution {
        let end = copy_insn(insn, &mut bytes, slot, BOOST_COPY)?;
        jump_back(insn, &mut bytes, slot, end)?;
        let end = copy_insn(insn, &mut bytes, slot, BOOST_STI_COPY)?;
        bytes[end] = STI;
        jump_back(insn, &mut bytes, slot, end + 1)?;
    }
    Ok(bytes)
}

/// Copies `insn` to offset `at` of the slot at `slot` (its RIP-relative
/// displacement adjusted for that address); answers where the copy ends.
fn copy_insn(insn: &ProbedInsn, bytes: &mut [u8; SLOT_SIZE], slot: usize, at: usize) -> Result<usize, InsnError> {
    let copy = &mut bytes[at..at + insn.len];
    copy.copy_from_slice(insn.bytes());
    let mut decoder = Decoder::with_ip(64, insn.bytes(), insn.address as u64, DecoderOptions::NONE);
    let decoded = decoder.decode();
    if decoded.is_ip_rel_memory_operand() {
        let offsets = decoder.get_constant_offsets(&decoded);
        if offsets.displacement_size() != 4 {
            return Err(InsnError::Unsafe("unexpected RIP-relative displacement size"));
        }
        let wanted = decoded.ip_rel_memory_address() as i64 - (slot + at + insn.len) as i64;
        let displacement =
            i32::try_from(wanted).map_err(|_| InsnError::Unsafe("its RIP-relative operand is out of the slot's reach"))?;
        let field = offsets.displacement_offset();
        copy[field..field + 4].copy_from_slice(&displacement.to_le_bytes());
    }
    Ok(at + insn.len)
}

/// Writes `jmp next` (to the instruction after `insn`) at offset `at` of
/// the slot at `slot`.
fn jump_back(insn: &ProbedInsn, bytes: &mut [u8; SLOT_SIZE], slot: usize, at: usize) -> Result<(), InsnError> {
    let from = (slot + at + 5) as i64;
    let displacement = i32::try_from(insn.next() as i64 - from)
        .map_err(|_| InsnError::Unsafe("the instruction after it is out of the slot's reach"))?;
    bytes[at] = JMP_REL32;
    bytes[at + 1..at + 5].copy_from_slice(&displacement.to_le_bytes());
    Ok(())
}

/// Where the slot's step-done `int3` is.
pub(crate) fn step_done_address(insn: &ProbedInsn, slot: usize) -> usize {
    slot + STEP_COPY + insn.len
}

/// Sends a hit on a stepped instruction to the boosted copy for its
/// interrupt state, with interrupts masked until the copy has jumped back
/// (the `sti` copy unmasks them on the way out); answers false for a
/// simulated one.
pub(crate) fn boost(insn: &ProbedInsn, slot: usize, regs: &mut PtRegs) -> bool {
    if !matches!(insn.execution, Execution::Step { .. }) {
        return false;
    }
    let enabled = begin_step(regs);
    regs.rip = (slot + if enabled { BOOST_STI_COPY } else { BOOST_COPY }) as u64;
    true
}

/// Masks interrupts for the step (in the registers the trap returns with);
/// answers whether they were enabled.
pub fn begin_step(regs: &mut PtRegs) -> bool {
    let enabled = regs.rflags & RFLAGS_IF != 0;
    regs.rflags &= !RFLAGS_IF;
    enabled
}

/// Undoes [`begin_step`].
pub fn end_step(regs: &mut PtRegs, enabled: bool) {
    if enabled {
        regs.rflags |= RFLAGS_IF;
    }
}

fn holds(condition: ConditionCode, rflags: u64) -> bool {
    let flag = |bit: u64| rflags & bit != 0;
    let (cf, pf, zf, sf, of) = (flag(RFLAGS_CF), flag(RFLAGS_PF), flag(RFLAGS_ZF), flag(RFLAGS_SF), flag(RFLAGS_OF));
    match condition {
        ConditionCode::o => of,
        ConditionCode::no => !of,
        ConditionCode::b => cf,
        ConditionCode::ae => !cf,
        ConditionCode::e => zf,
        ConditionCode::ne => !zf,
        ConditionCode::be => cf || zf,
        ConditionCode::a => !cf && !zf,
        ConditionCode::s => sf,
        ConditionCode::ns => !sf,
        ConditionCode::p => pf,
        ConditionCode::np => !pf,
        ConditionCode::l => sf != of,
        ConditionCode::ge => sf == of,
        ConditionCode::le => zf || sf != of,
        ConditionCode::g => !zf && sf == of,
        _ => false,
    }
}

/// Applies a simulated instruction's effect to `regs` (taken at its
/// `int3`).
///
/// # Safety
/// `regs` are the registers a probe's breakpoint trap saved at `insn`'s
/// address, and `simulation` is `insn`'s own (from [`decode`](crate::kprobes::decode)):
/// the simulation reads and writes memory where the real instruction
/// would (a return address on the stack, a literal), trusting both.
pub unsafe fn simulate(insn: &ProbedInsn, simulation: Simulation, regs: &mut PtRegs) {
    let next = insn.next() as u64;
    match simulation {
        Simulation::Jump { target } => regs.rip = target as u64,
        Simulation::Conditional { condition, target } => {
            regs.rip = if holds(condition, regs.rflags) { target as u64 } else { next };
        }
        Simulation::Call { target } => {
            regs.rsp -= 8;
            // SAFETY: the `int3` entry left a gap under the interrupted
            // stack pointer, so this slot is free stack (see `exceptions`).
            unsafe { *(regs.rsp as *mut u64) = next };
            regs.rip = target as u64;
        }
        Simulation::Return { pop } => {
            // SAFETY: the probed `ret` would read the same slot: the
            // interrupted code's stack pointer points at its return address.
            regs.rip = unsafe { *(regs.rsp as *const u64) };
            regs.rsp += 8 + u64::from(pop);
        }
    }
}

/// Defines this architecture's kprobe test fixture where it is invoked
/// (see "Test fixture" in `arch::kprobes`).
#[macro_export]
macro_rules! kprobe_fixture {
    () => {
        /// Instructions of every class a probe handles, in one function: see
        /// `fixture_expected`.
        #[inline(never)]
        fn fixture(x: u64) -> u64 {
            let out: u64;
            // SAFETY: self-contained code: local labels, its own read-only data,
            // and a call to a local label that returns.
            unsafe {
                core::arch::asm!(
                    "jmp 2f",               // jmp rel (simulated)
                    "ud2",                  // never runs; refused
                    "2: test {t}, 1",
                    "jz 3f",                // jcc (simulated)
                    "add {t}, 100",
                    "3: lea {p}, [rip + 4f]", // RIP-relative (stepped, relocated)
                    "add {t}, [{p}]",
                    "add {t}, [rip + 4f]",  // RIP-relative memory operand
                    "call 5f",              // call rel32 (simulated)
                    "jmp 6f",
                    "5: add {t}, 1000",
                    "ret",                  // ret (simulated)
                    "6: nop",
                    ".pushsection .rodata",
                    ".balign 8",
                    "4: .quad 7",
                    ".popsection",
                    t = inout(reg) x => out,
                    p = out(reg) _,
                );
            }
            out
        }

        fn fixture_expected(x: u64) -> u64 {
            x + if x & 1 == 1 { 100 } else { 0 } + 7 + 7 + 1000
        }
    };
}
