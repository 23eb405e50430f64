//! The return hook as function-graph users see it: entry data, depth,
//! several users on one call, overruns, backtraces and interrupts inside
//! hooked calls, and what a corrupt frame does.

use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ftrace::graph::fgraph::{EntryData, FgraphEntry, FgraphOps, FgraphReturn};
use ftrace::graph::retstack::{self, Recorded};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags};
use ktest_macros::ktest;

use crate::tests::tracers::function_graph::{graph_events, tracer_cleanup, tracer_setup};
use crate::tracefs;
use crate::workload::fib;

pub(crate) fn address<T: Copy>(f: T) -> usize {
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
    // SAFETY: only set on `skippable`, whose body only counts its runs (the
    // test checks it did not run) and whose caller takes any u64.
    unsafe {
        fregs.set_return_value(0x5eed);
        fregs.override_function_with_return();
    }
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
    assert!(text.contains(" kernel::tests::ftrace::graph::hooked_inner+0x"), "{text}");
    assert!(text.contains(" kernel::tests::ftrace::graph::hooked_outer+0x"), "{text}");
    assert!(text.contains(" kernel::tests::ftrace::graph::backtraces_inside_hooked_calls_show_the_real_callers+0x"), "{text}");
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

/// Waits until `ticks` timer interrupts have landed inside this hooked call
/// (ten times as many ticks at most). Only the ticks that find the test task
/// running count: one that comes while this CPU runs another task (a
/// deferred-work thread, say, which a busy host makes late) lands elsewhere.
#[inline(never)]
fn spin_for_ticks(ticks: u64) -> u64 {
    IN_SPIN.store(true, Ordering::SeqCst);
    let (start, traced) = (arch::time::ticks(), TICK_ENTRIES.load(Ordering::SeqCst));
    while TICK_ENTRIES.load(Ordering::SeqCst) < traced + ticks && arch::time::ticks() < start + 10 * ticks {
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

// ---- returns after every kind of call ----

#[inline(never)]
fn called_every_way(x: u64) -> u64 {
    black_box(x * 3)
}

trait Triple {
    fn triple(&self, x: u64) -> u64;
}

struct ByTrait;

impl Triple for ByTrait {
    #[inline(never)]
    fn triple(&self, x: u64) -> u64 {
        called_every_way(x)
    }
}

static CALLED_EVERY_WAY: fn(u64) -> u64 = called_every_way;
static EVERY_WAY_GRAPH: FgraphOps = FgraphOps::new(accept, count_return);

/// The return hook answers only return addresses right after a call: a
/// direct call's, and an indirect call's of every form the compiler emits
/// (through a register, through memory, a trait object's method), each
/// returning right through the hook.
#[ktest]
fn hooked_calls_return_right_after_every_kind_of_call() {
    let f = address(called_every_way as fn(u64) -> u64);
    let method = address(<ByTrait as Triple>::triple as fn(&ByTrait, u64) -> u64);
    graph_only(&EVERY_WAY_GRAPH, &[f, method]);
    let returns = DEEP_RETURNS.load(Ordering::SeqCst);
    let in_register: fn(u64) -> u64 = black_box(called_every_way);
    let object: &dyn Triple = black_box(&ByTrait);
    let results = [
        called_every_way(black_box(1)),
        in_register(black_box(2)),
        (*black_box(&CALLED_EVERY_WAY))(black_box(3)),
        CALLED_EVERY_WAY(black_box(4)),
        object.triple(black_box(5)),
    ];
    EVERY_WAY_GRAPH.unregister().unwrap();
    assert_eq!(results, [3, 6, 9, 12, 15]);
    assert_eq!(DEEP_RETURNS.load(Ordering::SeqCst) - returns, 6, "every hooked call returned through the hook");
    assert!(!retstack::is_stopped());
}

// ---- the frame check ----

/// What `breaks_its_frame_record` corrupts.
static CORRUPT: AtomicUsize = AtomicUsize::new(0);

#[inline(never)]
fn breaks_its_frame_record() -> u64 {
    let field = match CORRUPT.load(Ordering::SeqCst) {
        0 => Recorded::FramePointer,
        1 => Recorded::StackPointer,
        _ => Recorded::ReturnAddress,
    };
    retstack::corrupt_innermost(field);
    black_box(77)
}

static FP_GRAPH: FgraphOps = FgraphOps::new(accept, count_return);

#[ktest(should_panic = "return hook stopped: the frame does not match the registers", after_panic = tracer_cleanup)]
fn a_frame_pointer_mismatch_stops_the_hook_with_a_report() {
    // Through the function_graph tracer, with the function in
    // set_graph_notrace: its entry leaves a marker that only its return
    // would clear. The stopped hook must clear it (see the test after).
    CORRUPT.store(0, Ordering::SeqCst);
    tracer_setup("kernel::tests::ftrace::graph::breaks_its_frame_record", "", "0");
    tracefs::write("set_graph_notrace", "kernel::tests::ftrace::graph::breaks_its_frame_record", FilterMode::Replace).unwrap();
    breaks_its_frame_record();
    unreachable!("returned through a frame that does not match");
}

/// Sibling calls from one caller share a frame pointer: the stack pointer
/// tells a stale frame apart.
#[ktest(should_panic = "return hook stopped: the frame does not match the registers", after_panic = unregister_fp_graph)]
fn a_stack_pointer_mismatch_stops_the_hook_with_a_report() {
    CORRUPT.store(1, Ordering::SeqCst);
    graph_only(&FP_GRAPH, &[address(breaks_its_frame_record as fn() -> u64)]);
    breaks_its_frame_record();
    unreachable!("returned through a frame that does not match");
}

/// A return address that is not right after a call (a shadow-stack word
/// gone wrong) stops the hook with a report, never a jump there.
#[ktest(should_panic = "return hook stopped: the return address is not right after a call", after_panic = unregister_fp_graph)]
fn a_return_address_after_no_call_stops_the_hook_with_a_report() {
    CORRUPT.store(2, Ordering::SeqCst);
    graph_only(&FP_GRAPH, &[address(breaks_its_frame_record as fn() -> u64)]);
    breaks_its_frame_record();
    unreachable!("returned to an address after no call");
}

/// What the panic leaves of `a_stack_pointer_mismatch_...`.
fn unregister_fp_graph() {
    // Not registered if the test panicked before it registered.
    let _ = FP_GRAPH.unregister();
}

/// In the whole suite this runs after the three tests above (the runner sorts
/// by name, `_` after letters), whose panics leave the hook stopped and
/// frames and a notrace marker abandoned: the test framework restarted the
/// hook, and nothing stays suppressed. (Alone, it checks a hook that never
/// stopped.)
#[ktest]
fn a_stopped_hook_restarts_with_every_call_hooked_again() {
    assert!(!retstack::is_stopped(), "restarted");
    assert_eq!(retstack::frames(), 0);
    tracer_setup("kernel::workload::fib", "", "0");
    fib(black_box(3));
    let events = graph_events();
    tracer_cleanup();
    let exits = events.iter().filter(|r| matches!(r, trace::events::record::Event::GraphExit(_))).count();
    assert_eq!(exits, 5, "fib(3) traced whole: no stale notrace marker");
}
