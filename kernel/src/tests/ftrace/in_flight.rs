//! Hooked calls in flight: calls that move to another CPU and sleep inside,
//! a task that exits inside hooked calls, and hooks taken away while
//! hundreds of calls sleep inside them. Every call is hooked at once by an
//! fprobe (entry, and exit with the entry's arguments), a rethook, a
//! kretprobe and a graph user, and checks its own result and stack.

use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fprobe::{EntryData, Fprobe, FprobeConfig, RegisteredFprobe, Target};
use ftrace::graph::fgraph::{EntryData as GraphData, FgraphEntry, FgraphOps, FgraphReturn};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags, PtRegs};
use kprobes::kretprobe::{Kretprobe, KretprobeConfig, RegisteredKretprobe};
use kprobes::Location;
use ktest_macros::ktest;
use rethook::{Rethook, RethookMode, RethookNode};

use crate::sched;

fn address<T: Copy>(f: T) -> usize {
    // SAFETY: only used on function pointers, which are pointer-sized.
    unsafe { core::mem::transmute_copy::<T, usize>(&f) }
}

fn expected(a: u64, b: u64) -> u64 {
    a.wrapping_mul(31) ^ b
}

// ---- the hooks: what each saw ----

static ENTRIES: AtomicU64 = AtomicU64::new(0);
static EXITS: AtomicU64 = AtomicU64::new(0);
static RETHOOK_RETURNS: AtomicU64 = AtomicU64::new(0);
static KRETPROBE_RETURNS: AtomicU64 = AtomicU64::new(0);
static GRAPH_RETURNS: AtomicU64 = AtomicU64::new(0);
/// Exits whose return value was not what the entry's arguments give.
static WRONG_EXITS: AtomicU64 = AtomicU64::new(0);

fn on_entry(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    ENTRIES.fetch_add(1, Ordering::SeqCst);
    false
}

fn on_exit(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    EXITS.fetch_add(1, Ordering::SeqCst);
    let (a, b) = (data.argument(0).unwrap_or(0), data.argument(1).unwrap_or(0));
    if fregs.return_value() != expected(a, b) {
        WRONG_EXITS.fetch_add(1, Ordering::SeqCst);
    }
}

fn on_rethook_return(_node: &RethookNode, _data: usize, _ret: usize, _fregs: &mut FtraceRegs) {
    RETHOOK_RETURNS.fetch_add(1, Ordering::SeqCst);
}

fn on_kretprobe_return(_rp: &Kretprobe, _ret: usize, _regs: &PtRegs, _data: &[u64]) {
    KRETPROBE_RETURNS.fetch_add(1, Ordering::SeqCst);
}

fn graph_entry(_gops: &FgraphOps, _call: &FgraphEntry, _data: &mut GraphData, _fregs: &mut FtraceRegs) -> bool {
    true
}

fn graph_return(_gops: &FgraphOps, _call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {
    GRAPH_RETURNS.fetch_add(1, Ordering::SeqCst);
}

static GRAPH: FgraphOps = FgraphOps::new(graph_entry, graph_return);

static RETHOOK: spin::Mutex<Option<Rethook>> = spin::Mutex::new(None);

extern "C" fn rethook_entry(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    if let Some(node) = RETHOOK.lock().as_ref().and_then(Rethook::try_get) {
        let _ = node.hook(fregs);
    }
}

static RETHOOK_OPS: FtraceOps = FtraceOps::new(rethook_entry, OpsFlags::RECURSION);

/// Every hook on `function`; `nodes`: how many calls the rethook and the
/// kretprobe can hold at once.
struct Hooks {
    fprobe: RegisteredFprobe,
    kretprobe: RegisteredKretprobe,
}

impl Hooks {
    fn attach(function: usize, nodes: usize) -> Hooks {
        let config = FprobeConfig {
            entry: Some(on_entry),
            exit: Some(on_exit),
            entry_data_words: 0,
            save_args: true,
            private: 0,
            free_private: None,
        };
        let fprobe = fprobe::register(config, Target::Addresses(&[function])).unwrap();
        *RETHOOK.lock() = Some(Rethook::new(on_rethook_return, 0, nodes, 1, RethookMode::Sparse));
        ftrace::set_filter_ips(&RETHOOK_OPS, FilterKind::Filter, &[function], FilterMode::Replace).unwrap();
        ftrace::register(&RETHOOK_OPS).unwrap();
        let config =
            KretprobeConfig { entry_handler: None, handler: on_kretprobe_return, data_words: 0, maxactive: nodes, private: 0 };
        let kretprobe = kprobes::register_kretprobe(&Location::Address(function), config).unwrap();
        ftrace::set_filter_ips(GRAPH.ops(), FilterKind::Filter, &[function], FilterMode::Replace).unwrap();
        GRAPH.register().unwrap();
        Hooks { fprobe, kretprobe }
    }

    /// Whether a hooked call of any hook has not returned (or been given
    /// back) yet.
    fn in_flight(&self) -> bool {
        self.fprobe.in_flight()
            || self.kretprobe.in_flight() != 0
            || GRAPH.in_flight()
            || RETHOOK.lock().as_ref().is_some_and(|rethook| rethook.in_flight() != 0)
    }

    /// Misses counted by every hook.
    fn missed(&self) -> u64 {
        self.fprobe.nmissed()
            + self.kretprobe.nmissed()
            + GRAPH.missed()
            + RETHOOK.lock().as_ref().map_or(0, |rethook| rethook.missed())
    }

    fn detach(self) {
        GRAPH.unregister().unwrap();
        self.kretprobe.unregister();
        ftrace::unregister(&RETHOOK_OPS).unwrap();
        self.fprobe.unregister().map_err(|(_, error)| error).unwrap();
        ftrace::deferred::synchronize();
        drop(RETHOOK.lock().take());
    }
}

fn counts() -> [u64; 5] {
    [&ENTRIES, &EXITS, &RETHOOK_RETURNS, &KRETPROBE_RETURNS, &GRAPH_RETURNS].map(|count| count.load(Ordering::SeqCst))
}

fn added(before: [u64; 5]) -> [u64; 5] {
    let now = counts();
    core::array::from_fn(|i| now[i] - before[i])
}

/// An online CPU other than this one.
fn another_cpu() -> usize {
    let me = arch::cpu::id();
    (1..arch::MAX_CPUS).map(|i| (me + i) % arch::MAX_CPUS).find(|&cpu| arch::percpu::is_online(cpu)).unwrap_or(me)
}

/// The heap in use once it stops shrinking: a finished task's last
/// reference (with its shadow stack) goes a moment after its joiner
/// returned, and what a grace period retires after that.
fn settled_heap_used() -> usize {
    let mut used = usize::MAX;
    for _ in 0..50 {
        ftrace::deferred::reclaim();
        let now = crate::heap::stats().used;
        if now >= used {
            return now;
        }
        used = now;
        sched::sleep_ms(2);
    }
    used
}

// ---- a call that moves and sleeps ----

static MOVED: AtomicU64 = AtomicU64::new(0);

/// Moves its task to another CPU and sleeps there, inside the hooked call.
#[inline(never)]
extern "C" fn moves_and_sleeps(a: u64, b: u64) -> u64 {
    let before = arch::cpu::id();
    sched::set_affinity(1 << another_cpu());
    sched::sleep_ms(1);
    if arch::cpu::id() != before {
        MOVED.fetch_add(1, Ordering::SeqCst);
    }
    sched::set_affinity(u64::MAX);
    black_box(expected(a, b))
}

/// Calls that move to another CPU and sleep inside, from several tasks at
/// once: each gets its result, its stack pointer back, and every hook saw
/// every call with the right arguments and result.
#[ktest]
fn hooked_calls_that_move_and_sleep_inside_return_right() {
    const TASKS: u64 = 8;
    const CALLS: u64 = 12;
    let hooks = Hooks::attach(address(moves_and_sleeps as extern "C" fn(u64, u64) -> u64), 64);
    let (before, missed, moved) = (counts(), hooks.missed(), MOVED.load(Ordering::SeqCst));
    WRONG_EXITS.store(0, Ordering::SeqCst);
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            sched::spawn("in-flight/mover", move || {
                let mut bad = 0;
                for call in 0..CALLS {
                    let (a, b) = (task * 1000 + call, call * 7);
                    let sp = arch::cpu::stack_pointer();
                    let result = moves_and_sleeps(black_box(a), black_box(b));
                    bad += u64::from(result != expected(a, b) || arch::cpu::stack_pointer() != sp);
                }
                bad
            })
            .unwrap()
        })
        .collect();
    let bad: u64 = tasks.into_iter().map(|task| task.join()).sum();
    let seen = added(before);
    let missed = hooks.missed() - missed;
    let in_flight = hooks.in_flight();
    hooks.detach();
    assert_eq!(bad, 0, "calls that returned a wrong result or stack pointer");
    assert_eq!(seen, [TASKS * CALLS; 5], "every hook saw every call (entries, exits, rethook, kretprobe, graph)");
    assert_eq!((missed, in_flight), (0, false), "none missed, none left in flight");
    assert_eq!(WRONG_EXITS.load(Ordering::SeqCst), 0, "exits saw the entry's arguments and the result");
    if arch::smp::online() > 1 {
        assert_eq!(MOVED.load(Ordering::SeqCst) - moved, TASKS * CALLS, "every call moved to another CPU inside");
    }
}

// ---- a task that exits inside hooked calls ----

/// Hooked `depth + 1` deep, then ends its task from inside.
#[inline(never)]
extern "C" fn exits_inside(depth: u64, b: u64) -> u64 {
    if depth == 0 {
        sched::exit_now(0x77);
    }
    black_box(exits_inside(black_box(depth - 1), b))
}

/// A task that ends inside five hooked calls: its task's end gives every
/// hook its calls back (none counted missed, no exit handler run: they never
/// return), and the rethook's and the kretprobe's nodes all come home.
#[ktest]
fn a_task_that_exits_inside_hooked_calls_gives_them_back() {
    let hooks = Hooks::attach(address(exits_inside as extern "C" fn(u64, u64) -> u64), 16);
    let (before, missed) = (counts(), hooks.missed());
    let task = sched::spawn("in-flight/exits", || exits_inside(black_box(4), black_box(9))).unwrap();
    assert_eq!(task.join(), 0x77, "the task ended from inside");
    let deadline = arch::time::ticks() + arch::time::HZ;
    while hooks.in_flight() && arch::time::ticks() < deadline {
        sched::sleep_ms(1);
    }
    let seen = added(before);
    let (missed, in_flight) = (hooks.missed() - missed, hooks.in_flight());
    let free_nodes = RETHOOK.lock().as_ref().map(|rethook| rethook.free_nodes());
    hooks.detach();
    assert_eq!(seen, [5, 0, 0, 0, 0], "five entries, and no return ever ran");
    assert!(!in_flight, "the dead task's calls were given back");
    assert_eq!(missed, 0, "a call that never returns is not a miss");
    assert_eq!(free_nodes, Some(16), "every rethook node came back");
}

// ---- hooks taken away under hundreds of sleeping calls ----

static GATE_OPEN: AtomicBool = AtomicBool::new(false);
static ASLEEP: AtomicU64 = AtomicU64::new(0);

/// Hooked `depth + 1` deep; the innermost call sleeps until the gate opens.
#[inline(never)]
extern "C" fn sleeps_deep(depth: u64, b: u64) -> u64 {
    if depth == 0 {
        ASLEEP.fetch_add(1, Ordering::SeqCst);
        while !GATE_OPEN.load(Ordering::SeqCst) {
            sched::sleep_ms(1);
        }
        return black_box(expected(0, b));
    }
    let inner = sleeps_deep(black_box(depth - 1), b);
    black_box(expected(depth, b) ^ inner ^ expected(depth - 1, b))
}

/// 40 tasks, each five hooked calls deep, asleep in the innermost: the
/// fprobe and the rethook's ops are unregistered while all 200 calls sleep
/// inside them. Each call still returns right, through its own frame, and
/// its exit still reaches the fprobe and the rethook; then everything the
/// hooks held is freed.
#[ktest]
fn hooks_unregistered_while_hundreds_of_calls_sleep_inside_them() {
    const TASKS: u64 = 40;
    const DEPTH: u64 = 5;
    let function = address(sleeps_deep as extern "C" fn(u64, u64) -> u64);
    // What is allocated once (the tables a first registration makes).
    Hooks::attach(function, 8).detach();
    ftrace::deferred::reclaim();
    let heap = crate::heap::stats().used;
    let hooks = Hooks::attach(function, (TASKS * DEPTH) as usize);
    let (before, missed) = (counts(), hooks.missed());
    WRONG_EXITS.store(0, Ordering::SeqCst);
    GATE_OPEN.store(false, Ordering::SeqCst);
    ASLEEP.store(0, Ordering::SeqCst);
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            sched::spawn("in-flight/sleeper", move || {
                let sp = arch::cpu::stack_pointer();
                let result = sleeps_deep(black_box(DEPTH - 1), black_box(task));
                u64::from(result == expected(DEPTH - 1, task) && arch::cpu::stack_pointer() == sp)
            })
            .unwrap()
        })
        .collect();
    let deadline = arch::time::ticks() + 20 * arch::time::HZ;
    while ASLEEP.load(Ordering::SeqCst) < TASKS && arch::time::ticks() < deadline {
        sched::sleep_ms(2);
    }
    assert_eq!(ASLEEP.load(Ordering::SeqCst), TASKS, "every task asleep five calls deep");
    let Hooks { fprobe, kretprobe } = hooks;
    // Taken away under the sleeping calls.
    ftrace::unregister(&RETHOOK_OPS).unwrap();
    let fprobe_missed = fprobe.nmissed();
    fprobe.unregister().map_err(|(_, error)| error).unwrap();
    GATE_OPEN.store(true, Ordering::SeqCst);
    let right: u64 = tasks.into_iter().map(|task| task.join()).sum();
    let seen = added(before);
    let others_missed = kretprobe.nmissed() + GRAPH.missed();
    GRAPH.unregister().unwrap();
    kretprobe.unregister();
    ftrace::deferred::synchronize();
    let rethook = RETHOOK.lock().take().unwrap();
    let (rethook_missed, rethook_in_flight) = (rethook.missed(), rethook.in_flight());
    drop(rethook);
    let after = settled_heap_used();
    let calls = TASKS * DEPTH;
    assert_eq!(right, TASKS, "every task got its result and its stack pointer back");
    assert_eq!(seen, [calls; 5], "every call's entry, and its exit in every hook, even those unregistered");
    assert_eq!(fprobe_missed + others_missed + rethook_missed - missed, 0, "none missed");
    assert_eq!(rethook_in_flight, 0, "every rethook node came back");
    assert_eq!(WRONG_EXITS.load(Ordering::SeqCst), 0, "exits saw the entry's arguments and the result");
    assert!(after <= heap + 16 * 1024, "the hooks were freed once their calls returned: {heap} -> {after} bytes");
}
