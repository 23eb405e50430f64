//! The worked examples of `docs/architecture.md` ("Writing a tracer, an
//! fprobe user and a rethook user"), as tests: the guide quotes the code
//! between the `// example:` markers, and a test below checks each quote is
//! still this code.

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};

use arch::sync::SpinLock;
use fprobe::{EntryData, Fprobe, FprobeConfig, Target};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags};
use ktest_macros::ktest;
use rethook::{Rethook, RethookMode, RethookNode};

use crate::workload::fib;

// example: tracer
/// Calls seen, and the sum of their first arguments.
static CALLS: AtomicU64 = AtomicU64::new(0);
static ARG_SUM: AtomicU64 = AtomicU64::new(0);

/// Runs at the entry of every function the ops's filter selects, with the
/// sparse registers: the arguments are there.
extern "C" fn count_calls(_ip: usize, _parent_ip: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    ARG_SUM.fetch_add(fregs.argument(0).unwrap_or(0), Ordering::Relaxed);
}

/// RECURSION: a callback that calls traced code is not re-entered.
static COUNTER: FtraceOps = FtraceOps::new(count_calls, OpsFlags::RECURSION);

#[ktest]
fn example_a_tracer_counts_calls_and_reads_an_argument() {
    ftrace::set_filter(&COUNTER, FilterKind::Filter, "kernel::workload::fib", FilterMode::Replace).unwrap();
    ftrace::register(&COUNTER).unwrap();
    assert_eq!(fib(black_box(4)), 3);
    ftrace::unregister(&COUNTER).unwrap();
    // fib(4) calls fib 9 times, with arguments 4+3+2+1+0+1+2+1+0 = 14.
    assert_eq!((CALLS.load(Ordering::Relaxed), ARG_SUM.load(Ordering::Relaxed)), (9, 14));
}
// end example

// example: fprobe
/// What fib(4) returned, as the exit handler saw it.
static FIB4: AtomicU64 = AtomicU64::new(0);

/// Runs at entry; returning `true` would skip this call's exit handler.
fn on_entry(_fp: &Fprobe, _ip: usize, _ret_ip: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    false
}

/// Runs at the return: `fregs` is the sparse return save (the return
/// value is there); the entry arguments come from `data` (`save_args`).
fn on_exit(_fp: &Fprobe, _ip: usize, _ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    if data.argument(0) == Some(4) {
        FIB4.store(fregs.return_value(), Ordering::Relaxed);
    }
}

#[ktest]
fn example_an_fprobe_sees_the_entry_argument_at_exit() {
    let config = FprobeConfig {
        entry: Some(on_entry),
        exit: Some(on_exit),
        entry_data_words: 0,
        save_args: true,
        private: 0,
        free_private: None,
    };
    let probe = fprobe::register(config, Target::Symbols(&["kernel::workload::fib"])).unwrap();
    assert_eq!(fib(black_box(6)), 8);
    probe.unregister().map_err(|(_, error)| error).unwrap();
    assert_eq!(FIB4.load(Ordering::Relaxed), 3, "fib(4) = 3, seen at its return");
}
// end example

// example: rethook
/// The rethook the entry callback hooks returns with.
static HOOK: SpinLock<Option<Rethook>> = SpinLock::new(None);
static RETURNED: AtomicU64 = AtomicU64::new(0);

/// Runs at the hooked call's return, with the node the entry filled.
fn at_return(node: &RethookNode, _data: usize, _ret_addr: usize, fregs: &mut FtraceRegs) {
    // The node's word is the argument the entry kept: add n + fib(n).
    RETURNED.fetch_add(node.data()[0] + fregs.return_value(), Ordering::Relaxed);
}

/// An ops entry callback: takes a node from the rethook's pool (no
/// allocation on the traced path), fills it, hooks the return.
extern "C" fn hook_return(_ip: usize, _parent_ip: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let Some(hook) = HOOK.try_lock() else { return };
    if let Some(mut node) = hook.as_ref().and_then(Rethook::try_get) {
        node.data_mut()[0] = fregs.argument(0).unwrap_or(0);
        let _ = node.hook(fregs);
    }
}

static HOOKING: FtraceOps = FtraceOps::new(hook_return, OpsFlags::RECURSION);

#[ktest]
fn example_a_rethook_runs_a_handler_at_each_return() {
    // 16 nodes of 1 word: at most 16 hooked calls in flight.
    *HOOK.lock() = Some(Rethook::new(at_return, 0, 16, 1, RethookMode::Sparse));
    ftrace::set_filter(&HOOKING, FilterKind::Filter, "kernel::workload::fib", FilterMode::Replace).unwrap();
    ftrace::register(&HOOKING).unwrap();
    assert_eq!(fib(black_box(3)), 2);
    ftrace::unregister(&HOOKING).unwrap();
    let rethook = HOOK.lock().take().unwrap();
    // fib(3) calls fib(3), fib(2), fib(1), fib(0), fib(1): n + fib(n) is
    // 5 + 3 + 2 + 0 + 2 = 12.
    assert_eq!(RETURNED.load(Ordering::Relaxed), 12);
    assert_eq!((rethook.missed(), rethook.in_flight()), (0, 0));
}
// end example

/// The guide and this file, as the kernel was built with them.
const GUIDE: &str = include_str!("../../../docs/architecture.md");
const THIS_FILE: &str = include_str!("examples.rs");

#[ktest]
fn the_guide_quotes_the_examples_as_they_are() {
    let mut quoted = 0;
    for name in ["tracer", "fprobe", "rethook"] {
        let start = THIS_FILE.find(&alloc::format!("// example: {name}\n")).unwrap();
        let body = &THIS_FILE[start..];
        let body = &body[body.find('\n').unwrap() + 1..body.find("// end example\n").unwrap()];
        assert!(GUIDE.contains(body), "docs/architecture.md must quote the {name} example verbatim:\n{body}");
        quoted += 1;
    }
    assert_eq!(quoted, 3);
}
