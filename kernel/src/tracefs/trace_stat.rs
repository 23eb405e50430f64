//! The function profiler's files: `function_profile_enabled` and the
//! `trace_stat/functionN` table of each CPU.

use super::parse_ulong;
use super::Array;
use super::TracefsError;
use alloc::string::ToString;
use core::fmt::{self, Write};

use ftrace::FilterMode;

/// `trace_stat/functionN` (top level only): CPU N, when it exists.
pub(super) fn trace_stat_file(name: &str) -> Option<usize> {
    name.strip_prefix("trace_stat/function")?.parse().ok().filter(|&cpu| cpu < ring_buffer::trace_buffer::cpus())
}

pub(super) fn read_function_profile_enabled(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(trace::profile::function::is_enabled()))
}

/// Any decimal number, not 0 on (Linux's `kstrtoul` then `!!val`): reads
/// back 0 or 1.
pub(super) fn write_function_profile_enabled(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let on = parse_ulong(text)? != 0;
    array.set_function_profile(on).map_err(|error| TracefsError::Invalid(error.to_string()))
}
