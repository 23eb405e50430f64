//! `trace_options` and `options/`: how each option changes what `trace`
//! prints (context, raw/hex/fields, func_no_repeats, latency-format,
//! record-cmd, record-tgid, verbose).

use super::event_lines;
use super::functions::fib_sites;
use alloc::format;
use alloc::string::{String, ToString};

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

#[ktest]
pub(super) fn trace_options_change_how_trace_prints() {
    // The generic options in Linux's order, then the current tracer's.
    let generic = "print-parent\nnosym-offset\nnosym-addr\nnoverbose\nnoraw\nnohex\nnofields\ntrace_printk\nannotate\nnoprintk-msg-only\ncontext-info\n\
                   nolatency-format\nrecord-cmd\nnorecord-tgid\n\
                   overwrite\nnodisable_on_free\nirq-info\nmarkers\nnoevent-fork\nnofunction-fork\nnostacktrace\n";
    assert_eq!(read("trace_options"), generic, "nop has no options of its own");
    let refused = tracefs::write("trace_options", "funcgraph-proc", FilterMode::Replace);
    assert!(matches!(refused, Err(TracefsError::Invalid(_))), "not function_graph's while nop is current: {refused:?}");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(read("trace_options"), format!("{generic}nofunc_stack_trace\nnofunc-no-repeats\n"));
    assert_eq!(fib(1), 1);
    let line = |text: String| text.lines().find(|line| line.contains(": kernel::workload::fib")).unwrap().to_string();
    assert!(line(read("trace")).contains(": kernel::workload::fib <-"), "the parent by default");
    write("options/sym-offset", "1");
    write("trace_options", "noprint-parent");
    let plain = line(read("trace"));
    assert!(plain.contains(": kernel::workload::fib+0x0/0x"), "{plain}");
    assert!(!plain.contains(" <-"), "no parent: {plain}");
    assert_eq!(read("options/print-parent"), "0\n");
    for bad in ["bogus", "nobogus"] {
        assert!(matches!(tracefs::write("trace_options", bad, FilterMode::Replace), Err(TracefsError::Invalid(_))), "{bad}");
    }
    assert!(tracefs::write("options/sym-offset", "2", FilterMode::Replace).is_err());
    write("current_tracer", "function_graph");
    // print-parent off and sym-offset on by now; function_graph's own
    // options in Linux's order.
    let changed = generic.replacen("print-parent", "noprint-parent", 1).replace("nosym-offset", "sym-offset");
    let graph_options =
        "nofuncgraph-overrun\nfuncgraph-cpu\nfuncgraph-overhead\nnofuncgraph-proc\nfuncgraph-duration\nnofuncgraph-abstime\n\
                         funcgraph-irqs\nnofuncgraph-tail\nnofuncgraph-retval\nnofuncgraph-retval-hex\nnofuncgraph-retaddr\nsleep-time\ngraph-time\n";
    assert_eq!(read("trace_options"), format!("{changed}{graph_options}"));
    write("trace_options", "funcgraph-proc");
    write("options/funcgraph-abstime", "1");
    assert_eq!(fib(1), 1);
    let graph = read("trace");
    assert!(graph.contains("#     TIME        CPU  TASK/PID         DURATION"), "{graph}");
    let call = graph.lines().find(|line| line.ends_with("kernel::workload::fib();")).unwrap();
    // time | CPU) comm-pid | duration | call
    let columns: alloc::vec::Vec<&str> = call.split(" | ").collect();
    assert_eq!(columns.len(), 4, "{call}");
    assert!(columns[0].trim().split('.').count() == 2, "a timestamp first: {call}");
    assert!(columns[1].trim_start().starts_with("0) ") || columns[1].contains(") "), "then the CPU and the task: {call}");
    assert!(columns[1].rsplit('-').next().unwrap().trim().parse::<u32>().is_ok(), "comm-pid: {call}");
    write("options/funcgraph-duration", "0");
    assert!(!read("trace").contains(" us "), "no durations");
    write("options/funcgraph-cpu", "0");
    let bare = read("trace");
    let call = bare.lines().find(|line| line.ends_with("kernel::workload::fib();")).unwrap();
    assert_eq!(call.split(" | ").count(), 3, "the time, the task and the call: {call}");
    assert!(!call.contains(") "), "no CPU: {call}");
    write("options/funcgraph-cpu", "1");
    for option in ["sym-offset", "funcgraph-proc", "funcgraph-abstime"] {
        write(&format!("options/{option}"), "0");
    }
    write("options/print-parent", "1");
    write("options/funcgraph-duration", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// `irq-info`, `context-info`, `sym-addr`, `markers` and `funcgraph-tail`
/// do to `trace` and `trace_marker` what they do on Linux.
#[ktest]
pub(super) fn context_address_marker_and_tail_options() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(1), 1);
    let fib_line = |text: &str| text.lines().find(|line| line.contains("kernel::workload::fib <")).map(String::from);
    let with_flags = fib_line(&read("trace")).unwrap();
    write("options/irq-info", "0");
    let trace = read("trace");
    let line = fib_line(&trace).unwrap();
    assert!(!trace.contains("irqs-off") && trace.contains("#           TASK-PID     CPU#     TIMESTAMP  FUNCTION"), "{trace}");
    // The five flags (`d....`) go: `[00N]  ` then the time.
    assert_eq!(line.len() + 5, with_flags.len(), "{line} / {with_flags}");
    assert!(line.contains("]  ") && !line.contains("...."), "{line}");
    write("options/context-info", "0");
    let trace = read("trace");
    let line = fib_line(&trace).unwrap();
    assert!(line.starts_with("kernel::workload::fib <-"), "the event alone: {line}");
    assert!(trace.starts_with("# tracer: function\n#\nkernel::workload::fib <-"), "no column header: {trace}");
    write("options/sym-addr", "1");
    let line = fib_line(&read("trace")).unwrap();
    let address = format!("kernel::workload::fib <{:016x}> <-", fib as *const () as usize);
    assert!(line.starts_with(&address), "{line}, not {address}");
    write("options/sym-addr", "0");
    write("options/context-info", "1");
    write("options/irq-info", "1");
    write("options/markers", "0");
    let refused = tracefs::write("trace_marker", "hidden", FilterMode::Replace);
    assert!(matches!(&refused, Err(TracefsError::Invalid(message)) if message.contains("options/markers")), "{refused:?}");
    assert!(!read("trace").contains("hidden"));
    write("options/markers", "1");
    write("trace_marker", "shown");
    assert!(read("trace").contains("tracing_mark_write: shown"));

    write("current_tracer", "function_graph");
    assert_eq!(fib(2), 1);
    assert!(!read("trace").contains("} /*"), "plain braces by default");
    write("options/funcgraph-tail", "1");
    let graph = read("trace");
    assert!(graph.lines().any(|line| line.ends_with("} /* kernel::workload::fib */")), "{graph}");
    write("options/context-info", "0");
    let graph = read("trace");
    assert!(graph.lines().any(|line| line == "kernel::workload::fib() {"), "no columns: {graph}");
    assert!(!graph.contains("FUNCTION CALLS"), "no column header: {graph}");
    write("options/context-info", "1");
    write("options/funcgraph-tail", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// `raw`, `hex` and `fields` print the same records as Linux's options of
/// those names: numbers, hex words, and each field by the event's format.
#[ktest]
pub(super) fn raw_hex_and_fields_print_records_as_numbers_words_and_fields() {
    write("trace", "");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(1), 1);
    let fib_address = fib as *const () as usize;
    let pid = ftrace::task::current().pid();
    let event_line = |trace: &str| trace.lines().find(|line| !line.starts_with('#')).map(String::from).unwrap_or_default();
    write("options/raw", "1");
    let raw = event_line(&read("trace"));
    let words: alloc::vec::Vec<&str> = raw.split(' ').collect();
    assert_eq!(words.len(), 5, "pid cpu timestamp ip parent_ip: {raw}");
    assert_eq!(words[0], format!("{pid}"), "{raw}");
    assert!(words[1].parse::<u32>().is_ok() && words[2].parse::<u64>().unwrap() > 0, "{raw}");
    assert_eq!(words[3], format!("{fib_address:x}"), "the function, in hex: {raw}");
    let parent = usize::from_str_radix(words[4], 16).unwrap();
    assert_eq!(
        ftrace::symbols::kernel::name_of(parent),
        Some("kernel::tests::tracefs::options::raw_hex_and_fields_print_records_as_numbers_words_and_fields")
    );
    write("options/hex", "1");
    let hex = event_line(&read("trace"));
    assert_eq!(
        hex,
        format!(
            "{pid:08x} {:08x} {:016x} {fib_address:016x} {parent:016x} ",
            words[1].parse::<u32>().unwrap(),
            words[2].parse::<u64>().unwrap()
        ),
        "the same numbers as hex words, hex winning over raw"
    );
    assert!(read("trace").ends_with(" \n"), "no empty line after the function's record");
    write("options/hex", "0");
    write("options/context-info", "0");
    assert_eq!(event_line(&read("trace")), format!("{fib_address:x} {parent:x}"), "the event alone");
    write("options/context-info", "1");
    write("options/raw", "0");
    write("options/fields", "1");
    let fields = event_line(&read("trace"));
    let (context, event) = fields.split_once(": ").unwrap();
    assert!(context.contains(&format!("-{pid} ")), "the usual context: {fields}");
    assert!(event.starts_with("function: ip=kernel::workload::fib+0x0/0x"), "{fields}");
    assert!(event.contains(" parent_ip=kernel::tests::tracefs::options::raw_hex_and_fields"), "{fields}");
    write("current_tracer", "nop");
    write("trace", "");
    // A probe event: each field by its format, a string as text.
    tracefs::write("dynamic_events", "f:modes fib n=$arg1 s=$comm", FilterMode::Append).unwrap();
    write("events/fprobes/modes/enable", "1");
    assert_eq!(fib(1), 1);
    write("events/fprobes/modes/enable", "0");
    let fields = event_line(&read("trace"));
    let event = fields.split_once(": ").unwrap().1;
    assert!(event.starts_with("modes: __probe_ip=kernel::workload::fib+0x0/0x"), "{fields}");
    write("options/fields", "0");
    let text = event_line(&read("trace"));
    let comm = text.split("s=\"").nth(1).and_then(|rest| rest.strip_suffix('"')).unwrap_or_else(|| panic!("{text}"));
    assert!(!comm.is_empty(), "{text}");
    let tail = format!(" ({}) __probe_faults=0x0 (0) n=0x1 (1) s={comm}", fib_address as i64);
    assert!(event.ends_with(&tail), "{fields} / {text}");
    // Raw: an event without a raw form says its type.
    write("options/raw", "1");
    let id = read("events/fprobes/modes/id");
    let raw = event_line(&read("trace"));
    let parts: alloc::vec::Vec<&str> = raw.splitn(4, ' ').collect();
    assert_eq!((parts[0], parts[3]), (format!("{pid}").as_str(), format!("type: {}", id.trim()).as_str()), "{raw}");
    write("options/raw", "0");
    tracefs::write("dynamic_events", "-:modes", FilterMode::Append).unwrap();
    write("set_ftrace_filter", "");
    write("trace", "");
}

/// `options/func-no-repeats`, as Linux's: a call of the function a CPU
/// last recorded, from the same call site, is counted, not recorded; the
/// count goes in as one `func_repeats` line (`(repeats: N, last_ts: T)`)
/// before the next other call.
#[ktest]
pub(super) fn func_no_repeats_folds_repeated_calls_into_one_line() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("options/sym-offset", "1");
    let every = fib_sites(false);
    let folded = fib_sites(true);
    let trace = read("trace");
    write("options/func-no-repeats", "0");
    write("options/sym-offset", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    assert_eq!(every.len(), 10, "fib(4)'s nine calls and fib(1)'s one");
    // What the option should make of them: each run of calls from one site
    // is its first call, then (before the next other call) its repeats.
    let mut expected = alloc::vec::Vec::new();
    let mut run = 0;
    for (i, call) in every.iter().enumerate() {
        if i > 0 && *call == every[i - 1] {
            run += 1;
            continue;
        }
        if run > 0 {
            expected.push(format!("{} (repeats: {run}, last_ts:", every[i - 1]));
            run = 0;
        }
        expected.push(call.clone());
    }
    assert!(expected.len() < every.len(), "fib calls itself from one site several times in a row: {every:?}");
    let folded_heads: alloc::vec::Vec<&str> =
        folded.iter().map(|line| line.split_once(" (repeats:").map_or(line.as_str(), |(head, _)| head)).collect();
    let expected_heads: alloc::vec::Vec<&str> =
        expected.iter().map(|line| line.split_once(" (repeats:").map_or(line.as_str(), |(head, _)| head)).collect();
    assert_eq!(folded_heads, expected_heads, "{trace}");
    for (line, want) in folded.iter().zip(&expected) {
        assert!(line.starts_with(want.as_str()), "{line} / {want}");
    }
    // A repeat's last_ts lies between the line before it and its own time.
    let times: alloc::vec::Vec<f64> = event_lines(&trace)
        .iter()
        .map(|line| line.split(": ").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    for (i, line) in folded.iter().enumerate().filter(|(_, line)| line.contains("(repeats:")) {
        let last_ts: f64 = line.rsplit("last_ts:").next().unwrap().trim().trim_end_matches(')').trim().parse().unwrap();
        assert!(i > 0 && times[i - 1] <= last_ts && last_ts <= times[i], "{line}: {trace}");
    }
}

/// One `trace` line in Linux's latency format, taken apart: task, pid, CPU,
/// flags, microseconds since the buffer was emptied, gap mark, the event.
pub(super) struct LatencyLine<'a> {
    task: &'a str,
    pid: i32,
    cpu: usize,
    flags: &'a str,
    micros: u64,
    mark: char,
    event: &'a str,
}

pub(super) fn latency_line(line: &str) -> LatencyLine<'_> {
    // `kworker/-7         1d.h1.   12us+: event`: the task is the first 8
    // columns (right-aligned, cut to 8), then `-PID`, the CPU in 3 columns
    // and the 5 flags, then ` TIMEus` and the mark before `: `.
    let (task, rest) = line.split_at(8);
    let (pid, rest) = rest[1..].split_at(7);
    let (cpu, rest) = rest.split_at(4);
    let (flags, rest) = rest.split_at(5);
    let (time, event) = rest.split_once(": ").unwrap_or_else(|| panic!("{line}"));
    let (micros, mark) = time.trim_start().split_once("us").unwrap_or_else(|| panic!("{line}"));
    LatencyLine {
        task: task.trim_start(),
        pid: pid.trim().parse().unwrap_or_else(|_| panic!("{line}")),
        cpu: cpu.trim().parse().unwrap_or_else(|_| panic!("{line}")),
        flags,
        micros: micros.parse().unwrap_or_else(|_| panic!("{line}")),
        mark: mark.chars().next().unwrap_or_else(|| panic!("{line}")),
        event,
    }
}

/// `options/latency-format`, as Linux's: the latency banner over the
/// trace, then the same events with the task cut to 8 characters, the CPU,
/// the flags and the microseconds since the buffer was emptied, marked
/// (`+` over 10 us...) when the next line is far; nothing but the tracer's
/// name over an empty buffer; and under function_graph, the flags after
/// the task.
#[ktest]
pub(super) fn latency_format_prints_the_same_events_in_latency_columns() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("trace", "");
    assert_eq!(fib(6), 8);
    let plain = read("trace");
    write("options/latency-format", "1");
    let latency = read("trace");
    // A snapshot's times count from 0, as Linux's do.
    write("snapshot", "1");
    let snapshot = read("snapshot");
    write("snapshot", "0");
    let empty = read("trace");
    write("current_tracer", "function_graph");
    write("options/funcgraph-proc", "1");
    assert_eq!(fib(2), 1);
    let graph = read("trace");
    write("options/funcgraph-proc", "0");
    write("options/latency-format", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");

    assert_eq!(empty, "# tracer: function\n#\n", "taking the snapshot emptied the buffer");
    let first_plain = event_lines(&plain)[0];
    let (secs, micros) = first_plain.split_once(": ").unwrap().0.rsplit(' ').next().unwrap().split_once('.').unwrap();
    let absolute = secs.parse::<u64>().unwrap() * 1_000_000 + micros.parse::<u64>().unwrap();
    assert_eq!(latency_line(event_lines(&snapshot)[0]).micros, absolute, "{snapshot}");
    let entries = plain.lines().find(|line| line.starts_with("# entries-in-buffer")).unwrap();
    let (counts, cpus) = entries.split_once(": ").unwrap().1.split_once("   ").unwrap();
    // `CPU#N`: where the function tracer started.
    let banner = latency.lines().find(|line| line.starts_with("# latency: ")).unwrap_or_else(|| panic!("{latency}"));
    let (head, tail) = banner.split_once(", CPU#").unwrap();
    assert_eq!(head, format!("# latency: 0 us, #{counts}"), "{latency}");
    let (cpu, tail) = tail.split_once(' ').unwrap();
    assert!(cpu.parse::<usize>().unwrap() < ring_buffer::trace_buffer::cpus(), "{banner}");
    assert_eq!(tail, format!("| (M:PREEMPT VP:0, KP:0, SP:0 HP:0 {cpus})"), "{latency}");
    assert!(latency.starts_with("# tracer: function\n#\n# function latency trace v1.1.5 on "), "{latency}");
    assert!(latency.contains("\n#  cmd     pid     |||||| time  |   caller     \n"), "{latency}");

    let plain_lines = event_lines(&plain);
    let latency_lines = event_lines(&latency);
    assert_eq!(plain_lines.len(), latency_lines.len(), "{plain}\n{latency}");
    assert!(plain_lines.len() >= 25, "fib(6)'s 25 calls: {plain}");
    let mut first: Option<(u64, u64)> = None;
    for (index, (plain, line)) in plain_lines.iter().zip(&latency_lines).enumerate() {
        let parsed = latency_line(line);
        // The same event, task, CPU and flags as the plain line.
        let (context, event) = plain.split_once(": ").unwrap();
        assert_eq!(parsed.event, event, "{line} / {plain}");
        let (task, rest) = context.trim_start().rsplit_once('-').map(|(t, r)| (t, r)).unwrap();
        let task_rest = rest.split_whitespace().collect::<alloc::vec::Vec<_>>();
        assert_eq!(parsed.pid, task_rest[0].parse::<i32>().unwrap(), "{line} / {plain}");
        assert_eq!(format!("[{:03}]", parsed.cpu), task_rest[1], "{line} / {plain}");
        assert_eq!(parsed.flags, task_rest[2], "{line} / {plain}");
        assert_eq!(parsed.task, &task[..task.len().min(8)], "{line} / {plain}");
        // Times: the latency column counts from the buffer's start, the
        // plain one from boot: their differences agree (each rounded).
        let micros = |line: &str| -> u64 {
            let (secs, micros) = line.split_once(": ").unwrap().0.rsplit(' ').next().unwrap().split_once('.').unwrap();
            secs.parse::<u64>().unwrap() * 1_000_000 + micros.parse::<u64>().unwrap()
        };
        let (plain_start, latency_start) = *first.get_or_insert((micros(plain), parsed.micros));
        assert!(latency_start <= plain_start && latency_start < 1_000_000, "since the tracer started: {line}");
        let (since_plain, since_latency) = (micros(plain) - plain_start, parsed.micros - latency_start);
        assert!(since_plain.abs_diff(since_latency) <= 1, "{line} / {plain}");
        // The mark says how far the next line is (away from the edges,
        // where rounding decides).
        match plain_lines.get(index + 1).map(|next| micros(next) - micros(plain)) {
            None => assert_eq!(parsed.mark, ' ', "the last line: {line}"),
            Some(gap) if gap <= 8 => assert_eq!(parsed.mark, ' ', "{gap} us to the next: {line}"),
            Some(gap) if (12..=98).contains(&gap) => assert_eq!(parsed.mark, '+', "{gap} us to the next: {line}"),
            Some(_) => {}
        }
    }

    // function_graph: the legend, then ` d.... | ` after the task on each line.
    assert!(graph.contains("\n# function_graph latency trace v1.1.5 on "), "{graph}");
    assert!(graph.contains("  _-----=> irqs-off        \n"), "{graph}");
    assert!(graph.contains("# CPU  TASK/PID       ||||     DURATION                  FUNCTION CALLS\n"), "{graph}");
    let calls: alloc::vec::Vec<&str> = event_lines(&graph).into_iter().filter(|line| line.contains("fib")).collect();
    assert!(calls.len() >= 3, "{graph}");
    for line in calls {
        let after_task = line.split_once(" | ").unwrap_or_else(|| panic!("{line}")).1;
        let flags = after_task.split_once(" | ").unwrap_or_else(|| panic!("{line}")).0;
        assert!(flags.len() == 6 && flags.starts_with(' '), "the flags column: {line}");
    }
}

/// `options/record-cmd`, as Linux's (on by default): task names are saved
/// for traces while some trace array has it on; a task that starts and
/// ends while none does is `<...>-PID` in the trace and missing from
/// `saved_cmdlines`.
#[ktest]
pub(super) fn record_cmd_off_everywhere_leaves_new_tasks_unnamed() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    let run_worker = |name: &'static str| {
        let worker = crate::sched::spawn(name, || fib(3)).unwrap();
        let pid = worker.pid();
        assert_eq!(worker.join(), 2);
        pid
    };
    assert_eq!(read("options/record-cmd"), "1\n");
    write("options/record-cmd", "0");
    let unnamed = run_worker("cmd-off");
    tracefs::instances::mkdir("instances/names").unwrap();
    let named_by_instance = run_worker("cmd-inst");
    tracefs::instances::rmdir("instances/names").unwrap();
    write("options/record-cmd", "1");
    let named = run_worker("cmd-on");
    let trace = read("trace");
    let saved = read("saved_cmdlines");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");

    let calls_of = |prefix: String| event_lines(&trace).iter().filter(|line| line.trim_start().starts_with(&prefix)).count();
    assert!(calls_of(format!("<...>-{unnamed} ")) >= 3, "fib(3) of a task never named: {trace}");
    assert!(!saved.lines().any(|line| line.starts_with(&format!("{unnamed} "))), "{saved}");
    for (pid, name) in [(named_by_instance, "cmd-inst"), (named, "cmd-on")] {
        assert!(calls_of(format!("{name}-{pid} ")) >= 3, "an instance's option, then the top level's: {trace}");
        assert!(saved.lines().any(|line| line == format!("{pid} {name}")), "{saved}");
    }
}

/// `options/record-tgid`, as Linux's: the switches record each task's
/// thread group (a kernel thread's is its own pid) in `saved_tgids`, and
/// `trace` gets the TGID column; off, the column goes and what was
/// recorded stays. `options/verbose` with `latency-format`: Linux's long
/// form, whose index counts the lines.
#[ktest]
pub(super) fn record_tgid_and_verbose_shape_the_trace_as_linux() {
    let me = crate::sched::current().expect("a test runs in a task").pid();
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    // Records every task there is, this one too.
    write("options/record-tgid", "1");
    // A task made now is recorded when it first switches in.
    let worker = crate::sched::spawn("tgid-worker", || fib(3)).unwrap();
    let worker_pid = worker.pid();
    assert_eq!(worker.join(), 2);
    assert_eq!(fib(3), 2);
    let with_tgid = read("trace");
    let tgids = read("saved_tgids");
    write("options/record-tgid", "0");
    let without = read("trace");
    let tgids_after = read("saved_tgids");
    write("options/latency-format", "1");
    write("options/verbose", "1");
    let verbose = read("trace");
    write("options/verbose", "0");
    write("options/latency-format", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");

    for pid in [me, worker_pid] {
        assert!(tgids.lines().any(|line| line == format!("{pid} {pid}")), "{pid} in saved_tgids: {tgids}");
    }
    for line in tgids.lines() {
        assert!(tgids_after.lines().any(|after| after == line), "turning the option off keeps {line}: {tgids_after}");
    }
    assert!(with_tgid.contains("\n#           TASK-PID       TGID    CPU#  |||||  TIMESTAMP  FUNCTION\n"), "{with_tgid}");
    let lines = event_lines(&with_tgid);
    assert!(lines.len() >= 6, "fib(3) in two tasks: {with_tgid}");
    for line in &lines {
        // `name-PID       (    PID) [CPU] ...`: the tgid is the pid.
        let (task, rest) = line.split_once(" (").unwrap_or_else(|| panic!("a TGID column: {line}"));
        let pid = task.rsplit('-').next().unwrap().trim();
        let (tgid, _) = rest.split_once(") [").unwrap_or_else(|| panic!("{line}"));
        assert_eq!(tgid.trim(), pid, "{line}");
    }
    assert!(lines.iter().any(|line| line.contains(&format!("-{worker_pid} "))), "the worker's calls: {with_tgid}");
    assert!(!without.contains("TGID") && !event_lines(&without).iter().any(|line| line.contains(" (")), "{without}");

    // verbose: `NAME PID CPU FLAGS PREEMPT INDEX [US-HEX] MS (+MS): event`,
    // the index 0, 1, 2...; no legend under the banner.
    assert!(verbose.contains("# function latency trace v1.1.5 on ") && !verbose.contains("caller"), "{verbose}");
    let verbose_lines = event_lines(&verbose);
    assert_eq!(verbose_lines.len(), event_lines(&without).len(), "{verbose}");
    for (index, (line, plain)) in verbose_lines.iter().zip(event_lines(&without)).enumerate() {
        let fields: alloc::vec::Vec<&str> = line.split_whitespace().collect();
        let (context, event) = line.split_once(": ").unwrap();
        assert_eq!(event, plain.split_once(": ").unwrap().1, "{line} / {plain}");
        let plain_pid = plain.split_once(" [").unwrap().0.rsplit('-').next().unwrap().trim();
        assert_eq!(fields[1], plain_pid, "{line} / {plain}");
        assert_eq!(fields[5], format!("{index:08x}"), "the index counts the lines: {line}");
        assert!(context.contains("ms (+") && context.ends_with("ms)"), "{line}");
    }
}
