//! The tracers' tests (the `trace` crate's `tracers/` and `array/`): the
//! function_graph tracer ([`function_graph`]) and instances
//! ([`instances`]).

pub(crate) mod function_graph;
mod instances;

/// Waits two ticks inside: a call whose time is nearly all its callee's
/// (`function_graph`'s `graph-time` test profiles it).
#[inline(never)]
fn calls_waits_two_ticks() {
    function_graph::waits_two_ticks();
}
