//! The trace options every array has (`trace_options`, `options/NAME`):
//! how `trace` prints (`print-parent`, `sym-offset`, `raw`, ...) and what
//! the tracers follow (`function-fork`, `func_stack_trace`, ...), one bit
//! each in the array's option word.

use crate::tracers::Tracer;

/// A trace option (`options/NAME`, `trace_options`): how `trace` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOption {
    /// Addresses as `function+0xOFF/0xSIZE` (function tracer).
    SymOffset,
    /// Each function's address after its name (function tracer).
    SymAddr,
    /// The task, CPU, flags and time at the start of each line, and the
    /// column header (on by default).
    ContextInfo,
    /// The latency flags column (`d.h..`; on by default).
    IrqInfo,
    /// `trace_marker` takes writes (on by default).
    Markers,
    /// A full buffer overwrites its oldest events (on by default); off, it
    /// drops new ones until a reader makes room.
    Overwrite,
    /// Every closing brace names its function (function_graph).
    FuncgraphTail,
    /// ` <-caller` after each function (function tracer; on by default).
    PrintParent,
    /// Each call's return value (function_graph).
    FuncgraphRetval,
    /// The task on every line (function_graph).
    FuncgraphProc,
    /// The timestamp on every line (function_graph).
    FuncgraphAbstime,
    /// The duration column (function_graph; on by default).
    FuncgraphDuration,
    /// A task a pid-filtered task creates is traced too.
    FunctionFork,
    /// A task an event-pid-filtered task creates has its events recorded
    /// too (`set_event_pid`).
    EventFork,
    /// A stack trace after every function the function tracer records.
    FuncStackTrace,
    /// A call of the same function from the same place as the CPU's last
    /// is counted, not recorded; the count goes in as one `func_repeats`
    /// record before the next other call (function tracer).
    FuncNoRepeats,
    /// A stack trace after every event recorded (the scheduler's, probe
    /// events).
    StackTrace,
    /// The CPU column (function_graph; on by default).
    FuncgraphCpu,
    /// Return values in hex, error codes too (function_graph; off: an
    /// error code prints as a negative decimal).
    FuncgraphRetvalHex,
    /// Each call's return address, ` /* <-caller+0x1c/0x80 */` after its
    /// entry (function_graph).
    FuncgraphRetaddr,
    /// Functions run by interrupt handlers are traced too (function_graph;
    /// on by default). Off, calls in a hardware interrupt handler are left
    /// out (Linux's `in_hardirq()` test), unless `set_graph_function`
    /// names them or a function they run inside; the softirq-like bottom
    /// half and exception handlers are still traced.
    FuncgraphIrqs,
    /// A long call's duration gets its overhead mark (`+`, `!`, `#`...;
    /// function_graph; on by default).
    FuncgraphOverhead,
    /// After each closing brace, ` (Overruns: N)`: the calls the task's
    /// shadow stack had no room for (function_graph).
    FuncgraphOverrun,
    /// A call's duration counts the time its task spent switched out
    /// (function_graph, and the function profiler through the top level's;
    /// on by default). Off, it is taken out, as Linux's `sleep-time` does.
    SleepTime,
    /// The function profiler's time for a function counts the profiled
    /// calls it makes (on by default); off, not, as Linux's `graph-time`.
    /// Only the top level's counts: the profiler is the top level's.
    GraphTime,
    /// Linux's latency format: a banner over the trace and, on each line,
    /// the task cut to 8 characters, the CPU, the flags and the time since
    /// the buffer was emptied, marked when the next line is far
    /// (`trace`, `trace_pipe`).
    LatencyFormat,
    /// The latency format's long form: the task's whole name, the raw
    /// flags (in decimal), preempt count and index (in hex), times in
    /// milliseconds; and no column header over the trace.
    Verbose,
    /// Task names are saved for traces to show (`saved_cmdlines`): a
    /// task's when it starts, and again at a switch once newer names
    /// pushed it out (on by default). As in Linux, where the option turns
    /// the kernel's one name cache on or off, names are saved while any
    /// trace array has it on; with it off everywhere, a task that started
    /// meanwhile prints as `<...>-PID` (until it switches in with the
    /// option on again).
    RecordCmd,
    /// Each task's thread-group id is recorded (`saved_tgids`): every
    /// task's when the option goes on, then each task's that switches in;
    /// and printed in a TGID column.
    RecordTgid,
    /// A write to `free_buffer` also stops recording (`tracing_on` 0), as
    /// Linux's close of that file does with the option on.
    DisableOnFree,
    /// In a `trace` whose buffer overwrote events, each CPU's first event
    /// comes after `##### CPU N buffer started ####` (on by default).
    Annotate,
    /// `trace` prints numbers: `PID CPU TIMESTAMP` and each event's raw
    /// form (see `print_modes`).
    Raw,
    /// `trace` prints hex words (before `raw`; see `print_modes`).
    Hex,
    /// `trace` prints each event field by field, `name=value`, as its
    /// `format` describes it (see `print_modes`).
    Fields,
    /// `trace_printk!` writes into the buffer (on by default; the top
    /// level's, which is where it writes).
    TracePrintk,
    /// With `trace_printk` on, a print event's line (`trace_printk!`,
    /// `trace_marker`) is its text alone: no task, CPU, time nor writer.
    PrintkMsgOnly,
}

impl TraceOption {
    /// Every option, in `trace_options` order: Linux's generic ones in its
    /// order, then the function tracer's, then function_graph's.
    pub const ALL: [TraceOption; 36] = [
        TraceOption::PrintParent,
        TraceOption::SymOffset,
        TraceOption::SymAddr,
        TraceOption::Verbose,
        TraceOption::Raw,
        TraceOption::Hex,
        TraceOption::Fields,
        TraceOption::TracePrintk,
        TraceOption::Annotate,
        TraceOption::PrintkMsgOnly,
        TraceOption::ContextInfo,
        TraceOption::LatencyFormat,
        TraceOption::RecordCmd,
        TraceOption::RecordTgid,
        TraceOption::Overwrite,
        TraceOption::DisableOnFree,
        TraceOption::IrqInfo,
        TraceOption::Markers,
        TraceOption::EventFork,
        TraceOption::FunctionFork,
        TraceOption::StackTrace,
        TraceOption::FuncStackTrace,
        TraceOption::FuncNoRepeats,
        TraceOption::FuncgraphOverrun,
        TraceOption::FuncgraphCpu,
        TraceOption::FuncgraphOverhead,
        TraceOption::FuncgraphProc,
        TraceOption::FuncgraphDuration,
        TraceOption::FuncgraphAbstime,
        TraceOption::FuncgraphIrqs,
        TraceOption::FuncgraphTail,
        TraceOption::FuncgraphRetval,
        TraceOption::FuncgraphRetvalHex,
        TraceOption::FuncgraphRetaddr,
        TraceOption::SleepTime,
        TraceOption::GraphTime,
    ];
    /// The options a new trace array starts with.
    pub(super) const DEFAULTS: u64 = TraceOption::PrintParent.bit()
        | TraceOption::TracePrintk.bit()
        | TraceOption::Annotate.bit()
        | TraceOption::ContextInfo.bit()
        | TraceOption::RecordCmd.bit()
        | TraceOption::IrqInfo.bit()
        | TraceOption::Markers.bit()
        | TraceOption::Overwrite.bit()
        | TraceOption::FuncgraphDuration.bit()
        | TraceOption::FuncgraphCpu.bit()
        | TraceOption::FuncgraphIrqs.bit()
        | TraceOption::FuncgraphOverhead.bit()
        | TraceOption::SleepTime.bit()
        | TraceOption::GraphTime.bit();

    /// Its file name under `options/`.
    pub fn name(self) -> &'static str {
        match self {
            TraceOption::SymOffset => "sym-offset",
            TraceOption::SymAddr => "sym-addr",
            TraceOption::ContextInfo => "context-info",
            TraceOption::LatencyFormat => "latency-format",
            TraceOption::Verbose => "verbose",
            TraceOption::Raw => "raw",
            TraceOption::Hex => "hex",
            TraceOption::Fields => "fields",
            TraceOption::RecordCmd => "record-cmd",
            TraceOption::RecordTgid => "record-tgid",
            TraceOption::DisableOnFree => "disable_on_free",
            TraceOption::Annotate => "annotate",
            TraceOption::TracePrintk => "trace_printk",
            TraceOption::PrintkMsgOnly => "printk-msg-only",
            TraceOption::IrqInfo => "irq-info",
            TraceOption::Markers => "markers",
            TraceOption::Overwrite => "overwrite",
            TraceOption::FuncgraphTail => "funcgraph-tail",
            TraceOption::PrintParent => "print-parent",
            TraceOption::FuncgraphRetval => "funcgraph-retval",
            TraceOption::FuncgraphProc => "funcgraph-proc",
            TraceOption::FuncgraphAbstime => "funcgraph-abstime",
            TraceOption::FuncgraphDuration => "funcgraph-duration",
            TraceOption::FunctionFork => "function-fork",
            TraceOption::EventFork => "event-fork",
            TraceOption::FuncStackTrace => "func_stack_trace",
            TraceOption::FuncNoRepeats => "func-no-repeats",
            TraceOption::StackTrace => "stacktrace",
            TraceOption::FuncgraphCpu => "funcgraph-cpu",
            TraceOption::FuncgraphRetvalHex => "funcgraph-retval-hex",
            TraceOption::FuncgraphRetaddr => "funcgraph-retaddr",
            TraceOption::FuncgraphIrqs => "funcgraph-irqs",
            TraceOption::FuncgraphOverhead => "funcgraph-overhead",
            TraceOption::FuncgraphOverrun => "funcgraph-overrun",
            TraceOption::SleepTime => "sleep-time",
            TraceOption::GraphTime => "graph-time",
        }
    }

    /// The tracer whose option it is (Linux's tracer flags: `trace_options`
    /// lists them, and takes them, only while that tracer is current), or
    /// `None` for a generic one.
    pub fn tracer(self) -> Option<Tracer> {
        match self {
            TraceOption::FuncStackTrace | TraceOption::FuncNoRepeats => Some(Tracer::Function),
            TraceOption::FuncgraphTail
            | TraceOption::FuncgraphRetval
            | TraceOption::FuncgraphProc
            | TraceOption::FuncgraphAbstime
            | TraceOption::FuncgraphDuration
            | TraceOption::FuncgraphCpu
            | TraceOption::FuncgraphRetvalHex
            | TraceOption::FuncgraphRetaddr
            | TraceOption::FuncgraphIrqs
            | TraceOption::FuncgraphOverhead
            | TraceOption::FuncgraphOverrun
            | TraceOption::SleepTime
            | TraceOption::GraphTime => Some(Tracer::FunctionGraph),
            _ => None,
        }
    }

    /// Whether only the top level has the option's file (Linux's
    /// `TOP_LEVEL_TRACE_FLAGS`): `trace_printk!` writes there alone. An
    /// instance's `trace_options` still lists it, and takes it.
    pub fn top_level_only(self) -> bool {
        matches!(self, TraceOption::TracePrintk | TraceOption::PrintkMsgOnly)
    }

    /// The option called `name`.
    pub fn from_name(name: &str) -> Option<TraceOption> {
        TraceOption::ALL.into_iter().find(|option| option.name() == name)
    }

    pub(super) const fn bit(self) -> u64 {
        1 << self as u64
    }
}
