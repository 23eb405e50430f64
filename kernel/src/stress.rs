//! `stress`: every CPU runs traced code while tracing is switched on and
//! off under it, and at the end nothing is lost, unbalanced, wrong, left
//! patched or leaked.
//!
//! # What runs
//!
//! - **Workers**, one pinned to each CPU and two free to migrate (these
//!   sometimes sleep inside a traced function, so a hooked return can
//!   outlive a switch and resume on another CPU), call the traced functions
//!   below. Each call's arguments carry a check (`b` is `partner(a)`) and
//!   each result is known in advance: a worker counts every wrong result
//!   as a bad return value.
//! - **A reader** consumes every CPU's buffer as `trace_pipe` does
//!   (`TraceBuffer::read_page`) and counts the events it decodes.
//! - **The controller** (the task that typed `stress`) flips one thing at a
//!   time, chosen by a pseudo-random sequence: the current tracer
//!   (`nop`/`function`/`function_graph`), the tracer filter, a pair of fprobe
//!   events (defined, enabled, disabled, removed), an fprobe with entry and
//!   exit handlers, an ops with a rethook, an ops on the ARGS trampoline,
//!   and a breakpoint kprobe inside the leaf (the instruction after its
//!   ftrace site, stepped out of line) with a kretprobe on the leaf, and an
//!   instance recording the scheduler's events and the fprobe events, with
//!   triggers of its own (`hist`, and a `disable_event` that puts its copy
//!   of `sched_switch` in soft mode), made, then removed while they fire. Every callback checks the
//!   arguments and return values it sees.
//!
//! # What it reports
//!
//! The buffers' lifetime counters say what became of every event written
//! during the run: read, overwritten (`dropped`, Linux's overrun), erased
//! by a tracer switch, or still there at the end. `lost` is what is none of
//! those by the reader's own count. `unbalanced` counts shadow-stack frames
//! left on any task, `sites_restored` the sites whose call slot holds its
//! NOP again, `heap_delta` the heap in use after minus before.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use fprobe::{EntryData, Fprobe, FprobeConfig, RegisteredFprobe, Target};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags, PtRegs, Saved, SavedRegs};
use kprobes::kretprobe::{Kretprobe, KretprobeConfig, RegisteredKretprobe};
use kprobes::{Kprobe, KprobeConfig, Location, RegisteredKprobe};
use rethook::{Rethook, RethookMode, RethookNode};
use ring_buffer::per_cpu::{page_records, PAGE_SIZE};

use crate::{sched, tracefs};

// ---- the traced functions ----

/// The second argument every traced call gets for a first argument `a`.
fn partner(a: u64) -> u64 {
    a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995
}

/// What [`stress_add`] returns for `a` (and its partner).
fn expected(a: u64) -> u64 {
    a.rotate_left(7) ^ partner(a)
}

/// The leaf every worker calls: its arguments and result are checkable.
#[inline(never)]
pub extern "C" fn stress_add(a: u64, b: u64) -> u64 {
    black_box(a.rotate_left(7) ^ b)
}

/// [`stress_add`] a few calls down: depth for the graph tracer.
#[inline(never)]
pub extern "C" fn stress_nest(depth: u64, a: u64) -> u64 {
    if depth == 0 {
        return stress_add(black_box(a), black_box(partner(a)));
    }
    black_box(stress_nest(black_box(depth - 1), a)) + 1
}

/// [`stress_add`] with a sleep inside a traced function.
#[inline(never)]
pub extern "C" fn stress_nap(a: u64, b: u64) -> u64 {
    sched::sleep_ms(1);
    black_box(stress_add(black_box(a), black_box(b)))
}

const FILTER_ALL: &str = "kernel::stress::stress_*";
const FILTER_LEAF: &str = "kernel::stress::stress_add";

// ---- what the callbacks saw ----

static BAD_ARGS: AtomicU64 = AtomicU64::new(0);
static BAD_RETVALS: AtomicU64 = AtomicU64::new(0);

/// Checks a call of `stress_add` or `stress_nap` as a callback sees it
/// (a trampoline's save, `FtraceRegs::view`, or a breakpoint's).
fn check_args(regs: SavedRegs) -> Option<u64> {
    let (a, b) = (regs.argument(0)?, regs.argument(1)?);
    if b != partner(a) {
        BAD_ARGS.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(a)
}

fn check_retval(regs: SavedRegs, a: u64) {
    if regs.return_value() != expected(a) {
        BAD_RETVALS.fetch_add(1, Ordering::Relaxed);
    }
}

/// An ops on the ARGS trampoline that checks arguments.
extern "C" fn args_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    check_args(fregs.view());
}

static ARGS_OPS: FtraceOps = FtraceOps::new(args_callback, OpsFlags::empty());

fn probe_entry(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool {
    match check_args(fregs.view()) {
        Some(a) => {
            data.words()[0] = a;
            false
        }
        None => true, // no exit check for a call already counted bad
    }
}

fn probe_exit(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    let a = data.words()[0];
    check_retval(fregs.view(), a);
}

/// The rethook the ops below hooks with, while one is registered.
static RETHOOK: AtomicPtr<Rethook> = AtomicPtr::new(core::ptr::null_mut());

extern "C" fn rethook_entry(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let Some(a) = check_args(fregs.view()) else { return };
    // SAFETY: a published rethook is dropped only a grace period after it
    // is unpublished, and this callback runs inside a trampoline, which the
    // grace period waits for.
    let Some(rethook) = (unsafe { RETHOOK.load(Ordering::Acquire).as_ref() }) else { return };
    if let Some(mut node) = rethook.try_get() {
        node.data_mut()[0] = a;
        let _ = node.hook(fregs);
    }
}

fn rethook_handler(node: &RethookNode, _data: usize, _ret_addr: usize, fregs: &mut FtraceRegs) {
    check_retval(fregs.view(), node.data()[0]);
}

static RETHOOK_OPS: FtraceOps = FtraceOps::new(rethook_entry, OpsFlags::RECURSION);

/// The breakpoint kprobe's handlers. It sits on the leaf's first
/// instruction after the ftrace site, which leaves the argument registers
/// as the call set them: the pre-handler checks them; the post-handler
/// (run once the instruction has run out of line) checks nothing, it only
/// makes every hit go through the post-handler path too.
fn kprobe_pre(_probe: &Kprobe, regs: &PtRegs) {
    check_args(SavedRegs::full(regs, Saved::EntryFull));
}

fn kprobe_post(_probe: &Kprobe, _regs: &PtRegs) {}

fn kretprobe_entry(_rp: &Kretprobe, regs: &PtRegs, data: &mut [u64]) {
    // A bad call is counted once, here; its return is not checked (the
    // worker checks every result anyway).
    data[0] = check_args(SavedRegs::full(regs, Saved::EntryFull)).unwrap_or(u64::MAX);
}

fn kretprobe_return(_rp: &Kretprobe, _ret_addr: usize, regs: &PtRegs, data: &[u64]) {
    if data[0] != u64::MAX {
        check_retval(SavedRegs::full(regs, Saved::ReturnFull), data[0]);
    }
}

// ---- the switches ----

/// The things the controller flips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Switch {
    /// `nop` -> `function` -> `function_graph` -> `nop`.
    Tracer,
    /// `set_ftrace_filter`: all stress functions, or the leaf alone.
    Filter,
    /// The fprobe events: define, enable, disable, remove.
    Events,
    /// An fprobe with entry and exit handlers.
    Fprobe,
    /// An ops hooking returns with a rethook.
    Rethook,
    /// An ops that checks arguments.
    ArgsOps,
    /// A breakpoint kprobe inside the leaf and a kretprobe on it.
    Kprobes,
    /// An instance recording the scheduler's events (and the fprobe
    /// events while they are enabled): made, then removed under load.
    Instance,
}

const SWITCHES: [Switch; 8] = [
    Switch::Tracer,
    Switch::Filter,
    Switch::Events,
    Switch::Fprobe,
    Switch::Rethook,
    Switch::ArgsOps,
    Switch::Kprobes,
    Switch::Instance,
];

/// Where each switch is.
struct Controller {
    tracer: usize,
    leaf_filter: bool,
    /// 0: no events, 1: defined, 2: enabled, 3: disabled.
    events: usize,
    fprobe: Option<RegisteredFprobe>,
    rethook: bool,
    args_ops: bool,
    kprobes: Option<(RegisteredKprobe, RegisteredKretprobe)>,
    instance: bool,
    functions: [usize; 3],
}

const EVENT_ENABLES: [&str; 2] = ["events/stress/add/enable", "events/stress/add_ret/enable"];
const TRACERS: [&str; 3] = ["nop", "function", "function_graph"];
const INSTANCE: &str = "instances/stress";
const EVENT_DEFINITIONS: [&str; 2] =
    ["f:stress/add kernel::stress::stress_add a=$arg1 b=$arg2", "f:stress/add_ret kernel::stress::stress_add%return ret=$retval"];

impl Controller {
    fn new() -> Controller {
        let functions = [
            stress_add as extern "C" fn(u64, u64) -> u64 as usize,
            stress_nest as extern "C" fn(u64, u64) -> u64 as usize,
            stress_nap as extern "C" fn(u64, u64) -> u64 as usize,
        ];
        Controller {
            tracer: 0,
            leaf_filter: false,
            events: 0,
            fprobe: None,
            rethook: false,
            args_ops: false,
            kprobes: None,
            instance: false,
            functions,
        }
    }

    fn flip(&mut self, switch: Switch) -> Result<(), String> {
        match switch {
            Switch::Tracer => {
                self.tracer = (self.tracer + 1) % TRACERS.len();
                write("current_tracer", TRACERS[self.tracer])
            }
            Switch::Filter => {
                self.leaf_filter = !self.leaf_filter;
                write("set_ftrace_filter", if self.leaf_filter { FILTER_LEAF } else { FILTER_ALL })
            }
            Switch::Events => {
                self.events = (self.events + 1) % 4;
                match self.events {
                    1 => EVENT_DEFINITIONS.iter().try_for_each(|line| append("dynamic_events", line)),
                    2 => self.event_enables().try_for_each(|file| write(&file, "1")),
                    // In the instance too, so the events can be removed.
                    3 => self.event_enables().try_for_each(|file| write(&file, "0")),
                    _ => ["-:stress/add", "-:stress/add_ret"].iter().try_for_each(|line| append("dynamic_events", line)),
                }
            }
            Switch::Fprobe => match self.fprobe.take() {
                Some(probe) => probe.unregister().map_err(|(_, error)| format!("fprobe: {error}")),
                None => {
                    let config = FprobeConfig {
                        entry: Some(probe_entry),
                        exit: Some(probe_exit),
                        entry_data_words: 1,
                        save_args: false,
                        private: 0,
                        free_private: None,
                    };
                    let leaves = [self.functions[0], self.functions[2]];
                    self.fprobe = Some(fprobe::register(config, Target::Addresses(&leaves)).map_err(|e| format!("fprobe: {e}"))?);
                    Ok(())
                }
            },
            Switch::Rethook => {
                self.rethook = !self.rethook;
                if self.rethook {
                    let rethook = Box::new(Rethook::new(rethook_handler, 0, 64, 1, RethookMode::Sparse));
                    RETHOOK.store(Box::into_raw(rethook), Ordering::Release);
                    let leaves = [self.functions[0], self.functions[2]];
                    ftrace::set_filter_ips(&RETHOOK_OPS, FilterKind::Filter, &leaves, FilterMode::Replace)
                        .map_err(|e| format!("{e}"))?;
                    ftrace::register(&RETHOOK_OPS).map_err(|e| format!("rethook ops: {e}"))
                } else {
                    let result = ftrace::unregister(&RETHOOK_OPS).map_err(|e| format!("rethook ops: {e}"));
                    let old = RETHOOK.swap(core::ptr::null_mut(), Ordering::AcqRel);
                    ftrace::deferred::synchronize();
                    // SAFETY: leaked from a box above; unpublished, and the
                    // grace period let every callback that read it finish.
                    drop(unsafe { Box::from_raw(old) });
                    result
                }
            }
            Switch::ArgsOps => {
                self.args_ops = !self.args_ops;
                if self.args_ops {
                    let leaves = [self.functions[0], self.functions[2]];
                    ftrace::set_filter_ips(&ARGS_OPS, FilterKind::Filter, &leaves, FilterMode::Replace)
                        .map_err(|e| format!("{e}"))?;
                    ftrace::register(&ARGS_OPS).map_err(|e| format!("args ops: {e}"))
                } else {
                    ftrace::unregister(&ARGS_OPS).map_err(|e| format!("args ops: {e}"))
                }
            }
            Switch::Instance => {
                self.instance = !self.instance;
                if !self.instance {
                    // With its events on, while the workers hit them.
                    return tracefs::instances::rmdir(INSTANCE).map_err(|error| format!("rmdir: {error}"));
                }
                tracefs::instances::mkdir(INSTANCE).map_err(|error| format!("mkdir: {error}"))?;
                write(&format!("{INSTANCE}/events/sched/sched_switch/filter"), "prev_pid != 0")?;
                write(&format!("{INSTANCE}/set_event"), "sched:*")?;
                let wakeup_trigger = format!("{INSTANCE}/events/sched/sched_wakeup/trigger");
                write(&wakeup_trigger, "hist:keys=pid:vals=target_cpu")?;
                append(&wakeup_trigger, "disable_event:sched:sched_switch:100")?;
                match self.events {
                    2 => EVENT_ENABLES.iter().try_for_each(|file| write(&format!("{INSTANCE}/{file}"), "1")),
                    _ => Ok(()),
                }
            }
            Switch::Kprobes => match self.kprobes.take() {
                Some((kprobe, kretprobe)) => {
                    kprobe.unregister();
                    kretprobe.unregister();
                    Ok(())
                }
                None => {
                    let leaf = self.functions[0];
                    let inside = Location::Address(leaf + arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN);
                    let config = KprobeConfig { pre_handler: Some(kprobe_pre), post_handler: Some(kprobe_post), private: 0 };
                    let kprobe = kprobes::register_kprobe(&inside, config).map_err(|e| format!("kprobe: {e}"))?;
                    let config = KretprobeConfig {
                        entry_handler: Some(kretprobe_entry),
                        handler: kretprobe_return,
                        data_words: 1,
                        maxactive: 64,
                        private: 0,
                    };
                    let kretprobe =
                        kprobes::register_kretprobe(&Location::Address(leaf), config).map_err(|e| format!("kretprobe: {e}"))?;
                    self.kprobes = Some((kprobe, kretprobe));
                    Ok(())
                }
            },
        }
    }

    /// The fprobe events' `enable` files: the top level's, and the
    /// instance's while it exists.
    fn event_enables(&self) -> impl Iterator<Item = String> {
        let instance = self.instance.then(|| EVENT_ENABLES.map(|file| format!("{INSTANCE}/{file}")));
        EVENT_ENABLES.map(String::from).into_iter().chain(instance.into_iter().flatten())
    }

    /// Flips everything back off.
    fn settle(&mut self) -> Result<(), String> {
        if self.instance {
            self.flip(Switch::Instance)?;
        }
        while self.tracer != 0 {
            self.flip(Switch::Tracer)?;
        }
        while self.events != 0 {
            self.flip(Switch::Events)?;
        }
        if self.fprobe.is_some() {
            self.flip(Switch::Fprobe)?;
        }
        if self.rethook {
            self.flip(Switch::Rethook)?;
        }
        if self.args_ops {
            self.flip(Switch::ArgsOps)?;
        }
        if self.kprobes.is_some() {
            self.flip(Switch::Kprobes)?;
        }
        write("set_ftrace_filter", "")
    }
}

fn write(file: &str, text: &str) -> Result<(), String> {
    tracefs::write(file, text, FilterMode::Replace).map_err(|error| format!("{file}: {error}"))
}

fn append(file: &str, text: &str) -> Result<(), String> {
    tracefs::write(file, text, FilterMode::Append).map_err(|error| format!("{file}: {error}"))
}

// ---- the run ----

/// How long a run lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Stop after this many switches.
    pub toggles: Option<u64>,
    /// Stop after this many seconds.
    pub seconds: Option<u64>,
}

impl Limits {
    /// The most toggles a run takes.
    pub const MAX_TOGGLES: u64 = 1_000_000;
    /// The most seconds a run lasts.
    pub const MAX_SECONDS: u64 = 3_600;

    /// Parses `[--seconds S] [--toggles N]` (neither: 1000 toggles; at most
    /// [`MAX_TOGGLES`](Self::MAX_TOGGLES) and
    /// [`MAX_SECONDS`](Self::MAX_SECONDS); ^C stops a run early).
    pub fn parse(args: &[&str]) -> Result<Limits, &'static str> {
        const USAGE: &str = "stress [--seconds S] [--toggles N] (S at most 3600, N at most 1000000)";
        let mut limits = Limits { toggles: None, seconds: None };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args.next().and_then(|v| v.parse::<u64>().ok()).filter(|&v| v > 0).ok_or(USAGE)?;
            match *flag {
                "--toggles" if limits.toggles.is_none() && value <= Self::MAX_TOGGLES => limits.toggles = Some(value),
                "--seconds" if limits.seconds.is_none() && value <= Self::MAX_SECONDS => limits.seconds = Some(value),
                _ => return Err(USAGE),
            }
        }
        if limits.toggles.is_none() && limits.seconds.is_none() {
            limits.toggles = Some(1000);
        }
        Ok(limits)
    }
}

/// The run's figures (the line `stress` prints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub cpus: usize,
    pub toggles: u64,
    pub calls: u64,
    pub events: u64,
    pub dropped: u64,
    pub lost: u64,
    pub unbalanced: u64,
    pub bad_args: u64,
    pub bad_retvals: u64,
    pub sites_restored: usize,
    pub sites: usize,
    pub heap_delta: isize,
}

impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "stress: cpus={} toggles={} calls={} events={} dropped={} lost={} unbalanced={} bad_args={} bad_retvals={} \
             sites_restored={}/{} heap_delta={}",
            self.cpus,
            self.toggles,
            self.calls,
            self.events,
            self.dropped,
            self.lost,
            self.unbalanced,
            self.bad_args,
            self.bad_retvals,
            self.sites_restored,
            self.sites,
            self.heap_delta
        )
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

/// One worker: calls the traced functions until told to stop, checking
/// every result. Returns how many calls it made and how many were wrong.
fn worker(seed: u64, naps: bool) -> (u64, u64) {
    let (mut calls, mut bad) = (0u64, 0u64);
    let mut a = seed;
    while !STOP.load(Ordering::Relaxed) {
        a = a.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let (result, want) = match calls % 64 {
            63 if naps => (stress_nap(black_box(a), black_box(partner(a))), expected(a)),
            n if n % 4 == 0 => (stress_nest(black_box(3), black_box(a)), expected(a) + 3),
            _ => (stress_add(black_box(a), black_box(partner(a))), expected(a)),
        };
        calls += 1;
        bad += u64::from(result != want);
        if calls % 256 == 0 {
            sched::yield_now();
        }
    }
    (calls, bad)
}

/// Consumes every CPU's buffer until told to stop, then until empty.
/// Returns how many well-formed events it read and how many pages said
/// events were lost before them.
fn reader() -> u64 {
    let mut page = Box::new([0u8; PAGE_SIZE]);
    let mut events = 0u64;
    let buffer = trace::array::instances::top().buffer();
    loop {
        let stopping = STOP.load(Ordering::Acquire);
        let mut any = false;
        for cpu in 0..buffer.cpus() {
            while buffer.read_page(cpu, &mut page).is_some() {
                any = true;
                events += page_records(&page[..]).filter(|event| well_formed(event.payload)).count() as u64;
            }
        }
        if stopping && !any {
            return events;
        }
        if !any {
            sched::sleep_ms(1);
        }
    }
}

/// The kprobes switch decodes the probed instruction, and the decoder may
/// build tables on first use, once for good (iced-x86's instruction info
/// does: some 364 KiB). Built before the heap is measured, they do not show
/// in `heap_delta`, which then counts only what the run left behind.
fn warm_up_decoder() {
    let leaf = stress_add as extern "C" fn(u64, u64) -> u64 as usize;
    let _ = arch::kprobes::decode(leaf + arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN);
}

/// The instance switch gives the scheduler's events a filter and a
/// trigger in an instance, and an event makes its per-instance tables on
/// first use, once for good (a few KiB). Made before the heap is measured,
/// they do not show in `heap_delta` either.
fn warm_up_instance() -> Result<(), String> {
    let mut controller = Controller::new();
    controller.flip(Switch::Instance)?;
    controller.flip(Switch::Instance)
}

/// Whether an event decodes: a common header with a pid of a task.
fn well_formed(payload: &[u8]) -> bool {
    trace::events::record::Common::decode(payload).is_some_and(|common| common.kind != 0 && common.pid >= 0)
}

/// Runs the stress and reports. Refuses to start unless tracing is idle
/// (the `nop` tracer, no filter, no events defined): it flips those
/// switches itself.
pub fn run(limits: Limits) -> Result<Report, String> {
    let top = trace::array::instances::top();
    if top.current_tracer() != trace::tracers::Tracer::Nop {
        return Err("stress: set current_tracer to nop first".into());
    }
    if !top.tracer_filter_names(ftrace::FilterKind::Filter).is_empty() {
        return Err("stress: empty set_ftrace_filter first (the run sets its own)".into());
    }
    let mut defined = String::new();
    let _ = tracefs::read("dynamic_events", &mut defined);
    if !defined.is_empty() {
        return Err("stress: remove the dynamic events first".into());
    }
    warm_up_instance()?;
    ftrace::deferred::reclaim();
    warm_up_decoder();
    let heap_before = crate::heap::stats().used as isize;
    let before = top.buffer().lifetime();
    BAD_ARGS.store(0, Ordering::Relaxed);
    BAD_RETVALS.store(0, Ordering::Relaxed);
    STOP.store(false, Ordering::Release);

    let cpus = sched::cpus().len().max(1);
    let mut workers = Vec::new();
    let reader = spawn_tasks(cpus, &mut workers);

    let mut controller = Controller::new();
    // The tracers trace the stress functions only, from the first switch.
    // Whatever fails, the tasks that started are stopped and joined.
    let outcome = reader
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|_| write("set_ftrace_filter", FILTER_ALL))
        .and_then(|()| control(&mut controller, limits));
    let settled = controller.settle();
    STOP.store(true, Ordering::Release);
    let (mut calls, mut bad_results) = (0, 0);
    for handle in workers {
        let (c, b) = unpack(handle.join());
        calls += c;
        bad_results += b;
    }
    let read = reader.map_or(0, |reader| reader.join());
    let toggles = outcome?;
    settled?;
    ftrace::deferred::reclaim();

    let after = top.buffer().lifetime();
    let events = after.written - before.written;
    let dropped = after.overrun - before.overrun;
    let erased = after.erased - before.erased;
    let accounted = read + dropped + erased + (after.entries - before.entries.min(after.entries));
    let mut unbalanced = 0u64;
    ftrace::task::for_each(|task| unbalanced += task.shadow_stack().frames() as u64);
    let (mut sites, mut sites_restored) = (0, 0);
    ftrace::for_each_site(|site| {
        sites += 1;
        let mut slot = [0u8; arch::ftrace::INSN_LEN];
        let nop = arch::text::read(site.ip + arch::ftrace::CALL_OFFSET, &mut slot).is_ok() && slot == arch::ftrace::NOP;
        sites_restored += usize::from(nop && site.trampoline.is_none());
    });
    Ok(Report {
        cpus,
        toggles,
        calls,
        events,
        dropped,
        lost: events.saturating_sub(accounted),
        unbalanced,
        bad_args: BAD_ARGS.load(Ordering::Relaxed),
        bad_retvals: BAD_RETVALS.load(Ordering::Relaxed) + bad_results,
        sites_restored,
        sites,
        heap_delta: settled_heap_used() as isize - heap_before,
    })
}

/// The heap in use once it stops shrinking. A finished task's last
/// reference (its tracing state holds a 16 KiB shadow stack) is dropped on
/// the CPU that switched away from it, a moment after its joiner returned:
/// under host load, after the first reading.
fn settled_heap_used() -> usize {
    let mut used = crate::heap::stats().used;
    for _ in 0..20 {
        sched::sleep_ms(2);
        let now = crate::heap::stats().used;
        if now >= used {
            return now;
        }
        used = now;
    }
    used
}

/// Starts the workers (into `workers`, as they start) and the reader.
fn spawn_tasks(cpus: usize, workers: &mut Vec<sched::JoinHandle>) -> Result<sched::JoinHandle, String> {
    for cpu in 0..cpus {
        let handle = sched::spawn_on(&format!("stress/{cpu}"), 1 << cpu, move || pack(worker(cpu as u64 + 1, false)));
        workers.push(handle.map_err(|e| format!("stress: {e}"))?);
    }
    for i in 0..2u64 {
        let handle = sched::spawn(&format!("stress/nap{i}"), move || pack(worker(100 + i, true)));
        workers.push(handle.map_err(|e| format!("stress: {e}"))?);
    }
    sched::spawn("stress/reader", reader).map_err(|e| format!("stress: {e}"))
}

/// Flips switches until the limits say stop, or ^C (not any key: a script
/// that pipes its next commands in must not stop the run). Returns how many
/// it flipped.
fn control(controller: &mut Controller, limits: Limits) -> Result<u64, String> {
    let start = ring_buffer::clock::now_ns();
    let mut random = 0x2545_f491_4f6c_dd1d_u64;
    let mut toggles = 0;
    while limits.toggles.is_none_or(|n| toggles < n)
        && limits.seconds.is_none_or(|s| ring_buffer::clock::now_ns() - start < s.saturating_mul(1_000_000_000))
        && !crate::console::ctrl_c_pressed()
    {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        controller.flip(SWITCHES[(random % SWITCHES.len() as u64) as usize])?;
        toggles += 1;
        if toggles % 16 == 0 {
            ftrace::deferred::reclaim();
        }
    }
    Ok(toggles)
}

fn pack((calls, bad): (u64, u64)) -> u64 {
    calls << 16 | bad.min(0xffff)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> 16, word & 0xffff)
}
