//! The files that define events at run time: `dynamic_events` (fprobe,
//! kprobe and synthetic definitions), `kprobe_events`, `synthetic_events`,
//! and `kprobe_profile` (each probe's hits and misses).

use super::events::event_error;
use super::Array;
use super::TracefsError;
use alloc::format;
use core::fmt::{self, Write};

use ftrace::FilterMode;

pub(super) fn read_dynamic_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    probe_events::events::read_dynamic_events(out)?;
    trace::events::synth::write_definitions(out, true)
}

/// The probe events' commands, and Linux's `s:[synthetic/]NAME FIELDS`
/// defining a synthetic event and `-:[synthetic/]NAME` removing one. A
/// truncating write (`>`) first removes every dynamic event of both kinds,
/// as Linux's does when it opens the file; all of them or none (each kind
/// checked before either goes, as Linux checks them all), and not for a
/// line that is refused: a definition is checked first (each kind's own
/// truncating write does that, the first to run), and a removal, which
/// would find nothing left, is refused.
pub(super) fn write_dynamic_events(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let line = text.trim();
    let synthetic_definition = line.strip_prefix("s:").map(|def| def.strip_prefix("synthetic/").unwrap_or(def));
    let synthetic_removal = line.strip_prefix("-:").map(|name| name.strip_prefix("synthetic/").unwrap_or(name).trim());
    if mode == FilterMode::Append {
        if let Some(definition) = synthetic_definition {
            return super::events::write_synthetic(definition, FilterMode::Append);
        }
        if let Some(name) = synthetic_removal.filter(|name| trace::events::synth::find(name).is_some()) {
            return super::events::write_synthetic(&format!("!{name}"), FilterMode::Append);
        }
        return probe_events::events::write_dynamic_events(text, FilterMode::Append).map_err(event_error);
    }
    if line.starts_with("-:") {
        return Err(TracefsError::Invalid(format!(
            "'{line}': '>' removes every dynamic event first, so there is nothing left for it to remove (write it with '>>')"
        )));
    }
    probe_events::events::check_removable_all().map_err(event_error)?;
    super::events::check_synthetic_removable_all()?;
    match synthetic_definition {
        Some(definition) => {
            super::events::write_synthetic(definition, FilterMode::Replace)?;
            probe_events::events::write_dynamic_events("", FilterMode::Replace).map_err(event_error)
        }
        None => {
            probe_events::events::write_dynamic_events(text, FilterMode::Replace).map_err(event_error)?;
            super::events::write_synthetic("", FilterMode::Replace)
        }
    }
}

pub(super) fn read_synthetic_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::events::synth::write_definitions(out, false)
}

pub(super) fn write_synthetic_events(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    super::events::write_synthetic(text, mode)
}

pub(super) fn read_kprobe_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    probe_events::events::read_kprobe_events(out)
}

pub(super) fn write_kprobe_events(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    probe_events::events::write_kprobe_events(text, mode).map_err(event_error)
}

pub(super) fn read_kprobe_profile(_array: Array, out: &mut dyn Write) -> fmt::Result {
    probe_events::events::read_kprobe_profile(out)
}
