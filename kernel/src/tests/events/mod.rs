//! Event filters (`events/GRP/EVENT/filter`) and `set_event_pid`, on the
//! scheduler's events and on fprobe events, as a Linux user writes them.

mod probe_events;
mod sched;
mod synthetic;
pub(crate) mod triggers;

use alloc::vec::Vec;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::{fib, run_parallel};

/// How many of fib(n)'s calls (itself included) take an argument for
/// which `keep` holds.
fn fib_calls_where(n: u64, keep: &dyn Fn(u64) -> bool) -> usize {
    let here = usize::from(keep(n));
    match n {
        0 | 1 => here,
        _ => here + fib_calls_where(n - 1, keep) + fib_calls_where(n - 2, keep),
    }
}

/// The `n=` values of an fprobe event's lines in `trace`.
pub(crate) fn event_values(trace: &str, event: &str) -> Vec<u64> {
    let marker = alloc::format!(": {event}: (");
    trace
        .lines()
        .filter(|line| line.contains(&marker))
        .map(|line| {
            let value = line.rsplit(" n=").next().unwrap_or_default();
            match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => value.parse(),
            }
            .unwrap_or_else(|_| panic!("{line}"))
        })
        .collect()
}

fn refused(path: &str, text: &str) -> bool {
    matches!(tracefs::write(path, text, FilterMode::Replace), Err(TracefsError::Invalid(_) | TracefsError::Filter { .. }))
}

#[ktest]
fn a_filter_keeps_only_the_probe_events_that_match() {
    tracefs::write("dynamic_events", "f:big fib n=$arg1", FilterMode::Append).unwrap();
    let filter = "events/fprobes/big/filter";
    assert_eq!(read(filter), "none\n");
    write(filter, "n > 3 && !(n == 7 || n == 0x9)");
    assert_eq!(read(filter), "n > 3 && !(n == 7 || n == 0x9)\n");
    write("events/fprobes/big/enable", "1");
    assert_eq!(fib(10), 55);
    let values = event_values(&read("trace"), "big");
    let keep = |n: u64| n > 3 && n != 7 && n != 9;
    assert_eq!(values.len(), fib_calls_where(10, &keep), "{values:?}");
    assert!(values.iter().all(|&n| keep(n)), "{values:?}");
    let me = ftrace::task::current().pid();
    write(filter, &alloc::format!("common_pid != {me} || __probe_ip == 0"));
    write("trace", "");
    assert_eq!(fib(4), 3);
    assert_eq!(event_values(&read("trace"), "big"), [], "this task's calls are filtered out");
    for bad in ["n >", "m == 1", "n ~ 3*", "(n == 1", "n == 0x", "n == 1 ||", "n = 1", "n == 1 n"] {
        assert!(refused(filter, bad), "{bad}");
    }
    assert!(read(filter).starts_with("common_pid != "), "a refused filter changes nothing");
    write(filter, "0");
    assert_eq!(read(filter), "none\n");
    write("trace", "");
    assert_eq!(fib(3), 2);
    assert_eq!(event_values(&read("trace"), "big").len(), 5, "no filter: every call");
    write("events/fprobes/big/enable", "0");
    assert!(refused("events/fprobes/nosuch/filter", "n == 1"));
    tracefs::write("dynamic_events", "-:big", FilterMode::Append).unwrap();
    write("trace", "");
}

/// The `sched_switch` lines of `trace`.
fn switches(trace: &str) -> Vec<&str> {
    trace.lines().filter(|line| line.contains(": sched_switch: ")).collect()
}

/// Checks, in trace order, that every switch to `pid` after it slept or
/// blocked (`prev_state=` one of `states`) follows a `sched_wakeup` of it,
/// and answers how many such wake-ups there were.
fn wakeups_before_switch_ins(trace: &str, pid: i64, states: &[&str]) -> usize {
    let (out, woken, switched_in) =
        (alloc::format!("prev_pid={pid} "), alloc::format!(": sched_wakeup: comm="), alloc::format!(" next_pid={pid} "));
    let woken_pid = alloc::format!(" pid={pid} prio=");
    let (mut asleep, mut wakeups) = (false, 0);
    for line in trace.lines() {
        if line.contains(": sched_switch: ") && line.contains(&out) {
            asleep = states.iter().any(|state| line.contains(&alloc::format!("prev_state={state} ")));
        } else if line.contains(&woken) && line.contains(&woken_pid) {
            assert!(asleep, "woken while not asleep: {line}\n{trace}");
            asleep = false;
            wakeups += 1;
        }
        if line.contains(": sched_switch: ") && line.contains(&switched_in) {
            assert!(!asleep, "switched in with no sched_wakeup since it slept: {line}\n{trace}");
        }
    }
    wakeups
}

#[ktest]
fn every_wakeup_is_recorded_before_the_woken_task_runs() {
    let clock = read("trace_clock");
    write("trace_clock", "global");
    write("events/sched/enable", "1");
    let me = ftrace::task::current().pid();
    // Long enough that the join below blocks however late this task gets
    // to it.
    let sleeper = crate::sched::spawn("sleeper", || {
        crate::sched::sleep_ms(20);
        7
    })
    .unwrap();
    let pid = sleeper.pid();
    assert_eq!(sleeper.join(), 7);
    write("events/sched/enable", "0");
    let trace = read("trace");
    let current = clock.split_whitespace().find(|name| name.starts_with('[')).unwrap_or("[local]");
    write("trace_clock", current.trim_matches(['[', ']']));
    write("trace", "");

    let new = alloc::format!(": sched_wakeup_new: comm=sleeper pid={pid} prio=120 target_cpu=");
    let first_in = alloc::format!(" next_pid={pid} ");
    let (new_at, in_at) = (trace.find(&new), trace.find(&first_in));
    assert!(new_at.is_some() && new_at < in_at, "the new task's wake-up comes first: {trace}");
    assert_eq!(trace.matches(&new).count(), 1, "{trace}");
    assert!(wakeups_before_switch_ins(&trace, pid.into(), &["S"]) >= 1, "its sleep ended in a wake-up: {trace}");
    assert!(wakeups_before_switch_ins(&trace, me.into(), &["D", "S"]) >= 1, "the join ended in a wake-up: {trace}");
    // An idle task leaves the CPU runnable, not preempted, as in Linux.
    let idle_out: Vec<&str> = switches(&trace).into_iter().filter(|line| line.contains(" prev_pid=0 ")).collect();
    assert!(!idle_out.is_empty(), "an idle CPU took the woken work: {trace}");
    assert!(idle_out.iter().all(|line| line.contains(" prev_state=R ==> ")), "{idle_out:?}");
}

#[ktest]
fn a_filter_on_sched_switch_compares_strings_and_numbers() {
    let filter = "events/sched/sched_switch/filter";
    write(filter, "next_comm ~ \"fib*\" && next_pid > 0");
    write("events/sched/sched_switch/enable", "1");
    run_parallel(2, "fib", &["12"]).unwrap();
    let trace = read("trace");
    let kept = switches(&trace);
    assert!(kept.len() >= 2, "each worker was switched to: {trace}");
    assert!(kept.iter().all(|line| line.contains("next_comm=fib/")), "{trace}");
    for bad in ["next_comm < 3", "prev_pid ~ 1", "next_comm", "cpus == 1", "CPU ~ 1"] {
        assert!(refused(filter, bad), "{bad}");
    }
    write(filter, "0");
    write("trace", "");
    run_parallel(2, "fib", &["12"]).unwrap();
    let trace = read("trace");
    assert!(switches(&trace).iter().any(|line| !line.contains("next_comm=fib/")), "unfiltered: {trace}");
    write("events/sched/sched_switch/enable", "0");
    write("trace", "");
}

/// Linux's generic fields, which every event has: `CPU` is the CPU the
/// event is recorded on, `COMM` the running task (on `sched_switch`, the
/// one switched away from).
#[ktest]
fn generic_fields_filter_by_the_recording_cpu_and_the_running_task() {
    let filter = "events/sched/sched_switch/filter";
    write("events/sched/sched_switch/enable", "1");
    let mut recorded = 0;
    // `CPUS{...}` (Linux 6.6): a list of one CPU is that CPU; of several,
    // `&` is "one of them".
    let cases = [("CPU == 0", true), ("cpu != 0", false), ("CPU & CPUS{0}", true), ("CPU & CPUS{1-2,3}", false)];
    for (expression, on_cpu0) in cases {
        write(filter, expression);
        write("trace", "");
        run_parallel(2, "fib", &["12"]).unwrap();
        let trace = read("trace");
        let kept = switches(&trace);
        assert!(kept.iter().all(|line| line.contains(" [000] ") == on_cpu0), "{expression}: {trace}");
        recorded += kept.len();
    }
    assert!(recorded > 0, "each switch is on CPU 0 or not");
    write(filter, "COMM ~ \"fib/*\" && common_cpu >= 0");
    write("trace", "");
    run_parallel(2, "fib", &["12"]).unwrap();
    let trace = read("trace");
    let kept = switches(&trace);
    assert!(kept.len() >= 2, "each worker was switched away from: {trace}");
    assert!(kept.iter().all(|line| line.contains(" prev_comm=fib/")), "{trace}");
    write(filter, "0");
    write("events/sched/sched_switch/enable", "0");
    write("trace", "");
}

/// `events/GRP/filter` filters each of the group's events that has the
/// fields (Linux's subsystem filter), and reads as Linux's note.
#[ktest]
fn a_group_filter_goes_to_each_event_with_its_fields() {
    let note = "### global filter ###\n# Use this to set filters for multiple events.\n";
    assert!(read("events/sched/filter").starts_with(note), "{}", read("events/sched/filter"));
    write("events/sched/filter", "prev_pid == 0");
    assert_eq!(read("events/sched/sched_switch/filter"), "prev_pid == 0\n");
    assert_eq!(read("events/sched/sched_wakeup/filter"), "none\n", "no prev_pid there: as it was");
    assert!(read("events/sched/filter").starts_with(note), "the note still, as in Linux");
    write("events/sched/filter", "common_pid > 0");
    for event in ["sched_switch", "sched_wakeup", "sched_wakeup_new"] {
        assert_eq!(read(&alloc::format!("events/sched/{event}/filter")), "common_pid > 0\n", "{event}");
    }
    let refused = tracefs::write("events/sched/filter", "nosuch == 1", FilterMode::Replace);
    assert!(matches!(&refused, Err(TracefsError::Filter { .. })), "no event has the field: {refused:?}");
    assert_eq!(read("events/sched/sched_wakeup/filter"), "common_pid > 0\n", "a refusal changes nothing");
    write("events/sched/filter", "0");
    for event in ["sched_switch", "sched_wakeup", "sched_wakeup_new"] {
        assert_eq!(read(&alloc::format!("events/sched/{event}/filter")), "none\n", "{event}");
    }
    assert!(matches!(tracefs::read("events/nosuch/filter", &mut alloc::string::String::new()), Err(_)));
}

#[ktest]
fn set_event_pid_records_only_the_listed_tasks_events() {
    tracefs::write("dynamic_events", "f:mine fib n=$arg1", FilterMode::Append).unwrap();
    let me = ftrace::task::current().pid();
    assert_eq!(read("set_event_pid"), "");
    write("set_event_pid", &alloc::format!("{me}"));
    assert_eq!(read("set_event_pid"), alloc::format!("{me}\n"));
    write("events/fprobes/mine/enable", "1");
    write("events/sched/sched_switch/enable", "1");
    assert_eq!(fib(3), 2);
    run_parallel(2, "fib", &["3"]).unwrap();
    let trace = read("trace");
    assert_eq!(event_values(&trace, "mine").len(), 5, "only this task's fib(3): {trace}");
    let mine = (alloc::format!("prev_pid={me} "), alloc::format!("next_pid={me} "));
    let switched = switches(&trace);
    assert!(!switched.is_empty(), "this task waited for the workers: {trace}");
    assert!(switched.iter().all(|line| line.contains(&mine.0) || line.contains(&mine.1)), "{trace}");

    write("trace", "");
    write("options/event-fork", "1");
    run_parallel(1, "fib", &["2"]).unwrap();
    assert_eq!(event_values(&read("trace"), "mine").len(), 3, "the child's events are recorded");
    let alone = alloc::format!("{me}\n");
    assert_eq!(read("set_event_pid"), alone, "the child left the list once it was gone, as in Linux");
    write("options/event-fork", "0");
    assert!(refused("set_event_pid", "1 x"));
    assert_eq!(read("set_event_pid"), alone, "a refused write changes nothing");
    write("set_event_pid", "");
    write("events/sched/sched_switch/enable", "0");
    write("events/fprobes/mine/enable", "0");
    tracefs::write("dynamic_events", "-:mine", FilterMode::Append).unwrap();
    write("trace", "");
}

/// Spawns a task that waits for `go` before it ends; answers its handle.
pub(crate) fn waiting_task(go: &'static core::sync::atomic::AtomicBool) -> crate::sched::JoinHandle {
    crate::sched::spawn("waiter", move || {
        while !go.load(core::sync::atomic::Ordering::Acquire) {
            crate::sched::sleep_ms(1);
        }
        0
    })
    .unwrap()
}

#[ktest]
fn a_pid_list_emptied_by_exits_still_filters_until_cleared() {
    use core::sync::atomic::{AtomicBool, Ordering};
    static GO: AtomicBool = AtomicBool::new(false);
    tracefs::write("dynamic_events", "f:gone fib n=$arg1", FilterMode::Append).unwrap();
    write("events/fprobes/gone/enable", "1");
    write("options/event-fork", "1");
    GO.store(false, Ordering::Relaxed);
    let waiter = waiting_task(&GO);
    write("set_event_pid", &alloc::format!("{}", waiter.pid()));
    GO.store(true, Ordering::Release);
    waiter.join();
    assert_eq!(read("set_event_pid"), "", "the task left the list when it ended");
    write("trace", "");
    assert_eq!(fib(3), 2);
    assert_eq!(event_values(&read("trace"), "gone").len(), 0, "the emptied list still filters, as in Linux");
    write("set_event_pid", "");
    assert_eq!(fib(3), 2);
    assert_eq!(event_values(&read("trace"), "gone").len(), 5, "cleared: every task records again");
    write("options/event-fork", "0");
    write("events/fprobes/gone/enable", "0");
    tracefs::write("dynamic_events", "-:gone", FilterMode::Append).unwrap();
    write("trace", "");
}

#[ktest]
fn set_event_notrace_pid_leaves_the_listed_tasks_out() {
    tracefs::write("dynamic_events", "f:notmine fib n=$arg1", FilterMode::Append).unwrap();
    let me = ftrace::task::current().pid();
    write("trace", "");
    assert_eq!(read("set_event_notrace_pid"), "");
    write("set_event_notrace_pid", &alloc::format!("{me}"));
    assert_eq!(read("set_event_notrace_pid"), alloc::format!("{me}\n"));
    write("events/fprobes/notmine/enable", "1");
    assert_eq!(fib(3), 2);
    run_parallel(1, "fib", &["2"]).unwrap();
    assert_eq!(event_values(&read("trace"), "notmine").len(), 3, "the worker's fib(2) only: {}", read("trace"));
    // The notrace list wins over set_event_pid, as in Linux.
    write("trace", "");
    write("set_event_pid", &alloc::format!("{me}"));
    assert_eq!(fib(3), 2);
    assert_eq!(event_values(&read("trace"), "notmine").len(), 0, "{}", read("trace"));
    write("set_event_pid", "");
    // A child of a task in the notrace list joins it with event-fork.
    write("options/event-fork", "1");
    run_parallel(1, "fib", &["2"]).unwrap();
    assert_eq!(event_values(&read("trace"), "notmine").len(), 0, "{}", read("trace"));
    assert_eq!(read("set_event_notrace_pid"), alloc::format!("{me}\n"), "the child came and went");
    write("options/event-fork", "0");
    // Listed in ascending order, as Linux's pid bitmap reads.
    let (a, b) = (me + 200_000, me + 100_000);
    write("set_event_notrace_pid", &alloc::format!("{a} {me} {b}"));
    assert_eq!(read("set_event_notrace_pid"), alloc::format!("{me}\n{b}\n{a}\n"));
    assert!(refused("set_event_notrace_pid", "x"));
    write("set_event_notrace_pid", "");
    assert_eq!(fib(1), 1);
    assert_eq!(event_values(&read("trace"), "notmine").len(), 1, "cleared: recorded again");
    write("events/fprobes/notmine/enable", "0");
    tracefs::write("dynamic_events", "-:notmine", FilterMode::Append).unwrap();
    write("trace", "");
}

/// A hit `set_event_notrace_pid` (or `set_event_pid`) leaves out reaches
/// only the triggers Linux runs before reserving the event's record
/// (unconditional `traceon`, `snapshot`, `enable_event`...): a conditional
/// or post trigger (`stacktrace`, anything with `if`) neither fires nor
/// spends its count, as Linux's pid check refuses the record first.
#[ktest]
fn the_event_pid_filter_keeps_conditional_triggers_from_firing() {
    tracefs::write("dynamic_events", "f:pidtrig fib n=$arg1", FilterMode::Append).unwrap();
    let trigger = "events/fprobes/pidtrig/trigger";
    tracefs::write(trigger, "stacktrace:5 if n >= 0", FilterMode::Append).unwrap();
    write("set_event_notrace_pid", &alloc::format!("{}", ftrace::task::current().pid()));
    assert_eq!(fib(3), 2);
    assert_eq!(read(trigger), "stacktrace:count=5 if n >= 0\n", "left out: not fired, count kept");
    write("set_event_notrace_pid", "");
    assert_eq!(fib(3), 2);
    assert_eq!(read(trigger), "stacktrace:count=0 if n >= 0\n", "kept: fired on each of the five calls");
    tracefs::write(trigger, "!stacktrace", FilterMode::Append).unwrap();
    tracefs::write("dynamic_events", "-:pidtrig", FilterMode::Append).unwrap();
    write("trace", "");
}
