//! The function tracer's files: `available_tracers` and `current_tracer`;
//! the function filters `set_ftrace_filter` (with the function commands,
//! `FUNC:traceoff` ...) and `set_ftrace_notrace`; the pid filters
//! `set_ftrace_pid` and `set_ftrace_notrace_pid`; and the files about the
//! patch sites: `available_filter_functions(_addrs)`, `enabled_functions`,
//! `touched_functions`, `dyn_ftrace_total_info`, `recursed_functions`,
//! `ftrace_enabled`.

use super::empty_list_line;
use super::parse_switch;
use super::Array;
use super::TracefsError;
use alloc::format;
use alloc::string::ToString;
use core::fmt::{self, Write};

use ftrace::{FilterKind, FilterMode, Trampoline};
use trace::tracers::Tracer;

pub(super) fn read_available_tracers(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let names: alloc::vec::Vec<&str> = Tracer::ALL.iter().map(|t| t.name()).collect();
    writeln!(out, "{}", names.join(" "))
}

pub(super) fn read_current_tracer(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", array.current_tracer().name())
}

pub(super) fn write_current_tracer(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let name = text.trim();
    let tracer = Tracer::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no such tracer '{name}' (see available_tracers)")))?;
    array.set_current_tracer(tracer)?;
    Ok(())
}

pub(super) fn read_available_filter_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && !site.failed {
            result = writeln!(out, "{}", site.name);
        }
    });
    result
}

pub(super) fn read_available_filter_functions_addrs(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && !site.failed {
            result = writeln!(out, "{:016x} {}", site.ip, site.name);
        }
    });
    result
}

pub(super) fn read_filter(array: Array, out: &mut dyn Write, kind: FilterKind) -> fmt::Result {
    let names = array.tracer_filter_names(kind);
    if names.is_empty() {
        writeln!(out, "{}", empty_list_line(kind == FilterKind::Filter))?;
    }
    for name in names {
        writeln!(out, "{name}")?;
    }
    if kind == FilterKind::Filter {
        for line in trace::tracers::function_commands::lines(array) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

pub(super) fn read_ftrace_filter(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_filter(array, out, FilterKind::Filter)
}

pub(super) fn read_ftrace_notrace(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_filter(array, out, FilterKind::Notrace)
}

/// `set_ftrace_filter` takes globs (the tracers' filter) and function
/// commands (`FUNC:traceoff[:N]`, `!FUNC:traceoff` to remove, see
/// `trace::tracers::function_commands`). As in Linux, `>` empties the filter first (an
/// open that truncates), commands or not; `>>` with commands alone leaves
/// it as it is.
pub(super) fn write_ftrace_filter(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let mut globs = alloc::vec::Vec::new();
    let mut commands = alloc::vec::Vec::new();
    for word in ftrace::symbols::glob::filter_words(text) {
        match parse_command(word) {
            Some(command) => commands.push(command?),
            None => globs.push(word),
        }
    }
    // Every command is checked, in order, before anything changes (a
    // refused write changes nothing).
    let changes: alloc::vec::Vec<trace::tracers::function_commands::Change> =
        commands.iter().map(|(remove, glob, command, count)| (*remove, *glob, command, count.is_some())).collect();
    trace::tracers::function_commands::check(array, &changes).map_err(|error| TracefsError::Invalid(error.to_string()))?;
    // So are the globs: a glob that matches nothing must not leave an
    // event the commands name switched on for a moment.
    let filter_changes = !globs.is_empty() || commands.is_empty() || mode == FilterMode::Replace;
    if filter_changes {
        array.check_tracer_filter(&globs.join("\n"), mode)?;
    }
    // A `snapshot` command's buffer, allocated before anything changes
    // (the command would allocate it too late to refuse the whole write),
    // and freed again if the write is refused after all.
    array.giving_back_snapshot_on_error(|| {
        if commands
            .iter()
            .any(|(remove, _, command, _)| !remove && *command == trace::tracers::function_commands::Command::Snapshot)
        {
            let no_memory = |_| TracefsError::Invalid("not enough memory for the snapshot buffer".into());
            array.buffer().alloc_snapshot().map_err(no_memory)?;
        }
        apply_ftrace_filter(array, globs, commands, filter_changes, mode)
    })
}

/// The changes of a `set_ftrace_filter` write, every command checked.
pub(super) fn apply_ftrace_filter(
    array: Array,
    globs: alloc::vec::Vec<&str>,
    commands: alloc::vec::Vec<ParsedCommand>,
    filter_changes: bool,
    mode: FilterMode,
) -> Result<(), TracefsError> {
    // The events the adds switch, resolved (and put in soft mode) before
    // anything changes: an unknown one refuses the write, and dropping the
    // hooks taken so far gives their soft mode back.
    let mut hooks = alloc::vec::Vec::new();
    for (remove, _, command, _) in &commands {
        hooks.push(match (remove, command.target()) {
            (false, Some(target)) => Some(super::events::event_hook(array, target)?),
            _ => None,
        });
    }
    if filter_changes {
        // One a line: the words are split again, as written.
        array.set_tracer_filter(FilterKind::Filter, &globs.join("\n"), mode)?;
    }
    for ((remove, glob, command, count), hook) in commands.into_iter().zip(hooks) {
        let done = match remove {
            true => trace::tracers::function_commands::remove(array, glob, &command, count.is_some()),
            false => trace::tracers::function_commands::add(array, glob, command, count.flatten(), hook),
        };
        done.map_err(|error| TracefsError::Invalid(error.to_string()))?;
    }
    Ok(())
}

/// A function command as [`parse_command`] reads it: (remove, FUNC,
/// COMMAND, COUNT).
pub(super) type ParsedCommand<'a> = (bool, &'a str, trace::tracers::function_commands::Command, Option<Option<u64>>);

/// A function command: (remove, FUNC, COMMAND, COUNT) from
/// `[!]FUNC:COMMAND[:COUNT]` or `[!]FUNC:enable_event:GRP:EVENT[:COUNT]`
/// (and `disable_event`), or `None` for a plain glob. The `:` before
/// COMMAND is a single one: FUNC's own `::` separate path segments.
/// COUNT is `Some` when one was written (the command with a count, apart
/// from the one without, as in Linux), and holds the number it reads as;
/// a removal does not read it (`!FUNC:traceoff:count=3`, as `cat` lists
/// it, takes the counted one off), as Linux does not.
pub(super) fn parse_command(word: &str) -> Option<Result<ParsedCommand<'_>, TracefsError>> {
    use trace::tracers::function_commands::{Command, ProbeError};
    let (remove, word) = match word.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, word),
    };
    let split = ftrace::symbols::glob::split_last_colon;
    let refuse = |error: ProbeError| Some(Err(TracefsError::Invalid(error.to_string())));
    let names_event = |name: &str| Command::switching(name, "", "").is_some();
    // Whether `head` is a command with its function, so that what follows
    // it is a count: `FUNC:traceoff`, `FUNC:enable_event:GRP:EVENT`.
    let ends_with_command = |head: &str| {
        split(head).is_some_and(|(_, name)| Command::from_name(name).is_some())
            || split(head)
                .and_then(|(rest, _event)| split(rest))
                .and_then(|(rest, _group)| split(rest))
                .is_some_and(|(_, name)| names_event(name))
    };
    // `FUNC:COMMAND:`: an empty count is no count, as in Linux.
    let word = word.strip_suffix(':').filter(|before| ends_with_command(before)).unwrap_or(word);
    let (head, last) = split(word)?;
    // A count is read as Linux reads it (`kstrtoul`, base 0); what follows
    // a command and is no count (the largest number means unlimited) is
    // refused.
    let (head, name, count) = match ftrace::number::c_count(last) {
        Some(count) => {
            let (head, name) = split(head)?;
            (head, name, Some(Some(count)))
        }
        None if ends_with_command(head) && remove => {
            let (head, name) = split(head)?;
            (head, name, Some(None))
        }
        None if ends_with_command(head) => return refuse(ProbeError::BadCount(last.into())),
        None => (head, last, None),
    };
    if let Some(command) = Command::from_name(name) {
        return Some(Ok((remove, head, command, count)));
    }
    if names_event(name) || split(head).is_some_and(|(_, before)| names_event(before)) {
        // `FUNC:enable_event` or `FUNC:enable_event:GRP`: no event named.
        return refuse(ProbeError::NoEvent);
    }
    // `FUNC:enable_event:GRP:EVENT`: `name` was the event.
    let switching = split(head).and_then(|(rest, group)| {
        let (glob, command) = split(rest)?;
        Some((glob, Command::switching(command, group, name)?))
    });
    // Linux's `FUNC:mod:MODULE` (`:mod:MODULE` for all of a module's
    // functions) selects by module; there are none here.
    let names_module = name == "mod" || head == ":mod" || split(head).is_some_and(|(_, before)| before == "mod");
    match switching {
        Some((glob, command)) => Some(Ok((remove, glob, command, count))),
        None if names_module => refuse(ProbeError::NoModules),
        // `FUNC:traceoff:3:4`: two counts. (Linux reads the first and drops
        // the rest unseen; a mistyped count is better told.)
        None if count.is_some() && ftrace::number::c_count(name).is_some() && ends_with_command(head) => {
            refuse(ProbeError::BadCount(format!("{name}:{last}")))
        }
        None => refuse(ProbeError::UnknownCommand(name.into())),
    }
}

pub(super) fn write_ftrace_notrace(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(array.set_tracer_filter(FilterKind::Notrace, text, mode)?)
}

/// `cat set_ftrace_pid`: the pids, or Linux's `no pid` when no list is
/// set (a list emptied by exits still filters, and reads as nothing).
pub(super) fn read_pids(array: Array, notrace: bool, out: &mut dyn Write) -> fmt::Result {
    let pids = array.pids(notrace);
    if pids.is_empty() && !array.pid_list_set(notrace) {
        return writeln!(out, "no pid");
    }
    pids.iter().try_for_each(|pid| writeln!(out, "{pid}"))
}

pub(super) fn read_ftrace_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_pids(array, false, out)
}

pub(super) fn read_ftrace_notrace_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_pids(array, true, out)
}

pub(super) fn write_ftrace_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    array.set_pids(false, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

pub(super) fn write_ftrace_notrace_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    array.set_pids(true, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

pub(super) fn read_enabled_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    write_sites(out, |site| site.ops_count > 0)
}

/// `cat touched_functions`: every function an ops traced since boot, in
/// `enabled_functions`' format (a count of 0 once none does), as Linux's.
pub(super) fn read_touched_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    write_sites(out, |site| site.touched)
}

/// The site table's size and how long building it took at boot, in
/// Linux 6.13's lines (no modules here: their update time is 0).
pub(super) fn read_dyn_ftrace_total_info(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let Some(info) = ftrace::total_info() else { return Ok(()) };
    writeln!(out, "{} pages:{} groups: {}", info.sites, info.pages, info.groups)?;
    writeln!(out, "ftrace boot update time = {} (ns)", info.boot_update_ns)?;
    writeln!(out, "ftrace module total update time = 0 (ns)")
}

/// The sites `shown` picks: `NAME (OPS)`, then ` R` on the full-registers
/// trampoline and ` I` under an IPMODIFY ops.
pub(super) fn write_sites(out: &mut dyn Write, shown: impl Fn(&ftrace::SiteInfo) -> bool) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && shown(site) {
            let regs = if site.trampoline == Some(Trampoline::Regs) { " R" } else { "" };
            let ipmodify = if site.ipmodify { " I" } else { "" };
            result = writeln!(out, "{} ({}){regs}{ipmodify}", site.name, site.ops_count);
        }
    });
    result
}

pub(super) fn read_ftrace_enabled(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(ftrace::is_enabled()))
}

pub(super) fn write_ftrace_enabled(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    Ok(ftrace::set_enabled(parse_switch(text)?)?)
}

/// `FUNCTION:\tCALLER` for every function a callback recursed into.
pub(super) fn read_recursed_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    for (ip, parent) in ftrace::recursion::recursed_functions() {
        let name = |address| ftrace::symbols::kernel::name_of(address).unwrap_or("?");
        writeln!(out, "{}:\t{}", name(ip), name(parent))?;
    }
    Ok(())
}

pub(super) fn write_recursed_functions(_array: Array, _text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    ftrace::recursion::clear_recursed_functions();
    Ok(())
}
