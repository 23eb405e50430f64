//! The return hook: function-graph users and rethook over one shadow stack.

use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use arch::selftest::{call_with_marked_registers, MARKED_REGISTERS};
use ftrace::fgraph::{EntryData, FgraphEntry, FgraphOps, FgraphReturn};
use ftrace::retstack::{self, Recorded};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags};
use ktest_macros::ktest;
use rethook::{Rethook, RethookMode, RethookNode};

use crate::tracefs;
use crate::workload::fib;

fn address<T: Copy>(f: T) -> usize {
    // SAFETY: only used on function pointers, which are pointer-sized.
    unsafe { core::mem::transmute_copy::<T, usize>(&f) }
}

fn fib_address() -> usize {
    address(fib as fn(u64) -> u64)
}

/// Registers a graph user traced only at `functions`.
fn graph_only(gops: &'static FgraphOps, functions: &[usize]) {
    ftrace::set_filter_ips(gops.ops(), FilterKind::Filter, functions, FilterMode::Replace).unwrap();
    gops.register().unwrap();
}

/// A small fixed log that callbacks can append to without allocating.
struct Log<const N: usize>(spin::Mutex<([(u64, u64, u64); N], usize)>);

impl<const N: usize> Log<N> {
    const fn new() -> Self {
        Self(spin::Mutex::new(([(0, 0, 0); N], 0)))
    }

    fn push(&self, a: u64, b: u64, c: u64) {
        let mut log = self.0.lock();
        let len = log.1;
        if len < N {
            log.0[len] = (a, b, c);
            log.1 = len + 1;
        }
    }

    fn take(&self) -> Vec<(u64, u64, u64)> {
        let mut log = self.0.lock();
        let items = log.0[..log.1].to_vec();
        log.1 = 0;
        items
    }
}

const ENTRY: u64 = 1;
const RETURN: u64 = 2;

// ---- return values and per-call data ----

/// Changes its argument register before returning (on aarch64 x0 is both
/// argument 0 and the return value).
#[inline(never)]
extern "C" fn rewrites_its_argument(x: u64) -> u64 {
    black_box(x.wrapping_mul(3) + 1)
}

const MAGIC: u64 = 0x5eed_f00d_dead_beef;
static DATA_LOG: Log<8> = Log::new();

fn keep_argument(_gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, fregs: &mut FtraceRegs) -> bool {
    let words = data.reserve(3).expect("room for three words");
    words[0] = fregs.argument(0).unwrap();
    words[1] = words[0] ^ MAGIC;
    words[2] = call.depth as u64;
    true
}

fn check_data(_gops: &FgraphOps, call: &FgraphReturn, data: &[u64], _fregs: &mut FtraceRegs) {
    DATA_LOG.push(call.retval, data[0], u64::from(data[1] == data[0] ^ MAGIC && data[2] == call.depth as u64));
}

static DATA_GRAPH: FgraphOps = FgraphOps::new(keep_argument, check_data).with_data_words(3);

#[ktest]
fn return_value_is_the_real_one_and_entry_data_round_trips() {
    let f = address(rewrites_its_argument as extern "C" fn(u64) -> u64);
    graph_only(&DATA_GRAPH, &[f]);
    let result = rewrites_its_argument(black_box(41));
    DATA_GRAPH.unregister().unwrap();
    assert_eq!(result, 124);
    assert_eq!(DATA_LOG.take(), [(124, 41, 1)], "retval is the returned value; the entry argument came back intact");
    assert_eq!(retstack::frames(), 0);
}

// ---- depth and nesting ----

static FIB_LOG: Log<64> = Log::new();

fn log_entry(_gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, fregs: &mut FtraceRegs) -> bool {
    let n = fregs.argument(0).unwrap();
    data.reserve(1).unwrap()[0] = n;
    FIB_LOG.push(ENTRY, call.depth as u64, n);
    true
}

fn log_return(_gops: &FgraphOps, call: &FgraphReturn, data: &[u64], _fregs: &mut FtraceRegs) {
    FIB_LOG.push(RETURN, call.depth as u64, data[0]);
    assert_eq!(call.retval, reference_fib(data[0]), "fib({}) returned", data[0]);
}

fn reference_fib(n: u64) -> u64 {
    (0..n).fold((0, 1), |(a, b), _| (b, a + b)).0
}

static FIB_GRAPH: FgraphOps = FgraphOps::new(log_entry, log_return).with_data_words(1);

/// The call tree of `fib(n)` at `depth`: (kind, depth, n) in order.
fn expected_tree(n: u64, depth: u64, out: &mut Vec<(u64, u64, u64)>) {
    out.push((ENTRY, depth, n));
    if n >= 2 {
        expected_tree(n - 1, depth + 1, out);
        expected_tree(n - 2, depth + 1, out);
    }
    out.push((RETURN, depth, n));
}

#[ktest]
fn depth_and_nesting_follow_recursive_fib() {
    graph_only(&FIB_GRAPH, &[fib_address()]);
    let base = retstack::frames() as u64;
    assert_eq!(fib(black_box(4)), 3);
    FIB_GRAPH.unregister().unwrap();
    let mut expected = Vec::new();
    expected_tree(4, base, &mut expected);
    assert_eq!(FIB_LOG.take(), expected, "9 calls, balanced, depth by nesting");
    assert_eq!(retstack::frames() as u64, base);
}

// ---- two users ----

#[inline(never)]
extern "C" fn only_a() -> u64 {
    black_box(1)
}

#[inline(never)]
extern "C" fn only_b() -> u64 {
    black_box(2)
}

#[inline(never)]
extern "C" fn shared_call() -> u64 {
    black_box(3)
}

static A_LOG: Log<16> = Log::new();
static B_LOG: Log<16> = Log::new();

fn a_entry(_gops: &FgraphOps, call: &FgraphEntry, _data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    A_LOG.push(ENTRY, call.func as u64, 0);
    true
}

fn a_return(_gops: &FgraphOps, call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {
    A_LOG.push(RETURN, call.func as u64, call.retval);
}

/// User B wants returns of its own function only, not of the shared one.
fn b_entry(_gops: &FgraphOps, call: &FgraphEntry, _data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    B_LOG.push(ENTRY, call.func as u64, 0);
    call.func != address(shared_call as extern "C" fn() -> u64)
}

fn b_return(_gops: &FgraphOps, call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {
    B_LOG.push(RETURN, call.func as u64, call.retval);
}

static GRAPH_A: FgraphOps = FgraphOps::new(a_entry, a_return);
static GRAPH_B: FgraphOps = FgraphOps::new(b_entry, b_return);

#[ktest]
fn two_graph_users_each_see_exactly_their_calls() {
    let a = address(only_a as extern "C" fn() -> u64) as u64;
    let b = address(only_b as extern "C" fn() -> u64) as u64;
    let shared = address(shared_call as extern "C" fn() -> u64) as u64;
    graph_only(&GRAPH_A, &[a as usize, shared as usize]);
    graph_only(&GRAPH_B, &[b as usize, shared as usize]);
    only_a();
    only_b();
    shared_call();
    GRAPH_A.unregister().unwrap();
    GRAPH_B.unregister().unwrap();
    assert_eq!(A_LOG.take(), [(ENTRY, a, 0), (RETURN, a, 1), (ENTRY, shared, 0), (RETURN, shared, 3)]);
    assert_eq!(B_LOG.take(), [(ENTRY, b, 0), (RETURN, b, 2), (ENTRY, shared, 0)], "no return B did not ask for");
}

// ---- many users ----

static MANY_RETURNS: AtomicU64 = AtomicU64::new(0);

fn many_entry(gops: &FgraphOps, _call: &FgraphEntry, data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    data.reserve(2).unwrap().copy_from_slice(&[gops.private() as u64, !(gops.private() as u64)]);
    true
}

fn many_return(gops: &FgraphOps, _call: &FgraphReturn, data: &[u64], _fregs: &mut FtraceRegs) {
    if data == [gops.private() as u64, !(gops.private() as u64)] {
        MANY_RETURNS.fetch_add(1, Ordering::SeqCst);
    }
}

static MANY: [FgraphOps; 16] = [const { FgraphOps::new(many_entry, many_return).with_data_words(2) }; 16];

#[ktest]
fn sixteen_graph_users_on_one_call() {
    let f = address(shared_call as extern "C" fn() -> u64);
    for (index, gops) in MANY.iter().enumerate() {
        gops.set_private(index + 100);
        graph_only(gops, &[f]);
    }
    assert_eq!(shared_call(), 3);
    for gops in &MANY {
        gops.unregister().unwrap();
    }
    assert_eq!(MANY_RETURNS.load(Ordering::SeqCst), 16, "each user got its own data back");
    assert_eq!(retstack::frames(), 0);
}

// ---- limits: overrun ----

#[inline(never)]
fn deep(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    black_box(deep(black_box(n - 1))) + 1
}

static DEEP_RETURNS: AtomicU64 = AtomicU64::new(0);

fn accept(_gops: &FgraphOps, _call: &FgraphEntry, _data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    true
}

fn count_return(_gops: &FgraphOps, _call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {
    DEEP_RETURNS.fetch_add(1, Ordering::SeqCst);
}

static DEEP_GRAPH: FgraphOps = FgraphOps::new(accept, count_return);

#[ktest]
fn a_full_shadow_stack_counts_overruns_and_runs_untraced() {
    graph_only(&DEEP_GRAPH, &[address(deep as fn(u64) -> u64)]);
    let overruns = retstack::overruns();
    let returns = DEEP_RETURNS.load(Ordering::SeqCst);
    assert_eq!(deep(black_box(1000)), 1000, "every call still returns correctly");
    DEEP_GRAPH.unregister().unwrap();
    let lost = retstack::overruns() - overruns;
    let hooked = DEEP_RETURNS.load(Ordering::SeqCst) - returns;
    assert!(lost > 0, "the stack filled up");
    assert_eq!(DEEP_GRAPH.overruns(), lost);
    assert_eq!(hooked + lost, 1001, "hooked or counted, never lost");
    // A user with no data words takes only its frame's words: the stack
    // holds exactly as many such calls as fit (nothing reserved and unused).
    assert_eq!(hooked as usize, retstack::STACK_WORDS / retstack::frame_words(0));
    assert_eq!(retstack::frames(), 0);
}

// ---- an override and a return hook on one call ----

static SKIPPED_BODY_RUNS: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
extern "C" fn skippable(x: u64) -> u64 {
    SKIPPED_BODY_RUNS.fetch_add(1, Ordering::SeqCst);
    black_box(x + 1)
}

/// A caller with a frame of its own, which must come through intact.
#[inline(never)]
fn calls_skippable(x: u64) -> u64 {
    let kept = black_box([x, x + 1, x + 2]);
    black_box(skippable(black_box(x))) * 2 + kept[2] - kept[0]
}

extern "C" fn skip_with_seed(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    fregs.set_return_value(0x5eed);
    fregs.override_function_with_return();
}

static SKIP_OPS: FtraceOps = FtraceOps::new(skip_with_seed, OpsFlags::IPMODIFY);
static SKIP_RETURNS: Log<4> = Log::new();

fn log_skip_return(_gops: &FgraphOps, call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {
    SKIP_RETURNS.push(call.func as u64, call.retval, call.depth as u64);
}

static SKIP_GRAPH: FgraphOps = FgraphOps::new(accept, log_skip_return);

#[ktest]
fn a_skipped_call_still_returns_through_a_later_return_hook() {
    let f = address(skippable as extern "C" fn(u64) -> u64);
    // The override registers first, so its callback runs first: the graph
    // user then hooks the return of a call that is already skipped.
    ftrace::set_filter_ips(&SKIP_OPS, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
    ftrace::register(&SKIP_OPS).unwrap();
    graph_only(&SKIP_GRAPH, &[f]);
    let runs = SKIPPED_BODY_RUNS.load(Ordering::SeqCst);
    assert_eq!(calls_skippable(black_box(1)), 0x5eed * 2 + 2);
    assert_eq!(calls_skippable(black_box(7)), 0x5eed * 2 + 2);
    SKIP_GRAPH.unregister().unwrap();
    ftrace::unregister(&SKIP_OPS).unwrap();
    assert_eq!(SKIPPED_BODY_RUNS.load(Ordering::SeqCst), runs, "the body never ran");
    assert_eq!(SKIP_RETURNS.take(), alloc::vec![(f as u64, 0x5eed, 0); 2], "each skipped call returned once, hooked");
    assert_eq!(retstack::frames(), 0);
    assert!(!retstack::is_stopped(), "no frame-pointer mismatch");
    assert_eq!(calls_skippable(black_box(1)), 4 + 2);
}

// ---- backtraces ----

static INNER_FRAMES: spin::Mutex<Vec<usize>> = spin::Mutex::new(Vec::new());

#[inline(never)]
fn hooked_outer() -> u64 {
    black_box(hooked_inner()) + 1
}

#[inline(never)]
fn hooked_inner() -> u64 {
    *INNER_FRAMES.lock() = crate::backtrace::capture();
    black_box(1)
}

static BT_GRAPH: FgraphOps = FgraphOps::new(accept, count_return);

#[ktest]
fn backtraces_inside_hooked_calls_show_the_real_callers() {
    graph_only(&BT_GRAPH, &[address(hooked_outer as fn() -> u64), address(hooked_inner as fn() -> u64)]);
    assert_eq!(hooked_outer(), 2);
    BT_GRAPH.unregister().unwrap();
    let frames = INNER_FRAMES.lock().clone();
    let mut text = String::new();
    crate::backtrace::write_frames(&mut text, &frames);
    assert!(frames.iter().all(|&f| !retstack::is_return_trampoline(f)), "{text}");
    assert!(text.contains(" kernel::tests::graph::hooked_inner+0x"), "{text}");
    assert!(text.contains(" kernel::tests::graph::hooked_outer+0x"), "{text}");
    assert!(text.contains(" kernel::tests::graph::backtraces_inside_hooked_calls_show_the_real_callers+0x"), "{text}");
}

// ---- interrupts ----

static TICK_ENTRIES: AtomicU64 = AtomicU64::new(0);
static TICK_RETURNS: AtomicU64 = AtomicU64::new(0);
static SPIN_RETURNS: AtomicU64 = AtomicU64::new(0);

/// Whether the running task is the test runner (other CPUs' ticks land in
/// their own tasks, not above the spin).
fn on_test_task() -> bool {
    ftrace::task::try_current().is_some_and(|task| task.pid() == 1)
}

static NOT_NESTED: AtomicU64 = AtomicU64::new(0);

fn count_entry_of_tick(_gops: &FgraphOps, call: &FgraphEntry, _data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    if !on_test_task() {
        return false;
    }
    if call.func == address(crate::tick::on_tick as fn()) {
        TICK_ENTRIES.fetch_add(1, Ordering::SeqCst);
        // A tick may also land while the ops registers (as the patch batch
        // ends and interrupts come back on), outside the spin.
        if IN_SPIN.load(Ordering::SeqCst) && call.depth < 1 {
            NOT_NESTED.fetch_add(1, Ordering::SeqCst);
        }
    }
    true
}

fn count_return_of_tick(_gops: &FgraphOps, call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {
    if call.func == address(crate::tick::on_tick as fn()) {
        TICK_RETURNS.fetch_add(1, Ordering::SeqCst);
    } else {
        SPIN_RETURNS.fetch_add(1, Ordering::SeqCst);
    }
}

static TICK_GRAPH: FgraphOps = FgraphOps::new(count_entry_of_tick, count_return_of_tick);

/// Waits for `ticks` timer interrupts, which land inside this hooked call.
#[inline(never)]
fn spin_for_ticks(ticks: u64) -> u64 {
    IN_SPIN.store(true, Ordering::SeqCst);
    let start = arch::time::ticks();
    while arch::time::ticks() < start + ticks {
        arch::cpu::wait_for_interrupt();
    }
    IN_SPIN.store(false, Ordering::SeqCst);
    black_box(ticks)
}

static IN_SPIN: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

#[ktest]
fn interrupts_inside_hooked_calls_keep_the_stack_balanced() {
    graph_only(&TICK_GRAPH, &[address(spin_for_ticks as fn(u64) -> u64), address(crate::tick::on_tick as fn())]);
    let frames = retstack::frames();
    assert_eq!(spin_for_ticks(black_box(20)), 20);
    TICK_GRAPH.unregister().unwrap();
    // The last tick's return may still be running in its interrupt: wait one more.
    let (entries, returns) = (TICK_ENTRIES.load(Ordering::SeqCst), TICK_RETURNS.load(Ordering::SeqCst));
    assert!(entries >= 20, "{entries} ticks traced");
    assert_eq!(NOT_NESTED.load(Ordering::SeqCst), 0, "each interrupt nests above the hooked spin");
    assert_eq!(entries, returns, "every interrupt's hooked call returned");
    assert_eq!(SPIN_RETURNS.load(Ordering::SeqCst), 1);
    assert_eq!(retstack::frames(), frames, "balanced");
}

// ---- the frame check ----

/// What `breaks_its_frame_record` corrupts.
static CORRUPT: AtomicUsize = AtomicUsize::new(0);

#[inline(never)]
fn breaks_its_frame_record() -> u64 {
    let field = if CORRUPT.load(Ordering::SeqCst) == 0 { Recorded::FramePointer } else { Recorded::StackPointer };
    retstack::corrupt_innermost(field);
    black_box(77)
}

static FP_GRAPH: FgraphOps = FgraphOps::new(accept, count_return);

#[ktest(should_panic = "return hook stopped: the frame does not match the registers")]
fn a_frame_pointer_mismatch_stops_the_hook_with_a_report() {
    // Through the function_graph tracer, with the function in
    // set_graph_notrace: its entry leaves a marker that only its return
    // would clear. The stopped hook must clear it (see the test after).
    CORRUPT.store(0, Ordering::SeqCst);
    // Only that function is traced: the tracer, left on by the panic, must
    // not disturb the tests that run before the one after.
    tracer_setup("kernel::tests::graph::breaks_its_frame_record", "", "0");
    tracefs::write("set_graph_notrace", "kernel::tests::graph::breaks_its_frame_record", FilterMode::Replace).unwrap();
    breaks_its_frame_record();
    unreachable!("returned through a frame that does not match");
}

/// Sibling calls from one caller share a frame pointer: the stack pointer
/// tells a stale frame apart.
#[ktest(should_panic = "return hook stopped: the frame does not match the registers")]
fn a_stack_pointer_mismatch_stops_the_hook_with_a_report() {
    CORRUPT.store(1, Ordering::SeqCst);
    tracer_cleanup();
    graph_only(&FP_GRAPH, &[address(breaks_its_frame_record as fn() -> u64)]);
    breaks_its_frame_record();
    unreachable!("returned through a frame that does not match");
}

/// Runs after the two tests above (the test runner sorts by name, `_`
/// after letters), which leave `FP_GRAPH` registered, the hook stopped and
/// frames and a notrace marker abandoned: the test framework restarted the
/// hook, and nothing stays suppressed.
#[ktest]
fn a_stopped_hook_restarts_with_every_call_hooked_again() {
    assert!(!retstack::is_stopped(), "restarted");
    FP_GRAPH.unregister().expect("left registered by a_stack_pointer_mismatch_...");
    assert_eq!(retstack::frames(), 0);
    tracer_setup("kernel::workload::fib", "", "0");
    fib(black_box(3));
    let events = graph_events();
    tracer_cleanup();
    let exits = events.iter().filter(|r| matches!(r, ftrace::event::Record::GraphExit(_))).count();
    assert_eq!(exits, 5, "fib(3) traced whole: no stale notrace marker");
}

// ---- returns of calls hooked inside callbacks ----

static INNER_RETURNS: AtomicU64 = AtomicU64::new(0);

fn count_inner_return(_node: &RethookNode, _data: usize, _ret_addr: usize, _fregs: &mut FtraceRegs) {
    INNER_RETURNS.fetch_add(1, Ordering::SeqCst);
}

#[inline(never)]
extern "C" fn called_from_a_callback(x: u64) -> u64 {
    black_box(x + 1)
}

/// Hooks `called_from_a_callback` with the active rethook. Without the
/// recursion guard, so it also hooks calls made inside other callbacks.
extern "C" fn unguarded_rethook_entry(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    hook_with_rethook(_ip, _parent, _ops, fregs);
}

static UNGUARDED_ENTRY: FtraceOps = FtraceOps::new(unguarded_rethook_entry, OpsFlags::empty());

/// A guarded callback that calls the hooked function four times.
extern "C" fn calls_hooked_code(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    for x in 0..4 {
        black_box(called_from_a_callback(black_box(x)));
    }
}

static CALLING_OPS: FtraceOps = FtraceOps::new(calls_hooked_code, OpsFlags::RECURSION);

#[inline(never)]
extern "C" fn outer_traced() -> u64 {
    black_box(5)
}

#[ktest]
fn returns_of_calls_hooked_inside_a_callback_run_their_handlers() {
    let hooked = address(called_from_a_callback as extern "C" fn(u64) -> u64);
    let outer = address(outer_traced as extern "C" fn() -> u64);
    *ACTIVE_RETHOOK.lock() = Some(Rethook::new(count_inner_return, 0, 4, 1, RethookMode::Sparse));
    ftrace::set_filter_ips(&UNGUARDED_ENTRY, FilterKind::Filter, &[hooked], FilterMode::Replace).unwrap();
    ftrace::set_filter_ips(&CALLING_OPS, FilterKind::Filter, &[outer], FilterMode::Replace).unwrap();
    ftrace::register(&UNGUARDED_ENTRY).unwrap();
    ftrace::register(&CALLING_OPS).unwrap();
    let before = INNER_RETURNS.load(Ordering::SeqCst);
    assert_eq!(outer_traced(), 5);
    ftrace::unregister(&CALLING_OPS).unwrap();
    ftrace::unregister(&UNGUARDED_ENTRY).unwrap();
    let rethook = ACTIVE_RETHOOK.lock().take().unwrap();
    assert_eq!(INNER_RETURNS.load(Ordering::SeqCst) - before, 4, "every return ran its handler");
    assert_eq!((rethook.missed(), rethook.in_flight(), rethook.free_nodes()), (0, 0, 4), "nothing missed, every node back");
    assert_eq!(retstack::frames(), 0);
}

/// A rethook handler that calls a function the same rethook hooks: that
/// inner return comes inside a return callback, so it is missed, counted and
/// its node released, and the recursion stops there.
fn handler_calls_hooked_code(_node: &RethookNode, _data: usize, _ret_addr: usize, _fregs: &mut FtraceRegs) {
    INNER_RETURNS.fetch_add(1, Ordering::SeqCst);
    black_box(called_from_a_callback(black_box(1)));
}

#[ktest]
fn a_return_inside_a_return_callback_is_missed_and_released() {
    let hooked = address(called_from_a_callback as extern "C" fn(u64) -> u64);
    *ACTIVE_RETHOOK.lock() = Some(Rethook::new(handler_calls_hooked_code, 0, 4, 1, RethookMode::Sparse));
    ftrace::set_filter_ips(&UNGUARDED_ENTRY, FilterKind::Filter, &[hooked], FilterMode::Replace).unwrap();
    ftrace::register(&UNGUARDED_ENTRY).unwrap();
    let before = INNER_RETURNS.load(Ordering::SeqCst);
    for x in 0..3 {
        assert_eq!(called_from_a_callback(black_box(x)), x + 1);
    }
    ftrace::unregister(&UNGUARDED_ENTRY).unwrap();
    let rethook = ACTIVE_RETHOOK.lock().take().unwrap();
    assert_eq!(INNER_RETURNS.load(Ordering::SeqCst) - before, 3, "the outer returns ran the handler");
    assert_eq!(rethook.missed(), 3, "each inner return missed and counted");
    assert_eq!((rethook.in_flight(), rethook.free_nodes()), (0, 4), "every node back");
    assert_eq!(retstack::frames(), 0);
}

// ---- the function_graph tracer ----

fn graph_events() -> Vec<ftrace::event::Record> {
    super::recorded_events().iter().filter_map(|(_, payload)| ftrace::event::Record::decode(payload)).collect()
}

fn tracer_setup(filter: &str, graph_function: &str, max_depth: &str) {
    tracefs::write("set_ftrace_filter", filter, FilterMode::Replace).unwrap();
    tracefs::write("set_graph_function", graph_function, FilterMode::Replace).unwrap();
    tracefs::write("max_graph_depth", max_depth, FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function_graph", FilterMode::Replace).unwrap();
}

fn tracer_cleanup() {
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    for (file, text) in
        [("set_ftrace_filter", ""), ("set_graph_function", ""), ("set_graph_notrace", ""), ("max_graph_depth", "0")]
    {
        tracefs::write(file, text, FilterMode::Replace).unwrap();
    }
}

fn names(events: &[ftrace::event::Record]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|record| match record {
            ftrace::event::Record::GraphEntry(entry) => ftrace::symbols::name_of(entry.func as usize),
            _ => None,
        })
        .collect()
}

#[ktest]
fn function_graph_tracer_shows_fib_as_a_balanced_tree_with_return_values() {
    use ftrace::event::Record;
    tracer_setup("*::fib", "", "0");
    tracefs::write("options/funcgraph-retval", "1", FilterMode::Replace).unwrap();
    fib(black_box(4));
    let events = graph_events();
    let mut trace = String::new();
    tracefs::read("trace", &mut trace).unwrap();
    tracefs::write("options/funcgraph-retval", "0", FilterMode::Replace).unwrap();
    tracer_cleanup();
    let entries = events.iter().filter(|r| matches!(r, Record::GraphEntry(_))).count();
    let exits: Vec<u64> =
        events.iter().filter_map(|r| if let Record::GraphExit(x) = r { Some(x.retval) } else { None }).collect();
    assert_eq!((entries, exits.len()), (9, 9));
    assert_eq!(*exits.last().unwrap(), 3, "the outermost call returned fib(4)");
    assert!(trace.starts_with("# tracer: function_graph\n"), "{trace}");
    // On whichever CPU the test task runs.
    assert!(trace.contains(")               |  kernel::workload::fib() {\n"), "{trace}");
    assert!(trace.contains("|        kernel::workload::fib(); /* = 0x1 */\n"), "{trace}");
    assert!(trace.contains("|  } /* kernel::workload::fib = 0x3 */\n"), "{trace}");
    assert_eq!(trace.matches("kernel::workload::fib").count(), 9 + 4, "9 calls, 4 of them with children");
}

/// One call shows one duration wherever it is read: an exit event's call
/// and return times are its entry event's and its own timestamps.
#[ktest]
fn graph_call_times_are_the_timestamps_of_their_events() {
    use ftrace::event::Record;
    tracer_setup("*::fib", "", "0");
    fib(black_box(5));
    let events = super::recorded_events();
    tracer_cleanup();
    let mut open = Vec::new();
    let mut exits = 0;
    for &(time, ref payload) in &events {
        match Record::decode(payload) {
            Some(Record::GraphEntry(_)) => open.push(time),
            Some(Record::GraphExit(exit)) => {
                let entry_time = open.pop().expect("an entry before every exit");
                assert_eq!(exit.calltime, entry_time, "calltime is the entry event's timestamp");
                assert_eq!(exit.rettime, time, "rettime is the exit event's timestamp");
                exits += 1;
            }
            _ => {}
        }
    }
    assert_eq!(exits, 15, "fib(5) makes 15 calls");
    assert!(open.is_empty());
}

#[ktest]
fn max_graph_depth_limits_the_tree() {
    tracer_setup("*::fib", "", "2");
    fib(black_box(4));
    let events = graph_events();
    tracer_cleanup();
    assert_eq!(names(&events).len(), 3, "fib(4), fib(3), fib(2) at depths 0 and 1");
    assert_eq!(events.len(), 6);
}

#[ktest]
fn set_graph_function_and_set_graph_notrace() {
    tracer_setup("kernel::workload::fs::*", "*::fs::unlink", "0");
    crate::workload::fs::run();
    let events = graph_events();
    tracer_cleanup();
    let called = names(&events);
    assert_eq!(called.first(), Some(&"kernel::workload::fs::unlink"), "{called:?}");
    assert!(called.contains(&"kernel::workload::fs::walk"), "what unlink calls is traced: {called:?}");
    assert!(!called.contains(&"kernel::workload::fs::mkdir"), "nothing outside unlink: {called:?}");

    tracer_setup("kernel::workload::fs::*", "", "0");
    tracefs::write("set_graph_notrace", "*::fs::lookup", FilterMode::Replace).unwrap();
    crate::workload::fs::run();
    let events = graph_events();
    tracer_cleanup();
    let called = names(&events);
    assert!(called.contains(&"kernel::workload::fs::mkdir"), "{called:?}");
    assert!(!called.contains(&"kernel::workload::fs::lookup"), "{called:?}");
    let walks = called.iter().filter(|n| n.ends_with("::walk")).count();
    let splits = called.iter().filter(|n| n.ends_with("::split")).count();
    assert!(walks > 0 && splits > 0, "walk and split still traced outside lookup: {called:?}");
    assert!(tracefs::write("set_graph_function", "no_such_fn*", FilterMode::Replace).is_err());
    assert!(tracefs::write("max_graph_depth", "deep", FilterMode::Replace).is_err());
}

// ---- rethook ----

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RethookSeen {
    calls: u64,
    ret_addr: usize,
    retval: u64,
    node_word: u64,
    full: bool,
    marked_ok: bool,
    /// A full save's pc (and lr, where there is one) hold the address
    /// returned to, as after a real return.
    returned_to_ok: bool,
}

static RETHOOK_SEEN: spin::Mutex<RethookSeen> = spin::Mutex::new(RethookSeen {
    calls: 0,
    ret_addr: 0,
    retval: 0,
    node_word: 0,
    full: false,
    marked_ok: false,
    returned_to_ok: false,
});

fn rethook_handler(node: &RethookNode, data: usize, ret_addr: usize, fregs: &mut FtraceRegs) {
    let mut seen = RETHOOK_SEEN.lock();
    seen.calls += 1;
    seen.ret_addr = ret_addr;
    seen.retval = fregs.return_value();
    seen.node_word = node.data()[0] ^ data as u64;
    seen.full = fregs.regs().is_some();
    seen.marked_ok =
        fregs.regs().is_some_and(|regs| MARKED_REGISTERS.iter().all(|(name, value)| regs.register(name) == Some(*value)));
    seen.returned_to_ok =
        fregs.regs().is_some_and(|regs| regs.ip() == ret_addr && regs.register("lr").is_none_or(|lr| lr == ret_addr as u64));
}

/// The rethook the entry ops below hooks with (set by each test).
static ACTIVE_RETHOOK: spin::Mutex<Option<Rethook>> = spin::Mutex::new(None);

extern "C" fn hook_with_rethook(ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let guard = ACTIVE_RETHOOK.lock();
    let Some(rethook) = guard.as_ref() else { return };
    if let Some(mut node) = rethook.try_get() {
        node.data_mut()[0] = ip as u64 ^ 0x1234;
        let _ = rethook.hook(node, fregs);
    }
}

static RETHOOK_ENTRY: FtraceOps = FtraceOps::new(hook_with_rethook, OpsFlags::RECURSION);

#[inline(never)]
extern "C" fn rethook_tracee() -> u64 {
    black_box(0xabcd)
}

#[inline(never)]
extern "C" fn marked_rethook_tracee() {
    black_box(0);
}

fn with_rethook(rethook: Rethook, functions: &[usize], body: impl FnOnce()) -> Rethook {
    *ACTIVE_RETHOOK.lock() = Some(rethook);
    ftrace::set_filter_ips(&RETHOOK_ENTRY, FilterKind::Filter, functions, FilterMode::Replace).unwrap();
    ftrace::register(&RETHOOK_ENTRY).unwrap();
    body();
    ftrace::unregister(&RETHOOK_ENTRY).unwrap();
    ACTIVE_RETHOOK.lock().take().unwrap()
}

#[ktest]
fn rethook_sparse_and_full_modes() {
    let f = address(rethook_tracee as extern "C" fn() -> u64);
    *RETHOOK_SEEN.lock() = RethookSeen::default();
    let rethook = with_rethook(Rethook::new(rethook_handler, 0x1234 ^ 0x55, 4, 2, RethookMode::Sparse), &[f], || {
        assert_eq!(rethook_tracee(), 0xabcd);
    });
    let seen = *RETHOOK_SEEN.lock();
    assert_eq!(seen.calls, 1);
    assert_eq!(seen.retval, 0xabcd);
    assert_eq!(seen.node_word, f as u64 ^ 0x55, "node data and private data");
    let caller = ftrace::symbols::name_of(seen.ret_addr).unwrap_or("?");
    assert!(caller.starts_with("kernel::tests::graph::rethook_sparse_and_full_modes"), "returns into {caller}");
    assert!(!seen.full, "sparse mode: no PtRegs");
    assert_eq!(rethook.free_nodes(), 4);
    drop(rethook);

    let m = address(marked_rethook_tracee as extern "C" fn());
    *RETHOOK_SEEN.lock() = RethookSeen::default();
    let rethook = with_rethook(Rethook::new(rethook_handler, 0, 4, 1, RethookMode::FullRegs), &[m], || {
        // SAFETY: `marked_rethook_tracee` is an `extern "C" fn()` that returns.
        assert_eq!(unsafe { call_with_marked_registers(marked_rethook_tracee) }, 0);
    });
    let seen = *RETHOOK_SEEN.lock();
    assert_eq!(seen.calls, 1);
    assert!(seen.full, "full mode: PtRegs at return");
    assert!(seen.marked_ok, "callee-saved registers at return are the caller's");
    assert!(seen.returned_to_ok, "pc (and lr) hold the address returned to");
    drop(rethook);
    assert_eq!(retstack::frames(), 0);
}

#[inline(never)]
fn nested_rethook_tracee(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    black_box(nested_rethook_tracee(black_box(n - 1))) + 1
}

#[ktest]
fn an_empty_rethook_pool_counts_misses() {
    let f = address(nested_rethook_tracee as fn(u64) -> u64);
    *RETHOOK_SEEN.lock() = RethookSeen::default();
    let rethook = with_rethook(Rethook::new(rethook_handler, 0, 2, 1, RethookMode::Sparse), &[f], || {
        assert_eq!(nested_rethook_tracee(black_box(4)), 4);
    });
    assert_eq!(RETHOOK_SEEN.lock().calls, 2, "two nodes: the outer two calls hooked");
    assert_eq!(rethook.missed(), 3, "the inner three counted as misses");
    assert_eq!((rethook.in_flight(), rethook.free_nodes()), (0, 2), "every node back in the pool");
}

/// What the in-flight tracee does to the rethook while it runs.
static IN_FLIGHT_ACTION: AtomicUsize = AtomicUsize::new(0);
const STOP: usize = 1;
const DROP: usize = 2;

#[inline(never)]
extern "C" fn stops_its_own_rethook() -> u64 {
    let guard = ACTIVE_RETHOOK.lock();
    let rethook = guard.as_ref().unwrap();
    assert_eq!(rethook.in_flight(), 1, "this call is in flight");
    match IN_FLIGHT_ACTION.load(Ordering::SeqCst) {
        STOP => rethook.stop(),
        _ => {}
    }
    drop(guard);
    if IN_FLIGHT_ACTION.load(Ordering::SeqCst) == DROP {
        drop(ACTIVE_RETHOOK.lock().take());
    }
    black_box(9)
}

#[ktest]
fn stopping_or_freeing_a_rethook_while_calls_are_in_flight_is_safe() {
    let f = address(stops_its_own_rethook as extern "C" fn() -> u64);
    *RETHOOK_SEEN.lock() = RethookSeen::default();
    IN_FLIGHT_ACTION.store(STOP, Ordering::SeqCst);
    let rethook = with_rethook(Rethook::new(rethook_handler, 0, 2, 1, RethookMode::Sparse), &[f], || {
        assert_eq!(stops_its_own_rethook(), 9);
    });
    assert_eq!(RETHOOK_SEEN.lock().calls, 0, "stopped: the handler did not run");
    assert!(!rethook.is_active());
    assert_eq!((rethook.in_flight(), rethook.free_nodes()), (0, 2), "the node came back");
    assert!(rethook.try_get().is_none(), "a stopped rethook hands out no nodes");
    drop(rethook);

    IN_FLIGHT_ACTION.store(DROP, Ordering::SeqCst);
    *ACTIVE_RETHOOK.lock() = Some(Rethook::new(rethook_handler, 0, 2, 1, RethookMode::Sparse));
    ftrace::set_filter_ips(&RETHOOK_ENTRY, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
    ftrace::register(&RETHOOK_ENTRY).unwrap();
    let heap_before = crate::heap::stats().used;
    assert_eq!(stops_its_own_rethook(), 9, "returned through a freed rethook's hook safely");
    ftrace::unregister(&RETHOOK_ENTRY).unwrap();
    assert!(ACTIVE_RETHOOK.lock().is_none());
    assert_eq!(RETHOOK_SEEN.lock().calls, 0);
    // The next rethook created frees the queued one.
    drop(Rethook::new(rethook_handler, 0, 1, 1, RethookMode::Sparse));
    assert!(crate::heap::stats().used < heap_before, "the dropped rethook's memory was freed");
    assert_eq!(retstack::frames(), 0);
}
