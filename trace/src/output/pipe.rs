//! `cat trace_pipe`: the consuming read, page by page from every CPU,
//! merged oldest first ([`PipeReader`]), and the merge of CPU snapshots
//! every reader shares ([`merged`]).

use crate::output::read::{write_events, Run};
use crate::tracers::Tracer;
use core::fmt::{self, Write};

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::array::trace_array::TraceArray;
use crate::events::record::Event;
use crate::output;
use ring_buffer::trace_buffer;

/// `cat trace_pipe`'s reader. A consuming read, as Linux's: what it takes
/// out of the buffer, the next read (or `trace`) no longer sees.
///
/// Each pass takes at most one page from each CPU's ring, so a reader that
/// stops (`cat trace_pipe | head -1`: the pipe closes) loses at most the
/// pages it took, not the whole buffer. Events still print oldest first
/// across CPUs: an unread page of a CPU holds only events newer than the
/// last one of its page just read, and a CPU with nothing to read records
/// only events newer than the pass's start; so a pass prints the events up
/// to the oldest of those times and holds the newer ones for the next
/// pass. Under function_graph a call's entry printed without its return
/// looks like a call with children: a CPU's entry that ends what it gave
/// this pass waits for the next one too, which brings the return (or
/// takes nothing, and everything held is printed).
#[derive(Default)]
pub struct PipeReader {
    /// Taken out, not printed yet: (time, CPU, payload).
    held: Vec<HeldEvent>,
    /// Each CPU's [`emptied`](ring_buffer::trace_buffer::TraceBuffer::emptied) count
    /// when its events were taken: that CPU's ring emptied since (`echo >
    /// trace`, a clock change, `echo > per_cpu/cpuN/trace`), its held
    /// events go too. (A resize keeps the events: the held ones, taken out
    /// before it, are not in the new rings.)
    emptied: [u64; arch::MAX_CPUS],
    /// What the graph output printed so far remembers (the calls it
    /// opened), for the next pass.
    graph: output::graph::GraphState,
    /// Events printed so far (the next one's index in the verbose latency
    /// format).
    printed: usize,
}

/// An event a [`PipeReader`] took out and has not printed yet.
struct HeldEvent {
    time: u64,
    cpu: usize,
    payload: Vec<u8>,
    /// The first event of a page its CPU lost events before (overwritten
    /// before the reader came): how many, if the page says
    /// ([`ring_buffer::per_cpu::page_missed`]).
    lost: Option<Option<u64>>,
}

/// What one [`PipeReader::pass`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Events printed.
    pub printed: usize,
    /// Whether it took a page.
    pub took: bool,
    /// Whether finished pages wait: the next pass may read at once.
    pub more: bool,
}

impl PipeReader {
    pub fn new() -> PipeReader {
        PipeReader::default()
    }

    /// One pass over one CPU's ring or all (see the type), printing as
    /// `trace` does, without its header. With nothing left to take, it
    /// prints every event it held.
    pub fn pass(&mut self, array: &TraceArray, cpu: Option<usize>, out: &mut dyn Write) -> Result<Pass, fmt::Error> {
        let buffer = array.buffer();
        let cpus = match cpu {
            Some(cpu) => cpu..cpu + 1,
            None => 0..buffer.cpus(),
        };
        for cpu in cpus.clone() {
            let emptied = buffer.emptied(cpu);
            if let Some(seen) = self.emptied.get_mut(cpu).filter(|seen| **seen != emptied) {
                self.held.retain(|event| event.cpu != cpu);
                *seen = emptied;
            }
        }
        let start = buffer.now();
        let mut bound = u64::MAX;
        let mut gave = Vec::new();
        let mut page = Box::new([0u8; ring_buffer::per_cpu::PAGE_SIZE]);
        for cpu in cpus.clone() {
            if buffer.read_page(cpu, &mut page).is_none() {
                bound = bound.min(start);
                continue;
            }
            gave.push(cpu);
            let mut last = None;
            let mut lost = ring_buffer::per_cpu::page_missed(&page[..]);
            for event in ring_buffer::per_cpu::page_records(&page[..]) {
                last = Some(event.time);
                self.held.push(HeldEvent { time: event.time, cpu, payload: event.payload.to_vec(), lost: lost.take() });
            }
            bound = bound.min(last.unwrap_or(u64::MAX));
        }
        let took = !gave.is_empty();
        if !took {
            bound = u64::MAX; // nothing more to wait for: print all
        }
        // Stable: a CPU's events keep their order among equal times.
        self.held.sort_by_key(|event| (event.time, event.cpu));
        let mut ready = self.held.partition_point(|event| event.time <= bound);
        if took && array.current_tracer() == Tracer::FunctionGraph {
            for &cpu in &gave {
                let last = self.held[..ready].iter().rposition(|event| event.cpu == cpu);
                if let Some(at) = last.filter(|&at| matches!(Event::decode(&self.held[at].payload), Some(Event::GraphEntry(_)))) {
                    ready = ready.min(at);
                }
            }
        }
        let printed: Vec<HeldEvent> = self.held.drain(..ready).collect();
        let following = self.held.first().map(|event| event.time);
        write_held(array, &printed, self.printed, following, &mut self.graph, out)?;
        self.printed += printed.len();
        let more = cpus.into_iter().any(|cpu| buffer.has_finished_pages(cpu));
        Ok(Pass { printed: printed.len(), took, more })
    }
}

/// Prints events a [`PipeReader`] took out, as `trace` does.
/// An event after lost ones comes after Linux's `CPU:N [LOST M EVENTS]`
/// (`[LOST EVENTS]` if the count is not known).
fn write_held(
    array: &TraceArray,
    held: &[HeldEvent],
    first_index: usize,
    following: Option<u64>,
    graph: &mut output::graph::GraphState,
    out: &mut dyn Write,
) -> fmt::Result {
    let time_start = array.buffer().time_start();
    let mut start = 0;
    while start < held.len() {
        match held[start].lost {
            Some(Some(count)) => writeln!(out, "CPU:{} [LOST {count} EVENTS]", held[start].cpu)?,
            Some(None) => writeln!(out, "CPU:{} [LOST EVENTS]", held[start].cpu)?,
            None => {}
        }
        let end = held[start + 1..].iter().position(|event| event.lost.is_some()).map_or(held.len(), |at| start + 1 + at);
        let events: Vec<(u64, usize, &[u8])> =
            held[start..end].iter().map(|event| (event.time, event.cpu, &event.payload[..])).collect();
        // A run's last event is followed by the next run's first, or by
        // what the reader still holds.
        let following = held.get(end).map(|event| event.time).or(following);
        let run = Run { first_index: first_index + start, following, annotate: false, time_start };
        write_events(array, array.current_tracer(), &events, run, graph, out)?;
        start = end;
    }
    Ok(())
}

/// Takes out and prints what the buffer holds now, for one CPU or all
/// (the passes of a [`PipeReader`] until nothing is left to take, or as
/// many as a ring has pages: the page a CPU is writing can be read again
/// and again while it keeps tracing, and an unbounded read would never
/// end). Returns how many events it printed.
pub fn consume_events(array: &TraceArray, cpu: Option<usize>, out: &mut dyn Write) -> Result<usize, fmt::Error> {
    let mut reader = PipeReader::new();
    let mut printed = 0;
    for _ in 0..array.buffer().pages_per_cpu() {
        let pass = reader.pass(array, cpu, out)?;
        printed += pass.printed;
        if !pass.took {
            return Ok(printed);
        }
    }
    // Whatever the last pass held back: no more taking.
    write_held(array, &reader.held, reader.printed, None, &mut reader.graph, out)?;
    Ok(printed + reader.held.len())
}

/// Every CPU's events in one list, oldest first: (time, CPU, payload). A
/// merge by timestamp, as Linux's `trace` iterator does (the trace clock
/// is comparable across CPUs): each time the CPU whose next event is the
/// oldest (the lower CPU on a tie) gives it, so each CPU's events keep
/// their order. The list is allocated once, at its exact size, and the
/// merge needs no more: `None` if the heap has no room for it (a buffer
/// grown while the heap filled up), where a panic would stop the kernel.
pub fn merged(snapshots: &[trace_buffer::Snapshot]) -> Option<Vec<(u64, usize, &[u8])>> {
    let total = snapshots.iter().map(|snapshot| snapshot.records().count()).sum();
    let mut events = Vec::new();
    events.try_reserve_exact(total).ok()?;
    let mut next: Vec<_> = snapshots.iter().map(|snapshot| snapshot.records().peekable()).collect();
    loop {
        let oldest = (next.iter_mut().zip(snapshots))
            .enumerate()
            .filter_map(|(at, (events, snapshot))| events.peek().map(|&(time, _)| (time, snapshot.cpu, at)))
            .min();
        let Some((time, cpu, at)) = oldest else { return Some(events) };
        if let Some((_, payload)) = next[at].next() {
            events.push((time, cpu, payload));
        }
    }
}
