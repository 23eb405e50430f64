//! Function commands (Linux's "function probes"): `FUNC:traceoff[:N]`,
//! `FUNC:traceon[:N]` and `FUNC:stacktrace[:N]` written to a trace array's
//! `set_ftrace_filter` attach an action to the functions FUNC matches,
//! apart from the array's tracer and its filter.
//!
//! As in Linux, a command written with a count (`FUNC:traceoff:N`) and one
//! without (`FUNC:traceoff`) are two commands (Linux's
//! `traceoff_count_probe_ops` and `traceoff_probe_ops`): both can be
//! attached to a function, and `!FUNC:traceoff` takes off the one without
//! a count, `!FUNC:traceoff:N` (whatever N says) the one with.
//!
//! Each command is its own ops (with [`OpsFlags::RECURSION`]) whose filter
//! is the functions FUNC matched, found again from the callback through the
//! ops's container. As in Linux, a function has a command at most once
//! (adding it again where it is attached adds it only to the functions
//! that lack it), and `!FUNC:NAME` takes the command off the functions
//! FUNC matches, whatever glob attached it. A count is kept per function,
//! as Linux keeps it.
//! `traceoff`/`traceon` switch the array's `tracing_on`; with a count, only
//! the first N calls that change it count (as Linux counts them).
//! `stacktrace` records the call chain as a `<stack trace>` event.
//! `snapshot` takes a snapshot (the array's snapshot buffer is allocated
//! when the command is attached, so the callback only swaps two pointers;
//! if `echo 0 > snapshot` freed it since, the command says so in the trace
//! and turns tracing off, as Linux's does).
//! `enable_event:GRP:EVENT` and `disable_event:GRP:EVENT` switch the
//! array's copy of an event (the caller resolves it into an [`EventHook`]:
//! that copy's soft switch, which keeps it in soft mode until the hook is
//! dropped, as an event trigger's does); they count only the calls that
//! change the switch. An instance's commands go before the instance does
//! ([`remove_all`]; `rmdir` is refused if one cannot), so a hook never
//! outlives its array.
//! A removed command is unregistered and freed after a grace period.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use arch::ftrace_abi::FtraceRegs;
use arch::sync::Mutex;

use crate::array::trace_array::TraceArray;
use crate::events::trigger::{EventName, EventSwitch};
use ftrace::{deferred, registry, FilterKind, FilterMode, FtraceError, FtraceOps, OpsFlags};

/// What a function command does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    TraceOff,
    TraceOn,
    StackTrace,
    Snapshot,
    /// `enable_event:GRP:EVENT`: the event starts recording.
    EnableEvent(EventName),
    /// `disable_event:GRP:EVENT`: it stops.
    DisableEvent(EventName),
}

impl Command {
    /// The command called `name` in `FUNC:NAME` (not the ones that name an
    /// event: see [`Command::switching`]).
    pub fn from_name(name: &str) -> Option<Command> {
        match name {
            "traceoff" => Some(Command::TraceOff),
            "traceon" => Some(Command::TraceOn),
            "stacktrace" => Some(Command::StackTrace),
            "snapshot" => Some(Command::Snapshot),
            _ => None,
        }
    }

    /// `enable_event`/`disable_event` (`name`) of `GRP:EVENT`.
    pub fn switching(name: &str, group: &str, event: &str) -> Option<Command> {
        let target = EventName { group: group.into(), event: event.into() };
        match name {
            "enable_event" => Some(Command::EnableEvent(target)),
            "disable_event" => Some(Command::DisableEvent(target)),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            Command::TraceOff => "traceoff",
            Command::TraceOn => "traceon",
            Command::StackTrace => "stacktrace",
            Command::Snapshot => "snapshot",
            Command::EnableEvent(_) => "enable_event",
            Command::DisableEvent(_) => "disable_event",
        }
    }

    /// The event it switches.
    pub fn target(&self) -> Option<&EventName> {
        match self {
            Command::EnableEvent(target) | Command::DisableEvent(target) => Some(target),
            _ => None,
        }
    }

    /// As `set_ftrace_filter` lists it after the function:
    /// `traceoff`, `enable_event:sched:sched_switch`.
    pub fn spec(&self) -> String {
        match self.target() {
            Some(target) => format!("{}:{}:{}", self.name(), target.group, target.event),
            None => String::from(self.name()),
        }
    }
}

/// The event an `enable_event`/`disable_event` command switches: its soft
/// switch, and what gives the event's soft mode back when the command goes
/// (run when the hook is dropped, in task context).
pub struct EventHook {
    pub switch: Arc<dyn EventSwitch>,
    pub release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Drop for EventHook {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

// No count: every call acts.
use ftrace::number::UNLIMITED;

/// One attached command.
struct FuncProbe {
    ops: FtraceOps,
    array: &'static TraceArray,
    command: Command,
    /// Written with a count: apart from the same command without one.
    counted: bool,
    /// Per function (sorted by address): the actions left, or
    /// [`UNLIMITED`].
    left: Box<[(usize, AtomicU64)]>,
    /// The event an `enable_event`/`disable_event` command switches.
    hook: Option<EventHook>,
}

/// Every attached command, of every array.
static PROBES: Mutex<Vec<&'static FuncProbe>> = Mutex::new(Vec::new());

extern "C" fn run_command(ip: usize, _parent: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: `add` set the container to the leaked probe holding this ops;
    // it is freed only after it is unregistered and a grace period passed.
    let probe = unsafe { &*ops.container::<FuncProbe>() };
    let buffer = probe.array.buffer();
    let take = || {
        let Ok(at) = probe.left.binary_search_by_key(&ip, |(function, _)| *function) else { return false };
        probe.left[at]
            .1
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| match left {
                0 => None,
                UNLIMITED => Some(UNLIMITED),
                n => Some(n - 1),
            })
            .is_ok()
    };
    match &probe.command {
        Command::TraceOff if buffer.is_on() && take() => buffer.set_on(false),
        Command::TraceOn if !buffer.is_on() && take() => buffer.set_on(true),
        // As Linux's: while tracing is off, nothing, and the count is kept.
        Command::StackTrace if buffer.is_on() && take() => crate::stack_trace::record_stack(probe.array, ip, fregs),
        // As Linux's: with no snapshot buffer, a note in the trace and
        // tracing off.
        Command::Snapshot if take() => probe.array.snapshot_or_stop(),
        // As Linux counts them: only the calls that change the switch.
        Command::EnableEvent(_) | Command::DisableEvent(_) => {
            let on = matches!(probe.command, Command::EnableEvent(_));
            if let Some(hook) = &probe.hook {
                if hook.switch.soft_on() != on && take() {
                    hook.switch.set_soft(on);
                }
            }
        }
        _ => {}
    }
}

/// Why a command was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// `FUNC:NAME` with a NAME that is no command.
    UnknownCommand(String),
    /// `FUNC:COMMAND:N` with an N that is no count (a number as C writes
    /// it, below the largest, which means unlimited).
    BadCount(String),
    /// Removing a command that is not attached.
    NotAttached(String),
    /// Removing a command that is attached only in its other form: with a
    /// count when written without one, or the reverse (Linux keeps the two
    /// apart too). The command as written, then as it is attached.
    AttachedOtherwise(String, String),
    /// Adding a command every function the glob matches already has.
    AlreadyAttached(String),
    Tracing(FtraceError),
    /// No memory for the snapshot buffer `snapshot` needs.
    NoMemory,
    /// `enable_event`/`disable_event` without the event resolved.
    NoEvent,
    /// `FUNC:mod:MODULE`: Linux's module filter; this kernel has no
    /// modules.
    NoModules,
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::UnknownCommand(name) => {
                write!(
                    f,
                    "unknown command '{name}' (traceoff, traceon, stacktrace, snapshot, enable_event:GRP:EVENT, disable_event:GRP:EVENT)"
                )
            }
            ProbeError::BadCount(count) => write!(f, "bad count '{count}': a number of calls (decimal, 0x hex or 0 octal)"),
            ProbeError::NotAttached(what) => write!(f, "'{what}' is not attached"),
            ProbeError::AttachedOtherwise(what, attached) => {
                write!(f, "'{what}' is not attached, but '{attached}' is: remove it written that way ('!{attached}')")
            }
            ProbeError::AlreadyAttached(what) => write!(f, "'{what}' is already attached to every function it matches"),
            ProbeError::Tracing(error) => write!(f, "{error}"),
            ProbeError::NoMemory => write!(f, "not enough memory for the snapshot buffer"),
            ProbeError::NoEvent => write!(f, "enable_event and disable_event need their event (GRP:EVENT)"),
            ProbeError::NoModules => write!(f, "':mod:' (module filtering) is not supported: this kernel has no modules"),
        }
    }
}

/// The functions `glob` matches (an error if none).
fn functions(glob: &str) -> Result<Vec<usize>, ProbeError> {
    registry::match_functions(&[], glob, FilterMode::Replace).map_err(ProbeError::Tracing)
}

impl FuncProbe {
    /// Whether it is `command` (`counted`: written with a count) of `array`.
    fn is(&self, array: &TraceArray, command: &Command, counted: bool) -> bool {
        core::ptr::eq(self.array, array) && self.command == *command && self.counted == counted
    }
}

/// `FUNC:COMMAND`, or `FUNC:COMMAND:N` for a `counted` one, for messages.
fn written(glob: &str, command: &Command, counted: bool) -> String {
    format!("{glob}:{}{}", command.spec(), if counted { ":N" } else { "" })
}

/// The functions `command` (`counted` or not) is attached to in `array`.
fn attached(probes: &[&'static FuncProbe], array: &TraceArray, command: &Command, counted: bool) -> Vec<usize> {
    let mut ips: Vec<usize> = probes
        .iter()
        .filter(|p| p.is(array, command, counted))
        .flat_map(|p| registry::filter_ips(&p.ops, FilterKind::Filter))
        .collect();
    ips.sort_unstable();
    ips
}

/// The functions an `add` would attach `command` to: those `glob` matches
/// that do not have it yet.
fn to_attach(array: &TraceArray, glob: &str, command: &Command, counted: bool) -> Result<Vec<usize>, ProbeError> {
    newly_attached(&attached(&PROBES.lock(), array, command, counted), glob, command, counted)
}

/// The functions `glob` matches that are not in `have` (sorted), or the
/// error an add gets when there are none.
fn newly_attached(have: &[usize], glob: &str, command: &Command, counted: bool) -> Result<Vec<usize>, ProbeError> {
    let new: Vec<usize> = functions(glob)?.into_iter().filter(|ip| have.binary_search(ip).is_err()).collect();
    if new.is_empty() {
        return Err(ProbeError::AlreadyAttached(written(glob, command, counted)));
    }
    Ok(new)
}

/// One command of a write: `!`, its glob, the command, and whether it was
/// written with a count.
pub type Change<'a> = (bool, &'a str, &'a Command, bool);

/// The error removing `command` (`counted` or not) from the functions
/// `glob` matched gets when it is attached to none of them: one that names
/// the other form when that one is attached there.
fn not_attached(array: &TraceArray, glob: &str, matched: &[usize], command: &Command, counted: bool) -> ProbeError {
    let other = attached(&PROBES.lock(), array, command, !counted);
    if matched.iter().any(|ip| other.binary_search(ip).is_ok()) {
        let attached = format!("{glob}:{}{}", command.spec(), if counted { "" } else { ":0" });
        return ProbeError::AttachedOtherwise(written(glob, command, counted), attached);
    }
    ProbeError::NotAttached(written(glob, command, counted))
}

/// Checks that [`add`] (or, with `remove`, [`remove`]) would succeed for
/// each of `changes` in turn, each seeing what the ones before it did,
/// changing nothing: a write of several commands checks them all first.
pub fn check(array: &TraceArray, changes: &[Change]) -> Result<(), ProbeError> {
    // What each command would be attached to as the changes go.
    let mut would: Vec<((&Command, bool), Vec<usize>)> = Vec::new();
    for &(remove, glob, command, counted) in changes {
        let index = match would.iter().position(|(key, _)| *key == (command, counted)) {
            Some(index) => index,
            None => {
                would.push(((command, counted), attached(&PROBES.lock(), array, command, counted)));
                would.len() - 1
            }
        };
        let have = &mut would[index].1;
        if remove {
            let matched = functions(glob)?;
            if !matched.iter().any(|ip| have.binary_search(ip).is_ok()) {
                return Err(not_attached(array, glob, &matched, command, counted));
            }
            have.retain(|ip| matched.binary_search(ip).is_err());
        } else {
            let new = newly_attached(have, glob, command, counted)?;
            have.extend(new);
            have.sort_unstable();
        }
    }
    Ok(())
}

/// Attaches `command` to the functions `glob` matches in `array` that do
/// not have it yet, for `count` actions (`None`: every call; a command
/// with a count and one without are two, as in Linux). An
/// `enable_event`/`disable_event` needs its event's `hook` (dropped, and
/// so released, if the command is refused).
pub fn add(
    array: &'static TraceArray,
    glob: &str,
    command: Command,
    count: Option<u64>,
    hook: Option<EventHook>,
) -> Result<(), ProbeError> {
    if command.target().is_some() && hook.is_none() {
        return Err(ProbeError::NoEvent);
    }
    let ips = to_attach(array, glob, &command, count.is_some())?;
    if command == Command::Snapshot {
        // Allocated now (a callback cannot allocate); kept when the command
        // goes, as Linux keeps it, until `echo 0 > snapshot`.
        array.buffer().alloc_snapshot().map_err(|_| ProbeError::NoMemory)?;
    }
    let probe: &'static FuncProbe = Box::leak(Box::new(FuncProbe {
        ops: FtraceOps::new(run_command, OpsFlags::RECURSION),
        array,
        command,
        counted: count.is_some(),
        left: ips.iter().map(|&ip| (ip, AtomicU64::new(count.unwrap_or(UNLIMITED)))).collect(),
        hook,
    }));
    probe.ops.set_container(probe);
    let attached = registry::set_filter_ips(&probe.ops, FilterKind::Filter, &ips, FilterMode::Replace)
        .and_then(|()| registry::register(&probe.ops));
    if let Err(error) = attached {
        // SAFETY: leaked just above and never registered: nothing else has it.
        drop(unsafe { Box::from_raw(probe as *const FuncProbe as *mut FuncProbe) });
        return Err(ProbeError::Tracing(error));
    }
    PROBES.lock().push(probe);
    Ok(())
}

/// Takes `command` off the functions `glob` matches in `array`
/// (`!FUNC:NAME`; `counted`: the one written with a count,
/// `!FUNC:NAME:N`): a probe left with no function goes.
pub fn remove(array: &'static TraceArray, glob: &str, command: &Command, counted: bool) -> Result<(), ProbeError> {
    check(array, &[(true, glob, command, counted)])?;
    let matched = functions(glob)?;
    let mine: Vec<&'static FuncProbe> = PROBES.lock().iter().copied().filter(|p| p.is(array, command, counted)).collect();
    for probe in mine {
        let ips = registry::filter_ips(&probe.ops, FilterKind::Filter);
        let left: Vec<usize> = ips.iter().copied().filter(|ip| matched.binary_search(ip).is_err()).collect();
        if left.len() == ips.len() {
            continue;
        }
        if !left.is_empty() {
            registry::set_filter_ips(&probe.ops, FilterKind::Filter, &left, FilterMode::Replace).map_err(ProbeError::Tracing)?;
            continue;
        }
        registry::unregister(&probe.ops).map_err(ProbeError::Tracing)?;
        PROBES.lock().retain(|p| !core::ptr::eq(*p, probe));
        deferred::synchronize();
        // SAFETY: leaked by `add`, unregistered and unlisted, and the grace
        // period is over: no callback still runs on it.
        drop(unsafe { Box::from_raw(probe as *const FuncProbe as *mut FuncProbe) });
    }
    Ok(())
}

/// Detaches every command of `array` (an instance going away). An error
/// leaves the commands not yet detached attached (and so their array
/// needed: the caller keeps it).
pub fn remove_all(array: &'static TraceArray) -> Result<(), ProbeError> {
    // Each command once: one removal takes it off every function, so a
    // second would find it gone (the probes of one command need not be
    // next to each other).
    let mut commands: Vec<(Command, bool)> = Vec::new();
    for probe in PROBES.lock().iter().filter(|p| core::ptr::eq(p.array, array)) {
        let command = (probe.command.clone(), probe.counted);
        if !commands.contains(&command) {
            commands.push(command);
        }
    }
    commands.into_iter().try_for_each(|(command, counted)| remove(array, "*", &command, counted))
}

/// The lines `cat set_ftrace_filter` adds for `array`'s commands, as Linux
/// prints them: `FUNCTION:COMMAND:unlimited` or `...:count=N`.
pub fn lines(array: &TraceArray) -> Vec<String> {
    let probes = PROBES.lock();
    let mut lines = Vec::new();
    for probe in probes.iter().filter(|p| core::ptr::eq(p.array, array)) {
        // The two lists are in address order, one entry per function.
        let ips = registry::filter_ips(&probe.ops, FilterKind::Filter);
        for (ip, name) in ips.into_iter().zip(registry::filter_names(&probe.ops, FilterKind::Filter)) {
            let left = probe
                .left
                .binary_search_by_key(&ip, |(function, _)| *function)
                .map(|at| probe.left[at].1.load(Ordering::Relaxed));
            let count = match left {
                Ok(UNLIMITED) | Err(_) => String::from("unlimited"),
                Ok(n) => format!("count={n}"),
            };
            lines.push(format!("{name}:{}:{count}", probe.command.spec()));
        }
    }
    lines
}
