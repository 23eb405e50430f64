//! The function_graph tracer through tracefs: the tree it prints, its
//! timestamps, max_graph_depth, set_graph_function and set_graph_notrace,
//! funcgraph-irqs and funcgraph-overhead.

use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tracefs;
use crate::workload::fib;

// ---- the function_graph tracer ----

pub(crate) fn graph_events() -> Vec<trace::events::record::Event> {
    crate::tests::recorded_events().iter().filter_map(|(_, payload)| trace::events::record::Event::decode(payload)).collect()
}

pub(crate) fn tracer_setup(filter: &str, graph_function: &str, max_depth: &str) {
    tracefs::write("set_ftrace_filter", filter, FilterMode::Replace).unwrap();
    tracefs::write("set_graph_function", graph_function, FilterMode::Replace).unwrap();
    tracefs::write("max_graph_depth", max_depth, FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function_graph", FilterMode::Replace).unwrap();
}

pub(crate) fn tracer_cleanup() {
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    for (file, text) in
        [("set_ftrace_filter", ""), ("set_graph_function", ""), ("set_graph_notrace", ""), ("max_graph_depth", "0")]
    {
        tracefs::write(file, text, FilterMode::Replace).unwrap();
    }
}

fn names(events: &[trace::events::record::Event]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|record| match record {
            trace::events::record::Event::GraphEntry(entry) => ftrace::symbols::kernel::name_of(entry.func as usize),
            _ => None,
        })
        .collect()
}

#[ktest]
fn function_graph_tracer_shows_fib_as_a_balanced_tree_with_return_values() {
    use trace::events::record::Event;
    tracer_setup("*::fib", "", "0");
    tracefs::write("options/funcgraph-retval", "1", FilterMode::Replace).unwrap();
    fib(black_box(4));
    let events = graph_events();
    let mut trace = String::new();
    tracefs::read("trace", &mut trace).unwrap();
    tracefs::write("options/funcgraph-retval", "0", FilterMode::Replace).unwrap();
    tracer_cleanup();
    let entries = events.iter().filter(|r| matches!(r, Event::GraphEntry(_))).count();
    let exits: Vec<u64> = events.iter().filter_map(|r| if let Event::GraphExit(x) = r { Some(x.retval) } else { None }).collect();
    assert_eq!((entries, exits.len()), (9, 9));
    assert_eq!(*exits.last().unwrap(), 3, "the outermost call returned fib(4)");
    assert!(trace.starts_with("# tracer: function_graph\n"), "{trace}");
    // On whichever CPU the test task runs.
    assert!(trace.contains(")               |  kernel::workload::fib() {\n"), "{trace}");
    assert!(trace.contains("|        kernel::workload::fib(); /* ret=0x1 */\n"), "{trace}");
    assert!(trace.contains("|  } /* kernel::workload::fib ret=0x3 */\n"), "{trace}");
    assert_eq!(trace.matches("kernel::workload::fib").count(), 9 + 4, "9 calls, 4 of them with children");
}

/// One call shows one duration wherever it is read: under the local clock
/// (the default), an exit event's call and return times are its entry
/// event's and its own timestamps.
#[ktest]
fn graph_call_times_are_the_timestamps_of_their_events() {
    use trace::events::record::Event;
    tracer_setup("*::fib", "", "0");
    fib(black_box(5));
    let events = crate::tests::recorded_events();
    tracer_cleanup();
    let mut open = Vec::new();
    let mut exits = 0;
    for &(time, ref payload) in &events {
        match Event::decode(payload) {
            Some(Event::GraphEntry(_)) => open.push(time),
            Some(Event::GraphExit(exit)) => {
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

/// Calls fib: a caller to hook the return of.
#[inline(never)]
fn calls_fib(n: u64) -> u64 {
    black_box(fib(black_box(n))) + 1
}

fn ignore_kretprobe_return(_: &kprobes::kretprobe::Kretprobe, _: usize, _: &ftrace::PtRegs, _: &[u64]) {}

fn ignore_fprobe_exit(_: &fprobe::Fprobe, _: usize, _: usize, _: &mut ftrace::FtraceRegs, _: &mut fprobe::EntryData) {}

/// A kretprobe on a caller leaves the depths of the graph tracer's calls
/// alone (in Linux kretprobes keep a return stack of their own), while an
/// fprobe's return hook counts (Linux 6.14 and later run fprobes on the
/// function-graph return stack).
#[ktest]
fn only_function_graph_users_count_toward_the_graph_depth() {
    use kprobes::kretprobe::KretprobeConfig;
    let graphed = || {
        assert_eq!(calls_fib(black_box(3)), 3);
        let events = graph_events();
        tracefs::write("trace", "", FilterMode::Replace).unwrap();
        events
    };
    tracer_setup("*::fib", "", "1");
    let config =
        KretprobeConfig { entry_handler: None, handler: ignore_kretprobe_return, data_words: 0, maxactive: 4, private: 0 };
    let probe = kprobes::register_kretprobe(&kprobes::Location::Address(calls_fib as *const () as usize), config).unwrap();
    let under_kretprobe = graphed();
    assert_eq!(probe.hits(), 1);
    drop(probe);
    let config = fprobe::FprobeConfig {
        entry: None,
        exit: Some(ignore_fprobe_exit),
        entry_data_words: 0,
        save_args: false,
        private: 0,
        free_private: None,
    };
    let probe = fprobe::register(config, fprobe::Target::Addresses(&[calls_fib as *const () as usize])).unwrap();
    let under_fprobe = graphed();
    let unregistered = probe.unregister();
    tracer_cleanup();
    assert!(unregistered.is_ok());
    assert_eq!(names(&under_kretprobe), ["kernel::workload::fib"], "fib(3) at depth 0, the calls it makes too deep");
    assert!(under_fprobe.is_empty(), "fib(3) at depth 1, past max_graph_depth: {:?}", names(&under_fprobe));
}

/// Switches the tracer off from inside a call the graph tracer hooked.
#[inline(never)]
fn stops_the_graph_tracer() {
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
}

/// Switches the tracer off and on again from inside a hooked call.
#[inline(never)]
fn restarts_the_graph_tracer() {
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function_graph", FilterMode::Replace).unwrap();
}

/// A call that returns after the tracer switched away records nothing: its
/// entry went with the emptied buffer (as Linux stubs out the returns of an
/// unregistered graph user), so no lone exit is left to print; nor when
/// the tracer is back by then (Linux gives a re-registered user a fresh
/// slot).
#[ktest]
fn a_call_returning_after_the_tracer_stops_records_nothing() {
    tracer_setup("*::stops_the_graph_tracer", "", "0");
    stops_the_graph_tracer();
    let events = graph_events();
    let mut trace = String::new();
    tracefs::read("trace", &mut trace).unwrap();
    tracer_cleanup();
    assert!(events.is_empty(), "{events:?}");
    assert!(!trace.contains("Unknown type"), "{trace}");
    tracer_setup("*::restarts_the_graph_tracer", "", "0");
    restarts_the_graph_tracer();
    let events = graph_events();
    tracer_cleanup();
    assert!(events.is_empty(), "the call hooked before the restart left no exit: {events:?}");
}

/// A snapshot taken under one tracer reads under another: graph events
/// nest as the graph tracer nests them (never "Unknown type"), and function
/// events inside a graph are comments with their parent, as in Linux.
#[ktest]
fn a_snapshot_reads_under_another_tracer() {
    let read = |file: &str| {
        let mut text = String::new();
        tracefs::read(file, &mut text).unwrap();
        text
    };
    tracer_setup("kernel::workload::fib", "", "0");
    assert_eq!(fib(black_box(2)), 1);
    tracefs::write("snapshot", "1", FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    let graph_under_nop = read("snapshot");
    tracefs::write("current_tracer", "function", FilterMode::Replace).unwrap();
    assert_eq!(fib(black_box(1)), 1);
    tracefs::write("snapshot", "1", FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function_graph", FilterMode::Replace).unwrap();
    let function_under_graph = read("snapshot");
    tracefs::write("options/print-parent", "0", FilterMode::Replace).unwrap();
    let without_parent = read("snapshot");
    tracefs::write("options/print-parent", "1", FilterMode::Replace).unwrap();
    tracefs::write("snapshot", "0", FilterMode::Replace).unwrap();
    tracer_cleanup();
    assert!(!graph_under_nop.contains("Unknown type"), "{graph_under_nop}");
    assert!(graph_under_nop.contains(": kernel::workload::fib() {\n"), "{graph_under_nop}");
    assert!(graph_under_nop.contains(":   kernel::workload::fib() {\n"), "the inner call nested: {graph_under_nop}");
    assert!(graph_under_nop.contains(": } /* kernel::workload::fib */\n"), "{graph_under_nop}");
    assert!(function_under_graph.contains("/* kernel::workload::fib <-"), "{function_under_graph}");
    assert!(without_parent.contains("/* kernel::workload::fib */"), "print-parent off: {without_parent}");
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

    // Without set_graph_notrace: how often lookup, walk and split run.
    let count = |called: &[&str], name: &str| called.iter().filter(|n| n.ends_with(name)).count();
    tracer_setup("kernel::workload::fs::*", "", "0");
    crate::workload::fs::run();
    let events = graph_events();
    tracer_cleanup();
    let all = names(&events);
    let (lookups, walks, splits) = (count(&all, "::lookup"), count(&all, "::walk"), count(&all, "::split"));
    assert!(lookups > 0 && walks > lookups && splits > lookups, "{all:?}");

    tracer_setup("kernel::workload::fs::*", "", "0");
    let mut empty = String::new();
    tracefs::read("set_graph_notrace", &mut empty).unwrap();
    assert_eq!(empty, "#### no functions disabled ####\n", "as Linux says it");
    tracefs::write("set_graph_notrace", "*::fs::lookup", FilterMode::Replace).unwrap();
    crate::workload::fs::run();
    let events = graph_events();
    tracer_cleanup();
    let called = names(&events);
    assert!(called.contains(&"kernel::workload::fs::mkdir"), "{called:?}");
    assert_eq!(count(&called, "::lookup"), 0, "{called:?}");
    // Each lookup calls split and walk once: nothing below lookup is
    // traced, everything else is.
    assert_eq!((count(&called, "::walk"), count(&called, "::split")), (walks - lookups, splits - lookups), "{called:?}");
    assert!(tracefs::write("set_graph_function", "no_such_fn*", FilterMode::Replace).is_err());
    assert!(tracefs::write("max_graph_depth", "deep", FilterMode::Replace).is_err());
    assert!(tracefs::write("max_graph_depth", "4294967296", FilterMode::Replace).is_err(), "a 32-bit count, as in Linux");
    assert_eq!(read("max_graph_depth"), "0\n", "a refused depth changes nothing");
}

/// The returns the graph tracer records of the scheduler's tick (run by the
/// timer interrupt's handler) and of `kernel::tick::on_tick` (the tick's
/// softirq-like bottom half) while this CPU waits for `ticks` timer
/// interrupts, after `trace_options` was written `option` with the tracer
/// already running (its entry's shortcut must see the change).
fn tick_returns_recorded(option: &str, graph_function: &str, ticks: u64) -> (usize, usize) {
    set_irqs_option(option);
    tracer_setup("kernel_sched_tick kernel::tick::on_tick", graph_function, "0");
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    let start = arch::time::ticks();
    while arch::time::ticks() < start + ticks {
        arch::cpu::wait_for_interrupt();
    }
    let events = graph_events();
    tracer_cleanup();
    tracefs::write("options/funcgraph-irqs", "1", FilterMode::Replace).unwrap();
    (returns_of(&events, "kernel_sched_tick"), returns_of(&events, "kernel::tick::on_tick"))
}

/// Sets `options/funcgraph-irqs` as `option` (`funcgraph-irqs` or
/// `nofuncgraph-irqs`) says. Set before the tracer starts: a call hooked
/// under the old setting (another CPU's tick, say) would record its return
/// under the new one.
fn set_irqs_option(option: &str) {
    let on = if option.starts_with("no") { "0" } else { "1" };
    tracefs::write("options/funcgraph-irqs", on, FilterMode::Replace).unwrap();
}

/// How many of `events` are returns of the function called `name`.
fn returns_of(events: &[trace::events::record::Event], name: &str) -> usize {
    let returns = events.iter().filter_map(|event| match event {
        trace::events::record::Event::GraphExit(exit) => ftrace::symbols::kernel::name_of(exit.func as usize),
        _ => None,
    });
    returns.filter(|function| *function == name).count()
}

/// `options/funcgraph-irqs`: off, the graph tracer leaves out what hardware
/// interrupt handlers call (the scheduler's tick), as Linux's does with its
/// `in_hardirq()` test, and still records the softirq-like bottom half
/// (`on_tick`) and a `set_graph_function` in an interrupt; on (the
/// default), it records everything.
#[ktest]
fn funcgraph_irqs_off_leaves_interrupt_handlers_out() {
    assert_eq!(read("options/funcgraph-irqs"), "1\n", "on by default");
    let (in_irq, in_softirq) = tick_returns_recorded("nofuncgraph-irqs", "", 5);
    assert_eq!(in_irq, 0, "no tick handler recorded with funcgraph-irqs off");
    assert!(in_softirq >= 5, "the bottom half is no hardware interrupt: {in_softirq}");
    let (in_irq, _) = tick_returns_recorded("nofuncgraph-irqs", "kernel_sched_tick", 5);
    assert!(in_irq >= 5, "set_graph_function names it: recorded even in an interrupt ({in_irq})");
    let (in_irq, _) = tick_returns_recorded("funcgraph-irqs", "", 5);
    assert!(in_irq >= 5, "every tick handler recorded with it on: {in_irq}");
}

/// An interrupt taken inside a `set_graph_function` call is inside it too
/// (Linux keeps that mark per task): its handler is recorded, as long as
/// `funcgraph-irqs` lets interrupts be traced at all.
#[ktest]
fn interrupts_inside_a_set_graph_function_call_are_recorded() {
    for (option, recorded) in [("funcgraph-irqs", true), ("nofuncgraph-irqs", false)] {
        set_irqs_option(option);
        tracer_setup("kernel::tests::tracers::function_graph::waits_two_ticks kernel_sched_tick", "*waits_two_ticks", "0");
        tracefs::write("trace", "", FilterMode::Replace).unwrap();
        waits_two_ticks();
        let events = graph_events();
        tracer_cleanup();
        tracefs::write("options/funcgraph-irqs", "1", FilterMode::Replace).unwrap();
        assert_eq!(returns_of(&events, "kernel::tests::tracers::function_graph::waits_two_ticks"), 1, "{option}");
        let ticks = returns_of(&events, "kernel_sched_tick");
        match recorded {
            // This CPU's ticks during two of the global tick count (at
            // least one: the clocks need not be in step).
            true => assert!(ticks >= 1, "{option}: {ticks} ticks recorded"),
            false => assert_eq!(ticks, 0, "{option}"),
        }
    }
    // The same for set_graph_notrace: nothing below it, interrupts included.
    tracer_setup("kernel::tests::tracers::function_graph::waits_five_ticks kernel_sched_tick", "", "0");
    tracefs::write("set_graph_notrace", "*waits_five_ticks", FilterMode::Replace).unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    waits_five_ticks();
    let events = graph_events();
    tracer_cleanup();
    // Ticks after the call are recorded at depth 0; one inside it would
    // be one deeper. Its hook is on the shadow stack a little before its
    // entry marks it notrace, and a little after its return unmarks it (as
    // in Linux, whose task bit is set by the entry callback and cleared by
    // the return's): a tick in either window is recorded. So this allows
    // one, of the four or more a CPU takes during the wait.
    let deeper =
        events.iter().filter(|event| matches!(event, trace::events::record::Event::GraphEntry(entry) if entry.depth > 0)).count();
    assert!(deeper <= 1, "no tick inside a set_graph_notrace call, but at its edges: {events:?}");
}

/// An interrupt handler listed in `set_graph_function` that interrupts a
/// task inside another listed call marks its own context: with
/// `funcgraph-irqs` off, what it calls is recorded with it (the boot CPU's
/// tick wakes a sleeper: `kernel_sched_tick` calls `enqueue`), whatever it
/// interrupted.
#[ktest]
fn a_listed_interrupt_handler_keeps_its_calls_inside_another_listed_call() {
    crate::sched::set_affinity(1); // the boot CPU, whose tick wakes sleepers
    tracer_setup(
        "kernel::tests::tracers::function_graph::waits_two_ticks kernel_sched_tick kernel::sched::enqueue",
        "*waits_two_ticks kernel_sched_tick",
        "0",
    );
    tracefs::write("trace_options", "nofuncgraph-irqs", FilterMode::Replace).unwrap();
    // The sleeper's wake-up must fall inside the wait: a few tries.
    let mut woken_inside = false;
    let mut last = String::new();
    for _ in 0..5 {
        tracefs::write("trace", "", FilterMode::Replace).unwrap();
        let sleeper = crate::sched::spawn_on("sleeper", 1 << 1, || {
            crate::sched::sleep_ms(0);
            0
        })
        .unwrap();
        waits_two_ticks();
        sleeper.join();
        let events = graph_events();
        last = read("trace");
        // waits_two_ticks at depth 0, the tick at 1, its enqueue at 2.
        woken_inside = events.iter().any(|event| match event {
            trace::events::record::Event::GraphExit(exit) => {
                exit.depth == 2 && ftrace::symbols::kernel::name_of(exit.func as usize) == Some("kernel::sched::enqueue")
            }
            _ => false,
        });
        if woken_inside {
            break;
        }
    }
    tracer_cleanup();
    tracefs::write("options/funcgraph-irqs", "1", FilterMode::Replace).unwrap();
    crate::sched::set_affinity(u64::MAX);
    assert!(woken_inside, "the tick's enqueue recorded inside the wait: {last}");
}

/// Busy for two timer ticks: a call long enough for an overhead mark. Not
/// preempted (so not moved to another CPU), which would split its entry
/// and return.
#[inline(never)]
pub(super) fn waits_two_ticks() {
    waits_ticks(2);
}

/// [`waits_two_ticks`] for five.
#[inline(never)]
fn waits_five_ticks() {
    waits_ticks(5);
}

fn waits_ticks(ticks: u64) {
    let _pinned = arch::preempt::Guard::new();
    let start = arch::time::ticks();
    while arch::time::ticks() < start + ticks {
        arch::cpu::wait_for_interrupt();
    }
}

/// `options/funcgraph-overhead`: a long call's duration is marked (`+`
/// over 10 us up to `$` over 1 s); off, a blank stands in the mark's place.
#[ktest]
fn funcgraph_overhead_marks_long_calls() {
    assert_eq!(read("options/funcgraph-overhead"), "1\n", "on by default");
    tracer_setup("kernel::tests::tracers::function_graph::waits_two_ticks", "", "0");
    waits_two_ticks();
    // " 0) # 2000.123 us  |  kernel::tests::tracers::function_graph::waits_two_ticks();"
    let mark = || {
        let trace = read("trace");
        let call = trace.lines().find(|line| line.ends_with("::waits_two_ticks();")).map(String::from);
        let call = call.unwrap_or_else(|| panic!("no call in:\n{trace}"));
        (call.split_once(") ").and_then(|(_, rest)| rest.chars().next()), call)
    };
    let (marked, line) = mark();
    assert!(marked.is_some_and(|mark| "+!#*@$".contains(mark)), "a long call is marked: {line}");
    tracefs::write("options/funcgraph-overhead", "0", FilterMode::Replace).unwrap();
    let (unmarked, line) = mark();
    tracefs::write("options/funcgraph-overhead", "1", FilterMode::Replace).unwrap();
    tracer_cleanup();
    assert_eq!(unmarked, Some(' '), "no mark with funcgraph-overhead off: {line}");
}

fn read(path: &str) -> String {
    let mut text = String::new();
    tracefs::read(path, &mut text).unwrap();
    text
}

/// Sleeps 20 ms, then returns: a call that is mostly time switched out.
#[inline(never)]
fn sleeps_twenty_ms() {
    crate::sched::sleep_ms(20);
}

/// The durations of `name`'s returns in the buffer, in nanoseconds.
fn durations_of(name: &str) -> Vec<u64> {
    let returns = graph_events().into_iter().filter_map(|event| match event {
        trace::events::record::Event::GraphExit(exit) if ftrace::symbols::kernel::name_of(exit.func as usize) == Some(name) => {
            Some(exit.duration())
        }
        _ => None,
    });
    returns.collect()
}

/// `options/sleep-time` (on by default): a call's duration counts the time
/// its task spent switched out; off, that time is taken out, as Linux's
/// does, for the graph tracer and for the function profiler.
#[ktest]
fn sleep_time_off_takes_the_time_switched_out_out_of_a_duration() {
    const NAME: &str = "kernel::tests::tracers::function_graph::sleeps_twenty_ms";
    const MS: u64 = 1_000_000;
    assert_eq!(read("options/sleep-time"), "1\n", "on by default");
    tracer_setup(NAME, "", "0");
    sleeps_twenty_ms();
    let with_sleep = durations_of(NAME);
    tracefs::write("options/sleep-time", "0", FilterMode::Replace).unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    sleeps_twenty_ms();
    let without_sleep = durations_of(NAME);
    tracer_cleanup();

    // The profiler follows the top level's option.
    let profiled = |sleep_time: &str| {
        tracefs::write("options/sleep-time", sleep_time, FilterMode::Replace).unwrap();
        profiled_times(NAME, sleeps_twenty_ms, &[NAME])[0]
    };
    let profiled_without = profiled("0");
    let profiled_with = profiled("1");
    assert_eq!(read("options/sleep-time"), "1\n");

    assert!(matches!(with_sleep[..], [ns] if ns >= 20 * MS), "the sleep counts: {with_sleep:?}");
    assert!(matches!(without_sleep[..], [ns] if ns < 10 * MS), "the sleep taken out: {without_sleep:?}");
    assert!(profiled_with >= 20_000.0, "{profiled_with} us");
    assert!(profiled_without < 10_000.0, "{profiled_without} us");
}

/// Profiles the functions `filter` selects while `run` runs; answers the
/// time `trace_stat` gives each of `names`, in microseconds (each must be
/// profiled on one CPU only, and differ from the others in its first 30
/// characters, which is what the profiler prints of a name, as Linux's).
fn profiled_times(filter: &str, run: fn(), names: &[&str]) -> Vec<f64> {
    tracefs::write("set_ftrace_filter", filter, FilterMode::Replace).unwrap();
    tracefs::write("function_profile_enabled", "1", FilterMode::Replace).unwrap();
    // On one CPU: the profiler adds a return's time to the returning CPU's
    // table, which drops it if the call was counted on another (as Linux's
    // per-CPU tables do), and a sleeping task may wake elsewhere.
    crate::sched::set_affinity(1);
    run();
    crate::sched::set_affinity(u64::MAX);
    tracefs::write("function_profile_enabled", "0", FilterMode::Replace).unwrap();
    tracefs::write("set_ftrace_filter", "", FilterMode::Replace).unwrap();
    let stats: String =
        (0..ring_buffer::trace_buffer::cpus()).map(|cpu| read(&alloc::format!("trace_stat/function{cpu}"))).collect();
    // "  kernel::tests::tracers::function_graph::s    1    20345.67 us    ..."
    let time_of = |name: &str| {
        let line = stats.lines().find(|line| line.trim_start().starts_with(&name[..30]));
        let columns: Vec<&str> = line.unwrap_or_else(|| panic!("{name} not profiled:\n{stats}")).split_whitespace().collect();
        columns.get(2).and_then(|time| time.parse().ok()).unwrap_or_else(|| panic!("no time for {name}:\n{stats}"))
    };
    names.iter().map(|name| time_of(name)).collect()
}

/// `options/graph-time` (on by default): the profiler's time for a
/// function counts the calls it makes; off, only its own, as Linux's.
#[ktest]
fn graph_time_off_leaves_a_functions_calls_out_of_its_profiled_time() {
    // (The outer function is the module above's: the profiler prints the
    // first 30 characters of a name, and the two must differ there.)
    const OUTER: &str = "kernel::tests::tracers::calls_waits_two_ticks";
    const INNER: &str = "kernel::tests::tracers::function_graph::waits_two_ticks";
    let filter = alloc::format!("{OUTER}\n{INNER}");
    assert_eq!(read("options/graph-time"), "1\n", "on by default");
    let with_calls = profiled_times(&filter, super::calls_waits_two_ticks, &[OUTER, INNER]);
    tracefs::write("options/graph-time", "0", FilterMode::Replace).unwrap();
    let own_only = profiled_times(&filter, super::calls_waits_two_ticks, &[OUTER, INNER]);
    tracefs::write("options/graph-time", "1", FilterMode::Replace).unwrap();
    // Waiting for a second tick takes most of a tick (a millisecond).
    assert!(with_calls[1] >= 500.0 && with_calls[0] >= with_calls[1], "the callee's time counts: {with_calls:?}");
    // Its own: the tracing of the inner call around the inner call's time
    // (under emulation, a first run's code translation too).
    assert!(own_only[1] >= 500.0 && own_only[0] * 4.0 < own_only[1], "only the caller's own time: {own_only:?}");
}

/// `options/funcgraph-overrun` (off by default): after each closing brace,
/// Linux's ` (Overruns: N)` line with the task's shadow-stack overruns.
#[ktest]
fn funcgraph_overrun_prints_the_overruns_after_each_closing_brace() {
    tracer_setup("kernel::workload::fib", "", "0");
    assert_eq!(fib(3), 2);
    let plain = read("trace");
    tracefs::write("options/funcgraph-overrun", "1", FilterMode::Replace).unwrap();
    let with_overruns = read("trace");
    tracefs::write("options/funcgraph-overrun", "0", FilterMode::Replace).unwrap();
    tracer_cleanup();
    let is_overrun_line = |line: &str| {
        line.strip_prefix(" (Overruns: ").and_then(|rest| rest.strip_suffix(')')).is_some_and(|n| n.parse::<u64>().is_ok())
    };
    assert!(!plain.lines().any(|line| line.contains("Overruns")), "{plain}");
    let lines: Vec<&str> = with_overruns.lines().collect();
    let braces: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].trim_end().ends_with('}')).collect();
    assert_eq!(braces.len(), 2, "fib(3) closes two calls: {with_overruns}");
    for i in braces {
        assert!(lines.get(i + 1).is_some_and(|line| is_overrun_line(line)), "after {:?}: {with_overruns}", lines[i]);
    }
    assert_eq!(lines.iter().filter(|line| is_overrun_line(line)).count(), 2, "none after a leaf: {with_overruns}");
}
