//! Synthetic events and the `hist` variables and `onmatch()` actions that
//! record them, as a Linux user writes them.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs;
use crate::workload::fib;

fn append(path: &str, text: &str) {
    tracefs::write(path, text, FilterMode::Append).unwrap_or_else(|error| panic!("{path} <<- {text}: {error}"));
}

fn refused(path: &str, text: &str) -> String {
    match tracefs::write(path, text, FilterMode::Append) {
        Err(error) => alloc::string::ToString::to_string(&error),
        Ok(()) => panic!("{path} took {text}"),
    }
}

#[ktest]
fn synthetic_events_are_defined_listed_described_and_removed() {
    append("synthetic_events", "fib_time u64 us; s64 n; char comm[16]");
    assert_eq!(read("synthetic_events"), "fib_time\tu64 us; s64 n; char[16] comm\n");
    assert!(read("dynamic_events").contains("s:synthetic/fib_time\tu64 us; s64 n; char[16] comm\n"));
    assert!(read("available_events").contains("synthetic:fib_time\n"));
    for file in ["enable", "filter", "format", "hist", "id", "trigger"] {
        assert!(tracefs::exists(&format!("events/synthetic/fib_time/{file}")), "{file}");
    }
    let format = read("events/synthetic/fib_time/format");
    assert!(format.contains("\tfield:s64 n;\toffset:16;\tsize:8;\tsigned:1;\n"), "{format}");
    assert!(format.contains("print fmt: \"us=%llu n=%lld comm=%s\", REC->us, REC->n, REC->comm"), "{format}");
    let id: u32 = read("events/synthetic/fib_time/id").trim().parse().unwrap();
    assert!(id >= 1000, "a dynamic event's: {id}");
    // Refusals change nothing.
    assert!(refused("synthetic_events", "fib_time u64 x").contains("already exists"));
    assert!(refused("synthetic_events", "other float x").contains("unknown type 'float'"));
    assert!(refused("synthetic_events", "!nosuch").contains("no event 'nosuch'"));
    assert_eq!(read("synthetic_events"), "fib_time\tu64 us; s64 n; char[16] comm\n");
    // Enabled, it cannot go.
    write("events/synthetic/fib_time/enable", "1");
    assert!(refused("synthetic_events", "!fib_time").contains("is enabled"));
    write("events/synthetic/fib_time/enable", "0");
    append("synthetic_events", "!fib_time");
    assert_eq!(read("synthetic_events"), "");
    // Through dynamic_events, as Linux takes it too.
    append("dynamic_events", "s:synthetic/other u32 a");
    assert_eq!(read("synthetic_events"), "other\tu32 a\n");
    append("dynamic_events", "-:synthetic/other");
    assert_eq!(read("synthetic_events"), "");
}

/// A truncating write (`>`) to `dynamic_events` removes every probe and
/// synthetic event, all or none: an enabled event of either kind refuses
/// it before anything goes, and so does a line that would be refused
/// (checked first, where Linux's open has emptied the file already); the
/// same for `> synthetic_events`.
#[ktest]
fn a_refused_truncating_write_removes_no_dynamic_event() {
    let replace = |path: &str, text: &str| tracefs::write(path, text, FilterMode::Replace);
    append("dynamic_events", "f:keepme fib");
    append("synthetic_events", "kept u64 x");
    let both = "f:fprobes/keepme fib\ns:synthetic/kept\tu64 x\n";
    assert_eq!(read("dynamic_events"), both);
    write("events/synthetic/kept/enable", "1");
    let busy = replace("dynamic_events", "f:fresh fib");
    assert!(busy.as_ref().is_err_and(|error| format!("{error}").contains("kept")), "{busy:?}");
    assert_eq!(read("dynamic_events"), both, "the probe event stays too");
    write("events/synthetic/kept/enable", "0");
    for (path, line) in [
        ("dynamic_events", "f:fresh no::such::function"),
        ("dynamic_events", "s:fresh u7 x"),
        ("dynamic_events", "-:keepme"),
        ("synthetic_events", "fresh u7 x"),
        ("synthetic_events", "!nosuch"),
    ] {
        assert!(replace(path, line).is_err(), "{path} < {line}");
        assert_eq!(read("dynamic_events"), both, "{path} < {line}");
    }
    replace("synthetic_events", "!kept").unwrap();
    assert_eq!(read("dynamic_events"), "f:fprobes/keepme fib\n", "'!kept' with '>': gone with the rest");
    append("synthetic_events", "kept u64 x");
    replace("dynamic_events", "s:fresh u32 y").unwrap();
    assert_eq!(read("dynamic_events"), "s:synthetic/fresh\tu32 y\n");
    replace("dynamic_events", "f:fresh2 fib").unwrap();
    assert_eq!(read("dynamic_events"), "f:fprobes/fresh2 fib\n");
    replace("dynamic_events", "").unwrap();
    assert_eq!(read("dynamic_events"), "");
}

/// Actions that record the event their trigger is on fan out: eight on
/// each hit here, nested four deep, record 112 events without a bound.
/// One outermost action records at most `MAX_FIRES` in all.
#[ktest]
fn actions_that_fan_out_record_a_bounded_number_of_events() {
    use trace::events::hist::SynthTarget;
    append("synthetic_events", "loopy u64 x");
    let actions = "onmax($w).loopy($w):onchange($w).loopy($w):".repeat(4);
    let trigger = format!("hist:keys=common_pid:w=x+1:{}", actions.trim_end_matches(':'));
    append("events/synthetic/loopy/trigger", &trigger);
    write("events/synthetic/loopy/enable", "1");
    write("trace", "");
    let loopy = trace::events::synth::find("loopy").unwrap();
    {
        let _irq = arch::irq::IrqGuard::new();
        loopy.fire(&[trace::events::filter::FieldValue::Unsigned(1)]);
    }
    let recorded = read("trace").lines().filter(|line| line.contains(" loopy: x=")).count();
    write("events/synthetic/loopy/enable", "0");
    append("events/synthetic/loopy/trigger", &format!("!{trigger}"));
    ftrace::deferred::reclaim();
    append("synthetic_events", "!loopy");
    assert_eq!(recorded, usize::from(trace::events::synth::MAX_FIRES), "the budget, not 112");
}

/// The `n=` of each `fib_time` line, counted.
fn fib_time_calls(trace: &str, comm: &str) -> BTreeMap<u64, usize> {
    let mut calls = BTreeMap::new();
    for line in trace.lines().filter(|line| line.contains(": fib_time: ")) {
        let fields = line.split(": fib_time: ").nth(1).unwrap();
        let value = |name: &str| fields.split(' ').find_map(|field| field.strip_prefix(name)).unwrap_or_else(|| panic!("{line}"));
        let us: u64 = value("d=").parse().unwrap();
        assert!(us > 0, "a call takes time: {line}");
        assert_eq!(value("comm="), comm, "the caller's task: {line}");
        *calls.entry(value("n=").parse().unwrap()).or_default() += 1;
    }
    calls
}

/// `*` and `/` in a variable's expression: worked out before `+` and `-`,
/// each left to right, as Linux does.
#[ktest]
fn expressions_multiply_and_divide_before_they_add() {
    append("dynamic_events", "f:fibx kernel::workload::fib n=$arg1");
    append("events/fprobes/fibx/trigger", "hist:keys=common_pid:x=1+n*3/2:onmax($x).save(n)");
    // A value may be an expression too, as in Linux, and so may a key.
    append("events/fprobes/fibx/trigger", "hist:keys=n:vals=1+n*10");
    append("events/fprobes/fibx/trigger", "hist:keys=n/2");
    assert_eq!(fib(5), 5);
    let hist = read("events/fprobes/fibx/hist");
    // The largest: n=5 gives 1+15/2 = 8 (left to right it would be 9).
    assert!(hist.contains("\tmax:          8  n:          5"), "{hist}");
    // fib(5) calls fib(3) twice: 2 * (1+30).
    assert!(hist.contains("{ n:          3 } hitcount:          2  1+n*10:         62"), "{hist}");
    // n = 0 and 1 (3 and 5 calls), 2 and 3 (3 and 2), 4 and 5 (1 each).
    let halves: Vec<&str> = hist.lines().filter(|line| line.starts_with("{ n/2:")).collect();
    assert_eq!(
        halves,
        [
            "{ n/2:          2 } hitcount:          2",
            "{ n/2:          1 } hitcount:          5",
            "{ n/2:          0 } hitcount:          8"
        ],
        "{hist}"
    );
    append("events/fprobes/fibx/trigger", "!hist:keys=n/2");
    append("events/fprobes/fibx/trigger", "!hist:keys=n:vals=1+n*10");
    append("events/fprobes/fibx/trigger", "!hist:keys=common_pid:x=1+n*3/2:onmax($x).save(n)");
    append("dynamic_events", "-:fibx");
}

/// `onmax($VAR).trace(...)` and `onchange($VAR).SYNTH(...)`: a synthetic
/// event for each new largest value of an entry, or each change.
#[ktest]
fn onmax_and_onchange_record_synthetic_events() {
    append("dynamic_events", "f:fibn kernel::workload::fib n=$arg1");
    append("synthetic_events", "fib_top u64 top; pid_t pid");
    append("synthetic_events", "fib_moved u64 to");
    let line = "hist:keys=common_pid:x=n:onmax($x).trace(fib_top,$x,common_pid):onchange($x).fib_moved($x)";
    append("events/fprobes/fibn/trigger", line);
    assert_eq!(
        read("events/fprobes/fibn/trigger"),
        "hist:keys=common_pid:vals=hitcount:x=n:sort=hitcount:size=2048:onmax($x).trace(fib_top,$x,common_pid):onchange($x).fib_moved($x) [active]\n"
    );
    write("events/synthetic/enable", "1");
    write("trace", "");
    // n in call order: 3, 2, 1, 0, 1: a new largest once (3, past the
    // start of 0), a change at every call.
    assert_eq!(fib(3), 2);
    let trace = read("trace");
    let pid = ftrace::task::current().pid();
    let tops: Vec<&str> = trace.lines().filter_map(|line| line.split(": fib_top: ").nth(1)).collect();
    assert_eq!(tops, [format!("top=3 pid={pid}")], "{trace}");
    let moves: Vec<&str> = trace.lines().filter_map(|line| line.split(": fib_moved: ").nth(1)).collect();
    assert_eq!(moves, ["to=3", "to=2", "to=1", "to=0", "to=1"], "{trace}");
    let bad = refused("events/fprobes/fibn/trigger", "hist:keys=common_pid:y=n:onmax($y).fib_top($y)");
    assert!(bad.contains("has 2 fields, the action gives 1"), "{bad}");
    write("events/synthetic/enable", "0");
    append("events/fprobes/fibn/trigger", &format!("!{line}"));
    append("synthetic_events", "!fib_moved");
    append("synthetic_events", "!fib_top");
    append("dynamic_events", "-:fibn");
    write("trace", "");
}

/// `enable_event:synthetic:NAME`: another event's trigger switches a
/// synthetic event in soft mode, as Linux allows; the event cannot be
/// removed while a trigger names it.
#[ktest]
fn another_events_trigger_switches_a_synthetic_event() {
    append("dynamic_events", "f:fibg kernel::workload::fib n=$arg1");
    append("dynamic_events", "f:fibr kernel::workload::fib%return");
    append("synthetic_events", "fib_seen u64 n");
    append("events/fprobes/fibr/trigger", "enable_event:synthetic:fib_seen:1");
    assert_eq!(read("events/synthetic/fib_seen/enable"), "0*\n", "soft mode, off");
    let busy = refused("synthetic_events", "!fib_seen");
    assert!(busy.contains("'fib_seen' is enabled, has triggers, is named by another event's trigger"), "{busy}");
    // Each change of fib's argument records fib_seen, once it is on.
    let hist = "hist:keys=common_pid:x=n:onchange($x).fib_seen($x)";
    append("events/fprobes/fibg/trigger", hist);
    write("trace", "");
    // Entries n=2, n=1, then fib(1) returns (switching fib_seen on), n=0.
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    let seen: Vec<&str> = trace.lines().filter_map(|line| line.split(": fib_seen: ").nth(1)).collect();
    assert_eq!(seen, ["n=0"], "{trace}");
    assert_eq!(read("events/synthetic/fib_seen/enable"), "1*\n");
    append("events/fprobes/fibr/trigger", "!enable_event:synthetic:fib_seen:1");
    assert_eq!(read("events/synthetic/fib_seen/enable"), "1\n", "left as the trigger switched it");
    // An instance's trigger switches the instance's copy, and holds the
    // event too.
    tracefs::instances::mkdir("instances/synsoft").unwrap();
    append("instances/synsoft/events/fprobes/fibr/trigger", "disable_event:synthetic:fib_seen");
    assert_eq!(read("instances/synsoft/events/synthetic/fib_seen/enable"), "0*\n");
    write("events/synthetic/fib_seen/enable", "0");
    assert!(refused("synthetic_events", "!fib_seen").contains("named by another event's trigger"));
    append("instances/synsoft/events/fprobes/fibr/trigger", "!disable_event:synthetic:fib_seen");
    tracefs::instances::rmdir("instances/synsoft").unwrap();
    write("events/synthetic/fib_seen/enable", "0");
    append("events/fprobes/fibg/trigger", &format!("!{hist}"));
    append("synthetic_events", "!fib_seen");
    append("dynamic_events", "-:fibr");
    append("dynamic_events", "-:fibg");
    write("trace", "");
}

/// The canonical latency recipe on fprobe events: the entry keeps a
/// timestamp per argument, the return reads it once, and `onmatch` records
/// each call's duration as a synthetic event, whose own `hist` counts them.
#[ktest]
fn an_onmatch_action_records_each_calls_duration() {
    append("dynamic_events", "f:fibin kernel::workload::fib n=$arg1");
    append("dynamic_events", "f:fibout kernel::workload::fib%return n=$arg1");
    append("synthetic_events", "fib_time u64 d; u64 n; char comm[16]");
    // A `$NAME` nothing defines, or an action of no event: refused.
    let line = "hist:keys=n:d=common_timestamp-$ts0:onmatch(fprobes.fibin).fib_time($d,n,common_comm)";
    let error = refused("events/fprobes/fibout/trigger", line);
    assert!(error.contains("defines '$ts0'"), "{error}");
    append("events/fprobes/fibin/trigger", "hist:keys=n:ts0=common_timestamp");
    let wrong = refused("events/fprobes/fibout/trigger", "hist:keys=n:d=common_timestamp-$ts0:onmatch(fprobes.fibin).nosuch($d)");
    assert!(wrong.contains("no synthetic event 'nosuch'"), "{wrong}");
    let count =
        refused("events/fprobes/fibout/trigger", "hist:keys=n:d=common_timestamp-$ts0:onmatch(fprobes.fibin).fib_time($d)");
    assert!(count.contains("has 3 fields, the action gives 1"), "{count}");
    append("events/fprobes/fibout/trigger", line);
    assert_eq!(
        read("events/fprobes/fibout/trigger"),
        "hist:keys=n:vals=hitcount:d=common_timestamp-$ts0:sort=hitcount:size=2048:clock=global:onmatch(fprobes.fibin).fib_time($d,n,common_comm) [active]\n"
    );
    append("events/synthetic/fib_time/trigger", "hist:keys=n:vals=hitcount:sort=n");
    write("events/synthetic/fib_time/enable", "1");
    write("trace", "");
    let comm = String::from(trace::events::record::comm_str(ftrace::task::current().comm_bytes()));
    assert_eq!(fib(5), 5);
    let trace = read("trace");
    // fib(5) makes 15 calls: each n as often as the recursion calls it.
    let expected: BTreeMap<u64, usize> = [(0, 3), (1, 5), (2, 3), (3, 2), (4, 1), (5, 1)].into_iter().collect();
    assert_eq!(fib_time_calls(&trace, &comm), expected, "{trace}");
    let hist = read("events/synthetic/fib_time/hist");
    let rows: Vec<&str> = hist.lines().filter(|line| line.starts_with('{')).collect();
    assert_eq!(rows.len(), 6, "{hist}");
    assert!(rows[1].starts_with("{ n:          1 } hitcount:          5"), "{hist}");
    // Every return matched its entry: all counted where they were read.
    assert!(read("events/fprobes/fibout/hist").contains("    Hits: 15\n"));
    // The entry's histogram is read by the return's: it stays until that goes.
    assert!(refused("events/fprobes/fibin/trigger", "!hist:keys=n:ts0=common_timestamp").contains("reads this one's variables"));
    assert!(refused("synthetic_events", "!fib_time").contains("fib_time"));
    write("events/synthetic/fib_time/enable", "0");
    append("events/synthetic/fib_time/trigger", "!hist:keys=n:vals=hitcount:sort=n");
    append("events/fprobes/fibout/trigger", &format!("!{line}"));
    append("events/fprobes/fibin/trigger", "!hist:keys=n:ts0=common_timestamp");
    // Removed, its table is no one's to read: added again, the new one is
    // the one a reader finds (not two of them).
    append("events/fprobes/fibin/trigger", "hist:keys=n:ts0=common_timestamp");
    append("events/fprobes/fibout/trigger", line);
    append("events/fprobes/fibout/trigger", &format!("!{line}"));
    append("events/fprobes/fibin/trigger", "!hist:keys=n:ts0=common_timestamp");
    append("synthetic_events", "!fib_time");
    append("dynamic_events", "-:fibout");
    append("dynamic_events", "-:fibin");
    // Adding a histogram with timestamps set the clock, as in Linux.
    assert!(read("trace_clock").contains("[global]"));
    write("trace_clock", "local");
}

/// The switch side of the wakeup-latency recipe, with the largest latency
/// per task kept as `onmax()` keeps it.
const SWITCH_HIST: &str = "hist:keys=next_pid:lat=common_timestamp.usecs-$ts0:onmatch(sched.sched_wakeup).wakeup_latency($lat,next_pid,next_comm):onmax($lat).save(next_comm,prev_pid)";

/// Linux's wakeup-latency example, on the scheduler's events: a woken
/// task's latency is recorded when it is switched in, and the largest
/// kept per task with the context of its switch.
#[ktest]
fn wakeup_latency_is_recorded_when_the_woken_task_runs() {
    append("synthetic_events", "wakeup_latency u64 lat; pid_t pid; char comm[16]");
    append("events/sched/sched_wakeup/trigger", "hist:keys=pid:ts0=common_timestamp.usecs");
    append("events/sched/sched_switch/trigger", SWITCH_HIST);
    write("events/synthetic/wakeup_latency/enable", "1");
    write("trace", "");
    let sleeper = crate::sched::spawn("napper", || {
        for _ in 0..3 {
            crate::sched::sleep_ms(2);
        }
        0
    })
    .unwrap();
    let pid = sleeper.pid();
    assert_eq!(sleeper.join(), 0);
    write("events/synthetic/wakeup_latency/enable", "0");
    let trace = read("trace");
    let mine = format!(" pid={pid} comm=napper");
    let lines: Vec<&str> =
        trace.lines().filter(|line| line.contains(": wakeup_latency: lat=") && line.ends_with(&mine)).collect();
    assert!(lines.len() >= 3, "a latency per wake-up from each sleep: {trace}");
    // The largest of them, kept in its entry with the fields of its switch.
    let largest =
        lines.iter().filter_map(|line| line.split("lat=").nth(1)?.split(' ').next()?.parse::<u64>().ok()).max().unwrap();
    let hist = read("events/sched/sched_switch/hist");
    let entry = format!("{{ next_pid: {pid:>10} }} hitcount:");
    let at = hist.find(&entry).unwrap_or_else(|| panic!("{hist}"));
    let max_line = hist[at..].lines().nth(1).unwrap();
    assert!(max_line.starts_with(&format!("\tmax: {largest:>10}  next_comm: napper ")), "{max_line}\n{hist}");
    assert!(max_line.contains("  prev_pid: "), "{max_line}");
    append("events/sched/sched_switch/trigger", &format!("!{SWITCH_HIST}"));
    append("events/sched/sched_wakeup/trigger", "!hist:keys=pid:ts0=common_timestamp.usecs");
    append("synthetic_events", "!wakeup_latency");
    write("trace_clock", "local");
    assert!(tracefs::read("events/synthetic/wakeup_latency/enable", &mut String::new()).is_err(), "gone with its event");
}

/// An action that records the event whose own trigger runs it again is a
/// loop: it stops [`trace::events::synth::MAX_NESTING`] deep, and nothing breaks.
#[ktest]
fn a_loop_of_actions_stops_at_its_nesting_limit() {
    append("dynamic_events", "f:fibin kernel::workload::fib n=$arg1");
    append("synthetic_events", "loopy u64 n");
    append("events/synthetic/loopy/trigger", "hist:keys=n:onmatch(synthetic.loopy).loopy(n)");
    append("events/fprobes/fibin/trigger", "hist:keys=n:onmatch(fprobes.fibin).loopy(n)");
    write("events/synthetic/loopy/enable", "1");
    write("trace", "");
    assert_eq!(fib(1), 1);
    write("events/synthetic/loopy/enable", "0");
    let trace = read("trace");
    let loops = trace.lines().filter(|line| line.ends_with(": loopy: n=1")).count();
    assert_eq!(loops, usize::from(trace::events::synth::MAX_NESTING), "{trace}");
    append("events/fprobes/fibin/trigger", "!hist:keys=n:onmatch(fprobes.fibin).loopy(n)");
    append("events/synthetic/loopy/trigger", "!hist:keys=n:onmatch(synthetic.loopy).loopy(n)");
    append("synthetic_events", "!loopy");
    append("dynamic_events", "-:fibin");
    write("trace", "");
}
