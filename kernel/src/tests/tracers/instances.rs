//! Trace instances (`instances/NAME`): each a trace array of its own, with
//! its own tracer, filters and buffer, beside the top level's.

use alloc::string::String;
use alloc::vec::Vec;

use ftrace::FilterMode;
use ktest_macros::ktest;
use trace::array::instances;
use trace::array::instances::MAX_INSTANCES;
use trace::events::record::{Event, FunctionEvent};

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

fn fib_address() -> usize {
    fib as fn(u64) -> u64 as usize
}

/// The function events in an array's buffer that are calls of `fib`.
fn fib_calls(name: Option<&str>) -> usize {
    let held = name.map(|name| instances::find(name).expect("instance"));
    let array = held.as_ref().map_or(instances::top(), |held| held.array());
    let snapshots = array.buffer().snapshot_all();
    trace::output::pipe::merged(&snapshots)
        .expect("room to list the events")
        .into_iter()
        .filter_map(|(_, _, payload)| FunctionEvent::decode(payload))
        .filter(|event| event.ip as usize == fib_address())
        .count()
}

/// The graph records (entries and returns) of `fib` in an instance's buffer.
fn fib_graph_records(name: &str) -> (usize, usize) {
    let held = instances::find(name).expect("instance");
    let snapshots = held.array().buffer().snapshot_all();
    let mut counts = (0, 0);
    for (_, _, payload) in trace::output::pipe::merged(&snapshots).expect("room to list the events") {
        match Event::decode(payload) {
            Some(Event::GraphEntry(entry)) if entry.func as usize == fib_address() => counts.0 += 1,
            Some(Event::GraphExit(ret)) if ret.func as usize == fib_address() => counts.1 += 1,
            _ => {}
        }
    }
    counts
}

#[ktest]
fn an_instance_has_its_own_tracer_filter_and_buffer() {
    tracefs::instances::mkdir("instances/foo").unwrap();
    assert!(tracefs::exists("instances/foo"));
    assert_eq!(read("instances/foo/current_tracer"), "nop\n");
    write("instances/foo/set_ftrace_filter", "kernel::workload::fib");
    write("instances/foo/current_tracer", "function");
    assert_eq!(read("current_tracer"), "nop\n", "the top level keeps its tracer");
    assert_eq!(read("set_ftrace_filter"), "#### all functions enabled ####\n", "and its filter");
    assert_eq!(fib(5), 5);
    assert_eq!(fib_calls(Some("foo")), 15, "fib(5) makes 15 calls, all in foo's buffer");
    assert_eq!(fib_calls(None), 0, "none in the top level's");
    let trace = read("instances/foo/trace");
    assert_eq!(trace.lines().filter(|line| line.contains("kernel::workload::fib <-")).count(), 15, "{trace}");
    // rmdir stops the tracer: the site goes back to its NOP.
    tracefs::instances::rmdir("instances/foo").unwrap();
    assert!(!tracefs::exists("instances/foo"));
    assert_eq!(read("enabled_functions"), "", "nothing left enabled");
    assert!(matches!(tracefs::read("instances/foo/trace", &mut String::new()), Err(TracefsError::NoSuchFile(_))));
}

/// An instance's `trace_marker` writes to its own buffer, and refuses the
/// write when that buffer is off (Linux: EBADF), whatever the top level's
/// `tracing_on` says.
#[ktest]
fn an_instance_trace_marker_is_refused_while_its_buffer_is_off() {
    tracefs::instances::mkdir("instances/mark").unwrap();
    write("instances/mark/tracing_on", "0");
    let refused = tracefs::write("instances/mark/trace_marker", "hidden", FilterMode::Replace);
    write("trace_marker", "top");
    write("instances/mark/tracing_on", "1");
    write("instances/mark/trace_marker", "shown");
    let trace = read("instances/mark/trace");
    let top = read("trace");
    write("trace", "");
    tracefs::instances::rmdir("instances/mark").unwrap();
    assert!(matches!(&refused, Err(TracefsError::Invalid(message)) if message.contains("tracing_on is 0")), "{refused:?}");
    assert!(!trace.contains("hidden") && trace.contains("tracing_mark_write: shown"), "{trace}");
    assert!(!trace.contains(": top") && top.contains("tracing_mark_write: top"), "{top}");
}

#[ktest]
fn the_top_level_and_two_instances_trace_one_function_at_once() {
    tracefs::instances::mkdir("instances/a").unwrap();
    tracefs::instances::mkdir("instances/b").unwrap();
    for prefix in ["", "instances/a/", "instances/b/"] {
        write(&alloc::format!("{prefix}set_ftrace_filter"), "kernel::workload::fib");
    }
    write("current_tracer", "function");
    write("instances/a/current_tracer", "function");
    write("instances/b/current_tracer", "function_graph");
    assert_eq!(fib(4), 3);
    let counts = (fib_calls(None), fib_calls(Some("a")), fib_graph_records("b"));
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    tracefs::instances::rmdir("instances/a").unwrap();
    tracefs::instances::rmdir("instances/b").unwrap();
    assert_eq!(counts, (9, 9, (9, 9)), "fib(4)'s 9 calls in every buffer, the graph's entries and returns");
    assert_eq!(read("enabled_functions"), "");
}

#[ktest]
fn two_graph_tracers_keep_their_own_settings() {
    tracefs::instances::mkdir("instances/deep").unwrap();
    write("set_ftrace_filter", "kernel::workload::fib");
    write("instances/deep/set_ftrace_filter", "kernel::workload::fib");
    write("max_graph_depth", "1");
    write("current_tracer", "function_graph");
    write("instances/deep/current_tracer", "function_graph");
    assert_eq!(fib(4), 3);
    let top = read("trace");
    let deep = fib_graph_records("deep");
    write("current_tracer", "nop");
    write("max_graph_depth", "0");
    write("set_ftrace_filter", "");
    tracefs::instances::rmdir("instances/deep").unwrap();
    let top_calls = top.lines().filter(|line| line.contains("kernel::workload::fib")).count();
    assert_eq!(top_calls, 1, "depth 1 at the top level: only the outermost call\n{top}");
    assert_eq!(deep, (9, 9), "no depth limit in the instance");
}

/// `tracing_thresh` is global, as in Linux: it holds in an instance made
/// before it was set and in one made after, and letting it go again lets
/// both record every call.
#[ktest]
fn tracing_thresh_holds_in_every_instance() {
    tracefs::instances::mkdir("instances/before").unwrap();
    write("tracing_thresh", "10000000");
    tracefs::instances::mkdir("instances/after").unwrap();
    for name in ["before", "after"] {
        write(&alloc::format!("instances/{name}/set_ftrace_filter"), "kernel::workload::fib");
        write(&alloc::format!("instances/{name}/current_tracer"), "function_graph");
    }
    assert_eq!(fib(4), 3);
    let long_only = (fib_graph_records("before"), fib_graph_records("after"));
    // Microseconds whose nanoseconds would overflow are refused, and
    // change nothing.
    assert!(tracefs::write("tracing_thresh", "18446744073709551615", FilterMode::Replace).is_err());
    assert_eq!(read("tracing_thresh"), "10000000\n");
    write("tracing_thresh", "0");
    assert_eq!(fib(4), 3);
    let every = (fib_graph_records("before"), fib_graph_records("after"));
    tracefs::instances::rmdir("instances/before").unwrap();
    tracefs::instances::rmdir("instances/after").unwrap();
    assert_eq!(long_only, ((0, 0), (0, 0)), "no call of fib(4) takes 10 s");
    assert_eq!(every, ((9, 9), (9, 9)), "fib(4)'s 9 calls, entries and returns");
}

#[ktest]
fn bad_instance_requests_change_nothing() {
    tracefs::instances::mkdir("instances/only").unwrap();
    let error = |result: Result<(), TracefsError>| match result {
        Err(TracefsError::Invalid(message)) => message,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(error(tracefs::instances::mkdir("instances/only")), "instance 'only' exists");
    assert_eq!(error(tracefs::instances::rmdir("instances/none")), "no instance 'none'");
    assert_eq!(error(tracefs::instances::mkdir("instances/a b")), "bad instance name 'a b'");
    assert_eq!(error(tracefs::instances::mkdir("instances/a/b")), "bad instance name 'a/b'");
    assert!(error(tracefs::instances::mkdir("elsewhere")).contains("only instances/NAME"));
    assert_eq!(
        error(tracefs::instances::mkdir("")),
        "/sys/kernel/tracing: only instances/NAME can be made or removed",
        "the root"
    );
    assert!(matches!(
        tracefs::write("instances/only/current_tracer", "bogus", FilterMode::Replace),
        Err(TracefsError::Invalid(_))
    ));
    assert!(
        matches!(tracefs::write("instances/only/ftrace_enabled", "0", FilterMode::Replace), Err(TracefsError::NoSuchFile(_))),
        "system-wide files exist at the top level only"
    );
    assert_eq!(read("instances/only/current_tracer"), "nop\n");
    {
        let _held = instances::find("only").unwrap();
        assert_eq!(error(tracefs::instances::rmdir("instances/only")), "instance 'only' is busy");
    }
    assert_eq!(instances::names(), ["only"]);
    tracefs::instances::rmdir("instances/only").unwrap();
    assert!(instances::names().is_empty());
}

#[ktest]
fn instances_run_out_with_an_error_and_come_back() {
    let before = crate::heap::stats().used;
    let mut made = Vec::new();
    let refusal = loop {
        let name = alloc::format!("i{}", made.len());
        match tracefs::instances::mkdir(&alloc::format!("instances/{name}")) {
            Ok(()) => made.push(name),
            Err(error) => break error,
        }
        assert!(made.len() <= MAX_INSTANCES, "more instances than slots");
    };
    let TracefsError::Invalid(message) = refusal else { panic!("{refusal:?}") };
    assert!(message.starts_with("too many instances") || message.starts_with("not enough memory"), "{message}");
    assert!(!made.is_empty());
    for name in &made {
        tracefs::instances::rmdir(&alloc::format!("instances/{name}")).unwrap();
    }
    ftrace::deferred::reclaim();
    tracefs::instances::mkdir("instances/again").unwrap();
    tracefs::instances::rmdir("instances/again").unwrap();
    ftrace::deferred::reclaim();
    let after = crate::heap::stats().used;
    assert!(after <= before + 16 * 1024, "heap back within 16 KiB: {before} -> {after}");
}

#[ktest]
fn cd_and_absolute_paths_reach_instance_files_as_on_linux() {
    let run = |line: &str| crate::shell::execute(line).unwrap_or_else(|error| panic!("{line}: {error}"));
    run("cd /sys/kernel/tracing/instances");
    run("mkdir here");
    run("cd here");
    assert_eq!(crate::shell::working_directory(), "instances/here");
    run("echo function > current_tracer");
    assert_eq!(read("instances/here/current_tracer"), "function\n", "relative to the working directory");
    assert_eq!(read("current_tracer"), "nop\n", "the top level is untouched");
    run("echo nop > /sys/kernel/debug/tracing/instances/here/current_tracer");
    assert_eq!(read("instances/here/current_tracer"), "nop\n", "absolute, under the debugfs mount point");

    for bad in ["cd no_such_dir", "cd trace", "cd /proc", "cd ../../..", "cat /proc/kallsyms", "echo 1 > /tracing_on"] {
        assert!(crate::shell::execute(bad).is_err(), "{bad} is refused");
        assert_eq!(crate::shell::working_directory(), "instances/here", "{bad} changes nothing");
    }
    assert_eq!(read("tracing_on"), "1\n");
    // ls of a file names it; an absolute path may climb and come back.
    let text = |line: &str| crate::shell::execute_to_text(line).unwrap_or_else(|error| panic!("{line}: {error}"));
    assert_eq!(text("ls current_tracer"), "current_tracer\n");
    assert_eq!(
        text("ls /sys/kernel/tracing/../tracing/instances/here/trace"),
        "/sys/kernel/tracing/../tracing/instances/here/trace\n"
    );

    // ls names entries as in the directory listed, as Linux's ls does: the
    // names work from where they are listed.
    let options = text("ls options");
    assert!(options.lines().any(|entry| entry == "print-parent"), "{options}");
    assert!(options.lines().all(|entry| !entry.contains('/')), "{options}");

    run("cd ..");
    assert!(text("ls").lines().any(|entry| entry == "here/"), "ls in instances names the instance");
    assert_eq!(text("cat here/current_tracer"), "nop\n", "a listed name reads from where it was listed");
    run("rmdir here");
    run("cd");
    assert_eq!(crate::shell::working_directory(), "");
    assert!(instances::find("here").is_none());
    // ls lists one level: the root's files and directories, not theirs.
    let root = text("ls");
    let entries: Vec<&str> = root.lines().collect();
    assert!(entries.contains(&"trace") && entries.contains(&"options/") && entries.contains(&"events/"), "{root}");
    assert!(!root.contains("options/print-parent") && !root.contains("events/sched"), "{root}");
    assert_eq!(entries.iter().filter(|entry| **entry == "options/").count(), 1);
}

/// The lines of an array's `trace` that are records of `event`.
fn event_lines(trace: &str, event: &str) -> usize {
    trace.lines().filter(|line| line.contains(&alloc::format!(": {event}: "))).count()
}

/// An instance has its own `events/` and `set_event`: an event enabled
/// there records into its buffer alone, through its own filter, as in
/// Linux; the top level's switch and filter are another copy.
#[ktest]
fn an_instance_records_the_events_it_enables_through_its_own_filter() {
    tracefs::instances::mkdir("instances/ev").unwrap();
    tracefs::write("dynamic_events", "f:inst_fib fib n=$arg1", FilterMode::Append).unwrap();
    assert_eq!(read("instances/ev/events/fprobes/inst_fib/enable"), "0\n");
    write("instances/ev/events/fprobes/inst_fib/filter", "n < 3");
    write("instances/ev/events/fprobes/inst_fib/enable", "1");
    assert_eq!(read("instances/ev/set_event"), "fprobes:inst_fib\n");
    assert_eq!(read("set_event"), "", "the top level's copy is still off");
    assert_eq!(read("events/fprobes/inst_fib/filter"), "none\n", "and unfiltered");
    assert_eq!(read("instances/ev/events/fprobes/enable"), "1\n");
    assert_eq!(read("events/fprobes/enable"), "0\n");
    assert_eq!(fib(5), 5);
    // fib(5)'s 15 calls: 11 with n < 3 (three of 2, five of 1, three of 0).
    assert_eq!(event_lines(&read("instances/ev/trace"), "inst_fib"), 11, "{}", read("instances/ev/trace"));
    assert_eq!(event_lines(&read("trace"), "inst_fib"), 0);

    // Both copies on, each through its own filter, from one hit.
    write("events/fprobes/inst_fib/filter", "n >= 3");
    write("events/fprobes/inst_fib/enable", "1");
    write("instances/ev/trace", "");
    assert_eq!(fib(5), 5);
    assert_eq!(event_lines(&read("instances/ev/trace"), "inst_fib"), 11);
    assert_eq!(event_lines(&read("trace"), "inst_fib"), 4, "n = 5, 4, 3, 3");
    // Neither filtered: the top level's copy alone would take the short
    // path, which does not reach instances.
    write("events/fprobes/inst_fib/filter", "0");
    write("instances/ev/events/fprobes/inst_fib/filter", "0");
    write("trace", "");
    write("instances/ev/trace", "");
    assert_eq!(fib(5), 5);
    assert_eq!(event_lines(&read("instances/ev/trace"), "inst_fib"), 15);
    assert_eq!(event_lines(&read("trace"), "inst_fib"), 15);
    write("events/fprobes/inst_fib/enable", "0");
    write("events/fprobes/inst_fib/filter", "0");
    write("trace", "");

    // A scheduler event, by set_event, which `>` first clears.
    write("instances/ev/set_event", "sched:sched_switch");
    assert_eq!(read("instances/ev/set_event"), "sched:sched_switch\n");
    assert_eq!(read("instances/ev/events/sched/enable"), "X\n");
    write("instances/ev/trace", "");
    crate::workload::run_parallel(2, "fib", &["12"]).unwrap();
    assert!(event_lines(&read("instances/ev/trace"), "sched_switch") >= 2, "{}", read("instances/ev/trace"));
    assert_eq!(event_lines(&read("trace"), "sched_switch"), 0);
    write("instances/ev/events/sched/sched_switch/filter", "prev_pid == -5");
    write("instances/ev/trace", "");
    crate::workload::run_parallel(2, "fib", &["12"]).unwrap();
    assert_eq!(event_lines(&read("instances/ev/trace"), "sched_switch"), 0, "the instance's filter drops every switch");

    // An event enabled in an instance cannot be removed.
    write("instances/ev/events/fprobes/inst_fib/enable", "1");
    assert!(tracefs::write("dynamic_events", "-:inst_fib", FilterMode::Append).is_err());

    // rmdir lets every event go: a new instance in the same slot (freed
    // once its grace period is over) starts with none, and the event can
    // be removed.
    write("instances/ev/events/sched/sched_switch/enable", "1");
    tracefs::instances::rmdir("instances/ev").unwrap();
    ftrace::deferred::reclaim();
    tracefs::instances::mkdir("instances/ev2").unwrap();
    assert_eq!(read("instances/ev2/set_event"), "");
    assert_eq!(read("instances/ev2/events/sched/sched_switch/filter"), "none\n");
    assert_eq!(read("instances/ev2/events/fprobes/inst_fib/filter"), "none\n");
    assert_eq!(fib(5), 5);
    crate::workload::run_parallel(2, "fib", &["12"]).unwrap();
    let trace = read("instances/ev2/trace");
    assert_eq!(event_lines(&trace, "inst_fib") + event_lines(&trace, "sched_switch"), 0, "{trace}");
    tracefs::instances::rmdir("instances/ev2").unwrap();
    tracefs::write("dynamic_events", "-:inst_fib", FilterMode::Append).unwrap();
    assert_eq!(read("enabled_functions"), "", "its probe went with the instance's switch");
}

/// An exit event in an instance records the return values, and removing
/// an event empties the buffers of the arrays it recorded into, and only
/// those (their records would have no format left), as Linux does.
#[ktest]
fn removing_an_event_empties_the_arrays_it_recorded_into() {
    tracefs::instances::mkdir("instances/gone").unwrap();
    tracefs::instances::mkdir("instances/kept").unwrap();
    tracefs::write("dynamic_events", "f:inst_ret fib%return r=$retval", FilterMode::Append).unwrap();
    write("instances/gone/events/fprobes/inst_ret/enable", "1");
    write("trace_marker", "top");
    write("instances/kept/trace_marker", "kept");
    assert_eq!(fib(5), 5);
    let trace = read("instances/gone/trace");
    assert_eq!(event_lines(&trace, "inst_ret"), 15, "{trace}");
    assert!(trace.contains(" r=0x5\n"), "fib(5) returned 5: {trace}");
    write("instances/gone/events/fprobes/inst_ret/enable", "0");
    tracefs::write("dynamic_events", "-:inst_ret", FilterMode::Append).unwrap();
    assert_eq!(event_lines(&read("instances/gone/trace"), "inst_ret"), 0, "its records went with it");
    assert!(read("trace").contains("tracing_mark_write: top"), "the top level never recorded it: kept");
    assert!(read("instances/kept/trace").contains("tracing_mark_write: kept"), "nor did kept");
    tracefs::instances::rmdir("instances/gone").unwrap();
    tracefs::instances::rmdir("instances/kept").unwrap();
    write("trace", "");
}

/// Makes instance `instance` and an fprobe event `event` on `fib`
/// (`n=$arg1`), enabled there and at the top level.
fn both_record(instance: &str, event: &str) {
    tracefs::instances::mkdir(&alloc::format!("instances/{instance}")).unwrap();
    tracefs::write("dynamic_events", &alloc::format!("f:{event} fib n=$arg1"), FilterMode::Append).unwrap();
    write(&alloc::format!("events/fprobes/{event}/enable"), "1");
    write(&alloc::format!("instances/{instance}/events/fprobes/{event}/enable"), "1");
}

/// Each array has its own `set_event_pid` and `set_event_notrace_pid`, as
/// in Linux: an instance's lists choose the tasks whose events it records,
/// whatever the top level's say.
#[ktest]
fn an_instance_has_its_own_event_pid_lists() {
    both_record("pids", "pid_fib");
    let me = ftrace::task::current().pid();
    write("instances/pids/set_event_pid", &alloc::format!("{me}"));
    assert_eq!(read("instances/pids/set_event_pid"), alloc::format!("{me}\n"));
    assert_eq!(read("set_event_pid"), "", "the top level's list is another");
    write("trace", "");
    assert_eq!(fib(5), 5);
    // Two workers, other tasks, make 15 calls each.
    crate::workload::run_parallel(2, "fib", &["5"]).unwrap();
    assert_eq!(event_lines(&read("instances/pids/trace"), "pid_fib"), 15, "this task's calls only");
    assert_eq!(event_lines(&read("trace"), "pid_fib"), 45, "every task's");

    write("instances/pids/set_event_pid", "");
    write("instances/pids/set_event_notrace_pid", &alloc::format!("{me}"));
    write("trace", "");
    write("instances/pids/trace", "");
    assert_eq!(fib(5), 5);
    assert_eq!(event_lines(&read("instances/pids/trace"), "pid_fib"), 0, "this task is left out there");
    assert_eq!(event_lines(&read("trace"), "pid_fib"), 15);
    assert!(refused_write("instances/pids/set_event_pid", "1 x"), "a bad pid is refused");
    assert_eq!(read("instances/pids/set_event_pid"), "", "and changes nothing");

    write("events/fprobes/pid_fib/enable", "0");
    tracefs::instances::rmdir("instances/pids").unwrap();
    tracefs::write("dynamic_events", "-:pid_fib", FilterMode::Append).unwrap();
    write("trace", "");
}

fn refused_write(path: &str, text: &str) -> bool {
    matches!(tracefs::write(path, text, FilterMode::Replace), Err(TracefsError::Invalid(_)))
}

/// An instance's copy of an event has triggers of its own, acting on the
/// instance: they fire whether or not the copy records, and `hist` counts
/// there, and `enable_event` switches the instance's copy of an event.
#[ktest]
fn an_instance_has_its_own_event_triggers() {
    tracefs::instances::mkdir("instances/trig").unwrap();
    tracefs::write("dynamic_events", "f:trig_fib fib n=$arg1", FilterMode::Append).unwrap();
    let dir = "instances/trig/events/fprobes/trig_fib";
    write(&alloc::format!("{dir}/trigger"), "hist:keys=n:sort=n");
    assert_eq!(read(&alloc::format!("{dir}/enable")), "0*\n", "triggers keep it armed");
    assert_eq!(read("events/fprobes/trig_fib/enable"), "0\n");
    assert_eq!(fib(4), 3);
    let hist = read(&alloc::format!("{dir}/hist"));
    // fib(4): n=4 once, 3 once, 2 twice, 1 three times, 0 twice.
    for (n, hits) in [(0, 2), (1, 3), (2, 2), (3, 1), (4, 1)] {
        let line = alloc::format!("{{ n: {n:>10} }} hitcount: {hits:>10}");
        assert!(hist.contains(&line), "{line}: {hist}");
    }
    assert_eq!(read("events/fprobes/trig_fib/hist"), "", "the top level's copy has no hist");
    assert!(read("events/fprobes/trig_fib/trigger").starts_with("# Available triggers:"));

    // traceoff stops the instance's buffer, not the top level's.
    write(&alloc::format!("{dir}/trigger"), "traceoff if n == 2");
    assert_eq!(fib(4), 3);
    assert_eq!(read("instances/trig/tracing_on"), "0\n");
    assert_eq!(read("tracing_on"), "1\n");
    write("instances/trig/tracing_on", "1");

    let lines = read(&alloc::format!("{dir}/trigger"));
    assert!(lines.contains("traceoff:unlimited if n == 2\n") && lines.contains("hist:keys=n:vals=hitcount:sort=n"), "{lines}");
    assert!(tracefs::write("dynamic_events", "-:trig_fib", FilterMode::Append).is_err(), "it has triggers");

    // Removing the last trigger there lets the probe go, the instance
    // staying.
    write(&alloc::format!("{dir}/trigger"), "!traceoff");
    write(&alloc::format!("{dir}/trigger"), "!hist:keys=n:sort=n");
    assert!(read(&alloc::format!("{dir}/trigger")).starts_with("# Available triggers:"));
    assert_eq!(read(&alloc::format!("{dir}/enable")), "0\n");
    assert_eq!(read("enabled_functions"), "", "nothing keeps the probe");

    // A snapshot trigger swaps the instance's buffer with its snapshot.
    write("instances/trig/trace", "");
    write(&alloc::format!("{dir}/enable"), "1");
    write(&alloc::format!("{dir}/trigger"), "snapshot:1 if n == 4");
    assert_eq!(fib(4), 3);
    let snapshot = read("instances/trig/snapshot");
    assert_eq!(event_lines(&snapshot, "trig_fib"), 1, "the records before the n == 4 hit: {snapshot}");
    assert_eq!(event_lines(&read("instances/trig/trace"), "trig_fib"), 8, "the 8 after it");
    write(&alloc::format!("{dir}/trigger"), "!snapshot");
    write(&alloc::format!("{dir}/enable"), "0");

    // A refused hist trigger is logged in the instance's error_log, under
    // the name the top level's would give it.
    write("instances/trig/error_log", "");
    assert!(tracefs::write(&alloc::format!("{dir}/trigger"), "hist:keys=nosuch", FilterMode::Append).is_err());
    let log = read("instances/trig/error_log");
    assert!(log.contains("hist:fprobes:trig_fib: error:"), "{log}");

    // enable_event there switches the instance's copy of the event it
    // names (soft mode), not the top level's.
    let switch = "instances/trig/events/sched/sched_switch/enable";
    write(&alloc::format!("{dir}/trigger"), "enable_event:sched:sched_switch:1 if n == 3");
    assert_eq!(read(switch), "0*\n", "armed, off");
    assert_eq!(read("events/sched/sched_switch/enable"), "0\n");
    assert_eq!(fib(4), 3);
    assert_eq!(read(switch), "1*\n", "fib(3) switched it on");
    // Its `enable` still switches it, as Linux's does in soft mode.
    write(switch, "0");
    assert_eq!(read(switch), "0*\n");
    write(switch, "1");
    assert_eq!(read(switch), "1*\n");
    write("instances/trig/trace", "");
    crate::workload::run_parallel(2, "fib", &["8"]).unwrap();
    assert!(event_lines(&read("instances/trig/trace"), "sched_switch") > 0);
    assert_eq!(event_lines(&read("trace"), "sched_switch"), 0);
    write(&alloc::format!("{dir}/trigger"), "!enable_event:sched:sched_switch");
    assert_eq!(read(switch), "1\n", "as the trigger left it, out of soft mode");
    write(switch, "0");

    // A trigger on a scheduler event, in the instance only.
    write("instances/trig/events/sched/sched_switch/trigger", "traceoff");
    crate::workload::run_parallel(2, "fib", &["8"]).unwrap();
    assert_eq!(read("instances/trig/tracing_on"), "0\n");
    assert_eq!(read("tracing_on"), "1\n");
    assert!(read("events/sched/sched_switch/trigger").starts_with("# Available triggers:"));

    // rmdir takes every trigger with it.
    tracefs::instances::rmdir("instances/trig").unwrap();
    tracefs::write("dynamic_events", "-:trig_fib", FilterMode::Append).unwrap();
    assert_eq!(read("enabled_functions"), "", "its probe went with the triggers");
}

/// An instance's `options/stacktrace` follows each event it records with
/// the event's call chain, in its own buffer only.
#[ktest]
fn an_instance_stacktrace_option_follows_its_events() {
    both_record("stk", "stk_fib");
    write("instances/stk/options/stacktrace", "1");
    write("trace", "");
    assert_eq!(fib(3), 2);
    let trace = read("instances/stk/trace");
    let stacks = trace.lines().filter(|line| line.contains("<stack trace>")).count();
    assert_eq!((event_lines(&trace, "stk_fib"), stacks), (5, 5), "one chain after each of fib(3)'s 5 events: {trace}");
    assert!(trace.contains(" => kernel::workload::fib\n"), "{trace}");
    assert!(!read("trace").contains("<stack trace>"), "the top level's option is off");
    write("events/fprobes/stk_fib/enable", "0");
    tracefs::instances::rmdir("instances/stk").unwrap();
    tracefs::write("dynamic_events", "-:stk_fib", FilterMode::Append).unwrap();
    write("trace", "");
}

/// An fprobe event that only an instance's `enable_event` names is armed
/// for it, cannot be removed while named, and goes back to rest with the
/// instance.
#[ktest]
fn an_instance_enable_event_arms_the_event_it_names() {
    tracefs::instances::mkdir("instances/soft").unwrap();
    for line in ["f:soft_src fib n=$arg1", "f:soft_tgt fib n=$arg1"] {
        tracefs::write("dynamic_events", line, FilterMode::Append).unwrap();
    }
    write("instances/soft/events/fprobes/soft_src/trigger", "enable_event:fprobes:soft_tgt if n == 1");
    assert_eq!(read("instances/soft/events/fprobes/soft_tgt/enable"), "0*\n");
    assert_eq!(read("enabled_functions"), "kernel::workload::fib (2)\n", "both probes armed");
    assert!(tracefs::write("dynamic_events", "-:soft_tgt", FilterMode::Append).is_err(), "a trigger names it");
    assert_eq!(fib(3), 2);
    // fib(3)'s calls: 3, 2, 1 (switches it on), 0, 1: the last two are
    // recorded, and the first n == 1 too if its probe runs after the
    // trigger's (two probes on one function run in either order).
    let recorded = event_lines(&read("instances/soft/trace"), "soft_tgt");
    assert!((2..=3).contains(&recorded), "{}", read("instances/soft/trace"));
    assert_eq!(event_lines(&read("trace"), "soft_tgt"), 0);
    tracefs::instances::rmdir("instances/soft").unwrap();
    assert_eq!(read("enabled_functions"), "", "nothing armed once the instance went");
    for name in ["-:soft_tgt", "-:soft_src"] {
        tracefs::write("dynamic_events", name, FilterMode::Append).unwrap();
    }
}

/// Each array has its own `error_log`, as in Linux: an instance's keeps the
/// refused filters and `hist` triggers of its own events, the top level's
/// its events' and every probe definition's; `>` empties one alone, and a
/// new instance of a removed one's name starts with an empty log.
#[ktest]
fn an_instance_has_its_own_error_log() {
    tracefs::instances::mkdir("instances/errs").unwrap();
    write("error_log", "");
    let filter = "instances/errs/events/sched/sched_switch/filter";
    assert!(matches!(tracefs::write(filter, "prev_pid ==", FilterMode::Replace), Err(TracefsError::Filter { .. })));
    let log = read("instances/errs/error_log");
    assert!(log.starts_with('[') && log.contains("event filter parse error: error: "), "{log}");
    assert!(log.contains("  Command: prev_pid =="), "{log}");
    assert_eq!(read("error_log"), "", "not the top level's");
    assert_eq!(read(filter), "none\n", "the refused filter changed nothing");

    // A probe definition is the top level's, written from anywhere.
    assert!(refused_write("kprobe_events", "p:errs_probe nosuch_function"));
    assert!(read("error_log").contains("trace_kprobe: error: "), "{}", read("error_log"));
    assert_eq!(read("instances/errs/error_log"), log, "the instance's log is unchanged");

    // `>` empties one log alone.
    write("instances/errs/error_log", "");
    assert_eq!(read("instances/errs/error_log"), "");
    assert!(!read("error_log").is_empty());
    write("error_log", "");

    // The log goes with the instance.
    assert!(matches!(tracefs::write(filter, "prev_pid ==", FilterMode::Replace), Err(TracefsError::Filter { .. })));
    tracefs::instances::rmdir("instances/errs").unwrap();
    tracefs::instances::mkdir("instances/errs").unwrap();
    assert_eq!(read("instances/errs/error_log"), "", "a new instance starts with an empty log");
    tracefs::instances::rmdir("instances/errs").unwrap();
    assert_eq!(read("error_log"), "");
}

/// `FUNC:enable_event:GRP:EVENT` written to an instance's
/// `set_ftrace_filter` switches the instance's copy of the event, as
/// Linux's function commands act on the array they were written to; `rmdir`
/// with the command attached takes it along and lets the event go.
#[ktest]
fn an_instance_function_command_switches_the_instance_copy() {
    tracefs::write("dynamic_events", "f:inst_cmd fib n=$arg1", FilterMode::Append).unwrap();
    tracefs::instances::mkdir("instances/fcmd").unwrap();
    write("trace", "");
    let enable = "instances/fcmd/events/fprobes/inst_cmd/enable";
    write("instances/fcmd/set_ftrace_filter", "kernel::workload::run:enable_event:fprobes:inst_cmd:1");
    assert_eq!(read(enable), "0*\n", "soft mode, off");
    assert_eq!(read("events/fprobes/inst_cmd/enable"), "0\n", "the top level's copy is not armed");
    let listed = read("instances/fcmd/set_ftrace_filter");
    assert!(listed.ends_with("kernel::workload::run:enable_event:fprobes:inst_cmd:count=1\n"), "{listed}");
    assert!(!read("set_ftrace_filter").contains("enable_event"), "not a top-level command");
    crate::workload::run("fib", &["3"]).unwrap();
    assert_eq!(read(enable), "1*\n", "run() switched the instance's copy on");
    assert_eq!(event_lines(&read("instances/fcmd/trace"), "inst_cmd"), 5, "fib(3)'s calls, in the instance");
    assert_eq!(event_lines(&read("trace"), "inst_cmd"), 0, "none at the top level");
    assert!(tracefs::write("dynamic_events", "-:inst_cmd", FilterMode::Append).is_err(), "a command names it");
    tracefs::instances::rmdir("instances/fcmd").unwrap();
    assert_eq!(read("enabled_functions"), "", "the command went with the instance");
    tracefs::write("dynamic_events", "-:inst_cmd", FilterMode::Append).unwrap();
}

/// `rmdir` takes along every function command, the same command on
/// several functions written apart included (each removal of a command
/// takes it off every function).
#[ktest]
fn rmdir_takes_along_commands_written_apart() {
    tracefs::instances::mkdir("instances/cmds").unwrap();
    write("instances/cmds/current_tracer", "function");
    for command in ["fib:traceoff", "kernel::workload::run:traceon", "kernel::workload::run:traceoff"] {
        tracefs::write("instances/cmds/set_ftrace_filter", command, FilterMode::Append).unwrap();
    }
    tracefs::instances::rmdir("instances/cmds").unwrap();
    assert!(!tracefs::exists("instances/cmds"));
    assert_eq!(read("enabled_functions"), "", "every command went with the instance");
}
