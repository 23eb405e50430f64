//! The `per_cpu/cpuN/` directories: one CPU's `trace`, `trace_pipe`,
//! `stats` and `buffer_size_kb`.

use super::buffer::pipe;
use super::buffer::read_buffer_size_kb;
use super::buffer::until_key;
use super::Array;
use alloc::format;
use alloc::string::String;
use core::fmt::{self, Write};

/// The files each CPU has under `per_cpu/cpuN/`.
pub(super) const PER_CPU_FILES: [&str; 4] = ["trace", "trace_pipe", "stats", "buffer_size_kb"];

pub(super) fn per_cpu_names(prefix: &str) -> impl Iterator<Item = String> + '_ {
    (0..ring_buffer::trace_buffer::cpus())
        .flat_map(move |cpu| PER_CPU_FILES.iter().map(move |file| format!("{prefix}per_cpu/cpu{cpu}/{file}")))
}

/// `per_cpu/cpuN/FILE` within an array: (N, FILE), for a CPU that exists.
pub(super) fn per_cpu_file(name: &str) -> Option<(usize, &'static str)> {
    let (cpu, file) = name.strip_prefix("per_cpu/cpu")?.split_once('/')?;
    let cpu: usize = cpu.parse().ok().filter(|&cpu| cpu < ring_buffer::trace_buffer::cpus())?;
    PER_CPU_FILES.iter().find(|&&known| known == file).map(|&file| (cpu, file))
}

/// Reads `per_cpu/cpuN/FILE`.
pub(super) fn read_per_cpu(array: Array, cpu: usize, file: &str, out: &mut dyn Write) -> fmt::Result {
    if file == "trace" {
        return trace::output::read::write_trace_of(array, Some(cpu), out);
    }
    if file == "trace_pipe" {
        return pipe(array, Some(cpu), out, &mut until_key);
    }
    if file == "buffer_size_kb" {
        // Every CPU's ring has the same size here.
        return read_buffer_size_kb(array, out);
    }
    // Linux's layout (`tracing_stats_read`), timestamps in seconds; read
    // without pausing the CPU's writer, as Linux does (a pause would drop
    // the events it records meanwhile).
    let buffer = array.buffer();
    let stats = buffer.stats_of(cpu);
    let usage = buffer.usage_of(cpu);
    // By the array's clock: seconds, or the number for one that is no time.
    let in_ns = buffer.clock().in_ns();
    let seconds = |ns: u64| match in_ns {
        true => format!("{:5}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000),
        false => format!("{ns}"),
    };
    writeln!(out, "entries: {}", stats.entries)?;
    writeln!(out, "overrun: {}", stats.overrun)?;
    writeln!(out, "commit overrun: 0")?;
    writeln!(out, "bytes: {}", usage.bytes)?;
    writeln!(out, "oldest event ts: {}", seconds(usage.oldest_page_time))?;
    writeln!(out, "now ts: {}", seconds(buffer.now()))?;
    writeln!(out, "dropped events: {}", stats.dropped)?;
    writeln!(out, "read events: {}", stats.read)
}
