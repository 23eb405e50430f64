//! Event triggers (`events/GRP/EVENT/trigger`) as a Linux user writes
//! them: on fprobe events and on the scheduler's, enabled or not.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::{fib, run_parallel};

const AVAILABLE: &str = "# Available triggers:\n# traceon traceoff snapshot stacktrace enable_event disable_event hist\n";

/// The `n=` values of the `fibt` event's lines in `trace`.
fn fibt_values(trace: &str) -> Vec<u64> {
    crate::tests::events::event_values(trace, "fibt")
}

fn stack_traces(trace: &str) -> usize {
    trace.lines().filter(|line| line.ends_with(": <stack trace>")).count()
}

/// The lines after each `<stack trace>` line (`/* <stack trace>` under
/// function_graph), up to the next event.
fn first_frames(trace: &str) -> Vec<(&str, &str)> {
    let lines: Vec<&str> = trace.lines().filter(|line| !line.starts_with('#')).collect();
    (0..lines.len())
        .filter(|&i| lines[i].ends_with(" <stack trace>"))
        .map(|i| (lines.get(i + 1).copied().unwrap_or(""), lines.get(i + 2).copied().unwrap_or("")))
        .collect()
}

fn add_trigger(path: &str, line: &str) -> Result<(), TracefsError> {
    tracefs::write(path, line, FilterMode::Append)
}

#[ktest]
fn a_filtered_traceoff_stops_tracing_after_the_matching_event() {
    tracefs::write("dynamic_events", "f:fibt fib n=$arg1", FilterMode::Append).unwrap();
    let trigger = "events/fprobes/fibt/trigger";
    assert_eq!(read(trigger), AVAILABLE);
    add_trigger(trigger, "traceoff if n == 2").unwrap();
    assert_eq!(read(trigger), "traceoff:unlimited if n == 2\n");
    write("events/fprobes/fibt/enable", "1");
    assert_eq!(fib(4), 3);
    assert_eq!(read("tracing_on"), "0\n", "fib(2) switched tracing off");
    // fib(4) calls fib(3), which calls fib(2): the event that matched is
    // recorded (traceoff acts after the record, as in Linux), none after.
    assert_eq!(fibt_values(&read("trace")), [4, 3, 2]);

    // Disabled, the event records nothing; its trigger still fires.
    write("events/fprobes/fibt/enable", "0");
    write("trace", "");
    write("tracing_on", "1");
    assert_eq!(fib(3), 2);
    assert_eq!(read("tracing_on"), "0\n", "the trigger of a disabled event fired");
    assert_eq!(fibt_values(&read("trace")), [], "and recorded nothing");
    assert!(read("enabled_functions").contains("kernel::workload::fib"), "the probe stays for the trigger");

    add_trigger(trigger, "!traceoff").unwrap();
    assert_eq!(read(trigger), AVAILABLE);
    assert_eq!(read("enabled_functions"), "", "no trigger, not enabled: the probe went");
    write("tracing_on", "1");
    assert_eq!(fib(3), 2);
    assert_eq!(read("tracing_on"), "1\n");
    tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap();
    write("trace", "");
}

#[ktest]
fn a_counted_stacktrace_records_the_chain_that_called_the_probed_function() {
    tracefs::write("dynamic_events", "f:fibt fib n=$arg1", FilterMode::Append).unwrap();
    let trigger = "events/fprobes/fibt/trigger";
    add_trigger(trigger, "stacktrace:2").unwrap();
    assert_eq!(read(trigger), "stacktrace:count=2\n");
    assert_eq!(fib(3), 2);
    let trace = read("trace");
    assert_eq!(stack_traces(&trace), 2, "counted: {trace}");
    assert_eq!(fibt_values(&trace), [], "the event is not enabled");
    let frames = first_frames(&trace);
    assert_eq!(frames[0].0, " => kernel::workload::fib", "{trace}");
    assert!(frames[0].1.starts_with(" => kernel::tests::events::triggers::"), "then the test that called it: {trace}");
    assert_eq!(frames[1], (" => kernel::workload::fib", " => kernel::workload::fib"), "fib(2) called by fib(3): {trace}");
    assert_eq!(read(trigger), "stacktrace:count=0\n");

    // One trigger of a kind; a refused line changes nothing.
    for bad in ["stacktrace", "stacktrac", "stacktrace:x", "stacktrace:3 when n == 1", "snapshot if m == 1", "traceon:-1"] {
        assert!(
            matches!(add_trigger(trigger, bad), Err(TracefsError::Invalid(_) | TracefsError::Filter { .. })),
            "{bad} is refused"
        );
    }
    assert_eq!(read(trigger), "stacktrace:count=0\n");
    add_trigger(trigger, "traceon").unwrap();
    let error = add_trigger(trigger, "traceoff").unwrap_err();
    assert!(alloc::format!("{error}").contains("'traceon' trigger already"), "traceon and traceoff are one kind: {error}");
    assert_eq!(read(trigger), "traceon:unlimited\nstacktrace:count=0\n", "newest first, as Linux lists them");
    assert_eq!(read("events/fprobes/fibt/enable"), "0*\n");

    // An event with triggers cannot be removed.
    let removal = tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap_err();
    assert!(alloc::format!("{removal}").contains("has triggers"), "{removal}");
    add_trigger(trigger, "!traceoff").unwrap(); // by kind, as Linux removes it: the traceon goes
    assert_eq!(read(trigger), "stacktrace:count=0\n");
    add_trigger(trigger, "!stacktrace").unwrap();
    add_trigger(trigger, "!snapshot").unwrap(); // not there: nothing happens, as in Linux
    assert_eq!(read(trigger), AVAILABLE);
    tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap();
    assert_eq!(read("enabled_functions"), "");
    write("trace", "");

    // A kprobe event at the entry names its caller as the fprobe event does,
    // and so does one on the prologue's first instruction, before the
    // function has a frame record of its own (the bench's `kprobe_mid`
    // place).
    kprobe_stack_names_the_caller("kent", "kernel::workload::fib");
    let first = arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN;
    let prologue = alloc::format!("kernel::workload::fib+{first}");
    kprobe_stack_names_the_caller("kpro", &prologue);
    // With the graph tracer on fib, the return address the probe reads
    // leads to the return trampoline: the chain names the real caller.
    write("set_ftrace_filter", "kernel::workload::fib");
    write("current_tracer", "function_graph");
    kprobe_stack_names_the_caller("kpro", &prologue);
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// A kprobe event `name` at `place` with a `stacktrace` trigger: its chain
/// starts with fib, then the test that called it.
fn kprobe_stack_names_the_caller(name: &str, place: &str) {
    tracefs::write("kprobe_events", &alloc::format!("p:kprobes/{name} {place}"), FilterMode::Append).unwrap();
    let trigger = alloc::format!("events/kprobes/{name}/trigger");
    add_trigger(&trigger, "stacktrace:1").unwrap();
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    let frames = first_frames(&trace);
    assert_eq!(frames.len(), 1, "{trace}");
    assert_eq!(frames[0].0, " => kernel::workload::fib", "{place}: {trace}");
    assert!(frames[0].1.starts_with(" => kernel::tests::events::triggers::"), "{place}: then the test that called it: {trace}");
    add_trigger(&trigger, "!stacktrace").unwrap();
    tracefs::write("kprobe_events", &alloc::format!("-:{name}"), FilterMode::Append).unwrap();
    write("trace", "");
}

/// The lines Linux's `tracing_snapshot_instance_cond` writes for a
/// snapshot with no snapshot buffer, as `trace` shows them.
pub(crate) fn snapshot_not_allocated(trace: &str) -> Vec<&str> {
    trace.lines().filter_map(|line| line.split_once(" tracing_snapshot_instance_cond: ")).map(|(_, text)| text).collect()
}

#[ktest]
fn a_snapshot_trigger_without_a_snapshot_buffer_says_so_and_stops_tracing() {
    tracefs::write("dynamic_events", "f:fe kernel::workload::fib n=$arg1", FilterMode::Append).unwrap();
    let trigger = "events/fprobes/fe/trigger";
    add_trigger(trigger, "snapshot:2").unwrap();
    write("snapshot", "0");
    write("events/fprobes/fe/enable", "1");
    assert_eq!(fib(3), 2);
    let trace = read("trace");
    assert_eq!(
        snapshot_not_allocated(&trace),
        ["*** SNAPSHOT NOT ALLOCATED ***", "*** stopping trace here!   ***"],
        "said once, as Linux says it: {trace}"
    );
    assert_eq!(read("tracing_on"), "0\n", "and tracing stopped there");
    assert_eq!(
        crate::tests::events::event_values(&trace, "fe"),
        [],
        "before the first event (an unfiltered snapshot acts first)"
    );
    assert_eq!(read(trigger), "snapshot:count=0\n", "each hit spent a count, as in Linux");
    add_trigger(trigger, "!snapshot").unwrap();
    write("events/fprobes/fe/enable", "0");
    tracefs::write("dynamic_events", "-:fe", FilterMode::Append).unwrap();
    write("tracing_on", "1");
    write("trace", "");
}

#[ktest]
fn an_exit_event_snapshot_trigger_swaps_once_the_function_returns() {
    tracefs::write("dynamic_events", "f:fibr fib%return r=$retval", FilterMode::Append).unwrap();
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    let trigger = "events/fprobes/fibr/trigger";
    add_trigger(trigger, "snapshot:1 if r == 3").unwrap();
    assert_eq!(read(trigger), "snapshot:count=1 if r == 3\n");
    // fib(4) returns 3: its return, the last, takes the snapshot of its 9
    // calls; fib(3) returns 2 and fib(2) 1: no snapshot.
    assert_eq!(fib(4), 3);
    let snapshot = read("snapshot");
    let calls = |text: &str| text.lines().filter(|line| line.contains(": kernel::workload::fib <-")).count();
    assert_eq!(calls(&snapshot), 9, "{snapshot}");
    assert_eq!(calls(&read("trace")), 0, "recording goes on in the emptied buffer");
    assert_eq!(fib(4), 3);
    assert_eq!(calls(&read("snapshot")), 9, "the count is spent");
    assert_eq!(read(trigger), "snapshot:count=0 if r == 3\n");
    add_trigger(trigger, "!snapshot").unwrap();
    write("snapshot", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    tracefs::write("dynamic_events", "-:fibr", FilterMode::Append).unwrap();
    write("trace", "");
}

#[ktest]
fn sched_switch_triggers_fire_while_the_event_is_disabled() {
    let trigger = "events/sched/sched_switch/trigger";
    assert_eq!(read(trigger), AVAILABLE);
    assert_eq!(read("events/sched/sched_switch/enable"), "0\n");
    add_trigger(trigger, "stacktrace:3 if next_comm ~ \"fib*\"").unwrap();
    assert_eq!(read("events/sched/sched_switch/enable"), "0*\n", "armed by its trigger, as Linux marks it");
    // Linux's set_event and group enable files count an armed event as on.
    assert_eq!(read("set_event"), "sched:sched_switch\n");
    assert_eq!(read("events/sched/enable"), "X\n", "one of the group's three on");
    run_parallel(2, "fib", &["12"]).unwrap();
    let trace = read("trace");
    assert_eq!(stack_traces(&trace), 3, "{trace}");
    assert!(!trace.contains(": sched_switch: "), "the event itself is not recorded: {trace}");
    for (first, _) in first_frames(&trace) {
        assert!(first.starts_with(" => kernel::sched::"), "the scheduler called the tracepoint: {trace}");
    }
    assert_eq!(read(trigger), "stacktrace:count=0 if next_comm ~ \"fib*\"\n");
    write("error_log", "");
    let refused = add_trigger(trigger, "stacktrace if nosuch == 1");
    assert!(matches!(refused, Err(TracefsError::Filter { trigger: true, .. })), "{refused:?}");
    assert!(matches!(add_trigger(trigger, "stacktrac"), Err(TracefsError::Invalid(_))));
    let log = read("error_log");
    assert_eq!(log.lines().count(), 3, "the filter's error only, as Linux logs it: {log}");
    let first = log.lines().next().unwrap();
    assert!(first.ends_with("] event filter parse error: error: Field not found"), "in Linux's words: {log}");
    assert_eq!(log.lines().nth(1), Some("  Command: nosuch == 1"), "the filter alone, as Linux logs it: {log}");
    let caret = alloc::format!("{:width$}^", "", width = 11 + 7);
    assert_eq!(log.lines().nth(2), Some(caret.as_str()), "where Linux's parser puts it (past 'nosuch'): {log}");
    add_trigger(trigger, "!stacktrace").unwrap();
    assert_eq!(read(trigger), AVAILABLE);
    assert_eq!(read("events/sched/sched_switch/enable"), "0\n");
    assert_eq!(read("set_event"), "", "no trigger: off again");
    assert_eq!(read("events/sched/enable"), "0\n");

    // While tracing is off a stack trace records nothing and keeps its
    // count. A snapshot with no snapshot buffer spends its count, says so
    // and stops tracing, as Linux's.
    add_trigger(trigger, "stacktrace:1").unwrap();
    write("tracing_on", "0");
    run_parallel(2, "fib", &["8"]).unwrap();
    assert_eq!(read(trigger), "stacktrace:count=1\n", "kept while tracing was off");
    write("tracing_on", "1");
    add_trigger(trigger, "!stacktrace").unwrap();
    add_trigger(trigger, "snapshot:1").unwrap();
    write("snapshot", "0");
    run_parallel(2, "fib", &["8"]).unwrap();
    assert_eq!(read(trigger), "snapshot:count=0\n", "no snapshot buffer: spent all the same");
    assert_eq!(read("tracing_on"), "0\n", "and tracing stopped");
    assert_eq!(snapshot_not_allocated(&read("trace")).len(), 2, "after saying why");
    add_trigger(trigger, "!snapshot").unwrap();
    write("tracing_on", "1");
    write("trace", "");
}

#[ktest]
fn enable_event_switches_another_event_in_soft_mode() {
    tracefs::write("dynamic_events", "f:fibt fib n=$arg1", FilterMode::Append).unwrap();
    tracefs::write("dynamic_events", "f:fibsrc fib n=$arg1", FilterMode::Append).unwrap();
    let trigger = "events/fprobes/fibsrc/trigger";
    add_trigger(trigger, "enable_event:fprobes:fibt:1 if n == 2").unwrap();
    assert_eq!(read(trigger), "enable_event:fprobes:fibt:count=1 if n == 2\n");
    assert_eq!(read("events/fprobes/fibt/enable"), "0*\n", "soft mode: armed, not recording");
    assert_eq!(read("events/fprobes/fibsrc/enable"), "0*\n");
    // fib(4) calls fib with 4, 3, 2, 1, 0, 1, 2, 1, 0: the trigger (on the
    // newer probe, so first) switches fibt on at the first 2.
    assert_eq!(fib(4), 3);
    assert_eq!(fibt_values(&read("trace")), [2, 1, 0, 1, 2, 1, 0]);
    assert_eq!(read("events/fprobes/fibt/enable"), "1*\n");
    assert_eq!(read(trigger), "enable_event:fprobes:fibt:count=0 if n == 2\n");

    // One of a kind per target; the target cannot go while it is named.
    let error = add_trigger(trigger, "disable_event:fprobes:fibt").unwrap_err();
    assert!(alloc::format!("{error}").contains("'enable_event:fprobes:fibt' trigger already"), "{error}");
    let removal = tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap_err();
    assert!(alloc::format!("{removal}").contains("is switched by a trigger or function command"), "{removal}");
    for bad in [
        "enable_event",
        "enable_event:fprobes",
        "enable_event:fprobes:nosuch",
        "enable_event:fprobes:fibt:x",
        "!enable_event:no:such",
    ] {
        assert!(
            matches!(add_trigger(trigger, bad), Err(TracefsError::Invalid(_) | TracefsError::Filter { .. })),
            "{bad} is refused"
        );
    }
    assert_eq!(read(trigger), "enable_event:fprobes:fibt:count=0 if n == 2\n", "nothing changed");

    // Removed (by kind, as Linux: !disable_event takes off the
    // enable_event), fibt leaves soft mode as the trigger left it: enabled.
    add_trigger(trigger, "!disable_event:fprobes:fibt").unwrap();
    assert_eq!(read(trigger), AVAILABLE);
    assert_eq!(read("events/fprobes/fibt/enable"), "1\n", "switched on, it stays on, as in Linux");
    assert_eq!(read("enabled_functions"), "kernel::workload::fib (1)\n", "fibt's probe only");
    write("events/fprobes/fibt/enable", "0");
    assert_eq!(read("enabled_functions"), "");

    // disable_event stops an enabled event; sched_switch as the target.
    write("events/sched/sched_switch/enable", "1");
    add_trigger(trigger, "disable_event:sched:sched_switch").unwrap();
    assert_eq!(read("events/sched/sched_switch/enable"), "1*\n", "still recording in soft mode");
    assert_eq!(fib(1), 1);
    assert_eq!(read("events/sched/sched_switch/enable"), "0*\n", "switched off by the trigger");
    write("trace", "");
    run_parallel(2, "fib", &["5"]).unwrap();
    assert!(!read("trace").contains(": sched_switch: "), "nothing recorded while switched off");
    add_trigger(trigger, "!disable_event:sched:sched_switch").unwrap();
    assert_eq!(read("events/sched/sched_switch/enable"), "0\n", "switched off, it stays off, as in Linux");
    tracefs::write("dynamic_events", "-:fibsrc", FilterMode::Append).unwrap();
    tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap();
    write("trace", "");
}

/// The entries of `cat hist`: its `{ KEY } hitcount: N ...` lines.
fn hist_entries(text: &str) -> Vec<&str> {
    text.lines().filter(|line| line.starts_with('{')).collect()
}

/// Linux's generic keys: `common_cpu` (written `cpu` here) is the CPU a
/// switch was recorded on, `common_comm` the task switched away from.
#[ktest]
fn hist_keys_may_be_the_recording_cpu_and_the_running_task() {
    let (trigger, hist) = ("events/sched/sched_switch/trigger", "events/sched/sched_switch/hist");
    add_trigger(trigger, "hist:keys=cpu,common_comm if prev_comm ~ \"fib/*\"").unwrap();
    let shown = "hist:keys=common_cpu,common_comm:vals=hitcount:sort=hitcount:size=2048 if prev_comm ~ \"fib/*\"";
    assert_eq!(read(trigger), format!("{shown} [active]\n"));
    run_parallel(2, "fib", &["12"]).unwrap();
    let text = read(hist);
    let entries = hist_entries(&text);
    assert!(!entries.is_empty(), "{text}");
    for entry in &entries {
        let cpu: usize = entry["{ common_cpu:".len()..].split(',').next().unwrap().trim().parse().unwrap();
        assert!(cpu < ring_buffer::trace_buffer::cpus(), "{entry}");
        assert!(entry.contains(", common_comm: fib/"), "the task switched away from: {entry}");
    }
    add_trigger(trigger, "!hist:keys=cpu,common_comm if prev_comm ~ \"fib/*\"").unwrap();
    assert_eq!(read(trigger), AVAILABLE);
}

/// `common_stacktrace` (or `stacktrace`) as a key: one entry per chain
/// that led to the event, its frames a line each, as Linux prints them.
#[ktest]
fn a_stacktrace_key_counts_each_call_chain_apart() {
    tracefs::write("dynamic_events", "f:fibs fib n=$arg1", FilterMode::Append).unwrap();
    let (trigger, hist) = ("events/fprobes/fibs/trigger", "events/fprobes/fibs/hist");
    add_trigger(trigger, "hist:keys=stacktrace").unwrap();
    assert_eq!(read(trigger), "hist:keys=common_stacktrace:vals=hitcount:sort=hitcount:size=2048 [active]\n");
    // fib(2) from here, then fib(1) and fib(0) from fib(2): three chains.
    // (One call site: a loop the compiler cannot unroll.)
    for _ in 0..core::hint::black_box(2) {
        assert_eq!(fib(2), 1);
    }
    let text = read(hist);
    let entries: Vec<&str> = text.split("{ common_stacktrace:\n").skip(1).collect();
    assert_eq!(entries.len(), 3, "{text}");
    let frames = |entry: &str| -> Vec<String> {
        entry.lines().take_while(|line| !line.starts_with('}')).map(|line| String::from(line.trim())).collect()
    };
    let mut from_fib = 0;
    for entry in &entries {
        assert!(entry.contains("\n} hitcount:          2\n"), "each chain twice: {entry}");
        let frames = frames(entry);
        assert!(frames[0].starts_with("kernel::workload::fib+0x0/0x"), "the probed function first: {entry}");
        let caller = if frames[1].starts_with("kernel::workload::fib+") {
            from_fib += 1;
            &frames[2]
        } else {
            &frames[1]
        };
        assert!(
            caller.starts_with("kernel::tests::events::triggers::a_stacktrace_key_counts_each_call_chain_apart+0x"),
            "{entry}"
        );
    }
    assert_eq!(from_fib, 2, "two calls from fib(2), at two places: {text}");
    for bad in ["hist:keys=common_stacktrace.hex", "hist:keys=n:vals=common_stacktrace"] {
        assert!(matches!(add_trigger(trigger, bad), Err(TracefsError::Invalid(_))), "{bad} is refused");
    }
    add_trigger(trigger, "!hist:keys=common_stacktrace").unwrap();
    assert_eq!(read(trigger), AVAILABLE);
    tracefs::write("dynamic_events", "-:fibs", FilterMode::Append).unwrap();
}

/// `onmax($VAR).snapshot()`: a value past every entry's takes a snapshot,
/// so `snapshot` keeps the trace up to the largest; `hist` says which
/// value and key took it, and `snapshot` refuses writes while the action
/// holds it, as Linux's conditional snapshot.
#[ktest]
fn an_onmax_snapshot_keeps_the_trace_up_to_the_largest_value() {
    write("trace", "");
    tracefs::write("dynamic_events", "f:fibm fib n=$arg1", FilterMode::Append).unwrap();
    write("events/fprobes/fibm/enable", "1");
    let trigger = "events/fprobes/fibm/trigger";
    add_trigger(trigger, "hist:keys=common_pid:v=n:onmax($v).snapshot()").unwrap();
    assert_eq!(fib(1), 1); // n=1: the first value, a snapshot
    assert_eq!(fib(3), 2); // n=3 (past 1: a snapshot), then 2, 1, 0, 1 (not)
    let snapshot = read("snapshot");
    assert_eq!(fibt_values_of(&snapshot), [3], "recorded since the first snapshot, up to the largest: {snapshot}");
    // Recording goes on after it in what was the snapshot, which still
    // holds the first snapshot's n=1 (a swap, as Linux's `update_max_tr`).
    assert_eq!(fibt_values_of(&read("trace")), [1, 2, 1, 0, 1], "recording goes on after it");
    let pid = ftrace::task::current().pid();
    let hist = read("events/fprobes/fibm/hist");
    let details = format!(
        "\nSnapshot taken (see tracing/snapshot).  Details:\n\ttriggering value {{ onmax($v) }}:          3\ttriggered by event with key: {{ common_pid: {pid:>10} }}\n"
    );
    assert!(hist.contains(&details), "{hist}");
    assert!(!hist.contains("\tmax:"), "no max line per entry, as Linux: {hist}");
    // One trigger's action holds the trace array's snapshot, as Linux's
    // conditional snapshot: another's is refused.
    let other = tracefs::write(
        "events/sched/sched_switch/trigger",
        "hist:keys=prev_pid:p=prev_pid:onmax($p).snapshot()",
        FilterMode::Append,
    );
    assert!(format!("{}", other.unwrap_err()).contains("holds this trace array's snapshot"));
    for command in ["0", "1", "2"] {
        let refused = tracefs::write("snapshot", command, FilterMode::Replace).unwrap_err();
        assert!(format!("{refused}").contains("busy"), "{command}: {refused}");
    }
    add_trigger(trigger, "!hist:keys=common_pid:v=n:onmax($v).snapshot()").unwrap();
    // Released with its trigger: the hold can be taken again at once. The
    // old histogram's free comes after (a second release, which must not
    // end the new hold).
    add_trigger(trigger, "hist:keys=common_pid:v=n:onmax($v).snapshot()").unwrap();
    ftrace::deferred::reclaim();
    assert!(tracefs::write("snapshot", "1", FilterMode::Replace).is_err(), "still held by the new trigger");
    add_trigger(trigger, "!hist:keys=common_pid:v=n:onmax($v).snapshot()").unwrap();
    ftrace::deferred::reclaim();
    write("snapshot", "0");
    assert!(read("snapshot").contains("Snapshot is freed"), "writable again once the action went");
    // Refused after its action allocated the buffer (`cont` of no such
    // histogram): the buffer goes again.
    assert!(add_trigger(trigger, "hist:keys=common_pid:v=n:onmax($v).snapshot():cont").is_err());
    assert!(read("snapshot").contains("Snapshot is freed"), "a refused trigger gives the buffer back");
    write("events/fprobes/fibm/enable", "0");
    tracefs::write("dynamic_events", "-:fibm", FilterMode::Append).unwrap();
    write("trace", "");
}

/// The `n=` values of the `fibm` event's lines in `text`.
fn fibt_values_of(text: &str) -> Vec<u64> {
    crate::tests::events::event_values(text, "fibm")
}

#[ktest]
fn hist_triggers_count_hits_per_key_as_linux_prints_them() {
    tracefs::write("dynamic_events", "f:fibt fib n=$arg1", FilterMode::Append).unwrap();
    let (trigger, hist) = ("events/fprobes/fibt/trigger", "events/fprobes/fibt/hist");
    assert_eq!(read(hist), "", "no table without a hist trigger");
    let line = "hist:keys=n:vals=n:sort=n.descending";
    add_trigger(trigger, line).unwrap();
    let shown = "hist:keys=n:vals=hitcount,n:sort=n.descending:size=2048";
    assert_eq!(read(trigger), format!("{shown} [active]\n"));
    assert_eq!(fib(6), 8);
    let text = read(hist);
    assert!(text.starts_with(&format!("# event histogram\n#\n# trigger info: {shown} [active]\n#\n\n")), "{text}");
    // fib(6) calls fib(n) once for n = 6 and 5, then 2, 3, 5, 8 and 5 times
    // for n = 4 down to 0; the sums are n times the count.
    let expected: Vec<alloc::string::String> = [(6, 1), (5, 1), (4, 2), (3, 3), (2, 5), (1, 8), (0, 5)]
        .iter()
        .map(|(n, hits)| format!("{{ n: {n:>10} }} hitcount: {hits:>10}  n: {:>10}", n * hits))
        .collect();
    assert_eq!(hist_entries(&text), expected);
    assert!(text.ends_with("\nTotals:\n    Hits: 25\n    Entries: 7\n    Dropped: 0\n"), "{text}");

    // The same histogram again is refused, whatever its size, naming the
    // one there as `cat trigger` shows it; pause, cont and clear act on it.
    assert!(matches!(add_trigger(trigger, line), Err(TracefsError::Invalid(_))));
    let error = add_trigger(trigger, &format!("{line}:size=0x100")).unwrap_err();
    assert!(format!("{error}").ends_with(&format!("(remove it with '!{shown}')")), "{error}");
    add_trigger(trigger, &format!("{line}:pause")).unwrap();
    assert_eq!(read(trigger), format!("{shown} [paused]\n"));
    assert_eq!(fib(6), 8);
    assert!(read(hist).contains("    Hits: 25\n"), "a paused histogram counts nothing");
    add_trigger(trigger, &format!("{line}:clear")).unwrap();
    add_trigger(trigger, &format!("{line}:cont")).unwrap();
    assert_eq!(fib(2), 1);
    let text = read(hist);
    assert_eq!(hist_entries(&text).len(), 3, "cleared, then fib(2)'s three calls: {text}");
    assert!(text.contains("    Hits: 3\n"));
    let refused = add_trigger(trigger, "hist:keys=n:cont");
    assert!(matches!(refused, Err(TracefsError::Invalid(_))), "cont of a histogram that is not there: {refused:?}");
    let refused = add_trigger(trigger, "hist:keys=n:pause:cont");
    assert!(matches!(refused, Err(TracefsError::Invalid(_))), "with pause too, as in Linux: {refused:?}");
    // On one that is there, pause comes first, then cont, then clear.
    add_trigger(trigger, &format!("{line}:clear:pause")).unwrap();
    assert_eq!(read(trigger), format!("{shown} [paused]\n"), "paused, not cleared");
    assert!(read(hist).contains("    Hits: 3\n"));
    add_trigger(trigger, &format!("{line}:clear:cont")).unwrap();
    assert_eq!(read(trigger), format!("{shown} [active]\n"), "continued, not cleared");
    assert!(read(hist).contains("    Hits: 3\n"));

    // A second histogram on the event: filtered, by task name, hit from
    // tasks on several CPUs at once.
    add_trigger(trigger, "hist:keys=common_pid.execname if n >= 5").unwrap();
    let error = add_trigger(trigger, "hist:keys=common_pid.execname:size=256 if n >= 5").unwrap_err();
    let removal = "!hist:keys=common_pid.execname:vals=hitcount:sort=hitcount:size=2048 if n >= 5";
    assert!(format!("{error}").ends_with(&format!("(remove it with '{removal}')")), "with its filter: {error}");
    run_parallel(4, "fib", &["6"]).unwrap();
    let text = read(hist);
    let by_task: Vec<&str> = hist_entries(&text).into_iter().filter(|entry| entry.starts_with("{ common_pid: ")).collect();
    assert_eq!(by_task.len(), 4, "{text}");
    for (n, entry) in by_task.iter().enumerate() {
        assert!(entry.ends_with("] } hitcount:          2"), "fib(6) and fib(5) in each task: {entry}");
        assert!(by_task.iter().any(|entry| entry.starts_with(&format!("{{ common_pid: fib/{n} "))), "{text}");
    }
    assert!(text.contains("\n\n\n# event histogram\n"), "two tables, one after the other: {text}");

    write("error_log", "");
    assert!(add_trigger(trigger, "hist:keys=nosuch").is_err());
    assert!(add_trigger(trigger, "hist:keys=n:vals=nosuch").is_err());
    let log = read("error_log");
    assert!(log.contains("] hist:fprobes:fibt: error: the event has no field 'nosuch'\n  Command: hist:keys=nosuch\n"), "{log}");
    assert!(tracefs::write(hist, "1", FilterMode::Replace).is_err());
    let removal = tracefs::write("dynamic_events", "-:fibt", FilterMode::Append);
    assert!(removal.is_err(), "an event with a hist trigger stays");
    add_trigger(trigger, &format!("!{line}")).unwrap();
    add_trigger(trigger, "!hist:keys=common_pid.execname if n >= 5").unwrap();
    assert_eq!(read(trigger), AVAILABLE);
    assert_eq!(read(hist), "");
    tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap();
}

/// The `Hits:` and the hitcounts of `cat hist`'s one table.
fn hist_totals(text: &str) -> (u64, u64) {
    let number = |line: &str, after: &str| line.split(after).nth(1).and_then(|rest| rest.split_whitespace().next()?.parse().ok());
    let hits = text.lines().find_map(|line| number(line, "Hits:")).unwrap();
    let counted = hist_entries(text).iter().filter_map(|entry| number(entry, "hitcount:")).sum();
    (hits, counted)
}

/// `clear`, `pause` and `cont` while other CPUs hit the histogram: each
/// clear waits for the hits under way, so what the workers count after it
/// lands in the emptied table whole, and at the end (every worker
/// stopped) the totals and the entries agree.
#[ktest]
fn a_hist_cleared_while_other_cpus_hit_it_stays_consistent() {
    use core::sync::atomic::{AtomicBool, Ordering};
    static STOP: AtomicBool = AtomicBool::new(false);
    tracefs::write("dynamic_events", "f:fibh fib n=$arg1", FilterMode::Append).unwrap();
    let trigger = "events/fprobes/fibh/trigger";
    add_trigger(trigger, "hist:keys=n").unwrap();
    STOP.store(false, Ordering::SeqCst);
    let cpus = ring_buffer::trace_buffer::cpus();
    let workers: Vec<_> = (1..cpus)
        .map(|cpu| {
            crate::sched::spawn_on("hist-hitter", 1 << cpu, || {
                let mut calls = 0;
                while !STOP.load(Ordering::Relaxed) {
                    calls += u64::from(fib(core::hint::black_box(8)) == 21);
                }
                calls
            })
            .unwrap()
        })
        .collect();
    for round in 0..30 {
        let control = ["clear", "pause", "cont"][round % 3];
        add_trigger(trigger, &format!("hist:keys=n:{control}")).unwrap();
        // Read while the workers hit it (a hit may be half counted: only
        // the end, with every worker stopped, must add up).
        let text = read("events/fprobes/fibh/hist");
        assert!(text.contains("\nTotals:\n"), "round {round}: {text}");
    }
    add_trigger(trigger, "hist:keys=n:pause").unwrap();
    STOP.store(true, Ordering::SeqCst);
    let calls: u64 = workers.into_iter().map(|worker| worker.join()).sum();
    assert!(calls > 0, "the workers ran");
    let text = read("events/fprobes/fibh/hist");
    let (hits, counted) = hist_totals(&text);
    assert_eq!(hits, counted, "{text}");
    assert!(hist_entries(&text).len() <= 9, "n from 0 to 8 only: {text}");
    add_trigger(trigger, "!hist:keys=n").unwrap();
    tracefs::write("dynamic_events", "-:fibh", FilterMode::Append).unwrap();
}

/// `FUNC:enable_event:GRP:EVENT[:N]` and `disable_event` in
/// `set_ftrace_filter`, as Linux's function commands: the event is in soft
/// mode while a command names it, switched when FUNC is called.
#[ktest]
fn function_commands_switch_an_event_in_soft_mode() {
    tracefs::write("dynamic_events", "f:fibt fib n=$arg1", FilterMode::Append).unwrap();
    let enable = "events/fprobes/fibt/enable";
    write("set_ftrace_filter", "kernel::workload::run:enable_event:fprobes:fibt:1");
    assert_eq!(read(enable), "0*\n", "soft mode, off");
    assert!(read("set_ftrace_filter").ends_with("kernel::workload::run:enable_event:fprobes:fibt:count=1\n"));
    assert_eq!(fib(3), 2);
    assert_eq!(fibt_values(&read("trace")), [], "no run() yet: not recorded");
    crate::workload::run("fib", &["3"]).unwrap();
    assert_eq!(read(enable), "1*\n", "run() switched it on");
    assert_eq!(fibt_values(&read("trace")), [3, 2, 1, 0, 1]);
    assert!(read("set_ftrace_filter").ends_with(":enable_event:fprobes:fibt:count=0\n"), "its one switch spent");
    tracefs::write("set_ftrace_filter", "kernel::workload::napping_fib:disable_event:fprobes:fibt", FilterMode::Append).unwrap();
    assert_eq!(crate::workload::napping_fib(2), 1);
    assert_eq!(read(enable), "0*\n", "napping_fib() switched it off");
    let removal = tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap_err();
    assert!(alloc::format!("{removal}").contains("function command"), "an event a command names stays: {removal}");
    let before = read("set_ftrace_filter");
    let mixed = tracefs::write("set_ftrace_filter", "fib:traceoff fib:enable_event:fprobes:nosuch", FilterMode::Append);
    assert!(mixed.is_err());
    assert_eq!(read("set_ftrace_filter"), before, "the unknown event refused the whole write: no traceoff either");
    for bad in ["fib:enable_event", "fib:enable_event:fprobes", "fib:enable_event:fprobes:nosuch", "fib:enable_events:a:b"] {
        let refused = tracefs::write("set_ftrace_filter", bad, FilterMode::Append);
        assert!(matches!(refused, Err(TracefsError::Invalid(_))), "{bad}: {refused:?}");
    }
    tracefs::write("set_ftrace_filter", "!kernel::workload::run:enable_event:fprobes:fibt:1", FilterMode::Append).unwrap();
    tracefs::write("set_ftrace_filter", "!kernel::workload::napping_fib:disable_event:fprobes:fibt", FilterMode::Append).unwrap();
    assert_eq!(read(enable), "0\n", "out of soft mode, as the commands left it");
    assert_eq!(read("enabled_functions"), "", "nothing armed any more");
    write("set_ftrace_filter", "");
    tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap();
    write("trace", "");
}

/// `options/stacktrace`: a stack trace after every event recorded (probe
/// events leave their fast path for it), starting at the probed function.
#[ktest]
fn the_stacktrace_option_follows_each_event_with_its_chain() {
    tracefs::write("dynamic_events", "f:fibt fib n=$arg1", FilterMode::Append).unwrap();
    write("events/fprobes/fibt/enable", "1");
    write("trace", "");
    write("options/stacktrace", "1");
    assert_eq!(fib(3), 2);
    write("trace_options", "nostacktrace");
    assert_eq!(fib(1), 1);
    let trace = read("trace");
    assert_eq!(fibt_values(&trace), [3, 2, 1, 0, 1, 1]);
    assert_eq!(stack_traces(&trace), 5, "one after each of fib(3)'s events, none after: {trace}");
    assert!(first_frames(&trace).iter().all(|(first, _)| *first == " => kernel::workload::fib"), "{trace}");
    assert_eq!(first_frames(&trace)[1].1, " => kernel::workload::fib", "fib(2)'s caller, fib(3)");
    write("events/fprobes/fibt/enable", "0");
    tracefs::write("dynamic_events", "-:fibt", FilterMode::Append).unwrap();

    // The scheduler's events: each switch's chain, from the scheduler.
    write("trace", "");
    write("events/sched/sched_switch/enable", "1");
    write("options/stacktrace", "1");
    run_parallel(2, "fib", &["8"]).unwrap();
    write("events/sched/sched_switch/enable", "0");
    // A switch recorded on another CPU just before has read the option
    // once every CPU took an interrupt (the scheduler records masked).
    arch::smp::sync_all();
    write("options/stacktrace", "0");
    let trace = read("trace");
    let switches = trace.lines().filter(|line| line.contains(": sched_switch: ")).count();
    assert!(switches > 0 && stack_traces(&trace) == switches, "a stack after each of {switches} switches: {trace}");
    assert!(first_frames(&trace).iter().all(|(first, _)| first.starts_with(" => kernel::sched::")), "{trace}");
    write("trace", "");
}
