//! Dynamic probe events: `dynamic_events`, `kprobe_events`,
//! `events/GRP/EVENT/{enable,filter,format,hist,id,trigger}`,
//! `kprobe_profile`, and their records in `cat trace`.
//!
//! An event rides on an fprobe (`f:`), a kprobe (`p:`) or a kretprobe
//! (`r:`); all share the fetch args, the record layout and the filters.
//! Kprobe handlers get a full `PtRegs`: their events may fetch any
//! register, and read it where the trap saved it (`SavedRegs::full`).
//!
//! Defining an event parses it ([`crate::definition`]), then *compiles* it:
//! the symbol must be a traceable function, every `%REG` a register the
//! sparse save records (the entry save for entry events, the return save for
//! exit events), every `$argN` one the probe can save. Any refusal leaves
//! nothing behind. Enabling registers the event's probe (an fprobe, a
//! kprobe or a kretprobe); its handler fetches the args (memory through
//! fault-tolerant reads: a bad address prints `(fault)`) and writes the
//! record to the trace buffer, with no allocation and no lock on the traced
//! path.
//!
//! An event's probe is registered while the event is enabled (at the top
//! level or in an instance, `trace::events::arrays`) or has triggers (which
//! fire whether or not it is enabled, as in Linux); the handler takes the
//! short path (straight into the top level's ring buffer) only when the
//! event is enabled there with nothing to check (`Compiled::fast`), and
//! otherwise fetches every value first, then fires the triggers, filters
//! and records, into each array that records it.
//!
//! An event's compiled form is shared (`Arc`) by its definition and by each
//! probe that records it: a probe owns one reference and drops it when the
//! probe itself is freed, after the last call it hooked has returned. So
//! removing an event frees everything it allocated once no call is in flight.
//!
//! This module keeps the defined events and answers their tracefs files;
//! `compiled` builds an event's checked form, and `record` is the traced
//! path that reads it.

mod compiled;
mod record;

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::Ordering;

use arch::ftrace_abi::RegisterError;
use ftrace::FilterMode;
use trace::array::options::TraceOption;
use trace::array::trace_array::TraceArray;
use trace::events::filter::{FilterError, FilterField};
use trace::events::trigger::{Applied, EventSwitch, Request, TriggerError};

use kprobes::kretprobe::{KretprobeConfig, RegisteredKretprobe};
use kprobes::{KprobeConfig, KprobeError, RegisteredKprobe};

use compiled::{compile, fetch_uses_args, write_format_of, Compiled};
use record::{event_entry, event_exit, kprobe_hit, kretprobe_return, kretprobe_save_args, release_compiled, EventHandlers};

use crate::definition::{self, Command, EventSpec, ProbeKind, Syntax};
use fprobe::{self as probe, FprobeConfig, RegisteredFprobe, Target};

/// Arguments an event can fetch: `$arg1` to `$arg8`.
pub const MAX_ARG_INDEX: usize = fprobe::SAVED_ARGS;

/// Why an event request failed; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventError {
    Definition(definition::DefinitionError),
    UnknownSymbol(String),
    /// The symbol named no one function (unknown, or a bare name of several).
    Name(ftrace::symbols::table::NameError),
    NotTraceable(String),
    Register {
        name: String,
        why: RegisterError,
    },
    ArgOutOfRange(usize),
    /// `$argN` in a probe that is neither at a function's entry nor its
    /// exit: the argument registers hold something else there.
    ArgsOffEntry,
    Exists(String),
    NoSuchEvent(String),
    /// `-:EVENT PLACE ARGS...` whose words do not start the event's definition.
    NotDefinedAs {
        event: String,
        definition: String,
    },
    Busy(String),
    /// Removing an event that has triggers.
    HasTriggers(String),
    /// Removing an event another event's `enable_event` trigger names.
    UsedByTrigger(String),
    Trigger(TriggerError),
    Probe(probe::FprobeError),
    Kprobe(KprobeError),
    Filter(FilterError),
    /// Every event type id was used once (ids are not reused).
    NoIds,
    /// The fetch args' fixed part (arrays, mostly) is larger than a record.
    RecordTooLarge(usize),
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::Definition(error) => write!(f, "{error}"),
            EventError::UnknownSymbol(symbol) => write!(f, "unknown symbol '{symbol}'"),
            EventError::Name(error) => write!(f, "{error}"),
            EventError::NotTraceable(symbol) => write!(f, "'{symbol}' is not a traceable function"),
            EventError::Register { name, why: RegisterError::Unknown } => write!(f, "unknown register '%{name}'"),
            EventError::Register { name, why: RegisterError::NotSaved } => {
                write!(f, "register '%{name}' is not saved by the sparse (ARGS) register save")
            }
            EventError::ArgOutOfRange(n) => write!(f, "$arg{n}: only $arg1 to $arg{MAX_ARG_INDEX} can be fetched"),
            EventError::ArgsOffEntry => write!(f, "$arg* can be used only on function entry or exit"),
            EventError::Exists(name) => write!(f, "event '{name}' already exists"),
            EventError::NoSuchEvent(name) => write!(f, "no event '{name}'"),
            EventError::NotDefinedAs { event, definition } => {
                write!(f, "event '{event}' is not defined as '{definition}' (see its definition in the list)")
            }
            EventError::Busy(name) => write!(f, "event '{name}' is enabled; disable it first"),
            EventError::HasTriggers(name) => write!(f, "event '{name}' has triggers; remove them first"),
            EventError::UsedByTrigger(name) => {
                write!(f, "event '{name}' is switched by a trigger or function command (enable_event, disable_event); remove that first")
            }
            EventError::Trigger(error) => write!(f, "{error}"),
            EventError::Probe(error) => write!(f, "{error}"),
            EventError::Kprobe(error) => write!(f, "{error}"),
            EventError::Filter(error) => write!(f, "{error}"),
            EventError::NoIds => write!(f, "no event type ids left (each is used once)"),
            EventError::RecordTooLarge(size) => {
                write!(f, "the fetch args take {size} bytes, more than a record's {}", crate::layout::MAX_RECORD)
            }
        }
    }
}

impl From<definition::DefinitionError> for EventError {
    fn from(error: definition::DefinitionError) -> Self {
        EventError::Definition(error)
    }
}

/// The probe an enabled event rides on.
enum Armed {
    Fprobe(RegisteredFprobe),
    Kprobe(RegisteredKprobe),
    Kretprobe(RegisteredKretprobe),
}

impl Armed {
    fn nmissed(&self) -> u64 {
        match self {
            Armed::Fprobe(probe) => probe.nmissed(),
            Armed::Kprobe(probe) => probe.nmissed(),
            Armed::Kretprobe(probe) => probe.nmissed(),
        }
    }
}

struct Event {
    spec: EventSpec,
    compiled: Arc<Compiled>,
    function: usize,
    /// Registered while the event is enabled, has triggers or is in soft
    /// mode.
    probe: Option<Armed>,
    /// The `enable_event`/`disable_event` triggers naming this event.
    soft_refs: usize,
    /// Misses of the probes this event rode on before the current one.
    missed_before: u64,
    /// Whether its probe was ever registered for the top level (enabled
    /// there, or triggers), so records of it may be in the top level's
    /// buffers (Linux's `WAS_ENABLED`; an instance's is
    /// `EventArrays::ever_enabled`).
    was_armed: bool,
}

impl Event {
    fn name(&self) -> String {
        full_name(&self.spec.group, &self.spec.event)
    }

    /// Refuses to remove an event that is enabled, has triggers, is named
    /// by another event's trigger, or still has its probe (one that could
    /// not be unregistered).
    fn check_removable(&self) -> Result<(), EventError> {
        if self.compiled.enabled.load(Ordering::Relaxed) || self.compiled.arrays.any_enabled() {
            return Err(EventError::Busy(self.name()));
        }
        if self.compiled.triggers.is_set() || self.compiled.arrays.any_triggers() {
            return Err(EventError::HasTriggers(self.name()));
        }
        if self.soft_refs > 0 || self.compiled.arrays.any_soft() {
            return Err(EventError::UsedByTrigger(self.name()));
        }
        if self.probe.is_some() {
            return Err(EventError::Busy(self.name()));
        }
        Ok(())
    }

    fn is_kprobe(&self) -> bool {
        self.spec.kind != ProbeKind::Fprobe
    }

    fn in_syntax(&self, syntax: Syntax) -> bool {
        syntax == Syntax::Dynamic || self.is_kprobe()
    }
}

/// The defined events, behind a sleeping mutex (enabling one registers a
/// probe: a long path, in task context only).
static EVENTS: arch::sync::Mutex<Vec<Event>> = arch::sync::Mutex::new(Vec::new());
fn full_name(group: &str, event: &str) -> String {
    format!("{group}/{event}")
}

/// One command (a line) written to `dynamic_events`: `>` replaces every
/// event (refused while any is enabled), `>>` adds or removes one. (A
/// write of several lines is several commands: tracefs hands them over
/// one by one, as Linux parses the file.)
pub fn write_dynamic_events(text: &str, mode: FilterMode) -> Result<(), EventError> {
    write_probe_events(text, mode, Syntax::Dynamic)
}

/// Whether every probe event could be removed now (none enabled,
/// triggered or named by a trigger): for a write that removes other
/// dynamic events too and must not start what it cannot finish.
pub fn check_removable_all() -> Result<(), EventError> {
    EVENTS.lock().iter().try_for_each(Event::check_removable)
}

/// A write to `kprobe_events`: as `dynamic_events`, for kprobe and
/// kretprobe events only.
pub fn write_kprobe_events(text: &str, mode: FilterMode) -> Result<(), EventError> {
    write_probe_events(text, mode, Syntax::Kprobe)
}

fn write_probe_events(text: &str, mode: FilterMode, syntax: Syntax) -> Result<(), EventError> {
    let mut stale = Stale(0);
    let result = edit_probe_events(&mut EVENTS.lock(), text, mode, syntax, &mut stale);
    // Records of a removed event that recorded would have no format left
    // to print them with: the buffers of each array it was enabled in
    // are emptied, live and snapshot, as Linux resets a trace array when
    // an event it enabled goes. (After the events' lock: `cat trace`
    // prints under the buffer's lock and takes the events' one.)
    if stale.0 != 0 {
        trace::array::instances::reset_buffers_of_slots(stale.0);
    }
    result
}

/// The trace arrays whose buffers may hold records of removed events: a
/// bit per array slot (the top level's is bit 0).
struct Stale(u32);

/// Removes the events `doomed` picks, adding the arrays each one may have
/// recorded into to `stale`.
fn remove_events(events: &mut Vec<Event>, doomed: impl Fn(&Event) -> bool, stale: &mut Stale) {
    for event in events.iter().filter(|e| doomed(e)) {
        stale.0 |= u32::from(event.was_armed) | event.compiled.arrays.ever_enabled();
    }
    events.retain(|e| !doomed(e));
}

fn edit_probe_events(
    events: &mut Vec<Event>,
    text: &str,
    mode: FilterMode,
    syntax: Syntax,
    stale: &mut Stale,
) -> Result<(), EventError> {
    // A `#` starts a comment, as Linux reads these files: a line of only
    // a comment defines nothing (and, written with `>`, still clears).
    let text = text.split('#').next().unwrap_or_default();
    if mode == FilterMode::Replace {
        events.iter().filter(|e| e.in_syntax(syntax)).try_for_each(Event::check_removable)?;
        if text.trim().is_empty() {
            remove_events(events, |e| e.in_syntax(syntax), stale);
            return Ok(());
        }
    }
    if text.trim().is_empty() {
        return Ok(());
    }
    match definition::parse_as(text, syntax)? {
        // Every event of that name (in any group, without `GRP/`), as
        // Linux removes them; all removable, or none is removed.
        Command::Remove { group, event, matching } => {
            // An empty event (`-:GRP/`): every event of the group.
            let named = |e: &Event| {
                e.in_syntax(syntax)
                    && (event.is_empty() || e.spec.event == event)
                    && group.as_ref().is_none_or(|g| *g == e.spec.group)
            };
            if !events.iter().any(named) {
                return Err(EventError::NoSuchEvent(match (&group, event.is_empty()) {
                    (Some(group), true) => format!("{group}/"),
                    _ => event,
                }));
            }
            let matches = |e: &Event| named(e) && e.spec.starts_with(&matching);
            if !events.iter().any(matches) {
                return Err(EventError::NotDefinedAs { event, definition: matching.join(" ") });
            }
            events.iter().filter(|e| matches(e)).try_for_each(Event::check_removable)?;
            remove_events(events, matches, stale);
            Ok(())
        }
        Command::Define(spec) => {
            // A truncating write replaces this file's events: they are no
            // obstacle. A static event's name always is.
            let taken = |e: &Event| {
                (mode != FilterMode::Replace || !e.in_syntax(syntax)) && e.spec.event == spec.event && e.spec.group == spec.group
            };
            let synthetic = spec.group == trace::events::synth::GROUP && trace::events::synth::find(&spec.event).is_some();
            if events.iter().any(taken) || trace::events::sched::SchedEvent::find(&spec.group, &spec.event).is_some() || synthetic
            {
                return Err(EventError::Exists(full_name(&spec.group, &spec.event)));
            }
            let (function, mut compiled) = compile(&spec)?;
            compiled.id = trace::events::record::new_dynamic_id().ok_or(EventError::NoIds)?;
            if mode == FilterMode::Replace {
                remove_events(events, |e| e.in_syntax(syntax), stale);
            }
            events.push(Event {
                spec,
                compiled: Arc::new(compiled),
                function,
                probe: None,
                soft_refs: 0,
                missed_before: 0,
                was_armed: false,
            });
            Ok(())
        }
    }
}

/// `cat dynamic_events`.
pub fn read_dynamic_events(out: &mut dyn Write) -> fmt::Result {
    read_probe_events(out, Syntax::Dynamic)
}

/// `cat kprobe_events`.
pub fn read_kprobe_events(out: &mut dyn Write) -> fmt::Result {
    read_probe_events(out, Syntax::Kprobe)
}

fn read_probe_events(out: &mut dyn Write, syntax: Syntax) -> fmt::Result {
    for event in EVENTS.lock().iter().filter(|e| e.in_syntax(syntax)) {
        writeln!(out, "{}", event.spec)?;
    }
    Ok(())
}

/// `cat kprobe_profile`: each kprobe event's hits and misses, as Linux.
pub fn read_kprobe_profile(out: &mut dyn Write) -> fmt::Result {
    for event in EVENTS.lock().iter().filter(|e| e.is_kprobe()) {
        let hits = event.compiled.hits.load(Ordering::Relaxed);
        let missed = event.missed_before + event.probe.as_ref().map_or(0, Armed::nmissed);
        writeln!(out, "  {:<44} {:>15} {:>15}", event.spec.event, hits, missed)?;
    }
    Ok(())
}

/// Every event as `GRP/EVENT`, for `ls`.
pub fn event_names() -> Vec<String> {
    EVENTS.lock().iter().map(|e| full_name(&e.spec.group, &e.spec.event)).collect()
}

fn find<'a>(events: &'a mut [Event], group: &str, event: &str) -> Result<&'a mut Event, EventError> {
    events
        .iter_mut()
        .find(|e| e.spec.group == group && e.spec.event == event)
        .ok_or_else(|| EventError::NoSuchEvent(full_name(group, event)))
}

/// `echo 0|1 > events/GRP/EVENT/enable`, in trace array `array` (the
/// top level, or an instance's `events/`).
pub fn set_enabled(array: &TraceArray, group: &str, event: &str, enabled: bool) -> Result<(), EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    if !array.is_top() {
        let before = entry.compiled.arrays.contains(array);
        entry.compiled.arrays.set(array, enabled);
        refresh_fast(&entry.compiled);
        return update_probe(entry).inspect_err(|_| {
            entry.compiled.arrays.set(array, before);
            refresh_fast(&entry.compiled);
        });
    }
    let before = entry.compiled.enabled.swap(enabled, Ordering::Relaxed);
    // In soft mode, `enable` sets the switch too, as Linux's write clears
    // or sets SOFT_DISABLED.
    entry.compiled.soft_on.store(enabled, Ordering::Relaxed);
    refresh_fast(&entry.compiled);
    update_probe(entry).inspect_err(|_| {
        entry.compiled.enabled.store(before, Ordering::Relaxed);
        refresh_fast(&entry.compiled);
    })
}

/// `rmdir instances/NAME`: no event records into `array` or has triggers
/// there any more, and their probes go if nothing else keeps them. (A probe that cannot be
/// unregistered now stays armed, recording only where enabled, and goes
/// with its event.)
pub fn forget_array(array: &TraceArray) {
    for entry in EVENTS.lock().iter_mut() {
        entry.compiled.arrays.forget(array);
        refresh_fast(&entry.compiled);
        let _ = update_probe(entry);
    }
}

/// Sets [`Compiled::fast`] from what the event has now.
fn refresh_fast(compiled: &Compiled) {
    let fast = compiled.enabled.load(Ordering::Relaxed)
        && !compiled.by_values
        && !compiled.filter.is_set()
        && !compiled.triggers.is_set()
        && !compiled.soft_mode.load(Ordering::Relaxed)
        && compiled.arrays.is_empty()
        && !trace::array::instances::top().option(TraceOption::StackTrace);
    compiled.fast.store(fast, Ordering::Relaxed);
}

/// Every event takes the path `options/stacktrace` (now as it is) asks
/// for: a stack trace after each record needs the slow path's chain.
pub fn stack_trace_option_changed() {
    for entry in EVENTS.lock().iter() {
        refresh_fast(&entry.compiled);
    }
}

/// Registers the event's probe if it is enabled (at the top level or in
/// an instance) or has triggers, and
/// unregisters it otherwise.
fn update_probe(entry: &mut Event) -> Result<(), EventError> {
    let compiled = &entry.compiled;
    let wanted = compiled.enabled.load(Ordering::Relaxed)
        || !compiled.arrays.is_empty()
        || compiled.triggers.is_set()
        || entry.soft_refs > 0;
    // For the top level: enabled there, or triggers (soft mode records
    // there too).
    let for_top = compiled.enabled.load(Ordering::Relaxed) || compiled.triggers.is_set() || entry.soft_refs > 0;
    match (wanted, entry.probe.take()) {
        (true, Some(probe)) => entry.probe = Some(probe),
        (true, None) => entry.probe = Some(arm(entry)?),
        (false, None) => {}
        (false, Some(armed)) => {
            entry.missed_before += armed.nmissed();
            match armed {
                Armed::Fprobe(probe) => {
                    if let Err((probe, error)) = probe.unregister() {
                        entry.probe = Some(Armed::Fprobe(probe));
                        return Err(EventError::Probe(error));
                    }
                }
                Armed::Kprobe(probe) => probe.unregister(),
                Armed::Kretprobe(probe) => probe.unregister(),
            }
        }
    }
    entry.was_armed |= for_top && entry.probe.is_some();
    Ok(())
}

/// A parsed line written to `events/GRP/EVENT/trigger` (an
/// `enable_event`'s switch already resolved): adds or removes one trigger,
/// registering the event's probe for a first trigger and unregistering it
/// after the last one if nothing else keeps it. A refused line, or a probe
/// that cannot be registered, changes nothing.
pub fn apply_trigger(array: &TraceArray, group: &str, event: &str, request: Request) -> Result<Applied, EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    let compiled = entry.compiled.clone();
    let applied = match array.is_top() {
        true => compiled.triggers.apply(array, request),
        false => compiled.arrays.apply_trigger(array, request),
    }
    .map_err(EventError::Trigger)?;
    refresh_fast(&compiled);
    match (update_probe(entry), &applied) {
        (Err(error), Applied::Added(command, target)) => {
            match array.is_top() {
                true => compiled.triggers.remove(*command, target.as_ref()),
                false => compiled.arrays.remove_trigger(array, *command, target.as_ref()),
            }
            refresh_fast(&compiled);
            Err(error)
        }
        // A removal stands (the caller gives back what it named); a probe
        // that cannot be unregistered now stays armed, recording only if
        // enabled, and goes with the event.
        _ => Ok(applied),
    }
}

/// The fields an event's filters (and triggers' filters) can name.
pub fn filter_fields(group: &str, event: &str) -> Result<Vec<FilterField>, EventError> {
    let mut events = EVENTS.lock();
    Ok(find(&mut events, group, event)?.compiled.filter_fields())
}

/// For a new `enable_event`/`disable_event` trigger naming this event: puts
/// it in soft mode (armed, recording while the trigger's switch is on) and
/// answers the switch.
pub fn acquire_soft(array: &TraceArray, group: &str, event: &str) -> Result<Arc<dyn EventSwitch>, EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    if !array.is_top() {
        let compiled = entry.compiled.clone();
        let switch = compiled.arrays.acquire_soft(array, compiled.clone(), |compiled: &Arc<Compiled>| &compiled.arrays);
        refresh_fast(&compiled);
        if let Err(error) = update_probe(entry) {
            compiled.arrays.release_soft(array);
            refresh_fast(&compiled);
            return Err(error);
        }
        return Ok(switch);
    }
    entry.soft_refs += 1;
    if entry.soft_refs == 1 {
        // Recording goes on as it was until a trigger switches it.
        entry.compiled.soft_on.store(entry.compiled.enabled.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    // After the switch: a hit that sees soft mode sees the switch's start.
    entry.compiled.soft_mode.store(true, Ordering::Release);
    refresh_fast(&entry.compiled);
    if let Err(error) = update_probe(entry) {
        release(entry);
        return Err(error);
    }
    Ok(entry.compiled.clone())
}

/// A trigger naming this event went (or was refused after
/// [`acquire_soft`]): the last one takes the event out of soft mode.
pub fn release_soft(array: &TraceArray, group: &str, event: &str) {
    let mut events = EVENTS.lock();
    if let Ok(entry) = find(&mut events, group, event) {
        match array.is_top() {
            true => release(entry),
            false => {
                entry.compiled.arrays.release_soft(array);
                refresh_fast(&entry.compiled);
            }
        }
        // Nothing to do if it cannot be unregistered now: it stays armed,
        // recording only if enabled, and goes with the event.
        let _ = update_probe(entry);
    }
}

fn release(entry: &mut Event) {
    entry.soft_refs = entry.soft_refs.saturating_sub(1);
    if entry.soft_refs == 0 {
        // The event stays as the triggers left it, as in Linux: switched
        // on, it is enabled; off, disabled.
        let compiled = &entry.compiled;
        compiled.enabled.store(compiled.soft_on.load(Ordering::Relaxed), Ordering::Relaxed);
        compiled.soft_mode.store(false, Ordering::Release);
        refresh_fast(compiled);
    }
}

/// What `cat enable` shows, as Linux: whether the event records, and
/// whether triggers keep it armed (its own, or another event's naming it:
/// the `*` of soft mode).
pub fn enable_state(array: &TraceArray, group: &str, event: &str) -> Result<(bool, bool), EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    if !array.is_top() {
        return Ok(entry.compiled.arrays.enable_state(array));
    }
    Ok((entry.compiled.records(), entry.compiled.triggers.is_set() || entry.soft_refs > 0))
}

/// `cat events/GRP/EVENT/trigger` in trace array `array`.
pub fn trigger_text(array: &TraceArray, group: &str, event: &str) -> Result<String, EventError> {
    let mut events = EVENTS.lock();
    let compiled = &find(&mut events, group, event)?.compiled;
    Ok(if array.is_top() { compiled.triggers.text() } else { compiled.arrays.trigger_text(array) })
}

/// `cat events/GRP/EVENT/hist`: its `hist` triggers' tables, if any
/// (printed without holding the events' lock).
pub fn hist_text(
    array: &TraceArray,
    group: &str,
    event: &str,
    names: trace::events::hist::Namer,
    comms: trace::events::hist::Comms,
) -> Result<Option<String>, EventError> {
    let compiled = find(&mut EVENTS.lock(), group, event)?.compiled.clone();
    Ok(match array.is_top() {
        true => compiled.triggers.hist_text(names, comms),
        false => compiled.arrays.hist_text(array, names, comms),
    })
}

/// Registers the probe an event rides on.
fn arm(entry: &Event) -> Result<Armed, EventError> {
    let compiled = &entry.compiled;
    let uses_args = compiled.fetches.iter().any(|(fetch, _)| fetch_uses_args(fetch));
    match &entry.spec.kind {
        ProbeKind::Fprobe => {
            // The probe owns a reference to the compiled form, dropped when
            // the probe is freed (`release_compiled`).
            let private = Arc::into_raw(compiled.clone()) as usize;
            let config = FprobeConfig {
                entry: (!compiled.exit).then_some(event_entry as probe::EntryHandler),
                exit: compiled.exit.then_some(event_exit as probe::ExitHandler),
                entry_data_words: 0,
                save_args: compiled.exit && uses_args,
                private,
                free_private: Some(release_compiled),
            };
            probe::register_of::<EventHandlers>(config, Target::Addresses(&[entry.function])).map(Armed::Fprobe).map_err(
                |error| {
                    release_compiled(private);
                    EventError::Probe(error)
                },
            )
        }
        // Kprobes unregister synchronously: the event's own reference
        // outlives every handler.
        ProbeKind::Kprobe(location) => {
            let config =
                KprobeConfig { pre_handler: Some(kprobe_hit), post_handler: None, private: Arc::as_ptr(compiled) as usize };
            kprobes::register_kprobe(location, config).map(Armed::Kprobe).map_err(EventError::Kprobe)
        }
        ProbeKind::Kretprobe { location, maxactive } => {
            let config = KretprobeConfig {
                entry_handler: uses_args.then_some(kretprobe_save_args as kprobes::kretprobe::EntryHandler),
                handler: kretprobe_return,
                data_words: if uses_args { MAX_ARG_INDEX } else { 0 },
                maxactive: *maxactive,
                private: Arc::as_ptr(compiled) as usize,
            };
            kprobes::register_kretprobe(location, config).map(Armed::Kretprobe).map_err(EventError::Kprobe)
        }
    }
}

/// Whether `events/GRP/EVENT/enable` is 1 in trace array `array`.
pub fn is_enabled(array: &TraceArray, group: &str, event: &str) -> Result<bool, EventError> {
    let mut events = EVENTS.lock();
    let compiled = &find(&mut events, group, event)?.compiled;
    Ok(match array.is_top() {
        true => compiled.enabled.load(Ordering::Relaxed),
        false => compiled.arrays.contains(array),
    })
}

/// Calls an event missed (recursion, full return stack).
pub fn nmissed(group: &str, event: &str) -> Result<u64, EventError> {
    let mut events = EVENTS.lock();
    let event = find(&mut events, group, event)?;
    Ok(event.missed_before + event.probe.as_ref().map_or(0, Armed::nmissed))
}

/// `cat events/GRP/EVENT/format`, Linux's format description.
pub fn write_format(group: &str, event: &str, out: &mut dyn Write) -> Result<(), EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    let _ = write_format_of(&entry.compiled, out);
    Ok(())
}

/// Prints a dynamic event's record for `cat trace` (None: not one of ours);
/// `sym_addr`: with each address's value too (`options/sym-addr`).
pub fn print_event(payload: &[u8], sym_addr: bool, out: &mut dyn Write) -> Option<fmt::Result> {
    let kind = u16::from_ne_bytes(payload.get(0..2)?.try_into().ok()?);
    let events = EVENTS.lock();
    let compiled = events.iter().map(|e| &e.compiled).find(|c| c.id == kind)?;
    let names = |address: usize| ftrace::symbols::kernel::table().ok()?.lookup(address);
    Some(compiled.layout.write(&compiled.event, payload, &names, sym_addr, out))
}

/// A dynamic event's `format` text by its type id (None: not one of ours),
/// for `options/fields`.
pub fn format_of(kind: u16) -> Option<String> {
    let events = EVENTS.lock();
    let compiled = events.iter().map(|e| &e.compiled).find(|c| c.id == kind)?;
    let mut text = String::new();
    let _ = write_format_of(compiled, &mut text);
    Some(text)
}

/// `echo EXPR > events/GRP/EVENT/filter` (`0` clears it) in trace array
/// `array`; a bad filter changes nothing.
pub fn set_filter(array: &TraceArray, group: &str, event: &str, text: &str) -> Result<(), EventError> {
    let mut events = EVENTS.lock();
    let compiled = &find(&mut events, group, event)?.compiled;
    let fields = compiled.filter_fields();
    match array.is_top() {
        true => compiled.filter.set(text, &fields),
        false => compiled.arrays.set_filter(array, text, &fields),
    }
    .map_err(EventError::Filter)?;
    refresh_fast(compiled);
    Ok(())
}

/// `cat events/GRP/EVENT/id`: the event's type id.
pub fn id(group: &str, event: &str) -> Result<u16, EventError> {
    let mut events = EVENTS.lock();
    Ok(find(&mut events, group, event)?.compiled.id)
}

/// `cat events/GRP/EVENT/filter` in trace array `array`: the filter, or
/// `none`.
pub fn filter_text(array: &TraceArray, group: &str, event: &str) -> Result<String, EventError> {
    let mut events = EVENTS.lock();
    let compiled = &find(&mut events, group, event)?.compiled;
    Ok(if array.is_top() { compiled.filter.text() } else { compiled.arrays.filter_text(array) })
}

/// Every event's format, as (group, `format` text), for the trace stream.
pub fn formats() -> Vec<(String, String)> {
    EVENTS
        .lock()
        .iter()
        .map(|event| {
            let mut text = String::new();
            let _ = write_format_of(&event.compiled, &mut text);
            (event.spec.group.clone(), text)
        })
        .collect()
}
