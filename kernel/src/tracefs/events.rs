//! The `events/` directory, `available_events`, `set_event` and the event
//! pid filters (`set_event_pid`, `set_event_notrace_pid`).
//!
//! Every event tracefs names, under one scheme: the scheduler's static
//! events (`sched:sched_switch`, `sched:sched_wakeup`, `sched:sched_wakeup_new`, from
//! `trace::events::sched`), the synthetic ones (`synthetic:NAME`, from
//! `trace::events::synth`) and the dynamic ones (`fprobes:NAME`, from
//! `probe_events::events`, `GRP:NAME` in `fprobes`, `kprobes` or a group the
//! definition names). `events/GRP/EVENT/{enable,filter,format,hist,id,trigger}`,
//! `events/GRP/{enable,filter}`, `events/enable`, `available_events` and `set_event`
//! all go through here, so a name means the same event in every file.
//!
//! An instance has its own copy of each event's `enable`, `filter`,
//! `trigger` and `hist` (`instances/NAME/events/...`,
//! `instances/NAME/set_event`), kept by `trace::events::arrays`; its
//! `enable_event` and `disable_event` triggers switch its own copies.

use super::Array;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::fmt::Write;

use ftrace::FilterMode;
use trace::array::trace_array::TraceArray;
use trace::events::sched::SchedEvent;
use trace::events::trigger::{Applied, EventName, Request, TriggerError};

use crate::tracefs::TracefsError;

use trace::events::sched::GROUP as SCHED;
use trace::events::synth::{Synth, GROUP as SYNTHETIC};

/// Which kind of event `group/event` is.
enum Kind {
    Sched(SchedEvent),
    Synth(Arc<Synth>),
    /// A dynamic event's name, or none.
    Dynamic,
}

fn kind(group: &str, event: &str) -> Kind {
    if let Some(sched) = SchedEvent::find(group, event) {
        return Kind::Sched(sched);
    }
    match (group == SYNTHETIC).then(|| trace::events::synth::find(event)).flatten() {
        Some(synth) => Kind::Synth(synth),
        None => Kind::Dynamic,
    }
}

/// Removes synthetic events (see [`trace::events::synth::remove`]). A trigger
/// removed just before may still hold one, in a list waiting for its
/// grace period: those are let go first when it seems busy.
fn remove_synthetic(name: Option<&str>) -> Result<u32, trace::events::synth::SynthError> {
    match trace::events::synth::remove(name) {
        Err(trace::events::synth::SynthError::Busy(_)) if ftrace::deferred::reclaim() > 0 => trace::events::synth::remove(name),
        other => other,
    }
}

/// Whether every synthetic event could be removed now (see
/// [`remove_synthetic`]'s second try).
pub fn check_synthetic_removable_all() -> Result<(), TracefsError> {
    match trace::events::synth::check_removable_all() {
        Err(trace::events::synth::SynthError::Busy(_)) if ftrace::deferred::reclaim() > 0 => {
            trace::events::synth::check_removable_all()
        }
        other => other,
    }
    .map_err(invalid)
}

/// `echo 'NAME TYPE FIELD; ...' >> synthetic_events` defines a synthetic
/// event, `!NAME` removes one; a truncating write (`>`) first removes
/// every one (refused, changing nothing, while one is enabled, has
/// triggers or is a `hist` action's). The buffers a removed event
/// recorded into are emptied, as for a removed probe event.
///
/// A line that would be refused is refused before a truncating write
/// removes anything (where Linux's open has already emptied the file): a
/// definition that does not parse or whose name a probe event has, or a
/// removal of an event that is not there.
pub fn write_synthetic(text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let text = text.trim();
    let removal = text.strip_prefix('!').map(|name| name.split_whitespace().next().unwrap_or(""));
    // A probe event of the group may not be there under that name.
    let taken = |name: &str| probe_events::events::id(SYNTHETIC, name).is_ok();
    let mut stale = 0;
    if mode == FilterMode::Replace {
        match removal {
            Some(name) if trace::events::synth::find(name).is_none() => {
                return Err(invalid(trace::events::synth::SynthError::NoSuchEvent(name.into())));
            }
            // Removed with the rest.
            Some(_) => return write_synthetic("", mode),
            None if !text.is_empty() => {
                let def = trace::events::synth::SynthDef::parse(text).map_err(invalid)?;
                if taken(&def.name) {
                    return Err(invalid(trace::events::synth::SynthError::Exists(format!("{SYNTHETIC}/{}", def.name))));
                }
            }
            None => {}
        }
        stale |= remove_synthetic(None).map_err(invalid)?;
    }
    let result = match removal {
        Some(name) => remove_synthetic(Some(name)).map(|more| stale |= more),
        None if text.is_empty() => Ok(()),
        None => trace::events::synth::define(text, taken),
    };
    if stale != 0 {
        trace::array::instances::reset_buffers_of_slots(stale);
    }
    result.map_err(invalid)
}

fn invalid(error: impl ToString) -> TracefsError {
    TracefsError::Invalid(error.to_string())
}

/// A refused event filter, `text` as written.
fn refused_filter(text: &str, error: trace::events::filter::FilterError) -> TracefsError {
    TracefsError::Filter { command: text.trim().into(), error, trigger: false }
}

fn output_failed(_: core::fmt::Error) -> TracefsError {
    TracefsError::Invalid("output failed".into())
}

/// Every event as (group, event), in `available_events` order.
pub fn all() -> Vec<(String, String)> {
    let sched = SchedEvent::ALL.into_iter().map(|event| (SCHED.to_string(), event.name().to_string()));
    let synthetic = trace::events::synth::all().into_iter().map(|synth| (SYNTHETIC.to_string(), synth.def().name.clone()));
    let dynamic = probe_events::events::event_names().into_iter().filter_map(|name| {
        let (group, event) = name.split_once('/')?;
        Some((group.to_string(), event.to_string()))
    });
    sched.chain(synthetic).chain(dynamic).collect()
}

// Each operation below goes to the static event `group/event` names, and
// to the dynamic events otherwise (they may share the `sched` group).

// Each one that takes an `array` acts on that trace array's copy of the
// event: the top level's, or an instance's (`instances/NAME/events/`).

/// Whether `events/GRP/EVENT/enable` is 1.
pub fn is_enabled(array: &TraceArray, group: &str, event: &str) -> Result<bool, TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => Ok(sched.is_enabled(array)),
        Kind::Synth(synth) => Ok(synth.state().is_enabled(array)),
        Kind::Dynamic => probe_events::events::is_enabled(array, group, event).map_err(invalid),
    }
}

/// `echo 0|1 > events/GRP/EVENT/enable`.
pub fn set_enabled(array: &TraceArray, group: &str, event: &str, on: bool) -> Result<(), TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => {
            sched.set_enabled(array, on);
            Ok(())
        }
        Kind::Synth(synth) => {
            synth.set_enabled(array, on);
            Ok(())
        }
        Kind::Dynamic => probe_events::events::set_enabled(array, group, event, on).map_err(invalid),
    }
}

/// `rmdir instances/NAME`: no event records into the instance or has
/// triggers there any more.
pub fn forget_array(array: &TraceArray) {
    for sched in SchedEvent::ALL {
        sched.arrays().forget(array);
    }
    trace::events::synth::forget_array(array);
    probe_events::events::forget_array(array);
}

/// `echo EXPR > events/GRP/EVENT/filter` (`0` clears it); a bad filter
/// changes nothing.
pub fn set_filter(array: &TraceArray, group: &str, event: &str, text: &str) -> Result<(), TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => sched.set_filter(array, text).map_err(|error| refused_filter(text, error)),
        Kind::Synth(synth) => {
            synth.state().set_filter(array, text, &synth.def().filter_fields()).map_err(|error| refused_filter(text, error))
        }
        Kind::Dynamic => probe_events::events::set_filter(array, group, event, text).map_err(|error| match error {
            probe_events::events::EventError::Filter(error) => refused_filter(text, error),
            other => invalid(other),
        }),
    }
}

/// `echo LINE > events/GRP/EVENT/trigger` (`>>` the same) in trace array
/// `array`: adds or (`!NAME`) removes one trigger; a bad line changes
/// nothing. An `enable_event:GRP:EVENT` puts that event in soft mode for as
/// long as the trigger exists (taken here, before the trigger is added, and
/// given back if it is refused or once it is removed): `array`'s copy of
/// that event.
pub fn write_trigger(array: &'static TraceArray, group: &str, event: &str, text: &str) -> Result<(), TracefsError> {
    // One trigger write at a time (Linux's `event_mutex`): a `hist` trigger
    // resolving the variables of another's table must not interleave with
    // that table's removal, which checks that nothing reads it.
    static WRITES: arch::sync::Mutex<()> = arch::sync::Mutex::new(());
    let _one_writer = WRITES.lock();
    let in_use = TriggerError::Hist(trace::events::hist::spec::HistError::InUse).to_string();
    // A `.snapshot()` action allocates the snapshot buffer when it is
    // resolved; a trigger refused after that gives it back.
    array.giving_back_snapshot_on_error(|| match write_trigger_once(array, group, event, text) {
        // A histogram whose variables a trigger just removed read is held
        // until that trigger's grace period: let those go (no grace period
        // waits for the writers' lock held here) and try once more.
        Err(TracefsError::Invalid(message)) if message == in_use && ftrace::deferred::reclaim() > 0 => {
            write_trigger_once(array, group, event, text)
        }
        other => other,
    })
}

/// [`write_trigger`], once.
fn write_trigger_once(array: &'static TraceArray, group: &str, event: &str, text: &str) -> Result<(), TracefsError> {
    if text.trim().is_empty() {
        return Ok(());
    }
    let which = kind(group, event);
    let fields = match &which {
        Kind::Sched(sched) => sched.filter_fields(),
        Kind::Synth(synth) => synth.def().filter_fields(),
        Kind::Dynamic => probe_events::events::filter_fields(group, event).map_err(invalid)?,
    };
    let refused = |error| match error {
        TriggerError::Filter { expression, error } => TracefsError::Filter { command: expression, error, trigger: true },
        other => invalid(other),
    };
    let mut parsed = trace::events::trigger::parse(text, &fields).map_err(refused)?;
    // A `hist` trigger's `$NAME`s and actions name other triggers and
    // synthetic events: resolved now, before anything changes.
    let mut defines = None;
    let mut clock = None;
    if let Request::Add(trigger) = &mut parsed {
        // The clock first: resolving may allocate the snapshot buffer.
        if let Some(name) = trigger.histogram().and_then(|hist| hist.spec().clock()) {
            let found = ring_buffer::clock::TraceClock::from_name(name);
            clock = Some(found.ok_or_else(|| TracefsError::Invalid(format!("hist: couldn't set trace_clock '{name}'")))?);
        }
        trace::events::trigger::resolve_hist(array, trigger, trace::events::synth::target).map_err(refused)?;
        defines = trigger.histogram().map(Arc::downgrade);
    }
    let (request, acquired) = match parsed {
        Request::Add(trigger) => match trigger.target().cloned() {
            Some(target) => {
                let switch = acquire_soft(array, &target)?;
                (Request::Add(trigger.with_switch(switch)), Some(target))
            }
            None => (Request::Add(trigger), None),
        },
        // As Linux, a removal must name an event that exists.
        Request::Remove(command, Some(target)) => {
            id(&target.group, &target.event)?;
            (Request::Remove(command, Some(target)), None)
        }
        removal => (removal, None),
    };
    let applied = match which {
        Kind::Sched(sched) => sched.apply_trigger(array, request).map_err(invalid),
        Kind::Synth(synth) => synth.state().apply_trigger(array, request).map_err(invalid),
        Kind::Dynamic => probe_events::events::apply_trigger(array, group, event, request).map_err(invalid),
    };
    // An added histogram with variables: other triggers may read them;
    // with timestamps, its array takes the clock it asks for (emptying its
    // buffer if that is a change), as Linux sets it.
    if let (Ok(Applied::Added(..)), Some(hist)) = (&applied, defines.and_then(|hist| hist.upgrade())) {
        let name = EventName { group: group.to_string(), event: event.to_string() };
        trace::events::trigger::register_vars(array, &name, &hist);
        if let Some(clock) = clock.filter(|clock| *clock != array.buffer().clock()) {
            array.buffer().set_clock(clock);
        }
    }
    match (&applied, acquired) {
        // Refused, or the same trigger was there: the reference goes back.
        (Err(_), Some(target)) => release_soft(array, &target),
        (Ok(Applied::Removed(_, Some(target))), _) => release_soft(array, target),
        _ => {}
    }
    applied.map(drop)
}

/// What a function command `enable_event:GRP:EVENT` (or `disable_event`)
/// written to `array`'s `set_ftrace_filter` holds: the switch of `array`'s
/// copy of the event, in soft mode until the command goes (the hook is
/// dropped: by its removal, or by `rmdir` before the instance goes).
pub fn event_hook(
    array: &'static TraceArray,
    target: &EventName,
) -> Result<trace::tracers::function_commands::EventHook, TracefsError> {
    let switch = acquire_soft(array, target)?;
    let target = target.clone();
    Ok(trace::tracers::function_commands::EventHook {
        switch,
        release: Some(alloc::boxed::Box::new(move || release_soft(array, &target))),
    })
}

/// `array`'s copy of `target` in soft mode, for a trigger there: its switch.
fn acquire_soft(
    array: &TraceArray,
    target: &EventName,
) -> Result<alloc::sync::Arc<dyn trace::events::trigger::EventSwitch>, TracefsError> {
    let gone = || TracefsError::Invalid(format!("{}:{} is being removed", target.group, target.event));
    match kind(&target.group, &target.event) {
        Kind::Sched(sched) => sched.acquire_soft(array).ok_or_else(gone),
        Kind::Synth(synth) => synth.acquire_soft(array).ok_or_else(gone),
        Kind::Dynamic => probe_events::events::acquire_soft(array, &target.group, &target.event).map_err(invalid),
    }
}

fn release_soft(array: &TraceArray, target: &EventName) {
    match kind(&target.group, &target.event) {
        Kind::Sched(sched) => sched.release_soft(array),
        Kind::Synth(synth) => synth.release_soft(array),
        Kind::Dynamic => probe_events::events::release_soft(array, &target.group, &target.event),
    }
}

/// What `cat events/GRP/EVENT/enable` shows, as Linux: whether the event
/// records, and whether triggers keep it armed (its own, or another
/// event's `enable_event` naming it: soft mode, marked `*`).
pub fn enable_state(array: &TraceArray, group: &str, event: &str) -> Result<(bool, bool), TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => Ok(sched.enable_state(array)),
        Kind::Synth(synth) => Ok(synth.state().enable_state(array)),
        Kind::Dynamic => probe_events::events::enable_state(array, group, event).map_err(invalid),
    }
}

/// `cat events/GRP/EVENT/trigger`.
pub fn trigger_text(array: &TraceArray, group: &str, event: &str) -> Result<String, TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => Ok(sched.trigger_text(array)),
        Kind::Synth(synth) => Ok(synth.state().trigger_text(array)),
        Kind::Dynamic => probe_events::events::trigger_text(array, group, event).map_err(invalid),
    }
}

/// `cat events/GRP/EVENT/hist`: its `hist` triggers' tables (nothing
/// without one, as in Linux).
pub fn hist_text(array: &TraceArray, group: &str, event: &str) -> Result<String, TracefsError> {
    let names = |address: usize| ftrace::symbols::kernel::table().ok()?.lookup(address);
    let comms = |pid: i32| trace::task_names::comm_of(pid);
    let text = match kind(group, event) {
        Kind::Sched(sched) => sched.hist_text(array, &names, &comms),
        Kind::Synth(synth) => synth.state().hist_text(array, &names, &comms),
        Kind::Dynamic => probe_events::events::hist_text(array, group, event, &names, &comms).map_err(invalid)?,
    };
    Ok(text.unwrap_or_default())
}

/// `cat events/GRP/EVENT/id`: the type id its records carry.
pub fn id(group: &str, event: &str) -> Result<u16, TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => Ok(sched.id()),
        Kind::Synth(synth) => Ok(synth.id()),
        Kind::Dynamic => probe_events::events::id(group, event).map_err(invalid),
    }
}

/// `cat events/GRP/EVENT/filter`: the filter, or `none`.
pub fn filter_text(array: &TraceArray, group: &str, event: &str) -> Result<String, TracefsError> {
    match kind(group, event) {
        Kind::Sched(sched) => Ok(sched.filter_text(array)),
        Kind::Synth(synth) => Ok(synth.state().filter_text(array)),
        Kind::Dynamic => probe_events::events::filter_text(array, group, event).map_err(invalid),
    }
}

/// `cat events/GRP/filter`: Linux's note, whatever was written (a group's
/// filter goes to its events; Linux keeps no text of it either).
pub const GROUP_FILTER_NOTE: &str = "### global filter ###\n\
    # Use this to set filters for multiple events.\n\
    # Only events with the given fields will be affected.\n\
    # If no events are modified, an error message will be displayed here\n";

/// `cat events/GRP/filter`, for a group that exists.
pub fn group_filter_text(group: &str) -> Result<&'static str, TracefsError> {
    events_of(Some(group)).map(|_| GROUP_FILTER_NOTE)
}

/// `echo EXPR > events/GRP/filter`: EXPR becomes the filter of each event
/// of the group that has the fields it names (as Linux's subsystem filter;
/// the others keep theirs, where Linux would drop them); `0` clears every
/// one. Refused, changing nothing, when no event takes it: with the first
/// event's reason.
pub fn set_group_filter(array: &TraceArray, group: &str, text: &str) -> Result<(), TracefsError> {
    let events = events_of(Some(group))?;
    let mut refusal = None;
    let mut taken = 0;
    for (group, event) in &events {
        match set_filter(array, group, event, text) {
            Ok(()) => taken += 1,
            Err(error) => {
                refusal.get_or_insert(error);
            }
        }
    }
    match (taken, refusal) {
        (0, Some(error)) => Err(error),
        _ => Ok(()),
    }
}

/// `cat events/GRP/EVENT/format`.
pub fn write_format(group: &str, event: &str, out: &mut dyn Write) -> Result<(), TracefsError> {
    let sched = match kind(group, event) {
        Kind::Sched(sched) => sched,
        Kind::Synth(synth) => return out.write_str(&synth.def().format(synth.id())).map_err(output_failed),
        Kind::Dynamic => return probe_events::events::write_format(group, event, out).map_err(invalid),
    };
    let name = sched.name();
    let (_, text) = trace::events::record::sched_formats().into_iter().find(|(n, _)| *n == name).expect("a format per event");
    out.write_str(&text).map_err(output_failed)
}

/// The events of `group` (every event for `None`); an unknown group is an
/// error.
fn events_of(group: Option<&str>) -> Result<Vec<(String, String)>, TracefsError> {
    let events: Vec<_> = all().into_iter().filter(|(g, _)| group.is_none_or(|group| g == group)).collect();
    match (group, events.is_empty()) {
        (Some(group), true) => Err(TracefsError::Invalid(format!("no event group '{group}'"))),
        _ => Ok(events),
    }
}

/// `echo 0|1 > events/enable` or `events/GRP/enable`.
pub fn set_enabled_all(array: &TraceArray, group: Option<&str>, on: bool) -> Result<(), TracefsError> {
    events_of(group)?.iter().try_for_each(|(group, event)| set_enabled(array, group, event, on))
}

/// Whether the event is on as `set_event` and the group `enable` files
/// count it: enabled, or armed in soft mode (by its own triggers, or by
/// another event's `enable_event` naming it), as Linux's
/// `EVENT_FILE_FL_ENABLED` is set in both cases.
fn is_on(array: &TraceArray, group: &str, event: &str) -> Result<bool, TracefsError> {
    Ok(is_enabled(array, group, event)? || enable_state(array, group, event)?.1)
}

/// `cat events/enable` or `events/GRP/enable`: `0` none on, `1` all, `X`
/// some, as Linux prints it (an event in soft mode counts as on).
pub fn enabled_all(array: &TraceArray, group: Option<&str>) -> Result<char, TracefsError> {
    let (mut on, mut off) = (false, false);
    for (group, event) in events_of(group)? {
        match is_on(array, &group, &event)? {
            true => on = true,
            false => off = true,
        }
    }
    Ok(match (on, off) {
        (true, true) => 'X',
        (true, false) => '1',
        _ => '0',
    })
}

/// `cat available_events`: `GRP:EVENT` lines.
pub fn write_available(out: &mut dyn Write) -> core::fmt::Result {
    all().iter().try_for_each(|(group, event)| writeln!(out, "{group}:{event}"))
}

/// `cat set_event`: the events that are on (enabled, or in soft mode, as
/// Linux lists them), `GRP:EVENT` lines.
pub fn write_enabled(array: &TraceArray, out: &mut dyn Write) -> core::fmt::Result {
    for (group, event) in all() {
        if is_on(array, &group, &event).unwrap_or(false) {
            writeln!(out, "{group}:{event}")?;
        }
    }
    Ok(())
}

/// Whether `GRP:EVENT`, `GRP:`, `:EVENT` or a bare `NAME` (see
/// [`set_events`]) names the event `group:event`.
fn event_matches(pattern: &str, group: &str, event: &str) -> bool {
    use ftrace::symbols::glob::glob_match;
    let any = |part: &str| part.is_empty() || part == "*";
    match pattern.split_once(':') {
        Some((g, e)) => (any(g) || glob_match(g, group)) && (any(e) || glob_match(e, event)),
        None => glob_match(pattern, group) || glob_match(pattern, event),
    }
}

/// `echo WORDS > set_event` (`>` first disables every event, `>>` adds):
/// each word `GRP:EVENT`, `GRP:*` (or `GRP:`), `*:EVENT` (or `:EVENT`), or
/// a bare `NAME`, which as in Linux is every event of the group `NAME` and
/// every event called `NAME` (globs allowed), enables what it matches;
/// `!WORD` disables it. A word matching nothing is an error, and then
/// nothing changed.
pub fn set_events(array: &TraceArray, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let events = all();
    let mut changes: Vec<(usize, bool)> = Vec::new();
    for word in text.split_whitespace() {
        let (on, pattern) = match word.strip_prefix('!') {
            Some(pattern) => (false, pattern),
            None => (true, word),
        };
        let matched: Vec<usize> =
            events.iter().enumerate().filter(|(_, (g, e))| event_matches(pattern, g, e)).map(|(index, _)| index).collect();
        if matched.is_empty() {
            return Err(TracefsError::Invalid(format!("'{word}' matches no event (see available_events)")));
        }
        changes.extend(matched.into_iter().map(|index| (index, on)));
    }
    if mode == FilterMode::Replace {
        set_enabled_all(array, None, false)?;
    }
    for (index, on) in changes {
        let (group, event) = &events[index];
        set_enabled(array, group, event, on)?;
    }
    Ok(())
}

/// Each event's files.
pub(super) const EVENT_FILES: [&str; 6] = ["enable", "filter", "format", "hist", "id", "trigger"];

/// The files under `{prefix}events/`.
pub(super) fn event_names(prefix: &str) -> alloc::vec::Vec<String> {
    let groups: alloc::collections::BTreeSet<String> = all().into_iter().map(|(group, _)| group).collect();
    let group_files =
        groups.into_iter().flat_map(|group| ["enable", "filter"].map(|file| format!("{prefix}events/{group}/{file}")));
    let events = all()
        .into_iter()
        .flat_map(|(group, event)| EVENT_FILES.iter().map(move |file| format!("{prefix}events/{group}/{event}/{file}")));
    let headers = ["header_page", "header_event"].map(|file| format!("{prefix}events/{file}"));
    core::iter::once(format!("{prefix}events/enable")).chain(headers).chain(group_files).chain(events).collect()
}

/// A file under `events/`.
pub(super) enum EventFile<'a> {
    /// `events/GRP/EVENT/enable`.
    Enable(&'a str, &'a str),
    /// `events/GRP/EVENT/format`.
    Format(&'a str, &'a str),
    /// `events/GRP/EVENT/filter`.
    Filter(&'a str, &'a str),
    /// `events/GRP/EVENT/id`.
    Id(&'a str, &'a str),
    /// `events/GRP/EVENT/trigger`.
    Trigger(&'a str, &'a str),
    /// `events/GRP/EVENT/hist`.
    Hist(&'a str, &'a str),
    /// `events/enable` (`None`) or `events/GRP/enable`.
    EnableAll(Option<&'a str>),
    /// `events/GRP/filter`.
    GroupFilter(&'a str),
    /// `events/header_page`, `events/header_event`: the ring buffer's
    /// page and event headers, as tools that read raw pages parse them.
    HeaderPage,
    HeaderEvent,
}

pub(super) fn event_file(name: &str) -> Option<EventFile<'_>> {
    let parts: alloc::vec::Vec<&str> = name.strip_prefix("events/")?.split('/').collect();
    match parts.as_slice() {
        ["enable"] => Some(EventFile::EnableAll(None)),
        ["header_page"] => Some(EventFile::HeaderPage),
        ["header_event"] => Some(EventFile::HeaderEvent),
        [group, "enable"] => Some(EventFile::EnableAll(Some(group))),
        [group, "filter"] => Some(EventFile::GroupFilter(group)),
        [group, event, "enable"] => Some(EventFile::Enable(group, event)),
        [group, event, "format"] => Some(EventFile::Format(group, event)),
        [group, event, "filter"] => Some(EventFile::Filter(group, event)),
        [group, event, "id"] => Some(EventFile::Id(group, event)),
        [group, event, "trigger"] => Some(EventFile::Trigger(group, event)),
        [group, event, "hist"] => Some(EventFile::Hist(group, event)),
        _ => None,
    }
}

pub(super) fn event_error(error: probe_events::events::EventError) -> TracefsError {
    TracefsError::Invalid(error.to_string())
}

/// `cat set_event_pid`: the pids (nothing when empty, as Linux prints it).
pub(super) fn read_event_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::events::pid::pids(array, false).iter().try_for_each(|pid| writeln!(out, "{pid}"))
}

pub(super) fn write_event_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    trace::events::pid::set_pids(array, false, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

/// `cat set_event_notrace_pid`, as `set_event_pid`.
pub(super) fn read_event_notrace_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::events::pid::pids(array, true).iter().try_for_each(|pid| writeln!(out, "{pid}"))
}

pub(super) fn write_event_notrace_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    trace::events::pid::set_pids(array, true, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

pub(super) fn read_available_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    write_available(out)
}

pub(super) fn read_set_event(array: Array, out: &mut dyn Write) -> fmt::Result {
    write_enabled(array, out)
}

pub(super) fn write_set_event(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    set_events(array, text, mode)
}
