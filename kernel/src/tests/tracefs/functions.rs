//! The function tracer's files: the pid filters, the function commands,
//! `touched_functions`, `dyn_ftrace_total_info`, and every listed name
//! written back to `set_ftrace_filter`.

use super::event_lines;
use super::fib_lines;
use super::function_text;
use alloc::format;
use alloc::string::{String, ToString};

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// Every pid file reads its numbers as C writes them, as Linux's
/// `trace_pid_write` (`kstrtoul(word, 0, ...)`): `0x` hex, `010` octal.
#[ktest]
pub(super) fn pid_files_read_numbers_in_c_bases() {
    for file in ["set_ftrace_pid", "set_ftrace_notrace_pid", "set_event_pid", "set_event_notrace_pid"] {
        write(file, "1 8 31");
        let decimal = read(file);
        write(file, "");
        write(file, "0x1 010 +0X1f");
        assert_eq!(read(file), decimal, "{file}");
        for bad in ["08", "0x", "-1", "2147483648", "1x"] {
            let result = tracefs::write(file, bad, FilterMode::Replace);
            assert!(matches!(result, Err(TracefsError::Invalid(_))), "{file} <- {bad:?}: {result:?}");
            assert_eq!(read(file), decimal, "{file} <- {bad:?} changes nothing");
        }
        write(file, "");
    }
}

#[ktest]
pub(super) fn function_commands_switch_tracing_and_record_stacks() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    tracefs::write("set_ftrace_filter", "fib:traceoff:1", FilterMode::Append).unwrap();
    assert_eq!(
        read("set_ftrace_filter"),
        "kernel::workload::fib\nkernel::workload::fib:traceoff:count=1\n",
        "the filter stays (>>)"
    );
    assert_eq!(fib(3), 2);
    assert_eq!(read("tracing_on"), "0\n", "the first fib switched tracing off");
    // The ops of one site run newest first, as in Linux: the command,
    // attached after the tracer, switched tracing off before the tracer
    // saw the call.
    assert_eq!(fib_lines(&read("trace")), 0, "not even that call was recorded");
    assert!(read("set_ftrace_filter").ends_with(":traceoff:count=0\n"));
    write("tracing_on", "1");
    assert_eq!(fib(1), 1);
    assert_eq!(read("tracing_on"), "1\n", "the count is spent");
    tracefs::write("set_ftrace_filter", "!fib:traceoff:1", FilterMode::Append).unwrap();

    write("trace", "");
    tracefs::write("set_ftrace_filter", "fib:stacktrace:1", FilterMode::Append).unwrap();
    // While tracing is off a stack trace does nothing and keeps its count,
    // as Linux's `ftrace_stacktrace_count`.
    write("tracing_on", "0");
    assert_eq!(fib(2), 1);
    write("tracing_on", "1");
    assert!(read("set_ftrace_filter").ends_with(":stacktrace:count=1\n"), "{}", read("set_ftrace_filter"));
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    let lines: alloc::vec::Vec<&str> = trace.lines().filter(|line| !line.starts_with('#')).collect();
    let at = lines.iter().position(|line| line.ends_with(": <stack trace>")).unwrap_or_else(|| panic!("{trace}"));
    assert_eq!(lines[at + 1], " => kernel::workload::fib", "{trace}");
    assert!(lines[at + 2].starts_with(" => kernel::tests::tracefs::"), "then its caller: {trace}");
    assert_eq!(lines.iter().filter(|line| line.ends_with("<stack trace>")).count(), 1, "one, as counted");
    // Written without its count, the removal names the form to use and
    // leaves the command attached.
    let uncounted = tracefs::write("set_ftrace_filter", "!fib:stacktrace", FilterMode::Append);
    assert!(
        matches!(&uncounted, Err(TracefsError::Invalid(message)) if message.ends_with("but 'fib:stacktrace:0' is: remove it written that way ('!fib:stacktrace:0')")),
        "{uncounted:?}"
    );
    assert!(read("set_ftrace_filter").ends_with(":stacktrace:count=0\n"), "{}", read("set_ftrace_filter"));
    tracefs::write("set_ftrace_filter", "!fib:stacktrace:1", FilterMode::Append).unwrap();

    for bad in
        ["fib:bogus", "fib:bogus:3", "!fib:traceon", "fib:traceoff:abc", "fib:traceoff:0+5", "fib:traceoff:18446744073709551615"]
    {
        assert!(matches!(tracefs::write("set_ftrace_filter", bad, FilterMode::Append), Err(TracefsError::Invalid(_))), "{bad}");
    }
    let bad_count = tracefs::write("set_ftrace_filter", "fib:traceoff:abc", FilterMode::Append);
    assert!(matches!(&bad_count, Err(TracefsError::Invalid(message)) if message.starts_with("bad count 'abc'")), "{bad_count:?}");
    for bad in ["fib:enable_event:sched:sched_switch:abc", "fib:enable_event:sched:sched_switch:18446744073709551615"] {
        let refused = tracefs::write("set_ftrace_filter", bad, FilterMode::Append);
        assert!(
            matches!(&refused, Err(TracefsError::Invalid(message)) if message.starts_with("bad count")),
            "{bad}: {refused:?}"
        );
    }
    // Counts as C writes them, as Linux's kstrtoul reads them; an empty
    // one is no count.
    for (count, shown) in [("0x10", "count=16"), ("+5", "count=5"), ("", "unlimited")] {
        tracefs::write("set_ftrace_filter", &format!("fib:traceoff:{count}"), FilterMode::Append).unwrap();
        assert!(read("set_ftrace_filter").ends_with(&format!("fib:traceoff:{shown}\n")), "{}", read("set_ftrace_filter"));
        tracefs::write("set_ftrace_filter", &format!("!fib:traceoff:{count}"), FilterMode::Append).unwrap();
    }
    assert_eq!(read("set_ftrace_filter"), "kernel::workload::fib\n", "no command left");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    assert_eq!(read("enabled_functions"), "");
}

/// A glob that matches nothing refuses a write with an `enable_event`
/// command before the command's event is touched: it is never armed, so
/// removing it later leaves the top level's trace alone (a removed event
/// that may have recorded empties the buffers it recorded into).
#[ktest]
pub(super) fn a_refused_glob_leaves_a_commands_event_untouched() {
    tracefs::write("dynamic_events", "f:cmdev fib", FilterMode::Append).unwrap();
    write("trace", "");
    write("trace_marker", "kept");
    let refused = tracefs::write("set_ftrace_filter", "no::such::function fib:enable_event:fprobes:cmdev", FilterMode::Append);
    assert!(refused.is_err());
    assert_eq!(read("events/fprobes/cmdev/enable"), "0\n");
    assert_eq!(read("set_ftrace_filter"), "#### all functions enabled ####\n");
    tracefs::write("dynamic_events", "-:cmdev", FilterMode::Append).unwrap();
    assert!(read("trace").contains("tracing_mark_write: kept"), "{}", read("trace"));
    write("trace", "");
}

/// Linux's `:mod:` module filter is refused with its own message (this
/// kernel has no modules), not as an unknown command; nothing changes.
#[ktest]
pub(super) fn a_module_filter_is_refused_as_unsupported() {
    write("set_ftrace_filter", "fib");
    let before = read("set_ftrace_filter");
    for mode in [FilterMode::Append, FilterMode::Replace] {
        for bad in ["*fib:mod:kernel", "!*fib:mod:kernel", ":mod:kernel", "fib:mod"] {
            let refused = tracefs::write("set_ftrace_filter", bad, mode);
            assert!(
                matches!(&refused, Err(TracefsError::Invalid(message)) if message.contains("':mod:' (module filtering) is not supported")),
                "{bad}: {refused:?}"
            );
            assert_eq!(read("set_ftrace_filter"), before, "{bad} changes nothing");
        }
    }
    // Other unknown commands keep their message.
    let unknown = tracefs::write("set_ftrace_filter", "fib:bogus", FilterMode::Append);
    assert!(
        matches!(&unknown, Err(TracefsError::Invalid(message)) if message.starts_with("unknown command 'bogus'")),
        "{unknown:?}"
    );
    // Two counts: the count named, not taken for a command.
    let before = read("set_ftrace_filter");
    let two = tracefs::write("set_ftrace_filter", "kernel::workload::fib:traceoff:3:4", FilterMode::Append);
    assert!(matches!(&two, Err(TracefsError::Invalid(message)) if message.starts_with("bad count '3:4'")), "{two:?}");
    assert_eq!(read("set_ftrace_filter"), before, "a refused count changes nothing");
    write("set_ftrace_filter", "");
}

#[ktest]
pub(super) fn function_commands_attach_once_per_function_and_come_off_by_function() {
    let commands = || -> alloc::vec::Vec<String> { read("set_ftrace_filter").lines().skip(1).map(String::from).collect() };
    write("set_ftrace_filter", "kernel::workload::fs::mkdir:traceon");
    // Again on the same function: refused, nothing added.
    let again = tracefs::write("set_ftrace_filter", "kernel::workload::fs::mkdir:traceon", FilterMode::Append);
    assert!(matches!(again, Err(TracefsError::Invalid(_))), "{again:?}");
    // A glob over it and another: only the other is added.
    tracefs::write("set_ftrace_filter", "kernel::workload::fs::*:traceon", FilterMode::Append).unwrap();
    let attached = commands();
    assert_eq!(attached.iter().filter(|line| line.starts_with("kernel::workload::fs::mkdir:")).count(), 1, "{attached:?}");
    assert!(attached.len() >= 2, "{attached:?}");
    // Taken off by function, whatever glob attached it.
    tracefs::write("set_ftrace_filter", "!kernel::workload::fs::mkdir:traceon", FilterMode::Append).unwrap();
    assert!(commands().iter().all(|line| !line.starts_with("kernel::workload::fs::mkdir:")), "{:?}", commands());
    assert_eq!(commands().len(), attached.len() - 1);
    // `>` with a command alone empties the filter, as Linux's truncating
    // open does.
    write("set_ftrace_filter", "kernel::workload::fs::walk");
    write("set_ftrace_filter", "kernel::workload::fs::split:stacktrace");
    assert_eq!(read("set_ftrace_filter").lines().next(), Some("#### all functions enabled ####"));
    tracefs::write("set_ftrace_filter", "!kernel::workload::fs::split:stacktrace", FilterMode::Append).unwrap();
    // Commands of one write are checked in order: the second of two same
    // commands is refused before anything changes; a command and its
    // removal in one write are fine.
    let before = read("set_ftrace_filter");
    let twice = tracefs::write("set_ftrace_filter", "fib fib:traceoff fib:traceoff", FilterMode::Replace);
    assert!(matches!(twice, Err(TracefsError::Invalid(_))), "{twice:?}");
    assert_eq!(read("set_ftrace_filter"), before, "refused whole");
    tracefs::write("set_ftrace_filter", "fib:traceoff !fib:traceoff", FilterMode::Append).unwrap();
    assert_eq!(read("set_ftrace_filter"), before);
    // With a count and without, a command is two, as Linux's two probe ops
    // are: both attach, and each comes off alone (a count, read or not,
    // names the counted one: `!FUNC:traceoff:count=2`, as it is listed).
    tracefs::write("set_ftrace_filter", "fib:traceoff:2 fib:traceoff", FilterMode::Append).unwrap();
    let listed = commands();
    assert!(
        listed.ends_with(&["kernel::workload::fib:traceoff:count=2".into(), "kernel::workload::fib:traceoff:unlimited".into()])
    );
    tracefs::write("set_ftrace_filter", "!fib:traceoff", FilterMode::Append).unwrap();
    assert_eq!(commands().last().map(String::as_str), Some("kernel::workload::fib:traceoff:count=2"), "the counted one stays");
    tracefs::write("set_ftrace_filter", "!fib:traceoff:count=2", FilterMode::Append).unwrap();
    assert_eq!(read("set_ftrace_filter"), before, "and comes off as listed");
    // A write with one bad command changes nothing, the filter included.
    let before = read("set_ftrace_filter");
    let mixed = tracefs::write("set_ftrace_filter", "fib kernel::workload::run:traceoff nosuch_fn:traceoff", FilterMode::Replace);
    assert!(matches!(mixed, Err(TracefsError::Invalid(_))), "{mixed:?}");
    assert_eq!(read("set_ftrace_filter"), before, "a refused write changes nothing");
    // A count is each function's, as in Linux: every fs function run
    // records its one stack trace.
    write("trace", "");
    tracefs::write("set_ftrace_filter", "kernel::workload::fs::*:stacktrace:1", FilterMode::Append).unwrap();
    crate::workload::fs::run();
    let stacks = read("trace").lines().filter(|line| line.ends_with(": <stack trace>")).count();
    let spent = commands().iter().filter(|line| line.ends_with(":stacktrace:count=0")).count();
    assert!(stacks >= 5 && stacks == spent, "{stacks} stack traces, {spent} counts spent: {:?}", commands());
    tracefs::write("set_ftrace_filter", "!*:stacktrace:1", FilterMode::Append).unwrap();
    write("trace", "");
    tracefs::write("set_ftrace_filter", "!*:traceon", FilterMode::Append).unwrap();
    assert_eq!(read("set_ftrace_filter"), "#### all functions enabled ####\n");
    assert_eq!(read("enabled_functions"), "");
}

/// The pids of the tasks whose fib calls the top level's trace shows.
pub(super) fn traced_pids(trace: &str) -> alloc::collections::BTreeSet<u32> {
    trace
        .lines()
        .filter(|line| line.contains(": kernel::workload::fib <-"))
        .filter_map(|line| line.split_whitespace().next()?.rsplit('-').next()?.parse().ok())
        .collect()
}

#[ktest]
pub(super) fn set_ftrace_pid_traces_only_the_listed_tasks_and_their_children() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    let me = ftrace::task::current().pid();
    assert_eq!(read("set_ftrace_pid"), "no pid\n");
    write("set_ftrace_pid", &format!("{me}"));
    let workers = crate::workload::run_parallel(2, "fib", &["3"]).unwrap();
    assert_eq!(workers.lines().count(), 2);
    assert_eq!(fib(2), 1);
    assert_eq!(traced_pids(&read("trace")), [me as u32].into(), "only this task, not the workers");
    write("trace", "");
    write("options/function-fork", "1");
    crate::workload::run_parallel(2, "fib", &["2"]).unwrap();
    let children = traced_pids(&read("trace"));
    assert_eq!(children.len(), 2, "the two children joined: {children:?}");
    assert_eq!(read("set_ftrace_pid"), format!("{me}\n"), "and left the list once gone, as in Linux");
    write("options/function-fork", "0");
    // Listed in ascending order, as Linux's pid bitmap reads.
    let (a, b) = (me + 200_000, me + 100_000);
    write("set_ftrace_pid", &format!("{a} {me} {b}"));
    assert_eq!(read("set_ftrace_pid"), format!("{me}\n{b}\n{a}\n"));
    // A list emptied by exits still filters, and reads as nothing (not
    // `no pid`), until no pids are written, as in Linux.
    write("options/function-fork", "1");
    list_a_task_that_exits("set_ftrace_pid");
    write("options/function-fork", "0");
    assert_eq!(read("set_ftrace_pid"), "", "gone from the list, the list still set");
    write("trace", "");
    assert_eq!(fib(2), 1);
    assert_eq!(traced_pids(&read("trace")).len(), 0, "nothing traced: {}", read("trace"));
    write("trace", "");
    write("set_ftrace_pid", "");
    write("set_ftrace_notrace_pid", &format!("{me}"));
    assert_eq!(fib(2), 1);
    crate::workload::run_parallel(1, "fib", &["2"]).unwrap();
    let others = traced_pids(&read("trace"));
    assert!(!others.contains(&(me as u32)) && others.len() == 1, "everyone but this task: {others:?}");
    assert!(matches!(tracefs::write("set_ftrace_pid", "12 x", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    assert_eq!(read("set_ftrace_pid"), "no pid\n", "a refused write changes nothing");
    write("set_ftrace_notrace_pid", "");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    assert_eq!(read("enabled_functions"), "");
}

/// Writes the pid of a new task into the pid list `file`, then lets the
/// task end and waits for it.
pub(super) fn list_a_task_that_exits(file: &str) {
    static GO: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    GO.store(false, core::sync::atomic::Ordering::Relaxed);
    let waiter = crate::tests::events::waiting_task(&GO);
    write(file, &format!("{}", waiter.pid()));
    GO.store(true, core::sync::atomic::Ordering::Release);
    waiter.join();
}

/// A notrace list emptied by the exit of its only task (`function-fork`)
/// leaves the function tracer as it was: it still stops, and its instance
/// goes, where stopping once guessed the wrong ops from the emptied list.
#[ktest]
pub(super) fn a_notrace_list_emptied_by_an_exit_leaves_the_tracer_stoppable() {
    tracefs::instances::mkdir("instances/forked").unwrap();
    write("instances/forked/set_ftrace_filter", "fib");
    write("instances/forked/current_tracer", "function");
    write("instances/forked/options/function-fork", "1");
    list_a_task_that_exits("instances/forked/set_ftrace_notrace_pid");
    assert_eq!(read("instances/forked/set_ftrace_notrace_pid"), "no pid\n", "gone from the list");
    assert_eq!(fib(2), 1);
    let me = ftrace::task::current().pid() as u32;
    assert!(traced_pids(&read("instances/forked/trace")).contains(&me), "this task traced");
    write("instances/forked/current_tracer", "nop");
    assert_eq!(read("enabled_functions"), "", "no ops left on a site");
    tracefs::instances::rmdir("instances/forked").unwrap();
}

/// What a `FUNC:snapshot` command is attached to in the test below.
#[inline(never)]
pub(super) fn snapshot_trigger() {
    core::hint::black_box(());
}

#[ktest]
pub(super) fn a_snapshot_command_swaps_the_buffer_when_its_function_runs() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(3), 2);
    tracefs::write("set_ftrace_filter", "snapshot_trigger:snapshot:1", FilterMode::Append).unwrap();
    assert!(read("set_ftrace_filter").ends_with("::snapshot_trigger:snapshot:count=1\n"));
    assert!(read("snapshot").contains("# * Snapshot is allocated *"), "allocated, empty");
    snapshot_trigger();
    assert_eq!(fib(2), 1);
    assert_eq!(fib_lines(&read("snapshot")), 5, "fib(3)'s calls moved to the snapshot");
    assert_eq!(fib_lines(&read("trace")), 3, "recording went on in the empty buffer");
    snapshot_trigger();
    assert_eq!(fib_lines(&read("trace")), 3, "the count is spent");
    tracefs::write("set_ftrace_filter", "!snapshot_trigger:snapshot:1", FilterMode::Append).unwrap();
    assert_eq!(fib_lines(&read("snapshot")), 5, "the snapshot stays after the command goes");
    write("snapshot", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

#[ktest]
pub(super) fn a_snapshot_command_without_a_snapshot_buffer_says_so_and_stops_tracing() {
    tracefs::write("set_ftrace_filter", "snapshot_trigger:snapshot", FilterMode::Append).unwrap();
    write("snapshot", "0");
    snapshot_trigger();
    snapshot_trigger();
    let trace = read("trace");
    assert_eq!(
        crate::tests::events::triggers::snapshot_not_allocated(&trace),
        ["*** SNAPSHOT NOT ALLOCATED ***", "*** stopping trace here!   ***"],
        "said once, as Linux's function command says it: {trace}"
    );
    assert_eq!(read("tracing_on"), "0\n", "and tracing stopped there");
    tracefs::write("set_ftrace_filter", "!snapshot_trigger:snapshot", FilterMode::Append).unwrap();
    write("set_ftrace_filter", "");
    write("tracing_on", "1");
    write("trace", "");
}

#[ktest]
pub(super) fn func_stack_trace_follows_each_function_with_its_callers() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("options/func_stack_trace", "1");
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    let lines: alloc::vec::Vec<&str> = trace.lines().filter(|line| !line.starts_with('#')).collect();
    let stacks: alloc::vec::Vec<usize> = (0..lines.len()).filter(|&i| lines[i].ends_with(": <stack trace>")).collect();
    assert_eq!(stacks.len(), 3, "one per call: {trace}");
    for at in stacks {
        assert!(lines[at - 1].contains(": kernel::workload::fib <-"), "after the function's line: {trace}");
        assert_eq!(lines[at + 1], " => kernel::workload::fib", "{trace}");
    }
    write("options/func_stack_trace", "0");
    write("trace", "");
    assert_eq!(fib(1), 1);
    assert!(!read("trace").contains("<stack trace>"));
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    assert_eq!(read("enabled_functions"), "");
}

#[ktest]
pub(super) fn touched_functions_keeps_what_was_ever_traced() {
    write("set_ftrace_filter", "kernel::workload::fib");
    write("current_tracer", "function");
    let touched = read("touched_functions");
    assert!(touched.lines().any(|line| line == "kernel::workload::fib (1)"), "{touched}");
    let enabled = read("enabled_functions");
    assert!(enabled.lines().all(|line| touched.lines().any(|t| t == line)), "every enabled function is touched: {enabled}");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    assert_eq!(read("enabled_functions"), "");
    let touched = read("touched_functions");
    assert!(touched.lines().any(|line| line == "kernel::workload::fib (0)"), "still listed, traced by none: {touched}");
}

/// `dyn_ftrace_total_info`, in Linux 6.13's shape: one record per
/// patchable site (in service or not: `available_filter_functions` leaves
/// out a site taken out of service), the pages the table takes, and the
/// boot's update time.
#[ktest]
pub(super) fn dyn_ftrace_total_info_counts_the_sites() {
    let info = read("dyn_ftrace_total_info");
    let lines: alloc::vec::Vec<&str> = info.lines().collect();
    assert_eq!(lines.len(), 3, "{info}");
    let (sites, rest) = lines[0].split_once(" pages:").unwrap_or_else(|| panic!("{info}"));
    let (pages, groups) = rest.split_once(" groups: ").unwrap_or_else(|| panic!("{info}"));
    let sites: usize = sites.parse().unwrap();
    let mut every_site = 0;
    ftrace::for_each_site(|_| every_site += 1);
    assert_eq!(sites, every_site, "one record per site");
    assert!(sites >= read("available_filter_functions").lines().count(), "at least every listed function");
    let pages: usize = pages.parse().unwrap();
    assert!(pages > 0 && pages < sites, "{info}");
    assert_eq!(groups, "1");
    let boot_ns: u64 = lines[1]
        .strip_prefix("ftrace boot update time = ")
        .and_then(|rest| rest.strip_suffix(" (ns)"))
        .and_then(|ns| ns.parse().ok())
        .unwrap_or_else(|| panic!("{info}"));
    assert!(boot_ns > 0, "building the table took time: {info}");
    assert_eq!(lines[2], "ftrace module total update time = 0 (ns)");
    assert!(tracefs::write("dyn_ftrace_total_info", "1", FilterMode::Replace).is_err(), "read-only");
}

#[ktest]
pub(super) fn every_listed_name_can_be_written_back_to_set_ftrace_filter() {
    let functions = read("available_filter_functions");
    // Rust names hold spaces inside brackets, and single colons in braces.
    let spaced = functions.lines().find(|name| name.contains(' ')).expect("a generic name with a space");
    let braced = functions.lines().find(|name| name.contains("{shim:")).expect("a shim's name");
    let unique = |name: &str| functions.lines().filter(|line| *line == name).count() == 1;
    assert!(unique(spaced) && unique(braced), "{spaced} / {braced}");
    // What `grep ... > set_ftrace_filter` writes: one name a line.
    write("set_ftrace_filter", &format!("{spaced}\n{braced}\n"));
    let mut listed: alloc::vec::Vec<String> = read("set_ftrace_filter").lines().map(String::from).collect();
    listed.sort();
    let mut expected = alloc::vec![spaced.to_string(), braced.to_string()];
    expected.sort();
    assert_eq!(listed, expected);
    // On one line too, with a function command after a name with spaces.
    write("set_ftrace_filter", &format!("{spaced} !{spaced}"));
    assert_eq!(read("set_ftrace_filter"), "#### all functions enabled ####\n", "added, then removed");
    tracefs::write("set_ftrace_filter", &format!("{spaced}:traceoff:1"), FilterMode::Append).unwrap();
    assert!(read("set_ftrace_filter").contains(&format!("{spaced}:traceoff:count=1")), "{}", read("set_ftrace_filter"));
    write("set_ftrace_filter", "");
    tracefs::write("set_ftrace_filter", &format!("!{spaced}:traceoff:1"), FilterMode::Append).unwrap();
    assert_eq!(read("set_ftrace_filter"), "#### all functions enabled ####\n");
}

/// `fib(4)` then `fib(1)`, traced by the function tracer with
/// `sym-offset` (so each caller's call site shows): the lines after their
/// timestamps, if every call ran on one CPU (else the run is taken again).
pub(super) fn fib_sites(no_repeats: bool) -> alloc::vec::Vec<String> {
    for _ in 0..5 {
        // Turned on afresh each time: an earlier attempt's count left on
        // another CPU is forgotten.
        write("options/func-no-repeats", "0");
        write("options/func-no-repeats", if no_repeats { "1" } else { "0" });
        write("trace", "");
        assert_eq!(fib(4), 3);
        assert_eq!(fib(1), 1);
        let trace = read("trace");
        let lines: alloc::vec::Vec<(&str, &str)> = event_lines(&trace).into_iter().filter_map(function_text).collect();
        if lines.iter().all(|(cpu, _)| *cpu == lines[0].0) {
            return lines.into_iter().map(|(_, text)| text.to_string()).collect();
        }
    }
    panic!("fib(4) never ran on one CPU");
}
