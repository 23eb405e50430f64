//! The architecture's half of kprobes: the breakpoint, the probed
//! instruction's decoding, its out-of-line slot, and the trap hook.
//!
//! A probe away from a function's ftrace site replaces one instruction with
//! a breakpoint ([`BREAKPOINT`]: `int3` on x86_64, `brk #4` on aarch64).
//! When a CPU reaches it, the exception handler calls the generic kprobes
//! code through [`set_trap_handler`] with [`Trap::Probe`]. The displaced
//! instruction then runs in one of two ways, decided once when the probe is
//! made ([`decode`]):
//!
//! - [`Execution::Step`]: a copy runs in an *out-of-line slot*, an
//!   executable area kept in kernel text, followed by a second breakpoint
//!   ([`Trap::StepDone`]) that brings control back; the generic code then
//!   resumes after the probed instruction. A copy that addresses memory
//!   relative to its own address (x86_64 RIP-relative operands) has its
//!   displacement adjusted for the slot's address. Where the architecture
//!   can ([`BOOSTS`]: x86_64), a hit with no post-handler to run is
//!   *boosted* instead ([`boost`]): it runs a copy that jumps back to the
//!   next instruction by itself, one trap instead of two, after Linux's x86
//!   kprobes (whose boosted copy runs with interrupts as they were; here
//!   they stay masked until the copy has jumped back, so the cross-CPU
//!   round that frees a slot still covers it).
//! - [`Execution::Simulate`]: an instruction whose effect depends on where it
//!   is (branches, calls, returns; aarch64 `adr`/`adrp` and literal loads)
//!   is not run at all: [`simulate`] applies its effect to the saved
//!   registers.
//!
//! The step runs with interrupts masked ([`begin_step`]/[`end_step`]), so
//! between the probe's trap and the step's trap the CPU does nothing else:
//! per-CPU state stays valid, and a cross-CPU synchronisation round
//! (`smp::sync_all`) waits for any CPU still inside a probe. Instructions
//! that would see or change that masking, or that cannot run away from
//! their address, are refused by [`decode`] with the reason.
//!
//! Slots are written through the text patcher, as data (no CPU runs a slot
//! that is being written: the generic code frees a slot only after a
//! synchronisation round).
//!
//! # Test fixture
//!
//! `arch::kprobe_fixture!()` defines, where it is invoked,
//! `fn fixture(x: u64) -> u64`, a function holding an instruction of every
//! class in [`CLASSES`], and `fn fixture_expected(x: u64) -> u64`, its
//! result computed without it. The in-kernel tests invoke it: a kprobe goes
//! only into kernel-crate functions (they have ftrace sites), and the
//! fixture is written in each architecture's assembly, so it is defined
//! here and instantiated there.

use core::fmt;

use crate::cell::AtomicFn;
use crate::ftrace_abi::ReturnSlot;
use crate::regs::PtRegs;
use crate::text::{PatchError, TextPatcher};

pub use crate::imp::kprobes::{
    begin_step, end_step, simulate, simulation_class, Simulation, BOOSTS, BREAKPOINT, CLASSES, MAX_INSN, SLOTS, SLOT_SIZE,
};

/// Which of the two kprobe breakpoints trapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trap {
    /// A probe's breakpoint, at the probed instruction.
    Probe,
    /// The breakpoint that ends an out-of-line slot.
    StepDone,
}

/// The generic handler: the trap, the breakpoint's address and the
/// registers. Answers whether the trap was a probe's (false: not ours).
pub type TrapHandler = fn(trap: Trap, address: usize, regs: &mut PtRegs) -> bool;

static TRAP_HANDLER: AtomicFn<TrapHandler> = AtomicFn::none();

/// Installs the generic kprobes trap handler.
///
/// # Safety
/// The handler runs in the breakpoint exception with the registers it
/// saved, which the exception return restores: it may change them only as
/// the probed instruction's own execution would (the instruction pointer to
/// an out-of-line slot or past the instruction, a simulated instruction's
/// effect, the interrupt mask around a step), and answers `true` only for
/// breakpoints it placed.
pub unsafe fn set_trap_handler(handler: TrapHandler) {
    TRAP_HANDLER.store(handler);
}

/// Called by the exception handlers for a breakpoint that may be a probe's.
pub(crate) fn trap(trap: Trap, address: usize, regs: &mut PtRegs) -> bool {
    TRAP_HANDLER.load().is_some_and(|handler| handler(trap, address, regs))
}

/// How a probed instruction runs. See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// A copy runs in an out-of-line slot; `relocated`: with its
    /// PC-relative operand adjusted for the slot.
    Step { relocated: bool },
    /// Its effect is applied to the registers.
    Simulate(Simulation),
}

/// A decoded instruction a probe may replace. Only [`decode`] makes one:
/// the slot writer and the simulation trust what it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbedInsn {
    pub(crate) address: usize,
    pub(crate) len: usize,
    /// Its bytes (the first `len`).
    pub(crate) bytes: [u8; MAX_INSN],
    pub(crate) execution: Execution,
    /// How running it moves the stack pointer (0 when its bytes do not
    /// say: see [`stack_delta`](Self::stack_delta)), and whether they say.
    pub(crate) stack_delta: isize,
    pub(crate) stack_delta_known: bool,
}

impl ProbedInsn {
    /// Where it is.
    pub fn address(&self) -> usize {
        self.address
    }

    /// Its length in bytes.
    pub fn length(&self) -> usize {
        self.len
    }

    /// How a probe runs it.
    pub fn execution(&self) -> Execution {
        self.execution
    }

    /// The instruction's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Where execution goes on after it when it falls through.
    pub fn next(&self) -> usize {
        self.address + self.len
    }

    /// How much running it moves the stack pointer (a push: down one word;
    /// `stp x29, x30, [sp, #-16]!`: down 16; most instructions: 0), or
    /// `None` when its bytes do not say (it sets the stack pointer from
    /// another register). A step out of line must move it exactly so: the
    /// kprobes code checks it when the step ends.
    pub fn stack_delta(&self) -> Option<isize> {
        self.stack_delta_known.then_some(self.stack_delta)
    }

    /// Whether a step of it that left the stack pointer at `after`, having
    /// found it at `before`, moved it as the instruction does (or the
    /// instruction's bytes do not say). The traced path's check: one
    /// compare when it did.
    #[inline(always)]
    pub fn moved_stack_right(&self, before: usize, after: usize) -> bool {
        after == before.wrapping_add_signed(self.stack_delta) || !self.stack_delta_known
    }
}

/// Why an instruction cannot be probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsnError {
    /// The bytes are not a valid instruction.
    Invalid,
    /// It cannot be stepped out of line or simulated safely; the reason.
    Unsafe(&'static str),
}

impl fmt::Display for InsnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsnError::Invalid => write!(f, "not a valid instruction"),
            InsnError::Unsafe(why) => write!(f, "cannot be probed: {why}"),
        }
    }
}

/// Decodes the instruction at `address` (kernel text) and decides how a
/// probe runs it.
pub fn decode(address: usize) -> Result<ProbedInsn, InsnError> {
    let mut bytes = [0u8; MAX_INSN];
    crate::text::read(address, &mut bytes[..1]).map_err(|_| InsnError::Invalid)?;
    // Text may end less than MAX_INSN bytes after the instruction.
    let readable = (1..=MAX_INSN).rev().find(|&len| crate::fault::read_nofault(address, &mut bytes[..len]).is_ok()).unwrap_or(0);
    crate::imp::kprobes::decode(address, &bytes[..readable])
}

/// Whether the code around `address` (in the function starting at
/// `function`) lets a probe there work: a breakpoint inside an aarch64
/// load/store-exclusive sequence clears the exclusive monitor on every
/// hit, so the sequence's store would fail for ever (Linux refuses those
/// probes too). Architectures without such sequences accept every place.
pub fn check_context(function: usize, address: usize) -> Result<(), InsnError> {
    crate::imp::kprobes::check_context(function, address)
}

/// Follows a function from its entry, one instruction at a time in
/// address order, to say where its return address is until it points its
/// frame pointer at a frame record of its own. Before that the frame
/// pointer is still the caller's, so a walk of the frame records from a
/// stop there starts at the caller's caller: a stack trace needs this
/// return address first (as at the entry, the ftrace site).
///
/// It follows what a compiler's prologue does before that point (and, with
/// shrink-wrapping, the tests before it): stack adjustments, stores,
/// computations into other registers, conditional branches (a fall-through
/// keeps the stack as it was, and a compiled function has one stack
/// layout per instruction). Anything else ends it: an unconditional jump,
/// a call, a write to the frame or link register, an instruction it does
/// not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrologueWalk(Option<ReturnSlot>);

impl PrologueWalk {
    /// At the function's first instruction.
    pub fn at_entry() -> PrologueWalk {
        PrologueWalk(Some(ReturnSlot::AT_ENTRY))
    }

    /// Steps over the instruction whose bytes are `code`, to the one after.
    pub fn step(&mut self, code: &[u8]) {
        self.0 = self.0.and_then(|slot| crate::imp::kprobes::prologue_step(slot, code));
    }

    /// Where the return address is at the instruction reached, if the walk
    /// can tell: `None` once the function has a frame record of its own,
    /// or the walk met something it does not follow.
    pub fn return_slot(self) -> Option<ReturnSlot> {
        self.0
    }
}

/// The address of out-of-line slot `index` (below [`SLOTS`]).
pub fn slot_address(index: usize) -> usize {
    crate::imp::kprobes::slots_start() + index * SLOT_SIZE
}

/// Which slot `address` is the step-done breakpoint of, if any.
pub fn slot_of_step_done(address: usize) -> Option<usize> {
    let start = crate::imp::kprobes::slots_start();
    let offset = address.checked_sub(start)?;
    (offset < SLOTS * SLOT_SIZE).then_some(offset / SLOT_SIZE)
}

/// Writes `insn`'s out-of-line copies into slot `index` (below
/// [`SLOTS`]): the stepped one and its step-done breakpoint, and where the
/// architecture boosts ([`BOOSTS`]), the copies that jump back by
/// themselves.
///
/// # Safety
/// No CPU may be running the slot, nor reach it before this returns: its
/// probe is gone (and a cross-CPU round has passed since), or not armed
/// yet.
pub unsafe fn fill_slot(index: usize, insn: &ProbedInsn) -> Result<(), InsnError> {
    assert!(index < SLOTS, "kprobe slot {index} out of range");
    let address = slot_address(index);
    let wanted = crate::imp::kprobes::slot_bytes(insn, address)?;
    write_slot(address, &wanted).map_err(|_| InsnError::Unsafe("its out-of-line slot could not be written"))
}

/// Sends a hit on `insn` (registers `regs`, at its probe's trap) to a
/// copy in slot `index` that runs it and jumps back to the next
/// instruction by itself, with interrupts masked until it is back (the
/// step-done trap never comes: whatever would run after the instruction
/// must run now). Answers false, changing nothing, for a simulated
/// instruction or where the architecture cannot ([`BOOSTS`]).
pub fn boost(index: usize, insn: &ProbedInsn, regs: &mut PtRegs) -> bool {
    crate::imp::kprobes::boost(insn, slot_address(index), regs)
}

/// Whether a step-done trap at `address` ends slot `index` as filled for
/// `insn` (the trap is the slot's last breakpoint, not something else).
pub fn is_step_done_of(index: usize, insn: &ProbedInsn, address: usize) -> bool {
    crate::imp::kprobes::step_done_address(insn, slot_address(index)) == address
}

fn write_slot(address: usize, bytes: &[u8; SLOT_SIZE]) -> Result<(), PatchError> {
    let mut patcher = TextPatcher::new();
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let at = address + 8 * i;
        let mut now = [0u8; 8];
        crate::text::read(at, &mut now[..chunk.len()])?;
        patcher.replace_data(at, &now[..chunk.len()], chunk)?;
    }
    Ok(())
}
