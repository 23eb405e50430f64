//! Tracers (`current_tracer`) and reading the trace (`cat trace`).
//!
//! `nop` traces nothing; `function` records one event per traced call (the
//! function and its caller) through an ops with the recursion guard;
//! `function_graph` records each call's entry and return through the return
//! hook. Each trace array (the top level, every instance: see
//! `crate::array::trace_array`) has its own of both, writing to its own buffer. Both
//! follow the array's `set_ftrace_filter` / `set_ftrace_notrace`; the graph
//! tracer also honours `set_graph_function` (only what runs below these),
//! `set_graph_notrace` (nothing below these) and `max_graph_depth`. Changing
//! the tracer empties the buffer, as Linux does.

pub mod function_commands;
pub mod stack;

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use arch::context::{self, Context};
use arch::ftrace_abi::FtraceRegs;
use arch::irq::IrqGuard;

use crate::array::trace_array::{TraceArray, TraceOption};
use crate::events::record::{
    flags, Common, Event, FixedEvent, FuncRepeatsEvent, FunctionEvent, GraphEntryEvent, GraphExitEvent, PrintWriter, TRACE_FN,
    TRACE_GRAPH_ENT, TRACE_GRAPH_RET,
};
use crate::output;
use crate::output::print_modes::{self, EventFields, PrintMode};
use ftrace::deferred::Published;
use ftrace::graph::fgraph::{EntryData, FgraphEntry, FgraphOps, FgraphReturn, GraphCallbacks};
use ftrace::ops::{Callback, FtraceOps};
use ftrace::symbols::kernel as symbols;
use ftrace::task::{self, GraphMarks, NOT_INSIDE};
use ring_buffer::trace_buffer;

/// A tracer `current_tracer` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracer {
    Nop,
    Function,
    FunctionGraph,
}

impl Tracer {
    /// Every tracer, in `available_tracers` order.
    pub const ALL: &'static [Tracer] = &[Tracer::FunctionGraph, Tracer::Function, Tracer::Nop];

    /// The tracer's name in tracefs.
    pub fn name(self) -> &'static str {
        match self {
            Tracer::Nop => "nop",
            Tracer::Function => "function",
            Tracer::FunctionGraph => "function_graph",
        }
    }

    /// The tracer called `name`.
    pub fn from_name(name: &str) -> Option<Tracer> {
        Self::ALL.iter().copied().find(|tracer| tracer.name() == name)
    }
}

/// The graph tracer's per-call data: two words, its mark (below) and the
/// call time, which is the timestamp of the call's entry event, so the
/// duration an exit event carries is exactly the distance between the two
/// events' timestamps; and with `sleep-time` off a third, the task's sleep
/// time at the entry ([`TaskTrace::slept_ns`](task::TaskTrace::slept_ns)).
pub(crate) const fn graph_ops() -> FgraphOps {
    FgraphOps::of::<GraphTrace>().with_data_words(3)
}

/// The function-graph tracer's callbacks, run inline by its graph ops.
struct GraphTrace;

impl GraphCallbacks for GraphTrace {
    #[inline(always)]
    fn entry(gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, fregs: &mut FtraceRegs) -> bool {
        graph_trace_entry(gops, call, data, fregs)
    }

    #[inline(always)]
    fn ret(gops: &FgraphOps, call: &FgraphReturn, data: &[u64], fregs: &mut FtraceRegs) {
        graph_trace_return(gops, call, data, fregs)
    }

    #[inline(always)]
    fn hooked(gops: &FgraphOps, call: &FgraphEntry, data: &mut [u64]) {
        graph_trace_hooked(gops, call, data)
    }
}

/// The trace array an ops of a tracer belongs to.
///
/// # Safety
/// `ops` must be the `function_ops` of a trace array.
#[inline(always)]
unsafe fn array_of_function_ops(ops: &FtraceOps) -> &TraceArray {
    // SAFETY: the caller's guarantee: stepping back from the field gives
    // the array, alive while its ops is called (see `crate::array::trace_array`).
    unsafe { &*ftrace::container_of!(ops, TraceArray, function_ops) }
}

/// The trace array a graph ops belongs to.
#[inline(always)]
fn array_of_graph_ops(gops: &FgraphOps) -> &TraceArray {
    // SAFETY: the tracers' graph callbacks are only installed in the
    // `graph_ops` of a trace array (`graph_ops` above, used by
    // `TraceArray::new` alone), alive while its calls are in flight.
    unsafe { &*ftrace::container_of!(gops, TraceArray, graph_ops) }
}

/// The common header for an event recorded now: the context flags, the
/// preempt count and the running task's pid.
#[inline]
pub fn event_common(kind: u16) -> Common {
    let cpu = arch::percpu::event_state();
    let mut bits = match cpu.context {
        Context::Normal => 0,
        Context::Softirq => flags::SOFTIRQ,
        Context::Irq => flags::HARDIRQ,
        // Linux's `nmi_enter` counts a hard interrupt too: an NMI-like
        // record (a breakpoint's kprobe event) shows `Z`, as there.
        Context::Nmi => flags::NMI | flags::HARDIRQ,
    };
    if !arch::cpu::interrupts_enabled() {
        bits |= flags::IRQS_OFF;
    }
    if cpu.need_resched {
        bits |= flags::NEED_RESCHED;
    }
    // SAFETY: read from this CPU's per-CPU data just now.
    let pid = unsafe { task::from_raw(cpu.task_trace) }.map_or(0, |task| task.pid());
    Common { kind, flags: bits, preempt_count: cpu.preempt_count.min(255) as u8, pid }
}

/// The function tracer: a trace array's `function_ops` runs it inline.
pub(crate) struct FunctionTrace;

impl Callback for FunctionTrace {
    #[inline(always)]
    fn call(ip: usize, parent_ip: usize, ops: &FtraceOps, _fregs: &mut FtraceRegs) {
        // SAFETY: this callback is only installed in a trace array's
        // `function_ops` (`TraceArray::new`).
        let array = unsafe { array_of_function_ops(ops) };
        record_function(array, ip, parent_ip);
    }
}

/// The function tracer while a pid filter is set or a stack trace asked for
/// (`TraceArray::checking_ops`): leaves out the tasks the filter marks, and
/// follows each function with its stack trace under
/// `options/func_stack_trace`.
pub(crate) extern "C" fn function_trace_call_checking(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: this callback is only installed in a trace array's `checking_ops`
    // (`TraceArray::new`); stepping back from the field gives the array.
    let array = unsafe { &*ftrace::container_of!(ops, TraceArray, checking_ops) };
    if task::try_current().is_some_and(|state| state.is_ignored(array.slot())) {
        return;
    }
    if array.option(TraceOption::FuncNoRepeats) {
        if !record_function_unless_repeated(array, ip, parent_ip) {
            return;
        }
    } else {
        record_function(array, ip, parent_ip);
    }
    if array.option(TraceOption::FuncStackTrace) {
        crate::tracers::function_commands::record_stack(array, ip, fregs);
    }
}

/// One CPU's last call the function tracer recorded under
/// `options/func-no-repeats`, and how many times it was repeated since
/// (Linux's `trace_func_repeats`). Its CPU counts in it, with interrupts
/// masked; [`forget`](Self::forget) empties it from anywhere before a
/// count starts (the option turned on, the tracer started), which at worst
/// loses one repeat.
pub(crate) struct LastCall {
    ip: AtomicUsize,
    parent_ip: AtomicUsize,
    /// Repeats not recorded yet.
    count: AtomicU32,
    /// When the last of them came, in the buffer's clock.
    last_time: AtomicU64,
}

impl LastCall {
    pub(crate) const fn new() -> LastCall {
        LastCall {
            ip: AtomicUsize::new(0),
            parent_ip: AtomicUsize::new(0),
            count: AtomicU32::new(0),
            last_time: AtomicU64::new(0),
        }
    }

    /// No call to repeat.
    pub(crate) fn forget(&self) {
        self.ip.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }
}

/// The function tracer under `options/func-no-repeats`: a call of the
/// function this CPU last recorded, from the same place, is counted (and
/// its time kept), not recorded; another call first records the count so
/// far as a `func_repeats` event, then itself. Answers whether it recorded
/// the call. (A count reaching `u16::MAX` records the call, as Linux's.)
fn record_function_unless_repeated(array: &TraceArray, ip: usize, parent_ip: usize) -> bool {
    // The call's context (interrupts on or off) is taken before they are
    // masked, so that the CPU's state stays its own until the records are
    // written.
    let common = event_common(TRACE_FN);
    let _irq = IrqGuard::new();
    let Some(last) = array.last_calls.get(arch::cpu::id()) else { return false };
    // SAFETY: the function tracer's callbacks run from its array's ops.
    let buffer = unsafe { array.buffer_made() };
    if !buffer.is_on() {
        // Nothing is recorded, so nothing repeats what was: the count
        // goes on from the last recorded call once recording does.
        return false;
    }
    let count = last.count.load(Ordering::Relaxed);
    let same = last.ip.load(Ordering::Relaxed) == ip && last.parent_ip.load(Ordering::Relaxed) == parent_ip;
    if same && count < u32::from(u16::MAX) {
        last.count.store(count + 1, Ordering::Relaxed);
        last.last_time.store(buffer.now(), Ordering::Relaxed);
        return false;
    }
    if count > 0 {
        let (repeated, repeated_parent) = (last.ip.load(Ordering::Relaxed), last.parent_ip.load(Ordering::Relaxed));
        let last_time = last.last_time.load(Ordering::Relaxed);
        buffer.write_with(FuncRepeatsEvent::SIZE, |time, out| {
            let event = FuncRepeatsEvent {
                common: Common { kind: crate::events::record::TRACE_FUNC_REPEATS, ..common },
                ip: repeated as u64,
                parent_ip: repeated_parent as u64,
                count: count as u16,
                delta: time.saturating_sub(last_time),
            };
            event.encode_into(out);
        });
        last.count.store(0, Ordering::Relaxed);
    }
    last.ip.store(ip, Ordering::Relaxed);
    last.parent_ip.store(parent_ip, Ordering::Relaxed);
    record_function_as(array, common, ip, parent_ip);
    true
}

#[inline(always)]
fn record_function(array: &TraceArray, ip: usize, parent_ip: usize) {
    record_function_as(array, event_common(TRACE_FN), ip, parent_ip);
}

/// [`record_function`] with the header taken already.
#[inline(always)]
fn record_function_as(array: &TraceArray, common: Common, ip: usize, parent_ip: usize) {
    let event = FunctionEvent { common, ip: ip as u64, parent_ip: parent_ip as u64 };
    // SAFETY: the function tracer's callbacks run from its array's ops.
    unsafe { array.buffer_made() }.write_with(FunctionEvent::SIZE, |_, bytes| event.encode_into(bytes));
}

// ---- function_graph ----

/// What the graph tracer's mark word says about a hooked call.
const MARK_PLAIN: u64 = 0;
const MARK_NOTRACE: u64 = 1;
const MARK_GRAPH_FUNCTION: u64 = 2;
/// With a mark: record the call's entry event once it is hooked
/// ([`graph_trace_hooked`]). The return ignores it.
const RECORD_ENTRY: u64 = 1 << 8;
/// With a mark: record the call's entry event with its return address
/// (`options/funcgraph-retaddr`) once it is hooked.
const RECORD_RETADDR_ENTRY: u64 = 1 << 9;
/// The mark word's bits that say the mark.
const MARK_KIND: u64 = 0xff;
/// Where the mark word keeps the graph ops' generation at the entry.
const GENERATION_SHIFT: u32 = 32;

/// `Some(whether ip is in the list)`, or `None` for an empty list. On the
/// traced path: no lock.
#[inline]
fn in_list(list: &Published<Vec<usize>>, ip: usize) -> Option<bool> {
    list.read(|functions| functions.map(|functions| functions.binary_search(&ip).is_ok()))
}

#[inline(always)]
fn graph_trace_entry(gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    let array = array_of_graph_ops(gops);
    let generation = u64::from(gops.generation()) << GENERATION_SHIFT;
    let Some(words) = data.reserve_with([MARK_PLAIN | RECORD_ENTRY | generation, 0]) else { return false };
    if array.graph.plain.load(Ordering::Relaxed) {
        // Nothing to check: no pid filter, list, depth limit or threshold,
        // and interrupts traced too.
        return true;
    }
    // The call by value: so the usual case above builds nothing in memory.
    match graph_trace_entry_checked(array, *call) {
        Some([mark, time]) => {
            *words = [mark | generation, time];
            if !array.option(TraceOption::SleepTime) {
                // The return takes out what the task sleeps from now on.
                let _ = data.reserve_with([task::current().slept_ns()]);
            }
            true
        }
        None => false,
    }
}

/// Records the entry event of a hooked call whose mark asks for it, and
/// keeps its timestamp (the call time) in the call's data.
#[inline(always)]
fn graph_trace_hooked(gops: &FgraphOps, call: &FgraphEntry, data: &mut [u64]) {
    if let [mark, time, ..] = data {
        if *mark & RECORD_ENTRY != 0 {
            *time = record_graph_entry(array_of_graph_ops(gops), call);
        } else if *mark & RECORD_RETADDR_ENTRY != 0 {
            *time = record_graph_retaddr_entry(array_of_graph_ops(gops), call);
        }
    }
}

/// [`record_graph_entry`] with the call's return address: the address
/// it was called from goes in (a `TRACE_GRAPH_RETADDR_ENT` event), for
/// `options/funcgraph-retaddr`.
#[inline(never)]
fn record_graph_retaddr_entry(array: &TraceArray, call: &FgraphEntry) -> u64 {
    let event = GraphEntryEvent { common: event_common(TRACE_GRAPH_ENT), func: call.func as u64, depth: call.depth as i32 };
    // SAFETY: the graph tracer's callbacks run from its array's graph ops.
    let time = unsafe { array.buffer_made() }
        .write_timed(GraphEntryEvent::RETADDR_SIZE, |_, bytes| event.encode_with_retaddr(call.parent_ip as u64, bytes));
    time.unwrap_or_else(call_time)
}

/// Records a call's entry event; returns its call time (see
/// [`call_time`]).
#[inline(always)]
fn record_graph_entry(array: &TraceArray, call: &FgraphEntry) -> u64 {
    let event = GraphEntryEvent { common: event_common(TRACE_GRAPH_ENT), func: call.func as u64, depth: call.depth as i32 };
    // SAFETY: the graph tracer's callbacks run from its array's graph ops.
    let time = unsafe { array.buffer_made() }.write_timed(GraphEntryEvent::SIZE, |_, bytes| event.encode_into(bytes));
    time.unwrap_or_else(call_time)
}

/// A graph call's entry or return time: nanoseconds of the local clock,
/// whatever the buffer's `trace_clock` (as Linux times graph calls), so a
/// duration is one under `counter` and `uptime` too, and never spans two
/// clocks. (Where an event is recorded, `write_timed` answers it, the
/// event's own timestamp when the buffer's clock is the local one.)
fn call_time() -> u64 {
    ring_buffer::clock::now_ns()
}

/// [`graph_trace_entry`] with the pid filter, `options/funcgraph-irqs`,
/// the graph lists, the depth limit and `tracing_thresh` to honour: the
/// call's data words, `None` to leave it alone.
#[inline(never)]
fn graph_trace_entry_checked(array: &TraceArray, call: FgraphEntry) -> Option<[u64; 2]> {
    let state = task::current();
    if state.is_ignored(array.slot()) {
        return None;
    }
    let context = context::current();
    let marks = state.graph_marks(array.slot(), context);
    // An NMI (here: a breakpoint's or a fault's exception) is a hard
    // interrupt too, as Linux's `in_hardirq()` says inside one.
    let hard = matches!(context, Context::Irq | Context::Nmi);
    if hard && !array.option(TraceOption::FuncgraphIrqs) && !graph_function_in_irq(array, marks, call.func) {
        return None;
    }
    let notrace_depth = inherited_depth(state, array.slot(), context, |marks| &marks.notrace_depth);
    if notrace_depth != NOT_INSIDE && call.depth > notrace_depth {
        return None;
    }
    let max = array.graph.max_depth.load(Ordering::Relaxed);
    if max != 0 && call.depth >= max {
        return None;
    }
    let mut words = [MARK_PLAIN, 0];
    if in_list(&array.graph.notrace, call.func) == Some(true) {
        // Hook it only to learn when it returns; record nothing below it.
        marks.notrace_depth.store(call.depth, Ordering::Relaxed);
        words[0] = MARK_NOTRACE;
        return Some(words);
    }
    if let Some(listed) = in_list(&array.graph.functions, call.func) {
        let inside = inherited_depth(state, array.slot(), context, |marks| &marks.function_depth);
        // A listed function marks its own context even inside an outer
        // context's call: with `funcgraph-irqs` off, an interrupt's calls
        // pass only on their own context's mark.
        let own = marks.function_depth.load(Ordering::Relaxed);
        if inside == NOT_INSIDE || call.depth <= inside || (listed && own == NOT_INSIDE) {
            if !listed {
                return None;
            }
            marks.function_depth.store(call.depth, Ordering::Relaxed);
            words[0] = MARK_GRAPH_FUNCTION;
        }
    }
    if THRESH_NS.load(Ordering::Relaxed) != 0 {
        // tracing_thresh: only the return is recorded, if the call was long.
        words[1] = call_time();
        return Some(words);
    }
    words[0] |= match array.option(TraceOption::FuncgraphRetaddr) {
        true => RECORD_RETADDR_ENTRY,
        false => RECORD_ENTRY,
    };
    Some(words)
}

/// A marker as it holds in `context`: its own, or, where it set none, that
/// of the context it interrupted. An interrupt taken inside a task's
/// `set_graph_function` (or `set_graph_notrace`) call is inside it too, as
/// Linux's per-task bits say; the interrupt's calls are deeper on the same
/// shadow stack, so the depth tests hold as they are. Markers are still
/// set and cleared in the context's own.
fn inherited_depth(state: &task::TaskTrace, slot: usize, context: Context, marker: fn(&GraphMarks) -> &AtomicUsize) -> usize {
    (0..=context as usize)
        .rev()
        .map(|outer| marker(&state.graph[slot][outer]).load(Ordering::Relaxed))
        .find(|&depth| depth != NOT_INSIDE)
        .unwrap_or(NOT_INSIDE)
}

/// Whether an interrupt handler's call is a `set_graph_function` one, or
/// runs inside one entered in this interrupt: Linux traces those with
/// `funcgraph-irqs` off too (its `TRACE_IRQ_BIT`).
#[cold]
fn graph_function_in_irq(array: &TraceArray, marks: &GraphMarks, func: usize) -> bool {
    marks.function_depth.load(Ordering::Relaxed) != NOT_INSIDE || in_list(&array.graph.functions, func) == Some(true)
}

/// `tracing_thresh` in nanoseconds: with function_graph, 0 records every
/// call; otherwise only the returns of calls that took at least that long.
static THRESH_NS: AtomicU64 = AtomicU64::new(0);

/// `echo US > tracing_thresh` (microseconds; 0 turns it off).
pub fn set_tracing_thresh_us(us: u64) {
    THRESH_NS.store(us.saturating_mul(1000), Ordering::Relaxed);
    crate::array::trace_array::refresh_every_graph_plain();
}

/// `tracing_thresh`, in microseconds.
pub fn tracing_thresh_us() -> u64 {
    THRESH_NS.load(Ordering::Relaxed) / 1000
}

/// `tracing_thresh`, in nanoseconds (0: off).
pub(crate) fn tracing_thresh_ns() -> u64 {
    THRESH_NS.load(Ordering::Relaxed)
}

/// Undoes what the entry's mark set; answers whether the call was recorded.
#[inline(always)]
fn graph_trace_unmark(array: &TraceArray, mark: u64) -> bool {
    match mark & MARK_KIND {
        mark @ (MARK_NOTRACE | MARK_GRAPH_FUNCTION) => graph_trace_clear_mark(array, mark),
        mark => {
            debug_assert!(mark == MARK_PLAIN);
            true
        }
    }
}

/// [`graph_trace_unmark`] for a call the entry marked.
#[inline(never)]
fn graph_trace_clear_mark(array: &TraceArray, mark: u64) -> bool {
    let marks = task::current().graph_marks(array.slot(), context::current());
    if mark == MARK_NOTRACE {
        marks.notrace_depth.store(NOT_INSIDE, Ordering::Relaxed);
        false
    } else {
        marks.function_depth.store(NOT_INSIDE, Ordering::Relaxed);
        true
    }
}

#[inline(always)]
fn graph_trace_return(gops: &FgraphOps, call: &FgraphReturn, data: &[u64], _fregs: &mut FtraceRegs) {
    let array = array_of_graph_ops(gops);
    // Every hooked call's entry reserved both words.
    let &[mark, calltime, ..] = data else { return };
    // `sleep-time` off at the entry: the call starts later by the time its
    // task has spent switched out since (Linux's `handle_nosleeptime`).
    let calltime = match data.get(2) {
        Some(&slept) => calltime.wrapping_add(task::current().slept_ns().wrapping_sub(slept)),
        None => calltime,
    };
    // A call hooked in another registration of the tracer records
    // nothing: its entry went with the buffer a switch emptied (Linux stubs
    // out an unregistered graph user's returns, and gives a re-registered
    // one a fresh slot).
    // (An even generation is an unregistration's: a call that came in while
    // the tracer was going records nothing either.)
    let generation = mark >> GENERATION_SHIFT;
    let hooked_now = generation % 2 == 1 && generation == u64::from(gops.generation());
    if !graph_trace_unmark(array, mark) || !hooked_now {
        return;
    }
    let thresh = THRESH_NS.load(Ordering::Relaxed);
    if thresh != 0 && call_time().saturating_sub(calltime) < thresh {
        return;
    }
    let mut event = GraphExitEvent {
        common: event_common(TRACE_GRAPH_RET),
        func: call.func as u64,
        retval: call.retval,
        depth: call.depth as i32,
        overrun: call.overrun as u32,
        calltime,
        rettime: 0,
    };
    // The return time is the exit event's own timestamp, when the clock is
    // the local one (see `call_time`).
    // SAFETY: as in `record_graph_entry`.
    unsafe { array.buffer_made() }.write_timed(GraphExitEvent::SIZE, |time, bytes| {
        event.rettime = time;
        event.encode_into(bytes);
    });
}

/// Forgets the current task's graph markers, in every trace array (tests
/// that abandon a stack).
pub fn reset_graph_state() {
    task::current().reset_graph_marks();
}

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
        output::write_graph_header(out, array.graph_options(), stats, cpus, array.buffer().start_cpu())?;
        return write_events(array, tracer, &events, run, &mut output::GraphState::default(), out);
    }
    output::write_header(out, tracer.name(), stats, cpus, array.context_options())?;
    // Linux annotates a trace whose buffer overwrote events.
    run.annotate = array.option(TraceOption::Annotate) && stats.overrun > 0;
    write_events(array, tracer, &events, run, &mut output::GraphState::default(), out)
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
struct Run {
    /// The first event's index in the reader's output (0 first).
    first_index: usize,
    /// The time of the event printed after the run, if known (the last
    /// event's gap mark in the latency format).
    following: Option<u64>,
    /// `options/annotate`, over a buffer that lost events to overwriting:
    /// each CPU's first event but in the first two lines comes after
    /// `##### CPU N buffer started ####`, as Linux marks where a CPU's
    /// surviving events start.
    annotate: bool,
    /// Where the latency format's times start.
    time_start: u64,
}

/// Prints `events` (time, CPU, payload; oldest first), placed as `run`
/// says, as `trace` shows them under the array's tracer, without the
/// header; under function_graph, going on from the lines `graph`
/// remembers.
fn write_events(
    array: &TraceArray,
    tracer: Tracer,
    events: &[(u64, usize, &[u8])],
    run: Run,
    graph: &mut output::GraphState,
    out: &mut dyn Write,
) -> fmt::Result {
    let names = |address: usize| symbols::table().ok()?.lookup(address);
    let comms = |pid: i32| crate::events::sched::comm_of(pid);
    if tracer == Tracer::FunctionGraph {
        let lines: Vec<output::GraphLine> = events
            .iter()
            .filter_map(|&(time, cpu, payload)| Event::decode(payload).map(|record| (time, cpu, record, payload)))
            .collect();
        let options = array.graph_options();
        let function = array.function_options();
        let other = |payload: &[u8], out: &mut dyn Write| print_other(payload, function, &names, out);
        return output::write_graph(graph, out, &lines, &names, &comms, options, &other);
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
                output::write_graph_event(out, &event, &names)?;
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

/// The longest `trace_marker` text an event keeps (longer is cut).
pub const MARKER_MAX: usize = 1000;

/// `echo TEXT > trace_marker`: a print event with TEXT (and a newline, as
/// `echo` writes), if the array is recording. Answers whether it was.
pub fn write_marker(array: &TraceArray, text: &str) -> bool {
    let mut bytes = alloc::vec::Vec::with_capacity(text.len().min(MARKER_MAX) + 1);
    bytes.extend_from_slice(&text.as_bytes()[..text.len().min(MARKER_MAX)]);
    // One newline at the end, as Linux's `tracing_mark_write` adds it only
    // when the text has none.
    if bytes.last() != Some(&b'\n') {
        bytes.push(b'\n');
    }
    write_print(array, PrintWriter::Marker, &bytes)
}

/// Records `text` (ending in a newline) as a print event of `writer`, if
/// the array is recording. Answers whether it was. Neither allocates nor
/// waits: callable from a callback.
pub(crate) fn write_print(array: &TraceArray, writer: PrintWriter, text: &[u8]) -> bool {
    let common = event_common(crate::events::record::TRACE_PRINT);
    let size = crate::events::record::print_event_size(text);
    array.buffer().write_with(size, |_, out| crate::events::record::encode_print(common, writer, text, out)).is_some()
}

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
    graph: output::GraphState,
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
    graph: &mut output::GraphState,
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
