//! tracefs files as a Linux tracing user reaches for them: per-CPU views
//! and buffer sizes.

use alloc::format;
use alloc::string::{String, ToString};

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
    trace.lines().filter(|line| line.contains(": kernel::workload::fib <-")).count()
}

#[ktest]
fn per_cpu_trace_and_stats_split_the_buffer_by_cpu() {
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

/// fib(2) (3 calls) once on each CPU, each in a task pinned there.
fn fib_on_every_cpu() {
    for cpu in 0..ring_buffer::trace_buffer::cpus() {
        let task = crate::sched::spawn_on("fib-cpu", 1 << cpu, || fib(2)).unwrap();
        assert_eq!(task.join(), 1);
    }
}

/// fib lines in each CPU's buffer.
fn fib_lines_per_cpu() -> alloc::vec::Vec<usize> {
    (0..ring_buffer::trace_buffer::cpus()).map(|cpu| fib_lines(&read(&format!("per_cpu/cpu{cpu}/trace")))).collect()
}

/// `tracing_cpumask` records only the CPUs it names, in the live rings,
/// the snapshot's and rings a resize makes; a CPU that does not exist is
/// refused.
#[ktest]
fn tracing_cpumask_records_only_its_cpus() {
    let cpus = ring_buffer::trace_buffer::cpus();
    assert!(cpus >= 2, "the test kernel runs several CPUs");
    let all = format!("{:0width$x}\n", (1u64 << cpus) - 1, width = cpus.div_ceil(4));
    assert_eq!(read("tracing_cpumask"), all);
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("trace", "");
    // A snapshot buffer made before the mask is written follows it too.
    write("snapshot", "1");
    write("tracing_cpumask", "1");
    assert_eq!(read("tracing_cpumask"), format!("{:0width$x}\n", 1, width = cpus.div_ceil(4)));
    fib_on_every_cpu();
    let mut only_cpu0 = alloc::vec![0; cpus];
    only_cpu0[0] = 3;
    assert_eq!(fib_lines_per_cpu(), only_cpu0);
    assert_eq!(stat(&read("per_cpu/cpu1/stats"), "dropped events"), 0, "not recorded is not dropped");
    for bad in ["g", "", "1,,x", "+1", "f,f", "1,2,3", "123456789", &format!("{:x}", 1u64 << cpus)] {
        let refused = tracefs::write("tracing_cpumask", bad, FilterMode::Replace);
        assert!(matches!(refused, Err(TracefsError::Invalid(_))), "{bad}: {refused:?}");
    }
    assert_eq!(read("tracing_cpumask"), format!("{:0width$x}\n", 1, width = cpus.div_ceil(4)), "unchanged");
    // The snapshot's rings follow the mask (they record once swapped in),
    // and so do the rings a resize makes.
    write("snapshot", "1");
    fib_on_every_cpu();
    assert_eq!(fib_lines_per_cpu(), only_cpu0, "in the rings swapped in");
    let size = read("buffer_size_kb");
    write("buffer_size_kb", "8");
    assert_eq!(fib_lines_per_cpu(), only_cpu0, "the resize kept them");
    fib_on_every_cpu();
    let mut twice = only_cpu0.clone();
    twice[0] = 6;
    assert_eq!(fib_lines_per_cpu(), twice, "and the new rings record CPU 0 only");
    write("buffer_size_kb", size.trim());
    write("snapshot", "0");
    write("tracing_cpumask", &all);
    write("trace", "");
    fib_on_every_cpu();
    assert_eq!(fib_lines_per_cpu(), alloc::vec![3; cpus]);
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

#[ktest]
fn buffer_size_kb_resizes_every_cpu_and_keeps_the_tracer() {
    let cpus = ring_buffer::trace_buffer::cpus();
    let original = read("buffer_size_kb");
    // 1024 pages of 4080 data bytes, as Linux counts a ring's size.
    assert_eq!(original, "4080\n");
    assert_eq!(read("buffer_total_size_kb"), format!("{}\n", 4080 * cpus));
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("buffer_size_kb", "8");
    assert_eq!(read("buffer_size_kb"), "11\n", "8 KiB take 3 pages, which hold 11 KiB");
    assert_eq!(read("buffer_total_size_kb"), format!("{}\n", 11 * cpus));
    assert_eq!(read("current_tracer"), "function\n", "the tracer stays on");
    assert_eq!(fib(20), 6765);
    let (mut entries, mut overrun) = (0, 0);
    for cpu in 0..cpus {
        let stats = read(&format!("per_cpu/cpu{cpu}/stats"));
        entries += stat(&stats, "entries");
        overrun += stat(&stats, "overrun");
    }
    assert_eq!(entries + overrun, 21891, "fib(20)'s calls, kept or overwritten");
    assert!(entries <= 3 * 4096 / 28 * cpus as u64, "three 4 KiB pages a CPU hold them: {entries}");
    for bad in ["0", "abc", "99999999", "-8"] {
        assert!(matches!(tracefs::write("buffer_size_kb", bad, FilterMode::Replace), Err(TracefsError::Invalid(_))), "{bad}");
    }
    assert_eq!(read("buffer_size_kb"), "11\n", "a refused size changes nothing");
    write("buffer_size_kb", "1");
    assert_eq!(read("buffer_size_kb"), "7\n", "a size under two pages is rounded up, as in Linux");
    write("buffer_size_kb", "1408");
    assert_eq!(read("buffer_size_kb"), "1410\n", "Linux's default size, rounded up to whole pages as Linux shows it");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
    assert_eq!(read("buffer_size_kb"), original);
}

/// The event lines of a `trace` (or `snapshot`) read.
fn event_lines(trace: &str) -> alloc::vec::Vec<&str> {
    trace.lines().filter(|line| !line.starts_with('#') && !line.is_empty()).collect()
}

/// A resize keeps the events, as Linux's does: growing keeps every one,
/// with its time; shrinking keeps the newest that fit, counting the rest
/// as overrun; the snapshot's events are kept too.
#[ktest]
fn a_resize_keeps_the_events() {
    let original = read("buffer_size_kb");
    write("buffer_size_kb", "100");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("trace", "");
    assert_eq!(fib(15), 610);
    write("tracing_on", "0");
    let before = read("trace");
    assert_eq!(fib_lines(&before), 1973, "fib(15)'s calls");

    write("buffer_size_kb", "200");
    let grown = read("trace");
    assert_eq!(event_lines(&grown), event_lines(&before), "growing keeps every event, with its time");

    write("buffer_size_kb", "7");
    let shrunk = read("trace");
    let kept = event_lines(&shrunk);
    assert!(!kept.is_empty() && kept.len() < 1973, "two pages a CPU hold some: {}", kept.len());
    let mut rest = event_lines(&before).into_iter();
    assert!(kept.iter().all(|line| rest.any(|old| old == *line)), "the kept ones, in order: {shrunk}");
    assert_eq!(kept.last(), event_lines(&before).last(), "the newest among them");
    assert_eq!(stat_sum("entries") as usize, kept.len());
    assert_eq!(stat_sum("entries") + stat_sum("overrun"), 1973, "the rest counted as overrun");

    write("snapshot", "1");
    assert_eq!(event_lines(&read("trace")), alloc::vec::Vec::<&str>::new(), "the snapshot took them");
    write("buffer_size_kb", "100");
    assert_eq!(event_lines(&read("snapshot")), kept, "the snapshot's events are kept too");
    write("snapshot", "0");
    write("tracing_on", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
}

/// `free_buffer`, as in Linux: write-only; a write (its close, in Linux)
/// shrinks the rings to the fewest pages, in the top level and in an
/// instance alike, and with `options/disable_on_free` on (off by default)
/// stops that array's recording too.
#[ktest]
fn free_buffer_shrinks_the_rings() {
    let original = read("buffer_size_kb");
    assert!(matches!(tracefs::read("free_buffer", &mut String::new()), Err(TracefsError::NotReadable(_))));
    write("free_buffer", "");
    assert_eq!(read("buffer_size_kb"), "7\n", "two pages of 4080 bytes");
    assert_eq!(read("tracing_on"), "1\n", "recording goes on");
    write("buffer_size_kb", original.trim());
    tracefs::instances::mkdir("instances/freed").unwrap();
    assert_eq!(read("instances/freed/options/disable_on_free"), "0\n");
    write("instances/freed/options/disable_on_free", "1");
    write("instances/freed/free_buffer", "1");
    assert_eq!(read("instances/freed/buffer_size_kb"), "7\n");
    assert_eq!(read("instances/freed/tracing_on"), "0\n", "disable_on_free stopped it");
    assert_eq!(read("tracing_on"), "1\n", "the top level's option is its own");
    assert_eq!(read("buffer_size_kb"), original, "the top level's rings are its own");
    tracefs::instances::rmdir("instances/freed").unwrap();
}

/// A snapshot's rings are refused when the heap could hold them but then
/// not read the buffer (the copy and its event list, about twice its
/// size): every read would run the heap out.
#[ktest]
fn a_snapshot_the_heap_could_not_read_is_refused() {
    let original = read("buffer_size_kb");
    write("buffer_size_kb", "8");
    // Rings of `size` bytes in all, with room to read them (2 x size), fit
    // in 3 x size; a snapshot's rings too would need 4 x size.
    let size = crate::heap::stats().free * 2 / 7;
    let per_cpu_kb = size / ring_buffer::trace_buffer::cpus() / 4096 * ring_buffer::per_cpu::PAGE_DATA_SIZE / 1024;
    write("buffer_size_kb", &per_cpu_kb.to_string());
    assert_eq!(read("buffer_size_kb"), format!("{per_cpu_kb}\n"));
    let refused = tracefs::write("snapshot", "1", FilterMode::Replace);
    let allocated = read("snapshot").contains("Snapshot is allocated");
    // A `FUNC:snapshot` command is refused the same way, before the
    // filter written with it changes.
    write("set_ftrace_filter", "fib");
    let command = tracefs::write("set_ftrace_filter", "kernel::workload::run fib:snapshot", FilterMode::Append);
    let filter = read("set_ftrace_filter");
    write("set_ftrace_filter", "");
    write("snapshot", "0");
    write("buffer_size_kb", original.trim());
    assert!(matches!(refused, Err(TracefsError::Invalid(_))), "{refused:?}");
    assert!(!allocated, "a refusal changes nothing");
    assert!(command.is_err_and(|error| error.to_string().contains("memory")));
    assert_eq!(filter, "kernel::workload::fib\n", "the refused write added nothing");
    // At the usual size a snapshot is made as before.
    write("snapshot", "1");
    assert!(read("snapshot").contains("Snapshot is allocated"));
    write("snapshot", "0");
}

/// `stat` summed over every CPU's `per_cpu/cpuN/stats`.
fn stat_sum(field: &str) -> u64 {
    (0..ring_buffer::trace_buffer::cpus()).map(|cpu| stat(&read(&format!("per_cpu/cpu{cpu}/stats")), field)).sum()
}

/// `options/overwrite` off: a full buffer keeps its oldest events and drops
/// the new ones (counted as dropped), as Linux's producer/consumer mode.
#[ktest]
fn without_overwrite_a_full_buffer_keeps_its_first_events() {
    let original = read("buffer_size_kb");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("buffer_size_kb", "8");
    assert_eq!(read("options/overwrite"), "1\n");
    write("options/overwrite", "0");
    write("trace", "");
    assert_eq!(fib(20), 6765);
    let (entries, overrun, dropped) = (stat_sum("entries"), stat_sum("overrun"), stat_sum("dropped events"));
    assert_eq!((entries + dropped, overrun), (21891, 0), "fib(20)'s calls, kept or dropped, none overwritten");
    assert!(
        dropped > 0 && entries <= 3 * 4096 / 28 * ring_buffer::trace_buffer::cpus() as u64,
        "{entries} kept, {dropped} dropped"
    );
    let first = |trace: &str| trace.lines().find(|line| line.contains(": kernel::workload::fib <-")).map(String::from);
    let kept = first(&read("trace")).unwrap();
    assert!(!kept.ends_with("<-kernel::workload::fib"), "the first call is kept, from its caller: {kept}");
    // The snapshot's rings follow the option too.
    write("snapshot", "1");
    write("trace", "");
    assert_eq!(fib(20), 6765);
    assert_eq!(stat_sum("overrun"), 0, "the rings swapped in do not overwrite either");
    write("snapshot", "0");
    write("options/overwrite", "1");
    write("trace", "");
    assert_eq!(fib(20), 6765);
    assert!(stat_sum("overrun") > 0 && stat_sum("dropped events") == 0, "overwriting again");
    let kept = first(&read("trace")).unwrap();
    assert!(kept.ends_with("<-kernel::workload::fib"), "the first calls were overwritten: {kept}");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
}

/// The hit count `trace_stat/functionN` gives `name`, summed over CPUs.
fn profiled_hits(name: &str) -> u64 {
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
fn the_function_profiler_counts_fib_calls_and_times_them() {
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
fn function_profile_enabled_takes_any_decimal_number() {
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
fn trace_stat_rows_have_linux_widths_and_honour_tracing_thresh() {
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
fn restarts_the_profiler(restart: bool) {
    if restart {
        write("function_profile_enabled", "0");
        write("function_profile_enabled", "1");
    }
}

/// A call hooked before the profiler stopped adds no duration to the counts
/// it starts again with: one call after the restart is one duration.
#[ktest]
fn a_call_hooked_before_a_restart_adds_no_time_to_the_new_counts() {
    write("set_ftrace_filter", "*::restarts_the_profiler");
    write("function_profile_enabled", "1");
    restarts_the_profiler(true);
    restarts_the_profiler(false);
    write("function_profile_enabled", "0");
    write("set_ftrace_filter", "");
    let name = Some("kernel::tests::tracefs::restarts_the_profiler");
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

/// A stack deepest inside the timer interrupt goes through the exception
/// entry: the frame after its call into the handler is the interrupted pc.
#[ktest]
fn the_stack_tracer_goes_through_the_exception_entry() {
    write("stack_trace_filter", "kernel_sched_tick");
    write("stack_max_size", "0");
    write("stack_tracer_enabled", "1");
    let start = arch::time::ticks();
    while arch::time::ticks() < start + 3 {
        arch::cpu::wait_for_interrupt();
    }
    write("stack_tracer_enabled", "0");
    let trace = read("stack_trace");
    write("stack_max_size", "0");
    write("stack_trace_filter", "");
    let mut entry = String::new();
    ftrace::symbols::kernel::write_return_address(&mut entry, arch::exceptions::handler_return()).unwrap();
    let lines: alloc::vec::Vec<&str> = trace.lines().collect();
    assert!(lines.get(2).is_some_and(|line| line.contains(" kernel_sched_tick+0x0/")), "{trace}");
    let at = lines.iter().position(|line| line.ends_with(&format!(" {entry}")));
    assert!(at.is_some_and(|at| at + 1 < lines.len()), "the handler's return into the entry, then the interrupted code: {trace}");
}

#[ktest]
fn the_stack_tracer_finds_the_deepest_fib_frame() {
    write("stack_trace_filter", "fib");
    write("stack_max_size", "0");
    write("stack_tracer_enabled", "1");
    assert_eq!(fib(12), 144);
    write("stack_tracer_enabled", "0");
    let max: usize = read("stack_max_size").trim().parse().unwrap();
    let trace = read("stack_trace");
    let lines: alloc::vec::Vec<&str> = trace.lines().collect();
    assert!(lines[0].starts_with("        Depth    Size   Location    ("), "{trace}");
    // Entry 0 is the deepest fib call, at the maximum depth; its callers
    // follow: fib(12) down to fib(1) is twelve nested calls.
    assert!(lines[2].starts_with(&format!("  0) {max:>8}   ")) && lines[2].contains("kernel::workload::fib+0x0/"), "{trace}");
    let fibs = lines[2..].iter().take_while(|line| line.contains(" kernel::workload::fib+")).count();
    assert_eq!(fibs, 12, "{trace}");
    let depths: alloc::vec::Vec<usize> =
        lines[2..].iter().map(|line| line.split_whitespace().nth(1).unwrap().parse().unwrap()).collect();
    assert!(depths.windows(2).all(|pair| pair[0] > pair[1]), "depths shrink outwards: {depths:?}");
    assert!(matches!(tracefs::write("stack_max_size", "big", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    write("stack_max_size", "1000000");
    assert_eq!(read("stack_max_size"), "1000000\n", "any number, as in Linux");
    write("stack_tracer_enabled", "1");
    assert_eq!(fib(12), 144);
    write("stack_tracer_enabled", "0");
    assert_eq!(read("stack_max_size"), "1000000\n", "no stack that deep");
    assert_eq!(read("stack_trace"), trace, "so the chain stays");
    write("stack_max_size", "0");
    assert_eq!(read("stack_max_size"), "0\n");
    write("stack_trace_filter", "");
    assert_eq!(read("stack_trace_filter"), "#### all functions enabled ####\n");
    assert_eq!(read("enabled_functions"), "");
}

/// `stack_tracer_enabled` is Linux's sysctl int (`proc_dointvec`): any
/// int, negative or in C's bases, is kept as written; not 0 is on.
#[ktest]
fn stack_tracer_enabled_takes_any_int_as_the_sysctl_does() {
    write("stack_trace_filter", "fib");
    for (text, back, on) in [("2", "2", true), ("-1", "-1", true), ("0x10", "16", true), ("010", "8", true), ("0", "0", false)] {
        write("stack_tracer_enabled", text);
        assert_eq!(read("stack_tracer_enabled"), format!("{back}\n"), "{text}");
        assert_eq!(trace::tracers::stack::is_enabled(), on, "{text}");
        assert_eq!(read("enabled_functions").is_empty(), !on, "{text}: the ops follows");
    }
    write("stack_tracer_enabled", "5");
    for bad in ["on", "+1", "2147483648", "-2147483649", "08", "-", "1x", ""] {
        let result = tracefs::write("stack_tracer_enabled", bad, FilterMode::Replace);
        assert!(matches!(result, Err(TracefsError::Invalid(_))), "{bad:?}: {result:?}");
        assert_eq!(read("stack_tracer_enabled"), "5\n", "{bad:?} changes nothing");
    }
    write("stack_tracer_enabled", "-2147483648");
    assert_eq!(read("stack_tracer_enabled"), "-2147483648\n", "the smallest int");
    write("stack_tracer_enabled", "0");
    write("stack_max_size", "0");
    write("stack_trace_filter", "");
    assert_eq!(read("enabled_functions"), "");
}

/// With the tracer off and no maximum, `stack_trace` says how to turn it
/// on, after the header, as Linux's does.
#[ktest]
fn stack_trace_says_the_tracer_is_disabled() {
    write("stack_tracer_enabled", "0");
    write("stack_max_size", "0");
    assert_eq!(
        read("stack_trace"),
        "        Depth    Size   Location    (0 entries)\n\
         \x20       -----    ----   --------\n\
         #\n\
         #  Stack tracer disabled\n\
         #\n\
         # To enable the stack tracer, either add 'stacktrace' to the\n\
         # kernel command line\n\
         # or 'echo 1 > /proc/sys/kernel/stack_tracer_enabled'\n\
         #\n"
    );
    // A maximum kept (or the tracer on) is not "disabled".
    write("stack_max_size", "100");
    assert!(!read("stack_trace").contains("disabled"));
    write("stack_max_size", "0");
    write("stack_trace_filter", "fib");
    write("stack_tracer_enabled", "1");
    assert!(!read("stack_trace").contains("disabled"));
    write("stack_tracer_enabled", "0");
    write("stack_max_size", "0");
    write("stack_trace_filter", "");
}

/// Every pid file reads its numbers as C writes them, as Linux's
/// `trace_pid_write` (`kstrtoul(word, 0, ...)`): `0x` hex, `010` octal.
#[ktest]
fn pid_files_read_numbers_in_c_bases() {
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
fn trace_pipe_streams_a_workload_running_in_another_task() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    let worker = crate::sched::spawn("fib-worker", || crate::workload::fib(15)).unwrap();
    let worker_pid = worker.pid();
    let mut out = String::new();
    let deadline = arch::time::ticks() + 20 * arch::time::HZ;
    // fib(15) calls fib 1973 times; stop once all came through the pipe.
    crate::tracefs::buffer::pipe(trace::array::instances::top(), None, &mut out, &mut |printed| {
        printed >= 1973 || arch::time::ticks() > deadline
    })
    .unwrap();
    assert_eq!(worker.join(), 610);
    let lines: alloc::vec::Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1973, "every call once, as it came");
    assert!(
        lines.iter().all(|line| line.contains(&format!("-{worker_pid} ")) && line.contains(": kernel::workload::fib <-")),
        "the worker's calls: {}",
        lines[0]
    );
    let times: alloc::vec::Vec<&str> = lines.iter().map(|line| line.split_whitespace().nth(3).unwrap()).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "oldest first");
    // A consuming read: nothing is left for `trace`, which counts, as
    // Linux does, what is in the buffer and what was overwritten.
    assert!(read("trace").contains("# entries-in-buffer/entries-written: 0/0 "), "{}", read("trace").lines().nth(2).unwrap());
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

#[ktest]
fn a_trace_pipe_reader_that_stops_takes_a_page_per_cpu_not_the_buffer() {
    let original = read("buffer_size_kb");
    write("buffer_size_kb", "64");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(15), 610); // 1973 calls: pages of them on this CPU
    write("tracing_on", "0");
    let before = fib_lines(&read("trace"));
    let piped = crate::shell::execute_to_text("cat trace_pipe | head -1").unwrap();
    assert_eq!(fib_lines(&piped), 1, "{piped}");
    let left = fib_lines(&read("trace"));
    // A function event takes at least 24 bytes; the task may have moved
    // between CPUs, each of which gives a page.
    let page_events = ring_buffer::per_cpu::PAGE_SIZE / 24 * ring_buffer::trace_buffer::cpus();
    assert!(left > 0 && before - left <= page_events, "only the pages head read are gone: {before} then {left}");
    // What a pipe takes a page at a time still comes out oldest first,
    // every event once.
    let mut out = String::new();
    let printed = trace::output::pipe::consume_events(trace::array::instances::top(), None, &mut out).unwrap();
    assert_eq!(printed, left);
    let times: alloc::vec::Vec<&str> = out.lines().map(|line| line.split_whitespace().nth(3).unwrap()).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "oldest first");
    write("tracing_on", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
}

/// Stops recording from inside a call: its entry is recorded, its return
/// is not.
#[inline(never)]
fn turns_tracing_off() {
    write("tracing_on", "0");
}

/// A `trace_pipe` reader drops the events it held from a ring emptied
/// since it took them (the whole buffer, or that CPU's), and only those.
#[ktest]
fn a_trace_pipe_reader_drops_what_it_held_when_the_buffer_is_emptied() {
    write("set_ftrace_filter", "kernel::tests::tracefs::turns_tracing_off");
    write("current_tracer", "function_graph");
    // The held entry is CPU 0's.
    crate::sched::set_affinity(1);
    let top = trace::array::instances::top();
    for (emptied, expected) in [("", 1), ("trace", 0), ("per_cpu/cpu0/trace", 0), ("per_cpu/cpu1/trace", 1)] {
        write("tracing_on", "1");
        turns_tracing_off();
        let mut reader = trace::output::pipe::PipeReader::new();
        let mut out = String::new();
        let first = reader.pass(top, None, &mut out).unwrap();
        assert_eq!((first.took, first.printed), (true, 0), "the entry, alone, waits for its return: {out}");
        if !emptied.is_empty() {
            write(emptied, "");
        }
        let second = reader.pass(top, None, &mut out).unwrap();
        assert_eq!(second.printed, expected, "{emptied} emptied between: {out}");
    }
    crate::sched::set_affinity(u64::MAX);
    write("tracing_on", "1");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

#[ktest]
fn function_graph_through_trace_pipe_reads_as_in_trace() {
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

#[ktest]
fn a_trace_pipe_pass_ends_although_reading_records_events() {
    // Each page the pass takes is a fresh allocation, and the allocator's
    // entry is traced: reading records events on the reader's own CPU, on
    // the page it reads next. A pass must still end (it reads each ring
    // at most once round), and give back what it took.
    let original = read("buffer_size_kb");
    write("buffer_size_kb", "8");
    write("set_ftrace_filter", "__rust_alloc*");
    write("current_tracer", "function");
    let mut out = String::new();
    let pages = trace::array::instances::top().buffer().pages_per_cpu() * trace::array::instances::top().buffer().cpus();
    let printed = trace::output::pipe::consume_events(trace::array::instances::top(), None, &mut out).unwrap();
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());
    assert!(printed > 0, "the allocations were recorded");
    assert!(out.lines().all(|line| line.contains("__rust_alloc")), "{out}");
    assert!(printed <= pages * ring_buffer::per_cpu::PAGE_SIZE / 8, "at most the ring's pages: {printed} events");
}

#[ktest]
fn a_reader_pauses_recording_without_touching_tracing_on() {
    // `cat trace` pauses the buffer while it copies it. A `traceoff` (or a
    // `tracing_on` write) during the read must stay, and two overlapping
    // readers must not leave recording paused or switched off.
    let buffer = trace::array::instances::top().buffer();
    write("trace", "");
    buffer.pause();
    buffer.pause();
    assert!(buffer.is_on(), "tracing_on is as it was");
    assert!(!buffer.write(&[0; 8]), "paused: nothing recorded");
    buffer.set_on(false); // what a traceoff trigger does mid-read
    buffer.resume();
    assert!(!buffer.write(&[0; 8]), "one reader still pauses it");
    buffer.resume();
    assert!(!buffer.is_on(), "the traceoff during the reads stays");
    assert!(!buffer.write(&[0; 8]));
    buffer.set_on(true);
    assert!(buffer.write(&[0; 8]), "recording again");
    write("trace", "");
}

#[ktest]
fn trace_marker_lines_land_among_the_events() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("trace_marker", "before fib");
    assert_eq!(fib(2), 1);
    // A text that ends with its newline keeps just that one, as in Linux:
    // no blank line after it.
    write("trace_marker", "after\n");
    write("tracing_on", "0");
    // Refused with an error, as Linux's write fails (EBADF).
    let refused = tracefs::write("trace_marker", "not recorded while tracing is off", FilterMode::Replace);
    assert!(matches!(&refused, Err(TracefsError::Invalid(message)) if message.contains("tracing_on is 0")), "{refused:?}");
    write("tracing_on", "1");
    let trace = read("trace");
    let lines: alloc::vec::Vec<&str> = trace.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(lines.len(), 5, "{trace}");
    assert!(lines[0].ends_with(": tracing_mark_write: before fib"), "{}", lines[0]);
    assert!(
        lines[1].ends_with(": kernel::workload::fib <-kernel::workload::fib") || lines[1].contains(": kernel::workload::fib <-")
    );
    assert!(lines[4].ends_with(": tracing_mark_write: after"), "{}", lines[4]);
    assert!(trace.ends_with(": tracing_mark_write: after\n"), "{trace}");
    assert!(matches!(tracefs::read("trace_marker", &mut String::new()), Err(TracefsError::NotReadable(_))));
    write("current_tracer", "function_graph");
    write("trace_marker", "in graph");
    let graph = read("trace");
    assert!(graph.lines().any(|line| line.ends_with("|  /* in graph */")), "{graph}");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// Calls `trace_printk!` from a function of its own, whose name the line
/// must show.
#[inline(never)]
fn printk_from_here(n: u64) -> bool {
    trace::trace_printk!("answer={n} {}\n", "forty-two")
}

/// The symbol `trace` shows for `printk_from_here`.
fn printk_caller_name() -> &'static str {
    ftrace::symbols::kernel::name_of(printk_from_here as *const () as usize).expect("a symbol")
}

/// `trace_printk!` lines as Linux's: the caller's function, then the text;
/// `sym-offset`, `printk-msg-only` and `trace_printk` do what they do
/// there, and only the top level has the last two files.
#[ktest]
fn trace_printk_names_its_caller_and_obeys_its_options() {
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

#[ktest]
fn trace_options_change_how_trace_prints() {
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
fn context_address_marker_and_tail_options() {
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

/// `saved_cmdlines` lists the names traces show; `saved_cmdlines_size`
/// takes 1 to 32768.
#[ktest]
fn saved_cmdlines_name_the_tasks_in_the_trace() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(1), 1);
    let trace = read("trace");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    // `           ktest-1       [000] ...` : the task column.
    let line = trace.lines().find(|line| line.contains(": kernel::workload::fib <-")).unwrap();
    let (name, rest) = line.trim_start().split_once('-').unwrap();
    let pid = rest.split_whitespace().next().unwrap();
    let saved = read("saved_cmdlines");
    assert!(saved.lines().any(|line| line == format!("{pid} {name}")), "{pid} {name} not in {saved}");
    assert_eq!(read("saved_cmdlines_size"), "1024\n");
    for bad in ["0", "32769", "many", ""] {
        let refused = tracefs::write("saved_cmdlines_size", bad, FilterMode::Replace);
        assert!(matches!(refused, Err(TracefsError::Invalid(_))), "{bad}: {refused:?}");
    }
    write("saved_cmdlines_size", "32768");
    assert_eq!(read("saved_cmdlines_size"), "32768\n");
    write("saved_cmdlines_size", "1024");
    assert_eq!(read("saved_cmdlines"), saved, "growing and back kept every name");
    // A running task pushed out by newer ones is named again at its next
    // switch, as Linux records names at sched_switch: the two workers push
    // this task out, and its waits for them switch it away and back.
    let me = format!("{pid} {name}");
    write("saved_cmdlines_size", "2");
    crate::workload::run_parallel(2, "fib", &["2"]).unwrap();
    assert!(read("saved_cmdlines").lines().any(|line| line == me), "named again: {}", read("saved_cmdlines"));
    write("saved_cmdlines_size", "1024");
}

#[ktest]
fn snapshot_keeps_a_copy_and_empties_the_buffer() {
    assert!(read("snapshot").contains("# * Snapshot is freed *"), "none at first");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(3), 2);
    write("snapshot", "1");
    assert_eq!(fib(1), 1);
    let snapshot = read("snapshot");
    assert_eq!(fib_lines(&snapshot), 5, "fib(3)'s calls in the snapshot: {snapshot}");
    assert_eq!(fib_lines(&read("trace")), 1, "the buffer was emptied, then fib(1) came");
    write("snapshot", "2");
    assert_eq!(fib_lines(&read("snapshot")), 0, "cleared, still there");
    let cleared = read("snapshot");
    assert!(cleared.contains("# * Snapshot is allocated *") && cleared.contains("# Snapshot commands:"), "{cleared}");
    write("snapshot", "0");
    assert!(read("snapshot").contains("# * Snapshot is freed *"));
    assert!(matches!(tracefs::write("snapshot", "x", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
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

/// The duration column of a function_graph line, in microseconds.
fn duration_us(line: &str) -> f64 {
    let column = line.split(" us").next().unwrap_or_default();
    column.rsplit(' ').next().unwrap_or_default().parse().unwrap_or_else(|_| panic!("no duration: {line}"))
}

#[ktest]
fn tracing_thresh_keeps_only_long_calls() {
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

#[ktest]
fn function_commands_switch_tracing_and_record_stacks() {
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
fn a_refused_glob_leaves_a_commands_event_untouched() {
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
fn a_module_filter_is_refused_as_unsupported() {
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
fn function_commands_attach_once_per_function_and_come_off_by_function() {
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

#[ktest]
fn set_event_and_available_events_name_every_event() {
    assert_eq!(read("available_events"), "sched:sched_switch\nsched:sched_wakeup\nsched:sched_wakeup_new\n");
    tracefs::write("dynamic_events", "f:ent fib n=$arg1", FilterMode::Append).unwrap();
    assert!(read("available_events").ends_with("fprobes:ent\n"));
    write("set_event", "sched_switch fprobes:*");
    assert_eq!(read("set_event"), "sched:sched_switch\nfprobes:ent\n");
    assert_eq!(read("events/sched/sched_switch/enable"), "1\n");
    assert_eq!(read("events/sched/enable"), "X\n", "one of three");
    assert_eq!(read("events/fprobes/ent/enable"), "1\n");
    assert_eq!(fib(2), 1);
    crate::sched::yield_now();
    let trace = read("trace");
    assert_eq!(trace.lines().filter(|line| line.contains(": ent: (kernel::workload::fib+0x0/")).count(), 3, "{trace}");
    assert!(
        trace.lines().filter(|line| line.contains(": ent: (")).all(|line| line.contains("] ..... ")),
        "recorded with interrupts on, as the call ran: {trace}"
    );
    tracefs::write("set_event", "!sched:*", FilterMode::Append).unwrap();
    assert_eq!(read("set_event"), "fprobes:ent\n");
    for bad in ["nosuch", "sched:nosuch", "nogroup:*"] {
        assert!(matches!(tracefs::write("set_event", bad, FilterMode::Replace), Err(TracefsError::Invalid(_))), "{bad}");
    }
    assert_eq!(read("set_event"), "fprobes:ent\n", "a refused write changes nothing");
    // A bare name is a group as well as an event, and an empty half is
    // every group or every event, as in Linux.
    write("set_event", "sched");
    assert_eq!(read("set_event"), "sched:sched_switch\nsched:sched_wakeup\nsched:sched_wakeup_new\n");
    write("set_event", "fprobes:");
    assert_eq!(read("set_event"), "fprobes:ent\n");
    tracefs::write("set_event", ":sched_wakeup ent", FilterMode::Append).unwrap();
    assert_eq!(read("set_event"), "sched:sched_wakeup\nfprobes:ent\n");
    assert!(read("events/sched/sched_switch/format").starts_with("name: sched_switch\nID: "));
    // `id` is the ID its format gives.
    for event in ["sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new", "fprobes/ent"] {
        let format = read(&format!("events/{event}/format"));
        let id = format.lines().nth(1).unwrap().strip_prefix("ID: ").unwrap();
        assert_eq!(read(&format!("events/{event}/id")), format!("{id}\n"), "{event}");
    }
    assert!(matches!(tracefs::write("events/fprobes/ent/id", "1", FilterMode::Replace), Err(TracefsError::NotWritable(_))));
    write("set_event", "");
    assert_eq!(read("events/enable"), "0\n");
    tracefs::write("dynamic_events", "-:ent", FilterMode::Append).unwrap();
}

/// `raw`, `hex` and `fields` print the same records as Linux's options of
/// those names: numbers, hex words, and each field by the event's format.
#[ktest]
fn raw_hex_and_fields_print_records_as_numbers_words_and_fields() {
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
        Some("kernel::tests::tracefs::raw_hex_and_fields_print_records_as_numbers_words_and_fields")
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
    assert!(event.contains(" parent_ip=kernel::tests::tracefs::raw_hex_and_fields"), "{fields}");
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

/// The pids of the tasks whose fib calls the top level's trace shows.
fn traced_pids(trace: &str) -> alloc::collections::BTreeSet<u32> {
    trace
        .lines()
        .filter(|line| line.contains(": kernel::workload::fib <-"))
        .filter_map(|line| line.split_whitespace().next()?.rsplit('-').next()?.parse().ok())
        .collect()
}

#[ktest]
fn set_ftrace_pid_traces_only_the_listed_tasks_and_their_children() {
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
fn list_a_task_that_exits(file: &str) {
    static GO: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    GO.store(false, core::sync::atomic::Ordering::Relaxed);
    let waiter = super::events::waiting_task(&GO);
    write(file, &format!("{}", waiter.pid()));
    GO.store(true, core::sync::atomic::Ordering::Release);
    waiter.join();
}

/// A notrace list emptied by the exit of its only task (`function-fork`)
/// leaves the function tracer as it was: it still stops, and its instance
/// goes, where stopping once guessed the wrong ops from the emptied list.
#[ktest]
fn a_notrace_list_emptied_by_an_exit_leaves_the_tracer_stoppable() {
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

/// An argument whose formatting calls a traced function.
struct CallsFib;

impl core::fmt::Display for CallsFib {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fib(3)={}", fib(3))
    }
}

/// `trace_printk!` formats its arguments twice, the second time inside the
/// buffer's write: the function tracer's events from that pass are dropped
/// (counted in `dropped events`), not written over the text.
fn trace_printk_whose_formatting_is_traced_stays_whole() {
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

/// What a `FUNC:snapshot` command is attached to in the test below.
#[inline(never)]
fn snapshot_trigger() {
    core::hint::black_box(());
}

#[ktest]
fn a_snapshot_command_swaps_the_buffer_when_its_function_runs() {
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
fn a_snapshot_command_without_a_snapshot_buffer_says_so_and_stops_tracing() {
    tracefs::write("set_ftrace_filter", "snapshot_trigger:snapshot", FilterMode::Append).unwrap();
    write("snapshot", "0");
    snapshot_trigger();
    snapshot_trigger();
    let trace = read("trace");
    assert_eq!(
        super::triggers::snapshot_not_allocated(&trace),
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
fn func_stack_trace_follows_each_function_with_its_callers() {
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

/// The timestamp column of `trace`'s fib lines.
fn fib_timestamps(trace: &str) -> alloc::vec::Vec<&str> {
    trace
        .lines()
        .filter(|line| line.contains(": kernel::workload::fib <-"))
        .filter_map(|line| line.split(": kernel::workload::fib").next()?.split_whitespace().last())
        .collect()
}

/// Linux times a function_graph call with its local clock, whatever
/// `trace_clock` stamps the events with: under `counter` or `uptime` a
/// duration is still microseconds, not a count of events or ticks.
#[ktest]
fn function_graph_durations_are_times_under_every_trace_clock() {
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
fn trace_clock_switches_between_local_global_and_counter() {
    assert_eq!(read("trace_clock"), clocks("local"));
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(1), 1);
    write("trace_clock", "counter");
    assert_eq!(read("trace_clock"), clocks("counter"));
    assert_eq!(fib_lines(&read("trace")), 0, "switching empties the buffer");
    assert_eq!(fib(3), 2);
    let trace = read("trace");
    let counts: alloc::vec::Vec<u64> = fib_timestamps(&trace).iter().map(|t| t.parse().unwrap()).collect();
    assert_eq!(counts.len(), 5, "{trace}");
    assert!(counts.windows(2).all(|w| w[1] > w[0] && w[1] - w[0] < 100), "counts, raw: {trace}");
    write("trace_clock", "global");
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    let stamps = fib_timestamps(&trace);
    assert_eq!(stamps.len(), 3, "{trace}");
    assert!(stamps.iter().all(|t| t.split_once('.').is_some_and(|(_, us)| us.len() == 6)), "seconds: {trace}");
    assert!(refused_clock("bogus") && refused_clock(""));
    // Linux's other names: `uptime` counts timer ticks (raw, and far fewer
    // than the calls), `mono` reads as `global` does.
    write("trace_clock", "uptime");
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    let ticks: alloc::vec::Vec<u64> = fib_timestamps(&trace).iter().map(|t| t.parse().unwrap()).collect();
    assert_eq!(ticks.len(), 3, "ticks, raw: {trace}");
    let now = arch::time::ticks();
    assert!(ticks.iter().all(|&t| t > 0 && t <= now) && ticks.windows(2).all(|w| w[1] >= w[0]), "ticks: {trace}");
    write("trace_clock", "mono");
    assert_eq!(read("trace_clock"), clocks("mono"));
    assert_eq!(fib(2), 1);
    let trace = read("trace");
    assert!(fib_timestamps(&trace).iter().all(|t| t.split_once('.').is_some_and(|(_, us)| us.len() == 6)), "seconds: {trace}");
    write("trace_clock", "global");
    assert_eq!(fib(2), 1);
    assert_eq!(read("trace_clock"), clocks("global"), "a refused write changes nothing");
    // Each trace array has its own clock, as in Linux: an instance's
    // switch leaves the top level's clock and events alone.
    tracefs::instances::mkdir("instances/clocks").unwrap();
    assert_eq!(read("instances/clocks/trace_clock"), clocks("local"));
    write("instances/clocks/set_ftrace_filter", "fib");
    write("instances/clocks/current_tracer", "function");
    write("instances/clocks/trace_clock", "counter");
    assert_eq!(fib(1), 1);
    assert_eq!(read("trace_clock"), clocks("global"));
    assert_eq!(fib_lines(&read("trace")), 4, "the top level's 3 and this one, its buffer kept");
    let counted = read("instances/clocks/trace");
    let stamps = fib_timestamps(&counted);
    assert!(stamps.len() == 1 && !stamps[0].contains('.'), "a count there: {counted}");
    write("instances/clocks/current_tracer", "nop");
    tracefs::instances::rmdir("instances/clocks").unwrap();
    write("trace_clock", "local");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

/// `trace_clock` as Linux lists it on this architecture, `current` in
/// brackets: its generic clocks, then the architecture's (x86_64:
/// `x86-tsc`; arm64 has none).
fn clocks(current: &str) -> String {
    let arch: &[&str] = if cfg!(target_arch = "x86_64") { &["x86-tsc"] } else { &[] };
    let names = ["local", "global", "counter", "uptime", "perf", "mono", "mono_raw", "boot", "tai"].iter().chain(arch);
    let shown: alloc::vec::Vec<String> =
        names.map(|name| if *name == current { format!("[{name}]") } else { String::from(*name) }).collect();
    format!("{}\n", shown.join(" "))
}

/// `timestamp_mode`: Linux's two modes, ours (`delta`) in brackets, in
/// every trace array; read-only.
#[ktest]
fn timestamp_mode_shows_delta_stamps_and_is_read_only() {
    assert_eq!(read("timestamp_mode"), "[delta] absolute\n");
    tracefs::instances::mkdir("instances/stamps").unwrap();
    assert_eq!(read("instances/stamps/timestamp_mode"), "[delta] absolute\n");
    let refused = tracefs::write("timestamp_mode", "absolute", FilterMode::Replace);
    tracefs::instances::rmdir("instances/stamps").unwrap();
    assert!(matches!(refused, Err(TracefsError::NotWritable(_))), "{refused:?}");
    assert_eq!(read("timestamp_mode"), "[delta] absolute\n");
}

/// Linux's `tai` (read here as `global` is), and on x86_64 its `x86-tsc`:
/// the raw TSC, printed raw, as Linux prints a clock not in nanoseconds.
#[ktest]
fn trace_clock_offers_tai_and_the_architecture_clock() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    write("trace_clock", "tai");
    assert_eq!(read("trace_clock"), clocks("tai"));
    assert_eq!(fib(1), 1);
    let trace = read("trace");
    let stamps = fib_timestamps(&trace);
    assert!(stamps.len() == 1 && stamps[0].split_once('.').is_some_and(|(_, us)| us.len() == 6), "seconds: {trace}");
    let tsc = tracefs::write("trace_clock", "x86-tsc", FilterMode::Replace);
    if cfg!(target_arch = "x86_64") {
        tsc.unwrap();
        assert_eq!(read("trace_clock"), clocks("x86-tsc"));
        let before = arch::timer::cycles();
        assert_eq!(fib(1), 1);
        let after = arch::timer::cycles();
        let trace = read("trace");
        let stamps: alloc::vec::Vec<u64> = fib_timestamps(&trace).iter().map(|t| t.parse().unwrap()).collect();
        assert!(stamps.len() == 1 && (before..=after).contains(&stamps[0]), "the TSC, raw ({before}..{after}): {trace}");
    } else {
        assert!(matches!(tsc, Err(TracefsError::Invalid(_))), "no x86-tsc here: {tsc:?}");
    }
    write("trace_clock", "local");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}

fn refused_clock(name: &str) -> bool {
    matches!(tracefs::write("trace_clock", name, FilterMode::Replace), Err(TracefsError::Invalid(_)))
}

#[ktest]
fn stack_traces_under_the_graph_tracer_name_the_real_callers() {
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
    let test = "kernel::tests::tracefs::stack_traces_under_the_graph_tracer_name_the_real_callers";
    assert_eq!(chains[0][..2], ["kernel::workload::fib", test], "fib(3), called by the test: {trace}");
    assert_eq!(chains[1][..3], ["kernel::workload::fib", "kernel::workload::fib", test], "fib(2), by fib(3): {trace}");
    tracefs::write("set_ftrace_filter", "!fib:stacktrace:2", FilterMode::Append).unwrap();
    write("set_ftrace_filter", "");
    write("trace", "");
}

/// `events/header_page` and `events/header_event` say where a raw page's
/// commit and data are and how an event header is packed; a page read out
/// of the buffer is laid out just so.
#[ktest]
fn header_page_and_header_event_describe_the_pages_as_they_are() {
    let page_format = read("events/header_page");
    let field = |name: &str| -> (usize, usize) {
        let line = page_format.lines().find(|line| line.contains(&format!(" {name};"))).unwrap();
        let number = |key: &str| line.split(key).nth(1).unwrap().split(';').next().unwrap().parse::<usize>().unwrap();
        (number("offset:"), number("size:"))
    };
    let (commit_at, commit_size) = field("commit");
    let (data_at, data_size) = field("data");
    assert_eq!((commit_size, data_at + data_size), (8, 4096), "{page_format}");
    let event_format = read("events/header_event");
    assert!(event_format.contains("\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n"), "{event_format}");
    assert!(event_format.contains("\tdata max type_len  == 28\n"));
    assert!(tracefs::write("events/header_page", "1", FilterMode::Replace).is_err());
    assert!(tracefs::names().any(|name| name == "events/header_event"));

    // One marker event, then its page, taken out of the buffer raw.
    write("trace", "");
    write("trace_marker", "raw");
    let buffer = trace::array::instances::top().buffer();
    let mut page = [0u8; 4096];
    let cpus = ring_buffer::trace_buffer::cpus();
    assert!((0..cpus).any(|cpu| buffer.read_page(cpu, &mut page).is_some()), "the marker's page");
    let commit = u64::from_ne_bytes(page[commit_at..commit_at + 8].try_into().unwrap()) & 0xffff;
    let header = u32::from_ne_bytes(page[data_at..data_at + 4].try_into().unwrap());
    let type_len = u64::from(header & 0x1f); // the low 5 bits
    assert!((1..=28).contains(&type_len), "a small data event: {header:#x}");
    assert_eq!(4 + 4 * type_len, commit, "one event: its header and type_len words of data");
}

#[ktest]
fn touched_functions_keeps_what_was_ever_traced() {
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
fn dyn_ftrace_total_info_counts_the_sites() {
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
fn every_listed_name_can_be_written_back_to_set_ftrace_filter() {
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

/// What a function tracer line says after its timestamp, and its CPU.
fn function_text(line: &str) -> Option<(&str, &str)> {
    let cpu = line.split('[').nth(1)?.split(']').next()?;
    Some((cpu, line.split_once(": ")?.1))
}

/// `fib(4)` then `fib(1)`, traced by the function tracer with
/// `sym-offset` (so each caller's call site shows): the lines after their
/// timestamps, if every call ran on one CPU (else the run is taken again).
fn fib_sites(no_repeats: bool) -> alloc::vec::Vec<String> {
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

/// `options/func-no-repeats`, as Linux's: a call of the function a CPU
/// last recorded, from the same call site, is counted, not recorded; the
/// count goes in as one `func_repeats` line (`(repeats: N, last_ts: T)`)
/// before the next other call.
#[ktest]
fn func_no_repeats_folds_repeated_calls_into_one_line() {
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

/// `options/funcgraph-retaddr`, as Linux's: each call's entry line ends
/// with where the call returns to, ` /* <-caller+0xOFF/0xSIZE */` (before
/// the return value when `funcgraph-retval` is on too): the addresses the
/// function tracer gives as each call's parent.
#[ktest]
fn funcgraph_retaddr_names_where_each_call_returns() {
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

/// One `trace` line in Linux's latency format, taken apart: task, pid, CPU,
/// flags, microseconds since the buffer was emptied, gap mark, the event.
struct LatencyLine<'a> {
    task: &'a str,
    pid: i32,
    cpu: usize,
    flags: &'a str,
    micros: u64,
    mark: char,
    event: &'a str,
}

fn latency_line(line: &str) -> LatencyLine<'_> {
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
fn latency_format_prints_the_same_events_in_latency_columns() {
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
fn record_cmd_off_everywhere_leaves_new_tasks_unnamed() {
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
fn record_tgid_and_verbose_shape_the_trace_as_linux() {
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

/// Emptying the buffer reads its clock for the latency format's start, as
/// Linux's reset does: under the `counter` clock, that reading is a count,
/// and the latency format's times count from it.
#[ktest]
fn emptying_the_buffer_reads_its_clock_once() {
    write("trace_clock", "counter");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    let stamps = || -> alloc::vec::Vec<u64> {
        event_lines(&read("trace"))
            .iter()
            .map(|line| line.split_once(": ").unwrap().0.rsplit(' ').next().unwrap().trim_end_matches("us").parse().unwrap())
            .collect()
    };
    assert_eq!(fib(1), 1);
    let first = stamps();
    write("trace", "");
    assert_eq!(fib(1), 1);
    let second = stamps();
    write("options/latency-format", "1");
    let since_reset = stamps();
    write("options/latency-format", "0");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("trace_clock", "local");
    assert_eq!((first.len(), second.len()), (1, 1));
    assert_eq!(second[0], first[0] + 2, "one count for the reset, one for the event");
    assert_eq!(since_reset, [1], "the latency format counts from the reset's reading");
}

/// A buffer that overwrote events, as Linux shows one: `trace` marks where
/// each CPU's surviving events start (`##### CPU N buffer started ####`,
/// `options/annotate`, on by default; not in the trace's first two lines),
/// and `trace_pipe` says how many a CPU lost before its next event
/// (`CPU:N [LOST M EVENTS]`): the CPU's `overrun`.
#[ktest]
fn an_overwritten_buffer_is_annotated_and_its_losses_counted() {
    let original = read("buffer_size_kb");
    write("buffer_size_kb", "8");
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    // CPU 0's ring overwrites its oldest events; then CPU 1 records a few.
    for (cpu, n) in [(0, 14), (1, 2)] {
        let task = crate::sched::spawn_on("annotated", 1 << cpu, move || fib(n)).unwrap();
        task.join();
    }
    let annotated = read("trace");
    write("options/annotate", "0");
    let plain = read("trace");
    write("options/annotate", "1");
    let overrun = stat(&read("per_cpu/cpu0/stats"), "overrun");
    let mut piped = String::new();
    trace::output::pipe::consume_events(trace::array::instances::top(), None, &mut piped).unwrap();
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    write("buffer_size_kb", original.trim());

    assert!(overrun > 0, "fib(14)'s 1219 calls overflow two pages");
    // The event lines and the marks among them (the header's lines start
    // with `# ` or are `#`).
    let lines: alloc::vec::Vec<&str> =
        annotated.lines().filter(|line| line.starts_with("#####") || !(line.starts_with('#') || line.is_empty())).collect();
    let marks: alloc::vec::Vec<usize> = (0..lines.len()).filter(|&at| lines[at].starts_with("#####")).collect();
    assert_eq!(marks.len(), 1, "{annotated}");
    assert_eq!(lines[marks[0]], "##### CPU 1 buffer started ####");
    assert!(lines[marks[0] + 1].contains("] ") && lines[marks[0] + 1].contains("[001]"), "{annotated}");
    assert!(lines[..marks[0]].iter().all(|line| line.contains("[000]")), "CPU 0's first line is the first: {annotated}");
    // Off, the same lines without the mark.
    let without: alloc::vec::Vec<&str> = lines.iter().filter(|line| !line.starts_with("#####")).copied().collect();
    assert_eq!(event_lines(&plain), without);
    // trace_pipe: CPU 0's loss first, counted, then the same events.
    let piped_lines: alloc::vec::Vec<&str> = piped.lines().collect();
    assert_eq!(piped_lines[0], format!("CPU:0 [LOST {overrun} EVENTS]"), "{piped}");
    assert_eq!(piped_lines[1..], without[..], "{piped}");
}
