//! aarch64 kprobes: `brk` probes, instructions classified by their
//! encoding (every instruction is one 32-bit word).
//!
//! How each instruction runs (see `crate::kprobes`):
//! - PC-relative ones are simulated, as Linux's arm64 kprobes do: `b`, `bl`,
//!   `b.cond`, `cbz`/`cbnz`, `tbz`/`tbnz`, `adr`, `adrp`, `ldr`/`ldrsw`
//!   (literal), `prfm` (literal, a no-op), and the register branches `br`,
//!   `blr`, `ret`;
//! - everything else is stepped in a slot (`insn; brk #STEP`);
//! - refused: exception generation (`svc`, `hvc`, `brk`...), `eret` and the
//!   other special register branches, exclusive and ordered loads and
//!   stores (a step would clear the exclusive monitor), FP/SIMD literal
//!   loads, and what reads or writes the interrupt masks (`msr daifset`,
//!   `mrs`/`msr daif`), which the step changes; and any instruction inside
//!   a load/store-exclusive sequence ([`check_context`]).

use core::arch::global_asm;

use super::regs::PtRegs;
use crate::ftrace_abi::ReturnSlot;
use crate::kprobes::{Execution, InsnError, ProbedInsn};

/// The `brk` immediate of a probe (Linux's `KPROBES_BRK_IMM`).
pub(crate) const PROBE_IMM: u16 = 0x004;
/// The `brk` immediate that ends a slot (Linux's `KPROBES_BRK_SS_IMM`).
pub(crate) const STEP_DONE_IMM: u16 = 0x005;

const fn brk(imm: u16) -> u32 {
    0xd420_0000 | ((imm as u32) << 5)
}

/// `brk #0x004`.
pub const BREAKPOINT: [u8; 4] = brk(PROBE_IMM).to_le_bytes();
/// Every instruction is 4 bytes.
pub const MAX_INSN: usize = 4;
/// One slot: the instruction and `brk #STEP`.
pub const SLOT_SIZE: usize = 8;
/// Out-of-line slots, so breakpoint probes at once.
pub const SLOTS: usize = 64;

/// SPSR's IRQ mask bit.
const PSTATE_I: u64 = 1 << 7;

global_asm!(
    r#"
    .pushsection .text.kprobe_slots, "ax"
    .balign 8
    .global aarch64_kprobe_slots
aarch64_kprobe_slots:
    .fill {words}, 4, {step_done}
    .popsection
"#,
    words = const SLOTS * SLOT_SIZE / 4,
    step_done = const brk(STEP_DONE_IMM),
);

extern "C" {
    static aarch64_kprobe_slots: u8;
}

/// The first slot's address.
pub(crate) fn slots_start() -> usize {
    core::ptr::addr_of!(aarch64_kprobe_slots) as usize
}

/// Every way an instruction runs, by name (see [`simulation_class`]).
pub const CLASSES: &[&str] =
    &["step", "b/bl", "b.cond", "cbz/cbnz", "tbz/tbnz", "adr/adrp", "ldr (literal)", "prfm (literal)", "br/blr/ret"];

/// The name of a simulated instruction's class.
pub fn simulation_class(simulation: Simulation) -> &'static str {
    match simulation {
        Simulation::Branch { .. } => "b/bl",
        Simulation::Conditional { .. } => "b.cond",
        Simulation::CompareBranch { .. } => "cbz/cbnz",
        Simulation::TestBranch { .. } => "tbz/tbnz",
        Simulation::Address { .. } => "adr/adrp",
        Simulation::LoadLiteral { .. } => "ldr (literal)",
        Simulation::Prefetch => "prfm (literal)",
        Simulation::RegisterBranch { .. } => "br/blr/ret",
    }
}

/// What a literal load loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Literal {
    /// `ldr wN`: 32 bits, zero-extended.
    Word,
    /// `ldr xN`.
    Double,
    /// `ldrsw xN`: 32 bits, sign-extended.
    SignedWord,
}

/// An instruction whose effect is applied instead of running it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simulation {
    /// `b` / `bl`.
    Branch { target: usize, link: bool },
    /// `b.cond`.
    Conditional { condition: u8, target: usize },
    /// `cbz` / `cbnz` (`wide`: the X register, else W).
    CompareBranch { reg: u8, wide: bool, nonzero: bool, target: usize },
    /// `tbz` / `tbnz`.
    TestBranch { reg: u8, bit: u8, nonzero: bool, target: usize },
    /// `adr` / `adrp`: the address, computed when the probe was made.
    Address { reg: u8, value: u64 },
    /// `ldr` / `ldrsw` (literal).
    LoadLiteral { reg: u8, address: usize, kind: Literal },
    /// `prfm` (literal): a hint, nothing to do.
    Prefetch,
    /// `br` / `blr` / `ret`.
    RegisterBranch { reg: u8, link: bool },
}

/// Sign-extends the low `bits` bits of `value`.
fn sign_extend(value: u32, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((u64::from(value) << shift) as i64) >> shift
}

fn offset_from(pc: usize, offset: i64) -> usize {
    (pc as i64).wrapping_add(offset) as usize
}

/// Classifies the instruction at `address`.
pub(crate) fn decode(address: usize, bytes: &[u8]) -> Result<ProbedInsn, InsnError> {
    let word = u32::from_le_bytes(bytes.get(..4).ok_or(InsnError::Invalid)?.try_into().map_err(|_| InsnError::Invalid)?);
    let execution = classify(address, word)?;
    let (stack_delta, stack_delta_known) = stack_delta(word).map_or((0, false), |delta| (delta, true));
    let mut probed = ProbedInsn { address, len: 4, bytes: [0; MAX_INSN], execution, stack_delta, stack_delta_known };
    probed.bytes.copy_from_slice(&word.to_le_bytes());
    Ok(probed)
}

/// How `insn` moves sp (`ProbedInsn::stack_delta`): a load or store (of
/// a register or a pair) with sp as its base and write-back, an `add` or
/// `sub` of an immediate to sp; `None` for any other write of sp (`mov sp,
/// xN`, an extended-register `add`, a logical immediate into sp); 0 for the
/// rest, which cannot write it.
fn stack_delta(insn: u32) -> Option<isize> {
    let field = |shift: u32, bits: u32| (insn >> shift) & ((1 << bits) - 1);
    let signed = |value: u32, bits: u32| ((value << (32 - bits)) as i32 >> (32 - bits)) as isize;
    let (rd, rn) = (field(0, 5), field(5, 5));
    const SP: u32 = 31;
    if field(27, 3) == 0b101 && field(25, 1) == 0 && field(23, 1) == 1 {
        // ldp/stp, post- (bits 25:23 = 001) or pre-indexed (011).
        let scale = 2 + field(31, 1);
        return Some(if rn == SP { signed(field(15, 7), 7) << scale } else { 0 });
    }
    if field(27, 3) == 0b111 && field(24, 2) == 0 && field(21, 1) == 0 && field(10, 1) == 1 {
        // ldr/str (and their sizes), post- (bits 11:10 = 01) or pre-indexed (11).
        return Some(if rn == SP { signed(field(12, 9), 9) } else { 0 });
    }
    if field(23, 6) == 0b100010 && field(29, 1) == 0 && rd == SP {
        // add/sub (immediate) into sp.
        let immediate = (field(10, 12) << (12 * field(22, 1))) as isize;
        return (rn == SP).then_some(if field(30, 1) == 1 { -immediate } else { immediate });
    }
    let extended_into_sp = field(24, 5) == 0b01011 && field(21, 1) == 1 && field(29, 1) == 0 && rd == SP;
    let logical_into_sp = field(23, 6) == 0b100100 && field(29, 2) != 0b11 && rd == SP;
    if extended_into_sp || logical_into_sp {
        return None;
    }
    Some(0)
}

/// How far back [`check_context`] looks for a load-exclusive (Linux's
/// `MAX_ATOMIC_CONTEXT_SIZE`).
const EXCLUSIVE_WINDOW: usize = 16;

/// A load-exclusive (`ldxr`, `ldaxr`, `ldxp`, `ldaxp` and their byte and
/// halfword forms): the load/store exclusive class with o2 = 0, L = 1.
fn is_load_exclusive(insn: u32) -> bool {
    insn & 0x3f00_0000 == 0x0800_0000 && insn & (1 << 23) == 0 && insn & (1 << 22) != 0
}

/// A store-exclusive (o2 = 0, L = 0), or `clrex`: either ends a sequence.
fn ends_exclusive(insn: u32) -> bool {
    (insn & 0x3f00_0000 == 0x0800_0000 && insn & (1 << 23) == 0 && insn & (1 << 22) == 0) || insn & 0xffff_f0ff == 0xd503_305f
}

/// One step of `crate::kprobes::PrologueWalk`: the return address is in
/// x30 until x29 is pointed at the frame record (`add x29, sp, #N`, or
/// `mov x29, sp`, the same instruction).
pub(crate) fn prologue_step(slot: ReturnSlot, code: &[u8]) -> Option<ReturnSlot> {
    const FRAME_SET_UP: (u32, u32) = (0xff80_03ff, 0x9100_03fd); // add x29, sp, #imm
    const FRAME_OR_LINK: [u32; 2] = [29, 30];
    let ReturnSlot::LinkRegister = slot else { return None };
    let insn = u32::from_le_bytes(code.get(..4)?.try_into().ok()?);
    let field = |shift: u32, bits: u32| (insn >> shift) & ((1 << bits) - 1);
    let rd = field(0, 5);
    let base = field(5, 5);
    let follows = if insn & FRAME_SET_UP.0 == FRAME_SET_UP.1 {
        false
    } else if insn & 0xff00_0010 == 0x5400_0000 || insn & 0x7c00_0000 == 0x3400_0000 {
        true // b.cond, cbz/cbnz, tbz/tbnz: the fall-through
    } else if field(27, 3) == 0b101 && field(25, 2) == 0 {
        field(22, 1) == 0 && !FRAME_OR_LINK.contains(&base) // stp/stnp (x29, x30 into the record too)
    } else if field(27, 3) == 0b111 && field(25, 2) == 0 {
        // str, strb, strh with an immediate offset (bit 24 set, or bit 21
        // clear: the forms with bit 21 set and bit 24 clear include the
        // atomics, which write a register).
        let immediate_form = field(24, 1) == 1 || field(21, 1) == 0;
        field(22, 2) == 0 && immediate_form && !FRAME_OR_LINK.contains(&base)
    } else if field(26, 3) == 0b100 || field(25, 3) == 0b101 {
        !FRAME_OR_LINK.contains(&rd) // data processing, into another register (or sp)
    } else {
        false
    };
    follows.then_some(ReturnSlot::LinkRegister)
}

/// Refuses `address` inside a load/store-exclusive sequence: walking back
/// from it (at most [`EXCLUSIVE_WINDOW`] instructions, not past the
/// function's start), a load-exclusive comes before any store-exclusive.
/// Every hit there clears the exclusive monitor (the trap's own atomics do),
/// so the sequence's store-exclusive would fail on every try.
pub(crate) fn check_context(function: usize, address: usize) -> Result<(), InsnError> {
    let mut at = address;
    for _ in 0..EXCLUSIVE_WINDOW {
        if at < function + 4 {
            break;
        }
        at -= 4;
        let mut bytes = [0u8; 4];
        if crate::fault::read_nofault(at, &mut bytes).is_err() {
            break;
        }
        let insn = u32::from_le_bytes(bytes);
        if ends_exclusive(insn) {
            break;
        }
        if is_load_exclusive(insn) {
            return Err(InsnError::Unsafe("it is inside a load/store-exclusive sequence (each hit would make the store fail)"));
        }
    }
    Ok(())
}

fn classify(pc: usize, insn: u32) -> Result<Execution, InsnError> {
    let rt = (insn & 0x1f) as u8;
    let imm19 = || offset_from(pc, sign_extend(((insn >> 5) & 0x7ffff) << 2, 21));
    let simulate = |simulation| Ok(Execution::Simulate(simulation));
    if insn == 0 || insn >> 25 == 0 {
        return Err(InsnError::Invalid); // udf and the unallocated top group
    }
    match insn {
        _ if insn & 0x7c00_0000 == 0x1400_0000 => {
            let target = offset_from(pc, sign_extend((insn & 0x03ff_ffff) << 2, 28));
            simulate(Simulation::Branch { target, link: insn & 0x8000_0000 != 0 })
        }
        _ if insn & 0xff00_0010 == 0x5400_0000 => {
            simulate(Simulation::Conditional { condition: (insn & 0xf) as u8, target: imm19() })
        }
        _ if insn & 0x7e00_0000 == 0x3400_0000 => simulate(Simulation::CompareBranch {
            reg: rt,
            wide: insn & 0x8000_0000 != 0,
            nonzero: insn & 0x0100_0000 != 0,
            target: imm19(),
        }),
        _ if insn & 0x7e00_0000 == 0x3600_0000 => simulate(Simulation::TestBranch {
            reg: rt,
            bit: (((insn >> 31) << 5) | ((insn >> 19) & 0x1f)) as u8,
            nonzero: insn & 0x0100_0000 != 0,
            target: offset_from(pc, sign_extend(((insn >> 5) & 0x3fff) << 2, 16)),
        }),
        _ if insn & 0x1f00_0000 == 0x1000_0000 => {
            let imm = sign_extend((((insn >> 5) & 0x7ffff) << 2) | ((insn >> 29) & 3), 21);
            let value = if insn & 0x8000_0000 == 0 {
                offset_from(pc, imm) as u64
            } else {
                ((pc & !0xfff) as i64).wrapping_add(imm << 12) as u64
            };
            simulate(Simulation::Address { reg: rt, value })
        }
        _ if insn & 0x3b00_0000 == 0x1800_0000 => {
            if insn & 0x0400_0000 != 0 {
                return Err(InsnError::Unsafe("FP/SIMD literal loads are not simulated"));
            }
            let kind = match insn >> 30 {
                0 => Literal::Word,
                1 => Literal::Double,
                2 => Literal::SignedWord,
                _ => return simulate(Simulation::Prefetch),
            };
            simulate(Simulation::LoadLiteral { reg: rt, address: imm19(), kind })
        }
        _ if insn & 0xffff_fc1f == 0xd61f_0000 => {
            simulate(Simulation::RegisterBranch { reg: ((insn >> 5) & 0x1f) as u8, link: false })
        }
        _ if insn & 0xffff_fc1f == 0xd63f_0000 => {
            simulate(Simulation::RegisterBranch { reg: ((insn >> 5) & 0x1f) as u8, link: true })
        }
        _ if insn & 0xffff_fc1f == 0xd65f_0000 => {
            simulate(Simulation::RegisterBranch { reg: ((insn >> 5) & 0x1f) as u8, link: false })
        }
        _ if insn & 0xfe00_0000 == 0xd600_0000 => {
            Err(InsnError::Unsafe("eret and the special register branches are not simulated"))
        }
        _ if insn & 0xff00_0000 == 0xd400_0000 => Err(InsnError::Unsafe("it generates an exception (svc, hvc, smc, brk, hlt)")),
        _ if insn & 0x3f00_0000 == 0x0800_0000 => Err(InsnError::Unsafe(
            "exclusive and ordered loads and stores are not stepped (the step clears the exclusive monitor)",
        )),
        _ if insn & 0xfff8_f01f == 0xd500_401f => {
            Err(InsnError::Unsafe("it writes PSTATE (msr immediate), which the step changes"))
        }
        _ if insn & 0xffdf_ffe0 == 0xd51b_4220 => Err(InsnError::Unsafe("it reads or writes DAIF, which the step changes")),
        _ => Ok(Execution::Step { relocated: false }),
    }
}

/// The slot's contents for `insn`: the instruction and `brk #STEP`.
pub(crate) fn slot_bytes(insn: &ProbedInsn, _slot: usize) -> Result<[u8; SLOT_SIZE], InsnError> {
    let mut bytes = [0u8; SLOT_SIZE];
    bytes[..4].copy_from_slice(insn.bytes());
    bytes[4..].copy_from_slice(&brk(STEP_DONE_IMM).to_le_bytes());
    Ok(bytes)
}

/// Where the slot's step-done `brk` is.
pub(crate) fn step_done_address(_insn: &ProbedInsn, slot: usize) -> usize {
    slot + 4
}

/// No boosting here (as in Linux's arm64 kprobes): leaving a slot with
/// IRQs unmasked takes two instructions (`msr daifclr`, `b`), and an IRQ
/// between them would find the task inside the slot, where it could be
/// preempted and stay while the slot is freed and reused. Every stepped
/// hit takes the step-done trap.
pub const BOOSTS: bool = false;

/// See [`BOOSTS`]: never.
pub(crate) fn boost(_insn: &ProbedInsn, _slot: usize, _regs: &mut PtRegs) -> bool {
    false
}

/// Masks IRQs for the step (in the SPSR the trap returns with); answers
/// whether they were unmasked.
pub fn begin_step(regs: &mut PtRegs) -> bool {
    let enabled = regs.pstate & PSTATE_I == 0;
    regs.pstate |= PSTATE_I;
    enabled
}

/// Undoes [`begin_step`].
pub fn end_step(regs: &mut PtRegs, enabled: bool) {
    if enabled {
        regs.pstate &= !PSTATE_I;
    }
}

fn read(regs: &PtRegs, reg: u8) -> u64 {
    regs.regs.get(usize::from(reg)).copied().unwrap_or(0) // x31: the zero register
}

fn write(regs: &mut PtRegs, reg: u8, value: u64) {
    if let Some(slot) = regs.regs.get_mut(usize::from(reg)) {
        *slot = value;
    }
}

/// Whether condition `condition` (the 4-bit field) holds for NZCV in `pstate`.
fn holds(condition: u8, pstate: u64) -> bool {
    let flag = |bit: u32| pstate & (1 << bit) != 0;
    let (n, z, c, v) = (flag(31), flag(30), flag(29), flag(28));
    let base = match condition >> 1 {
        0 => z,
        1 => c,
        2 => n,
        3 => v,
        4 => c && !z,
        5 => n == v,
        6 => n == v && !z,
        _ => true,
    };
    // The odd conditions are the even ones negated, except AL/NV (always).
    if condition & 1 == 1 && condition != 0xf {
        !base
    } else {
        base
    }
}

/// Applies a simulated instruction's effect to `regs` (taken at its `brk`).
///
/// # Safety
/// `regs` are the registers a probe's breakpoint trap saved at `insn`'s
/// address, and `simulation` is `insn`'s own (from [`decode`](crate::kprobes::decode)):
/// the simulation reads and writes memory where the real instruction
/// would (a return address on the stack, a literal), trusting both.
pub unsafe fn simulate(insn: &ProbedInsn, simulation: Simulation, regs: &mut PtRegs) {
    let next = insn.next() as u64;
    let mut pc = next;
    match simulation {
        Simulation::Branch { target, link } => {
            if link {
                regs.regs[30] = next;
            }
            pc = target as u64;
        }
        Simulation::Conditional { condition, target } => {
            if holds(condition, regs.pstate) {
                pc = target as u64;
            }
        }
        Simulation::CompareBranch { reg, wide, nonzero, target } => {
            let value = if wide { read(regs, reg) } else { read(regs, reg) & 0xffff_ffff };
            if (value != 0) == nonzero {
                pc = target as u64;
            }
        }
        Simulation::TestBranch { reg, bit, nonzero, target } => {
            if (read(regs, reg) >> bit & 1 != 0) == nonzero {
                pc = target as u64;
            }
        }
        Simulation::Address { reg, value } => write(regs, reg, value),
        Simulation::LoadLiteral { reg, address, kind } => {
            // SAFETY: the probed instruction would load the same address: a
            // literal in the kernel image, next to the code.
            let value = unsafe {
                match kind {
                    Literal::Word => u64::from(core::ptr::read_volatile(address as *const u32)),
                    Literal::Double => core::ptr::read_volatile(address as *const u64),
                    Literal::SignedWord => core::ptr::read_volatile(address as *const i32) as i64 as u64,
                }
            };
            write(regs, reg, value);
        }
        Simulation::Prefetch => {}
        Simulation::RegisterBranch { reg, link } => {
            pc = read(regs, reg);
            if link {
                regs.regs[30] = next;
            }
        }
    }
    regs.pc = pc;
}

/// Defines this architecture's kprobe test fixture where it is invoked
/// (see "Test fixture" in `arch::kprobes`).
#[macro_export]
macro_rules! kprobe_fixture {
    () => {
        /// Instructions of every class a probe handles, in one function: see
        /// `fixture_expected`. Its literal pool reads as `udf`: a probe there
        /// would change the data, and is refused; so is one inside its
        /// load/store-exclusive sequence, which would loop for ever.
        #[inline(never)]
        fn fixture(x: u64) -> u64 {
            let out: u64;
            let mut exclusive = 0u64;
            // SAFETY: self-contained code: local labels, its own literals, and
            // calls to local labels that return (x30 is declared clobbered),
            // and an exclusive increment of a local.
            unsafe {
                core::arch::asm!(
                    "b 2f",                     // b (simulated)
                    "udf #0",                   // never runs; refused
                    "2: tbz {t}, #0, 3f",       // tbz (simulated)
                    "add {t}, {t}, #100",
                    "3: cbz {t}, 4f",           // cbz (simulated)
                    "add {t}, {t}, #1",
                    "4: cmp {t}, #5",
                    "b.lo 5f",                  // b.cond (simulated)
                    "add {t}, {t}, #2",
                    "5: adr {p}, 8f",           // adr (simulated)
                    "ldr {p}, [{p}]",           // an ordinary load (stepped)
                    "and {p}, {p}, #0xff",
                    "add {t}, {t}, {p}",
                    "adrp {p}, 9f",             // adrp (simulated)
                    "add {p}, {p}, :lo12:9f",
                    "ldr {p}, [{p}]",
                    "add {t}, {t}, {p}",
                    "ldr {p}, 8f",              // ldr x (literal, simulated)
                    "and {p}, {p}, #0xff",
                    "add {t}, {t}, {p}",
                    "ldr {p:w}, 8f",            // ldr w (literal)
                    "and {p}, {p}, #0xff",
                    "add {t}, {t}, {p}",
                    "ldrsw {p}, 8f",            // ldrsw (literal)
                    "and {p}, {p}, #0xff",
                    "add {t}, {t}, {p}",
                    "prfm pldl1keep, 8f",       // prfm (literal)
                    "bl 6f",                    // bl (simulated)
                    "adr {p}, 7f",
                    "blr {p}",                  // blr (simulated)
                    "adr {p}, 10f",
                    "br {p}",                   // br (simulated)
                    "6: add {t}, {t}, #1000",
                    "ret",                      // ret (simulated)
                    "7: add {t}, {t}, #2000",
                    "ret",
                    "8: udf #0x1f",             // a literal pool: data, refused
                    "udf #0x1f",
                    "10: nop",
                    "11: ldxr {p}, [{m}]",      // a load-exclusive: refused
                    "add {p}, {p}, #1",         // inside its sequence: refused
                    "stxr {s:w}, {p}, [{m}]",   // a store-exclusive: refused
                    "cbnz {s:w}, 11b",          // after it: simulated
                    ".pushsection .rodata",
                    ".balign 8",
                    "9: .quad 7",
                    ".popsection",
                    t = inout(reg) x => out,
                    p = out(reg) _,
                    s = out(reg) _,
                    m = in(reg) &mut exclusive as *mut u64,
                    out("x30") _,
                );
            }
            out
        }

        fn fixture_expected(x: u64) -> u64 {
            let mut t = x + if x & 1 == 1 { 100 } else { 0 };
            if t != 0 {
                t += 1;
            }
            if t >= 5 {
                t += 2;
            }
            t + 4 * 0x1f + 7 + 1000 + 2000
        }
    };
}
