//! Reading a trace array's buffer without consuming it: `cat trace`,
//! `cat snapshot` and `per_cpu/cpuN/trace`. The buffer is paused while it
//! is read (as Linux's iterator does), every CPU's records are merged
//! oldest first and printed in the array's print mode; event types the
//! trace layer does not know (probe events) are printed by the printer the
//! layer above registers ([`set_event_printer`]).

use crate::output::pipe::merged;
use crate::tracers::Tracer;
use core::fmt::{self, Write};

use alloc::string::String;
use alloc::vec::Vec;

use crate::array::options::TraceOption;
use crate::array::trace_array::TraceArray;
use crate::events::record::{Common, Event};
use crate::output;
use crate::output::print_modes::{self, EventFields, PrintMode};
use ftrace::symbols::kernel as symbols;
use ring_buffer::trace_buffer;

// ---- cat trace ----

/// Prints an event type the tracers do not know (dynamic events): `None` if
/// the printer does not know it either. `sym_addr`: `options/sym-addr` is
/// on (each code address is followed by its value, as Linux prints a probe
/// event's).
pub type EventPrinter = fn(payload: &[u8], sym_addr: bool, out: &mut dyn Write) -> Option<fmt::Result>;

static EVENT_PRINTER: arch::cell::AtomicFn<EventPrinter> = arch::cell::AtomicFn::none();

/// Installs the printer for other event types (the kernel installs fprobe's).
pub fn set_event_printer(printer: EventPrinter) {
    EVENT_PRINTER.store(printer);
}

/// Finds the `format` text of an event type the tracers do not know
/// (dynamic events), for `options/fields`.
pub type EventFormat = fn(kind: u16) -> Option<String>;

static EVENT_FORMAT: arch::cell::AtomicFn<EventFormat> = arch::cell::AtomicFn::none();

/// Installs the format finder for other event types (the kernel installs
/// fprobe's).
pub fn set_event_format(format: EventFormat) {
    EVENT_FORMAT.store(format);
}

/// Prints `payload` with the installed printer, or says its type.
fn print_other(payload: &[u8], function: output::FunctionOptions, names: output::Namer, out: &mut dyn Write) -> fmt::Result {
    if let Some(frames) = crate::events::record::decode_stack(payload) {
        // Linux's `<stack trace>`: one ` => function` line per frame (the
        // caller adds the last newline).
        out.write_str("<stack trace>")?;
        let mut inner = None;
        for frame in frames {
            out.write_str("\n => ")?;
            // After the first (the traced function itself, or where the
            // hit returns to) the frames are return addresses: named by
            // the byte before, their call, so that one just past a
            // function that ends in a call (one that never returns) names
            // that function, not the next (as a kernel backtrace's `%pB`).
            // An interrupted pc is named as it is.
            let frame = frame as usize;
            let call = match inner {
                Some(inner) if symbols::is_return_address_after(inner) => frame.checked_sub(1),
                _ => None,
            };
            inner = Some(frame);
            match call.and_then(symbols::name_of).or_else(|| symbols::name_of(frame)) {
                Some(name) => out.write_str(name)?,
                None => write!(out, "{frame:#x}")?,
            }
        }
        return Ok(());
    }
    if let Some((writer, text)) = crate::events::record::decode_print(payload) {
        // A line of text, printed as Linux prints it: its writer, then the
        // text (which keeps the newline it was written with; the caller
        // adds one).
        match writer.name() {
            Some(name) => out.write_str(name)?,
            None => output::write_ip_sym(out, writer.ip(), names, function)?,
        }
        return write!(out, ": {}", output::print_text(text));
    }
    if let Some(result) = crate::events::synth::write_record(payload, out) {
        return result;
    }
    let printer = EVENT_PRINTER.load();
    match printer.and_then(|print| print(payload, function.sym_addr, out)) {
        Some(result) => result,
        // Linux's words for a record whose event is gone.
        None => write!(out, "Unknown type {}", Common::decode(payload).unwrap_or_default().kind),
    }
}

/// Writes `cat trace` of `array`: the header, then every recorded event,
/// in its current tracer's format. Recording pauses while it runs, as
/// Linux's `pause-on-trace` does, so reading the trace does not trace
/// itself.
pub fn write_trace(array: &TraceArray, out: &mut dyn Write) -> fmt::Result {
    write_trace_of(array, None, out)
}

/// [`write_trace`] for one CPU's buffer only (`per_cpu/cpuN/trace`), or
/// every CPU's (`None`).
pub fn write_trace_of(array: &TraceArray, cpu: Option<usize>, out: &mut dyn Write) -> fmt::Result {
    let buffer = array.buffer();
    buffer.pause();
    let result = write_trace_paused(array, cpu, out);
    buffer.resume();
    result
}

fn write_trace_paused(array: &TraceArray, cpu: Option<usize>, out: &mut dyn Write) -> fmt::Result {
    let buffer = array.buffer();
    let snapshots = match cpu {
        Some(cpu) => alloc::vec![buffer.snapshot_of(cpu)],
        None => buffer.snapshot_all(),
    };
    write_snapshots(array, array.current_tracer(), &snapshots, buffer.time_start(), out)
}

/// The header and events of `snapshots` (copies of an array's buffer) as
/// `trace` prints them under `tracer`, the latency format's times counted
/// from `time_start`.
fn write_snapshots(
    array: &TraceArray,
    tracer: Tracer,
    snapshots: &[trace_buffer::Snapshot],
    time_start: u64,
    out: &mut dyn Write,
) -> fmt::Result {
    let Some(events) = merged(snapshots) else {
        return writeln!(out, "# not enough memory to list these events for reading: make buffer_size_kb smaller");
    };
    let mut stats = ring_buffer::per_cpu::Stats::default();
    for snapshot in snapshots {
        stats.entries += snapshot.stats.entries;
        stats.written += snapshot.stats.written;
        stats.overrun += snapshot.stats.overrun;
    }
    let cpus = array.buffer().cpus();
    let mut run = Run { first_index: 0, following: None, annotate: false, time_start };
    if tracer == Tracer::FunctionGraph {
        output::graph::write_graph_header(out, array.graph_options(), stats, cpus, array.buffer().start_cpu())?;
        return write_events(array, tracer, &events, run, &mut output::graph::GraphState::default(), out);
    }
    output::write_header(out, tracer.name(), stats, cpus, array.context_options())?;
    // Linux annotates a trace whose buffer overwrote events.
    run.annotate = array.option(TraceOption::Annotate) && stats.overrun > 0;
    write_events(array, tracer, &events, run, &mut output::graph::GraphState::default(), out)
}

/// `cat snapshot`: the events the last snapshot took, as `trace` prints
/// them; or, with no snapshot buffer or an empty one, Linux's help text,
/// which says which.
pub fn write_snapshot(array: &TraceArray, out: &mut dyn Write) -> fmt::Result {
    let state = match array.buffer().snapshot_copies() {
        Some(snapshots) if snapshots.iter().any(|snapshot| snapshot.stats.entries > 0) => {
            // Linux's snapshot (its `max_buffer`) starts its times at 0
            // under a tracer that measures no latency.
            return write_snapshots(array, array.current_tracer(), &snapshots, 0, out);
        }
        Some(_) => "allocated",
        None => "freed",
    };
    writeln!(out, "# tracer: {}\n#\n#\n# * Snapshot is {state} *\n#", array.current_tracer().name())?;
    out.write_str(SNAPSHOT_COMMANDS)
}

/// Linux's snapshot help, after the header.
const SNAPSHOT_COMMANDS: &str = "\
# Snapshot commands:
# echo 0 > snapshot : Clears and frees snapshot buffer
# echo 1 > snapshot : Allocates snapshot buffer, if not already allocated.
#                      Takes a snapshot of the main buffer.
# echo 2 > snapshot : Clears snapshot buffer (but does not allocate or free)
#                      (Doesn't have to be '2' works with any number that
#                       is not a '0' or '1')
";

/// Where a run of events sits in what a reader prints.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// The first event's index in the reader's output (0 first).
    pub(crate) first_index: usize,
    /// The time of the event printed after the run, if known (the last
    /// event's gap mark in the latency format).
    pub(crate) following: Option<u64>,
    /// `options/annotate`, over a buffer that lost events to overwriting:
    /// each CPU's first event but in the first two lines comes after
    /// `##### CPU N buffer started ####`, as Linux marks where a CPU's
    /// surviving events start.
    pub(crate) annotate: bool,
    /// Where the latency format's times start.
    pub(crate) time_start: u64,
}

/// Prints `events` (time, CPU, payload; oldest first), placed as `run`
/// says, as `trace` shows them under the array's tracer, without the
/// header; under function_graph, going on from the lines `graph`
/// remembers.
pub(crate) fn write_events(
    array: &TraceArray,
    tracer: Tracer,
    events: &[(u64, usize, &[u8])],
    run: Run,
    graph: &mut output::graph::GraphState,
    out: &mut dyn Write,
) -> fmt::Result {
    let names = |address: usize| symbols::table().ok()?.lookup(address);
    let comms = |pid: i32| crate::task_names::comm_of(pid);
    if tracer == Tracer::FunctionGraph {
        let lines: Vec<output::graph::GraphLine> = events
            .iter()
            .filter_map(|&(time, cpu, payload)| Event::decode(payload).map(|record| (time, cpu, record, payload)))
            .collect();
        let options = array.graph_options();
        let function = array.function_options();
        let other = |payload: &[u8], out: &mut dyn Write| print_other(payload, function, &names, out);
        return output::graph::write_graph(graph, out, &lines, &names, &comms, options, &other);
    }
    let mut context = array.context_options();
    if let Some(start) = context.latency.as_mut() {
        start.time = run.time_start;
    }
    let function = output::FunctionOptions { context, ..array.function_options() };
    // Linux's `printk-msg-only` (with `trace_printk` on): a print event's
    // line is its text alone.
    let msg_only = array.option(TraceOption::PrintkMsgOnly) && array.option(TraceOption::TracePrintk);
    let mode = array.print_mode();
    let mut formats = EventFormats::default();
    let mut started = alloc::vec![false; if run.annotate { array.buffer().cpus() } else { 0 }];
    for (index, &(time, cpu, payload)) in events.iter().enumerate() {
        let next = events.get(index + 1).map(|&(next, _, _)| next).or(run.following).unwrap_or(time);
        let when = output::When { cpu, time, next, index: run.first_index + index };
        if let Some((_, text)) = msg_only.then(|| crate::events::record::decode_print(payload)).flatten() {
            writeln!(out, "{}", output::print_text(text))?;
            continue;
        }
        match mode {
            PrintMode::Raw => {
                print_modes::write_raw(out, when, payload, context.context_info)?;
                continue;
            }
            PrintMode::Hex => {
                print_modes::write_hex(out, when, payload, context.context_info)?;
                continue;
            }
            PrintMode::Fields | PrintMode::Text => {}
        }
        if let Some(seen) = started.get_mut(cpu).filter(|seen| !**seen) {
            *seen = true;
            // Linux's `test_cpu_buff_start`: not for the trace's first lines.
            if when.index > 1 {
                writeln!(out, "##### CPU {cpu} buffer started ####")?;
            }
        }
        if let Some(fields) = (mode == PrintMode::Fields).then(|| formats.of(payload)).flatten() {
            let common = Common::decode(payload).unwrap_or_default();
            output::write_context(out, when, &common, &comms, context)?;
            fields.write(out, payload, &names)?;
            continue;
        }
        match Event::decode(payload) {
            Some(Event::Function(event)) => output::write_function(out, when, &event, &names, &comms, function)?,
            Some(Event::FuncRepeats(event)) => output::write_func_repeats(out, when, &event, &names, &comms, function)?,
            Some(Event::SchedSwitch(event)) => {
                output::write_context(out, when, &event.common, &comms, context)?;
                output::write_sched_switch(out, &event)?;
                writeln!(out)?;
            }
            Some(Event::SchedWakeup(event)) => {
                output::write_context(out, when, &event.common, &comms, context)?;
                output::write_sched_wakeup(out, &event)?;
                writeln!(out)?;
            }
            Some(event @ (Event::GraphEntry(_) | Event::GraphExit(_))) => {
                let common = Common::decode(payload).unwrap_or_default();
                output::write_context(out, when, &common, &comms, context)?;
                output::graph::write_graph_event(out, &event, &names)?;
                writeln!(out)?;
            }
            _ => {
                let common = Common::decode(payload).unwrap_or_default();
                output::write_context(out, when, &common, &comms, context)?;
                print_other(payload, function, &names, out)?;
                writeln!(out)?;
            }
        }
    }
    Ok(())
}

/// The events' field lists for `options/fields`, each read from its
/// format the first time a record of it is printed.
#[derive(Default)]
struct EventFormats {
    /// (type, its fields; `None`: no format known).
    known: Vec<(u16, Option<EventFields>)>,
}

impl EventFormats {
    /// The fields of the event `payload` records, if its format is known.
    fn of(&mut self, payload: &[u8]) -> Option<&EventFields> {
        let kind = Common::decode(payload)?.kind;
        let index = match self.known.iter().position(|(known, _)| *known == kind) {
            Some(index) => index,
            None => {
                self.known.push((kind, format_of(kind).as_deref().and_then(EventFields::parse)));
                self.known.len() - 1
            }
        };
        self.known[index].1.as_ref()
    }
}

/// The `format` text of event type `kind`: the tracers', the scheduler's,
/// a synthetic event's, or (through [`set_event_format`]) a probe event's.
fn format_of(kind: u16) -> Option<String> {
    let id_line = alloc::format!("\nID: {kind}\n");
    let builtin = crate::events::record::ftrace_formats().into_iter().chain(crate::events::record::sched_formats());
    if let Some((_, text)) = builtin.into_iter().find(|(_, text)| text.contains(&id_line)) {
        return Some(text);
    }
    crate::events::synth::format_of(kind).or_else(|| EVENT_FORMAT.load().and_then(|format| format(kind)))
}
