//! The concurrent kernel: tasks on every CPU, and tracing that follows tasks
//! through sleeps, preemption and migration.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use fprobe::{EntryData, Fprobe, FprobeConfig, Target};
use ftrace::graph::fgraph::{EntryData as GraphData, FgraphEntry, FgraphOps, FgraphReturn};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags, PtRegs};
use kprobes::kretprobe::{Kretprobe, KretprobeConfig};
use kprobes::{register_kretprobe, Location};
use ktest_macros::ktest;
use trace::events::record::Event;

use crate::sched;
use crate::tracefs;

fn address<T: Copy>(f: T) -> usize {
    // SAFETY: only used on function pointers, which are pointer-sized.
    unsafe { core::mem::transmute_copy::<T, usize>(&f) }
}

/// The affinity of CPU `cpu`, which must be online (the suite runs with
/// four CPUs; a task pinned to a CPU that is not up would never run).
fn cpu_bit(cpu: usize) -> u64 {
    assert!(arch::percpu::is_online(cpu), "CPU {cpu} is not online (run the suite with --smp 4)");
    1 << cpu
}

#[ktest]
fn the_kernel_runs_on_several_cpus() {
    assert!(arch::smp::online() >= 2, "the suite runs with several CPUs");
    let handles: Vec<_> = (0..8)
        .map(|i| {
            sched::spawn("spread", move || {
                // Busy for 10 ms: long enough for every CPU to take work.
                let (mut seen, end) = (0u64, arch::time::ticks() + 10);
                while arch::time::ticks() < end {
                    seen |= 1 << arch::cpu::id();
                    core::hint::spin_loop();
                }
                seen | (i << 32)
            })
            .unwrap()
        })
        .collect();
    let cpus = handles.into_iter().map(|handle| handle.join() & 0xffff_ffff).fold(0, |all, seen| all | seen);
    assert!(cpus.count_ones() >= 2, "tasks ran on CPUs {cpus:#b}");
}

#[ktest]
fn join_returns_each_tasks_result_and_sleep_sleeps() {
    let start = arch::time::ticks();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            sched::spawn("sleeper", move || {
                sched::sleep_ms(5);
                i * 10
            })
            .unwrap()
        })
        .collect();
    let results: Vec<u64> = handles.into_iter().map(|handle| handle.join()).collect();
    assert_eq!(results, [0, 10, 20, 30]);
    assert!(arch::time::ticks() >= start + 5, "slept at least 5 ms");
}

// ---- a hooked call that sleeps and migrates ----

static MIGRATE_GRAPH: FgraphOps = FgraphOps::new(migrate_entry, migrate_return).with_data_words(1);
static MIGRATE_RETURN: AtomicU64 = AtomicU64::new(0);
static MIGRATE_NS: AtomicU64 = AtomicU64::new(0);
static BUSY_ENTRIES: AtomicU64 = AtomicU64::new(0);
static BUSY_RETURNS: AtomicU64 = AtomicU64::new(0);

fn migrate_entry(_gops: &FgraphOps, call: &FgraphEntry, data: &mut GraphData, _fregs: &mut FtraceRegs) -> bool {
    if call.func == address(busy_tracee as fn(u64) -> u64) {
        BUSY_ENTRIES.fetch_add(1, Ordering::SeqCst);
    }
    data.reserve(1).unwrap()[0] = ring_buffer::clock::now_ns();
    true
}

fn migrate_return(_gops: &FgraphOps, call: &FgraphReturn, data: &[u64], _fregs: &mut FtraceRegs) {
    if call.func == address(migrating_tracee as fn(u64) -> u64) {
        MIGRATE_RETURN.store(call.retval, Ordering::SeqCst);
        MIGRATE_NS.store(ring_buffer::clock::now_ns() - data[0], Ordering::SeqCst);
    } else {
        BUSY_RETURNS.fetch_add(1, Ordering::SeqCst);
    }
}

/// How long `migrating_tracee`'s sleep took, by the tracer's clock.
static SLEPT_NS: AtomicU64 = AtomicU64::new(0);

/// Sleeps on CPU 1, wakes up on CPU 2: returns (where it started << 8 |
/// where it ended) in its upper bits and `x * 3` below.
#[inline(never)]
fn migrating_tracee(x: u64) -> u64 {
    let before = arch::cpu::id() as u64;
    sched::set_affinity(cpu_bit(2));
    let start = ring_buffer::clock::now_ns();
    sched::sleep_ms(5);
    SLEPT_NS.store(ring_buffer::clock::now_ns() - start, Ordering::SeqCst);
    let after = arch::cpu::id() as u64;
    (before << 40) | (after << 32) | black_box(x * 3)
}

#[inline(never)]
fn busy_tracee(x: u64) -> u64 {
    black_box(x + 1)
}

#[ktest]
fn a_hooked_call_that_sleeps_and_migrates_returns_right() {
    let migrating = address(migrating_tracee as fn(u64) -> u64);
    let busy = address(busy_tracee as fn(u64) -> u64);
    ftrace::set_filter_ips(MIGRATE_GRAPH.ops(), FilterKind::Filter, &[migrating, busy], FilterMode::Replace).unwrap();
    MIGRATE_GRAPH.register().unwrap();
    let (entries, returns) = (BUSY_ENTRIES.load(Ordering::SeqCst), BUSY_RETURNS.load(Ordering::SeqCst));
    let sleeper = sched::spawn_on("migrant", cpu_bit(1), || migrating_tracee(black_box(14))).unwrap();
    // Meanwhile, hooked calls on the CPU the sleeper left.
    let busy_task = sched::spawn_on("busy", cpu_bit(1), || (0..500).map(|i| busy_tracee(black_box(i))).sum()).unwrap();
    let result = sleeper.join();
    let busy_sum = busy_task.join();
    MIGRATE_GRAPH.unregister().unwrap();
    assert_eq!(result & 0xffff_ffff, 42, "the caller got the real return value");
    assert_eq!((result >> 40, (result >> 32) & 0xff), (1, 2), "slept on CPU 1, resumed on CPU 2");
    assert_eq!(MIGRATE_RETURN.load(Ordering::SeqCst), result, "the return callback saw the same value");
    let ns = MIGRATE_NS.load(Ordering::SeqCst);
    // By the same clock (ticks can come in bursts under a loaded host, so
    // 5 ms of ticks is not always 5 ms of the tracer's clock).
    let slept = SLEPT_NS.load(Ordering::SeqCst);
    assert!(slept > 0 && ns >= slept, "its duration spans the sleep: {ns} ns, the sleep {slept} ns");
    assert_eq!(busy_sum, (1..=500).sum::<u64>());
    assert_eq!(BUSY_ENTRIES.load(Ordering::SeqCst) - entries, 500);
    assert_eq!(BUSY_RETURNS.load(Ordering::SeqCst) - returns, 500, "every call on the left CPU returned through its own frame");
}

// ---- a callback preempted mid-way ----

static B_DONE: AtomicBool = AtomicBool::new(false);
static PREEMPTED_INSIDE: AtomicBool = AtomicBool::new(false);
static FAST_CALLS: AtomicU64 = AtomicU64::new(0);

/// Spins, inside its callback, until the other task on this CPU finished
/// (which it can only do if this callback was preempted), or 2 s.
extern "C" fn slow_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    let deadline = arch::time::ticks() + 2000;
    while !B_DONE.load(Ordering::SeqCst) && arch::time::ticks() < deadline {
        core::hint::spin_loop();
    }
    PREEMPTED_INSIDE.store(B_DONE.load(Ordering::SeqCst), Ordering::SeqCst);
}

extern "C" fn fast_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    FAST_CALLS.fetch_add(1, Ordering::SeqCst);
}

static SLOW_OPS: FtraceOps = FtraceOps::new(slow_callback, OpsFlags::RECURSION);
static FAST_OPS: FtraceOps = FtraceOps::new(fast_callback, OpsFlags::RECURSION);

#[inline(never)]
fn slow_tracee() -> u64 {
    black_box(1)
}

#[inline(never)]
fn fast_tracee(x: u64) -> u64 {
    black_box(x)
}

#[ktest]
fn a_preempted_callback_does_not_stop_other_tasks_events() {
    let slow = address(slow_tracee as fn() -> u64);
    let fast = address(fast_tracee as fn(u64) -> u64);
    ftrace::set_filter_ips(&SLOW_OPS, FilterKind::Filter, &[slow], FilterMode::Replace).unwrap();
    ftrace::set_filter_ips(&FAST_OPS, FilterKind::Filter, &[fast], FilterMode::Replace).unwrap();
    ftrace::register(&SLOW_OPS).unwrap();
    ftrace::register(&FAST_OPS).unwrap();
    B_DONE.store(false, Ordering::SeqCst);
    let (calls, missed) = (FAST_CALLS.load(Ordering::SeqCst), FAST_OPS.missed());
    // Both on CPU 3: B runs only when A is preempted inside its callback.
    let a = sched::spawn_on("slow", cpu_bit(3), slow_tracee).unwrap();
    let b = sched::spawn_on("fast", cpu_bit(3), || {
        let sum = (0..100).map(|i| fast_tracee(black_box(i))).sum();
        B_DONE.store(true, Ordering::SeqCst);
        sum
    })
    .unwrap();
    a.join();
    assert_eq!(b.join(), (0..100).sum::<u64>());
    ftrace::unregister(&FAST_OPS).unwrap();
    ftrace::unregister(&SLOW_OPS).unwrap();
    assert!(PREEMPTED_INSIDE.load(Ordering::SeqCst), "the other task ran while the callback was preempted");
    assert_eq!(FAST_CALLS.load(Ordering::SeqCst) - calls, 100, "every call of the other task was traced");
    assert_eq!(FAST_OPS.missed() - missed, 0, "none mistaken for recursion");
}

// ---- run par under function_graph ----

#[ktest]
fn run_par_under_function_graph_gives_a_balanced_tree_per_task() {
    tracefs::write("set_ftrace_filter", "fib", FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function_graph", FilterMode::Replace).unwrap();
    // Each task on a CPU of its own turn: the trees must come from several
    // CPUs, which the scheduler alone does not promise (on a loaded host it
    // once ran all eight on CPU 1).
    let cpus_online = arch::smp::online();
    let output = crate::workload::run_parallel_on(8, |index| 1 << (index % cpus_online), "fib", &["12"]).unwrap();
    let snapshots = trace::array::instances::top().buffer().snapshot_all();
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    tracefs::write("set_ftrace_filter", "", FilterMode::Replace).unwrap();
    assert_eq!(output.lines().filter(|line| line.ends_with("fib(12) = 144")).count(), 8, "{output}");
    // Replay each task's events: every exit closes its last open entry.
    let mut open: BTreeMap<i32, Vec<(u64, i32)>> = BTreeMap::new();
    let mut calls: BTreeMap<i32, usize> = BTreeMap::new();
    let mut cpus = 0u64;
    for (_, cpu, payload) in trace::output::pipe::merged(&snapshots).expect("room to list the events") {
        match Event::decode(payload) {
            Some(Event::GraphEntry(entry)) => {
                open.entry(entry.common.pid).or_default().push((entry.func, entry.depth));
                cpus |= 1 << cpu;
            }
            Some(Event::GraphExit(exit)) => {
                let top = open.entry(exit.common.pid).or_default().pop();
                assert_eq!(top, Some((exit.func, exit.depth)), "pid {}: an exit closes its entry", exit.common.pid);
                *calls.entry(exit.common.pid).or_default() += 1;
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "every task's tree is closed");
    assert_eq!(calls.len(), 8, "eight tasks: {calls:?}");
    assert!(calls.values().all(|&n| n == 465), "fib(12) makes 465 calls in each: {calls:?}");
    assert_eq!(cpus.count_ones() as usize, cpus_online.min(8), "events from every CPU a task was placed on: {cpus:#b}");
}

// ---- unregistering while a call sleeps ----

static EXITS_SEEN: AtomicUsize = AtomicUsize::new(0);

fn count_exit(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) {
    EXITS_SEEN.fetch_add(1, Ordering::SeqCst);
}

/// A probe that counts exits only.
fn exit_counting() -> FprobeConfig {
    FprobeConfig { entry: None, exit: Some(count_exit), entry_data_words: 0, save_args: false, private: 0, free_private: None }
}

static SLEEPING: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn sleeps_inside(x: u64) -> u64 {
    SLEEPING.store(true, Ordering::SeqCst);
    sched::sleep_ms(20);
    black_box(x + 1)
}

#[ktest]
fn an_fprobe_unregistered_while_a_call_sleeps_in_it_outlives_that_call() {
    let f = address(sleeps_inside as fn(u64) -> u64);
    let config = exit_counting();
    // Warm up what is allocated once.
    drop(fprobe::register(config, Target::Addresses(&[f])).unwrap());
    ftrace::deferred::reclaim();
    let heap = crate::heap::stats().used;
    let probe = fprobe::register(config, Target::Addresses(&[f])).unwrap();
    SLEEPING.store(false, Ordering::SeqCst);
    let task = sched::spawn("in-flight", || sleeps_inside(black_box(1))).unwrap();
    while !SLEEPING.load(Ordering::SeqCst) {
        sched::yield_now();
    }
    assert!(probe.in_flight(), "the sleeping call is hooked");
    let exits = EXITS_SEEN.load(Ordering::SeqCst);
    probe.unregister().map_err(|(_, error)| error).unwrap();
    ftrace::deferred::reclaim();
    assert_eq!(task.join(), 2, "the sleeping call returned to its caller");
    assert_eq!(EXITS_SEEN.load(Ordering::SeqCst) - exits, 1, "its exit still reached the probe");
    ftrace::deferred::reclaim();
    let after = crate::heap::stats().used;
    assert!(after <= heap + 512, "the probe was freed once the call returned: {heap} -> {after} bytes");
}

fn never_returns(_rp: &Kretprobe, _ret_addr: usize, _regs: &PtRegs, _data: &[u64]) {}

fn hook_every_call(_gops: &FgraphOps, _call: &FgraphEntry, _data: &mut GraphData, _fregs: &mut FtraceRegs) -> bool {
    true
}

fn ignore_return(_gops: &FgraphOps, _call: &FgraphReturn, _data: &[u64], _fregs: &mut FtraceRegs) {}

static EXIT_GRAPH: FgraphOps = FgraphOps::new(hook_every_call, ignore_return);

#[ktest]
fn an_exited_task_gives_back_the_calls_it_never_returns_from() {
    // A task's `exit` never returns: hooked, its frame outlives the task.
    // Releasing the task gives it back, as Linux flushes a dead task's
    // return hooks, so nothing is held for ever; and, as in Linux, a call
    // that never returns is not a miss (`kprobe_profile` would count one per
    // exited task). One frame with an fprobe's, a kretprobe's and a graph
    // user's entry.
    const EXIT: &str = "kernel::sched::exit";
    let probe = fprobe::register(exit_counting(), Target::Symbols(&[EXIT])).unwrap();
    let config = KretprobeConfig { entry_handler: None, handler: never_returns, data_words: 0, maxactive: 4, private: 0 };
    let kretprobe = register_kretprobe(&Location::parse(EXIT).unwrap(), config).unwrap();
    ftrace::set_filter(EXIT_GRAPH.ops(), FilterKind::Filter, EXIT, FilterMode::Replace).unwrap();
    EXIT_GRAPH.register().unwrap();
    let missed = (probe.nmissed(), kretprobe.nmissed(), EXIT_GRAPH.missed());
    assert_eq!(sched::spawn("exits-hooked", || 5).unwrap().join(), 5);
    let deadline = arch::time::ticks() + arch::time::HZ;
    while (probe.in_flight() || kretprobe.in_flight() != 0 || EXIT_GRAPH.in_flight()) && arch::time::ticks() < deadline {
        sched::sleep_ms(1);
    }
    EXIT_GRAPH.unregister().unwrap();
    assert!(!probe.in_flight(), "the dead task's hooked exit() gave back the fprobe's reference");
    assert_eq!(kretprobe.in_flight(), 0, "and the kretprobe's node");
    assert!(!EXIT_GRAPH.in_flight(), "and the graph user's call");
    assert_eq!((probe.nmissed(), kretprobe.nmissed(), EXIT_GRAPH.missed()), missed, "none of them counted a miss");
    drop(kretprobe);
    drop(probe);
}

// ---- patching a site other CPUs are running ----

static HAMMER_STOP: AtomicBool = AtomicBool::new(false);
static HAMMER_CALLS: AtomicU64 = AtomicU64::new(0);
static HAMMER_CALLBACKS: AtomicU64 = AtomicU64::new(0);
static HAMMER_BAD: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn hammered(x: u64) -> u64 {
    black_box(x.wrapping_mul(7).wrapping_add(3))
}

/// Counts calls, and checks the argument is one a worker passes (its CPU in
/// the upper half: 1 to 3).
extern "C" fn hammer_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    HAMMER_CALLBACKS.fetch_add(1, Ordering::Relaxed);
    if !matches!(fregs.argument(0).map(|x| x >> 32), Some(1..=3)) {
        HAMMER_BAD.fetch_add(1, Ordering::Relaxed);
    }
}

static HAMMER_ARGS: FtraceOps = FtraceOps::new(hammer_callback, OpsFlags::RECURSION);
static HAMMER_REGS: FtraceOps = FtraceOps::new(hammer_callback, OpsFlags::RECURSION.union(OpsFlags::SAVE_REGS));

#[ktest]
fn a_site_patched_ten_thousand_times_while_three_cpus_run_it() {
    let f = address(hammered as fn(u64) -> u64);
    for ops in [&HAMMER_ARGS, &HAMMER_REGS] {
        ftrace::set_filter_ips(ops, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
    }
    HAMMER_STOP.store(false, Ordering::SeqCst);
    let workers: Vec<_> = (1..=3)
        .map(|cpu| {
            sched::spawn_on("hammer", cpu_bit(cpu), move || {
                let mut calls = 0u64;
                while !HAMMER_STOP.load(Ordering::Relaxed) {
                    let x = ((cpu as u64) << 32) | (calls & 0xffff);
                    if hammered(black_box(x)) != x.wrapping_mul(7).wrapping_add(3) {
                        HAMMER_BAD.fetch_add(1, Ordering::Relaxed);
                    }
                    calls += 1;
                }
                HAMMER_CALLS.fetch_add(calls, Ordering::Relaxed);
                calls
            })
            .unwrap()
        })
        .collect();
    let (bad, callbacks) = (HAMMER_BAD.load(Ordering::SeqCst), HAMMER_CALLBACKS.load(Ordering::SeqCst));
    // nop -> call (ARGS) -> call (REGS) -> call (ARGS) -> nop: each step
    // rewrites the site's instruction while the workers run it.
    let mut patches = 0;
    while patches < 10_000 {
        ftrace::register(&HAMMER_ARGS).unwrap();
        ftrace::register(&HAMMER_REGS).unwrap();
        ftrace::unregister(&HAMMER_REGS).unwrap();
        ftrace::unregister(&HAMMER_ARGS).unwrap();
        patches += 4;
    }
    // A call that entered the trampoline just before the last unpatch may
    // still be running its callback: a grace period waits for it (the
    // guarantee Linux gives for ops that are not freed: no callback once the
    // site is a NOP and the calls in flight are done).
    ftrace::deferred::synchronize();
    let before_stop = HAMMER_CALLBACKS.load(Ordering::SeqCst);
    HAMMER_STOP.store(true, Ordering::SeqCst);
    let calls: u64 = workers.into_iter().map(|worker| worker.join()).sum();
    assert_eq!(HAMMER_BAD.load(Ordering::SeqCst) - bad, 0, "every result and every argument right");
    let seen = HAMMER_CALLBACKS.load(Ordering::SeqCst) - callbacks;
    assert!(seen > 0 && seen <= calls, "{seen} callbacks for {calls} calls");
    assert_eq!(HAMMER_CALLBACKS.load(Ordering::SeqCst), before_stop, "no callback once the site is back to its NOP");
    let mut slot = [0u8; arch::ftrace::INSN_LEN];
    arch::text::read(f + arch::ftrace::CALL_OFFSET, &mut slot).unwrap();
    assert_eq!(slot, arch::ftrace::NOP, "the site is its NOP again");
}

#[ktest]
fn the_scheduler_entry_points_that_never_return_are_not_traced() {
    // A hooked return that never comes would hold what hooked it for ever
    // (an idle task's, until the next boot).
    let table = ftrace::symbols::kernel::table().unwrap();
    for name in ["kernel::sched::task_start", "kernel::sched::task::idle_start", "kernel::sched::idle_loop"] {
        let Some(symbol) = table.by_name(name) else {
            assert_eq!(name, "kernel::sched::idle_loop", "only idle_loop may be inlined");
            continue;
        };
        assert!(ftrace::site(symbol.address).is_none(), "{name} has an ftrace site");
    }
    assert!(ftrace::site(address(crate::workload::fib as fn(u64) -> u64)).is_some(), "the check can tell");
}
