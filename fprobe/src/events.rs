//! Dynamic probe events: `dynamic_events`, `kprobe_events`,
//! `events/GRP/EVENT/{enable,filter,format,id,trigger}`, `kprobe_profile`,
//! and their records in `cat trace`.
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
//! nothing behind. Enabling registers an fprobe on the function; its handler
//! fetches the args (memory through fault-tolerant reads: a bad address
//! prints `(fault)`) into a record on the stack and writes it to the trace
//! buffer, with no allocation and no lock on the traced path.
//!
//! An event's probe is registered while the event is enabled or has
//! triggers (which fire whether or not it is enabled, as in Linux); the
//! handler takes the short path (straight into the ring buffer) only when
//! the event is enabled with nothing to check (`Compiled::fast`), and
//! otherwise fetches every value first, then fires the triggers, filters
//! and records.
//!
//! An event's compiled form is shared (`Arc`) by its definition and by each
//! probe that records it: a probe owns one reference and drops it when the
//! probe itself is freed, after the last call it hooked has returned. So
//! removing an event frees everything it allocated once no call is in flight.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU16, Ordering};

use arch::ftrace_abi::{FtraceRegs, RegisterArgument, RegisterError, Saved, SavedRegs};
use ftrace::event_filter::{FieldKind, FieldValue, FilterError, FilterField, FilterSlot};
use ftrace::event_trigger::{Applied, EventSwitch, Phase, Request, StackStart, TriggerError, Triggers};
use ftrace::instance::TraceOption;
use ftrace::tracer::event_common;
use ftrace::FilterMode;

use arch::ftrace_abi::PtRegs;
use kprobes::kretprobe::{Kretprobe, KretprobeConfig, RegisteredKretprobe};
use kprobes::{Kprobe, KprobeConfig, KprobeError, RegisteredKprobe};

use crate::definition::{self, ArgType, Command, EventSpec, ProbeKind, Source, Syntax};
use crate::layout::{Layout, Value, WordRecord, MAX_RECORD, MAX_STRING};
use crate::probe::{self, EntryData, Fprobe, FprobeConfig, RegisteredFprobe, Target};

/// Arguments an event can fetch: `$arg1` to `$arg8`.
pub const MAX_ARG_INDEX: usize = crate::probe::SAVED_ARGS;

/// Why an event request failed; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventError {
    Definition(definition::DefinitionError),
    UnknownSymbol(String),
    /// The symbol named no one function (unknown, or a bare name of several).
    Name(ftrace::kallsyms::NameError),
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
        }
    }
}

impl From<definition::DefinitionError> for EventError {
    fn from(error: definition::DefinitionError) -> Self {
        EventError::Definition(error)
    }
}

/// A fetch source with names resolved.
enum Fetch {
    Arg(usize),
    Retval,
    Stack(usize),
    StackPointer,
    /// The current task's name: its address, read as a string.
    Comm,
    Register(usize),
    Memory {
        offset: i64,
        base: Box<Fetch>,
    },
    /// A constant: the address `@ADDR` and `@SYM` read at.
    Immediate(u64),
}

/// A fetch arg the fixed-size record path reads with no fetch interpreter:
/// a register value every save of its kind holds, stored as 8 bytes.
#[derive(Clone, Copy, Debug)]
enum Quick {
    /// A register argument of an entry save.
    Arg(RegisterArgument),
    /// Argument `n` the entry kept for an exit event.
    SavedArg(usize),
    /// The return-value register.
    Retval,
}

/// A record of [`Quick`] fetches and the function that writes it.
struct Words {
    fields: Vec<Quick>,
    write: WriteWords,
}

/// Writes a record of `WordRecord`'s shape: the event, its fetches, the ips
/// (`[ip, 0]` at entry, `[func, ret_ip]` at exit) and where to fetch from.
type WriteWords = fn(&Compiled, &[Quick], [u64; 2], &Context);

/// The most fields an event written by [`write_words`] has.
const MAX_WORD_FIELDS: usize = 6;

/// What the handlers need: immutable once built.
struct Compiled {
    id: u16,
    event: String,
    layout: Layout,
    fetches: Vec<(Fetch, ArgType)>,
    /// The fetches as [`Quick`] ones, and the writer made for the record's
    /// shape, when every fetch can be one (the usual `$argN`/`$retval`
    /// event, up to [`MAX_WORD_FIELDS`] of them).
    words: Option<Words>,
    /// Whether a fetch arg is a string (records of varying size).
    has_strings: bool,
    exit: bool,
    /// `events/GRP/EVENT/filter`.
    filter: FilterSlot,
    /// `events/GRP/EVENT/trigger`.
    triggers: Triggers,
    /// `events/GRP/EVENT/enable`.
    enabled: AtomicBool,
    /// Soft mode: another event's `enable_event`/`disable_event` trigger
    /// names this one. It is armed, and records while `soft_on` (not as
    /// `enabled` says), as Linux's soft mode.
    soft_mode: AtomicBool,
    /// The switch those triggers flip from their event's hit path; `enable`
    /// writes set it too.
    soft_on: AtomicBool,
    /// Whether a hit takes the short path: enabled, with no strings, no
    /// filter, no trigger and not in soft mode (set by [`refresh_fast`]
    /// under the events' lock whenever one of those changes).
    fast: AtomicBool,
    /// Times a handler recorded or tried to (`kprobe_profile`'s hits).
    hits: core::sync::atomic::AtomicU64,
}

impl Compiled {
    /// The fields a filter can name: `common_pid`, the probe's addresses,
    /// then the fetch args (what `format` lists, in that order).
    fn filter_fields(&self) -> Vec<FilterField> {
        let ips: &[&str] = if self.exit { &["__probe_func", "__probe_ret_ip"] } else { &["__probe_ip"] };
        let mut fields = alloc::vec![FilterField::new("common_pid", FieldKind::Signed)];
        fields.extend(ips.iter().map(|name| FilterField::new(*name, FieldKind::Unsigned)));
        fields.extend(self.layout.fields.iter().map(|field| {
            let kind = match field.ty {
                ArgType::Signed(_) => FieldKind::Signed,
                ArgType::String => FieldKind::String,
                _ => FieldKind::Unsigned,
            };
            FilterField::new(field.name.clone(), kind)
        }));
        fields
    }
}

/// A fetched value as a filter sees it: cut to the field's size (and
/// sign-extended for a signed one), as the record will hold it.
fn filter_value<'a>(ty: ArgType, value: Value<'a>) -> FieldValue<'a> {
    let bits = |bits: u8| if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    match (ty, value) {
        (_, Value::Fault) => FieldValue::Missing,
        (_, Value::Str(bytes)) => FieldValue::Str(bytes),
        (ArgType::Signed(n), Value::Int(v)) => {
            let shift = 64 - u32::from(n.min(64));
            FieldValue::Signed(((v << shift) as i64) >> shift)
        }
        (ArgType::Unsigned(n) | ArgType::Hex(n), Value::Int(v)) => FieldValue::Unsigned(v & bits(n)),
        (ArgType::Char, Value::Int(v)) => FieldValue::Unsigned(v & bits(8)),
        (_, Value::Int(v)) => FieldValue::Unsigned(v),
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
    /// Whether its probe was ever registered, so records of it may be in
    /// the buffers (Linux's `WAS_ENABLED`).
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
        if self.compiled.enabled.load(Ordering::Relaxed) {
            return Err(EventError::Busy(self.name()));
        }
        if self.compiled.triggers.is_set() {
            return Err(EventError::HasTriggers(self.name()));
        }
        if self.soft_refs > 0 {
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
/// Event type ids of dynamic events start here and are never reused (a
/// record left in a buffer keeps meaning its event); when they run out,
/// definitions are refused.
static NEXT_ID: AtomicU16 = AtomicU16::new(1000);

fn compile_source(source: &Source, saved: Saved) -> Result<Fetch, EventError> {
    Ok(match source {
        Source::Arg(n) if *n > MAX_ARG_INDEX => return Err(EventError::ArgOutOfRange(*n)),
        Source::Arg(n) => Fetch::Arg(n - 1),
        Source::Retval => Fetch::Retval,
        Source::Stack(n) => Fetch::Stack(*n),
        Source::StackPointer => Fetch::StackPointer,
        Source::Comm => Fetch::Comm,
        Source::Register(name) => Fetch::Register(
            FtraceRegs::query_register_offset_in(saved, name).map_err(|why| EventError::Register { name: name.clone(), why })?,
        ),
        Source::Memory { offset, base } => Fetch::Memory { offset: *offset, base: Box::new(compile_source(base, saved)?) },
        Source::Address(address) => Fetch::Memory { offset: 0, base: Box::new(Fetch::Immediate(*address)) },
        Source::Symbol { name, offset } => {
            let table = ftrace::symbols::table().map_err(|_| EventError::UnknownSymbol(name.clone()))?;
            let symbol = table.resolve_data(name).map_err(EventError::Name)?;
            Fetch::Memory { offset: *offset, base: Box::new(Fetch::Immediate(symbol.address as u64)) }
        }
    })
}

/// Where an event's probe goes, checked: the address, which save its
/// handlers see, and whether `$argN` means anything there (at a function's
/// entry, or its exit, which gets the entry's arguments).
fn place_of(spec: &EventSpec) -> Result<(usize, Saved, bool), EventError> {
    let kprobe_place = |location| kprobes::probe::resolve(location).map_err(EventError::Kprobe);
    match &spec.kind {
        ProbeKind::Fprobe => {
            let table = ftrace::symbols::table().map_err(|_| EventError::UnknownSymbol(spec.symbol.clone()))?;
            let symbol = table.resolve(&spec.symbol).map_err(EventError::Name)?;
            if ftrace::site(symbol.address).is_none_or(|site| site.failed) {
                return Err(EventError::NotTraceable(spec.symbol.clone()));
            }
            Ok((symbol.address, if spec.exit { Saved::Return } else { Saved::EntryArgs }, true))
        }
        ProbeKind::Kprobe(location) => {
            let place = kprobe_place(location)?;
            // The instruction must be one a probe can run (decoded now, so
            // a bad one is refused at definition, as Linux does).
            if !place.at_entry {
                kprobes::probe::instruction_at(place.address).map_err(|why| {
                    EventError::Kprobe(KprobeError::Instruction { function: place.function.into(), offset: place.offset, why })
                })?;
            }
            Ok((place.address, Saved::EntryFull, place.at_entry))
        }
        ProbeKind::Kretprobe { location, .. } => {
            let place = kprobe_place(location)?;
            if !place.at_entry {
                return Err(EventError::Kprobe(KprobeError::NotAtEntry {
                    function: place.function.into(),
                    offset: place.offset,
                }));
            }
            Ok((place.address, Saved::ReturnFull, true))
        }
    }
}

fn compile(spec: &EventSpec) -> Result<(usize, Compiled), EventError> {
    let (address, saved, args_mean_arguments) = place_of(spec)?;
    if !args_mean_arguments && spec.args.iter().any(|arg| arg.source.fetches_an_argument()) {
        return Err(EventError::ArgsOffEntry);
    }
    let fetches =
        spec.args.iter().map(|arg| Ok((compile_source(&arg.source, saved)?, arg.ty))).collect::<Result<Vec<_>, EventError>>()?;
    let has_strings = fetches.iter().any(|(_, ty)| *ty == ArgType::String);
    let layout = Layout::new(spec);
    let words = word_fetches(&fetches, &layout, spec.exit);
    let compiled = Compiled {
        id: 0,
        event: spec.event.clone(),
        layout,
        fetches,
        words,
        has_strings,
        exit: spec.exit,
        filter: FilterSlot::new(),
        triggers: Triggers::new(),
        enabled: AtomicBool::new(false),
        soft_mode: AtomicBool::new(false),
        soft_on: AtomicBool::new(false),
        fast: AtomicBool::new(false),
        hits: core::sync::atomic::AtomicU64::new(0),
    };
    Ok((address, compiled))
}

/// The fetches as [`Quick`] ones and their record's writer, if every one
/// is an 8-byte register argument or the return value, and a writer is
/// made for their number.
fn word_fetches(fetches: &[(Fetch, ArgType)], layout: &Layout, exit: bool) -> Option<Words> {
    let fields = fetches
        .iter()
        .map(|(fetch, ty)| match *fetch {
            // A bitfield's bits are taken out after the fetch.
            _ if ty.size() != 8 || matches!(ty, ArgType::Bitfield { .. }) => None,
            Fetch::Arg(n) if exit => Some(Quick::SavedArg(n)),
            Fetch::Arg(n) => Some(Quick::Arg(RegisterArgument::new(n)?)),
            Fetch::Retval => Some(Quick::Retval),
            _ => None,
        })
        .collect::<Option<Vec<Quick>>>()?;
    let write = if exit { word_writer::<true>(fields.len(), layout)? } else { word_writer::<false>(fields.len(), layout)? };
    Some(Words { fields, write })
}

/// The writer for records of `fields` word fields, if `layout` is their
/// shape.
fn word_writer<const EXIT: bool>(fields: usize, layout: &Layout) -> Option<WriteWords> {
    fn shaped<const EXIT: bool, const N: usize>(layout: &Layout) -> Option<WriteWords> {
        WordRecord::<EXIT, N>::fits(layout).then_some(write_words::<EXIT, N> as WriteWords)
    }
    const _: () = assert!(MAX_WORD_FIELDS == 6, "one arm below per field count");
    match fields {
        0 => shaped::<EXIT, 0>(layout),
        1 => shaped::<EXIT, 1>(layout),
        2 => shaped::<EXIT, 2>(layout),
        3 => shaped::<EXIT, 3>(layout),
        4 => shaped::<EXIT, 4>(layout),
        5 => shaped::<EXIT, 5>(layout),
        6 => shaped::<EXIT, 6>(layout),
        _ => None,
    }
}

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

/// A write to `kprobe_events`: as `dynamic_events`, for kprobe and
/// kretprobe events only.
pub fn write_kprobe_events(text: &str, mode: FilterMode) -> Result<(), EventError> {
    write_probe_events(text, mode, Syntax::Kprobe)
}

fn write_probe_events(text: &str, mode: FilterMode, syntax: Syntax) -> Result<(), EventError> {
    let mut stale = false;
    let result = edit_probe_events(&mut EVENTS.lock(), text, mode, syntax, &mut stale);
    // Records of a removed event that recorded would have no format left
    // to print them with: the top level's buffers are emptied, live and
    // snapshot, as Linux resets a trace array when an event it enabled
    // goes. (After the events' lock: `cat trace` prints under the
    // buffer's lock and takes the events' one.)
    if stale {
        let buffer = ftrace::instance::top().buffer();
        buffer.reset();
        buffer.reset_snapshot();
    }
    result
}

/// Removes the events `doomed` picks; `stale` is set if one of them ever
/// recorded.
fn remove_events(events: &mut Vec<Event>, doomed: impl Fn(&Event) -> bool, stale: &mut bool) {
    *stale |= events.iter().any(|e| doomed(e) && e.was_armed);
    events.retain(|e| !doomed(e));
}

fn edit_probe_events(
    events: &mut Vec<Event>,
    text: &str,
    mode: FilterMode,
    syntax: Syntax,
    stale: &mut bool,
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
        Command::Remove { group, event } => {
            let matches =
                |e: &Event| e.in_syntax(syntax) && e.spec.event == event && group.as_ref().is_none_or(|g| *g == e.spec.group);
            if !events.iter().any(matches) {
                return Err(EventError::NoSuchEvent(event));
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
            if events.iter().any(taken) || ftrace::sched::SchedEvent::find(&spec.group, &spec.event).is_some() {
                return Err(EventError::Exists(full_name(&spec.group, &spec.event)));
            }
            let (function, mut compiled) = compile(&spec)?;
            compiled.id = NEXT_ID
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| id.checked_add(1))
                .map_err(|_| EventError::NoIds)?;
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

/// `echo 0|1 > events/GRP/EVENT/enable`.
pub fn set_enabled(group: &str, event: &str, enabled: bool) -> Result<(), EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
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

/// Sets [`Compiled::fast`] from what the event has now.
fn refresh_fast(compiled: &Compiled) {
    let fast = compiled.enabled.load(Ordering::Relaxed)
        && !compiled.has_strings
        && !compiled.filter.is_set()
        && !compiled.triggers.is_set()
        && !compiled.soft_mode.load(Ordering::Relaxed)
        && !ftrace::instance::top().option(TraceOption::StackTrace);
    compiled.fast.store(fast, Ordering::Relaxed);
}

/// Every event takes the path `options/stacktrace` (now as it is) asks
/// for: a stack trace after each record needs the slow path's chain.
pub fn stack_trace_option_changed() {
    for entry in EVENTS.lock().iter() {
        refresh_fast(&entry.compiled);
    }
}

/// Registers the event's probe if it is enabled or has triggers, and
/// unregisters it otherwise.
fn update_probe(entry: &mut Event) -> Result<(), EventError> {
    let wanted = entry.compiled.enabled.load(Ordering::Relaxed) || entry.compiled.triggers.is_set() || entry.soft_refs > 0;
    match (wanted, entry.probe.take()) {
        (true, Some(probe)) => entry.probe = Some(probe),
        (true, None) => {
            entry.probe = Some(arm(entry)?);
            entry.was_armed = true;
        }
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
    Ok(())
}

/// A parsed line written to `events/GRP/EVENT/trigger` (an
/// `enable_event`'s switch already resolved): adds or removes one trigger,
/// registering the event's probe for a first trigger and unregistering it
/// after the last one if nothing else keeps it. A refused line, or a probe
/// that cannot be registered, changes nothing.
pub fn apply_trigger(group: &str, event: &str, request: Request) -> Result<Applied, EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    let compiled = entry.compiled.clone();
    let applied = compiled.triggers.apply(ftrace::instance::top(), request).map_err(EventError::Trigger)?;
    refresh_fast(&compiled);
    match (update_probe(entry), &applied) {
        (Err(error), Applied::Added(command, target)) => {
            compiled.triggers.remove(*command, target.as_ref());
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

impl Compiled {
    /// Whether a hit records: as `enable` says, or in soft mode as the
    /// triggers' switch says.
    fn records(&self) -> bool {
        match self.soft_mode.load(Ordering::Acquire) {
            true => self.soft_on.load(Ordering::Relaxed),
            false => self.enabled.load(Ordering::Relaxed),
        }
    }
}

impl EventSwitch for Compiled {
    fn soft_on(&self) -> bool {
        self.soft_on.load(Ordering::Relaxed)
    }

    fn set_soft(&self, on: bool) {
        self.soft_on.store(on, Ordering::Relaxed);
    }
}

/// For a new `enable_event`/`disable_event` trigger naming this event: puts
/// it in soft mode (armed, recording while the trigger's switch is on) and
/// answers the switch.
pub fn acquire_soft(group: &str, event: &str) -> Result<Arc<dyn EventSwitch>, EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
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
pub fn release_soft(group: &str, event: &str) {
    let mut events = EVENTS.lock();
    if let Ok(entry) = find(&mut events, group, event) {
        release(entry);
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
pub fn enable_state(group: &str, event: &str) -> Result<(bool, bool), EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    Ok((entry.compiled.records(), entry.compiled.triggers.is_set() || entry.soft_refs > 0))
}

/// `cat events/GRP/EVENT/trigger`.
pub fn trigger_text(group: &str, event: &str) -> Result<String, EventError> {
    let mut events = EVENTS.lock();
    Ok(find(&mut events, group, event)?.compiled.triggers.text())
}

/// `cat events/GRP/EVENT/hist`: its `hist` triggers' tables, if any
/// (printed without holding the events' lock).
pub fn hist_text(
    group: &str,
    event: &str,
    names: ftrace::hist::Namer,
    comms: ftrace::hist::Comms,
) -> Result<Option<String>, EventError> {
    let compiled = find(&mut EVENTS.lock(), group, event)?.compiled.clone();
    Ok(compiled.triggers.hist_text(names, comms))
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

/// Whether `events/GRP/EVENT/enable` is 1.
pub fn is_enabled(group: &str, event: &str) -> Result<bool, EventError> {
    let mut events = EVENTS.lock();
    Ok(find(&mut events, group, event)?.compiled.enabled.load(Ordering::Relaxed))
}

/// `echo 0|1 > events/enable` (every event) or `events/GRP/enable` (the
/// group's). Stops at the first event that cannot change; an unknown group
/// is an error.
pub fn set_enabled_all(group: Option<&str>, enabled: bool) -> Result<(), EventError> {
    let names: Vec<(String, String)> = {
        let events = EVENTS.lock();
        events
            .iter()
            .filter(|e| group.is_none_or(|group| e.spec.group == group))
            .map(|e| (e.spec.group.clone(), e.spec.event.clone()))
            .collect()
    };
    if let (Some(group), true) = (group, names.is_empty()) {
        return Err(EventError::NoSuchEvent(String::from(group)));
    }
    names.iter().try_for_each(|(group, event)| set_enabled(group, event, enabled))
}

/// What `cat events/enable` (or `events/GRP/enable`) prints: `0` none
/// enabled, `1` all, `X` some (as Linux).
pub fn enabled_all(group: Option<&str>) -> Result<char, EventError> {
    let events = EVENTS.lock();
    let mut matching = events.iter().filter(|e| group.is_none_or(|group| e.spec.group == group)).peekable();
    if matching.peek().is_none() && group.is_some() {
        return Err(EventError::NoSuchEvent(String::from(group.unwrap_or_default())));
    }
    let (mut on, mut off) = (false, false);
    for event in matching {
        if event.compiled.enabled.load(Ordering::Relaxed) {
            on = true
        } else {
            off = true
        }
    }
    Ok(match (on, off) {
        (true, true) => 'X',
        (true, false) => '1',
        _ => '0',
    })
}

/// Calls an event missed (recursion, full return stack).
pub fn nmissed(group: &str, event: &str) -> Result<u64, EventError> {
    let mut events = EVENTS.lock();
    let event = find(&mut events, group, event)?;
    Ok(event.missed_before + event.probe.as_ref().map_or(0, Armed::nmissed))
}

fn fetch_uses_args(fetch: &Fetch) -> bool {
    match fetch {
        Fetch::Arg(_) => true,
        Fetch::Memory { base, .. } => fetch_uses_args(base),
        _ => false,
    }
}

/// `cat events/GRP/EVENT/format`, Linux's format description.
pub fn write_format(group: &str, event: &str, out: &mut dyn Write) -> Result<(), EventError> {
    let mut events = EVENTS.lock();
    let entry = find(&mut events, group, event)?;
    let _ = write_format_of(&entry.compiled, out);
    Ok(())
}

fn write_format_of(compiled: &Compiled, out: &mut dyn Write) -> fmt::Result {
    let layout = &compiled.layout;
    writeln!(out, "name: {}", compiled.event)?;
    writeln!(out, "ID: {}", compiled.id)?;
    writeln!(out, "format:")?;
    writeln!(out, "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;")?;
    writeln!(out, "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;")?;
    writeln!(out, "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;")?;
    writeln!(out, "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;")?;
    writeln!(out)?;
    if layout.exit {
        writeln!(out, "\tfield:unsigned long __probe_func;\toffset:{};\tsize:8;\tsigned:0;", Layout::IP)?;
        writeln!(out, "\tfield:unsigned long __probe_ret_ip;\toffset:{};\tsize:8;\tsigned:0;", Layout::RET_IP)?;
    } else {
        writeln!(out, "\tfield:unsigned long __probe_ip;\toffset:{};\tsize:8;\tsigned:0;", Layout::IP)?;
    }
    writeln!(out, "\tfield:unsigned int __probe_faults;\toffset:{};\tsize:4;\tsigned:0;", layout.faults_offset())?;
    for field in &layout.fields {
        let (c_type, signed) = match field.ty {
            ArgType::Unsigned(bits) | ArgType::Hex(bits) | ArgType::Bitfield { container: bits, .. } => (format!("u{bits}"), 0),
            ArgType::Signed(bits) => (format!("s{bits}"), 1),
            ArgType::Symbol => ("unsigned long".to_string(), 0),
            ArgType::String => ("__data_loc char[]".to_string(), 0),
            // Linux's char is an alias of u8, and its format says so.
            ArgType::Char => ("u8".to_string(), 0),
        };
        writeln!(out, "\tfield:{c_type} {};\toffset:{};\tsize:{};\tsigned:{signed};", field.name, field.offset, field.ty.size())?;
    }
    writeln!(out)?;
    let mut fmt_text = String::from(if layout.exit { "(%pS <- %ps)" } else { "(%pS)" });
    let mut fmt_args = String::from(if layout.exit {
        "(void *)REC->__probe_ret_ip, (void *)REC->__probe_func"
    } else {
        "(void *)REC->__probe_ip"
    });
    for field in &layout.fields {
        let spec = match field.ty {
            ArgType::Unsigned(64) | ArgType::Bitfield { container: 64, .. } => "%llu",
            ArgType::Unsigned(_) | ArgType::Bitfield { .. } => "%u",
            ArgType::Char => "'%c'",
            ArgType::Signed(64) => "%lld",
            ArgType::Signed(_) => "%d",
            ArgType::Hex(64) => "0x%Lx",
            ArgType::Hex(_) => "0x%x",
            ArgType::Symbol => "%pS",
            ArgType::String => "\\\"%s\\\"",
        };
        let _ = write!(fmt_text, " {}={spec}", field.name);
        let _ = match field.ty {
            ArgType::String => write!(fmt_args, ", __get_str({})", field.name),
            _ => write!(fmt_args, ", REC->{}", field.name),
        };
    }
    writeln!(out, "print fmt: \"{fmt_text}\", {fmt_args}")
}

/// Prints a dynamic event's record for `cat trace` (None: not one of ours).
pub fn print_event(payload: &[u8], out: &mut dyn Write) -> Option<fmt::Result> {
    let kind = u16::from_ne_bytes(payload.get(0..2)?.try_into().ok()?);
    let events = EVENTS.lock();
    let compiled = events.iter().map(|e| &e.compiled).find(|c| c.id == kind)?;
    let names = |address: usize| ftrace::symbols::table().ok()?.lookup(address);
    Some(compiled.layout.write(&compiled.event, payload, &names, out))
}

/// `echo EXPR > events/GRP/EVENT/filter` (`0` clears it); a bad filter
/// changes nothing.
pub fn set_filter(group: &str, event: &str, text: &str) -> Result<(), EventError> {
    let mut events = EVENTS.lock();
    let compiled = &find(&mut events, group, event)?.compiled;
    compiled.filter.set(text, &compiled.filter_fields()).map_err(EventError::Filter)?;
    refresh_fast(compiled);
    Ok(())
}

/// `cat events/GRP/EVENT/id`: the event's type id.
pub fn id(group: &str, event: &str) -> Result<u16, EventError> {
    let mut events = EVENTS.lock();
    Ok(find(&mut events, group, event)?.compiled.id)
}

/// `cat events/GRP/EVENT/filter`: the filter, or `none`.
pub fn filter_text(group: &str, event: &str) -> Result<String, EventError> {
    let mut events = EVENTS.lock();
    Ok(find(&mut events, group, event)?.compiled.filter.text())
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

// ---- the traced path ----

/// What fetches read from.
struct Context<'a> {
    regs: SavedRegs<'a>,
    /// The entry arguments saved for an exit event.
    saved_args: Option<&'a EntryData<'a>>,
    /// Where the probed function returns to (0: not known, as at a
    /// kprobe inside a function): a `stacktrace` trigger's first caller.
    caller: usize,
    /// The kprobe that hit, for a kprobe event: at a function's entry its
    /// caller is read from the save, on the slow path only.
    kprobe: Option<&'a Kprobe>,
}

#[inline]
fn fetch_word(fetch: &Fetch, context: &Context) -> Option<u64> {
    match fetch {
        Fetch::Arg(n) => match context.saved_args {
            Some(data) => data.argument(*n),
            None => context.regs.argument(*n),
        },
        Fetch::Retval => Some(context.regs.return_value()),
        Fetch::Stack(n) => arch::fault::read_u64_nofault(context.regs.stack_pointer() + 8 * n),
        Fetch::StackPointer => Some(context.regs.stack_pointer() as u64),
        Fetch::Comm => ftrace::task::try_current().map(|task| task.comm_bytes().as_ptr() as u64),
        Fetch::Register(offset) => context.regs.register_at(*offset),
        Fetch::Immediate(value) => Some(*value),
        Fetch::Memory { offset, base } => {
            let address = fetch_word(base, context)?.wrapping_add(*offset as u64);
            arch::fault::read_u64_nofault(address as usize)
        }
    }
}

/// The address a typed read should use: the memory address for `+OFFS(...)`,
/// the value itself for a string or a plain source read as a pointer.
fn fetch_address(fetch: &Fetch, context: &Context) -> Option<u64> {
    match fetch {
        Fetch::Memory { offset, base } => Some(fetch_word(base, context)?.wrapping_add(*offset as u64)),
        other => fetch_word(other, context),
    }
}

/// Reads a NUL-terminated string of at most [`MAX_STRING`] bytes at
/// `address` into `buffer`; `None` if the first byte faults.
fn read_string(address: usize, buffer: &mut [u8]) -> Option<usize> {
    let limit = buffer.len().min(MAX_STRING);
    for (i, slot) in buffer[..limit].iter_mut().enumerate() {
        let mut byte = [0u8];
        if arch::fault::read_nofault(address + i, &mut byte).is_err() {
            return (i > 0).then_some(i);
        }
        if byte[0] == 0 {
            return Some(i);
        }
        *slot = byte[0];
    }
    Some(limit)
}

/// Records one event: `ips` is `[ip]` at entry, `[func, ret_ip]` at exit.
#[inline(always)]
fn record(compiled: &Compiled, ips: &[u64], context: &Context) {
    if !compiled.fast.load(Ordering::Relaxed) || ftrace::event_pid::is_active() {
        return record_by_values(compiled, ips, context);
    }
    match &compiled.words {
        Some(words) => {
            let ips = [ips.first().copied().unwrap_or(0), ips.get(1).copied().unwrap_or(0)];
            (words.write)(compiled, &words.fields, ips, context)
        }
        None => record_fixed(compiled, ips, context),
    }
}

/// [`record`] for a record of word fields ([`WordRecord`]'s shape `EXIT`,
/// `N`): the function tracer's kind of record, every size a constant.
#[inline(never)]
fn write_words<const EXIT: bool, const N: usize>(compiled: &Compiled, fields: &[Quick], ips: [u64; 2], context: &Context) {
    let Ok(fields) = <&[Quick; N]>::try_from(fields) else { return };
    // The header before the write: inside it interrupts are masked.
    let common = event_common(compiled.id);
    ftrace::instance::top().buffer().write_with(WordRecord::<EXIT, N>::SIZE, |_, out| {
        WordRecord::<EXIT, N>::encode(common, ips, |i| fetch_quick(fields[i], context), out)
    });
}

/// [`record`] for other records of fixed size, each value fetched straight
/// into its place in the ring buffer. Out of line, and with no other path
/// in it: so built, the compiler inlines the ring write's closure into it
/// (measured: 30 instructions fewer than with the tests of [`record`]
/// inside).
#[inline(never)]
fn record_fixed(compiled: &Compiled, ips: &[u64], context: &Context) {
    let layout = &compiled.layout;
    // The header before the write: inside it interrupts are masked, which
    // the header's irqs-off flag must not show.
    let common = event_common(compiled.id);
    ftrace::instance::top().buffer().write_with(layout.fixed_size, |_, out| {
        if layout.encode_head(common, ips, out) {
            layout.encode_numbers(&compiled.fetches, |(fetch, _), ty| fetch_number(fetch, ty, context), out);
        }
    });
}

/// A [`Quick`] fetch's value; `None` where [`fetch_word`] would fault.
#[inline(always)]
fn fetch_quick(fetch: Quick, context: &Context) -> Option<u64> {
    match fetch {
        Quick::Arg(n) => context.regs.register_argument(n),
        Quick::SavedArg(n) => context.saved_args?.argument(n),
        Quick::Retval => Some(context.regs.return_value()),
    }
}

/// A number-typed fetch arg's value; `None` if a memory read faulted.
#[inline(always)]
fn fetch_number(fetch: &Fetch, ty: ArgType, context: &Context) -> Option<u64> {
    fetch_word_of(fetch, ty, context).map(|word| ty.extract(word))
}

/// [`fetch_number`]'s word, before a bitfield's bits are taken out.
#[inline(always)]
fn fetch_word_of(fetch: &Fetch, ty: ArgType, context: &Context) -> Option<u64> {
    // The usual fetches first, without the general (recursive, out of line)
    // `fetch_word`.
    match (fetch, context.saved_args) {
        (Fetch::Arg(n), None) => return context.regs.argument(*n),
        (Fetch::Retval, _) => return Some(context.regs.return_value()),
        (Fetch::Memory { .. }, _) => {}
        _ => return fetch_word(fetch, context),
    }
    let mut bytes = [0u8; 8];
    let address = fetch_address(fetch, context)?;
    arch::fault::read_nofault(address as usize, &mut bytes[..ty.size()]).ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// [`record`] for an event with string fetch args (their lengths make the
/// record's), a filter or triggers (they need the values), a disabled
/// event with triggers, or while `set_event_pid` or
/// `set_event_notrace_pid` is set: everything is
/// fetched first. Out of line: its buffers would weigh on the common
/// case's frame.
#[inline(never)]
fn record_by_values(compiled: &Compiled, ips: &[u64], context: &Context) {
    let triggered = compiled.triggers.is_set();
    let records = compiled.records() && ftrace::event_pid::records_current();
    if !records && !triggered {
        return;
    }
    let mut strings = [0u8; MAX_RECORD];
    let mut used = 0;
    // Strings share what the record has left after its fixed part and one
    // NUL each: a late string is cut short rather than the event dropped.
    let string_fields = compiled.fetches.iter().filter(|(_, ty)| *ty == ArgType::String).count();
    let budget = MAX_RECORD.saturating_sub(compiled.layout.fixed_size + string_fields);
    let mut values = [Value::Fault; definition::MAX_ARGS];
    // First the numbers and where each string goes; then the string slices,
    // once `strings` is no longer written.
    let mut spans = [(0usize, 0usize); definition::MAX_ARGS];
    for (i, (fetch, ty)) in compiled.fetches.iter().enumerate() {
        values[i] = match ty {
            ArgType::String => match fetch_address(fetch, context)
                .and_then(|address| read_string(address as usize, &mut strings[used..budget.max(used)]))
            {
                Some(len) => {
                    spans[i] = (used, len);
                    used += len;
                    Value::Str(&[])
                }
                None => Value::Fault,
            },
            _ => fetch_number(fetch, *ty, context).map_or(Value::Fault, Value::Int),
        };
    }
    let count = compiled.fetches.len();
    for i in 0..count {
        if let Value::Str(_) = values[i] {
            let (start, len) = spans[i];
            values[i] = Value::Str(&strings[start..start + len]);
        }
    }
    let common = event_common(compiled.id);
    let fixed = 1 + ips.len();
    let fields = |field| match field {
        0 => FieldValue::Signed(common.pid.into()),
        n if n < fixed => FieldValue::Unsigned(ips[n - 1]),
        n => filter_value(compiled.fetches[n - fixed].1, values[n - fixed]),
    };
    // An entry's chain: the function, then its caller; an exit's: the
    // caller it returns to. Then the frame records.
    let caller = match context.kprobe {
        Some(probe) if probe.place().at_entry => context.regs.entry_return_address().unwrap_or(0),
        _ => context.caller,
    };
    let addresses = match ips {
        [ip] => [*ip as usize, caller],
        _ => [caller, 0],
    };
    let stack = StackStart { addresses, fp: context.regs.frame_pointer() };
    let top = ftrace::instance::top();
    if triggered {
        compiled.triggers.fire(top, Phase::BeforeRecord, &fields, stack);
    }
    if records && compiled.filter.passes(&fields) {
        let mut out = [0u8; MAX_RECORD];
        let len = compiled.layout.encode(common, ips, &values[..count], &mut out);
        if len > 0 && top.buffer().write(&out[..len]) && top.option(TraceOption::StackTrace) {
            stack.record(top);
        }
    }
    if triggered {
        compiled.triggers.fire(top, Phase::AfterRecord, &fields, stack);
    }
}

fn compiled_of(fp: &Fprobe) -> &Compiled {
    // SAFETY: `set_enabled` sets the private data to an `Arc<Compiled>`
    // reference the probe owns until it is freed, after its handlers.
    unsafe { &*(fp.private() as *const Compiled) }
}

/// Drops the reference `set_enabled` gave a probe.
fn release_compiled(private: usize) {
    // SAFETY: `private` came from `Arc::into_raw` in `set_enabled`, and is
    // released once (the probe's free, or a failed registration).
    drop(unsafe { Arc::from_raw(private as *const Compiled) });
}

/// A kprobe event's handler: the probe's private data is its compiled form.
fn kprobe_hit(probe: &Kprobe, regs: &PtRegs) {
    // SAFETY: `arm` made the private data a pointer to the event's compiled
    // form, which the event keeps alive past the probe's unregistration.
    let compiled = unsafe { &*(probe.private() as *const Compiled) };
    compiled.hits.fetch_add(1, Ordering::Relaxed);
    let regs = SavedRegs::full(regs, Saved::EntryFull);
    record(compiled, &[probe.address() as u64], &Context { regs, saved_args: None, caller: 0, kprobe: Some(probe) });
}

/// A kretprobe event's entry handler: keeps the arguments for `$argN`.
fn kretprobe_save_args(_: &Kretprobe, regs: &PtRegs, data: &mut [u64]) {
    let regs = SavedRegs::full(regs, Saved::EntryFull);
    for (n, slot) in data.iter_mut().enumerate() {
        *slot = regs.argument(n).unwrap_or(0);
    }
}

/// A kretprobe event's return handler.
fn kretprobe_return(rp: &Kretprobe, ret_addr: usize, regs: &PtRegs, data: &[u64]) {
    // SAFETY: as in `kprobe_hit`.
    let compiled = unsafe { &*(rp.private() as *const Compiled) };
    compiled.hits.fetch_add(1, Ordering::Relaxed);
    let regs = SavedRegs::full(regs, Saved::ReturnFull);
    let saved = EntryData::of_arguments(data);
    let ips = [rp.place().address as u64, ret_addr as u64];
    record(compiled, &ips, &Context { regs, saved_args: Some(&saved), caller: ret_addr, kprobe: None });
}

/// An fprobe event's handlers, run inline in the probe's entry and return.
struct EventHandlers;

impl probe::Handlers for EventHandlers {
    #[inline(always)]
    fn entry(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool {
        event_entry(fp, entry_ip, ret_ip, fregs, data)
    }

    #[inline(always)]
    fn exit(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
        event_exit(fp, entry_ip, ret_ip, fregs, data);
    }
}

#[inline(always)]
fn event_entry(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    record(compiled_of(fp), &[entry_ip as u64], &Context { regs: fregs.view(), saved_args: None, caller: ret_ip, kprobe: None });
    true
}

#[inline(always)]
fn event_exit(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    let data: &EntryData = data;
    let context = Context { regs: fregs.view(), saved_args: Some(data), caller: ret_ip, kprobe: None };
    record(compiled_of(fp), &[entry_ip as u64, ret_ip as u64], &context);
}
