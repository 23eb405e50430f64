//! Flame graphs from function_graph data: each call's *self* time (its
//! duration minus its children's) is counted against its stack of traced
//! callers, folded as `outer;inner;leaf NANOSECONDS`, and drawn by `inferno`.
//!
//! Calls nest per task, not per CPU: a task preempted inside a call, or
//! moved to another CPU, returns on its own stack of open calls. So every
//! CPU's events are taken in time order, and each task (each CPU's idle
//! task, which all have pid 0) keeps its own stack. A return matches the
//! innermost open call of its function; calls above that one lost their
//! returns (overwritten) and are dropped.

use std::collections::BTreeMap;

use ring_buffer::per_cpu::{page_records, PAGE_SIZE};
use trace::events::record::Event;
use trace::export::stream::Stream;

use crate::symbols::Symbols;

/// One open call while folding.
struct Open {
    func: u64,
    name: String,
    children: u64,
}

/// Whose stack of open calls an event belongs to: its task, and for the
/// idle tasks (pid 0 on every CPU) its CPU too.
fn flow(pid: i32, cpu: u64) -> (i32, u64) {
    (pid, if pid == 0 { cpu } else { 0 })
}

/// Folded stacks with their self time in ns, in first-seen order, summed.
pub fn fold(stream: &Stream, symbols: &Symbols) -> Result<Vec<(String, u64)>, String> {
    let name = |address: u64| symbols.lookup(address as usize).map_or_else(|| format!("{address:#x}"), |s| s.name.to_string());
    let mut folded: Vec<(String, u64)> = Vec::new();
    let mut add = |stack: String, ns: u64| match folded.iter_mut().find(|(s, _)| *s == stack) {
        Some((_, total)) => *total += ns,
        None => folded.push((stack, ns)),
    };
    // Every CPU's graph events, oldest first (a stable sort keeps each
    // CPU's own order among equal times).
    let mut events: Vec<(u64, u64, Event)> = Vec::new();
    for (cpu, pages) in &stream.cpus {
        for event in pages.chunks(PAGE_SIZE).flat_map(page_records) {
            if let Some(decoded @ (Event::GraphEntry(_) | Event::GraphExit(_))) = Event::decode(event.payload) {
                events.push((event.time, *cpu, decoded));
            }
        }
    }
    if events.is_empty() {
        return Err("the session recorded no function_graph events (echo function_graph > current_tracer)".into());
    }
    events.sort_by_key(|(time, _, _)| *time);
    let mut open: BTreeMap<(i32, u64), Vec<Open>> = BTreeMap::new();
    for (_, cpu, event) in events {
        match event {
            Event::GraphEntry(entry) => {
                let stack = open.entry(flow(entry.common.pid, cpu)).or_default();
                stack.push(Open { func: entry.func, name: name(entry.func), children: 0 });
            }
            Event::GraphExit(exit) => {
                let stack = open.entry(flow(exit.common.pid, cpu)).or_default();
                let duration = exit.duration();
                // A return whose entry was overwritten: a call of its own.
                let call = match stack.iter().rposition(|o| o.func == exit.func) {
                    Some(at) => stack.drain(at..).next().expect("the matched call"),
                    None => Open { func: exit.func, name: name(exit.func), children: 0 },
                };
                let mut names: Vec<&str> = stack.iter().map(|o| o.name.as_str()).collect();
                names.push(&call.name);
                add(names.join(";"), duration.saturating_sub(call.children));
                if let Some(parent) = stack.last_mut() {
                    parent.children += duration;
                }
            }
            _ => unreachable!("only graph events were kept"),
        }
    }
    Ok(folded)
}

/// Draws the folded stacks as an SVG flame graph.
pub fn render(folded: &[(String, u64)]) -> Result<Vec<u8>, String> {
    let lines: Vec<String> = folded.iter().map(|(stack, ns)| format!("{stack} {}", (*ns).max(1))).collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = "ktrace: function_graph".into();
    options.count_name = "ns".into();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| format!("flame graph: {e}"))?;
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring_buffer::per_cpu::RingBuffer;
    use trace::events::record::{Common, FixedEvent, GraphEntryEvent, GraphExitEvent, TRACE_GRAPH_ENT, TRACE_GRAPH_RET};

    /// A stream of CPUs, each with its events as (time, event).
    fn stream_on(cpus: &[&[(u64, Event)]]) -> Stream {
        let cpus = cpus
            .iter()
            .enumerate()
            .map(|(cpu, events)| {
                let ring = RingBuffer::new(4);
                for (time, record) in events.iter() {
                    let payload = match record {
                        Event::GraphEntry(e) => e.to_bytes(),
                        Event::GraphExit(e) => e.to_bytes(),
                        _ => unreachable!(),
                    };
                    // SAFETY: one writer (this test).
                    unsafe { ring.write(*time, &payload) }.unwrap();
                }
                (cpu as u64, ring.snapshot().iter().flat_map(|page| page.to_vec()).collect())
            })
            .collect();
        Stream { cpus, ..Stream::default() }
    }

    /// One CPU, one task, one event per nanosecond.
    fn stream_of(events: &[Event]) -> Stream {
        let timed: Vec<(u64, Event)> = events.iter().enumerate().map(|(time, event)| (time as u64, *event)).collect();
        stream_on(&[&timed])
    }

    fn entry(func: u64, depth: i32) -> Event {
        entry_of(1, func, depth)
    }

    fn exit(func: u64, depth: i32, calltime: u64, rettime: u64) -> Event {
        exit_of(1, func, depth, calltime, rettime)
    }

    fn entry_of(pid: i32, func: u64, depth: i32) -> Event {
        Event::GraphEntry(GraphEntryEvent { common: Common { kind: TRACE_GRAPH_ENT, pid, ..Common::default() }, func, depth })
    }

    fn exit_of(pid: i32, func: u64, depth: i32, calltime: u64, rettime: u64) -> Event {
        let common = Common { kind: TRACE_GRAPH_RET, pid, ..Common::default() };
        Event::GraphExit(GraphExitEvent { common, func, retval: 0, depth, overrun: 0, calltime, rettime })
    }

    fn symbols() -> Symbols {
        Symbols::from_entries(vec![
            (0x100, 0x10, "fs::run".into()),
            (0x200, 0x10, "fs::mkdir".into()),
            (0x300, 0x10, "fs::walk".into()),
        ])
    }

    #[test]
    fn self_times_fold_under_their_callers() {
        let stream = stream_of(&[
            entry(0x100, 0),
            entry(0x200, 1),
            entry(0x300, 2),
            exit(0x300, 2, 20, 30),
            exit(0x200, 1, 10, 50),
            entry(0x300, 1),
            exit(0x300, 1, 60, 65),
            exit(0x100, 0, 0, 100),
        ]);
        let folded = fold(&stream, &symbols()).unwrap();
        assert_eq!(
            folded,
            [
                ("fs::run;fs::mkdir;fs::walk".to_string(), 10),
                ("fs::run;fs::mkdir".to_string(), 30),
                ("fs::run;fs::walk".to_string(), 5),
                ("fs::run".to_string(), 55),
            ]
        );
        let svg = String::from_utf8(render(&folded).unwrap()).unwrap();
        assert!(svg.contains("<svg") && svg.contains("fs::mkdir") && svg.contains("fs::walk"));
    }

    #[test]
    fn calls_nest_per_task_across_preemption_and_migration() {
        // Task 1 enters run on CPU 0 and is preempted; task 2 runs walk
        // there. Task 1 goes on on CPU 1: mkdir, then run returns there.
        let cpu0 = [(0, entry_of(1, 0x100, 0)), (10, entry_of(2, 0x300, 0)), (20, exit_of(2, 0x300, 0, 10, 20))];
        let cpu1 = [(30, entry_of(1, 0x200, 1)), (40, exit_of(1, 0x200, 1, 30, 40)), (50, exit_of(1, 0x100, 0, 0, 50))];
        let folded = fold(&stream_on(&[&cpu0, &cpu1]), &symbols()).unwrap();
        assert_eq!(
            folded,
            [("fs::walk".to_string(), 10), ("fs::run;fs::mkdir".to_string(), 10), ("fs::run".to_string(), 40)],
            "walk is not under run, and run's return found it on the other CPU"
        );
    }

    #[test]
    fn a_return_drops_the_open_calls_whose_returns_were_lost() {
        let stream = stream_of(&[entry(0x100, 0), entry(0x200, 1), exit(0x100, 0, 0, 9)]);
        let folded = fold(&stream, &symbols()).unwrap();
        assert_eq!(folded, [("fs::run".to_string(), 9)]);
    }

    #[test]
    fn no_graph_events_is_an_error() {
        assert!(fold(&Stream { cpus: vec![(0, vec![0; PAGE_SIZE])], ..Stream::default() }, &symbols()).is_err());
    }
}
