//! The function_graph tracer's files: `tracing_thresh`, durations under
//! every clock, stack traces and return addresses under the graph tracer.

use super::event_lines;
use super::spin_for_ns;
use alloc::format;
use alloc::string::String;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

#[ktest]
pub(super) fn function_graph_through_trace_pipe_reads_as_in_trace() {
    // Some 20 pages of fib's calls, a quarter of their events leaves'
    // entries: read a page per CPU at a time, each leaf must still print as
    // `fib();`, as `trace` shows it, wherever a page ends.
    let original = read("buffer_size_kb");
    write("buffer_size_kb", "256");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function_graph");
    assert_eq!(fib(14), 377);
    write("tracing_on", "0");
    let calls = |text: &str| -> alloc::vec::Vec<String> {
        text.lines().filter(|line| line.contains("fib") || line.trim_end().ends_with('}')).map(String::from).collect()
    };
    let trace = calls(&read("trace"));
    let mut piped = String::new();
    trace::output::pipe::consume_events(trace::array::instances::top(), None, &mut piped).unwrap();
    assert!(trace.len() > 1000, "{}", trace.len());
    assert_eq!(calls(&piped), trace, "the same lines, leaves and all");
    write("tracing_on", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
}

/// The duration column of a function_graph line, in microseconds.
pub(super) fn duration_us(line: &str) -> f64 {
    let column = line.split(" us").next().unwrap_or_default();
    column.rsplit(' ').next().unwrap_or_default().parse().unwrap_or_else(|_| panic!("no duration: {line}"))
}

#[ktest]
pub(super) fn tracing_thresh_keeps_only_long_calls() {
    write("set_ftrace_filter", "fib kernel::tests::tracefs::spin_for_ns");
    write("tracing_thresh", "10000000");
    write("current_tracer", "function_graph");
    assert_eq!(fib(6), 8);
    let none = read("trace");
    assert_eq!(none.lines().filter(|line| !line.starts_with('#')).count(), 0, "no call took 10 s: {none}");
    write("tracing_thresh", "1000");
    assert_eq!(read("tracing_thresh"), "1000\n");
    spin_for_ns(2_000_000);
    let long = read("trace");
    let line = long
        .lines()
        .find(|line| line.ends_with("} /* kernel::tests::tracefs::spin_for_ns */"))
        .unwrap_or_else(|| panic!("{long}"));
    // ` 0) # 3012.345 us  |  } /* ... */`: at least the 1000 us asked.
    assert!(duration_us(line) >= 1000.0, "{line}");
    assert!(!long.contains("spin_for_ns() {"), "no entry lines: {long}");
    assert!(matches!(tracefs::write("tracing_thresh", "soon", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    write("tracing_thresh", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// Linux times a function_graph call with its local clock, whatever
/// `trace_clock` stamps the events with: under `counter` or `uptime` a
/// duration is still microseconds, not a count of events or ticks.
#[ktest]
pub(super) fn function_graph_durations_are_times_under_every_trace_clock() {
    write("set_ftrace_filter", "kernel::tests::tracefs::spin_for_ns");
    write("current_tracer", "function_graph");
    for clock in ["counter", "uptime", "global", "local"] {
        write("trace_clock", clock);
        spin_for_ns(300_000);
        let trace = read("trace");
        let line = trace
            .lines()
            .find(|line| line.ends_with("kernel::tests::tracefs::spin_for_ns();"))
            .unwrap_or_else(|| panic!("{clock}: {trace}"));
        // ` 0) + 301.234 us  |  kernel::...();`: at least the 300 us spun.
        assert!((300.0..1_000_000.0).contains(&duration_us(line)), "{clock}: {line}");
    }
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

#[ktest]
pub(super) fn stack_traces_under_the_graph_tracer_name_the_real_callers() {
    write("set_ftrace_filter", "fib");
    tracefs::write("set_ftrace_filter", "fib:stacktrace:2", FilterMode::Append).unwrap();
    // Chosen after the command, the graph tracer's ops runs first and has
    // hooked each call's return before the stack trace is taken.
    write("current_tracer", "function_graph");
    assert_eq!(fib(3), 2);
    let trace = read("trace");
    write("current_tracer", "nop");
    // Each `<stack trace>`'s frames, up to the comment's end.
    let mut chains: alloc::vec::Vec<alloc::vec::Vec<&str>> = alloc::vec::Vec::new();
    for line in trace.lines() {
        if line.ends_with("<stack trace>") {
            chains.push(alloc::vec::Vec::new());
        } else if let (Some(frame), Some(chain)) = (line.strip_prefix(" => "), chains.last_mut()) {
            chain.push(frame.trim_end_matches(" */"));
        }
    }
    assert_eq!(chains.len(), 2, "fib(3), then fib(2): {trace}");
    assert!(!chains.concat().iter().any(|frame| frame.contains("return_to_handler")), "{trace}");
    assert!(!chains.concat().iter().any(|frame| frame.starts_with("0x")), "every frame named: {trace}");
    // kernel_main never returns: its caller's return address lies past the
    // end of arch::enter_kernel, which names it, not whatever comes next.
    // (Only on the boot stack: after a test that panicked, the runner goes
    // on from a fresh one, whose chain ends at continue_tests.)
    if chains[0].contains(&"kernel_main") {
        assert!(chains[0].windows(2).any(|pair| pair == ["kernel_main", "arch::enter_kernel"]), "{trace}");
    }
    let test = "kernel::tests::tracefs::function_graph::stack_traces_under_the_graph_tracer_name_the_real_callers";
    assert_eq!(chains[0][..2], ["kernel::workload::fib", test], "fib(3), called by the test: {trace}");
    assert_eq!(chains[1][..3], ["kernel::workload::fib", "kernel::workload::fib", test], "fib(2), by fib(3): {trace}");
    tracefs::write("set_ftrace_filter", "!fib:stacktrace:2", FilterMode::Append).unwrap();
    write("set_ftrace_filter", "");
    write("trace", "");
}

/// `options/funcgraph-retaddr`, as Linux's: each call's entry line ends
/// with where the call returns to, ` /* <-caller+0xOFF/0xSIZE */` (before
/// the return value when `funcgraph-retval` is on too): the addresses the
/// function tracer gives as each call's parent.
#[ktest]
pub(super) fn funcgraph_retaddr_names_where_each_call_returns() {
    write("set_ftrace_filter", "fib");
    // The same calls (one call site here) under each tracer: the function
    // tracer with offsets, function_graph with return addresses.
    let mut runs = alloc::vec::Vec::new();
    for (tracer, sym_offset, retaddr) in [("function", "1", "0"), ("function_graph", "0", "1")] {
        write("current_tracer", tracer);
        write("options/sym-offset", sym_offset);
        write("options/funcgraph-retaddr", retaddr);
        write("trace", "");
        assert_eq!(fib(2), 1);
        runs.push(read("trace"));
    }
    write("options/funcgraph-retval", "1");
    write("trace", "");
    assert_eq!(fib(1), 1);
    let with_retval = read("trace");
    write("options/sym-addr", "1");
    let with_address = read("trace");
    write("options/sym-addr", "0");
    write("options/funcgraph-retval", "0");
    write("options/funcgraph-retaddr", "0");
    write("trace", "");
    assert_eq!(fib(1), 1);
    let without = read("trace");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");

    let parents: alloc::vec::Vec<&str> =
        event_lines(&runs[0]).into_iter().filter_map(|line| Some(line.split_once(" <-")?.1)).collect();
    assert_eq!(parents.len(), 3, "fib(2)'s calls: {}", runs[0]);
    assert!(parents[1].starts_with("kernel::workload::fib+0x"), "{parents:?}");
    let graph = &runs[1];
    let retaddrs: alloc::vec::Vec<&str> =
        event_lines(graph).into_iter().filter_map(|line| line.split_once(" /* <-")).map(|(_, rest)| rest).collect();
    let expected: alloc::vec::Vec<String> = parents.iter().map(|parent| format!("{parent} */")).collect();
    assert_eq!(retaddrs, expected, "{graph}");
    assert!(graph.contains(&format!("kernel::workload::fib() {{ /* <-{} */\n", parents[0])), "a nested call's: {graph}");
    let leaf =
        event_lines(&with_retval).into_iter().find(|line| line.contains("fib();")).unwrap_or_else(|| panic!("{with_retval}"));
    let (_, comment) = leaf.split_once("fib(); /* <-kernel::tests::tracefs::").unwrap_or_else(|| panic!("{leaf}"));
    assert!(comment.contains("+0x") && comment.ends_with(" ret=0x1 */"), "the address, then the value: {leaf}");
    // `sym-addr` adds the address's value, as Linux adds it to a symbol.
    let addressed = event_lines(&with_address).into_iter().find(|line| line.contains("fib();")).unwrap_or_default();
    let named = comment.strip_suffix(" ret=0x1 */").unwrap_or_default();
    assert!(addressed.contains(&format!("{named} <")) && addressed.ends_with("> ret=0x1 */"), "{addressed}");
    assert!(!without.contains("/* <-"), "off again: {without}");
}
