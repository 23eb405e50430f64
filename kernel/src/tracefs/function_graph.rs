//! The function_graph tracer's files: `set_graph_function`,
//! `set_graph_notrace`, `max_graph_depth` (per array) and `tracing_thresh`.

use super::empty_list_line;
use super::Array;
use super::TracefsError;
use alloc::format;
use core::fmt::{self, Write};

use ftrace::FilterMode;
use trace::array::trace_array::GraphList;

pub(super) fn read_tracing_thresh(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::tracers::function_graph::tracing_thresh_us())
}

/// `echo US > tracing_thresh`: function_graph records only calls of at
/// least US microseconds (0: every call).
pub(super) fn write_tracing_thresh(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    // Decimal, as Linux reads it; kept in nanoseconds: a number of
    // microseconds whose nanoseconds overflow could not read back as written.
    let us = text
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|us| us.checked_mul(1000).is_some())
        .ok_or_else(|| TracefsError::Invalid(format!("expected microseconds (0 for off), not '{}'", text.trim())))?;
    trace::tracers::function_graph::set_tracing_thresh_us(us);
    Ok(())
}

pub(super) fn read_graph_list(array: Array, out: &mut dyn Write, list: GraphList) -> fmt::Result {
    let names = array.graph_list_names(list);
    if names.is_empty() {
        return writeln!(out, "{}", empty_list_line(list == GraphList::Functions));
    }
    for name in names {
        writeln!(out, "{name}")?;
    }
    Ok(())
}

pub(super) fn read_graph_function(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_graph_list(array, out, GraphList::Functions)
}

pub(super) fn read_graph_notrace(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_graph_list(array, out, GraphList::Notrace)
}

pub(super) fn write_graph_function(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(array.set_graph_list(GraphList::Functions, text, mode)?)
}

pub(super) fn write_graph_notrace(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(array.set_graph_list(GraphList::Notrace, text, mode)?)
}

pub(super) fn read_max_graph_depth(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", array.max_graph_depth())
}

/// `echo N > max_graph_depth`: N is a 32-bit count, as Linux reads it
/// (`kstrtouint`: a larger number is out of range).
pub(super) fn write_max_graph_depth(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let depth: u32 = text.trim().parse().map_err(|_| {
        TracefsError::Invalid(format!("expected a depth from 0 (no limit) to {}, not '{}'", u32::MAX, text.trim()))
    })?;
    array.set_max_graph_depth(depth as usize);
    Ok(())
}
