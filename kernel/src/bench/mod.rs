//! The tracing benchmark: `bench` on the console, or `./qemu-run.sh ARCH --bench`.
//! (`bench vs-linux` is the side-by-side job against Linux: see [`vs_linux`].)
//!
//! A never-inlined tracee with six arguments is called in a loop (100,000
//! calls a sample, the median of seven samples, interrupts masked) and timed
//! with the cycle counter, once per tracing mode: built without a patchable
//! entry, untraced, one ops (ARGS), one SAVE_REGS ops, two ops, one ops while
//! another traces 1,000 other functions, function graph, rethook sparse and
//! full, fprobe entry-only and entry+exit. Then every patchable site is
//! enabled and disabled once, and timed.
//!
//! It prints a table and one `ratio NAME VALUE` line per figure. Under TCG
//! (always, for aarch64 here) only the ratios mean anything.
//!
//! `bench attach MODE` puts one mode's client ([`Client`]) on
//! `kernel::workload::fib` instead, until `bench detach`, so that
//! `bench/profile-call.py` can list one traced call of that mode
//! instruction by instruction.

pub mod vs_linux;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicPtr, Ordering};

use fprobe::{EntryData, Fprobe, FprobeConfig, Target};
use ftrace::graph::fgraph::{EntryData as GraphData, FgraphEntry, FgraphOps, FgraphReturn};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags};
use rethook::{Rethook, RethookMode, RethookNode};

use crate::println;
use crate::workload::generated;

/// Calls in one sample.
pub const CALLS: u64 = 100_000;
/// Samples per mode; the median is reported.
pub const SAMPLES: usize = 7;
/// Functions the "busy" ops traces elsewhere.
const BUSY_FUNCTIONS: usize = 1_000;

/// The traced function under test.
#[inline(never)]
pub extern "C" fn tracee(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> u64 {
    black_box(a ^ b ^ c ^ d ^ e ^ f)
}

/// The same function, built without a patchable entry.
#[inline(never)]
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
pub extern "C" fn tracee_notrace(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) -> u64 {
    black_box(a ^ b ^ c ^ d ^ e ^ f)
}

/// Counter ticks for [`CALLS`] direct calls of `$f`, interrupts masked. Every
/// argument is a run-time value: constants would let the compiler specialise
/// the untraced twin (whose address is never taken) and compare unlike code.
macro_rules! time_calls {
    ($f:path) => {{
        arch::irq::without_interrupts(|| {
            let start = arch::timer::cycles();
            let mut acc = 0u64;
            for i in 0..CALLS {
                acc = acc.wrapping_add($f(i, acc, i ^ 3, acc ^ 4, i + 5, acc + 6));
            }
            let end = arch::timer::cycles();
            black_box(acc);
            end - start
        })
    }};
}

/// The median of [`SAMPLES`] samples, in counter ticks per call.
fn median_per_call(mut sample: impl FnMut() -> u64) -> f64 {
    sample(); // warm up (TCG translates the code once)
    let mut samples: Vec<u64> = (0..SAMPLES).map(|_| sample()).collect();
    samples.sort_unstable();
    samples[SAMPLES / 2] as f64 / CALLS as f64
}

fn measure_tracee() -> f64 {
    median_per_call(|| time_calls!(tracee))
}

// ---- the tracing clients, each with nothing to do ----
//
// The callbacks are built without a patchable entry (notrace): an ops without
// the RECURSION flag must never reach traced code, and "every site" includes
// the kernel's own functions.

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
extern "C" fn empty_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {}

static ARGS_OPS: FtraceOps = FtraceOps::new(empty_callback, OpsFlags::empty());
static SECOND_OPS: FtraceOps = FtraceOps::new(empty_callback, OpsFlags::empty());
static REGS_OPS: FtraceOps = FtraceOps::new(empty_callback, OpsFlags::SAVE_REGS);
static BUSY_OPS: FtraceOps = FtraceOps::new(empty_callback, OpsFlags::empty());
static PATCH_ALL_OPS: FtraceOps = FtraceOps::new(empty_callback, OpsFlags::empty());

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn graph_entry(_gops: &FgraphOps, _call: &FgraphEntry, _data: &mut GraphData, _fregs: &mut FtraceRegs) -> bool {
    true
}

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn graph_return(_gops: &FgraphOps, _call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {}

static GRAPH_OPS: FgraphOps = FgraphOps::new(graph_entry, graph_return);

/// The rethook the entry ops hooks with, read without a lock.
static RETHOOK: AtomicPtr<Rethook> = AtomicPtr::new(core::ptr::null_mut());

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
extern "C" fn hook_return(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: `Client::attach` publishes a boxed rethook here, and
    // `drop_rethook` takes it back only after unregistering this ops.
    let Some(rethook) = (unsafe { RETHOOK.load(Ordering::Acquire).as_ref() }) else { return };
    if let Some(node) = rethook.try_get() {
        let _ = node.hook(fregs);
    }
}

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn rethook_handler(_node: &RethookNode, _data: usize, _ret_addr: usize, _fregs: &mut FtraceRegs) {}

static RETHOOK_OPS: FtraceOps = FtraceOps::new(hook_return, OpsFlags::RECURSION);

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn fprobe_entry(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    false
}

#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn fprobe_exit(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) {}

fn tracee_ip() -> usize {
    tracee as *const () as usize
}

/// Registers `ops` on the function at `ip` alone.
fn trace_only(ops: &'static FtraceOps, ip: usize) -> Result<(), String> {
    ftrace::set_filter_ips(ops, FilterKind::Filter, &[ip], FilterMode::Replace).map_err(|e| format!("bench: filter: {e}"))?;
    ftrace::register(ops).map_err(|e| format!("bench: register: {e}"))
}

fn unregister(ops: &'static FtraceOps) -> Result<(), String> {
    ftrace::unregister(ops).map_err(|e| format!("bench: unregister: {e}"))
}

/// A measured mode's tracing client: what the benchmark registers on the
/// tracee, and what `bench attach MODE` registers on
/// `kernel::workload::fib`, so that `bench/profile-call.py` can show one
/// traced call of that mode instruction by instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// One ops with an empty callback.
    Args,
    /// Two such ops.
    TwoOps,
    /// One ops, while another traces [`BUSY_FUNCTIONS`] other functions.
    ArgsBusy,
    /// One SAVE_REGS ops.
    Regs,
    /// A function-graph user with empty entry and return callbacks.
    Graph,
    /// A rethook with an empty handler, sparse return registers.
    Rethook,
    /// The same, every register at the return.
    RethookRegs,
    /// An fprobe with an entry handler only.
    FprobeEntry,
    /// An fprobe with an entry and an exit handler.
    FprobeExit,
}

impl Client {
    /// Every client, in the benchmark's order.
    pub const ALL: [Client; 9] = [
        Client::Args,
        Client::TwoOps,
        Client::ArgsBusy,
        Client::Regs,
        Client::Graph,
        Client::Rethook,
        Client::RethookRegs,
        Client::FprobeEntry,
        Client::FprobeExit,
    ];

    /// The mode's name in the benchmark's table.
    pub fn name(self) -> &'static str {
        match self {
            Client::Args => "args",
            Client::TwoOps => "two_ops",
            Client::ArgsBusy => "args_busy",
            Client::Regs => "regs",
            Client::Graph => "graph",
            Client::Rethook => "rethook",
            Client::RethookRegs => "rethook_regs",
            Client::FprobeEntry => "fprobe_entry",
            Client::FprobeExit => "fprobe_exit",
        }
    }

    /// The client of the mode named `name`.
    pub fn named(name: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|client| client.name() == name)
    }

    /// Registers the client on the function at `ip`; on error nothing stays
    /// registered.
    fn attach(self, ip: usize) -> Result<Attached, String> {
        let mut attached = Attached { client: self, fprobe: None };
        match self {
            Client::Args => trace_only(&ARGS_OPS, ip)?,
            Client::TwoOps => {
                trace_only(&ARGS_OPS, ip)?;
                trace_only(&SECOND_OPS, ip).inspect_err(|_| drop(unregister(&ARGS_OPS)))?;
            }
            Client::ArgsBusy => {
                let busy: Vec<usize> = generated::FUNCTIONS[..BUSY_FUNCTIONS].iter().map(|f| *f as usize).collect();
                ftrace::set_filter_ips(&BUSY_OPS, FilterKind::Filter, &busy, FilterMode::Replace)
                    .map_err(|e| format!("bench: busy filter: {e}"))?;
                ftrace::register(&BUSY_OPS).map_err(|e| format!("bench: busy ops: {e}"))?;
                trace_only(&ARGS_OPS, ip).inspect_err(|_| drop(unregister(&BUSY_OPS)))?;
            }
            Client::Regs => trace_only(&REGS_OPS, ip)?,
            Client::Graph => {
                ftrace::set_filter_ips(GRAPH_OPS.ops(), FilterKind::Filter, &[ip], FilterMode::Replace)
                    .map_err(|e| format!("bench: filter: {e}"))?;
                GRAPH_OPS.register().map_err(|e| format!("bench: graph: {e}"))?;
            }
            Client::Rethook | Client::RethookRegs => {
                let mode = if self == Client::Rethook { RethookMode::Sparse } else { RethookMode::FullRegs };
                let rethook = alloc::boxed::Box::new(Rethook::new(rethook_handler, 0, 64, 1, mode));
                RETHOOK.store(alloc::boxed::Box::into_raw(rethook), Ordering::Release);
                trace_only(&RETHOOK_OPS, ip).inspect_err(|_| drop_rethook())?;
            }
            Client::FprobeEntry | Client::FprobeExit => {
                let config = FprobeConfig {
                    entry: Some(fprobe_entry),
                    exit: (self == Client::FprobeExit).then_some(fprobe_exit as fprobe::ExitHandler),
                    entry_data_words: 0,
                    save_args: false,
                    private: 0,
                    free_private: None,
                };
                let probe = fprobe::register(config, Target::Addresses(&[ip])).map_err(|e| format!("bench: fprobe: {e}"))?;
                attached.fprobe = Some(probe);
            }
        }
        Ok(attached)
    }
}

/// Lets go of the rethook `RETHOOK` holds, once its ops is unregistered:
/// after a grace period, since a callback that loaded the pointer before
/// may still be running on another CPU.
fn drop_rethook() {
    let rethook = RETHOOK.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !rethook.is_null() {
        ftrace::deferred::synchronize();
        // SAFETY: made by `Box::into_raw` in `Client::attach`; the ops that
        // reads it is unregistered (or never was), and every callback that
        // could have loaded it has returned (the grace period).
        drop(unsafe { alloc::boxed::Box::from_raw(rethook) });
    }
}

/// A client registered on a function.
#[must_use = "detach it"]
pub struct Attached {
    client: Client,
    fprobe: Option<fprobe::RegisteredFprobe>,
}

impl Attached {
    /// The client.
    pub fn client(&self) -> Client {
        self.client
    }

    /// Unregisters the client. On error what could not be unregistered
    /// stays attached, to try again.
    pub fn detach(&mut self) -> Result<(), String> {
        match self.client {
            Client::Args => unregister(&ARGS_OPS),
            Client::TwoOps => unregister(&SECOND_OPS).and(unregister(&ARGS_OPS)),
            Client::ArgsBusy => unregister(&ARGS_OPS).and(unregister(&BUSY_OPS)),
            Client::Regs => unregister(&REGS_OPS),
            Client::Graph => GRAPH_OPS.unregister().map_err(|e| format!("bench: graph: {e}")),
            Client::Rethook | Client::RethookRegs => {
                unregister(&RETHOOK_OPS)?;
                drop_rethook();
                Ok(())
            }
            Client::FprobeEntry | Client::FprobeExit => match self.fprobe.take().map(fprobe::RegisteredFprobe::unregister) {
                Some(Err((probe, e))) => {
                    self.fprobe = Some(probe);
                    Err(format!("bench: fprobe: {e}"))
                }
                _ => Ok(()),
            },
        }
    }
}

/// The client `bench attach` put on `fib`, if any.
static ATTACHED: spin::Mutex<Option<Attached>> = spin::Mutex::new(None);

/// `bench attach MODE`: registers the mode's client on
/// `kernel::workload::fib` (one client at a time).
pub fn attach(client: Client) -> Result<(), String> {
    let mut attached = ATTACHED.lock();
    let fib = crate::workload::fib as *const () as usize;
    refuse_unless_idle(&attached, fib)?;
    *attached = Some(client.attach(fib)?);
    Ok(())
}

/// Why neither `bench attach` nor the benchmark can start: a client is
/// attached already (they share the ops statics), or `ip`, the function
/// the clients go on, has no ftrace site (function tracing is unavailable).
fn refuse_unless_idle(attached: &Option<Attached>, ip: usize) -> Result<(), String> {
    if let Some(other) = attached {
        return Err(format!("bench: '{}' is attached to fib; 'bench detach' first", other.client().name()));
    }
    if ftrace::site(ip).is_none() {
        return Err("bench: function tracing is unavailable (see the boot messages)".into());
    }
    Ok(())
}

/// `bench detach`: unregisters what `bench attach` registered, and says
/// which client that was.
pub fn detach() -> Result<Client, String> {
    let mut attached = ATTACHED.lock();
    let client = attached.as_mut().ok_or("bench: nothing is attached")?;
    client.detach()?;
    let name = client.client();
    *attached = None;
    Ok(name)
}

/// One measured mode.
struct Row {
    name: &'static str,
    ticks: f64,
}

/// Runs every mode and prints the table and the ratios; refused when
/// function tracing is unavailable (what each mode registers would fail).
pub fn run() -> Result<(), String> {
    // Held for the whole run: the clients' ops are the ones `bench attach` uses.
    let attached = ATTACHED.lock();
    refuse_unless_idle(&attached, tracee_ip())?;
    let hz = arch::timer::cycles_per_second();
    println!(
        "benchmark: {} under {}, cycle counter {}.{:03} MHz, {CALLS} calls a sample, median of {SAMPLES}",
        arch::NAME,
        arch::cpu::accelerator().name(),
        hz / 1_000_000,
        hz / 1_000 % 1_000
    );
    let mut rows = Vec::new();
    rows.push(Row { name: "notrace", ticks: median_per_call(|| time_calls!(tracee_notrace)) });
    rows.push(Row { name: "nop", ticks: measure_tracee() });
    for client in Client::ALL {
        let mut attached = client.attach(tracee_ip())?;
        rows.push(Row { name: client.name(), ticks: measure_tracee() });
        attached.detach()?;
    }

    println!("{:<14} {:>12} {:>10}", "mode", "ticks/call", "ns/call");
    for row in &rows {
        let ns = row.ticks * 1e9 / hz as f64;
        println!("{:<14} {:>12.2} {:>10.2}", row.name, row.ticks, ns);
    }
    let ticks = |name: &str| rows.iter().find(|r| r.name == name).map_or(f64::NAN, |r| r.ticks);
    for (name, over, under) in [
        ("args_over_nop", "args", "nop"),
        ("two_ops_over_args", "two_ops", "args"),
        ("args_busy_over_args", "args_busy", "args"),
        ("nop_over_notrace", "nop", "notrace"),
        ("graph_over_args", "graph", "args"),
        ("fprobe_exit_over_entry", "fprobe_exit", "fprobe_entry"),
    ] {
        println!("ratio {name} {:.3}", ticks(over) / ticks(under));
    }
    patch_every_site(hz);
    Ok(())
}

/// Enables, then disables, tracing on every patchable site, and times both.
fn patch_every_site(hz: u64) {
    ftrace::set_filter(&PATCH_ALL_OPS, FilterKind::Filter, "", FilterMode::Replace).expect("clear filter");
    let start = arch::timer::cycles();
    ftrace::register(&PATCH_ALL_OPS).expect("enable every site");
    let enabled = arch::timer::cycles() - start;
    let mut sites = 0;
    ftrace::for_each_site(|site| sites += usize::from(site.ops_count > 0));
    let start = arch::timer::cycles();
    unregister(&PATCH_ALL_OPS).expect("disable every site");
    let disabled = arch::timer::cycles() - start;
    let micros = |ticks: u64| ticks as f64 * 1e6 / hz as f64;
    println!(
        "patching: {sites} sites enabled in {:.0} us ({:.3} us a site), disabled in {:.0} us",
        micros(enabled),
        micros(enabled) / sites as f64,
        micros(disabled)
    );
    println!("ratio patch_sites {sites}");
    println!("ratio patch_enable_all_us {:.0}", micros(enabled));
}
