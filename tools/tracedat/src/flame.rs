//! Flame graphs from function_graph data: each call's *self* time (its
//! duration minus its children's) is counted against its stack of traced
//! callers, folded as `outer;inner;leaf NANOSECONDS`, and drawn by `inferno`.

use ftrace::event::Event;
use ftrace::ring_buffer::{page_events, PAGE_SIZE};
use ftrace::stream::Stream;

use crate::symbols::Symbols;

/// One open call while folding.
struct Open {
    name: String,
    children: u64,
}

/// Folded stacks with their self time in ns, in first-seen order, summed.
pub fn fold(stream: &Stream, symbols: &Symbols) -> Result<Vec<(String, u64)>, String> {
    let name = |address: u64| symbols.lookup(address as usize).map_or_else(|| format!("{address:#x}"), |s| s.name.to_string());
    let mut folded: Vec<(String, u64)> = Vec::new();
    let mut add = |stack: String, ns: u64| match folded.iter_mut().find(|(s, _)| *s == stack) {
        Some((_, total)) => *total += ns,
        None => folded.push((stack, ns)),
    };
    let mut graph_events = 0;
    for (_, pages) in &stream.cpus {
        let mut open: Vec<Open> = Vec::new();
        for event in pages.chunks(PAGE_SIZE).flat_map(page_events) {
            match Event::decode(event.payload) {
                Some(Event::GraphEntry(entry)) => {
                    graph_events += 1;
                    open.push(Open { name: name(entry.func), children: 0 });
                }
                Some(Event::GraphExit(exit)) => {
                    graph_events += 1;
                    let duration = exit.duration();
                    // A return whose entry was overwritten: a call of its own.
                    let call = open.pop().unwrap_or(Open { name: name(exit.func), children: 0 });
                    let mut stack: Vec<&str> = open.iter().map(|o| o.name.as_str()).collect();
                    stack.push(&call.name);
                    add(stack.join(";"), duration.saturating_sub(call.children));
                    if let Some(parent) = open.last_mut() {
                        parent.children += duration;
                    }
                }
                _ => {}
            }
        }
    }
    if graph_events == 0 {
        return Err("the session recorded no function_graph events (echo function_graph > current_tracer)".into());
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
    use ftrace::event::{Common, FixedEvent, GraphEntryEvent, GraphExitEvent, TRACE_GRAPH_ENT, TRACE_GRAPH_RET};
    use ftrace::ring_buffer::RingBuffer;

    fn stream_of(events: &[Event]) -> Stream {
        let ring = RingBuffer::new(4);
        for (time, record) in events.iter().enumerate() {
            let payload = match record {
                Event::GraphEntry(e) => e.to_bytes(),
                Event::GraphExit(e) => e.to_bytes(),
                _ => unreachable!(),
            };
            // SAFETY: one writer (this test).
            unsafe { ring.write(time as u64, &payload) }.unwrap();
        }
        let pages: Vec<u8> = ring.snapshot().iter().flat_map(|page| page.to_vec()).collect();
        Stream { cpus: vec![(0, pages)], ..Stream::default() }
    }

    fn entry(func: u64, depth: i32) -> Event {
        Event::GraphEntry(GraphEntryEvent { common: Common { kind: TRACE_GRAPH_ENT, ..Common::default() }, func, depth })
    }

    fn exit(func: u64, depth: i32, calltime: u64, rettime: u64) -> Event {
        let common = Common { kind: TRACE_GRAPH_RET, ..Common::default() };
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
    fn no_graph_events_is_an_error() {
        assert!(fold(&Stream { cpus: vec![(0, vec![0; PAGE_SIZE])], ..Stream::default() }, &symbols()).is_err());
    }
}
