//! The tracing state of one flow of control: its shadow return stack, its
//! recursion bits and the graph tracer's markers (Linux keeps these in
//! `task_struct`: `ret_stack`, `trace_recursion`, the graph depth fields).
//!
//! Every piece of tracing code that needs "the current task" reaches it
//! through [`current`], the one place that chooses it.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use alloc::boxed::Box;
use arch::context::Context;
use arch::{cpu, MAX_CPUS};

use crate::shadow::ShadowStack;

/// Words in each shadow stack (32 KiB).
pub const STACK_WORDS: usize = 4096;

/// "No marker set" for the graph tracer's depth markers.
pub const NOT_INSIDE: usize = usize::MAX;

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

/// One flow of control's tracing state. See the module documentation.
pub struct TaskTrace {
    /// Recursion bits: see [`crate::recursion`].
    pub(crate) recursion: AtomicU32,
    /// The graph tracer's markers, one set per context.
    pub(crate) graph: [GraphMarks; Context::COUNT],
    /// The shadow return stack.
    pub(crate) stack: ShadowStack,
}

impl TaskTrace {
    /// Fresh state with an empty shadow stack.
    pub fn new() -> TaskTrace {
        TaskTrace {
            recursion: AtomicU32::new(0),
            graph: [const { GraphMarks::new() }; Context::COUNT],
            stack: ShadowStack::new(STACK_WORDS),
        }
    }

    /// Forgets everything an abandoned flow of control left: its hooked
    /// calls, recursion bits and graph markers.
    pub fn reset(&self) {
        self.stack.reset();
        self.recursion.store(0, Ordering::Relaxed);
        self.reset_graph_marks();
    }

    /// Clears the graph tracer's markers in every context.
    pub fn reset_graph_marks(&self) {
        for marks in &self.graph {
            marks.reset();
        }
    }

    /// The markers of `context`.
    pub fn graph_marks(&self, context: Context) -> &GraphMarks {
        &self.graph[context as usize]
    }

    /// Its shadow stack.
    pub fn shadow_stack(&self) -> &ShadowStack {
        &self.stack
    }
}

impl Default for TaskTrace {
    fn default() -> Self {
        Self::new()
    }
}

/// Per CPU: the state of what runs there now.
static CURRENT: [AtomicPtr<TaskTrace>; MAX_CPUS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_CPUS];

/// Gives this CPU its tracing state. Called once per CPU at boot.
pub fn init_cpu() {
    let state = Box::leak(Box::new(TaskTrace::new()));
    CURRENT[cpu::id()].store(state, Ordering::Release);
}

/// The tracing state of what runs here now.
///
/// # Panics
/// Before [`init_cpu`] ran on this CPU (a kernel bug: tracing starts after).
#[inline(always)]
pub fn current() -> &'static TaskTrace {
    let state = CURRENT[cpu::id()].load(Ordering::Relaxed);
    assert!(!state.is_null(), "ftrace: no tracing state on this CPU");
    // SAFETY: set once by `init_cpu` to a leaked (never freed) state.
    unsafe { &*state }
}

/// Every tracing state there is (for walks across tasks).
pub fn for_each(mut f: impl FnMut(&TaskTrace)) {
    for slot in &CURRENT {
        let state = slot.load(Ordering::Acquire);
        if !state.is_null() {
            // SAFETY: as in `current`.
            f(unsafe { &*state });
        }
    }
}
