//! `trace_printk!`: its lines name their caller and follow the options.

use alloc::format;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self};
use crate::workload::fib;

/// Calls `trace_printk!` from a function of its own, whose name the line
/// must show.
#[inline(never)]
pub(super) fn printk_from_here(n: u64) -> bool {
    trace::trace_printk!("answer={n} {}\n", "forty-two")
}

/// The symbol `trace` shows for `printk_from_here`.
pub(super) fn printk_caller_name() -> &'static str {
    ftrace::symbols::kernel::name_of(printk_from_here as *const () as usize).expect("a symbol")
}

/// `trace_printk!` lines as Linux's: the caller's function, then the text;
/// `sym-offset`, `printk-msg-only` and `trace_printk` do what they do
/// there, and only the top level has the last two files.
#[ktest]
pub(super) fn trace_printk_names_its_caller_and_obeys_its_options() {
    trace_printk_whose_formatting_is_traced_stays_whole();
    write("trace", "");
    assert!(printk_from_here(42), "recorded");
    write("trace_marker", "marked");
    let caller = printk_caller_name();
    let trace = read("trace");
    let lines: alloc::vec::Vec<&str> = trace.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(lines.len(), 2, "{trace}");
    let (context, text) = lines[0].split_once(": ").map(|(_, rest)| (lines[0], rest)).unwrap();
    assert_eq!(text, format!("{caller}: answer=42 forty-two"), "{trace}");
    let pid = ftrace::task::current().pid();
    assert!(context.contains(&format!("-{pid} ")), "the caller's task: {context}");
    write("options/sym-offset", "1");
    let offset = read("trace");
    let line = offset.lines().find(|line| line.contains("answer=42")).unwrap();
    let place = line.split(": ").nth(1).unwrap();
    let (name, span) = place.split_once('+').expect("function+0xOFF/0xSIZE");
    assert_eq!(name, caller, "{line}");
    let (off, size) = span.split_once('/').unwrap();
    let parse = |hex: &str| u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap();
    assert!(0 < parse(off) && parse(off) < parse(size), "a place inside the caller: {line}");
    write("options/sym-offset", "0");
    // msg-only: the text alone, for trace_printk's lines and the marker's.
    write("options/printk-msg-only", "1");
    let bare = read("trace");
    let lines: alloc::vec::Vec<&str> = bare.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(lines, ["answer=42 forty-two", "marked"], "{bare}");
    // It needs trace_printk on, as in Linux.
    write("trace_options", "notrace_printk");
    assert!(read("trace").contains(&format!("{caller}: answer=42")), "context back with trace_printk off");
    assert!(!printk_from_here(7), "off: nothing recorded");
    assert!(!read("trace").contains("answer=7"));
    write("trace_options", "trace_printk");
    write("options/printk-msg-only", "0");
    // Nothing while tracing is off.
    write("tracing_on", "0");
    assert!(!printk_from_here(8));
    write("tracing_on", "1");
    assert!(!read("trace").contains("answer=8"));
    // A long text is cut at Linux's size.
    write("trace", "");
    let long = "x".repeat(2000);
    assert!(trace::trace_printk!("{long}"));
    let cut = read("trace");
    let line = cut.lines().find(|line| line.contains("xxxx")).unwrap();
    assert_eq!(line.split(": ").last().unwrap().len(), trace::printk::PRINTK_MAX, "cut at PRINTK_MAX");
    // Cut before a character that would not fit whole: still UTF-8.
    write("trace", "");
    let wide = "é".repeat(600);
    assert!(trace::trace_printk!("{wide}"));
    let cut = read("trace");
    let text = cut.lines().find(|line| line.contains('é')).and_then(|line| line.split(": ").last()).unwrap();
    assert_eq!(text.len(), trace::printk::PRINTK_MAX / 2 * 2, "{text}");
    assert!(text.chars().all(|c| c == 'é'), "{text}");
    // Top level only: an instance has neither file.
    tracefs::instances::mkdir("instances/printk").unwrap();
    for option in ["trace_printk", "printk-msg-only"] {
        assert!(tracefs::exists(&format!("options/{option}")));
        assert!(!tracefs::exists(&format!("instances/printk/options/{option}")), "{option}");
        let refused = tracefs::write(&format!("instances/printk/options/{option}"), "1", FilterMode::Replace);
        assert!(refused.is_err(), "{option}: {refused:?}");
    }
    assert!(read("instances/printk/trace_options").contains("\ntrace_printk\n"), "listed there, as in Linux");
    tracefs::instances::rmdir("instances/printk").unwrap();
    write("trace", "");
}

/// An argument whose formatting calls a traced function.
pub(super) struct CallsFib;

impl core::fmt::Display for CallsFib {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fib(3)={}", fib(3))
    }
}

/// `trace_printk!` formats its arguments twice, the second time inside the
/// buffer's write: the function tracer's events from that pass are dropped
/// (counted in `dropped events`), not written over the text.
pub(super) fn trace_printk_whose_formatting_is_traced_stays_whole() {
    let dropped = || -> u64 {
        (0..ring_buffer::trace_buffer::cpus())
            .map(|cpu| read(&format!("per_cpu/cpu{cpu}/stats")))
            .filter_map(|stats| stats.lines().find_map(|line| line.strip_prefix("dropped events: ")?.parse::<u64>().ok()))
            .sum()
    };
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    let before = dropped();
    assert!(trace::trace_printk!("{}", CallsFib));
    let trace = read("trace");
    let after = dropped();
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    let lines: alloc::vec::Vec<&str> = trace.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(lines.len(), 6, "fib(3)'s five calls from the counting pass, then the text: {trace}");
    assert!(lines[..5].iter().all(|line| line.contains(": kernel::workload::fib <-")), "{trace}");
    assert!(lines[5].ends_with(": fib(3)=2"), "{trace}");
    assert_eq!(after - before, 5, "the filling pass's five calls, dropped");
    write("trace", "");
}
