//! The buffer's files as a Linux user reaches for them: sizes, cpumask,
//! overwrite, `trace_pipe` readers, `trace_marker`, `snapshot`, the clocks
//! and the page headers.

use super::event_lines;
use super::fib_lines;
use super::fib_on_every_cpu;
use super::per_cpu::fib_lines_per_cpu;
use super::stat;
use super::stat_sum;
use super::turns_tracing_off;
use alloc::format;
use alloc::string::{String, ToString};

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// `tracing_cpumask` records only the CPUs it names, in the live rings,
/// the snapshot's and rings a resize makes; a CPU that does not exist is
/// refused.
#[ktest]
pub(super) fn tracing_cpumask_records_only_its_cpus() {
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
pub(super) fn buffer_size_kb_resizes_every_cpu_and_keeps_the_tracer() {
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

/// A resize keeps the events, as Linux's does: growing keeps every one,
/// with its time; shrinking keeps the newest that fit, counting the rest
/// as overrun; the snapshot's events are kept too.
#[ktest]
pub(super) fn a_resize_keeps_the_events() {
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
pub(super) fn free_buffer_shrinks_the_rings() {
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
pub(super) fn a_snapshot_the_heap_could_not_read_is_refused() {
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

/// `options/overwrite` off: a full buffer keeps its oldest events and drops
/// the new ones (counted as dropped), as Linux's producer/consumer mode.
#[ktest]
pub(super) fn without_overwrite_a_full_buffer_keeps_its_first_events() {
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

#[ktest]
pub(super) fn trace_pipe_streams_a_workload_running_in_another_task() {
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
pub(super) fn a_trace_pipe_reader_that_stops_takes_a_page_per_cpu_not_the_buffer() {
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

/// A `trace_pipe` reader drops the events it held from a ring emptied
/// since it took them (the whole buffer, or that CPU's), and only those.
#[ktest]
pub(super) fn a_trace_pipe_reader_drops_what_it_held_when_the_buffer_is_emptied() {
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
pub(super) fn a_trace_pipe_pass_ends_although_reading_records_events() {
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
pub(super) fn a_reader_pauses_recording_without_touching_tracing_on() {
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
pub(super) fn trace_marker_lines_land_among_the_events() {
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

#[ktest]
pub(super) fn snapshot_keeps_a_copy_and_empties_the_buffer() {
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

/// The timestamp column of `trace`'s fib lines.
pub(super) fn fib_timestamps(trace: &str) -> alloc::vec::Vec<&str> {
    trace
        .lines()
        .filter(|line| line.contains(": kernel::workload::fib <-"))
        .filter_map(|line| line.split(": kernel::workload::fib").next()?.split_whitespace().last())
        .collect()
}

#[ktest]
pub(super) fn trace_clock_switches_between_local_global_and_counter() {
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
pub(super) fn clocks(current: &str) -> String {
    let arch: &[&str] = if cfg!(target_arch = "x86_64") { &["x86-tsc"] } else { &[] };
    let names = ["local", "global", "counter", "uptime", "perf", "mono", "mono_raw", "boot", "tai"].iter().chain(arch);
    let shown: alloc::vec::Vec<String> =
        names.map(|name| if *name == current { format!("[{name}]") } else { String::from(*name) }).collect();
    format!("{}\n", shown.join(" "))
}

/// `timestamp_mode`: Linux's two modes, ours (`delta`) in brackets, in
/// every trace array; read-only.
#[ktest]
pub(super) fn timestamp_mode_shows_delta_stamps_and_is_read_only() {
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
pub(super) fn trace_clock_offers_tai_and_the_architecture_clock() {
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

pub(super) fn refused_clock(name: &str) -> bool {
    matches!(tracefs::write("trace_clock", name, FilterMode::Replace), Err(TracefsError::Invalid(_)))
}

/// `events/header_page` and `events/header_event` say where a raw page's
/// commit and data are and how an event header is packed; a page read out
/// of the buffer is laid out just so.
#[ktest]
pub(super) fn header_page_and_header_event_describe_the_pages_as_they_are() {
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

/// Emptying the buffer reads its clock for the latency format's start, as
/// Linux's reset does: under the `counter` clock, that reading is a count,
/// and the latency format's times count from it.
#[ktest]
pub(super) fn emptying_the_buffer_reads_its_clock_once() {
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
pub(super) fn an_overwritten_buffer_is_annotated_and_its_losses_counted() {
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
