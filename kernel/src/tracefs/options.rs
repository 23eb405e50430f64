//! `trace_options` and the `options/` directory: one file per option, the
//! tracer's own options listed only while that tracer is current.

use super::Array;
use super::TracefsError;
use alloc::format;
use core::fmt::{self, Write};

use ftrace::FilterMode;
use trace::array::options::TraceOption;

/// `options/NAME` within `array`: the option, if it has one so called
/// (an instance has no file for a top-level-only option).
pub(super) fn option_file(array: Array, name: &str) -> Option<TraceOption> {
    TraceOption::from_name(name.strip_prefix("options/")?).filter(|option| array.is_top() || !option.top_level_only())
}

/// `cat trace_options`: every option, `no` in front of those that are off.
/// The generic options, then the current tracer's, as Linux lists them
/// (another tracer's are only in `options/`).
pub(super) fn read_trace_options(array: Array, out: &mut dyn Write) -> fmt::Result {
    for option in TraceOption::ALL.into_iter().filter(|option| of_current_tracer(array, *option)) {
        let no = if array.option(option) { "" } else { "no" };
        writeln!(out, "{no}{}", option.name())?;
    }
    Ok(())
}

/// Whether `option` is generic or the current tracer's.
pub(super) fn of_current_tracer(array: Array, option: TraceOption) -> bool {
    option.tracer().is_none_or(|tracer| tracer == array.current_tracer())
}

/// `echo NAME > trace_options` sets it, `echo noNAME > trace_options` clears
/// it; a tracer's option only while that tracer is current, as in Linux
/// (`options/NAME` takes it whenever).
pub(super) fn write_trace_options(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let word = text.trim();
    let (name, on) = match word.strip_prefix("no") {
        Some(name) if TraceOption::from_name(name).is_some() => (name, false),
        _ => (word, true),
    };
    let option = TraceOption::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no such option '{name}' (see trace_options)")))?;
    if !of_current_tracer(array, option) {
        let tracer = option.tracer().map_or("", |tracer| tracer.name());
        return Err(TracefsError::Invalid(format!(
            "'{name}' is an option of the {tracer} tracer, which is not current (or write options/{name})"
        )));
    }
    set_option(array, option, on)
}

/// Switches an option (`options/NAME`, `trace_options`); the probe events
/// learn of `stacktrace`, which takes them off their fast path.
pub(super) fn set_option(array: Array, option: TraceOption, on: bool) -> Result<(), TracefsError> {
    array.set_option(option, on)?;
    if option == TraceOption::StackTrace && array.is_top() {
        probe_events::events::stack_trace_option_changed();
    }
    Ok(())
}
