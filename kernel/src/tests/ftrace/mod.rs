//! The mechanism's tests (the `ftrace` and `arch` crates): ops, filters and
//! patch sites ([`ops`]), the return hook ([`graph`]), calls in flight
//! across changes ([`in_flight`]), every saved register ([`registers`]),
//! the single-step and frozen-batch torture ([`torture`]), and the frame
//! layouts the architecture guide draws ([`layout`]).

pub(crate) mod graph;
mod in_flight;
mod layout;
mod ops;
mod registers;
mod torture;
