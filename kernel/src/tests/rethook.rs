//! rethook: sparse and full return saves, an empty pool, stopping or
//! freeing a rethook while calls are in flight, and returns of calls hooked
//! inside callbacks.

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use arch::selftest::{call_with_marked_registers, MARKED_REGISTERS};
use ftrace::graph::retstack;
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags};
use ktest_macros::ktest;
use rethook::{Rethook, RethookMode, RethookNode};

use crate::tests::ftrace::graph::address;

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
        let _ = node.hook(fregs);
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
    let caller = ftrace::symbols::kernel::name_of(seen.ret_addr).unwrap_or("?");
    assert!(caller.starts_with("kernel::tests::rethook::rethook_sparse_and_full_modes"), "returns into {caller}");
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

// ---- a node belongs to its rethook ----

#[ktest]
fn a_node_taken_and_dropped_unhooked_goes_back_to_its_pool() {
    let rethook = Rethook::new(rethook_handler, 0, 2, 1, RethookMode::Sparse);
    let node = rethook.try_get().expect("a free node");
    assert_eq!((rethook.free_nodes(), rethook.in_flight()), (1, 1));
    drop(node);
    assert_eq!((rethook.free_nodes(), rethook.in_flight()), (2, 0), "a node dropped unhooked goes back");
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
