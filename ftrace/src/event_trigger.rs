//! Event triggers: `events/GRP/EVENT/trigger`, Linux's way of acting when an
//! event fires. `traceon`, `traceoff`, `snapshot` and `stacktrace`, each
//! with an optional count (`traceoff:1`) and filter (`stacktrace if
//! prev_pid == 0`); `!NAME` removes one.
//!
//! Design. An event keeps its triggers in a [`Triggers`]: a list published
//! whole (each write builds a new one; the old one is freed after a grace
//! period) that the event's hit path reads without a lock. The counts live
//! in the triggers, which every list holding them shares (`Arc`): adding or
//! removing one trigger leaves another's count alone.
//!
//! What a hit does, as in Linux: triggers run whether or not the event is
//! enabled (an event with triggers fires even with `enable` at 0, and then
//! records nothing) and whatever the event's own filter keeps. An
//! unfiltered `traceon` or `snapshot` acts before the event is recorded;
//! every other trigger after it (so a `traceoff` keeps the event that
//! stopped tracing, and a filtered trigger reads the event's fields). An
//! event has at most one trigger of a kind (`traceon` and `traceoff` are
//! one kind), as in Linux; `!NAME` removes the trigger of NAME's kind, and
//! removing one that is not there does nothing, as in Linux. `traceon`/`traceoff` count only the hits that change
//! `tracing_on`; `snapshot`/`stacktrace` count every hit they act on (not
//! a stack trace while tracing is off, nor a snapshot with no snapshot
//! buffer: those do nothing and keep their count).
//!
//! Failure modes: a bad line (an unknown command, a malformed count, a bad
//! filter, a second trigger of a kind) changes nothing and says why. A
//! `snapshot` trigger allocates the snapshot buffer when it is added (a hit
//! cannot allocate); without memory it is refused.
//!
//! Not as in Linux: `set_event_pid` decides what an event records, not
//! which hits its triggers see; `enable_event`, `disable_event` and `hist`
//! are not implemented.

use alloc::string::{String, ToString};
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::event_filter::{EventFilter, FilterError, FilterField};

/// What a trigger does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerCommand {
    TraceOn,
    TraceOff,
    Snapshot,
    StackTrace,
}

impl TriggerCommand {
    /// Every command, in the order `cat trigger` lists them.
    pub const ALL: [TriggerCommand; 4] =
        [TriggerCommand::TraceOn, TriggerCommand::TraceOff, TriggerCommand::Snapshot, TriggerCommand::StackTrace];

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
        }
    }

    /// Whether `other` is the same kind (an event has one of a kind):
    /// `traceon` and `traceoff` are one kind, as in Linux.
    #[cfg_attr(not(any(test, target_os = "none")), allow(dead_code))]
    fn same_kind(self, other: TriggerCommand) -> bool {
        let kind = |command| match command {
            TriggerCommand::TraceOn | TriggerCommand::TraceOff => 0,
            TriggerCommand::Snapshot => 1,
            TriggerCommand::StackTrace => 2,
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

/// No count: every hit acts.
const UNLIMITED: u64 = u64::MAX;

/// One trigger of an event.
#[derive(Debug)]
pub struct Trigger {
    command: TriggerCommand,
    /// Actions left, or [`UNLIMITED`].
    left: AtomicU64,
    filter: Option<EventFilter>,
}

impl Trigger {
    /// Its command.
    pub fn command(&self) -> TriggerCommand {
        self.command
    }

    /// When it acts.
    pub fn phase(&self) -> Phase {
        let after = self.filter.is_some() || matches!(self.command, TriggerCommand::TraceOff | TriggerCommand::StackTrace);
        if after {
            Phase::AfterRecord
        } else {
            Phase::BeforeRecord
        }
    }

    /// Its line in `cat trigger`: `traceoff:unlimited`,
    /// `stacktrace:count=2 if prev_pid == 0`.
    pub fn line(&self) -> String {
        let mut line = String::from(self.command.name());
        match self.left.load(Ordering::Relaxed) {
            UNLIMITED => line.push_str(":unlimited"),
            n => line.push_str(&alloc::format!(":count={n}")),
        }
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
    /// `!NAME`: the event's trigger of that command goes.
    Remove(TriggerCommand),
}

/// Why a trigger line was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TriggerError {
    UnknownCommand(String),
    /// `NAME:N` with an N that is no number.
    BadCount(String),
    /// Text after the command that is neither a count nor `if FILTER`.
    Malformed(String),
    Filter(FilterError),
    /// The event has a trigger of that kind already (Linux: EEXIST).
    Exists(&'static str),
    /// No memory for the snapshot buffer a `snapshot` trigger needs.
    NoMemory,
}

impl fmt::Display for TriggerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TriggerError::UnknownCommand(name) => {
                write!(f, "unknown trigger '{name}' (traceon, traceoff, snapshot, stacktrace)")
            }
            TriggerError::BadCount(count) => write!(f, "bad trigger count '{count}'"),
            TriggerError::Malformed(text) => write!(f, "expected ':COUNT' or 'if FILTER', found '{text}'"),
            TriggerError::Filter(error) => write!(f, "trigger filter: {error}"),
            TriggerError::Exists(name) => write!(f, "the event has a '{name}' trigger already (remove it with '!{name}')"),
            TriggerError::NoMemory => write!(f, "not enough memory for the snapshot buffer"),
        }
    }
}

/// Parses one trigger line, `[!]NAME[:COUNT] [if FILTER]`, the filter over
/// the event's `fields`. A count is decimal, `0x` hex or `0` octal, as
/// Linux's `kstrtoul` (base 0) takes it.
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
    if remove {
        return Ok(Request::Remove(command));
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
    let filter = match filter {
        "" => None,
        filter => {
            let expression = filter
                .strip_prefix("if")
                .filter(|after| after.starts_with(|c: char| c.is_ascii_whitespace()))
                .map(str::trim)
                .filter(|expression| !expression.is_empty())
                .ok_or_else(|| TriggerError::Malformed(filter.to_string()))?;
            Some(EventFilter::parse(expression, fields).map_err(TriggerError::Filter)?)
        }
    };
    Ok(Request::Add(Trigger { command, left: AtomicU64::new(count.unwrap_or(UNLIMITED)), filter }))
}

fn parse_count(text: &str) -> Result<u64, TriggerError> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None if text.len() > 1 && text.starts_with('0') => u64::from_str_radix(&text[1..], 8),
        None => text.parse(),
    };
    // The largest count means "unlimited" here: refused, not misread.
    parsed.ok().filter(|&n| n != UNLIMITED).ok_or_else(|| TriggerError::BadCount(text.to_string()))
}

/// What `cat trigger` prints for an event with no trigger.
pub const AVAILABLE: &str = "# Available triggers:\n# traceon traceoff snapshot stacktrace\n";

#[cfg(target_os = "none")]
pub use kernel_side::{StackStart, Triggers};

#[cfg(target_os = "none")]
mod kernel_side {
    use alloc::string::String;
    use alloc::sync::Arc;
    use alloc::vec::Vec;

    use super::{parse, Phase, Request, Trigger, TriggerCommand, TriggerError, AVAILABLE};
    use crate::deferred::Published;
    use crate::event_filter::{FieldValue, FilterField};
    use crate::instance::TraceArray;

    /// Where a `stacktrace` trigger's call chain starts: the addresses the
    /// hit knows (the probed function, where it returns to; zero: none),
    /// then the return addresses of the frame records from `fp` up.
    #[derive(Clone, Copy, Debug)]
    pub struct StackStart {
        pub addresses: [usize; 2],
        pub fp: usize,
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

        /// Applies one line written to the event's `trigger` file (its
        /// filters over `fields`), for the events of `array`: the command it
        /// added, if it added one (a caller that cannot go on takes it back
        /// with [`remove`](Self::remove)). A line with only blanks does
        /// nothing.
        pub fn write(
            &self,
            array: &TraceArray,
            text: &str,
            fields: &[FilterField],
        ) -> Result<Option<TriggerCommand>, TriggerError> {
            if text.trim().is_empty() {
                return Ok(None);
            }
            let request = parse(text, fields)?;
            let _writers = self.writers.lock();
            let mut list: Vec<Arc<Trigger>> = self.list.read(|list| list.cloned().unwrap_or_default());
            let added = match request {
                // By kind, as Linux matches a removal: `!traceon` takes off
                // a `traceoff` too.
                Request::Remove(command) => {
                    let before = list.len();
                    list.retain(|trigger| !trigger.command.same_kind(command));
                    if list.len() == before {
                        return Ok(None);
                    }
                    None
                }
                Request::Add(trigger) => {
                    if let Some(existing) = list.iter().find(|t| t.command.same_kind(trigger.command)) {
                        return Err(TriggerError::Exists(existing.command.name()));
                    }
                    if trigger.command == TriggerCommand::Snapshot {
                        // Kept when the trigger goes, as Linux keeps it.
                        array.buffer().alloc_snapshot().map_err(|_| TriggerError::NoMemory)?;
                    }
                    let command = trigger.command;
                    // Newest first, as Linux lists them.
                    list.insert(0, Arc::new(trigger));
                    Some(command)
                }
            };
            self.list.replace((!list.is_empty()).then_some(list));
            Ok(added)
        }

        /// Removes the trigger of `command`'s kind, if there is one.
        pub fn remove(&self, command: TriggerCommand) {
            let _writers = self.writers.lock();
            let mut list: Vec<Arc<Trigger>> = self.list.read(|list| list.cloned().unwrap_or_default());
            list.retain(|trigger| !trigger.command.same_kind(command));
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
                    act(trigger, array, stack);
                }
            });
        }
    }

    fn act(trigger: &Trigger, array: &TraceArray, stack: StackStart) {
        let buffer = array.buffer();
        match trigger.command {
            TriggerCommand::TraceOff if buffer.is_on() && trigger.take() => buffer.set_on(false),
            TriggerCommand::TraceOn if !buffer.is_on() && trigger.take() => buffer.set_on(true),
            // A snapshot that cannot be taken (`echo 0 > snapshot` freed
            // its buffer) and a stack trace while tracing is off record
            // nothing: they keep their count, as in Linux (where they
            // would not run).
            TriggerCommand::Snapshot if buffer.snapshot_allocated() && trigger.take() => {
                buffer.swap_snapshot();
            }
            TriggerCommand::StackTrace if buffer.is_on() && trigger.take() => {
                let known = stack.addresses.into_iter().filter(|&address| address != 0);
                crate::func_probe::record_frames(array, known.chain(crate::unwind::return_addresses(stack.fp)));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_filter::FieldKind;

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
        assert!(matches!(parse("!traceoff", &fields()), Ok(Request::Remove(TriggerCommand::TraceOff))));
        assert!(matches!(parse("!stacktrace:3 if prev_pid == 0", &fields()), Ok(Request::Remove(TriggerCommand::StackTrace))));
    }

    #[test]
    fn malformed_lines_are_refused_with_the_reason() {
        let error = |text: &str| parse(text, &fields()).unwrap_err();
        assert_eq!(error("traceof"), TriggerError::UnknownCommand("traceof".into()));
        assert_eq!(error("!nosuch"), TriggerError::UnknownCommand("nosuch".into()));
        assert_eq!(error("traceoff:5x"), TriggerError::BadCount("5x".into()));
        assert_eq!(error("traceoff:09"), TriggerError::BadCount("09".into()));
        assert_eq!(error("traceoff:18446744073709551615"), TriggerError::BadCount("18446744073709551615".into()));
        assert_eq!(error("traceoff:abc"), TriggerError::Malformed("abc".into()));
        assert_eq!(error("traceoff if"), TriggerError::Malformed("if".into()));
        assert_eq!(error("traceoff:3 when x"), TriggerError::Malformed("when x".into()));
        assert!(matches!(error("traceoff if nosuch == 1"), TriggerError::Filter(_)));
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
}
