//! Tracers (`current_tracer`): which one runs, and each in its file.
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
//!
//! - [`function`], [`function_graph`]: the two tracers;
//! - [`function_commands`]: `FUNC:traceoff` and friends in
//!   `set_ftrace_filter`;
//! - [`stack`]: the stack tracer.
//!
//! Reading what they record is [`crate::output`]'s.

// unsafe (here and in the two below): the trace array (or function
// command) an ops is embedded in, found from the ops a callback gets
// (Linux's `container_of`), and the unchecked buffer (`buffer_made`).
#[allow(unsafe_code)]
pub mod function;
#[allow(unsafe_code)]
pub mod function_commands;
#[allow(unsafe_code)]
pub mod function_graph;
pub mod stack;

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
