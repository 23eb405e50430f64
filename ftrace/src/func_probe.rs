//! Function commands (Linux's "function probes"): `FUNC:traceoff[:N]`,
//! `FUNC:traceon[:N]` and `FUNC:stacktrace[:N]` written to a trace array's
//! `set_ftrace_filter` attach an action to the functions FUNC matches,
//! apart from the array's tracer and its filter.
//!
//! Each command is its own ops (with [`OpsFlags::RECURSION`]) whose filter
//! is FUNC, found again from the callback through the ops's container.
//! `traceoff`/`traceon` switch the array's `tracing_on`; with a count, only
//! the first N calls that change it count (as Linux counts them).
//! `stacktrace` records the call chain as a `<stack trace>` event.
//! `snapshot` takes a snapshot (the array's snapshot buffer is allocated
//! when the command is attached, so the callback only swaps two pointers).
//! A removed command is unregistered and freed after a grace period.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use arch::ftrace_abi::FtraceRegs;
use arch::sync::Mutex;

use crate::event::{encode_stack, stack_event_size, TRACE_STACK};
use crate::instance::TraceArray;
use crate::{deferred, registry, FilterKind, FilterMode, FtraceError, FtraceOps, OpsFlags};

/// What a function command does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    TraceOff,
    TraceOn,
    StackTrace,
    Snapshot,
}

impl Command {
    /// The command called `name` in `FUNC:NAME`.
    pub fn from_name(name: &str) -> Option<Command> {
        match name {
            "traceoff" => Some(Command::TraceOff),
            "traceon" => Some(Command::TraceOn),
            "stacktrace" => Some(Command::StackTrace),
            "snapshot" => Some(Command::Snapshot),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Command::TraceOff => "traceoff",
            Command::TraceOn => "traceon",
            Command::StackTrace => "stacktrace",
            Command::Snapshot => "snapshot",
        }
    }
}

/// No count: every call acts.
const UNLIMITED: u64 = u64::MAX;

/// One attached command.
struct FuncProbe {
    ops: FtraceOps,
    array: &'static TraceArray,
    glob: String,
    command: Command,
    /// Actions left, or [`UNLIMITED`].
    left: AtomicU64,
}

/// Every attached command, of every array.
static PROBES: Mutex<Vec<&'static FuncProbe>> = Mutex::new(Vec::new());

/// The deepest call chain a `stacktrace` event keeps.
pub const STACK_DEPTH: usize = 16;

extern "C" fn run_command(ip: usize, _parent: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: `add` set the container to the leaked probe holding this ops;
    // it is freed only after it is unregistered and a grace period passed.
    let probe = unsafe { &*ops.container::<FuncProbe>() };
    let buffer = probe.array.buffer();
    let take = || {
        probe
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| match left {
                0 => None,
                UNLIMITED => Some(UNLIMITED),
                n => Some(n - 1),
            })
            .is_ok()
    };
    match probe.command {
        Command::TraceOff if buffer.is_on() && take() => buffer.set_on(false),
        Command::TraceOn if !buffer.is_on() && take() => buffer.set_on(true),
        Command::StackTrace if take() => record_stack(probe.array, ip, fregs),
        Command::Snapshot if take() => {
            buffer.swap_snapshot();
        }
        _ => {}
    }
}

/// Records the chain of return addresses that led to `ip`: the traced
/// function's caller first, then theirs, through the frame records.
pub(crate) fn record_stack(array: &TraceArray, ip: usize, fregs: &FtraceRegs) {
    let mut frames = [0u64; STACK_DEPTH];
    frames[0] = ip as u64;
    let mut count = 1;
    for (ret, _) in crate::unwind::callers(fregs).take(STACK_DEPTH - 1) {
        frames[count] = ret as u64;
        count += 1;
    }
    let common = crate::tracer::event_common(TRACE_STACK);
    let frames = &frames[..count];
    array.buffer().write_with(stack_event_size(frames), |_, out| encode_stack(common, frames, out));
}

/// Why a command was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// `FUNC:NAME` with a NAME that is no command.
    UnknownCommand(String),
    /// Removing a command that is not attached.
    NotAttached(String),
    Tracing(FtraceError),
    /// No memory for the snapshot buffer `snapshot` needs.
    NoMemory,
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::UnknownCommand(name) => {
                write!(f, "unknown command '{name}' (traceoff, traceon, stacktrace, snapshot)")
            }
            ProbeError::NotAttached(what) => write!(f, "'{what}' is not attached"),
            ProbeError::Tracing(error) => write!(f, "{error}"),
            ProbeError::NoMemory => write!(f, "not enough memory for the snapshot buffer"),
        }
    }
}

/// Attaches `command` to the functions `glob` matches in `array`, for
/// `count` actions (`None`: every call).
pub fn add(array: &'static TraceArray, glob: &str, command: Command, count: Option<u64>) -> Result<(), ProbeError> {
    if command == Command::Snapshot {
        // Allocated now (a callback cannot allocate); kept when the command
        // goes, as Linux keeps it, until `echo 0 > snapshot`.
        array.buffer().alloc_snapshot().map_err(|_| ProbeError::NoMemory)?;
    }
    let probe: &'static FuncProbe = Box::leak(Box::new(FuncProbe {
        ops: FtraceOps::new(run_command, OpsFlags::RECURSION),
        array,
        glob: glob.into(),
        command,
        left: AtomicU64::new(count.unwrap_or(UNLIMITED)),
    }));
    probe.ops.set_container(probe);
    let attached = registry::set_filter(&probe.ops, FilterKind::Filter, glob, FilterMode::Replace)
        .and_then(|()| registry::register(&probe.ops));
    if let Err(error) = attached {
        // SAFETY: leaked just above and never registered: nothing else has it.
        drop(unsafe { Box::from_raw(probe as *const FuncProbe as *mut FuncProbe) });
        return Err(ProbeError::Tracing(error));
    }
    PROBES.lock().push(probe);
    Ok(())
}

/// Detaches `command` from `glob` in `array` (`!FUNC:NAME`).
pub fn remove(array: &'static TraceArray, glob: &str, command: Command) -> Result<(), ProbeError> {
    let probe = {
        let mut probes = PROBES.lock();
        let index = probes
            .iter()
            .position(|p| core::ptr::eq(p.array, array) && p.glob == glob && p.command == command)
            .ok_or_else(|| ProbeError::NotAttached(format!("{glob}:{}", command.name())))?;
        probes.remove(index)
    };
    registry::unregister(&probe.ops).map_err(ProbeError::Tracing)?;
    deferred::synchronize();
    // SAFETY: leaked by `add`, unlisted and unregistered, and the grace
    // period is over: no callback still runs on it.
    drop(unsafe { Box::from_raw(probe as *const FuncProbe as *mut FuncProbe) });
    Ok(())
}

/// Detaches every command of `array` (an instance going away).
pub fn remove_all(array: &'static TraceArray) {
    let mine: Vec<(String, Command)> =
        PROBES.lock().iter().filter(|p| core::ptr::eq(p.array, array)).map(|p| (p.glob.clone(), p.command)).collect();
    for (glob, command) in mine {
        let _ = remove(array, &glob, command);
    }
}

/// The lines `cat set_ftrace_filter` adds for `array`'s commands, as Linux
/// prints them: `FUNCTION:COMMAND:unlimited` or `...:count=N`.
pub fn lines(array: &TraceArray) -> Vec<String> {
    let probes = PROBES.lock();
    let mut lines = Vec::new();
    for probe in probes.iter().filter(|p| core::ptr::eq(p.array, array)) {
        let count = match probe.left.load(Ordering::Relaxed) {
            UNLIMITED => String::from("unlimited"),
            n => format!("count={n}"),
        };
        for name in registry::filter_names(&probe.ops, FilterKind::Filter) {
            lines.push(format!("{name}:{}:{count}", probe.command.name()));
        }
    }
    lines
}
