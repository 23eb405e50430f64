//! The function_graph tracer's lines, as Linux prints them: the header,
//! one line per leaf call (`fib();`), an opening and a closing line per
//! call with children, the duration column and its marks, and the
//! `funcgraph-*` options ([`GraphOptions`]). [`write_graph`] turns a
//! merged run of entry and return records into lines, keeping what spans
//! runs in a [`GraphState`].

use super::{
    print_text, task_name, write_code_address, write_flags, write_func_repeats, write_latency_header, write_sched_switch,
    write_sched_wakeup, write_sym_addr, write_symbol, Comms, ContextOptions, FunctionOptions, Namer, When,
};
use core::fmt::{self, Write};

use alloc::string::String;

use crate::events::record::{Event, GraphEntryEvent, GraphExitEvent};
use ring_buffer::per_cpu::Stats;

/// The `function_graph` header, with the columns `options` turn on; with
/// `latency`, after the latency banner (nothing over an empty buffer:
/// `stats`, `cpus` and `banner_cpu` are for the banner).
pub fn write_graph_header(
    out: &mut dyn Write,
    options: GraphOptions,
    stats: Stats,
    cpus: usize,
    banner_cpu: usize,
) -> fmt::Result {
    writeln!(out, "# tracer: function_graph")?;
    writeln!(out, "#")?;
    if !options.context_info {
        return Ok(());
    }
    if options.latency {
        if stats.entries == 0 {
            return Ok(());
        }
        write_latency_header(out, "function_graph", stats, cpus, banner_cpu)?;
        // Linux's `print_lat_header`: the flags' legend over their column.
        let width = 16 * usize::from(options.abstime) + 4 * usize::from(options.cpu) + 17 * usize::from(options.proc);
        let blank = " ".repeat(width);
        writeln!(out, "#{blank}  _-----=> irqs-off        ")?;
        writeln!(out, "#{blank} / _----=> need-resched    ")?;
        writeln!(out, "#{blank}| / _---=> hardirq/softirq ")?;
        writeln!(out, "#{blank}|| / _--=> preempt-depth   ")?;
        writeln!(out, "#{blank}||| /                      ")?;
    }
    let (mut names, mut bars) = (String::from("#"), String::from("#"));
    if options.abstime {
        names.push_str("     TIME       ");
        bars.push_str("      |         ");
    }
    if options.cpu {
        names.push_str(" CPU");
        bars.push_str(" |  ");
    }
    if options.proc {
        names.push_str("  TASK/PID       ");
        bars.push_str("   |    |        ");
    }
    if options.latency {
        names.push_str("||||   ");
        bars.push_str("||||   ");
    }
    if options.duration {
        names.push_str("  DURATION   ");
        bars.push_str("   |   |      ");
    }
    names.push_str("               FUNCTION CALLS");
    bars.push_str("               |   |   |   |");
    writeln!(out, "{names}")?;
    writeln!(out, "{bars}")
}

/// Linux's overhead mark for a duration in ns: `$` over 1 s, `@` 100 ms,
/// `*` 10 ms, `#` 1 ms, `!` 100 us, `+` 10 us.
pub(super) fn duration_mark(ns: u64) -> char {
    const MARKS: [(u64, char); 6] =
        [(1_000_000_000, '$'), (100_000_000, '@'), (10_000_000, '*'), (1_000_000, '#'), (100_000, '!'), (10_000, '+')];
    MARKS.iter().find(|(limit, _)| ns > *limit).map_or(' ', |(_, mark)| *mark)
}

/// A duration as Linux's `trace_print_graph_duration` writes it:
/// microseconds with up to three decimals (no more than 7 digits in all),
/// ` us `, then blanks up to Linux's width: `0.812 us    `. The graph's
/// duration column and the profiler's `trace_stat` times.
pub(crate) fn write_graph_duration(out: &mut dyn Write, ns: u64) -> fmt::Result {
    let (micros, rest) = (ns / 1_000, ns % 1_000);
    let mut text = alloc::format!("{micros}");
    if text.len() < 7 {
        let decimals = alloc::format!("{rest:03}");
        let keep = (7 - text.len()).min(3);
        text.push('.');
        text.push_str(&decimals[..keep]);
    }
    write!(out, "{text} us ")?;
    for _ in text.len()..8 {
        out.write_char(' ')?;
    }
    Ok(())
}

/// The duration column: `  0.812 us    |  ` (mark, then
/// [`write_graph_duration`]); without `overhead`, a blank where the mark
/// goes.
pub(super) fn write_duration(out: &mut dyn Write, ns: u64, overhead: bool) -> fmt::Result {
    let mark = if overhead { duration_mark(ns) } else { ' ' };
    write!(out, "{mark} ")?;
    write_graph_duration(out, ns)?;
    out.write_str("|  ")
}

/// Options for the `function_graph` output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphOptions {
    /// `options/funcgraph-retval`: print each call's return value.
    pub retval: bool,
    /// `options/funcgraph-retval-hex`: every return value in hex (else an
    /// error code prints as a negative decimal).
    pub retval_hex: bool,
    /// `options/funcgraph-retaddr`: each call's return address after its
    /// entry, ` /* <-caller+0xOFF/0xSIZE */` (recorded entries that have
    /// one).
    pub retaddr: bool,
    /// `options/sym-addr`: the return address's value after its name, as
    /// Linux adds it to every symbol it prints.
    pub sym_addr: bool,
    /// `options/funcgraph-cpu`: the CPU column (on by default).
    pub cpu: bool,
    /// Timestamps are counts, not nanoseconds (the `counter` clock).
    pub raw_time: bool,
    /// `options/funcgraph-proc`: the task (`comm-pid`) on every line.
    pub proc: bool,
    /// `options/funcgraph-abstime`: the timestamp on every line.
    pub abstime: bool,
    /// `options/funcgraph-duration`: the duration column (on by default).
    pub duration: bool,
    /// `options/funcgraph-overhead`: a long call's duration gets its mark
    /// (`+`, `!`, `#`...; on by default).
    pub overhead: bool,
    /// `options/funcgraph-tail`: every closing brace names its function.
    pub tail: bool,
    /// `options/funcgraph-overrun`: after each closing brace, a line with
    /// the task's shadow-stack overruns then.
    pub overrun: bool,
    /// `options/context-info`: off, a line has no time, CPU, task or
    /// duration columns (whatever the options above say), and the output
    /// no column header.
    pub context_info: bool,
    /// `options/print-parent`: a function event inside the graph names
    /// its caller too (on by default).
    pub print_parent: bool,
    /// `options/latency-format`: the latency banner over the output and the
    /// flags column (`d.h1.`) on every line.
    pub latency: bool,
}

impl GraphOptions {
    /// The options a line is printed with: without `context_info`, none of
    /// the columns before the function.
    fn columns(self) -> GraphOptions {
        match self.context_info {
            true => self,
            false => GraphOptions { abstime: false, cpu: false, proc: false, duration: false, latency: false, ..self },
        }
    }
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            retval: false,
            retval_hex: false,
            retaddr: false,
            sym_addr: false,
            cpu: true,
            raw_time: false,
            proc: false,
            abstime: false,
            duration: true,
            overhead: true,
            tail: false,
            overrun: false,
            context_info: true,
            print_parent: true,
            latency: false,
        }
    }
}

/// A function-graph event's text when the trace is read under another
/// tracer (a snapshot or a buffer kept across a switch): the call nested as
/// the graph tracer would nest it, an entry `fib() {`, a return
/// `} /* fib */` (Linux prints these events with the graph printer
/// whatever the tracer; never as an unknown type).
pub fn write_graph_event(out: &mut dyn Write, event: &Event, names: Namer) -> fmt::Result {
    match event {
        Event::GraphEntry(entry) => {
            indent(out, entry.depth)?;
            write_symbol(out, entry.func as usize, names)?;
            out.write_str("() {")
        }
        Event::GraphExit(exit) => {
            indent(out, exit.depth)?;
            out.write_str("} /* ")?;
            write_symbol(out, exit.func as usize, names)?;
            out.write_str(" */")
        }
        _ => Ok(()),
    }
}

pub(super) fn indent(out: &mut dyn Write, depth: i32) -> fmt::Result {
    for _ in 0..depth.max(0) * 2 {
        out.write_char(' ')?;
    }
    Ok(())
}

/// Starts a comment line after its line start: an empty duration column,
/// then, as Linux's graph output does, the indentation of one level inside
/// the call it happens in (`depth`: that call's depth, as the lines before
/// it on its CPU left it; none at the top level or outside any call).
pub(super) fn open_comment(out: &mut dyn Write, options: GraphOptions, depth: i32) -> fmt::Result {
    write_duration_column(out, None, options)?;
    if depth > 0 {
        indent(out, depth + 1)?;
    }
    out.write_str("/* ")
}

/// Prints an event the graph output does not know itself (as a comment).
pub type OtherPrinter<'a> = &'a dyn Fn(&[u8], &mut dyn Write) -> fmt::Result;

/// One event as the graph output takes it: its time, CPU, decoded record
/// and raw payload.
pub type GraphLine<'a> = (u64, usize, Event, &'a [u8]);

/// What the graph output remembers from the lines it printed, per CPU, to
/// print the next ones (Linux's `fgraph_data`, kept while a reader has the
/// file open): a reader that prints a buffer in parts (`trace_pipe`) keeps
/// one for all of them.
pub struct GraphState {
    /// The task of the last line.
    last_pid: [Option<i32>; 64],
    /// The depth of the call a comment is inside of.
    comment_depth: [i32; 64],
    /// The calls opened and not closed yet.
    opened: OpenCalls,
}

impl Default for GraphState {
    fn default() -> Self {
        GraphState { last_pid: [None; 64], comment_depth: [0; 64], opened: OpenCalls::default() }
    }
}

/// `function_graph` lines for `events` (merged from every CPU, by time): a
/// call whose return is the next event on its CPU is one `func();` line
/// with its duration; other calls open `func() {` and close with `}`; other
/// events appear as `/* ... */` comments, indented inside the call they
/// happen in; and where the task on a CPU changes, a ` => ` line says so,
/// as Linux prints them. A return whose call this output did not open on
/// its CPU (lost, overwritten, or never recorded: `tracing_thresh`) names
/// its function, `} /* fib */`, as Linux's does. `state` is what the lines
/// printed before (by this reader) left.
pub fn write_graph(
    state: &mut GraphState,
    out: &mut dyn Write,
    events: &[GraphLine],
    names: Namer,
    comms: Comms,
    options: GraphOptions,
    other: OtherPrinter,
) -> fmt::Result {
    let options = options.columns();
    let GraphState { last_pid, comment_depth, opened } = state;
    let mut skip = alloc::vec![false; events.len()];
    for i in 0..events.len() {
        if skip[i] {
            continue;
        }
        let (time, cpu, record, payload) = &events[i];
        let cpu = *cpu;
        let pid = match record {
            Event::GraphEntry(e) => Some(e.common.pid),
            Event::GraphExit(e) => Some(e.common.pid),
            _ => None,
        };
        if let (Some(pid), Some(slot)) = (pid, last_pid.get_mut(cpu)) {
            if let Some(previous) = slot.replace(pid).filter(|&previous| previous != pid) {
                write_task_change(out, cpu, previous, pid, comms)?;
            }
        }
        write_line_start(out, events[i].0, cpu, record, comms, options)?;
        match record {
            Event::GraphEntry(entry) => {
                // The next event of the same CPU: the return, for a leaf
                // (the same task's: another task's return of the same
                // function at the same depth is its own call, as Linux's
                // `get_return_for_leaf` checks).
                let next = (i + 1..events.len()).find(|&j| events[j].1 == cpu);
                let leaf = next.and_then(|j| match events[j].2 {
                    Event::GraphExit(exit)
                        if exit.func == entry.func && exit.depth == entry.depth && exit.common.pid == entry.common.pid =>
                    {
                        Some((j, exit))
                    }
                    _ => None,
                });
                if let Some(slot) = comment_depth.get_mut(cpu) {
                    *slot = if leaf.is_some() { entry.depth - 1 } else { entry.depth };
                }
                opened.set(cpu, entry.depth, leaf.is_none().then_some(entry.func));
                // `funcgraph-retaddr`: where the call returns to, as Linux
                // prints it (always with its offset).
                let retaddr = options.retaddr.then(|| GraphEntryEvent::retaddr(payload)).flatten();
                let write_retaddr = |out: &mut dyn Write, retaddr: u64| {
                    out.write_str(" <-")?;
                    write_code_address(out, retaddr as usize, names)?;
                    match options.sym_addr {
                        true => write_sym_addr(out, retaddr),
                        false => Ok(()),
                    }
                };
                match leaf {
                    Some((j, exit)) => {
                        write_duration_column(out, Some(exit.duration()), options)?;
                        indent(out, entry.depth)?;
                        write_symbol(out, entry.func as usize, names)?;
                        out.write_str("();")?;
                        if options.retval || retaddr.is_some() {
                            out.write_str(" /*")?;
                            if let Some(retaddr) = retaddr {
                                write_retaddr(out, retaddr)?;
                            }
                            if options.retval {
                                write_retval(out, exit.retval, options)?;
                            }
                            out.write_str(" */")?;
                        }
                        skip[j] = true;
                    }
                    None => {
                        write_duration_column(out, None, options)?;
                        indent(out, entry.depth)?;
                        write_symbol(out, entry.func as usize, names)?;
                        out.write_str("() {")?;
                        if let Some(retaddr) = retaddr {
                            out.write_str(" /*")?;
                            write_retaddr(out, retaddr)?;
                            out.write_str(" */")?;
                        }
                    }
                }
            }
            Event::GraphExit(exit) => {
                if let Some(slot) = comment_depth.get_mut(cpu) {
                    *slot = exit.depth - 1;
                }
                let matched = opened.take(cpu, exit.depth) == Some(exit.func);
                write_closing(out, exit, matched, names, options)?;
                if options.overrun {
                    // Linux's own line after the brace's.
                    write!(out, "\n (Overruns: {})", exit.overrun)?;
                }
            }
            Event::Function(event) => {
                // As Linux prints a function event inside a graph: its
                // own text, `func <-parent`, as a comment.
                open_comment(out, options, comment_depth.get(cpu).copied().unwrap_or(0))?;
                write_symbol(out, event.ip as usize, names)?;
                if options.print_parent && event.parent_ip != 0 {
                    out.write_str(" <-")?;
                    write_symbol(out, event.parent_ip as usize, names)?;
                }
                out.write_str(" */")?;
            }
            Event::FuncRepeats(event) => {
                // Its own text too, as a comment.
                open_comment(out, options, comment_depth.get(cpu).copied().unwrap_or(0))?;
                let mut text = String::new();
                let function = FunctionOptions {
                    context: ContextOptions { context_info: false, ..Default::default() },
                    ..Default::default()
                };
                write_func_repeats(&mut text, When::at(cpu, *time), event, names, &|_| None, function)?;
                out.write_str(text.trim_end())?;
                out.write_str(" */")?;
            }
            Event::SchedSwitch(event) => {
                open_comment(out, options, comment_depth.get(cpu).copied().unwrap_or(0))?;
                write_sched_switch(out, event)?;
                out.write_str(" */")?;
            }
            Event::SchedWakeup(event) => {
                open_comment(out, options, comment_depth.get(cpu).copied().unwrap_or(0))?;
                write_sched_wakeup(out, event)?;
                out.write_str(" */")?;
            }
            Event::Other(_) => {
                open_comment(out, options, comment_depth.get(cpu).copied().unwrap_or(0))?;
                match crate::events::record::decode_print(payload) {
                    // A line of text: only the text, as Linux's graph
                    // output shows a message.
                    Some((_, text)) => out.write_str(print_text(text))?,
                    None => other(payload, out)?,
                }
                out.write_str(" */")?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// ` ret=VALUE`, as Linux's `print_graph_retval` writes it: hex, but an
/// error code (-1 to -4095, also as a 32-bit `int`) as a negative decimal
/// unless `funcgraph-retval-hex` is on.
pub(super) fn write_retval(out: &mut dyn Write, retval: u64, options: GraphOptions) -> fmt::Result {
    const MAX_ERRNO: i64 = 4095;
    let as_long = if retval >> 32 == 0 && retval & (1 << 31) != 0 { retval as u32 as i32 as i64 } else { retval as i64 };
    if !options.retval_hex && (-MAX_ERRNO..0).contains(&as_long) {
        write!(out, " ret={as_long}")
    } else {
        write!(out, " ret={retval:#x}")
    }
}

/// `comm-pid` centred in 14 columns, the name cut to 7 characters (Linux's
/// `print_graph_proc`).
pub(super) fn write_proc(out: &mut dyn Write, pid: i32, comms: Comms) -> fmt::Result {
    let name = task_name(pid, comms);
    let name = name.char_indices().nth(7).map_or(&*name, |(cut, _)| &name[..cut]);
    let text = alloc::format!("{name}-{pid}");
    let spaces = 14usize.saturating_sub(text.len());
    let before = spaces / 2;
    write!(out, "{:before$}{text}{:after$}", "", "", before = before, after = spaces - before)
}

/// The lines Linux prints when the task on a CPU changes.
pub(super) fn write_task_change(out: &mut dyn Write, cpu: usize, previous: i32, pid: i32, comms: Comms) -> fmt::Result {
    writeln!(out, " ------------------------------------------")?;
    write!(out, " {cpu}) ")?;
    write_proc(out, previous, comms)?;
    out.write_str(" => ")?;
    write_proc(out, pid, comms)?;
    writeln!(out)?;
    writeln!(out, " ------------------------------------------")?;
    writeln!(out)
}

/// The start of a graph line: the timestamp (`funcgraph-abstime`), the
/// CPU, and the task (`funcgraph-proc`).
pub(super) fn write_line_start(
    out: &mut dyn Write,
    time_ns: u64,
    cpu: usize,
    record: &Event,
    comms: Comms,
    options: GraphOptions,
) -> fmt::Result {
    if options.abstime && options.raw_time {
        write!(out, "{time_ns:>13} |  ")?;
    } else if options.abstime {
        write!(out, "{:>5}.{:06} |  ", time_ns / 1_000_000_000, time_ns % 1_000_000_000 / 1_000)?;
    }
    if options.cpu {
        write!(out, " {cpu}) ")?;
    }
    let common = match record {
        Event::GraphEntry(e) => &e.common,
        Event::GraphExit(e) => &e.common,
        Event::Function(e) => &e.common,
        Event::FuncRepeats(e) => &e.common,
        Event::SchedSwitch(e) => &e.common,
        Event::SchedWakeup(e) => &e.common,
        Event::Other(common) => common,
    };
    if options.proc {
        write_proc(out, common.pid, comms)?;
        out.write_str(" | ")?;
    }
    if options.latency {
        out.write_char(' ')?;
        write_flags(out, common)?;
        out.write_str(" | ")?;
    }
    Ok(())
}

/// The duration column and its bar: the duration of a finished call, or
/// blanks; nothing with `funcgraph-duration` off.
pub(super) fn write_duration_column(out: &mut dyn Write, ns: Option<u64>, options: GraphOptions) -> fmt::Result {
    match (options.duration, ns) {
        (false, _) => Ok(()),
        (true, Some(ns)) => write_duration(out, ns, options.overhead),
        (true, None) => out.write_str("              |  "),
    }
}

/// The calls [`write_graph`] opened (`func() {`) and has not closed yet:
/// per CPU and depth, the function (Linux's `enter_funcs`).
#[derive(Default)]
pub(super) struct OpenCalls(alloc::collections::BTreeMap<(usize, i32), u64>);

impl OpenCalls {
    /// Records what is open at `depth` on `cpu` now (`None`: nothing, after
    /// a leaf).
    fn set(&mut self, cpu: usize, depth: i32, func: Option<u64>) {
        match func {
            Some(func) => self.0.insert((cpu, depth), func),
            None => self.0.remove(&(cpu, depth)),
        };
    }

    /// The function open at `depth` on `cpu`, which a return there closes.
    fn take(&mut self, cpu: usize, depth: i32) -> Option<u64> {
        self.0.remove(&(cpu, depth))
    }
}

/// A return's line: `}`, naming the function when asked to
/// (`funcgraph-tail`, `funcgraph-retval`) or when its call was not
/// `matched` by an opening line.
pub(super) fn write_closing(
    out: &mut dyn Write,
    exit: &GraphExitEvent,
    matched: bool,
    names: Namer,
    options: GraphOptions,
) -> fmt::Result {
    write_duration_column(out, Some(exit.duration()), options)?;
    indent(out, exit.depth)?;
    out.write_char('}')?;
    if options.retval {
        out.write_str(" /* ")?;
        write_symbol(out, exit.func as usize, names)?;
        write_retval(out, exit.retval, options)?;
        out.write_str(" */")?;
    } else if options.tail || !matched {
        out.write_str(" /* ")?;
        write_symbol(out, exit.func as usize, names)?;
        out.write_str(" */")?;
    }
    Ok(())
}
