//! `cat trace` output in Linux's format.

#[cfg(target_os = "none")]
pub mod pipe;
pub mod print_modes;
#[cfg(target_os = "none")]
pub mod read;

use core::fmt::{self, Write};

use alloc::string::String;

use crate::events::record::{
    comm_str, flags, Common, Event, FuncRepeatsEvent, FunctionEvent, GraphEntryEvent, GraphExitEvent, SchedSwitchEvent,
    SchedWakeupEvent,
};
use ftrace::symbols::table::Symbol;
use ring_buffer::per_cpu::Stats;

/// Finds the function an address is inside, if any.
pub type Namer<'a> = &'a dyn Fn(usize) -> Option<Symbol<'static>>;

/// Finds a task's name by pid (`saved_cmdlines`), if known.
pub type Comms<'a> = &'a dyn Fn(i32) -> Option<String>;

/// Finds a task's thread-group id (`saved_tgids`), if recorded.
pub type Tgids = fn(i32) -> Option<i32>;

/// What the start of each line (and the header over them) shows: the
/// options Linux's `trace_print_context` reads.
#[derive(Clone, Copy, Debug)]
pub struct ContextOptions {
    /// `options/context-info`: the task, CPU, flags and timestamp (off:
    /// each line is the event alone, and there is no column header).
    pub context_info: bool,
    /// `options/irq-info`: the latency flags column (`d.h..`).
    pub irq_info: bool,
    /// Timestamps are counts, not nanoseconds (the `counter` clock).
    pub raw_time: bool,
    /// `options/latency-format`: Linux's latency columns and header, times
    /// counted from where this says.
    pub latency: Option<LatencyStart>,
    /// `options/verbose`: the latency format's long form (raw flags,
    /// preempt count, index, milliseconds), and no column header.
    pub verbose: bool,
    /// `options/record-tgid`: a TGID column after the task, from this
    /// lookup.
    pub tgids: Option<Tgids>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions { context_info: true, irq_info: true, raw_time: false, latency: None, verbose: false, tgids: None }
    }
}

/// Where the latency format counts from (Linux's `array_buffer.time_start`)
/// and the CPU its banner names (Linux's `array_buffer.cpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyStart {
    /// A clock time: the buffer's last reset (0 for a snapshot).
    pub time: u64,
    /// The CPU the function tracer last started on.
    pub cpu: usize,
}

/// Where and when an event was recorded, and when the event printed after
/// it was (the latency format marks a long gap to the next line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct When {
    /// The CPU whose buffer it is in.
    pub cpu: usize,
    /// Its timestamp.
    pub time: u64,
    /// The next event's timestamp (its own if it is the last).
    pub next: u64,
    /// Its place in what the reader printed, 0 first (the verbose latency
    /// format shows it).
    pub index: usize,
}

impl When {
    /// An event with no event after it.
    pub fn at(cpu: usize, time: u64) -> When {
        When { cpu, time, next: time, index: 0 }
    }
}

/// The kernel release the latency header names.
const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The header `cat trace` prints before the events.
pub fn write_header(out: &mut dyn Write, tracer: &str, stats: Stats, cpus: usize, context: ContextOptions) -> fmt::Result {
    writeln!(out, "# tracer: {tracer}")?;
    writeln!(out, "#")?;
    if !context.context_info {
        return Ok(());
    }
    if let Some(start) = context.latency {
        // Nothing more over an empty buffer, as in Linux.
        if stats.entries == 0 {
            return Ok(());
        }
        write_latency_header(out, tracer, stats, cpus, start.cpu)?;
        return match context.verbose {
            true => Ok(()),
            false => out.write_str(LATENCY_COLUMNS),
        };
    }
    if context.verbose {
        return Ok(());
    }
    // As Linux counts them: the events still in the buffer, and those plus
    // the ones overwritten (events a consuming reader took are in neither).
    writeln!(out, "# entries-in-buffer/entries-written: {}/{}   #P:{cpus}", stats.entries, stats.entries + stats.overrun)?;
    writeln!(out, "#")?;
    // The TGID column's title, bar and room (Linux's `print_func_help_header`
    // and `print_func_help_header_irq`, whose columns are 2 wider).
    let (title, bar, blank) = match context.tgids {
        Some(_) => ("   TGID   ", "     |    ", "          "),
        None => ("", "", ""),
    };
    if !context.irq_info {
        writeln!(out, "#           TASK-PID    {title} CPU#     TIMESTAMP  FUNCTION")?;
        return writeln!(out, "#              | |      {bar}   |         |         |");
    }
    writeln!(out, "#                              {blank}  _-----=> irqs-off/BH-disabled")?;
    writeln!(out, "#                              {blank} / _----=> need-resched")?;
    writeln!(out, "#                              {blank}| / _---=> hardirq/softirq")?;
    writeln!(out, "#                              {blank}|| / _--=> preempt-depth")?;
    writeln!(out, "#                              {blank}||| / _-=> migrate-disable")?;
    writeln!(out, "#                              {blank}|||| /     delay")?;
    writeln!(out, "#           TASK-PID    {title} CPU#  |||||  TIMESTAMP  FUNCTION")?;
    writeln!(out, "#              | |      {bar}   |   |||||     |         |")
}

/// The latency format's banner (Linux's `print_trace_header`): what a
/// latency tracer would say about its worst case. No tracer here measures
/// one, so the latency is 0 and no task is named, as Linux prints these
/// for a tracer that is not a latency tracer; `cpu` is the CPU the function
/// tracer last started on, as Linux's `function_trace_init` notes it.
fn write_latency_header(out: &mut dyn Write, tracer: &str, stats: Stats, cpus: usize, cpu: usize) -> fmt::Result {
    writeln!(out, "# {tracer} latency trace v1.1.5 on {RELEASE}")?;
    writeln!(out, "# {}", "-".repeat(68))?;
    writeln!(
        out,
        "# latency: 0 us, #{}/{}, CPU#{cpu} | (M:PREEMPT VP:0, KP:0, SP:0 HP:0 #P:{cpus})",
        stats.entries,
        stats.entries + stats.overrun
    )?;
    writeln!(out, "#    -----------------")?;
    writeln!(out, "#    | task: -0 (uid:0 nice:0 policy:0 rt_prio:0)")?;
    writeln!(out, "#    -----------------")?;
    writeln!(out, "#")
}

/// The latency format's column header (Linux's `print_lat_help_header`,
/// trailing blanks and all).
const LATENCY_COLUMNS: &str = concat!(
    "#                    _------=> CPU#            \n",
    "#                   / _-----=> irqs-off/BH-disabled\n",
    "#                  | / _----=> need-resched    \n",
    "#                  || / _---=> hardirq/softirq \n",
    "#                  ||| / _--=> preempt-depth   \n",
    "#                  |||| / _-=> migrate-disable \n",
    "#                  ||||| /     delay           \n",
    "#  cmd     pid     |||||| time  |   caller     \n",
    "#     \\   /        ||||||  \\    |    /       \n",
);

/// The task column's name: the idle tasks are `<idle>`, a task whose name
/// is not known `<...>`, as Linux prints them.
fn task_name(pid: i32, comms: Comms) -> String {
    if pid == 0 {
        return String::from("<idle>");
    }
    comms(pid).unwrap_or_else(|| String::from("<...>"))
}

/// The five latency-format flag characters (`d.h..`).
pub fn latency_flags(common: &Common) -> [u8; 5] {
    let irqs = if common.flags & flags::IRQS_OFF != 0 { b'd' } else { b'.' };
    let hard = common.flags & flags::HARDIRQ != 0;
    let soft = common.flags & flags::SOFTIRQ != 0;
    let nmi = common.flags & flags::NMI != 0;
    let context = match (nmi, hard, soft) {
        (true, true, _) => b'Z',
        (true, false, _) => b'z',
        (false, true, true) => b'H',
        (false, true, false) => b'h',
        (false, false, true) => b's',
        _ => b'.',
    };
    let depth = match common.preempt_count & 0xf {
        0 => b'.',
        n => b"0123456789abcdef"[n as usize],
    };
    let resched = if common.flags & flags::NEED_RESCHED != 0 { b'N' } else { b'.' };
    [irqs, resched, context, depth, b'.']
}

/// The flags column, [`latency_flags`].
fn write_flags(out: &mut dyn Write, common: &Common) -> fmt::Result {
    out.write_str(core::str::from_utf8(&latency_flags(common)).unwrap_or("....."))
}

/// `          <idle>-0       [000] d....    12.345678: `, as `context`
/// says: without `irq_info` no flags column, without `context_info`
/// nothing; with `raw_time` (a clock that is no time, such as `counter`)
/// the timestamp is the number, as Linux prints a clock not in
/// nanoseconds. With `latency`, the latency format's columns instead.
pub fn write_context(out: &mut dyn Write, when: When, common: &Common, comms: Comms, context: ContextOptions) -> fmt::Result {
    if !context.context_info {
        return Ok(());
    }
    if let Some(start) = context.latency {
        return write_latency_context(out, when, start, common, comms, context);
    }
    write!(out, "{:>16}-{:<7} ", task_name(common.pid, comms), common.pid)?;
    if let Some(tgids) = context.tgids {
        match tgids(common.pid) {
            Some(tgid) => write!(out, "({tgid:>7}) ")?,
            None => out.write_str("(-------) ")?,
        }
    }
    write!(out, "[{:03}] ", when.cpu)?;
    if context.irq_info {
        write_flags(out, common)?;
    }
    out.write_char(' ')?;
    write_timestamp(out, when.time, context.raw_time)?;
    out.write_str(": ")
}

/// The latency format's start of a line (Linux's `lat_print_generic` and
/// `lat_print_timestamp`): `  <idle>-0         1d.h1.   12us+: `, the
/// task's name cut to 8 characters, the CPU, the flags, the microseconds
/// since `start` and the mark of the gap to the next line (`+` over 10
/// us, `!` over 100 us...); with `raw_time` (a clock that is no time),
/// counts and no mark. `verbose`: the whole name, the raw flags in
/// decimal, the preempt count and index in hex, then the time and the gap
/// in milliseconds.
fn write_latency_context(
    out: &mut dyn Write,
    when: When,
    start: LatencyStart,
    common: &Common,
    comms: Comms,
    context: ContextOptions,
) -> fmt::Result {
    let name = task_name(common.pid, comms);
    let micros = |ns: u64| (ns + 500) / 1_000; // Linux's ns2usecs()
    let (since, gap) = (when.time.saturating_sub(start.time), when.next.saturating_sub(when.time));
    if context.verbose {
        write!(
            out,
            "{name:>16} {:>7} {:>3} {} {:08x} {:08x} ",
            common.pid,
            when.cpu,
            common.flags,
            common.preempt_count & 0xf,
            when.index
        )?;
        if context.raw_time {
            return write!(out, "[{:016x}] {since} (+{gap}): ", when.time);
        }
        let (since, gap) = (micros(since), micros(gap));
        return write!(
            out,
            "[{:08x}] {}.{:03}ms (+{}.{:03}ms): ",
            micros(when.time),
            since / 1_000,
            since % 1_000,
            gap / 1_000,
            gap % 1_000
        );
    }
    let name = name.char_indices().nth(8).map_or(name.as_str(), |(end, _)| &name[..end]);
    write!(out, "{name:>8}-{:<7} {:>3}", common.pid, when.cpu)?;
    write_flags(out, common)?;
    if context.raw_time {
        return write!(out, " {since:>4}: ");
    }
    write!(out, " {:>4}us{}: ", micros(since), duration_mark(micros(gap) * 1_000))
}

/// A timestamp as Linux prints one: seconds and microseconds, or (`raw`:
/// a clock that is no time, such as `counter`) the number.
fn write_timestamp(out: &mut dyn Write, time_ns: u64, raw: bool) -> fmt::Result {
    if raw {
        return write!(out, "{time_ns:>12}");
    }
    // Rounded to the nearest microsecond, as Linux's ns2usecs() does.
    let micros = (time_ns + 500) / 1_000;
    write!(out, "{:>5}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// A `sched_switch` line's text, as Linux prints it.
pub fn write_sched_switch(out: &mut dyn Write, event: &SchedSwitchEvent) -> fmt::Result {
    write!(
        out,
        "sched_switch: prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
        comm_str(&event.prev_comm),
        event.prev_pid,
        event.prev_prio,
        event.state_text(),
        comm_str(&event.next_comm),
        event.next_pid,
        event.next_prio
    )
}

/// A `sched_wakeup` (or `sched_wakeup_new`) line's text, as Linux prints it.
pub fn write_sched_wakeup(out: &mut dyn Write, event: &SchedWakeupEvent) -> fmt::Result {
    let name = if event.common.kind == crate::events::record::SCHED_WAKEUP_NEW { "sched_wakeup_new" } else { "sched_wakeup" };
    write!(out, "{name}: comm={} pid={} prio={} target_cpu={:03}", comm_str(&event.comm), event.pid, event.prio, event.target_cpu)
}

/// A print event's text as a line shows it: without the newline it was
/// written with (the line adds its own).
pub fn print_text(text: &[u8]) -> &str {
    let text = core::str::from_utf8(text).unwrap_or("(not UTF-8)");
    text.strip_suffix('\n').unwrap_or(text)
}

/// Writes a symbol name, or the raw address when there is none.
pub fn write_symbol(out: &mut dyn Write, address: usize, names: Namer) -> fmt::Result {
    match names(address) {
        Some(symbol) => out.write_str(symbol.name),
        None => write!(out, "{address:#x}"),
    }
}

/// Writes `function+0xOFF/0xSIZE`, or the raw address when there is none.
pub fn write_code_address(out: &mut dyn Write, address: usize, names: Namer) -> fmt::Result {
    match names(address) {
        Some(symbol) => write!(out, "{}+{:#x}/{:#x}", symbol.name, address - symbol.address, symbol.size),
        None => write!(out, "{address:#x}"),
    }
}

/// What `options/sym-addr` adds after a name: ` <ADDRESS>`, 16 hex digits
/// (Linux's `seq_print_ip_sym`).
pub fn write_sym_addr(out: &mut dyn Write, address: u64) -> fmt::Result {
    write!(out, " <{address:016x}>")
}

/// How the function tracer's lines look (`options/sym-offset`,
/// `options/sym-addr`, `options/print-parent`).
#[derive(Clone, Copy, Debug)]
pub struct FunctionOptions {
    /// Addresses as `function+0xOFF/0xSIZE`.
    pub sym_offset: bool,
    /// Each name followed by its address, ` <ffffffff81000000>`.
    pub sym_addr: bool,
    /// ` <-caller` after the function (on by default).
    pub print_parent: bool,
    /// The start of the line.
    pub context: ContextOptions,
}

impl Default for FunctionOptions {
    fn default() -> Self {
        FunctionOptions { sym_offset: false, sym_addr: false, print_parent: true, context: ContextOptions::default() }
    }
}

/// One function tracer line: `context function <-caller`.
pub fn write_function(
    out: &mut dyn Write,
    when: When,
    event: &FunctionEvent,
    names: Namer,
    comms: Comms,
    options: FunctionOptions,
) -> fmt::Result {
    write_context(out, when, &event.common, comms, options.context)?;
    write_fn_trace(out, event.ip, event.parent_ip, names, options)?;
    writeln!(out)
}

/// `function <-caller`, as the options say (Linux's `print_fn_trace`).
fn write_fn_trace(out: &mut dyn Write, ip: u64, parent_ip: u64, names: Namer, options: FunctionOptions) -> fmt::Result {
    write_ip_sym(out, ip, names, options)?;
    if options.print_parent {
        out.write_str(" <-")?;
        write_ip_sym(out, parent_ip, names, options)?;
    }
    Ok(())
}

/// A code address as `options/sym-offset` and `options/sym-addr` say
/// (Linux's `seq_print_ip_sym`): the function, `function+0xOFF/0xSIZE`,
/// and ` <ADDRESS>` after either.
pub fn write_ip_sym(out: &mut dyn Write, address: u64, names: Namer, options: FunctionOptions) -> fmt::Result {
    match options.sym_offset {
        true => write_code_address(out, address as usize, names)?,
        false => write_symbol(out, address as usize, names)?,
    }
    match options.sym_addr {
        true => write_sym_addr(out, address),
        false => Ok(()),
    }
}

/// A `func_repeats` line (`options/func-no-repeats`), as Linux prints it:
/// `context function <-caller (repeats: N, last_ts: TIME)`, TIME being
/// when the last repeat came.
pub fn write_func_repeats(
    out: &mut dyn Write,
    when: When,
    event: &FuncRepeatsEvent,
    names: Namer,
    comms: Comms,
    options: FunctionOptions,
) -> fmt::Result {
    write_context(out, when, &event.common, comms, options.context)?;
    write_fn_trace(out, event.ip, event.parent_ip, names, options)?;
    write!(out, " (repeats: {}, last_ts: ", event.count)?;
    write_timestamp(out, when.time.saturating_sub(event.delta), options.context.raw_time)?;
    writeln!(out, ")")
}

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
fn duration_mark(ns: u64) -> char {
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
fn write_duration(out: &mut dyn Write, ns: u64, overhead: bool) -> fmt::Result {
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

fn indent(out: &mut dyn Write, depth: i32) -> fmt::Result {
    for _ in 0..depth.max(0) * 2 {
        out.write_char(' ')?;
    }
    Ok(())
}

/// Starts a comment line after its line start: an empty duration column,
/// then, as Linux's graph output does, the indentation of one level inside
/// the call it happens in (`depth`: that call's depth, as the lines before
/// it on its CPU left it; none at the top level or outside any call).
fn open_comment(out: &mut dyn Write, options: GraphOptions, depth: i32) -> fmt::Result {
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
fn write_retval(out: &mut dyn Write, retval: u64, options: GraphOptions) -> fmt::Result {
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
fn write_proc(out: &mut dyn Write, pid: i32, comms: Comms) -> fmt::Result {
    let name = task_name(pid, comms);
    let name = name.char_indices().nth(7).map_or(&*name, |(cut, _)| &name[..cut]);
    let text = alloc::format!("{name}-{pid}");
    let spaces = 14usize.saturating_sub(text.len());
    let before = spaces / 2;
    write!(out, "{:before$}{text}{:after$}", "", "", before = before, after = spaces - before)
}

/// The lines Linux prints when the task on a CPU changes.
fn write_task_change(out: &mut dyn Write, cpu: usize, previous: i32, pid: i32, comms: Comms) -> fmt::Result {
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
fn write_line_start(
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
fn write_duration_column(out: &mut dyn Write, ns: Option<u64>, options: GraphOptions) -> fmt::Result {
    match (options.duration, ns) {
        (false, _) => Ok(()),
        (true, Some(ns)) => write_duration(out, ns, options.overhead),
        (true, None) => out.write_str("              |  "),
    }
}

/// The calls [`write_graph`] opened (`func() {`) and has not closed yet:
/// per CPU and depth, the function (Linux's `enter_funcs`).
#[derive(Default)]
struct OpenCalls(alloc::collections::BTreeMap<(usize, i32), u64>);

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
fn write_closing(out: &mut dyn Write, exit: &GraphExitEvent, matched: bool, names: Namer, options: GraphOptions) -> fmt::Result {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::events::record::TRACE_FN;
    use alloc::string::String;

    /// Two functions: fib at 0x1000 (0x60 bytes), run at 0x2000 (0x80 bytes).
    pub(crate) fn test_names(address: usize) -> Option<Symbol<'static>> {
        [
            Symbol { name: "kernel::workload::fib", address: 0x1000, size: 0x60 },
            Symbol { name: "kernel::workload::run", address: 0x2000, size: 0x80 },
        ]
        .into_iter()
        .find(|symbol| symbol.contains(address))
    }

    #[test]
    fn func_repeats_line_matches_linux() {
        let names = test_names;
        let comms = |_: i32| None;
        let event = FuncRepeatsEvent {
            common: Common { kind: crate::events::record::TRACE_FUNC_REPEATS, flags: 0, preempt_count: 0, pid: 0 },
            ip: 0x1000,
            parent_ip: 0x1010,
            count: 3,
            delta: 2_000_600,
        };
        let decoded = FuncRepeatsEvent::decode(&crate::events::record::FixedEvent::to_bytes(&event));
        assert_eq!(decoded, Some(event), "the 48-bit delta split and joined again");
        let mut line = String::new();
        write_func_repeats(&mut line, When::at(0, 12_345_678_901), &event, &names, &comms, FunctionOptions::default()).unwrap();
        assert_eq!(
            line,
            "          <idle>-0       [000] .....    12.345679: kernel::workload::fib <-kernel::workload::fib (repeats: 3, last_ts:    12.343678)\n"
        );
    }

    #[test]
    fn function_line_matches_linux() {
        let names = test_names;
        let event = FunctionEvent {
            common: Common { kind: TRACE_FN, flags: flags::IRQS_OFF, preempt_count: 0, pid: 0 },
            ip: 0x1000,
            parent_ip: 0x201c,
        };
        let mut line = String::new();
        let comms = |_: i32| None;
        write_function(&mut line, When::at(0, 12_345_678_901), &event, &names, &comms, FunctionOptions::default()).unwrap();
        assert_eq!(line, "          <idle>-0       [000] d....    12.345679: kernel::workload::fib <-kernel::workload::run\n");
        let mut unknown = String::new();
        let event = FunctionEvent { parent_ip: 0x9999, ..event };
        write_function(&mut unknown, When::at(1, 0), &event, &names, &comms, FunctionOptions::default()).unwrap();
        assert!(unknown.ends_with("kernel::workload::fib <-0x9999\n"), "{unknown}");

        // `irq-info`, `context-info` and `sym-addr` change it as Linux's.
        let event = FunctionEvent { parent_ip: 0x201c, ..event };
        let line = |options: FunctionOptions| {
            let mut line = String::new();
            write_function(&mut line, When::at(0, 12_345_678_901), &event, &names, &comms, options).unwrap();
            line
        };
        let plain = FunctionOptions::default();
        let no_irq = ContextOptions { irq_info: false, ..plain.context };
        assert_eq!(
            line(FunctionOptions { context: no_irq, ..plain }),
            "          <idle>-0       [000]     12.345679: kernel::workload::fib <-kernel::workload::run\n"
        );
        let no_context = ContextOptions { context_info: false, ..plain.context };
        assert_eq!(line(FunctionOptions { context: no_context, ..plain }), "kernel::workload::fib <-kernel::workload::run\n");
        assert_eq!(
            line(FunctionOptions { context: no_context, sym_addr: true, ..plain }),
            "kernel::workload::fib <0000000000001000> <-kernel::workload::run <000000000000201c>\n"
        );
        let raw = ContextOptions { raw_time: true, irq_info: false, ..plain.context };
        assert_eq!(
            line(FunctionOptions { context: raw, print_parent: false, ..plain }),
            "          <idle>-0       [000]   12345678901: kernel::workload::fib\n"
        );
    }

    #[test]
    fn flags_columns() {
        let common = |flags| Common { kind: TRACE_FN, flags, preempt_count: 0, pid: 0 };
        assert_eq!(&latency_flags(&common(0)), b".....");
        assert_eq!(&latency_flags(&common(flags::IRQS_OFF | flags::HARDIRQ)), b"d.h..");
        let mut header = String::new();
        let stats = Stats { entries: 15, written: 15, overrun: 0, read: 0, dropped: 0 };
        write_header(&mut header, "function", stats, 1, ContextOptions::default()).unwrap();
        assert!(header.starts_with("# tracer: function\n#\n# entries-in-buffer/entries-written: 15/15   #P:1\n"));
        assert!(header.ends_with(
            "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n#              | |         |   |||||     |         |\n"
        ));
        let mut header = String::new();
        write_header(&mut header, "function", stats, 1, ContextOptions { irq_info: false, ..ContextOptions::default() }).unwrap();
        assert!(!header.contains("irqs-off"), "{header}");
        assert!(header.ends_with(
            "#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n#              | |         |         |         |\n"
        ));
        let mut header = String::new();
        write_header(&mut header, "function", stats, 1, ContextOptions { context_info: false, ..ContextOptions::default() })
            .unwrap();
        assert_eq!(header, "# tracer: function\n#\n");
    }

    #[test]
    fn latency_format_lines_and_header_match_linux() {
        let names = test_names;
        let comms = |pid: i32| (pid == 7).then(|| String::from("kworker/0:1"));
        let common = Common { kind: TRACE_FN, flags: flags::IRQS_OFF | flags::HARDIRQ, preempt_count: 1, pid: 7 };
        let event = FunctionEvent { common, ip: 0x1000, parent_ip: 0x201c };
        let latency = FunctionOptions {
            context: ContextOptions { latency: Some(LatencyStart { time: 1_000_000_000, cpu: 1 }), ..ContextOptions::default() },
            ..FunctionOptions::default()
        };
        let line = |when: When, options: FunctionOptions| {
            let mut line = String::new();
            write_function(&mut line, when, &event, &names, &comms, options).unwrap();
            line
        };
        // 12.4995 us after the start, the next line 10.501 us later: `+`.
        let when = When { cpu: 1, time: 1_000_012_499, next: 1_000_023_000, index: 0 };
        assert_eq!(line(when, latency), "kworker/-7         1d.h1.   12us+: kernel::workload::fib <-kernel::workload::run\n");
        // The last line (no next) has no mark; 100.5 us is `!`.
        assert_eq!(
            line(When::at(0, 1_000_000_000), latency),
            "kworker/-7         0d.h1.    0us : kernel::workload::fib <-kernel::workload::run\n"
        );
        assert!(line(When { next: 1_000_100_501, ..When::at(0, 1_000_000_000) }, latency).contains(" 0us!: "));
        // A clock that is no time: counts, no mark; no context-info: nothing.
        let raw = ContextOptions { raw_time: true, ..latency.context };
        assert!(line(when, FunctionOptions { context: raw, ..latency }).starts_with("kworker/-7         1d.h1. 12499: "));
        let bare = ContextOptions { context_info: false, ..latency.context };
        assert_eq!(line(when, FunctionOptions { context: bare, ..latency }), "kernel::workload::fib <-kernel::workload::run\n");

        let mut header = String::new();
        let stats = Stats { entries: 6, written: 9, overrun: 3, read: 0, dropped: 0 };
        write_header(&mut header, "function", stats, 2, latency.context).unwrap();
        let lines: alloc::vec::Vec<&str> = header.lines().collect();
        assert_eq!(lines[..3], ["# tracer: function", "#", &alloc::format!("# function latency trace v1.1.5 on {RELEASE}")]);
        assert_eq!(lines[3], alloc::format!("# {}", "-".repeat(68)));
        assert_eq!(lines[4], "# latency: 0 us, #6/9, CPU#1 | (M:PREEMPT VP:0, KP:0, SP:0 HP:0 #P:2)");
        assert_eq!(lines[6], "#    | task: -0 (uid:0 nice:0 policy:0 rt_prio:0)");
        assert_eq!(lines[8..10], ["#", "#                    _------=> CPU#            "]);
        assert_eq!(lines[17], "#     \\   /        ||||||  \\    |    /       ");
        assert_eq!(lines.len(), 18);
        // Over an empty buffer, the tracer's name alone.
        let mut header = String::new();
        write_header(&mut header, "function", Stats::default(), 2, latency.context).unwrap();
        assert_eq!(header, "# tracer: function\n#\n");

        // verbose: the long form, in milliseconds; the banner without the
        // legend.
        let verbose = FunctionOptions { context: ContextOptions { verbose: true, ..latency.context }, ..latency };
        assert_eq!(
            line(When { index: 26, ..when }, verbose),
            "     kworker/0:1       7   1 9 00000001 0000001a [000f424c] 0.012ms (+0.011ms): kernel::workload::fib <-kernel::workload::run\n"
        );
        let raw = FunctionOptions { context: ContextOptions { raw_time: true, ..verbose.context }, ..verbose };
        assert!(line(when, raw).contains(" [000000003b9afad3] 12499 (+10501): "), "{}", line(when, raw));
        let mut header = String::new();
        write_header(&mut header, "function", stats, 2, verbose.context).unwrap();
        assert_eq!(header.lines().count(), 9, "{header}");
        let mut header = String::new();
        write_header(&mut header, "function", stats, 2, ContextOptions { verbose: true, ..ContextOptions::default() }).unwrap();
        assert_eq!(header, "# tracer: function\n#\n", "verbose without latency-format: no column header");
    }

    #[test]
    fn record_tgid_adds_linux_tgid_column() {
        let names = test_names;
        let comms = |_: i32| None;
        let tgids: Tgids = |pid| (pid == 7).then_some(7);
        let tgid = ContextOptions { tgids: Some(tgids), ..ContextOptions::default() };
        let event = FunctionEvent {
            common: Common { kind: TRACE_FN, flags: 0, preempt_count: 0, pid: 7 },
            ip: 0x1000,
            parent_ip: 0x201c,
        };
        let line = |event: &FunctionEvent, context| {
            let mut line = String::new();
            let options = FunctionOptions { context, ..FunctionOptions::default() };
            write_function(&mut line, When::at(0, 12_345_678_901), event, &names, &comms, options).unwrap();
            line
        };
        assert_eq!(
            line(&event, tgid),
            "           <...>-7       (      7) [000] .....    12.345679: kernel::workload::fib <-kernel::workload::run\n"
        );
        let idle = FunctionEvent { common: Common { pid: 0, ..event.common }, ..event };
        assert!(line(&idle, tgid).starts_with("          <idle>-0       (-------) [000] ....."), "{}", line(&idle, tgid));
        let stats = Stats { entries: 1, written: 1, overrun: 0, read: 0, dropped: 0 };
        let header = |context| {
            let mut header = String::new();
            write_header(&mut header, "function", stats, 1, context).unwrap();
            header
        };
        assert!(
            header(tgid).ends_with(concat!(
                "#                                          _-----=> irqs-off/BH-disabled\n",
                "#                                         / _----=> need-resched\n",
                "#                                        | / _---=> hardirq/softirq\n",
                "#                                        || / _--=> preempt-depth\n",
                "#                                        ||| / _-=> migrate-disable\n",
                "#                                        |||| /     delay\n",
                "#           TASK-PID       TGID    CPU#  |||||  TIMESTAMP  FUNCTION\n",
                "#              | |           |       |   |||||     |         |\n",
            )),
            "{}",
            header(tgid)
        );
        assert!(
            header(ContextOptions { irq_info: false, ..tgid }).ends_with(concat!(
                "#           TASK-PID       TGID    CPU#     TIMESTAMP  FUNCTION\n",
                "#              | |           |       |         |         |\n",
            )),
            "{}",
            header(ContextOptions { irq_info: false, ..tgid })
        );
    }
}

#[cfg(test)]
mod graph_tests {
    use super::*;
    use crate::events::record::{GraphEntryEvent, TRACE_GRAPH_ENT, TRACE_GRAPH_RET};
    use alloc::string::String;
    use alloc::vec;
    use alloc::vec::Vec;

    fn entry(depth: i32) -> Event {
        let common = Common { kind: TRACE_GRAPH_ENT, ..Common::default() };
        Event::GraphEntry(GraphEntryEvent { common, func: 0x1000, depth })
    }

    fn exit(depth: i32, calltime: u64, rettime: u64, retval: u64) -> Event {
        let common = Common { kind: TRACE_GRAPH_RET, ..Common::default() };
        Event::GraphExit(GraphExitEvent { common, func: 0x1000, retval, depth, overrun: 0, calltime, rettime })
    }

    #[test]
    fn nested_and_leaf_calls_as_linux_prints_them() {
        let names = super::tests::test_names;
        let events: Vec<GraphLine> = vec![
            (0, 0, entry(0), &[]),
            (1, 0, entry(1), &[]),
            (2, 0, exit(1, 1_000, 1_812, 1), &[]),
            (3, 0, exit(0, 0, 2_431, 5), &[]),
        ];
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |_: i32| None;
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        assert_eq!(
            text,
            " 0)               |  kernel::workload::fib() {\n\
             \x20\x200)   0.812 us    |    kernel::workload::fib();\n\
             \x200)   2.431 us    |  }\n"
                .replace("\x20\x200)", " 0)")
        );
        let print = |options: GraphOptions| {
            let mut text = String::new();
            write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, options, &other).unwrap();
            text
        };
        let with_retval = print(GraphOptions { retval: true, ..GraphOptions::default() });
        assert!(with_retval.contains("kernel::workload::fib(); /* ret=0x1 */\n"), "{with_retval}");
        assert!(with_retval.ends_with("|  } /* kernel::workload::fib ret=0x5 */\n"), "{with_retval}");
        // funcgraph-tail: every closing brace names its function.
        let with_tail = print(GraphOptions { tail: true, ..GraphOptions::default() });
        assert!(with_tail.ends_with(" 0)   2.431 us    |  } /* kernel::workload::fib */\n"), "{with_tail}");
        assert!(with_tail.contains("|    kernel::workload::fib();\n"), "a leaf has no brace: {with_tail}");
    }

    #[test]
    fn a_return_without_its_opening_line_names_its_function() {
        let names = super::tests::test_names;
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |_: i32| None;
        // CPU 1's call at depth 0 began before the buffer's first event;
        // CPU 0's call is opened, then closed after CPU 1's return.
        let events: Vec<GraphLine> = vec![
            (0, 0, entry(0), &[]),
            (1, 0, entry(1), &[]),
            (2, 0, exit(1, 1_000, 1_812, 0), &[]),
            (3, 1, exit(0, 0, 900, 0), &[]),
            (4, 0, exit(0, 0, 2_431, 0), &[]),
        ];
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], " 1)   0.900 us    |  } /* kernel::workload::fib */", "{text}");
        assert_eq!(lines[3], " 0)   2.431 us    |  }", "{text}");
    }

    #[test]
    fn graph_options_shape_the_columns_as_linux_does() {
        let names = super::tests::test_names;
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |pid: i32| (pid == 5).then(|| String::from("fib-worker"));
        let of_pid_5 = |record: Event| match record {
            Event::GraphEntry(mut e) => {
                e.common.pid = 5;
                Event::GraphEntry(e)
            }
            Event::GraphExit(mut e) => {
                e.common.pid = 5;
                Event::GraphExit(e)
            }
            other => other,
        };
        let errno = (-22i64) as u64;
        let events: Vec<GraphLine> = vec![
            (0, 0, of_pid_5(entry(0)), &[]),
            (1, 0, of_pid_5(exit(0, 0, 812, errno)), &[]),
            (2_500_000_000, 0, of_pid_5(entry(0)), &[]),
        ];
        let print = |options: GraphOptions| {
            let mut text = String::new();
            write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, options, &other).unwrap();
            let mut header = String::new();
            write_graph_header(&mut header, options, Stats::default(), 1, 0).unwrap();
            (String::from(header.lines().nth(2).unwrap()), String::from(text.lines().next().unwrap()))
        };
        let plain = GraphOptions::default();
        assert_eq!(
            print(GraphOptions { retval: true, ..plain }).1,
            " 0)   0.812 us    |  kernel::workload::fib(); /* ret=-22 */",
            "an error code in decimal"
        );
        assert!(print(GraphOptions { retval: true, retval_hex: true, ..plain }).1.ends_with("/* ret=0xffffffffffffffea */"));
        let int_errno = GraphOptions { retval: true, ..plain };
        let mut text = String::new();
        let int_events: Vec<GraphLine> = vec![(0, 0, entry(0), &[]), (1, 0, exit(0, 0, 812, 0xffff_ffea), &[])];
        write_graph(&mut GraphState::default(), &mut text, &int_events, &names, &comms, int_errno, &other).unwrap();
        assert!(text.ends_with("/* ret=-22 */\n"), "an int's error code too: {text}");
        assert_eq!(
            print(GraphOptions { duration: false, ..plain }),
            ("# CPU               FUNCTION CALLS".into(), " 0) kernel::workload::fib();".into())
        );
        assert_eq!(
            print(GraphOptions { cpu: false, ..plain }),
            ("#  DURATION                  FUNCTION CALLS".into(), "  0.812 us    |  kernel::workload::fib();".into())
        );
        let (header, line) = print(GraphOptions { proc: true, ..plain });
        assert_eq!(header, "# CPU  TASK/PID         DURATION                  FUNCTION CALLS");
        assert_eq!(line, " 0)   fib-wor-5    |   0.812 us    |  kernel::workload::fib();", "the name cut to 7, centred in 14");
        let (header, line) = print(GraphOptions { abstime: true, ..plain });
        assert_eq!(header, "#     TIME        CPU  DURATION                  FUNCTION CALLS");
        assert_eq!(line, "    0.000000 |   0)   0.812 us    |  kernel::workload::fib();");
        // context-info off: no columns before the function, no column header.
        let bare = GraphOptions { context_info: false, proc: true, abstime: true, ..plain };
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, bare, &other).unwrap();
        assert_eq!(text.lines().next(), Some("kernel::workload::fib();"));
        let mut header = String::new();
        write_graph_header(&mut header, bare, Stats::default(), 1, 0).unwrap();
        assert_eq!(header, "# tracer: function_graph\n#\n");

        // latency-format: the flags after the task, under their legend.
        let latency = GraphOptions { latency: true, proc: true, ..plain };
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, latency, &other).unwrap();
        assert_eq!(text.lines().next().unwrap(), " 0)   fib-wor-5    |  ..... |   0.812 us    |  kernel::workload::fib();");
        let mut header = String::new();
        let stats = Stats { entries: 3, written: 3, ..Stats::default() };
        write_graph_header(&mut header, latency, stats, 2, 0).unwrap();
        let lines: Vec<&str> = header.lines().collect();
        assert_eq!(lines[2], alloc::format!("# function_graph latency trace v1.1.5 on {RELEASE}"));
        assert_eq!(lines[4], "# latency: 0 us, #3/3, CPU#0 | (M:PREEMPT VP:0, KP:0, SP:0 HP:0 #P:2)");
        assert_eq!(lines[9], alloc::format!("#{}  _-----=> irqs-off        ", " ".repeat(21)));
        assert_eq!(lines[14], "# CPU  TASK/PID       ||||     DURATION                  FUNCTION CALLS");
        assert_eq!(lines[15], "# |     |    |        ||||      |   |                     |   |   |   |");
        let mut header = String::new();
        write_graph_header(&mut header, latency, Stats::default(), 2, 0).unwrap();
        assert_eq!(header, "# tracer: function_graph\n#\n", "nothing more over an empty buffer");
    }

    #[test]
    fn a_leaf_is_found_across_other_cpus_events_and_task_changes_are_marked() {
        let names = super::tests::test_names;
        let pid = |record: Event, pid: i32| match record {
            Event::GraphEntry(mut e) => {
                e.common.pid = pid;
                Event::GraphEntry(e)
            }
            Event::GraphExit(mut e) => {
                e.common.pid = pid;
                Event::GraphExit(e)
            }
            other => other,
        };
        // CPU 0 runs pid 5 then pid 6; CPU 1's event sits between pid 5's
        // entry and return.
        let events: Vec<GraphLine> = vec![
            (0, 0, pid(entry(0), 5), &[]),
            (1, 1, pid(entry(0), 7), &[]),
            (2, 0, pid(exit(0, 0, 900, 0), 5), &[]),
            (3, 0, pid(entry(0), 6), &[]),
        ];
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |pid: i32| (pid == 5).then(|| String::from("fib/0"));
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], " 0)   0.900 us    |  kernel::workload::fib();", "{text}");
        assert_eq!(lines[1], " 1)               |  kernel::workload::fib() {");
        assert_eq!(lines[2], " ------------------------------------------");
        assert_eq!(lines[3], " 0)    fib/0-5     =>    <...>-6    ");
        // Pid 5 enters and sleeps, pid 6 enters and sleeps, pid 5 returns:
        // pid 6's call is no leaf with pid 5's return.
        let events: Vec<GraphLine> =
            vec![(0, 0, pid(entry(0), 5), &[]), (1, 0, pid(entry(0), 6), &[]), (2, 0, pid(exit(0, 0, 900, 0), 5), &[])];
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let calls: Vec<&str> =
            text.lines().filter(|line| !line.is_empty() && !line.contains("---") && !line.contains("=>")).collect();
        assert_eq!(
            calls,
            [
                " 0)               |  kernel::workload::fib() {",
                " 0)               |  kernel::workload::fib() {",
                " 0)   0.900 us    |  }"
            ],
            "{text}"
        );
    }

    #[test]
    fn comments_are_indented_inside_the_call_they_happen_in() {
        let names = super::tests::test_names;
        let events: Vec<GraphLine> = vec![
            (0, 0, entry(0), &[]),
            (1, 0, Event::Other(Common::default()), &[]),
            (2, 0, entry(1), &[]),
            (3, 0, entry(2), &[]),
            (4, 0, exit(2, 3, 4, 0), &[]),
            (5, 0, Event::Other(Common::default()), &[]),
            (6, 0, exit(1, 2, 6, 0), &[]),
            (7, 0, Event::Other(Common::default()), &[]),
            (8, 0, exit(0, 0, 8, 0), &[]),
            (9, 0, Event::Other(Common::default()), &[]),
        ];
        let other = |_: &[u8], out: &mut dyn Write| out.write_str("event");
        let comms = |_: i32| None;
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let comments: Vec<&str> = text.lines().filter(|line| line.contains("/* event */")).collect();
        assert_eq!(
            comments,
            [
                " 0)               |  /* event */",
                " 0)               |      /* event */",
                " 0)               |  /* event */",
                " 0)               |  /* event */",
            ],
            "as Linux indents them: one level inside the depth-1 call after its leaf child; \
             none inside the top-level call or after it:\n{text}"
        );
    }

    #[test]
    fn durations_use_linux_widths_and_marks() {
        let mut text = String::new();
        write_duration(&mut text, 812, true).unwrap();
        assert_eq!(text, "  0.812 us    |  ");
        text.clear();
        write_duration(&mut text, 12_345, true).unwrap();
        assert_eq!(text, "+ 12.345 us   |  ");
        text.clear();
        write_duration(&mut text, 123_456_789, true).unwrap();
        assert_eq!(text, "@ 123456.7 us |  ");
        text.clear();
        write_duration(&mut text, 1_234_567_890, true).unwrap();
        assert_eq!(text, "$ 1234567 us  |  ", "seven digits: no decimals");
        text.clear();
        write_duration(&mut text, 123_456_789, false).unwrap();
        assert_eq!(text, "  123456.7 us |  ", "funcgraph-overhead off: no mark, the same width");
    }
}
