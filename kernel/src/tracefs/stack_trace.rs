//! The stack tracer's files: `stack_tracer_enabled`, `stack_max_size`,
//! `stack_trace` and `stack_trace_filter`.

use super::parse_sysctl_int;
use super::Array;
use super::TracefsError;
use alloc::format;
use core::fmt::{self, Write};

use ftrace::{FilterKind, FilterMode};

/// Linux's `/proc/sys/kernel/stack_tracer_enabled`, as a tracefs file here:
/// the int last written.
pub(super) fn read_stack_tracer_enabled(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::tracers::stack::enabled_value())
}

/// Any int (not 0 is on), read as Linux's `proc_dointvec` does.
pub(super) fn write_stack_tracer_enabled(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    Ok(trace::tracers::stack::set_enabled(parse_sysctl_int(text)?)?)
}

pub(super) fn read_stack_max_size(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::tracers::stack::max_size())
}

/// A number of bytes: the maximum a new chain must beat (`0` starts over
/// and forgets the chain too).
pub(super) fn write_stack_max_size(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let bytes =
        text.trim().parse().map_err(|_| TracefsError::Invalid(format!("expected a number of bytes, not '{}'", text.trim())))?;
    trace::tracers::stack::set_max_size(bytes);
    Ok(())
}

pub(super) fn read_stack_trace(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::tracers::stack::write_trace(out)
}

pub(super) fn read_stack_trace_filter(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let names = ftrace::filter_names(trace::tracers::stack::ops(), FilterKind::Filter);
    if names.is_empty() {
        return writeln!(out, "#### all functions enabled ####");
    }
    names.iter().try_for_each(|name| writeln!(out, "{name}"))
}

pub(super) fn write_stack_trace_filter(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(ftrace::set_filter(trace::tracers::stack::ops(), FilterKind::Filter, text, mode)?)
}
