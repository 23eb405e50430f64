//! The tracing state of one task: its shadow return stack, its recursion
//! bits and the graph tracer's markers (Linux keeps these in `task_struct`:
//! `ret_stack`, `trace_recursion`, the graph depth fields), and what events
//! say about it (pid, name).
//!
//! The kernel's scheduler owns one [`TaskTrace`] per task, registers it
//! here ([`register`]) and, at every switch, points the CPU at the running
//! task's (`arch::percpu::set_task_trace`): that pointer is the one narrow
//! hook between the scheduler and the tracer. [`current`] reads it. Since
//! the state belongs to the task, a hooked call survives sleeping,
//! preemption and migration: its frame waits on its own task's stack.
//!
//! The first word of a `TaskTrace` is read by the entry trampolines
//! ([`TrampolineCounters`], see `crate::deferred`): how deep the task is
//! in tracing code now, and how often it has left it.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use arch::context::Context;
use arch::ftrace_abi::TrampolineCounters;
use arch::sync::SpinLock;

use crate::graph::shadow::ShadowStack;

/// Words in each shadow stack (16 KiB).
pub const STACK_WORDS: usize = 2048;

/// How many trace arrays can run the graph tracer with their own markers
/// (see `trace::array::trace_array`).
pub const GRAPH_SLOTS: usize = 16;

/// "No marker set" for the graph tracer's depth markers.
pub const NOT_INSIDE: usize = usize::MAX;

/// The longest task name events carry (Linux's `TASK_COMM_LEN`, less NUL).
pub const COMM_LEN: usize = 15;

/// The graph tracer's markers for one context: below which depth nothing is
/// recorded (`set_graph_notrace`), and the depth of the `set_graph_function`
/// call being traced below.
pub struct GraphMarks {
    pub notrace_depth: AtomicUsize,
    pub function_depth: AtomicUsize,
}

impl GraphMarks {
    const fn new() -> GraphMarks {
        GraphMarks { notrace_depth: AtomicUsize::new(NOT_INSIDE), function_depth: AtomicUsize::new(NOT_INSIDE) }
    }

    fn reset(&self) {
        self.notrace_depth.store(NOT_INSIDE, Ordering::Relaxed);
        self.function_depth.store(NOT_INSIDE, Ordering::Relaxed);
    }
}

/// One task's tracing state. See the module documentation.
#[repr(C)]
pub struct TaskTrace {
    /// Must stay first: the trampolines find it at the state's address.
    pub(crate) counters: TrampolineCounters,
    /// Recursion bits: see [`crate::recursion`].
    pub(crate) recursion: AtomicU32,
    /// The graph tracer's markers: per trace array slot, one set per
    /// context.
    pub graph: [[GraphMarks; Context::COUNT]; GRAPH_SLOTS],
    /// The shadow return stack.
    pub(crate) stack: ShadowStack,
    /// The task's pid, as events show it.
    pid: i32,
    /// The task's name (`comm`), NUL-padded.
    comm: [u8; COMM_LEN + 1],
    /// Its kernel stack (empty if unknown), for the stack tracer.
    kernel_stack: core::ops::Range<usize>,
    /// Per trace array slot, a bit: that array's pid filter leaves this
    /// task out (`set_ftrace_pid`, `set_ftrace_notrace_pid`).
    ignored: AtomicU32,
    /// Per trace array slot, a bit: that array's `set_event_pid` (or
    /// `set_event_notrace_pid`) leaves this task out.
    event_ignored: AtomicU32,
    /// The sequence number of the last save of its name in
    /// `saved_cmdlines` (see `trace::cmdlines`).
    name_seq: AtomicU64,
    /// When it was last switched out ([`TaskTrace::switched`]), in the
    /// graph tracer's clock; 0 before its first switch out.
    switched_out_at: AtomicU64,
    /// How long it has spent switched out since it was made, in
    /// nanoseconds: Linux's `ftrace_sleeptime`, which `sleep-time` off
    /// takes out of a call's duration.
    slept_ns: AtomicU64,
    /// The function profiler's running sum of returned calls' times, for
    /// `graph-time` off (see `trace::profile`).
    pub profiled_ns: AtomicU64,
}

/// Sets or clears trace array `slot`'s bit of a per-slot verdict word.
fn set_slot_bit(bits: &AtomicU32, slot: usize, on: bool) {
    match on {
        true => bits.fetch_or(1 << slot, Ordering::Relaxed),
        false => bits.fetch_and(!(1 << slot), Ordering::Relaxed),
    };
}

// The trampolines add the counters' own offsets to the state's address.
const _: () = assert!(core::mem::offset_of!(TaskTrace, counters) == 0, "TaskTrace::counters must stay first");

impl TaskTrace {
    /// Fresh state for task `pid` called `name` (cut to [`COMM_LEN`] bytes).
    pub fn new(pid: i32, name: &str) -> TaskTrace {
        let mut comm = [0u8; COMM_LEN + 1];
        let len = name.len().min(COMM_LEN);
        comm[..len].copy_from_slice(&name.as_bytes()[..len]);
        TaskTrace {
            counters: TrampolineCounters::new(),
            recursion: AtomicU32::new(0),
            graph: [const { [const { GraphMarks::new() }; Context::COUNT] }; GRAPH_SLOTS],
            stack: ShadowStack::new(STACK_WORDS),
            pid,
            comm,
            kernel_stack: 0..0,
            ignored: AtomicU32::new(0),
            event_ignored: AtomicU32::new(0),
            name_seq: AtomicU64::new(0),
            switched_out_at: AtomicU64::new(0),
            slept_ns: AtomicU64::new(0),
            profiled_ns: AtomicU64::new(0),
        }
    }

    /// How long the task has spent switched out, in nanoseconds (see
    /// [`switched`](Self::switched)). It only grows: the time a call spent
    /// off the CPU is the difference of two readings.
    #[inline]
    pub fn slept_ns(&self) -> u64 {
        self.slept_ns.load(Ordering::Relaxed)
    }

    /// Accounts a context switch at `now_ns` (the graph tracer's clock)
    /// from `prev` to `next`: `prev` leaves now, and `next` was away since
    /// it left (its sleep time grows by that). Only the switching CPU
    /// writes either task's fields then: `prev` is its current task, and
    /// `next` runs nowhere until the switch.
    pub fn switched(prev: &TaskTrace, next: &TaskTrace, now_ns: u64) {
        prev.switched_out_at.store(now_ns, Ordering::Relaxed);
        let left = next.switched_out_at.load(Ordering::Relaxed);
        if left != 0 {
            let away = now_ns.saturating_sub(left);
            next.slept_ns.store(next.slept_ns.load(Ordering::Relaxed).wrapping_add(away), Ordering::Relaxed);
        }
    }

    /// The sequence number of the last save of its name.
    #[inline]
    pub fn name_seq(&self) -> u64 {
        self.name_seq.load(Ordering::Relaxed)
    }

    pub fn set_name_seq(&self, seq: u64) {
        self.name_seq.store(seq, Ordering::Relaxed);
    }

    /// Whether trace array `slot`'s pid filter leaves this task out.
    #[inline]
    pub fn is_ignored(&self, slot: usize) -> bool {
        self.ignored.load(Ordering::Relaxed) & (1 << slot) != 0
    }

    /// Sets whether trace array `slot`'s pid filter leaves this task out.
    pub fn set_ignored(&self, slot: usize, ignored: bool) {
        set_slot_bit(&self.ignored, slot, ignored);
    }

    /// Whether trace array `slot`'s `set_event_pid` leaves this task out.
    #[inline]
    pub fn is_event_ignored(&self, slot: usize) -> bool {
        self.event_ignored.load(Ordering::Relaxed) & (1 << slot) != 0
    }

    /// Sets whether trace array `slot`'s `set_event_pid` leaves this task
    /// out.
    pub fn set_event_ignored(&self, slot: usize, ignored: bool) {
        set_slot_bit(&self.event_ignored, slot, ignored);
    }

    /// Its kernel stack's address range (empty if unknown).
    pub fn kernel_stack(&self) -> core::ops::Range<usize> {
        self.kernel_stack.clone()
    }

    /// The task's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The task's name.
    pub fn comm(&self) -> &str {
        let len = self.comm.iter().position(|&b| b == 0).unwrap_or(COMM_LEN);
        core::str::from_utf8(&self.comm[..len]).unwrap_or("?")
    }

    /// The name as events store it: 16 bytes, NUL-padded.
    pub fn comm_bytes(&self) -> &[u8; COMM_LEN + 1] {
        &self.comm
    }

    /// Forgets everything an abandoned flow of control left: its hooked
    /// calls, recursion bits and graph markers.
    ///
    /// The users of the calls dropped this way are not told (no
    /// `on_skipped`): what they hold for those calls (a rethook's node, a
    /// probe's reference) stays taken. Only the test harness resets, after
    /// a test panicked.
    ///
    /// # Safety
    /// The flow is abandoned for good: no call on its shadow stack will
    /// return through the return trampoline, and no hook of it is pending
    /// (the return trampoline trusts what the stack holds).
    pub unsafe fn reset(&self) {
        self.stack.reset();
        self.recursion.store(0, Ordering::Relaxed);
        self.reset_graph_marks();
        // An abandoned callback never left its trampoline: without this a
        // grace period would wait for it for ever.
        if self.counters.active.swap(0, Ordering::Relaxed) != 0 {
            self.counters.exits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears the graph tracer's markers in every slot and context.
    pub fn reset_graph_marks(&self) {
        for slot in 0..GRAPH_SLOTS {
            self.reset_graph_slot(slot);
        }
    }

    /// Clears one slot's markers in every context.
    pub fn reset_graph_slot(&self, slot: usize) {
        for marks in &self.graph[slot] {
            marks.reset();
        }
    }

    /// The markers of trace array slot `slot` in `context`.
    pub fn graph_marks(&self, slot: usize, context: Context) -> &GraphMarks {
        &self.graph[slot][context as usize]
    }

    /// Its shadow stack.
    pub fn shadow_stack(&self) -> &ShadowStack {
        &self.stack
    }

    /// The trampolines' counters.
    pub fn counters(&self) -> &TrampolineCounters {
        &self.counters
    }
}

/// A registered state: a pointer the registry keeps while the task lives.
struct Registered(*const TaskTrace);

// SAFETY: the pointer is only dereferenced while registered, and the state
// is `Sync` (atomics, and a shadow stack used by its own task).
unsafe impl Send for Registered {}

/// Every task's state, for walks across tasks (grace periods, restarts).
static ALL: SpinLock<Vec<Registered>> = SpinLock::new(Vec::new());

/// Registers a task's state (the scheduler, when it creates a task). What
/// the trace layer does with a new task (its name saved, the pid filters
/// that follow forks) the scheduler tells it next, as Linux's
/// `sched_process_fork` tracepoint does: the mechanism knows no tracer.
///
/// # Safety
/// `state` stays valid, at the same address, until [`unregister`]ed.
pub unsafe fn register(state: &TaskTrace) {
    ALL.lock().push(Registered(state));
}

/// Forgets a task's state (the scheduler, when the task is gone for good:
/// it runs no tracing code any more).
pub fn unregister(state: &TaskTrace) {
    ALL.lock().retain(|registered| !core::ptr::eq(registered.0, state));
}

/// The running task's tracing state, if the scheduler gave this CPU one.
#[inline(always)]
pub fn try_current() -> Option<&'static TaskTrace> {
    // SAFETY: the per-CPU pointer, as `from_raw` asks.
    unsafe { from_raw(arch::percpu::task_trace()) }
}

/// The running task's state from a per-CPU task pointer.
///
/// # Safety
/// `task_trace` must have been read from this CPU's per-CPU data by the
/// running task ([`arch::percpu::task_trace`], or the field of an
/// [`arch::percpu::event_state`]).
#[inline(always)]
pub unsafe fn from_raw(task_trace: *mut ()) -> Option<&'static TaskTrace> {
    let state = task_trace as *const TaskTrace;
    // SAFETY: the scheduler points the CPU at the running task's registered
    // state, which lives at least as long as the task runs.
    unsafe { state.as_ref() }
}

/// What an event's common header says about the running flow: this CPU's
/// context and scheduler state ([`EventContext::cpu`]), read at once, and
/// the running task ([`EventContext::pid`]). Only [`event_context`] makes
/// one, which is what makes reading its task sound.
pub struct EventContext {
    cpu: arch::percpu::EventState,
}

impl EventContext {
    /// This CPU's context, preemption and scheduler state.
    #[inline(always)]
    pub fn cpu(&self) -> &arch::percpu::EventState {
        &self.cpu
    }

    /// The running task's pid (0 before the scheduler gave this CPU a task).
    #[inline(always)]
    pub fn pid(&self) -> i32 {
        // SAFETY: an `EventContext` is made only by `event_context`, which
        // read `task_trace` from this CPU's per-CPU data, by the running
        // task, just before.
        unsafe { from_raw(self.cpu.task_trace) }.map_or(0, |task| task.pid())
    }
}

/// This CPU's [`EventContext`] now.
#[inline(always)]
pub fn event_context() -> EventContext {
    EventContext { cpu: arch::percpu::event_state() }
}

/// The running task's tracing state.
///
/// # Panics
/// Before the scheduler gave this CPU a task (a kernel bug: tracing starts
/// after).
#[inline(always)]
pub fn current() -> &'static TaskTrace {
    try_current().expect("ftrace: no task tracing state on this CPU")
}

/// [`current`] without the test for a missing state, for the return hook.
///
/// # Safety
/// The running task must have a state: it does when it hooked the call now
/// returning (the hook was made on its state's shadow stack).
#[inline(always)]
pub(crate) unsafe fn current_unchecked() -> &'static TaskTrace {
    let state = arch::percpu::task_trace() as *const TaskTrace;
    debug_assert!(!state.is_null());
    // SAFETY: not null (the caller's promise), and as in `from_raw`.
    unsafe { &*state }
}

/// Calls `f` with every registered task's state, under the registry's lock
/// (interrupts masked: keep `f` short).
pub fn for_each(mut f: impl FnMut(&TaskTrace)) {
    for registered in ALL.lock().iter() {
        // SAFETY: registered states stay valid until unregistered, which
        // needs this lock.
        f(unsafe { &*registered.0 });
    }
}

/// A boxed state for a task that is about to exist (the scheduler keeps it
/// at a fixed address for the task's life).
pub fn boxed(pid: i32, name: &str, kernel_stack: core::ops::Range<usize>) -> Box<TaskTrace> {
    Box::new(TaskTrace { kernel_stack, ..TaskTrace::new(pid, name) })
}
