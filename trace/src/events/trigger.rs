//! Event triggers: `events/GRP/EVENT/trigger`, Linux's way of acting when an
//! event fires. `traceon`, `traceoff`, `snapshot`, `stacktrace` and
//! `enable_event:GRP:EVENT` / `disable_event:GRP:EVENT`, each with an
//! optional count (`traceoff:1`) and filter (`stacktrace if prev_pid ==
//! 0`); `!NAME` removes one.
//!
//! Design. An event keeps its triggers in a [`Triggers`]: a list published
//! whole (each write builds a new one; the old one is freed after a grace
//! period) that the event's hit path reads without a lock. The counts live
//! in the triggers, which every list holding them shares (`Arc`): adding or
//! removing one trigger leaves another's count alone. An `enable_event`
//! trigger holds its target's [`EventSwitch`], which tracefs resolves when
//! the trigger is written: while such a trigger exists the target is in
//! *soft mode* (Linux's name): armed, and recording as the switch says
//! (which starts as its `enable` and which `enable` writes set), the
//! trigger flipping the switch from its own event's hit path.
//!
//! What a hit does, as in Linux: triggers run whether or not the event is
//! enabled (an event with triggers fires even with `enable` at 0, and then
//! records nothing) and whatever the event's own filter keeps. An
//! unfiltered `traceon`, `snapshot` or `enable_event`/`disable_event` acts
//! before the event is recorded; every other trigger after it (so a
//! `traceoff` keeps the event that stopped tracing, and a filtered trigger
//! reads the event's fields). An event has at most one trigger of a kind
//! (`traceon` and `traceoff` are one kind, as are `enable_event` and
//! `disable_event` of one target), as in Linux; `!NAME` removes the
//! trigger of NAME's kind, and removing one that is not there does nothing,
//! as in Linux. `traceon`/`traceoff` and `enable_event`/`disable_event`
//! count only the hits that change what they switch;
//! `snapshot`/`stacktrace` count every hit they act on (not a stack trace
//! while tracing is off: it does nothing and keeps its count). A snapshot
//! with no snapshot buffer (`echo 0 > snapshot` freed it) writes `***
//! SNAPSHOT NOT ALLOCATED ***` into the trace and turns tracing off, as
//! Linux's does.
//!
//! Failure modes: a bad line (an unknown command or event, a malformed
//! count, a bad filter, a second trigger of a kind) changes nothing and
//! says why. A `snapshot` trigger allocates the snapshot buffer when it is
//! added (a hit cannot allocate); without memory it is refused. An event
//! named by a trigger, or with triggers, cannot be removed.
//!
//! `hist:keys=...` counts hits per key into a table (see [`crate::events::hist`]);
//! an event may have several, each with other keys, values, sort or
//! filter, and `hist:...:pause`, `:cont` and `:clear` act on the one with
//! the same keys, values, sort and filter, as in Linux.
//!
//! A hit that `set_event_pid` or `set_event_notrace_pid` leaves out fires
//! only the triggers that act before the record ([`Phase::BeforeRecord`]),
//! as in Linux, whose pid check refuses the record before the others run.
//!
//! Not as in Linux: a `hist` trigger has no variables, actions or shared
//! (`name=`) tables.

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::events::filter::{EventFilter, FilterError, FilterField};
use crate::events::hist::spec::HistError;
use crate::events::hist::Histogram;

/// What a trigger does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerCommand {
    TraceOn,
    TraceOff,
    Snapshot,
    StackTrace,
    /// `enable_event:GRP:EVENT`: the other event starts recording.
    EnableEvent,
    /// `disable_event:GRP:EVENT`: it stops.
    DisableEvent,
    /// `hist:keys=...`: counts hits per key ([`crate::events::hist`]).
    Hist,
}

/// The event an `enable_event`/`disable_event` trigger switches. While
/// such a trigger exists its event is in *soft mode* (Linux's name): armed
/// whether or not it is enabled, and recording while its soft switch is on.
/// The hit path of the trigger's own event flips the switch.
pub trait EventSwitch: Send + Sync {
    fn soft_on(&self) -> bool;
    fn set_soft(&self, on: bool);
}

/// `GRP:EVENT`, as an `enable_event` trigger names its event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventName {
    pub group: String,
    pub event: String,
}

impl TriggerCommand {
    /// Every command, in the order `cat trigger` lists them.
    pub const ALL: [TriggerCommand; 7] = [
        TriggerCommand::TraceOn,
        TriggerCommand::TraceOff,
        TriggerCommand::Snapshot,
        TriggerCommand::StackTrace,
        TriggerCommand::EnableEvent,
        TriggerCommand::DisableEvent,
        TriggerCommand::Hist,
    ];

    /// The command called `name`.
    pub fn from_name(name: &str) -> Option<TriggerCommand> {
        TriggerCommand::ALL.into_iter().find(|command| command.name() == name)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            TriggerCommand::TraceOn => "traceon",
            TriggerCommand::TraceOff => "traceoff",
            TriggerCommand::Snapshot => "snapshot",
            TriggerCommand::StackTrace => "stacktrace",
            TriggerCommand::EnableEvent => "enable_event",
            TriggerCommand::DisableEvent => "disable_event",
            TriggerCommand::Hist => "hist",
        }
    }

    /// Whether it names another event (`enable_event:GRP:EVENT`).
    pub fn takes_event(self) -> bool {
        matches!(self, TriggerCommand::EnableEvent | TriggerCommand::DisableEvent)
    }

    /// Whether `other` is the same kind (an event has one of a kind):
    /// `traceon` and `traceoff` are one kind, as are `enable_event` and
    /// `disable_event` (of one target), as in Linux.
    #[cfg_attr(not(any(test, target_os = "none")), allow(dead_code))]
    fn same_kind(self, other: TriggerCommand) -> bool {
        let kind = |command| match command {
            TriggerCommand::TraceOn | TriggerCommand::TraceOff => 0,
            TriggerCommand::Snapshot => 1,
            TriggerCommand::StackTrace => 2,
            TriggerCommand::EnableEvent | TriggerCommand::DisableEvent => 3,
            TriggerCommand::Hist => 4,
        };
        kind(self) == kind(other)
    }
}

/// When a trigger acts, relative to its event's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    BeforeRecord,
    AfterRecord,
}

// No count: every hit acts.
use ftrace::number::UNLIMITED;

/// One trigger of an event.
pub struct Trigger {
    command: TriggerCommand,
    /// When it acts, relative to its event's record.
    phase: Phase,
    /// Actions left, or [`UNLIMITED`].
    left: AtomicU64,
    filter: Option<EventFilter>,
    /// The event an `enable_event`/`disable_event` switches, and (once
    /// tracefs resolved the name) its switch.
    target: Option<EventName>,
    switch: Option<Arc<dyn EventSwitch>>,
    /// A `hist` trigger's table (shared with the triggers that read its
    /// variables).
    hist: Option<Arc<Histogram>>,
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line())
    }
}

impl Trigger {
    /// The event it switches (`enable_event`/`disable_event`).
    pub fn target(&self) -> Option<&EventName> {
        self.target.as_ref()
    }

    /// Its command.
    pub fn command(&self) -> TriggerCommand {
        self.command
    }

    /// A `hist` trigger's histogram.
    pub fn histogram(&self) -> Option<&Arc<Histogram>> {
        self.hist.as_ref()
    }

    /// A `hist` trigger's histogram, to resolve its names before the
    /// trigger is added (`None` once it is shared).
    pub fn histogram_mut(&mut self) -> Option<&mut Histogram> {
        Arc::get_mut(self.hist.as_mut()?)
    }

    /// With the switch of its target, resolved by the caller.
    pub fn with_switch(mut self, switch: Arc<dyn EventSwitch>) -> Trigger {
        self.switch = Some(switch);
        self
    }

    /// Whether `command` of `target` is this trigger's kind (what an add
    /// collides with and a removal takes off).
    #[cfg_attr(not(any(test, target_os = "none")), allow(dead_code))]
    fn is_kind(&self, command: TriggerCommand, target: Option<&EventName>) -> bool {
        self.command.same_kind(command) && self.target.as_ref() == target
    }

    /// When it acts (decided when it is parsed, not at each hit).
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether it is a `hist` trigger of the same histogram and filter as
    /// `spec` and `filter` (what an add, a removal or a `pause` matches).
    #[cfg_attr(not(any(test, target_os = "none")), allow(dead_code))]
    fn is_hist(&self, spec: &crate::events::hist::spec::HistSpec, filter: Option<&str>) -> bool {
        self.hist.as_ref().is_some_and(|hist| hist.spec().same_as(spec)) && self.filter.as_ref().map(EventFilter::text) == filter
    }

    /// Its line in `cat trigger`: `traceoff:unlimited`,
    /// `stacktrace:count=2 if prev_pid == 0`,
    /// `hist:keys=pid:vals=hitcount:sort=hitcount:size=2048 [active]`.
    pub fn line(&self) -> String {
        let mut line = self.command_line();
        if let Some(hist) = &self.hist {
            line.push_str(if hist.is_paused() { " [paused]" } else { " [active]" });
        }
        line
    }

    /// [`line`](Self::line) without a histogram's state: a line that,
    /// written after `!`, removes this trigger.
    fn command_line(&self) -> String {
        let mut line = match &self.hist {
            Some(hist) => hist.spec().line(),
            None => {
                let mut line = String::from(self.command.name());
                if let Some(target) = &self.target {
                    line.push_str(&alloc::format!(":{}:{}", target.group, target.event));
                }
                match self.left.load(Ordering::Relaxed) {
                    UNLIMITED => line.push_str(":unlimited"),
                    n => line.push_str(&alloc::format!(":count={n}")),
                }
                line
            }
        };
        if let Some(filter) = &self.filter {
            line.push_str(" if ");
            line.push_str(filter.text());
        }
        line
    }

    /// Takes one action from the count: `false` once it is used up.
    #[cfg_attr(not(any(test, target_os = "none")), allow(dead_code))]
    fn take(&self) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| match left {
                0 => None,
                UNLIMITED => Some(UNLIMITED),
                n => Some(n - 1),
            })
            .is_ok()
    }
}

/// One line written to a `trigger` file, parsed.
#[derive(Debug)]
pub enum Request {
    Add(Trigger),
    /// `!NAME[:GRP:EVENT]`: the event's trigger of that kind (and target)
    /// goes.
    Remove(TriggerCommand, Option<EventName>),
    /// `!hist:...`: the `hist` trigger of the same histogram and filter
    /// goes.
    RemoveHist(crate::events::hist::spec::HistSpec, Option<String>),
}

/// Why a trigger line was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TriggerError {
    UnknownCommand(String),
    /// `NAME:N` with an N that is no number.
    BadCount(String),
    /// Text after the command that is neither a count nor `if FILTER`.
    Malformed(String),
    /// The filter after `if`, as written (trimmed), and why it was refused.
    Filter {
        expression: String,
        error: FilterError,
    },
    /// The event has a trigger of that kind already (Linux: EEXIST): its
    /// name (with the event it names, for `enable_event`).
    Exists(String),
    /// No memory for the snapshot buffer a `snapshot` trigger needs.
    NoMemory,
    /// `enable_event` without `:GRP:EVENT`.
    MissingEvent(&'static str),
    /// A bad `hist:` line.
    Hist(HistError),
    /// `hist:...:cont` or `:clear` with no such `hist` trigger (Linux:
    /// ENOENT).
    NoSuchHist,
}

impl fmt::Display for TriggerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TriggerError::UnknownCommand(name) => {
                write!(f, "unknown trigger '{name}' (traceon, traceoff, snapshot, stacktrace, enable_event, disable_event, hist)")
            }
            TriggerError::BadCount(count) => write!(f, "bad trigger count '{count}'"),
            TriggerError::Malformed(text) => write!(f, "expected ':COUNT' or 'if FILTER', found '{text}'"),
            TriggerError::Filter { error, .. } => write!(f, "trigger filter: {error}"),
            TriggerError::Exists(name) => write!(f, "the event has a '{name}' trigger already (remove it with '!{name}')"),
            TriggerError::NoMemory => write!(f, "not enough memory for the snapshot buffer"),
            TriggerError::MissingEvent(name) => write!(f, "'{name}' needs the event to switch: {name}:GRP:EVENT"),
            TriggerError::Hist(error) => write!(f, "{error}"),
            TriggerError::NoSuchHist => write!(f, "hist: no trigger with these keys, values, sort and filter to act on"),
        }
    }
}

/// Parses one trigger line, `[!]NAME[:COUNT] [if FILTER]` or
/// `[!]enable_event:GRP:EVENT[:COUNT] [if FILTER]` (and `disable_event`),
/// the filter over the event's `fields`. A count is decimal, `0x` hex or
/// `0` octal, as Linux's `kstrtoul` (base 0) takes it.
pub fn parse(text: &str, fields: &[FilterField]) -> Result<Request, TriggerError> {
    let text = text.trim();
    let split = text.find(|c: char| c == ':' || c.is_ascii_whitespace()).unwrap_or(text.len());
    let (name, rest) = text.split_at(split);
    let rest = rest.get(1..).unwrap_or("").trim_start();
    let (remove, name) = match name.strip_prefix('!') {
        Some(name) => (true, name),
        None => (false, name),
    };
    let command = TriggerCommand::from_name(name).ok_or_else(|| TriggerError::UnknownCommand(name.to_string()))?;
    if command == TriggerCommand::Hist {
        return parse_hist(remove, rest, fields);
    }
    // `GRP:EVENT` first, for the commands that switch an event; what
    // follows it is read as for the others.
    let (target, rest) = if command.takes_event() {
        let end = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
        let (param, after) = rest.split_at(end);
        let mut parts = param.splitn(3, ':');
        let (Some(group), Some(event)) = (parts.next().filter(|g| !g.is_empty()), parts.next().filter(|e| !e.is_empty())) else {
            return Err(TriggerError::MissingEvent(command.name()));
        };
        let count = parts.next().unwrap_or("");
        let target = EventName { group: group.to_string(), event: event.to_string() };
        (Some(target), alloc::format!("{count}{after}"))
    } else {
        (None, rest.to_string())
    };
    let rest = rest.trim_start();
    if remove {
        return Ok(Request::Remove(command, target));
    }
    // As Linux separates them: a count starts with a digit; anything else
    // is the filter.
    let (count, filter) = if rest.starts_with(|c: char| c.is_ascii_digit()) {
        let end = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
        let (count, filter) = rest.split_at(end);
        let count = count.split(':').next().unwrap_or("");
        (Some(parse_count(count)?), filter.trim())
    } else {
        (None, rest)
    };
    let filter = parse_filter(filter, fields)?;
    let after = filter.is_some() || matches!(command, TriggerCommand::TraceOff | TriggerCommand::StackTrace);
    let phase = if after { Phase::AfterRecord } else { Phase::BeforeRecord };
    let left = AtomicU64::new(count.unwrap_or(UNLIMITED));
    Ok(Request::Add(Trigger { command, phase, left, filter, target, switch: None, hist: None }))
}

/// `if FILTER` (or nothing) after a trigger's command.
fn parse_filter(text: &str, fields: &[FilterField]) -> Result<Option<EventFilter>, TriggerError> {
    if text.is_empty() {
        return Ok(None);
    }
    let expression = text
        .strip_prefix("if")
        .filter(|after| after.starts_with(|c: char| c.is_ascii_whitespace()))
        .map(str::trim)
        .filter(|expression| !expression.is_empty())
        .ok_or_else(|| TriggerError::Malformed(text.to_string()))?;
    EventFilter::parse(expression, fields)
        .map(Some)
        .map_err(|error| TriggerError::Filter { expression: expression.to_string(), error })
}

/// `[!]hist:ATTRS [if FILTER]` (`rest`: what follows `hist:`). An added
/// `hist` trigger's table is allocated here, while a refusal changes
/// nothing.
fn parse_hist(remove: bool, rest: &str, fields: &[FilterField]) -> Result<Request, TriggerError> {
    let end = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
    let (attrs, filter) = rest.split_at(end);
    let spec = crate::events::hist::spec::parse(attrs, fields).map_err(TriggerError::Hist)?;
    let filter = parse_filter(filter.trim(), fields)?;
    if remove {
        return Ok(Request::RemoveHist(spec, filter.map(|filter| filter.text().to_string())));
    }
    let hist = Arc::new(Histogram::try_new(spec).map_err(TriggerError::Hist)?);
    let left = AtomicU64::new(UNLIMITED);
    let command = TriggerCommand::Hist;
    Ok(Request::Add(Trigger { command, phase: Phase::AfterRecord, left, filter, target: None, switch: None, hist: Some(hist) }))
}

fn parse_count(text: &str) -> Result<u64, TriggerError> {
    ftrace::number::c_count(text).ok_or_else(|| TriggerError::BadCount(text.to_string()))
}

/// What `cat trigger` prints for an event with no trigger.
pub const AVAILABLE: &str = "# Available triggers:\n# traceon traceoff snapshot stacktrace enable_event disable_event hist\n";

#[cfg(target_os = "none")]
pub use kernel_side::{register_vars, resolve_hist, Applied, StackStart, Triggers};

#[cfg(target_os = "none")]
mod kernel_side {
    use alloc::string::String;
    use alloc::sync::Arc;
    use alloc::vec::Vec;

    use super::{EventName, Phase, Request, Trigger, TriggerCommand, TriggerError, AVAILABLE};
    use crate::array::trace_array::TraceArray;
    use crate::events::filter::FieldValue;
    use crate::events::hist::spec::{HistControl, HistError};
    use ftrace::deferred::Published;

    /// Where a `stacktrace` trigger's call chain starts: the addresses the
    /// hit knows (the probed function, where it returns to; zero: none),
    /// then the return addresses of the frame records from `fp` up.
    #[derive(Clone, Copy, Debug)]
    pub struct StackStart {
        pub addresses: [usize; 2],
        pub fp: usize,
    }

    impl StackStart {
        /// Records the chain as a `<stack trace>` event in `array` (a
        /// `stacktrace` trigger, `options/stacktrace`).
        pub fn record(&self, array: &TraceArray) {
            let known = self.addresses.into_iter().filter(|&address| address != 0);
            crate::stack_trace::record_frames(array, known.chain(ftrace::graph::unwind::return_addresses(self.fp)));
        }

        /// Fills `words` with the chain, innermost first, zeros after its
        /// end (a histogram's `common_stacktrace` key).
        pub fn fill(&self, words: &mut [u64]) {
            let known = self.addresses.into_iter().filter(|&address| address != 0);
            let mut chain = known.chain(ftrace::graph::unwind::return_addresses(self.fp));
            for word in words {
                *word = chain.next().map_or(0, |address| address as u64);
            }
        }
    }

    /// A trigger leaving its event's list: a histogram's variables are no
    /// one's to read from now on.
    fn detach(trigger: &Trigger) {
        if let Some(hist) = &trigger.hist {
            hist.detach();
        }
    }

    /// A histogram with variables, for the `$NAME`s other triggers read:
    /// the trace array (its address) and event it counts.
    struct VarTable {
        array: usize,
        event: EventName,
        hist: alloc::sync::Weak<crate::events::hist::Histogram>,
    }

    /// The histograms with variables that were added (a removed one's
    /// entry dies with it: its table is gone once no trigger holds it).
    static VAR_TABLES: arch::sync::SpinLock<Vec<VarTable>> = arch::sync::SpinLock::new(Vec::new());

    /// Notes an added `hist` trigger's histogram, of `event` in `array`, if
    /// it defines variables others may read.
    pub fn register_vars(array: &TraceArray, event: &EventName, hist: &Arc<crate::events::hist::Histogram>) {
        if hist.spec().vars().defs.is_empty() {
            return;
        }
        let mut tables = VAR_TABLES.lock();
        tables.retain(|table| table.hist.upgrade().is_some_and(|hist| !hist.is_detached()));
        let array = array as *const TraceArray as usize;
        tables.push(VarTable { array, event: event.clone(), hist: Arc::downgrade(hist) });
    }

    /// Resolves the names a new `hist` trigger of `array` uses before it is
    /// added: each `$NAME` it reads is the variable of the one histogram
    /// of `array` that defines it (one of an event its `onmatch` names
    /// first, as Linux looks there first), and each action's synthetic
    /// event is `synth(name)`'s. Nothing to do for another trigger.
    pub fn resolve_hist(
        array: &'static TraceArray,
        trigger: &mut Trigger,
        synth: impl Fn(&str) -> Option<(Arc<dyn crate::events::hist::SynthTarget>, Vec<bool>)>,
    ) -> Result<(), TriggerError> {
        let Some(hist) = trigger.histogram_mut() else { return Ok(()) };
        if hist.spec().vars().is_empty() {
            return Ok(());
        }
        let matched: Vec<EventName> = hist
            .spec()
            .vars()
            .actions
            .iter()
            .map(|action| EventName { group: action.group.clone(), event: action.event.clone() })
            .collect();
        let owner = hist.spec().line();
        let snapshot = || {
            array.hold_cond_snapshot(&owner).map_err(|error| match error {
                crate::array::trace_array::SnapshotError::Busy => HistError::SnapshotBusy,
                crate::array::trace_array::SnapshotError::NoMemory => HistError::NoMemory,
            })
        };
        let array = array as *const TraceArray as usize;
        let tables: Vec<(EventName, Arc<crate::events::hist::Histogram>)> = VAR_TABLES
            .lock()
            .iter()
            .filter(|table| table.array == array)
            .filter_map(|table| Some((table.event.clone(), table.hist.upgrade().filter(|hist| !hist.is_detached())?)))
            .collect();
        let find = |name: &str| {
            let defining = || tables.iter().filter_map(|(event, hist)| Some((event, hist, hist.var_index(name)?)));
            let preferred: Vec<_> = defining().filter(|(event, _, _)| matched.contains(event)).collect();
            let candidates: Vec<_> = if preferred.is_empty() { defining().collect() } else { preferred };
            match candidates.as_slice() {
                [(_, hist, var)] => Some((Arc::clone(hist), *var)),
                _ => None,
            }
        };
        hist.resolve(find, synth, snapshot).map_err(TriggerError::Hist)
    }

    /// What [`Triggers::apply`] did.
    #[derive(Debug, PartialEq, Eq)]
    pub enum Applied {
        Nothing,
        Added(TriggerCommand, Option<EventName>),
        Removed(TriggerCommand, Option<EventName>),
    }

    /// An event's triggers, read without a lock by its hit path.
    pub struct Triggers {
        list: Published<Vec<Arc<Trigger>>>,
        writers: arch::sync::Mutex<()>,
    }

    impl Default for Triggers {
        fn default() -> Triggers {
            Triggers::new()
        }
    }

    impl Triggers {
        /// No trigger.
        pub const fn new() -> Triggers {
            Triggers { list: Published::empty(), writers: arch::sync::Mutex::new(()) }
        }

        /// Whether the event has a trigger (its hit path: take the path
        /// that fires them).
        #[inline]
        pub fn is_set(&self) -> bool {
            !self.list.is_empty()
        }

        /// Applies one line written to the event's `trigger` file, parsed
        /// (by [`super::parse`]; an `enable_event`'s switch resolved), for the
        /// events of `array`: what it added or removed.
        pub fn apply(&self, array: &TraceArray, request: Request) -> Result<Applied, TriggerError> {
            self.apply_noting(array, request, |_| ())
        }

        /// [`apply`](Self::apply), then `note(whether triggers are left)`
        /// before another writer can change them: for a caller that keeps
        /// that fact elsewhere (`crate::events::arrays`' bits).
        pub fn apply_noting(
            &self,
            array: &TraceArray,
            request: Request,
            note: impl FnOnce(bool),
        ) -> Result<Applied, TriggerError> {
            let _writers = self.writers.lock();
            let mut list: Vec<Arc<Trigger>> = self.list.read(|list| list.cloned().unwrap_or_default());
            let applied = match request {
                // By kind, as Linux matches a removal: `!traceon` takes off
                // a `traceoff` too.
                Request::Remove(command, target) => {
                    let Some(at) = list.iter().position(|trigger| trigger.is_kind(command, target.as_ref())) else {
                        return Ok(Applied::Nothing);
                    };
                    let removed = list.remove(at);
                    Applied::Removed(removed.command, removed.target.clone())
                }
                Request::RemoveHist(spec, filter) => {
                    let Some(at) = list.iter().position(|trigger| trigger.is_hist(&spec, filter.as_deref())) else {
                        return Ok(Applied::Nothing);
                    };
                    // Refused while another trigger reads its variables, as
                    // Linux refuses it. (One just removed may still hold it
                    // in a list waiting for its grace period: the caller
                    // lets those go, outside its locks, and tries again.)
                    if list[at].hist.as_ref().is_some_and(|hist| hist.is_read()) {
                        return Err(TriggerError::Hist(HistError::InUse));
                    }
                    detach(&list.remove(at));
                    Applied::Removed(TriggerCommand::Hist, None)
                }
                Request::Add(trigger) if trigger.hist.is_some() => match add_hist(&list, trigger)? {
                    Some(trigger) => {
                        list.insert(0, Arc::new(trigger));
                        Applied::Added(TriggerCommand::Hist, None)
                    }
                    None => return Ok(Applied::Nothing),
                },
                Request::Add(trigger) => {
                    if let Some(existing) = list.iter().find(|t| t.is_kind(trigger.command, trigger.target.as_ref())) {
                        let name = match &existing.target {
                            Some(target) => alloc::format!("{}:{}:{}", existing.command.name(), target.group, target.event),
                            None => String::from(existing.command.name()),
                        };
                        return Err(TriggerError::Exists(name));
                    }
                    if trigger.command.takes_event() && trigger.switch.is_none() {
                        return Err(TriggerError::MissingEvent(trigger.command.name()));
                    }
                    if trigger.command == TriggerCommand::Snapshot {
                        // Kept when the trigger goes, as Linux keeps it.
                        array.buffer().alloc_snapshot().map_err(|_| TriggerError::NoMemory)?;
                    }
                    let added = Applied::Added(trigger.command, trigger.target.clone());
                    // Newest first, as Linux lists them.
                    list.insert(0, Arc::new(trigger));
                    added
                }
            };
            note(!list.is_empty());
            self.list.replace((!list.is_empty()).then_some(list));
            Ok(applied)
        }

        /// `cat hist`: every `hist` trigger's table, newest first (as
        /// Linux lists them), or `None` if the event has none.
        pub fn hist_text(&self, names: crate::events::hist::Namer, comms: crate::events::hist::Comms) -> Option<String> {
            let _writers = self.writers.lock();
            self.list.read(|list| {
                let mut text = String::new();
                for trigger in list.into_iter().flatten() {
                    let Some(hist) = &trigger.hist else { continue };
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    let _ = hist.write(&trigger.line(), &mut text, names, comms);
                }
                (!text.is_empty()).then_some(text)
            })
        }

        /// Removes every trigger: their trace array, an instance, went.
        /// (Its `enable_event`/`disable_event` switches are its copies of
        /// events, which `crate::events::arrays` forgets with it.)
        pub fn clear(&self) {
            let _writers = self.writers.lock();
            self.list.read(|list| list.into_iter().flatten().for_each(|trigger| detach(trigger)));
            self.list.replace(None);
        }

        /// Removes the trigger of `command`'s kind (and target), if there is
        /// one: a caller that could not go on after adding it.
        pub fn remove(&self, command: TriggerCommand, target: Option<&EventName>) {
            self.remove_noting(command, target, |_| ());
        }

        /// [`remove`](Self::remove), noting what is left as
        /// [`apply_noting`](Self::apply_noting) does.
        pub fn remove_noting(&self, command: TriggerCommand, target: Option<&EventName>, note: impl FnOnce(bool)) {
            let _writers = self.writers.lock();
            let mut list: Vec<Arc<Trigger>> = self.list.read(|list| list.cloned().unwrap_or_default());
            list.iter().filter(|trigger| trigger.is_kind(command, target)).for_each(|trigger| detach(trigger));
            list.retain(|trigger| !trigger.is_kind(command, target));
            note(!list.is_empty());
            self.list.replace((!list.is_empty()).then_some(list));
        }

        /// `cat trigger`: a line per trigger, or the commands available.
        pub fn text(&self) -> String {
            let _writers = self.writers.lock();
            self.list.read(|list| match list {
                Some(list) => list.iter().map(|trigger| trigger.line() + "\n").collect(),
                None => String::from(AVAILABLE),
            })
        }

        /// Runs the triggers that act in `phase` and whose filter keeps the
        /// event whose fields `value` gives, on `array`. Called from the
        /// event's hit path, which may run outside an entry trampoline (a
        /// return, a tracepoint): the list is read with interrupts masked,
        /// which the grace period before an old list is freed waits for.
        #[inline(never)]
        pub fn fire<'a>(&self, array: &TraceArray, phase: Phase, value: &dyn Fn(usize) -> FieldValue<'a>, stack: StackStart) {
            let _irq = arch::irq::IrqGuard::new();
            self.list.read(|list| {
                for trigger in list.into_iter().flatten() {
                    if trigger.phase() != phase || !trigger.filter.as_ref().is_none_or(|filter| filter.matches(value)) {
                        continue;
                    }
                    act(trigger, array, value, stack);
                }
            });
        }
    }

    /// An added `hist` line: the trigger to add, or `None` when it acted
    /// on the `hist` trigger already there with the same histogram and
    /// filter (`pause`, `cont`, `clear`).
    fn add_hist(list: &[Arc<Trigger>], trigger: Trigger) -> Result<Option<Trigger>, TriggerError> {
        let Some(hist) = &trigger.hist else { return Ok(Some(trigger)) };
        let filter = trigger.filter.as_ref().map(|filter| filter.text());
        let existing = list.iter().find_map(|other| match &other.hist {
            Some(table) if other.is_hist(hist.spec(), filter) => Some((other, table)),
            _ => None,
        });
        let controls = hist.spec().controls;
        match (existing, controls.on_existing()) {
            (Some((_, table)), Some(HistControl::Pause)) => table.set_paused(true),
            (Some((_, table)), Some(HistControl::Cont)) => table.set_paused(false),
            // A hit that saw it running is done once every CPU has taken
            // an interrupt (the hit path masks them).
            (Some((_, table)), Some(HistControl::Clear)) => table.clear(arch::smp::sync_all),
            // Named as the trigger there reads (its size may not be the
            // refused line's), so that `!` and its line remove it.
            (Some((other, _)), None) => return Err(TriggerError::Hist(HistError::Exists(other.command_line()))),
            (None, _) if controls.needs_existing() => return Err(TriggerError::NoSuchHist),
            (None, _) => return Ok(Some(trigger)),
        }
        Ok(None)
    }

    fn act<'a>(trigger: &Trigger, array: &TraceArray, value: &dyn Fn(usize) -> FieldValue<'a>, stack: StackStart) {
        let buffer = array.buffer();
        if let Some(hist) = &trigger.hist {
            hist.hit(value, &|| buffer.now(), &|words| stack.fill(words));
            return;
        }
        match trigger.command {
            TriggerCommand::TraceOff if buffer.is_on() && trigger.take() => buffer.set_on(false),
            TriggerCommand::TraceOn if !buffer.is_on() && trigger.take() => buffer.set_on(true),
            // As Linux's, a snapshot with no snapshot buffer (`echo 0 >
            // snapshot` freed it) spends a count too, saying so in the
            // trace and turning tracing off.
            TriggerCommand::Snapshot if trigger.take() => array.snapshot_or_stop(),
            // As Linux counts them: only the hits that change the switch.
            TriggerCommand::EnableEvent | TriggerCommand::DisableEvent => {
                let on = trigger.command == TriggerCommand::EnableEvent;
                if let Some(switch) = &trigger.switch {
                    if switch.soft_on() != on && trigger.take() {
                        switch.set_soft(on);
                    }
                }
            }
            // As Linux's, a stack trace while tracing is off records
            // nothing and keeps its count.
            TriggerCommand::StackTrace if buffer.is_on() && trigger.take() => stack.record(array),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::filter::FieldKind;

    fn fields() -> alloc::vec::Vec<FilterField> {
        alloc::vec![FilterField::new("prev_pid", FieldKind::Signed), FilterField::new("prev_comm", FieldKind::String)]
    }

    fn added(text: &str) -> Trigger {
        match parse(text, &fields()) {
            Ok(Request::Add(trigger)) => trigger,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn commands_counts_and_filters_read_back_as_linux_prints_them() {
        assert_eq!(added("traceoff").line(), "traceoff:unlimited");
        assert_eq!(added("  traceon:5 ").line(), "traceon:count=5");
        assert_eq!(added("snapshot:0x10").line(), "snapshot:count=16");
        assert_eq!(added("snapshot:010").line(), "snapshot:count=8", "octal, as kstrtoul reads it");
        assert_eq!(added("snapshot:0").line(), "snapshot:count=0");
        assert_eq!(added("stacktrace:2 if prev_pid == 0").line(), "stacktrace:count=2 if prev_pid == 0");
        assert_eq!(added("stacktrace if prev_comm == \"idle\"").line(), "stacktrace:unlimited if prev_comm == \"idle\"");
        // `NAME:` alone is the plain command, as in Linux.
        assert_eq!(added("traceoff:").line(), "traceoff:unlimited");
    }

    #[test]
    fn phases_follow_linux_post_triggers_and_filters() {
        assert_eq!(added("traceon").phase(), Phase::BeforeRecord);
        assert_eq!(added("snapshot").phase(), Phase::BeforeRecord);
        assert_eq!(added("traceoff").phase(), Phase::AfterRecord);
        assert_eq!(added("stacktrace").phase(), Phase::AfterRecord);
        assert_eq!(added("traceon if prev_pid == 1").phase(), Phase::AfterRecord);
    }

    #[test]
    fn removal_names_only_the_command() {
        assert!(matches!(parse("!traceoff", &fields()), Ok(Request::Remove(TriggerCommand::TraceOff, None))));
        assert!(matches!(
            parse("!stacktrace:3 if prev_pid == 0", &fields()),
            Ok(Request::Remove(TriggerCommand::StackTrace, None))
        ));
        let Ok(Request::Remove(TriggerCommand::DisableEvent, Some(target))) =
            parse("!disable_event:sched:sched_switch", &fields())
        else {
            panic!("a removal names its event")
        };
        assert_eq!((target.group.as_str(), target.event.as_str()), ("sched", "sched_switch"));
    }

    #[test]
    fn enable_event_names_the_event_then_a_count_and_a_filter() {
        assert_eq!(added("enable_event:sched:sched_switch").line(), "enable_event:sched:sched_switch:unlimited");
        assert_eq!(added("disable_event:fprobes:fibt:2").line(), "disable_event:fprobes:fibt:count=2");
        assert_eq!(
            added("enable_event:fprobes:fibt:1 if prev_pid == 3").line(),
            "enable_event:fprobes:fibt:count=1 if prev_pid == 3"
        );
        assert_eq!(added("enable_event:g:e if prev_pid == 3").line(), "enable_event:g:e:unlimited if prev_pid == 3");
        assert_eq!(added("enable_event:g:e").phase(), Phase::BeforeRecord);
        let error = |text: &str| parse(text, &fields()).unwrap_err();
        assert_eq!(error("enable_event"), TriggerError::MissingEvent("enable_event"));
        assert_eq!(error("enable_event:sched"), TriggerError::MissingEvent("enable_event"));
        assert_eq!(error("disable_event:g:e:x"), TriggerError::Malformed("x".into()));
        assert!(TriggerCommand::EnableEvent.same_kind(TriggerCommand::DisableEvent));
        let name = |group: &str, event: &str| EventName { group: group.into(), event: event.into() };
        let enable = added("enable_event:g:e");
        assert!(enable.is_kind(TriggerCommand::DisableEvent, Some(&name("g", "e"))), "one kind per target");
        assert!(!enable.is_kind(TriggerCommand::EnableEvent, Some(&name("g", "f"))), "another target");
        assert!(!enable.is_kind(TriggerCommand::EnableEvent, None));
    }

    #[test]
    fn malformed_lines_are_refused_with_the_reason() {
        let error = |text: &str| parse(text, &fields()).unwrap_err();
        assert_eq!(error("traceof"), TriggerError::UnknownCommand("traceof".into()));
        assert_eq!(error("!nosuch"), TriggerError::UnknownCommand("nosuch".into()));
        assert_eq!(error("traceoff:5x"), TriggerError::BadCount("5x".into()));
        assert_eq!(error("traceoff:09"), TriggerError::BadCount("09".into()));
        assert_eq!(error("traceoff:0+5"), TriggerError::BadCount("0+5".into()), "a sign only first, as kstrtoul");
        assert_eq!(error("traceoff:18446744073709551615"), TriggerError::BadCount("18446744073709551615".into()));
        assert_eq!(error("traceoff:abc"), TriggerError::Malformed("abc".into()));
        assert_eq!(error("traceoff if"), TriggerError::Malformed("if".into()));
        assert_eq!(error("traceoff:3 when x"), TriggerError::Malformed("when x".into()));
        match error("traceoff if  nosuch == 1 ") {
            TriggerError::Filter { expression, error } => {
                assert_eq!((expression.as_str(), error.at), ("nosuch == 1", 7), "the filter alone, and the place in it")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn counts_run_out() {
        let trigger = added("snapshot:2");
        assert!(trigger.take());
        assert!(trigger.take());
        assert!(!trigger.take());
        assert_eq!(trigger.line(), "snapshot:count=0");
        let unlimited = added("snapshot");
        assert!((0..1000).all(|_| unlimited.take()));
    }

    #[test]
    fn one_trigger_of_a_kind() {
        assert!(TriggerCommand::TraceOn.same_kind(TriggerCommand::TraceOff));
        assert!(!TriggerCommand::Snapshot.same_kind(TriggerCommand::StackTrace));
    }

    #[test]
    fn hist_lines_parse_with_their_filter_and_removals_name_the_histogram() {
        let trigger = added("hist:keys=prev_pid:sort=prev_pid.descending if prev_comm == \"fib*\"");
        assert_eq!(
            trigger.line(),
            "hist:keys=prev_pid:vals=hitcount:sort=prev_pid.descending:size=2048 if prev_comm == \"fib*\" [active]"
        );
        assert_eq!((trigger.command, trigger.phase()), (TriggerCommand::Hist, Phase::AfterRecord));
        let same = crate::events::hist::spec::parse("keys=prev_pid:sort=prev_pid.descending:size=128", &fields()).unwrap();
        assert!(trigger.is_hist(&same, Some("prev_comm == \"fib*\"")), "the size does not count");
        assert!(!trigger.is_hist(&same, None), "the filter does");
        assert_eq!(added("hist:keys=prev_pid:pause").line(), "hist:keys=prev_pid:vals=hitcount:sort=hitcount:size=2048 [paused]");
        match parse("!hist:keys=prev_pid if prev_pid > 1", &fields()) {
            Ok(Request::RemoveHist(spec, filter)) => {
                assert!(spec.same_as(&crate::events::hist::spec::parse("keys=prev_pid", &fields()).unwrap()));
                assert_eq!(filter.as_deref(), Some("prev_pid > 1"));
            }
            other => panic!("{other:?}"),
        }
        let error = |text: &str| parse(text, &fields()).unwrap_err();
        assert_eq!(
            error("hist:keys=nosuch"),
            TriggerError::Hist(crate::events::hist::spec::HistError::NoSuchField("nosuch".into()))
        );
        assert_eq!(error("hist:keys=prev_pid when"), TriggerError::Malformed("when".into()));
        assert!(AVAILABLE.ends_with(" hist\n"));
    }
}
