//! `per_cpu/cpuN/`: one CPU's trace and stats.

use super::fib_lines;
use super::stat;
use alloc::format;
use alloc::string::String;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};

#[ktest]
pub(super) fn per_cpu_trace_and_stats_split_the_buffer_by_cpu() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    crate::workload::run("fib", &["5"]).unwrap();
    write("tracing_on", "0");
    let cpus = ring_buffer::trace_buffer::cpus();
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
    for file in ["stats", "trace_pipe"] {
        let refused = tracefs::write(&format!("per_cpu/cpu0/{file}"), "1", FilterMode::Replace);
        assert!(matches!(refused, Err(TracefsError::NotWritable(name)) if name == file), "{refused:?}");
    }
    // Each CPU's ring size, the same for all here.
    let size = read("buffer_size_kb");
    assert!((0..cpus).all(|cpu| read(&format!("per_cpu/cpu{cpu}/buffer_size_kb")) == size), "{size}");
    let refused = tracefs::write("per_cpu/cpu0/buffer_size_kb", "64", FilterMode::Replace);
    assert!(matches!(&refused, Err(TracefsError::Invalid(why)) if why.contains("write buffer_size_kb")), "{refused:?}");
    assert_eq!(read("per_cpu/cpu0/buffer_size_kb"), size, "a refusal changes nothing");
    write("tracing_on", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// fib lines in each CPU's buffer.
pub(super) fn fib_lines_per_cpu() -> alloc::vec::Vec<usize> {
    (0..ring_buffer::trace_buffer::cpus()).map(|cpu| fib_lines(&read(&format!("per_cpu/cpu{cpu}/trace")))).collect()
}
