//! `tour [FUNCTION]`: one traced call, step by step, on the live kernel.
//!
//! 1. the site as it is with no ops: the ops literal and the call slot,
//!    disassembled (refused while `ftrace_enabled` is 0: nothing would
//!    be patched);
//! 2. an ops registered: the slot now calls the sparse trampoline, the
//!    literal points at the ops, `enabled_functions` lists the site;
//! 3. one call: the `FtraceRegs` the callback saw, register by register
//!    (the ones the sparse save skips shown as not saved), and
//!    `query_register_offset` refusing one of those;
//! 4. an ops asking for every register: the slot calls the REGS
//!    trampoline, and a second call's `PtRegs`;
//! 5. a return hook: the return address before and after the hijack, the
//!    shadow-stack frame pushed, the return value and duration at exit;
//! 6. everything unregistered: the call slot compared byte for byte with
//!    step 1.
//!
//! The default function is the fib workload, which the tour calls itself
//! (`fib(3)`). Any other traceable function must be called by the kernel
//! while the tour waits (up to [`WAIT_MS`] per step). The callbacks copy
//! what they saw into statics (no allocation, no printing in tracing code);
//! the tour prints it afterwards. A function someone already traces is
//! refused: the tour must be able to put the site back as it found it.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arch::ftrace::{CALL_OFFSET, INSN_LEN};
use arch::ftrace_abi::{FtraceRegs, RegsSnapshot, ReturnAddress, SavedRegs, LITERAL_BYTES};
use arch::sync::SpinLock;
use ftrace::graph::retstack::{Depth, FrameNeeds, ReturnInfo, ReturnPath, ReturnUser, Skipped};
use ftrace::graph::shadow::FrameHeader;
use ftrace::{FilterKind, FilterMode, FtraceOps, OpsFlags};

/// The fib workload: the default function.
const DEFAULT_FUNCTION: &str = "kernel::workload::fib";
/// How long a step waits for the kernel to call a function the tour cannot
/// call itself.
const WAIT_MS: u64 = 2000;
/// Instructions shown after the call slot.
const FOLLOWING: usize = 2;

/// Why the tour could not start; nothing was changed.
#[derive(Debug)]
pub enum TourError {
    Name(String),
    NotTraceable(String),
    Busy(String),
    /// `ftrace_enabled` is 0: no site is patched, the tour would show nothing.
    Disabled,
    Tracing(ftrace::FtraceError),
    Output,
}

impl fmt::Display for TourError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TourError::Name(why) => write!(f, "tour: {why}"),
            TourError::NotTraceable(name) => write!(f, "tour: '{name}' has no patchable site"),
            TourError::Busy(name) => write!(f, "tour: '{name}' is traced already; stop that first (see enabled_functions)"),
            TourError::Disabled => {
                write!(f, "tour: function tracing is off (ftrace_enabled is 0); echo 1 > ftrace_enabled first")
            }
            TourError::Tracing(error) => write!(f, "tour: {error}"),
            TourError::Output => write!(f, "tour: output failed"),
        }
    }
}

impl From<fmt::Error> for TourError {
    fn from(_: fmt::Error) -> Self {
        TourError::Output
    }
}

impl From<ftrace::FtraceError> for TourError {
    fn from(error: ftrace::FtraceError) -> Self {
        TourError::Tracing(error)
    }
}

// ---- what the callbacks saw ----

/// The registers of the first call a step saw.
static SEEN: SpinLock<Option<RegsSnapshot>> = SpinLock::new(None);
/// Calls seen in this step.
static CALLS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn look(_ip: usize, _parent_ip: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    if CALLS.fetch_add(1, Ordering::Relaxed) == 0 {
        if let Some(mut seen) = SEEN.try_lock() {
            *seen = Some(fregs.snapshot());
        }
    }
}

/// Step 2 and 3: the sparse (ARGS) save.
static SPARSE_OPS: FtraceOps = FtraceOps::new(look, OpsFlags::RECURSION);
/// Step 4: every register (REGS).
static FULL_OPS: FtraceOps = FtraceOps::new(look, OpsFlags::RECURSION.union(OpsFlags::SAVE_REGS));
/// Step 5: hooks the return of the first call.
static HOOK_OPS: FtraceOps = FtraceOps::new(hook_return, OpsFlags::RECURSION);

/// What step 5's entry saw and did.
#[derive(Clone, Copy)]
struct Hijack {
    /// Where the return address lives (the stack slot's address, 0 for a
    /// register).
    slot: usize,
    before: usize,
    after: usize,
    frame: Option<FrameHeader>,
}

static HIJACK: SpinLock<Option<Hijack>> = SpinLock::new(None);
static HOOKED: AtomicBool = AtomicBool::new(false);
static RETURNED: AtomicBool = AtomicBool::new(false);
static RETVAL: AtomicU64 = AtomicU64::new(0);
static DURATION_NS: AtomicU64 = AtomicU64::new(0);
static RETURNED_TO: AtomicUsize = AtomicUsize::new(0);

static RETURN_USER: ReturnUser =
    ReturnUser { on_return: at_return, on_skipped: skipped_return, needs: FrameNeeds::new(ReturnPath::Sparse, Depth::Counted) };

extern "C" fn hook_return(ip: usize, _parent_ip: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    if HOOKED.swap(true, Ordering::Relaxed) {
        return;
    }
    let before = fregs.return_address().unwrap_or(0);
    let slot = match arch::regs::RETURN_ADDRESS {
        // The slot the call pushed: just below the caller's stack pointer.
        ReturnAddress::Stack => fregs.caller_stack_pointer() - core::mem::size_of::<usize>(),
        ReturnAddress::LinkRegister => 0,
    };
    let start = ring_buffer::clock::now_ns();
    // SAFETY: `RETURN_USER` is a static, valid for every return.
    let hooked = unsafe { ftrace::graph::retstack::hook(fregs, ip, &RETURN_USER, &[start]) };
    let frame = hooked.ok().and_then(|_| ftrace::task::current().shadow_stack().innermost()).map(|frame| frame.header);
    let after = fregs.return_address().unwrap_or(0);
    if let Some(mut hijack) = HIJACK.try_lock() {
        *hijack = Some(Hijack { slot, before, after, frame });
    }
}

fn at_return(_user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs) {
    RETVAL.store(fregs.return_value(), Ordering::Relaxed);
    DURATION_NS.store(ring_buffer::clock::now_ns().saturating_sub(data[0]), Ordering::Relaxed);
    RETURNED_TO.store(call.ret_addr(), Ordering::Relaxed);
    RETURNED.store(true, Ordering::Release);
}

fn skipped_return(_user: *const ReturnUser, _call: &ReturnInfo, _data: &mut [u64], _why: Skipped) {}

// ---- printing ----

/// The trampolines (assembly, so not in the function table) and this
/// tour's ops, by address.
fn known_name(address: usize) -> Option<&'static str> {
    use arch::ftrace_abi::{return_trampoline_address, trampoline_address, ReturnTrampoline, Trampoline};
    let known: [(usize, &'static str); 7] = [
        (trampoline_address(Trampoline::Args), "ftrace_caller"),
        (trampoline_address(Trampoline::Regs), "ftrace_regs_caller"),
        (return_trampoline_address(ReturnTrampoline::Sparse), "return_to_handler"),
        (return_trampoline_address(ReturnTrampoline::Full), "return_to_handler_regs"),
        (&SPARSE_OPS as *const FtraceOps as usize, "the tour's sparse ops"),
        (&FULL_OPS as *const FtraceOps as usize, "the tour's SAVE_REGS ops"),
        (&HOOK_OPS as *const FtraceOps as usize, "the tour's return-hook ops"),
    ];
    known.iter().find(|(at, _)| *at == address).map(|(_, name)| *name)
}

/// `name+0xOFF` for a code address, or the bare address.
fn symbolize(address: usize) -> String {
    if let Some(name) = known_name(address) {
        return name.to_string();
    }
    match ftrace::symbols::kernel::table().ok().and_then(|table| table.lookup(address)) {
        Some(symbol) if symbol.address == address => symbol.name.to_string(),
        Some(symbol) => format!("{}+{:#x}", symbol.name, address - symbol.address),
        None => format!("{address:#x}"),
    }
}

/// Reads `len` bytes of text at `address` (a few at a time, as the text
/// reader takes them).
fn text(address: usize, len: usize) -> Vec<u8> {
    let mut bytes = alloc::vec![0u8; len];
    for (i, chunk) in bytes.chunks_mut(arch::text::MAX_PATCH).enumerate() {
        // Text the kernel maps: a read of a site's bytes does not fail.
        let _ = arch::text::read(address + i * arch::text::MAX_PATCH, chunk);
    }
    bytes
}

/// The site's bytes from the call slot on: the slot and [`FOLLOWING`]
/// instructions after it (generously sized).
fn site_bytes(function: usize) -> Vec<u8> {
    text(function, CALL_OFFSET + INSN_LEN + 16 * FOLLOWING)
}

/// The literal before the function.
fn literal(function: usize) -> u64 {
    let bytes = text(function - LITERAL_BYTES, LITERAL_BYTES);
    u64::from_le_bytes(bytes.try_into().unwrap_or([0; LITERAL_BYTES]))
}

/// Prints the literal and the instructions from the function's start to
/// [`FOLLOWING`] past the call slot, marking the slot.
fn show_site(out: &mut dyn Write, function: usize) -> fmt::Result {
    let value = literal(function);
    let meaning = match value {
        arch::ftrace::LITERAL_NOPS => "the compiler's prefix NOPs: no ops has used this site".to_string(),
        pointer => match known_name(pointer as usize) {
            Some(name) => format!("-> {name}"),
            None => format!("-> {pointer:#x}: no ops of the tour; unused while the slot is a NOP"),
        },
    };
    writeln!(out, "  {:#x}:  .quad {value:#018x}   ops literal ({meaning})", function - LITERAL_BYTES)?;
    let bytes = site_bytes(function);
    let slot_end = CALL_OFFSET + INSN_LEN;
    let mut at = 0;
    let mut after_slot = 0;
    while after_slot < FOLLOWING && at < bytes.len() {
        let address = function + at;
        let Some(insn) = arch::disasm::decode(&bytes[at..], address) else {
            writeln!(out, "  {address:#x}:  (not an instruction)")?;
            break;
        };
        let hex: Vec<String> = bytes[at..at + insn.len].iter().map(|b| format!("{b:02x}")).collect();
        let target = insn.target.map(|t| format!(" <{}>", symbolize(t))).unwrap_or_default();
        // Before the slot (aarch64): what the architecture prepared at boot.
        let role = match at {
            a if a == CALL_OFFSET => "   <- call slot",
            a if (0..CALL_OFFSET).contains(&a) => "   <- prepared at boot",
            _ => "",
        };
        writeln!(out, "  {address:#x}:  {:<24} {}{target}{role}", hex.join(" "), insn.text)?;
        at += insn.len;
        if at > slot_end {
            after_slot += 1;
        }
    }
    Ok(())
}

fn show_enabled_line(out: &mut dyn Write, name: &str) -> fmt::Result {
    let mut enabled = String::new();
    let _ = crate::tracefs::read("enabled_functions", &mut enabled);
    for line in enabled.lines().filter(|line| line.split_whitespace().next() == Some(name)) {
        writeln!(out, "  enabled_functions: {line}")?;
    }
    Ok(())
}

fn show_registers(out: &mut dyn Write, fregs: SavedRegs) -> fmt::Result {
    let mut not_saved = Vec::new();
    for (name, value) in fregs.registers() {
        match value {
            Some(value) => writeln!(out, "  {name:>6} = {value:#018x}")?,
            None => not_saved.push(name),
        }
    }
    writeln!(out, "  not saved: {}", not_saved.join(" "))?;
    if let Some(name) = not_saved.first() {
        match FtraceRegs::query_register_offset(name) {
            Ok(offset) => writeln!(out, "  query_register_offset(\"{name}\") = Ok({offset})")?,
            Err(error) => writeln!(out, "  query_register_offset(\"{name}\") = Err({error:?}): {error}")?,
        }
    }
    if let Some((name, _)) = fregs.registers().find(|(_, value)| value.is_some()) {
        if let Ok(offset) = FtraceRegs::query_register_offset(name) {
            writeln!(
                out,
                "  query_register_offset(\"{name}\") = Ok({offset}), which reads {:#x}",
                fregs.register_at(offset).unwrap_or(0)
            )?;
        }
    }
    Ok(())
}

// ---- the steps ----

/// Makes the function run once: the tour calls fib itself; anything else
/// it waits for. Returns whether a call was seen (`seen` says when).
fn one_call(is_fib: bool, seen: &dyn Fn() -> bool) -> bool {
    if is_fib {
        black_box(crate::workload::fib(black_box(3)));
    }
    let mut waited = 0;
    while !seen() && waited < WAIT_MS {
        crate::sched::sleep_ms(10);
        waited += 10;
    }
    seen()
}

fn start_step(ops: &'static FtraceOps, function: usize) -> Result<(), TourError> {
    CALLS.store(0, Ordering::Relaxed);
    *SEEN.lock() = None;
    ftrace::set_filter_ips(ops, FilterKind::Filter, &[function], FilterMode::Replace)?;
    ftrace::register(ops)?;
    Ok(())
}

fn end_step(ops: &'static FtraceOps) {
    let _ = ftrace::unregister(ops);
    // Callbacks still running on other CPUs are done after a grace period.
    ftrace::deferred::synchronize();
}

fn no_call(out: &mut dyn Write, name: &str) -> fmt::Result {
    writeln!(out, "  (no call to {name} within {WAIT_MS} ms: call it from another task, or tour the default)")
}

/// Runs the tour of `function` (default: the fib workload), printing to
/// `out`. Refused, changing nothing, for an unknown or untraceable
/// function or one that is traced already.
pub fn run(function: Option<&str>, out: &mut dyn Write) -> Result<(), TourError> {
    let table = ftrace::symbols::kernel::table().map_err(|error| TourError::Name(error.to_string()))?;
    let symbol = table.resolve(function.unwrap_or(DEFAULT_FUNCTION)).map_err(|error| TourError::Name(error.to_string()))?;
    let (name, address) = (symbol.name, symbol.address);
    let site = ftrace::site(address).ok_or_else(|| TourError::NotTraceable(name.to_string()))?;
    if site.failed {
        return Err(TourError::NotTraceable(name.to_string()));
    }
    if site.ops_count != 0 {
        return Err(TourError::Busy(name.to_string()));
    }
    if !ftrace::is_enabled() {
        return Err(TourError::Disabled);
    }
    let is_fib = name == DEFAULT_FUNCTION;

    writeln!(out, "== 1. The site with no ops (a NOP, as compiled): {name} at {address:#x}")?;
    let original = site_bytes(address);
    show_site(out, address)?;

    writeln!(out, "\n== 2. An ops registered (sparse registers): the slot calls the ARGS trampoline")?;
    start_step(&SPARSE_OPS, address)?;
    show_site(out, address)?;
    show_enabled_line(out, name)?;

    writeln!(out, "\n== 3. One call: the FtraceRegs the callback saw")?;
    let seen = one_call(is_fib, &|| CALLS.load(Ordering::Relaxed) > 0);
    end_step(&SPARSE_OPS);
    match (seen, SEEN.lock().take()) {
        (true, Some(fregs)) => show_registers(out, fregs.view())?,
        _ => no_call(out, name)?,
    }

    writeln!(out, "\n== 4. An ops asking for every register (SAVE_REGS): the REGS trampoline")?;
    start_step(&FULL_OPS, address)?;
    show_site(out, address)?;
    let seen = one_call(is_fib, &|| CALLS.load(Ordering::Relaxed) > 0);
    end_step(&FULL_OPS);
    match (seen, SEEN.lock().take()) {
        (true, Some(fregs)) => {
            writeln!(out, "  a second call's PtRegs (every register, as the call left them):")?;
            if let Some(regs) = fregs.regs() {
                for line in format!("{regs}").lines() {
                    writeln!(out, "  {line}")?;
                }
            }
        }
        _ => no_call(out, name)?,
    }

    writeln!(out, "\n== 5. A return hook: the return address hijacked, a shadow-stack frame pushed")?;
    HOOKED.store(false, Ordering::Relaxed);
    RETURNED.store(false, Ordering::Relaxed);
    *HIJACK.lock() = None;
    start_step(&HOOK_OPS, address)?;
    let returned = one_call(is_fib, &|| RETURNED.load(Ordering::Acquire));
    end_step(&HOOK_OPS);
    match (returned, *HIJACK.lock()) {
        (true, Some(hijack)) => {
            match hijack.slot {
                0 => writeln!(out, "  the return address is in the link register, saved in the FtraceRegs")?,
                slot => writeln!(out, "  the return address is in the stack slot the call pushed, at {slot:#x}")?,
            }
            writeln!(out, "  before: {:#x} <{}>", hijack.before, symbolize(hijack.before))?;
            writeln!(out, "  after:  {:#x} <{}>", hijack.after, symbolize(hijack.after))?;
            if let Some(frame) = hijack.frame {
                writeln!(
                    out,
                    "  shadow-stack frame: ret={:#x} func={:#x} <{}> fp={:#x} sp={:#x} info={:#x}",
                    frame.ret,
                    frame.func,
                    symbolize(frame.func as usize),
                    frame.fp,
                    frame.sp,
                    frame.info
                )?;
            }
            let retval = RETVAL.load(Ordering::Relaxed);
            let to = RETURNED_TO.load(Ordering::Relaxed);
            // fib returns its value; of another function the tour knows
            // only the return register, which holds whatever a function
            // that returns nothing left there.
            let value = match is_fib {
                true => format!("returned {retval} ({retval:#x})"),
                false => format!("the return register holds {retval:#x} (its value, if it returns one)"),
            };
            writeln!(
                out,
                "  at exit: {value} after {} ns, on to {to:#x} <{}>",
                DURATION_NS.load(Ordering::Relaxed),
                symbolize(to)
            )?;
        }
        _ => no_call(out, name)?,
    }

    writeln!(out, "\n== 6. Everything unregistered: the call slot is the compiled NOP again")?;
    show_site(out, address)?;
    let now = site_bytes(address);
    let slot = CALL_OFFSET..CALL_OFFSET + INSN_LEN;
    match now[slot.clone()] == original[slot.clone()] {
        true => writeln!(out, "  restored: the {INSN_LEN} bytes of the call slot are byte for byte those of step 1")?,
        false => writeln!(out, "  NOT restored: {:02x?} instead of {:02x?}", &now[slot.clone()], &original[slot])?,
    }
    Ok(())
}
