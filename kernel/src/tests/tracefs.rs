//! tracefs files as a Linux tracing user reaches for them: per-CPU views
//! and buffer sizes.

use alloc::format;
use alloc::string::String;

use ftrace::FilterMode;
use ktest_macros::ktest;

use super::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// The value of `field: N` in a stats file.
fn stat(text: &str, field: &str) -> u64 {
    let line = text.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(": ")).expect(field);
    line.trim().parse().unwrap_or_else(|_| panic!("{field}: {line}"))
}

fn fib_lines(trace: &str) -> usize {
    trace.lines().filter(|line| line.ends_with(": kernel::workload::fib <-kernel::workload::fib") || line.ends_with(": kernel::workload::fib <-kernel::workload::run")).count()
}

#[ktest]
fn per_cpu_trace_and_stats_split_the_buffer_by_cpu() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    crate::workload::run("fib", &["5"]).unwrap();
    write("tracing_on", "0");
    let cpus = ftrace::buffer::cpus();
    let mut entries = 0;
    let mut lines = 0;
    for cpu in 0..cpus {
        let stats = read(&format!("per_cpu/cpu{cpu}/stats"));
        assert_eq!(stats.lines().count(), 8, "{stats}");
        assert!(stats.contains("\noldest event ts: ") && stats.contains("\nnow ts: "), "{stats}");
        let here = stat(&stats, "entries");
        assert_eq!(stat(&stats, "bytes"), here * 28, "28 bytes a function event: {stats}");
        entries += here;
        lines += fib_lines(&read(&format!("per_cpu/cpu{cpu}/trace")));
    }
    assert_eq!((entries, lines), (15, 15), "fib(5)'s 15 calls, each on one CPU's buffer");
    let busy = (0..cpus).find(|cpu| stat(&read(&format!("per_cpu/cpu{cpu}/stats")), "entries") > 0).unwrap();
    write(&format!("per_cpu/cpu{busy}/trace"), "");
    assert_eq!(stat(&read(&format!("per_cpu/cpu{busy}/stats")), "entries"), 0, "emptied that CPU's buffer");
    let missing = format!("per_cpu/cpu{cpus}/stats");
    assert!(matches!(tracefs::read(&missing, &mut String::new()), Err(TracefsError::NoSuchFile(_))));
    assert!(tracefs::write("per_cpu/cpu0/stats", "1", FilterMode::Replace).is_err());
    write("tracing_on", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

#[ktest]
fn buffer_size_kb_resizes_every_cpu_and_keeps_the_tracer() {
    let cpus = ftrace::buffer::cpus();
    let original = read("buffer_size_kb");
    assert_eq!(original, "4096\n");
    assert_eq!(read("buffer_total_size_kb"), format!("{}\n", 4096 * cpus));
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("buffer_size_kb", "8");
    assert_eq!(read("buffer_size_kb"), "8\n");
    assert_eq!(read("buffer_total_size_kb"), format!("{}\n", 8 * cpus));
    assert_eq!(read("current_tracer"), "function\n", "the tracer stays on");
    assert_eq!(fib(20), 6765);
    let (mut entries, mut overrun) = (0, 0);
    for cpu in 0..cpus {
        let stats = read(&format!("per_cpu/cpu{cpu}/stats"));
        entries += stat(&stats, "entries");
        overrun += stat(&stats, "overrun");
    }
    assert_eq!(entries + overrun, 21891, "fib(20)'s calls, kept or overwritten");
    assert!(entries <= 2 * 4096 / 28 * cpus as u64, "two 4 KiB pages a CPU hold them: {entries}");
    for bad in ["0", "abc", "99999999", "-8"] {
        assert!(matches!(tracefs::write("buffer_size_kb", bad, FilterMode::Replace), Err(TracefsError::Invalid(_))), "{bad}");
    }
    assert_eq!(read("buffer_size_kb"), "8\n", "a refused size changes nothing");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
    assert_eq!(read("buffer_size_kb"), original);
}
