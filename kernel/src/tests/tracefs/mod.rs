//! tracefs files as a Linux tracing user reaches for them, one test
//! module per module of `crate::tracefs`; `README` here, and [`docs`]:
//! `docs/tracefs.md` against the files served.

mod buffer;
mod docs;
mod events;
mod function_graph;
mod functions;
mod options;
mod per_cpu;
mod printk;
mod saved_cmdlines;
mod stack_trace;
mod trace_stat;

use alloc::format;
use alloc::string::ToString;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// The value of `field: N` in a stats file.
fn stat(text: &str, field: &str) -> u64 {
    let line = text.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(": ")).expect(field);
    line.trim().parse().unwrap_or_else(|_| panic!("{field}: {line}"))
}

fn fib_lines(trace: &str) -> usize {
    trace.lines().filter(|line| line.contains(": kernel::workload::fib <-")).count()
}

/// fib(2) (3 calls) once on each CPU, each in a task pinned there.
fn fib_on_every_cpu() {
    for cpu in 0..ring_buffer::trace_buffer::cpus() {
        let task = crate::sched::spawn_on("fib-cpu", 1 << cpu, || fib(2)).unwrap();
        assert_eq!(task.join(), 1);
    }
}

/// The event lines of a `trace` (or `snapshot`) read.
fn event_lines(trace: &str) -> alloc::vec::Vec<&str> {
    trace.lines().filter(|line| !line.starts_with('#') && !line.is_empty()).collect()
}

/// `stat` summed over every CPU's `per_cpu/cpuN/stats`.
fn stat_sum(field: &str) -> u64 {
    (0..ring_buffer::trace_buffer::cpus()).map(|cpu| stat(&read(&format!("per_cpu/cpu{cpu}/stats")), field)).sum()
}

/// Stops recording from inside a call: its entry is recorded, its return
/// is not.
#[inline(never)]
fn turns_tracing_off() {
    write("tracing_on", "0");
}

/// `README` describes every file `ls` lists (a new file without a line
/// there fails here), in Linux's mini-HOWTO shape.
#[ktest]
fn readme_describes_every_file() {
    let readme = read("README");
    assert!(readme.starts_with("tracing mini-HOWTO"), "{readme}");
    let described = |name: &str| {
        readme.lines().any(|line| {
            line.strip_prefix("  ").and_then(|rest| rest.strip_prefix(name)).is_some_and(|after| after.starts_with(['\t', ' ']))
        })
    };
    for name in tracefs::names() {
        let entry = match name.split_once('/') {
            Some(("instances", _)) => "instances".to_string(),
            Some((dir, _)) => format!("{dir}/"),
            None => name,
        };
        assert!(described(&entry), "README says nothing of {entry}");
    }
    assert!(tracefs::names().any(|name| name == "instances/"), "ls lists the instances directory, empty or not");
    assert!(matches!(tracefs::write("README", "x", FilterMode::Replace), Err(TracefsError::NotWritable(_))));
}

/// Spins until the tracer's clock has advanced `ns` (a call that takes at
/// least that long by the clock tracing_thresh uses, however loaded the host).
#[inline(never)]
fn spin_for_ns(ns: u64) {
    let start = ring_buffer::clock::now_ns();
    while ring_buffer::clock::now_ns() - start < ns {
        core::hint::spin_loop();
    }
}

/// What a function tracer line says after its timestamp, and its CPU.
fn function_text(line: &str) -> Option<(&str, &str)> {
    let cpu = line.split('[').nth(1)?.split(']').next()?;
    Some((cpu, line.split_once(": ")?.1))
}
