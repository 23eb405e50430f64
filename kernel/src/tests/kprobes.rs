//! kprobes: probes at a function's entry (on its ftrace site) and inside
//! it (a breakpoint, the instruction stepped out of line or simulated),
//! kretprobes, recursion, and removal while calls are in flight.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arch::kprobes::{Execution, InsnError};
use ftrace::{PtRegs, Saved, SavedRegs};
use kprobes::kretprobe::{Kretprobe, KretprobeConfig};
use kprobes::{register_kprobe, register_kretprobe, Kprobe, KprobeConfig, KprobeError, Location, RegisteredKprobe};
use ktest_macros::ktest;

use crate::workload::fib;

fn address<T: Copy>(f: T) -> usize {
    // SAFETY: only used on function pointers, which are pointer-sized.
    unsafe { core::mem::transmute_copy::<T, usize>(&f) }
}

fn symbol_of(f: usize) -> (String, usize) {
    let symbol = ftrace::symbols::kernel::table().unwrap().lookup(f).unwrap();
    (symbol.name.into(), symbol.size)
}

fn at(function: usize, offset: usize) -> Location {
    Location::Symbol { symbol: symbol_of(function).0, offset }
}

/// Where the instructions after a function's ftrace site start.
const SITE_END: usize = arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN;

/// The instruction offsets of `function` after its site, decoded in turn.
fn instructions(function: usize) -> Vec<usize> {
    let (_, size) = symbol_of(function);
    let mut offsets = Vec::new();
    let mut offset = SITE_END;
    while offset < size {
        let mut bytes = [0u8; 16];
        arch::fault::read_nofault(function + offset, &mut bytes).unwrap();
        let len = arch::disasm::length(&bytes, function + offset).unwrap_or(0);
        if len == 0 {
            break;
        }
        offsets.push(offset);
        offset += len;
    }
    offsets
}

fn first_argument(regs: &PtRegs) -> u64 {
    SavedRegs::full(regs, Saved::EntryFull).argument(0).unwrap()
}

static HITS: AtomicU64 = AtomicU64::new(0);
static POSTS: AtomicU64 = AtomicU64::new(0);
static SEEN_ARGS: spin::Mutex<Vec<u64>> = spin::Mutex::new(Vec::new());

fn count_hit(_: &Kprobe, _: &PtRegs) {
    HITS.fetch_add(1, Ordering::Relaxed);
}

fn count_post(_: &Kprobe, _: &PtRegs) {
    POSTS.fetch_add(1, Ordering::Relaxed);
}

fn record_argument(probe: &Kprobe, regs: &PtRegs) {
    assert_eq!(regs.ip(), probe.address(), "the pre-handler sees ip at the probe");
    SEEN_ARGS.lock().push(first_argument(regs));
}

fn counting() -> KprobeConfig {
    KprobeConfig { pre_handler: Some(count_hit), post_handler: Some(count_post), private: 0 }
}

fn reset() {
    HITS.store(0, Ordering::SeqCst);
    POSTS.store(0, Ordering::SeqCst);
    SEEN_ARGS.lock().clear();
}

/// What the handler below calls: a traced function.
#[inline(never)]
fn called_from_a_probe_handler() -> u64 {
    black_box(7)
}

fn call_traced_code(_: &Kprobe, _: &PtRegs) {
    called_from_a_probe_handler();
}

/// A kprobe's handler runs in the breakpoint's exception, an NMI-like
/// context (the `d...Z` flags): with `options/funcgraph-irqs` off the
/// graph tracer leaves out what it calls, as Linux's `in_hardirq()` is
/// true in an NMI; on, it records it.
#[ktest]
fn funcgraph_irqs_off_leaves_out_what_a_probe_handler_calls() {
    let fib_address = address(fib as fn(u64) -> u64);
    let config = KprobeConfig { pre_handler: Some(call_traced_code), post_handler: None, private: 0 };
    let probe = register_kprobe(&at(fib_address, SITE_END), config).unwrap();
    let calls_recorded = |irqs: &str| {
        crate::tracefs::write("options/funcgraph-irqs", irqs, ftrace::FilterMode::Replace).unwrap();
        crate::tests::tracers::function_graph::tracer_setup("kernel::tests::kprobes::called_from_a_probe_handler", "", "0");
        assert_eq!(fib(black_box(3)), 2);
        let events = crate::tests::tracers::function_graph::graph_events();
        crate::tests::tracers::function_graph::tracer_cleanup();
        events.iter().filter(|event| matches!(event, trace::events::record::Event::GraphExit(_))).count()
    };
    let (off, on) = (calls_recorded("0"), calls_recorded("1"));
    crate::tracefs::write("options/funcgraph-irqs", "1", ftrace::FilterMode::Replace).unwrap();
    drop(probe);
    assert_eq!((off, on), (0, 5), "fib(3)'s five hits, each calling it once");
}

#[ktest]
fn a_probe_at_a_functions_entry_rides_on_its_ftrace_site() {
    reset();
    let fib_address = address(fib as fn(u64) -> u64);
    let config = KprobeConfig { pre_handler: Some(record_argument), post_handler: Some(count_post), private: 0 };
    let probe = register_kprobe(&Location::parse("kernel::workload::fib").unwrap(), config).unwrap();
    assert!(probe.on_ftrace());
    let mut listing = String::new();
    crate::tracefs::read("enabled_functions", &mut listing).unwrap();
    assert!(listing.lines().any(|line| line.starts_with("kernel::workload::fib ")), "{listing}");
    let mut site = [0u8; arch::ftrace::INSN_LEN];
    arch::text::read(fib_address + arch::ftrace::CALL_OFFSET, &mut site).unwrap();
    assert_ne!(site, arch::ftrace::NOP, "the site calls the trampoline, no breakpoint");
    assert_eq!(fib(black_box(10)), 55);
    let mut seen = SEEN_ARGS.lock().clone();
    seen.sort_unstable();
    assert_eq!(seen.len(), 177, "fib(10) makes 177 calls");
    assert_eq!((seen[0], seen[176]), (0, 10));
    assert_eq!(probe.hits(), 177);
    assert_eq!(POSTS.load(Ordering::SeqCst), 177);
    drop(probe);
    arch::text::read(fib_address + arch::ftrace::CALL_OFFSET, &mut site).unwrap();
    assert_eq!(site, arch::ftrace::NOP);
    assert_eq!(fib(black_box(10)), 55);
    assert_eq!(SEEN_ARGS.lock().len(), 177);
}

#[ktest]
fn a_probe_inside_fib_sees_the_registers_and_changes_no_result() {
    reset();
    let fib_address = address(fib as fn(u64) -> u64);
    // The first instruction after the site runs on every call, with the
    // argument still in its register.
    let config = KprobeConfig { pre_handler: Some(record_argument), post_handler: Some(count_post), private: 0 };
    let probe = register_kprobe(&at(fib_address, SITE_END), config).unwrap();
    assert!(!probe.on_ftrace());
    let breakpoint = arch::kprobes::BREAKPOINT;
    let mut bytes = [0u8; arch::kprobes::BREAKPOINT.len()];
    arch::text::read(fib_address + SITE_END, &mut bytes).unwrap();
    assert_eq!(bytes, breakpoint, "the breakpoint is in place");
    assert_eq!(fib(black_box(12)), 144);
    let seen = SEEN_ARGS.lock().clone();
    assert_eq!(seen.len(), 465, "fib(12) makes 465 calls");
    assert_eq!(seen.iter().filter(|&&n| n == 12).count(), 1);
    assert_eq!(probe.hits(), 465);
    assert_eq!(POSTS.load(Ordering::SeqCst), 465);
    drop(probe);
    arch::text::read(fib_address + SITE_END, &mut bytes).unwrap();
    assert_ne!(bytes, breakpoint, "the instruction is back");
    assert_eq!(fib(black_box(12)), 144);
    assert_eq!(SEEN_ARGS.lock().len(), 465);
}

/// Handler calls that found their stack misaligned.
static MISALIGNED: AtomicU64 = AtomicU64::new(0);

fn check_stack_alignment(_: &Kprobe, _: &PtRegs) {
    // Called on a 16-byte aligned stack, as the ABI has every call, a
    // function's frame record (pushed at its entry) is 16-byte aligned;
    // if an exception entry broke that, it is off by 8.
    if arch::cpu::frame_pointer() % 16 != 0 {
        MISALIGNED.fetch_add(1, Ordering::Relaxed);
    }
}

#[ktest]
fn a_breakpoint_handler_runs_on_an_aligned_stack() {
    MISALIGNED.store(0, Ordering::SeqCst);
    let fib_address = address(fib as fn(u64) -> u64);
    let config = KprobeConfig { pre_handler: Some(check_stack_alignment), post_handler: None, private: 0 };
    let probe = register_kprobe(&at(fib_address, SITE_END), config).unwrap();
    assert_eq!(fib(black_box(5)), 5);
    assert_eq!(probe.hits(), 15);
    drop(probe);
    assert_eq!(MISALIGNED.load(Ordering::SeqCst), 0, "handlers ran on a stack off by 8");
}

arch::kprobe_fixture!();

/// The class name of how an instruction runs, for the coverage check.
fn class(execution: Execution) -> String {
    match execution {
        Execution::Step { relocated: false } => "step".into(),
        Execution::Step { relocated: true } => "step (relocated)".into(),
        Execution::Simulate(simulation) => arch::kprobes::simulation_class(simulation).into(),
    }
}

#[ktest]
fn every_instruction_of_the_fixture_probed_in_turn_runs_right() {
    let function = address(fixture as fn(u64) -> u64);
    let inputs = [0u64, 1, 2, 3, 6, 41];
    for x in inputs {
        assert_eq!(fixture(black_box(x)), fixture_expected(x), "unprobed fixture({x})");
    }
    let mut covered: BTreeMap<String, u64> = BTreeMap::new();
    let mut refused = Vec::new();
    for offset in instructions(function) {
        reset();
        let probe = match register_kprobe(&at(function, offset), counting()) {
            Ok(probe) => probe,
            Err(KprobeError::Instruction { why, .. }) => {
                refused.push((offset, why));
                continue;
            }
            Err(error) => panic!("fixture+{offset:#x}: {error}"),
        };
        for x in inputs {
            assert_eq!(fixture(black_box(x)), fixture_expected(x), "fixture({x}) probed at +{offset:#x}");
        }
        let hits = probe.hits();
        assert_eq!(HITS.load(Ordering::SeqCst), hits);
        assert_eq!(POSTS.load(Ordering::SeqCst), hits, "a post-handler after every pre-handler");
        *covered.entry(class(probe.execution().unwrap())).or_default() += hits;
    }
    for name in arch::kprobes::CLASSES {
        assert!(covered.get(*name).is_some_and(|&hits| hits > 0), "class {name} not exercised: {covered:?}");
    }
    // The never-run trap instruction (and aarch64's literal pool).
    assert!(!refused.is_empty());
    assert!(refused.iter().all(|(_, why)| matches!(why, InsnError::Unsafe(_) | InsnError::Invalid)), "{refused:?}");
}

fn pre_only() -> KprobeConfig {
    KprobeConfig { pre_handler: Some(count_hit), post_handler: None, private: 0 }
}

/// Runs the fixture on every input, with interrupts as they are and then
/// masked; checks each result and that the interrupt state after a hit is
/// the one before it.
fn run_fixture_both_ways(offset: usize, inputs: &[u64]) {
    assert!(arch::cpu::interrupts_enabled());
    for &x in inputs {
        assert_eq!(fixture(black_box(x)), fixture_expected(x), "fixture({x}) probed at +{offset:#x}");
        assert!(arch::cpu::interrupts_enabled(), "interrupts back on after a hit at +{offset:#x}");
        arch::irq::without_interrupts(|| {
            assert_eq!(fixture(black_box(x)), fixture_expected(x), "fixture({x}) masked, probed at +{offset:#x}");
            assert!(!arch::cpu::interrupts_enabled(), "interrupts still masked after a hit at +{offset:#x}");
        });
    }
}

/// [`run_fixture_both_ways`] on one CPU; answers how many step-done traps
/// its hits took (they are counted per CPU).
fn step_traps_of_fixture_runs(offset: usize, inputs: &[u64]) -> u64 {
    let _here = arch::preempt::Guard::new();
    let before = kprobes::step_traps_here();
    run_fixture_both_ways(offset, inputs);
    kprobes::step_traps_here() - before
}

#[ktest]
fn a_hit_without_a_post_handler_is_boosted_where_the_architecture_can() {
    let function = address(fixture as fn(u64) -> u64);
    let inputs = [0u64, 1, 41];
    let mut stepped_places = 0;
    for offset in instructions(function) {
        let Ok(Execution::Step { .. }) = arch::kprobes::decode(function + offset).map(|insn| insn.execution()) else {
            continue;
        };
        // Only a pre-handler: boosted (one trap a hit) where the
        // architecture boosts, stepped (two) elsewhere. (aarch64 refuses
        // the fixture's exclusive sequence.)
        reset();
        let probe = match register_kprobe(&at(function, offset), pre_only()) {
            Ok(probe) => probe,
            Err(KprobeError::Instruction { .. }) => continue,
            Err(error) => panic!("fixture+{offset:#x}: {error}"),
        };
        stepped_places += 1;
        let steps = step_traps_of_fixture_runs(offset, &inputs);
        // (Not every instruction runs for every input.)
        let hits = probe.hits();
        assert!(hits > 0, "+{offset:#x} was hit");
        assert_eq!(HITS.load(Ordering::SeqCst), hits);
        let expected = if arch::kprobes::BOOSTS { 0 } else { hits };
        assert_eq!(steps, expected, "step-done traps, pre-handler only, +{offset:#x}");
        // A second probe there with a post-handler: every hit steps, so
        // the post-handler runs after the instruction.
        let with_post = register_kprobe(&at(function, offset), counting()).unwrap();
        let steps = step_traps_of_fixture_runs(offset, &inputs);
        assert_eq!(with_post.hits(), hits, "+{offset:#x}: as often as before");
        assert_eq!(POSTS.load(Ordering::SeqCst), hits);
        assert_eq!(steps, hits, "step-done traps with a post-handler, +{offset:#x}");
        drop(with_post);
        drop(probe);
    }
    assert!(stepped_places >= 3, "the fixture has stepped instructions ({stepped_places})");
}

static INNER_CALLS: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn inner(x: u64) -> u64 {
    INNER_CALLS.fetch_add(1, Ordering::Relaxed);
    black_box(x) * 3 + 1
}

#[inline(never)]
fn outer(x: u64) -> u64 {
    black_box(x) + 5
}

fn calls_inner(_: &Kprobe, _: &PtRegs) {
    HITS.fetch_add(1, Ordering::Relaxed);
    assert_eq!(inner(black_box(4)), 13);
}

#[ktest]
fn a_probe_hit_inside_a_handler_is_missed_and_still_runs_its_instruction() {
    reset();
    let inner_address = address(inner as fn(u64) -> u64);
    let outer_address = address(outer as fn(u64) -> u64);
    let inner_probe = register_kprobe(&at(inner_address, instructions(inner_address)[0]), counting()).unwrap();
    let entry_probe = register_kprobe(&at(inner_address, 0), counting()).unwrap();
    let outer_probe = register_kprobe(
        &at(outer_address, instructions(outer_address)[0]),
        KprobeConfig { pre_handler: Some(calls_inner), ..counting() },
    )
    .unwrap();
    let calls = INNER_CALLS.load(Ordering::SeqCst);
    assert_eq!(outer(black_box(1)), 6);
    assert_eq!(INNER_CALLS.load(Ordering::SeqCst), calls + 1, "the handler's call ran");
    assert_eq!((outer_probe.hits(), inner_probe.hits(), entry_probe.hits()), (1, 0, 0));
    assert_eq!((inner_probe.nmissed(), entry_probe.nmissed()), (1, 1), "both probes in inner missed the nested hit");
    assert_eq!(inner(black_box(2)), 7);
    assert_eq!((inner_probe.hits(), entry_probe.hits()), (1, 1), "outside a handler both run");
}

static RETURNS: spin::Mutex<Vec<(u64, u64)>> = spin::Mutex::new(Vec::new());

/// fib(n) without calling the probed function.
fn fib_by_loop(n: u64) -> u64 {
    (0..n).fold((0, 1), |(a, b), _| (b, a + b)).0
}

fn save_n(_: &Kretprobe, regs: &PtRegs, data: &mut [u64]) {
    data[0] = first_argument(regs);
}

fn check_return(rp: &Kretprobe, ret_addr: usize, regs: &PtRegs, data: &[u64]) {
    assert_ne!(ret_addr, 0);
    assert_eq!(rp.private(), 0x5eed);
    let retval = SavedRegs::full(regs, Saved::ReturnFull).return_value();
    RETURNS.lock().push((data[0], retval));
}

#[ktest]
fn a_kretprobe_sees_each_calls_return_value_and_its_own_data() {
    RETURNS.lock().clear();
    let config =
        KretprobeConfig { entry_handler: Some(save_n), handler: check_return, data_words: 1, maxactive: 64, private: 0x5eed };
    let probe = register_kretprobe(&Location::parse("kernel::workload::fib").unwrap(), config).unwrap();
    assert_eq!(fib(black_box(10)), 55);
    let returns = RETURNS.lock().clone();
    assert_eq!(returns.len(), 177);
    for (n, retval) in &returns {
        assert_eq!(*retval, fib_by_loop(*n), "fib({n})");
    }
    assert_eq!((probe.hits(), probe.nmissed(), probe.in_flight()), (177, 0, 0));
    drop(probe);
    // maxactive bounds the calls hooked at once: fib(10) nests 10 deep.
    RETURNS.lock().clear();
    let probe =
        register_kretprobe(&Location::parse("kernel::workload::fib").unwrap(), KretprobeConfig { maxactive: 4, ..config })
            .unwrap();
    assert_eq!(fib(black_box(10)), 55);
    let handled = RETURNS.lock().len() as u64;
    assert!(probe.nmissed() > 0, "more than 4 calls in flight were missed");
    assert_eq!(handled + probe.nmissed(), 177);
    assert!(RETURNS.lock().iter().all(|(n, retval)| *retval == fib_by_loop(*n)));
    drop(probe);
    assert!(matches!(
        register_kretprobe(&Location::parse("kernel::workload::fib+8").unwrap(), config),
        Err(KprobeError::NotAtEntry { .. })
    ));
}

static STOP: AtomicBool = AtomicBool::new(false);
static WRONG: AtomicU64 = AtomicU64::new(0);

#[ktest]
fn probes_come_and_go_while_other_cpus_run_the_probed_code() {
    let fib_address = address(fib as fn(u64) -> u64);
    let offsets = instructions(fib_address);
    let mut before = alloc::vec![0u8; symbol_of(fib_address).1];
    arch::fault::read_nofault(fib_address, &mut before).unwrap();
    STOP.store(false, Ordering::SeqCst);
    let wrong = WRONG.load(Ordering::SeqCst);
    let cpus = arch::percpu::online_count().min(4);
    let workers: Vec<_> = (1..cpus)
        .map(|cpu| {
            crate::sched::spawn_on("kprobed", 1 << cpu, move || {
                let mut calls = 0;
                while !STOP.load(Ordering::Relaxed) {
                    if fib(black_box(8)) != 21 {
                        WRONG.fetch_add(1, Ordering::Relaxed);
                    }
                    calls += 1;
                }
                calls
            })
            .unwrap()
        })
        .collect();
    let mut registered = 0;
    for round in 0..40 {
        // Several breakpoints at once, and the entry probe; every other
        // round without post-handlers (boosted hits, where they exist).
        let config = if round % 2 == 0 { counting() } else { pre_only() };
        let probes: Vec<RegisteredKprobe> = offsets
            .iter()
            .skip(round % 3)
            .step_by(3)
            .take(4)
            .chain(core::iter::once(&0))
            .filter_map(|&offset| match register_kprobe(&at(fib_address, offset), config) {
                Ok(probe) => Some(probe),
                // An instruction no probe takes; anything else is a bug (a
                // boundary walk that trips over the earlier breakpoints).
                Err(KprobeError::Instruction { .. }) => None,
                Err(error) => panic!("fib+{offset:#x}: {error}"),
            })
            .collect();
        registered += probes.len();
        assert_eq!(fib(black_box(8)), 21);
        drop(probes);
    }
    STOP.store(true, Ordering::SeqCst);
    let calls: u64 = workers.into_iter().map(|worker| worker.join()).sum();
    assert!(registered >= 80, "{registered} probes registered");
    assert!(cpus < 2 || calls > 0);
    assert_eq!(WRONG.load(Ordering::SeqCst) - wrong, 0, "every result right while probes came and went");
    let mut after = alloc::vec![0u8; before.len()];
    arch::fault::read_nofault(fib_address, &mut after).unwrap();
    assert_eq!(before, after, "no breakpoint left in fib");
}

#[ktest]
fn bad_places_are_refused_and_change_nothing() {
    let fib_address = address(fib as fn(u64) -> u64);
    let (fib_name, fib_size) = symbol_of(fib_address);
    let mut before = alloc::vec![0u8; fib_size];
    arch::fault::read_nofault(fib_address, &mut before).unwrap();
    let refuse = |location: Location| register_kprobe(&location, counting()).err().unwrap();
    assert!(matches!(refuse(Location::parse("no_such_function").unwrap()), KprobeError::Name(_)));
    assert!(matches!(refuse(at(fib_address, fib_size)), KprobeError::PastEnd { .. }));
    assert!(matches!(refuse(at(fib_address, SITE_END - 1)), KprobeError::InsideFtraceSite { .. }));
    let offsets = instructions(fib_address);
    let long = offsets.windows(2).find(|pair| pair[1] - pair[0] > 1).map(|pair| pair[0] + 1);
    if let Some(inside) = long {
        assert!(matches!(refuse(at(fib_address, inside)), KprobeError::NotInstructionBoundary { .. }));
    } else {
        assert!(matches!(refuse(at(fib_address, SITE_END + 2)), KprobeError::NotInstructionBoundary { .. }));
    }
    for machinery in ["ftrace::deferred::synchronize", "kprobes::probe::resolve", "arch::smp::sync_all"] {
        assert!(
            matches!(refuse(Location::parse(machinery).unwrap()), KprobeError::Blacklisted(_)),
            "{machinery}: {:?}",
            register_kprobe(&Location::parse(machinery).unwrap(), counting()).err()
        );
    }
    assert!(matches!(refuse(Location::Address(8)), KprobeError::NotInFunction(8)));
    let probe = register_kprobe(&at(fib_address, SITE_END), counting()).unwrap();
    drop(probe);
    let mut after = alloc::vec![0u8; fib_size];
    arch::fault::read_nofault(fib_address, &mut after).unwrap();
    assert_eq!(before, after, "{fib_name} unchanged");
}

#[ktest]
fn an_instruction_after_a_probed_one_can_still_be_probed() {
    // The boundary walk decodes from the function's start: an earlier
    // breakpoint must not throw it off (x86's int3 is one byte over a
    // longer instruction).
    let fib_address = address(fib as fn(u64) -> u64);
    let offsets = instructions(fib_address);
    let (mut firsts, mut pairs) = (0, 0);
    for pair in offsets.windows(2) {
        let Ok(first) = register_kprobe(&at(fib_address, pair[0]), counting()) else { continue };
        firsts += 1;
        match register_kprobe(&at(fib_address, pair[1]), counting()) {
            Ok(second) => {
                pairs += 1;
                assert_eq!(fib(black_box(10)), 55, "with probes at fib+{:#x} and fib+{:#x}", pair[0], pair[1]);
                drop(second);
            }
            Err(KprobeError::Instruction { .. }) => {}
            Err(error) => panic!("fib+{:#x} after a probe at fib+{:#x}: {error}", pair[1], pair[0]),
        }
        drop(first);
    }
    // Most of fib's instructions take a probe (the concurrent test above
    // registers at least 80 over its rounds).
    assert!(
        firsts * 2 >= offsets.len() && pairs * 2 >= firsts,
        "{pairs} pairs of {firsts} probes, {} instructions",
        offsets.len()
    );
    assert_eq!(fib(black_box(10)), 55);
}

/// Hits per probe (by its private number), and the order the first hits'
/// pre-handlers ran in.
static SHARED_HITS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static SHARED_POSTS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static SHARED_ORDER: spin::Mutex<Vec<usize>> = spin::Mutex::new(Vec::new());

fn shared_pre(probe: &Kprobe, _: &PtRegs) {
    SHARED_HITS[probe.private()].fetch_add(1, Ordering::Relaxed);
    let mut order = SHARED_ORDER.lock();
    if order.len() < 6 {
        order.push(probe.private());
    }
}

fn shared_post(probe: &Kprobe, _: &PtRegs) {
    SHARED_POSTS[probe.private()].fetch_add(1, Ordering::Relaxed);
}

fn shared(n: usize) -> KprobeConfig {
    KprobeConfig { pre_handler: Some(shared_pre), post_handler: Some(shared_post), private: n }
}

fn shared_hits() -> [u64; 4] {
    core::array::from_fn(|n| SHARED_HITS[n].load(Ordering::Relaxed))
}

/// Several probes at one address share its breakpoint (Linux's aggregate
/// probes): each runs its handlers on every hit, in registration order,
/// and any of them can go first.
#[ktest]
fn probes_at_one_address_share_its_breakpoint() {
    let fib_address = address(fib as fn(u64) -> u64);
    let place = fib_address + SITE_END;
    let mut before = [0u8; arch::kprobes::BREAKPOINT.len()];
    arch::text::read(place, &mut before).unwrap();
    let first = register_kprobe(&at(fib_address, SITE_END), shared(1)).unwrap();
    let second = register_kprobe(&at(fib_address, SITE_END), shared(2)).unwrap();
    let third = register_kprobe(&Location::Address(place), shared(3)).unwrap();
    assert_eq!(fib(black_box(5)), 5);
    assert_eq!(shared_hits(), [0, 15, 15, 15], "fib(5)'s 15 calls, for each probe");
    assert_eq!(SHARED_POSTS[3].load(Ordering::Relaxed), 15, "and each post-handler");
    assert_eq!(*SHARED_ORDER.lock(), [1, 2, 3, 1, 2, 3], "in registration order, once a hit");
    assert_eq!((first.hits(), second.hits(), third.hits()), (15, 15, 15));
    drop(first); // the head: the second takes its slot
    assert_eq!(fib(black_box(3)), 2);
    assert_eq!(shared_hits(), [0, 15, 20, 20]);
    drop(third); // the last follower
    assert_eq!(fib(black_box(2)), 1);
    assert_eq!(shared_hits(), [0, 15, 23, 20]);
    let mut bytes = [0u8; arch::kprobes::BREAKPOINT.len()];
    arch::text::read(place, &mut bytes).unwrap();
    assert_eq!(bytes, arch::kprobes::BREAKPOINT, "still armed for the one left");
    drop(second);
    arch::text::read(place, &mut bytes).unwrap();
    assert_eq!(bytes, before, "the instruction is back once the last goes");
    assert_eq!(fib(black_box(4)), 3);
    assert_eq!(shared_hits(), [0, 15, 23, 20]);
}

// ---- a step that moves the stack pointer wrong ----

/// The probe `a_step_that_moves_the_stack_pointer_wrong_stops_with_a_report`
/// leaves behind when it panics.
static SKEWED_PROBE: spin::Mutex<Option<RegisteredKprobe>> = spin::Mutex::new(None);

fn nothing_after(_probe: &Kprobe, _regs: &PtRegs) {}

/// Every step out of line is checked against what its instruction does to
/// the stack pointer (here fib's first instruction that moves it, a push or
/// a pre-indexed store): one that moved it otherwise (simulated by skewing
/// the check) stops with a report, never resumes on a wrong stack.
#[ktest(should_panic = "kprobes: a step out of line moved the stack pointer wrong", after_panic = drop_skewed_probe)]
fn a_step_that_moves_the_stack_pointer_wrong_stops_with_a_report() {
    let fib_address = address(fib as fn(u64) -> u64);
    let moves_sp = instructions(fib_address)
        .into_iter()
        .map(|offset| fib_address + offset)
        .find(|&at| {
            kprobes::probe::instruction_at(at).is_ok_and(|insn| {
                matches!(insn.execution(), Execution::Step { .. }) && insn.stack_delta().is_some_and(|delta| delta < 0)
            })
        })
        .expect("fib's prologue moves the stack pointer");
    // A post-handler: the hit is stepped and ends with the step-done trap.
    let config = KprobeConfig { pre_handler: None, post_handler: Some(nothing_after), private: 0 };
    *SKEWED_PROBE.lock() = Some(register_kprobe(&Location::Address(moves_sp), config).unwrap());
    assert_eq!(fib(black_box(5)), 5, "honest steps pass the check");
    kprobes::probe::skew_next_step(8);
    fib(black_box(5));
    unreachable!("resumed after a step that moved the stack pointer wrong");
}

fn drop_skewed_probe() {
    kprobes::probe::skew_next_step(0);
    drop(SKEWED_PROBE.lock().take());
}
