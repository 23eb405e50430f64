//! The console's input side, independent of any device or architecture.
//!
//! [`LineReader`] turns a byte stream (typed on a terminal or piped in) into
//! whole lines, handling echo and backspace, and rejecting what a line may not
//! hold: over-long input, control bytes, invalid UTF-8. [`parse`] splits an
//! accepted line into words and an optional tracefs-style redirection
//! (`echo function > current_tracer`, `echo 'x' >> dynamic_events`) and
//! the filters its output is piped through ([`filter`]: `| grep fib`,
//! matching [`pattern`]s), and [`path::resolve`] finds the tracefs file a
//! path names, relative to the working directory or under
//! `/sys/kernel/tracing`.
//!
//! Neither ever panics on input: every malformed line becomes a typed error.
#![no_std]

extern crate alloc;

pub mod filter;
mod line;
pub mod path;
pub mod pattern;
mod words;

pub use filter::{Filter, FilterError, Flow, Pipeline, HELD_MAX};
pub use line::{LineError, LineEvent, LineReader};
pub use words::{parse, CommandLine, ParseError, Redirect};
