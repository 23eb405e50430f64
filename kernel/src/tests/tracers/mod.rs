//! The tracers' tests (the `trace` crate's `tracers/` and `array/`): the
//! function_graph tracer ([`function_graph`]) and instances
//! ([`instances`]).

pub(crate) mod function_graph;
mod instances;
