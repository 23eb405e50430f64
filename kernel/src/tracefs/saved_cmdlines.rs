//! The task names and thread groups traces show: `saved_cmdlines`,
//! `saved_cmdlines_size` and `saved_tgids`.

use super::Array;
use super::TracefsError;
use alloc::format;
use core::fmt::{self, Write};

use ftrace::FilterMode;

/// `PID COMM`, one task a line: the names traces show.
pub(super) fn read_saved_cmdlines(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::task_names::saved_cmdlines().iter().try_for_each(|(pid, comm)| writeln!(out, "{pid} {comm}"))
}

pub(super) fn read_saved_tgids(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::task_names::saved_tgids().iter().try_for_each(|(pid, tgid)| writeln!(out, "{pid} {tgid}"))
}

pub(super) fn read_saved_cmdlines_size(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::task_names::saved_cmdlines_size())
}

/// How many task names to keep (the oldest go first).
pub(super) fn write_saved_cmdlines_size(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let max = trace::task_names::MAX_SAVED_CMDLINES;
    let refused = || TracefsError::Invalid(format!("expected a number of names from 1 to {max}, not '{}'", text.trim()));
    let n: usize = text.trim().parse().map_err(|_| refused())?;
    trace::task_names::set_saved_cmdlines_size(n).ok_or_else(refused)
}
