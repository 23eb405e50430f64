//! The `function_graph` tracer: each call's entry and return, recorded
//! through the return hook (`ftrace::graph::fgraph`). It honours
//! `set_graph_function` (only what runs below these), `set_graph_notrace`
//! (nothing below these), `max_graph_depth` and `tracing_thresh` (only
//! calls that took at least that long, recorded at their return).

use crate::events::record::event_common;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use alloc::vec::Vec;
use arch::context::{self, Context};
use arch::ftrace_abi::FtraceRegs;

use crate::array::options::TraceOption;
use crate::array::trace_array::TraceArray;
use crate::events::record::{FixedEvent, GraphEntryEvent, GraphExitEvent, TRACE_GRAPH_ENT, TRACE_GRAPH_RET};
use ftrace::deferred::Published;
use ftrace::graph::fgraph::{EntryData, FgraphEntry, FgraphOps, FgraphReturn, GraphCallbacks};
use ftrace::task::{self, GraphMarks, NOT_INSIDE};

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
/// The trace array a graph ops belongs to.
#[inline(always)]
fn array_of_graph_ops(gops: &FgraphOps) -> &TraceArray {
    // SAFETY: the tracers' graph callbacks are only installed in the
    // `graph_ops` of a trace array (`graph_ops` above, used by
    // `TraceArray::new` alone), alive while its calls are in flight.
    unsafe { &*ftrace::container_of!(gops, TraceArray, graph_ops) }
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
