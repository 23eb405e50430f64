//! `cat trace` output in Linux's format: the header, the context columns
//! (task, CPU, flags, timestamp, or the `latency-format` ones), and each
//! event's text. The function_graph tracer's lines are [`graph`]'s, the
//! `raw`/`hex`/`fields` modes [`print_modes`]'; the kernel's readers are
//! `read` (`cat trace`) and `pipe` (`cat trace_pipe`).

pub mod graph;
#[cfg(target_os = "none")]
pub mod pipe;
pub mod print_modes;
#[cfg(target_os = "none")]
pub mod read;

use core::fmt::{self, Write};
use graph::duration_mark;

use alloc::string::String;

use crate::events::record::{comm_str, flags, Common, FuncRepeatsEvent, FunctionEvent, SchedSwitchEvent, SchedWakeupEvent};
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

#[cfg(test)]
pub(crate) mod tests;
