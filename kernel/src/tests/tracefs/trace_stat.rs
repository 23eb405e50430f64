//! The function profiler: `function_profile_enabled` and `trace_stat/`.

use alloc::format;
use alloc::string::String;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};

/// The hit count `trace_stat/functionN` gives `name`, summed over CPUs.
pub(super) fn profiled_hits(name: &str) -> u64 {
    (0..ring_buffer::trace_buffer::cpus())
        .map(|cpu| read(&format!("trace_stat/function{cpu}")))
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| {
                    let mut words = line.split_whitespace();
                    (words.next() == Some(name)).then(|| words.next()?.parse::<u64>().ok()).flatten()
                })
                .collect::<alloc::vec::Vec<_>>()
        })
        .sum()
}

#[ktest]
pub(super) fn the_function_profiler_counts_fib_calls_and_times_them() {
    write("set_ftrace_filter", "fib");
    write("function_profile_enabled", "1");
    assert_eq!(read("function_profile_enabled"), "1\n");
    crate::workload::run("fib", &["10"]).unwrap();
    write("function_profile_enabled", "0");
    assert_eq!(profiled_hits("kernel::workload::fib"), 177, "fib(10) calls fib 177 times");
    let stats = (0..ring_buffer::trace_buffer::cpus()).map(|cpu| read(&format!("trace_stat/function{cpu}"))).collect::<String>();
    assert!(
        stats.starts_with("  Function                               Hit    Time            Avg             s^2\n"),
        "{stats}"
    );
    let line = stats.lines().find(|line| line.trim_start().starts_with("kernel::workload::fib ")).unwrap();
    let words: alloc::vec::Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 8, "name, hits, then three durations in us: {line}");
    let total: f64 = words[2].parse().unwrap();
    let avg: f64 = words[4].parse().unwrap();
    assert!(total > 0.0 && (avg * 177.0 - total).abs() <= total * 0.01 + 0.2, "average = total / hits: {line}");
    // Starting again empties the counts; the filter is followed.
    write("set_ftrace_filter", "kernel::workload::fs::*");
    write("function_profile_enabled", "1");
    crate::workload::run("fs", &[]).unwrap();
    write("function_profile_enabled", "0");
    assert_eq!(profiled_hits("kernel::workload::fib"), 0, "counts start from zero");
    assert_eq!(profiled_hits("kernel::workload::fs::run"), 1);
    assert!(tracefs::write("trace_stat/function0", "1", FilterMode::Replace).is_err());
    write("set_ftrace_filter", "");
    assert_eq!(read("enabled_functions"), "", "nothing left enabled");
}

/// `function_profile_enabled` reads a decimal number as Linux's `kstrtoul`
/// does and turns the profiler on for any but 0; it reads back 0 or 1.
#[ktest]
pub(super) fn function_profile_enabled_takes_any_decimal_number() {
    write("set_ftrace_filter", "fib");
    for (text, on) in [("2", "1\n"), ("0", "0\n"), ("+7", "1\n"), ("00", "0\n")] {
        write("function_profile_enabled", text);
        assert_eq!(read("function_profile_enabled"), on, "{text}");
    }
    write("function_profile_enabled", "1");
    for bad in ["-1", "on", "0x1", "1 2", ""] {
        let result = tracefs::write("function_profile_enabled", bad, FilterMode::Replace);
        assert!(matches!(result, Err(TracefsError::Invalid(_))), "{bad:?}: {result:?}");
        assert_eq!(read("function_profile_enabled"), "1\n", "{bad:?} changes nothing");
    }
    write("function_profile_enabled", "0");
    write("set_ftrace_filter", "");
    assert_eq!(read("enabled_functions"), "", "nothing left enabled");
}

/// A `trace_stat/functionN` row has Linux's columns: the name in 30, the
/// hits in 10, then each duration right after its 4 blanks; and a
/// function whose average is below `tracing_thresh` is not shown.
#[ktest]
pub(super) fn trace_stat_rows_have_linux_widths_and_honour_tracing_thresh() {
    write("set_ftrace_filter", "fib");
    write("function_profile_enabled", "1");
    crate::workload::run("fib", &["10"]).unwrap();
    write("function_profile_enabled", "0");
    write("set_ftrace_filter", "");
    let stats = (0..ring_buffer::trace_buffer::cpus()).map(|cpu| read(&format!("trace_stat/function{cpu}"))).collect::<String>();
    let line = stats.lines().find(|line| line.starts_with("  kernel::workload::fib ")).unwrap();
    assert_eq!(&line[32..34], "  ", "{line:?}");
    assert!(line[34..44].trim_start().parse::<u64>().is_ok(), "hits in 10 columns: {line:?}");
    assert_eq!(&line[44..48], "    ", "{line:?}");
    assert!(line.as_bytes()[48].is_ascii_digit(), "the total starts after 4 blanks: {line:?}");
    // Averages of fib(10)'s calls are far below 1 s: hidden, then shown
    // again once the threshold is off (the counts were kept).
    write("tracing_thresh", "1000000");
    let hidden = profiled_hits("kernel::workload::fib");
    write("tracing_thresh", "0");
    assert_eq!(hidden, 0, "below tracing_thresh");
    assert_eq!(profiled_hits("kernel::workload::fib"), 177);
}

/// Stops and restarts the profiler from inside a call it profiles, the
/// first time; returns at once after that.
#[inline(never)]
pub(super) fn restarts_the_profiler(restart: bool) {
    if restart {
        write("function_profile_enabled", "0");
        write("function_profile_enabled", "1");
    }
}

/// A call hooked before the profiler stopped adds no duration to the counts
/// it starts again with: one call after the restart is one duration.
#[ktest]
pub(super) fn a_call_hooked_before_a_restart_adds_no_time_to_the_new_counts() {
    write("set_ftrace_filter", "*::restarts_the_profiler");
    write("function_profile_enabled", "1");
    restarts_the_profiler(true);
    restarts_the_profiler(false);
    write("function_profile_enabled", "0");
    write("set_ftrace_filter", "");
    let name = Some("kernel::tests::tracefs::trace_stat::restarts_the_profiler");
    let stats: alloc::vec::Vec<_> = (0..ring_buffer::trace_buffer::cpus())
        .flat_map(trace::profile::function::cpu_stats)
        .filter(|stat| ftrace::symbols::kernel::name_of(stat.ip) == name)
        .collect();
    let hits: u64 = stats.iter().map(|stat| stat.hits).sum();
    let time: u64 = stats.iter().map(|stat| stat.time_ns).sum();
    let squares: u64 = stats.iter().map(|stat| stat.time_squared).sum();
    assert_eq!(hits, 1, "the call after the restart: {stats:?}");
    assert!(time > 0, "{stats:?}");
    assert_eq!(squares, time * time, "one duration added, not the hooked call's too: {stats:?}");
}
