//! Registering kprobes, and what runs when one is hit.
//!
//! Design: see the crate documentation. A probe is a heap object that
//! lives from registration until `unregister` returns; handlers get `&Kprobe`
//! for its private data.
//!
//! Breakpoint probes are found by the trap handler in `ARMED`, a fixed
//! table of atomics indexed by the probe's out-of-line slot: no lock on the
//! trap path, and the slot's step-done trap finds its probe by index.
//! Registration (a sleeping mutex, task context) fills the slot and the
//! table entry before the breakpoint goes in; unregistration takes the
//! breakpoint out, waits for every CPU (a CPU inside a probe's handlers or
//! step has interrupts masked, so a cross-CPU round waits for it), and only
//! then empties the entry, waits again and frees.
//!
//! Each CPU has a control block (`Control`): whether a handler or a step
//! is running on it, and for a probe hit inside a handler, what that hit
//! interrupted. Every access is with interrupts masked on that CPU.
//!
//! Several probes at one address share its breakpoint, as Linux's
//! aggregate probes do: the first (the *head*) owns the slot and is the
//! table's entry; the others follow it in a chain (`next`), linked under
//! the registration lock with release stores and walked by the trap path
//! with interrupts masked. A hit runs every pre-handler of the chain, the
//! instruction once, then every post-handler. Unregistering a follower
//! unlinks it; the head hands the slot to its first follower; either way
//! the probe is freed only after a cross-CPU round, which a CPU inside
//! the chain's handlers or step holds up.
//!
//! Failure modes: a bad place or instruction is refused before anything
//! changes ([`KprobeError`]). A probe hit inside a handler is counted as
//! missed and runs its instruction without handlers; a second such hit
//! inside that one cannot happen (the step runs masked, in a slot no probe
//! can be on), and would stop the kernel with a report.

use alloc::boxed::Box;
use alloc::string::String;
use core::cell::UnsafeCell;
use core::fmt;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use arch::ftrace_abi::{FtraceRegs, PtRegs, ReturnSlot};
use arch::irq::IrqGuard;
use arch::kprobes::{self as insn, Execution, InsnError, ProbedInsn, Trap, SLOTS};
use arch::sync::Mutex;
use arch::text::{PatchError, TextPatcher};
use arch::{cpu, MAX_CPUS};
use ftrace::symbols::table::NameError;
use ftrace::{FilterKind, FilterMode, FtraceError, FtraceOps, OpsFlags};

use crate::location::Location;

/// A handler: the probe, and the registers at the probed instruction
/// (pre-handler: before it runs, `ip` the probe's address; post-handler:
/// after it ran). Handlers read the registers and change none: a write
/// would change what the probed code computes or where it goes, which no
/// safe handler may do.
pub type Handler = fn(probe: &Kprobe, regs: &PtRegs);

/// What a probe does, before it is registered.
#[derive(Clone, Copy, Default)]
pub struct KprobeConfig {
    pub pre_handler: Option<Handler>,
    pub post_handler: Option<Handler>,
    /// Private data for the handlers ([`Kprobe::private`]).
    pub private: usize,
}

/// Why a probe was not registered. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KprobeError {
    /// The symbol names no one function.
    Name(NameError),
    /// No function contains the address.
    NotInFunction(usize),
    /// The offset is past the function's last byte.
    PastEnd { function: String, offset: usize, size: usize },
    /// The offset falls inside an instruction.
    NotInstructionBoundary { function: String, offset: usize },
    /// Inside the function's ftrace site, past its first instruction.
    InsideFtraceSite { function: String, offset: usize },
    /// The function has no ftrace site: the probe machinery itself and
    /// the code it runs (see the crate documentation).
    Blacklisted(String),
    /// The instruction cannot be stepped or simulated.
    Instruction { function: String, offset: usize, why: InsnError },
    /// Every out-of-line slot is taken.
    NoSlot,
    /// The text patcher refused (the text is not what it was).
    Patch(PatchError),
    /// Tracing refused the entry probe's ops.
    Ftrace(FtraceError),
    /// No handler given.
    NoHandler,
    /// A kretprobe away from a function's entry.
    NotAtEntry { function: String, offset: usize },
    /// More per-call data words than a kretprobe may have.
    TooMuchData { words: usize, max: usize },
}

impl fmt::Display for KprobeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KprobeError::Name(error) => write!(f, "{error}"),
            KprobeError::NotInFunction(address) => write!(f, "{address:#x} is not inside a kernel function"),
            KprobeError::PastEnd { function, offset, size } => {
                write!(f, "offset {offset:#x} is past the end of {function} ({size:#x} bytes)")
            }
            KprobeError::NotInstructionBoundary { function, offset } => {
                write!(f, "{function}+{offset:#x} is not an instruction boundary")
            }
            KprobeError::InsideFtraceSite { function, offset } => {
                write!(f, "{function}+{offset:#x} is inside the function's ftrace site (probe {function}+0 instead)")
            }
            KprobeError::Blacklisted(function) => {
                write!(f, "{function} cannot be probed: it has no ftrace site (the probe machinery and the code it runs)")
            }
            KprobeError::Instruction { function, offset, why } => write!(f, "the instruction at {function}+{offset:#x} {why}"),
            KprobeError::NoSlot => write!(f, "no free out-of-line slot ({SLOTS} breakpoint probes at most)"),
            KprobeError::Patch(error) => write!(f, "text patch refused: {error}"),
            KprobeError::Ftrace(error) => write!(f, "{error}"),
            KprobeError::NoHandler => write!(f, "a kprobe needs a pre- or a post-handler"),
            KprobeError::NotAtEntry { function, offset } => {
                write!(f, "a return probe must be at a function's entry, not {function}+{offset:#x}")
            }
            KprobeError::TooMuchData { words, max } => write!(f, "{words} data words per call is more than {max}"),
        }
    }
}

/// A place checked for a probe: the address, and the function it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub address: usize,
    pub function: &'static str,
    pub function_address: usize,
    pub offset: usize,
    /// At the function's entry: the probe rides on the ftrace site.
    pub at_entry: bool,
    /// Where the return address is when the function has no frame record
    /// of its own yet here (at the entry, and early in its prologue): a
    /// stack trace from here takes it before walking the frame records.
    pub before_frame: Option<arch::ftrace_abi::ReturnSlot>,
}

/// Checks `location` for a probe (see the crate documentation).
pub fn resolve(location: &Location) -> Result<Place, KprobeError> {
    let table =
        ftrace::symbols::kernel::table().map_err(|_| KprobeError::Name(NameError::Unknown(String::from("(no symbol table)"))))?;
    let (symbol, offset) = match location {
        Location::Symbol { symbol, offset } => (table.resolve(symbol).map_err(KprobeError::Name)?, *offset),
        Location::Address(address) => {
            let symbol = table.lookup(*address).ok_or(KprobeError::NotInFunction(*address))?;
            (symbol, address - symbol.address)
        }
    };
    let function = symbol.name;
    if offset >= symbol.size {
        return Err(KprobeError::PastEnd { function: function.into(), offset, size: symbol.size });
    }
    if ftrace::site(symbol.address).is_none_or(|site| site.failed) {
        return Err(KprobeError::Blacklisted(function.into()));
    }
    let site_end = arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN;
    if offset > 0 && offset < site_end {
        return Err(KprobeError::InsideFtraceSite { function: function.into(), offset });
    }
    let mut place = Place {
        address: symbol.address + offset,
        function,
        function_address: symbol.address,
        offset,
        at_entry: offset == 0,
        before_frame: Some(ReturnSlot::AT_ENTRY),
    };
    if !place.at_entry {
        // Another probe's breakpoint in the way reads as a one-byte `int3`:
        // the walk takes that instruction from its probe. (The ftrace site
        // is a no-op to the prologue walk.)
        let _registry = REGISTRY.lock();
        let mut prologue = arch::kprobes::PrologueWalk::at_entry();
        let mut at = symbol.address + site_end;
        while at < place.address {
            let mut bytes = [0u8; 16];
            let len = match armed_at(at) {
                Some(insn) => {
                    bytes[..insn.length()].copy_from_slice(insn.bytes());
                    insn.length()
                }
                None => {
                    arch::fault::read_nofault(at, &mut bytes).ok().and_then(|()| arch::disasm::length(&bytes, at)).unwrap_or(0)
                }
            };
            if len == 0 {
                break;
            }
            prologue.step(&bytes[..len]);
            at += len;
        }
        if at != place.address {
            return Err(KprobeError::NotInstructionBoundary { function: function.into(), offset });
        }
        place.before_frame = prologue.return_slot();
    }
    Ok(place)
}

/// The instruction a breakpoint probe displaced at `address`, if one is
/// armed there. The registry lock held.
fn armed_at(address: usize) -> Option<ProbedInsn> {
    ARMED.iter().find_map(|entry| {
        // SAFETY: entries are freed only under the registry lock, held.
        let probe = unsafe { entry.load(Ordering::Acquire).as_ref() }?;
        match probe.mechanism {
            Mechanism::Breakpoint { insn, .. } if insn.address() == address => Some(insn),
            _ => None,
        }
    })
}

/// Decodes the instruction at `address` for a probe, as it is without
/// breakpoints (a probed one is read from its probe).
pub fn instruction_at(address: usize) -> Result<ProbedInsn, InsnError> {
    let _registry = REGISTRY.lock();
    armed_at(address).map_or_else(|| arch::kprobes::decode(address), Ok)
}

/// How a registered probe is reached.
#[derive(Clone, Copy)]
enum Mechanism {
    /// Through the function's ftrace site (its `ops`).
    Ftrace,
    /// A breakpoint, with the displaced instruction and its slot index.
    Breakpoint { insn: ProbedInsn, slot: usize },
}

/// A registered probe, as handlers see it.
#[repr(C)]
pub struct Kprobe {
    /// Used by probes at a function's entry; its container is the probe.
    ops: FtraceOps,
    place: Place,
    config: KprobeConfig,
    mechanism: Mechanism,
    hits: AtomicU64,
    missed: AtomicU64,
    /// The next probe at the same address (breakpoint probes): see the
    /// module documentation.
    next: AtomicPtr<Kprobe>,
}

impl Kprobe {
    /// This probe and those after it at its address, in registration order.
    ///
    /// # Safety
    /// The caller holds up probe frees: interrupts masked (the trap path),
    /// or the registry lock.
    unsafe fn chain(&self) -> impl Iterator<Item = &Kprobe> {
        // SAFETY: the caller's promise: a probe in the chain is freed only
        // after it is unlinked and a cross-CPU round (or under the lock).
        core::iter::successors(Some(self), |probe| unsafe { probe.next.load(Ordering::Acquire).as_ref() })
    }

    /// Runs `f` on this probe and those after it: [`chain`](Self::chain)
    /// as the trap path walks it, one load and test a probe.
    ///
    /// # Safety
    /// As for [`chain`](Self::chain).
    #[inline(always)]
    unsafe fn each_in_chain(&self, mut f: impl FnMut(&Kprobe)) {
        let mut probe = self;
        loop {
            f(probe);
            let next = probe.next.load(Ordering::Acquire);
            if next.is_null() {
                return;
            }
            // SAFETY: the caller's promise, as for `chain`.
            probe = unsafe { &*next };
        }
    }

    /// The private data given at registration.
    pub fn private(&self) -> usize {
        self.config.private
    }

    /// The probed address.
    pub fn address(&self) -> usize {
        self.place.address
    }

    /// The probed place.
    pub fn place(&self) -> &Place {
        &self.place
    }
}

/// The breakpoint probes, by slot. See the module documentation.
static ARMED: [AtomicPtr<Kprobe>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];
/// Serialises registration and unregistration.
static REGISTRY: Mutex<()> = Mutex::new(());

/// A registered probe. Dropping it unregisters it.
pub struct RegisteredKprobe {
    probe: NonNull<Kprobe>,
}

// SAFETY: the handle reaches the probe through atomics and the
// registration lock.
unsafe impl Send for RegisteredKprobe {}
// SAFETY: as above.
unsafe impl Sync for RegisteredKprobe {}

/// Registers a probe at `location`. Either it is in place when this
/// returns, or nothing changed.
pub fn register_kprobe(location: &Location, config: KprobeConfig) -> Result<RegisteredKprobe, KprobeError> {
    if config.pre_handler.is_none() && config.post_handler.is_none() {
        return Err(KprobeError::NoHandler);
    }
    let place = resolve(location)?;
    // SAFETY: `on_trap` answers only for the probes' own breakpoints, and
    // changes the trap's registers only as the probed instruction would
    // (its step or simulation), never through a handler (they get
    // `&PtRegs`).
    unsafe { arch::kprobes::set_trap_handler(on_trap) };
    arch::flight::set_reporter(report_armed);
    let _registry = REGISTRY.lock();
    if place.at_entry {
        return register_on_ftrace(place, config);
    }
    if let Some(head) = lookup(place.address) {
        return Ok(follow(head, place, config));
    }
    let insn = arch::kprobes::check_context(place.function_address, place.address)
        .and_then(|()| arch::kprobes::decode(place.address))
        .map_err(|why| KprobeError::Instruction { function: place.function.into(), offset: place.offset, why })?;
    let slot = ARMED.iter().position(|entry| entry.load(Ordering::Relaxed).is_null()).ok_or(KprobeError::NoSlot)?;
    if let Execution::Step { .. } = insn.execution() {
        // SAFETY: the slot's entry is empty: its last probe was unarmed and
        // a cross-CPU round passed before the entry was cleared (`Drop`),
        // and this one is not armed yet.
        unsafe { arch::kprobes::fill_slot(slot, &insn) }.map_err(|why| KprobeError::Instruction {
            function: place.function.into(),
            offset: place.offset,
            why,
        })?;
    }
    let probe = Box::into_raw(Box::new(Kprobe {
        ops: FtraceOps::new(on_ftrace, OpsFlags::empty()),
        place,
        config,
        mechanism: Mechanism::Breakpoint { insn, slot },
        hits: AtomicU64::new(0),
        missed: AtomicU64::new(0),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    ARMED[slot].store(probe, Ordering::Release);
    let breakpoint = &arch::kprobes::BREAKPOINT;
    let armed = {
        let mut patcher = TextPatcher::new();
        patcher.replace(insn.address(), &insn.bytes()[..breakpoint.len()], breakpoint)
    };
    match armed {
        // SAFETY: from `Box::into_raw`, not null.
        Ok(()) => Ok(RegisteredKprobe { probe: unsafe { NonNull::new_unchecked(probe) } }),
        Err(error) => {
            ARMED[slot].store(ptr::null_mut(), Ordering::Release);
            // The trap path of other probes looks through every entry: one
            // that loaded this one may still read it until a round passes.
            arch::smp::sync_all();
            // SAFETY: never armed, unpublished and waited for; made by
            // `Box::into_raw` above.
            drop(unsafe { Box::from_raw(probe) });
            Err(KprobeError::Patch(error))
        }
    }
}

/// A probe sharing `head`'s breakpoint: linked last in its chain, complete
/// before the release store that publishes it. The registry lock held.
fn follow(head: &'static Kprobe, place: Place, config: KprobeConfig) -> RegisteredKprobe {
    let probe = Box::into_raw(Box::new(Kprobe {
        ops: FtraceOps::new(on_ftrace, OpsFlags::empty()),
        place,
        config,
        mechanism: head.mechanism,
        hits: AtomicU64::new(0),
        missed: AtomicU64::new(0),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    // SAFETY: the registry lock is held: no probe of the chain is freed.
    let last = unsafe { head.chain() }.last().unwrap_or(head);
    last.next.store(probe, Ordering::Release);
    // SAFETY: from `Box::into_raw`, not null.
    RegisteredKprobe { probe: unsafe { NonNull::new_unchecked(probe) } }
}

fn register_on_ftrace(place: Place, config: KprobeConfig) -> Result<RegisteredKprobe, KprobeError> {
    // The handle (and the error path) free through this pointer: it keeps
    // the box's ownership, which a pointer made from a shared reference
    // would not.
    let raw = Box::into_raw(Box::new(Kprobe {
        ops: FtraceOps::new(on_ftrace, OpsFlags::SAVE_REGS | OpsFlags::RECURSION),
        place,
        config,
        mechanism: Mechanism::Ftrace,
        hits: AtomicU64::new(0),
        missed: AtomicU64::new(0),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    // SAFETY: just made; freed only through `raw`, after every use of this.
    let probe: &'static Kprobe = unsafe { &*raw };
    probe.ops.set_container(probe);
    match register_entry_ops(&probe.ops, probe.place.address) {
        // SAFETY: from `Box::into_raw`, not null.
        Ok(()) => Ok(RegisteredKprobe { probe: unsafe { NonNull::new_unchecked(raw) } }),
        Err(error) => {
            // SAFETY: never registered; made by `Box::into_raw` above.
            drop(unsafe { Box::from_raw(raw) });
            Err(KprobeError::Ftrace(error))
        }
    }
}

/// Registers `ops` (a `SAVE_REGS` ops whose container is set) on the
/// function at `address` alone.
pub(crate) fn register_entry_ops(ops: &'static FtraceOps, address: usize) -> Result<(), FtraceError> {
    ftrace::set_filter_ips(ops, FilterKind::Filter, &[address], FilterMode::Replace).and_then(|()| ftrace::register(ops))
}

impl RegisteredKprobe {
    fn probe(&self) -> &Kprobe {
        // SAFETY: the handle keeps the probe alive until it is dropped.
        unsafe { self.probe.as_ref() }
    }

    /// The probed place.
    pub fn place(&self) -> &Place {
        &self.probe().place
    }

    /// Whether the probe rides on the function's ftrace site.
    pub fn on_ftrace(&self) -> bool {
        matches!(self.probe().mechanism, Mechanism::Ftrace)
    }

    /// How the displaced instruction runs (breakpoint probes).
    pub fn execution(&self) -> Option<Execution> {
        match self.probe().mechanism {
            Mechanism::Breakpoint { insn, .. } => Some(insn.execution()),
            Mechanism::Ftrace => None,
        }
    }

    /// Times the handlers ran.
    pub fn hits(&self) -> u64 {
        self.probe().hits.load(Ordering::Relaxed)
    }

    /// Hits not handled: inside another probe's handler (or, at a
    /// function's entry, inside tracing code).
    pub fn nmissed(&self) -> u64 {
        self.probe().missed.load(Ordering::Relaxed) + self.probe().ops.missed()
    }

    /// Unregisters: once this returns no handler of the probe runs, and no
    /// CPU is inside its slot.
    pub fn unregister(self) {
        drop(self);
    }
}

impl Drop for RegisteredKprobe {
    fn drop(&mut self) {
        let _registry = REGISTRY.lock();
        let probe = self.probe.as_ptr();
        // SAFETY: the handle owns the probe; it is freed at the end only.
        let probe_ref: &'static Kprobe = unsafe { &*probe };
        match probe_ref.mechanism {
            Mechanism::Ftrace => {
                // Refused (a drop inside a callback, with interrupts masked,
                // in an interrupt): the ops stays registered, so the probe
                // it leads to must stay too. Leaked, as a refused fprobe
                // unregistration leaks its probe.
                if ftrace::unregister(&probe_ref.ops).is_err() {
                    return;
                }
                ftrace::deferred::synchronize();
            }
            Mechanism::Breakpoint { slot, .. } if !ptr::eq(ARMED[slot].load(Ordering::Acquire), probe) => {
                // A follower: unlinked from its chain; a trap that already
                // loaded it is done after a round.
                let head = ARMED[slot].load(Ordering::Acquire);
                // SAFETY: the registry lock is held: the chain stays.
                let before = unsafe { (*head).chain() }.find(|other| ptr::eq(other.next.load(Ordering::Acquire), probe));
                if let Some(before) = before {
                    before.next.store(probe_ref.next.load(Ordering::Acquire), Ordering::Release);
                }
                arch::smp::sync_all();
            }
            Mechanism::Breakpoint { slot, .. } if !probe_ref.next.load(Ordering::Acquire).is_null() => {
                // The head of a chain: its first follower (the same
                // breakpoint and slot) becomes the head.
                ARMED[slot].store(probe_ref.next.load(Ordering::Acquire), Ordering::Release);
                arch::smp::sync_all();
            }
            Mechanism::Breakpoint { insn, slot } => {
                let breakpoint = &arch::kprobes::BREAKPOINT;
                // The breakpoint this probe wrote is still there: only the
                // registry writes it, under its lock. Should the patch be
                // refused (the bytes there not the breakpoint), the probe
                // stays armed behind whatever is there, and is leaked.
                if TextPatcher::new().replace(insn.address(), breakpoint, &insn.bytes()[..breakpoint.len()]).is_err() {
                    return;
                }
                arch::smp::sync_all();
                ARMED[slot].store(ptr::null_mut(), Ordering::Release);
                arch::smp::sync_all();
            }
        }
        // SAFETY: nothing reaches the probe any more (see above); it came
        // from `Box::into_raw`.
        drop(unsafe { Box::from_raw(probe) });
    }
}

// ---- the traced side ----

/// What a CPU is doing about kprobes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Idle,
    /// A handler (of any probe, kretprobes included) is running.
    Handler,
    /// The probe's instruction runs in its slot; `reentry`: for a hit
    /// inside a handler, so without handlers.
    Step {
        reentry: bool,
    },
}

#[derive(Clone, Copy)]
struct Active {
    status: Status,
    probe: *const Kprobe,
    /// Whether interrupts were enabled where the step was taken.
    irqs: bool,
}

/// A CPU's kprobe state: what runs now, and what a hit inside a handler
/// interrupted.
struct Control {
    now: Active,
    interrupted: Option<Active>,
    /// Step-done traps handled on this CPU (see `step_traps_here`; test
    /// builds count them).
    #[cfg(feature = "test-hooks")]
    steps: u64,
    /// The stack pointer the instruction being stepped found: its step's
    /// end checks it moved it as it does (one step at a time per CPU,
    /// interrupts masked).
    step_sp: usize,
}

/// The flight recorder's part from kprobes: every breakpoint probe armed,
/// its slot and its hits (read where the probes keep them: nothing is
/// recorded on the traced path, where a record per hit would cost a hit
/// some 2%).
fn report_armed(out: &mut dyn fmt::Write) {
    for (slot, entry) in ARMED.iter().enumerate() {
        // SAFETY: as in `lookup`; a report may race an unregistration, whose
        // cross-CPU round the reporting CPU (interrupts masked, or dying)
        // holds up.
        let Some(probe) = (unsafe { entry.load(Ordering::Acquire).as_ref() }) else { continue };
        let _ = write!(out, "  kprobe armed at ");
        let _ = arch::print::write_code_address(out, probe.place.address);
        let _ = writeln!(out, " (slot {slot}), {} hits", probe.hits.load(Ordering::Relaxed));
    }
}

struct PerCpu(UnsafeCell<Control>);

// SAFETY: each CPU touches only its own entry, with interrupts masked.
unsafe impl Sync for PerCpu {}

const IDLE: Active = Active { status: Status::Idle, probe: ptr::null(), irqs: false };

static CONTROL: [PerCpu; MAX_CPUS] = [const {
    PerCpu(UnsafeCell::new(Control {
        now: IDLE,
        interrupted: None,
        #[cfg(feature = "test-hooks")]
        steps: 0,
        step_sp: 0,
    }))
}; MAX_CPUS];

/// This CPU's control block.
///
/// # Safety
/// Interrupts are masked, and the caller holds no other reference to it.
#[allow(clippy::mut_from_ref)]
unsafe fn this_cpu() -> &'static mut Control {
    // SAFETY: per the contract, this CPU is the only one using its entry
    // and nothing else on it runs until the reference is dropped.
    unsafe { &mut *CONTROL[cpu::id()].0.get() }
}

/// Forgets what this CPU was doing about kprobes: for a test harness whose
/// test panicked inside a handler, so that later hits on this CPU are not
/// all counted as misses.
///
/// # Safety
/// The flow that was in a handler or a step on this CPU is abandoned for
/// good (its stack is not returned to).
pub unsafe fn forget_abandoned() {
    let _irqs = IrqGuard::new();
    // SAFETY: interrupts are masked and no other reference is held.
    let control = unsafe { this_cpu() };
    control.now = IDLE;
    control.interrupted = None;
}

/// Runs `f` as a handler: if a handler already runs on this CPU, counts a
/// miss in `missed` instead. For the handlers of probes that are not
/// breakpoints (entry probes, kretprobes).
pub(crate) fn run_handler(missed: &AtomicU64, f: impl FnOnce()) {
    let _irqs = IrqGuard::new();
    // SAFETY: interrupts are masked; the reference is dropped before `f`
    // (which may hit a breakpoint probe and use the block itself).
    let idle = unsafe { this_cpu() }.now.status == Status::Idle;
    if !idle {
        missed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: as above.
    unsafe { this_cpu() }.now.status = Status::Handler;
    f();
    // SAFETY: as above.
    unsafe { this_cpu() }.now = IDLE;
}

/// The callback of an entry probe's ops.
extern "C" fn on_ftrace(_ip: usize, _parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: only `register_on_ftrace` installs this callback, in a probe
    // that lives until its ops is unregistered and a grace period passed.
    let probe = unsafe { &*ops.container::<Kprobe>() };
    let Some(regs) = fregs.regs() else { return };
    run_handler(&probe.missed, || {
        probe.hits.fetch_add(1, Ordering::Relaxed);
        if let Some(pre) = probe.config.pre_handler {
            pre(probe, regs);
        }
        if let Some(post) = probe.config.post_handler {
            post(probe, regs);
        }
    });
}

/// The probe armed at `address` (the head of its chain), if any: for the
/// trap path (interrupts masked) and for registration (the registry lock
/// held).
fn lookup(address: usize) -> Option<&'static Kprobe> {
    ARMED.iter().find_map(|entry| {
        // SAFETY: an entry is emptied, and its probe freed, only under the
        // registry lock and after a cross-CPU round, which a trap
        // (interrupts masked) holds up.
        let probe = unsafe { entry.load(Ordering::Acquire).as_ref() }?;
        (probe.place.address == address).then_some(probe)
    })
}

/// The breakpoint trap handler (installed in `arch::kprobes`).
fn on_trap(trap: Trap, address: usize, regs: &mut PtRegs) -> bool {
    match trap {
        Trap::Probe => on_probe(address, regs),
        Trap::StepDone => on_step_done(address, regs),
    }
}

fn on_probe(address: usize, regs: &mut PtRegs) -> bool {
    let Some(probe) = lookup(address) else { return false };
    // Borrowed, not copied: the trap path reads the decoded instruction
    // where the probe keeps it.
    let Mechanism::Breakpoint { ref insn, slot } = probe.mechanism else { return false };
    regs.set_ip(address);
    // SAFETY: trap context: interrupts are masked.
    let control = unsafe { this_cpu() };
    if control.now.status != Status::Idle {
        // SAFETY: trap context (interrupts masked): the chain stays.
        unsafe { probe.each_in_chain(|probe| _ = probe.missed.fetch_add(1, Ordering::Relaxed)) };
        if control.interrupted.is_some() {
            panic!("kprobes: a probe hit at {address:#x} inside a probe's step cannot be handled");
        }
        control.interrupted = Some(control.now);
        run_instruction(probe, insn, slot, regs, control, true);
        return true;
    }
    control.now = Active { status: Status::Handler, probe, irqs: false };
    // SAFETY: as above.
    unsafe {
        probe.each_in_chain(|probe| {
            probe.hits.fetch_add(1, Ordering::Relaxed);
            if let Some(pre) = probe.config.pre_handler {
                pre(probe, regs);
            }
        })
    };
    // SAFETY: as above; the handler's own use of the block is over.
    let control = unsafe { this_cpu() };
    run_instruction(probe, insn, slot, regs, control, false);
    true
}

/// Runs the probed instruction: simulated now, boosted (its slot's copy
/// jumps back by itself: nothing waits for it to run), or stepped in its
/// slot (the step-done trap finishes).
fn run_instruction(probe: &Kprobe, insn: &ProbedInsn, slot: usize, regs: &mut PtRegs, control: &mut Control, reentry: bool) {
    match insn.execution() {
        Execution::Simulate(simulation) => {
            // SAFETY: the probe's breakpoint trapped with `regs`, at its
            // instruction, which `decode` classified.
            unsafe { insn::simulate(insn, simulation, regs) };
            finish(probe, regs, control, reentry);
        }
        // A post-handler runs after the instruction, so only a hit with
        // none to run (a reentry runs none) may leave the instruction for
        // later; and nothing runs after it, not even a post-handler a
        // probe registered since has brought (it runs from its next hit).
        // (`BOOSTS` first: where it is false this arm is gone.)
        Execution::Step { .. } if insn::BOOSTS && (reentry || !has_post_handler(probe)) && insn::boost(slot, insn, regs) => {
            leave(control, reentry);
        }
        Execution::Step { .. } => {
            let irqs = insn::begin_step(regs);
            control.now = Active { status: Status::Step { reentry }, probe, irqs };
            control.step_sp = regs.sp().wrapping_add_signed(skew());
            regs.set_ip(insn::slot_address(slot));
        }
    }
}

/// After the instruction: the post-handler, or back to what a reentry
/// interrupted.
fn finish(probe: &Kprobe, regs: &mut PtRegs, control: &mut Control, reentry: bool) {
    if reentry {
        leave(control, true);
        return;
    }
    control.now = Active { status: Status::Handler, probe, irqs: false };
    // SAFETY: trap context (interrupts masked): the chain stays.
    unsafe {
        probe.each_in_chain(|probe| {
            if let Some(post) = probe.config.post_handler {
                post(probe, regs);
            }
        })
    };
    // SAFETY: trap context; the handler's use of the block is over.
    unsafe { this_cpu() }.now = IDLE;
}

/// The hit is over: the CPU goes back to idle, or, for a reentry, to the
/// handler or step it interrupted.
fn leave(control: &mut Control, reentry: bool) {
    control.now = if reentry { control.interrupted.take().unwrap_or(IDLE) } else { IDLE };
}

/// Whether a probe at `probe`'s address has a post-handler.
fn has_post_handler(probe: &Kprobe) -> bool {
    let mut any = false;
    // SAFETY: trap context (interrupts masked): the chain stays.
    unsafe { probe.each_in_chain(|probe| any |= probe.config.post_handler.is_some()) };
    any
}

/// How many hits on this CPU have stepped their instruction out of line
/// and come back through the step-done trap since boot. A boosted hit (see
/// `arch::kprobes::boost`) does not count: its one trap is the probe's
/// own. (Per CPU, kept in its control block: the trap path shares nothing
/// with other CPUs. Keep the caller on one CPU, `arch::preempt::Guard`,
/// between two reads.) Test builds only: the shipped kernel's traps do
/// not count.
#[cfg(feature = "test-hooks")]
pub fn step_traps_here() -> u64 {
    let _irqs = IrqGuard::new();
    // SAFETY: interrupts are masked; the reference is dropped at once.
    unsafe { this_cpu() }.steps
}

/// What the next step's stack check is skewed by (tests: a step that
/// seems to move the stack pointer wrong, to see it reported).
#[cfg(feature = "test-hooks")]
static SKEW: core::sync::atomic::AtomicIsize = core::sync::atomic::AtomicIsize::new(0);

/// Makes the next stepped hit on any CPU expect its stack pointer `bytes`
/// off, as if the step had moved it wrong (tests only).
#[cfg(feature = "test-hooks")]
pub fn skew_next_step(bytes: isize) {
    SKEW.store(bytes, Ordering::SeqCst);
}

#[inline(always)]
fn skew() -> isize {
    #[cfg(feature = "test-hooks")]
    return SKEW.swap(0, Ordering::Relaxed);
    #[cfg(not(feature = "test-hooks"))]
    0
}

/// A step out of line moved the stack pointer otherwise than its
/// instruction does: the stack no longer is what the probed code expects,
/// and resuming would run it on the wrong one. Stop with a report.
#[cold]
fn stepped_stack_wrong(insn: &ProbedInsn, before: usize, after: usize) -> ! {
    arch::println!(
        "kprobes: the step of the instruction at {:#x} moved sp from {before:#x} to {after:#x}, not by {:?}",
        insn.address(),
        insn.stack_delta()
    );
    arch::flight::print();
    panic!("kprobes: a step out of line moved the stack pointer wrong at {:#x}", insn.address())
}

fn on_step_done(address: usize, regs: &mut PtRegs) -> bool {
    // SAFETY: trap context: interrupts are masked.
    let control = unsafe { this_cpu() };
    let Status::Step { reentry } = control.now.status else { return false };
    // SAFETY: the probe stays armed while a CPU steps it (unregistration
    // waits for a cross-CPU round, which this CPU holds up while masked).
    let probe = unsafe { &*control.now.probe };
    let Mechanism::Breakpoint { ref insn, slot } = probe.mechanism else { return false };
    if !insn::is_step_done_of(slot, insn, address) {
        return false;
    }
    if !insn.moved_stack_right(control.step_sp, regs.sp()) {
        stepped_stack_wrong(insn, control.step_sp, regs.sp());
    }
    regs.set_ip(insn.next());
    insn::end_step(regs, control.now.irqs);
    #[cfg(feature = "test-hooks")]
    {
        control.steps += 1;
    }
    finish(probe, regs, control, reentry);
    true
}
