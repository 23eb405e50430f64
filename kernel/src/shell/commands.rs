//! The command table.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write;

use ftrace::FilterMode;

use super::{resolve, Invocation, ShellError};
use crate::{println, tracefs, workload};

/// One shell command.
pub struct Command {
    pub name: &'static str,
    pub usage: &'static str,
    pub summary: &'static str,
    pub run: fn(&Invocation) -> Result<(), ShellError>,
    /// Whether its output can be piped into filters (`| grep`): it writes
    /// to [`Invocation::out`]. Commands printing to the console as they go
    /// (a benchmark's progress) cannot.
    pub pipes: bool,
}

const COMMANDS: &[Command] = &[
    Command { name: "help", usage: "help", summary: "list the commands", run: help, pipes: true },
    Command {
        name: "echo",
        usage: "echo [TEXT...] [> FILE | >> FILE]",
        summary: "print TEXT, or write it to a file",
        run: echo,
        pipes: true,
    },
    Command { name: "ls", usage: "ls [DIR]", summary: "list the tracing files (of a directory)", run: ls, pipes: true },
    Command { name: "cd", usage: "cd [DIR]", summary: "change the working directory (in tracefs)", run: cd, pipes: true },
    Command { name: "pwd", usage: "pwd", summary: "print the working directory", run: pwd, pipes: true },
    Command { name: "mkdir", usage: "mkdir instances/NAME", summary: "make a tracing instance", run: mkdir, pipes: true },
    Command { name: "rmdir", usage: "rmdir instances/NAME", summary: "remove a tracing instance", run: rmdir, pipes: true },
    Command { name: "cat", usage: "cat FILE...", summary: "print tracing files", run: cat, pipes: true },
    Command {
        name: "run",
        usage: "run fib N | run fs | run par T WORKLOAD ARGS...",
        summary: "run a built-in workload (par: on T threads at once)",
        run,
        pipes: true,
    },
    Command { name: "ps", usage: "ps", summary: "every task: PID, CPU, STATE, NAME", run: ps, pipes: true },
    Command { name: "cpus", usage: "cpus", summary: "the CPUs online and what runs on each", run: cpus, pipes: true },
    Command {
        name: "bench",
        usage: BENCH_USAGE,
        summary: "benchmark every tracing mode (vs-linux: Linux's job; attach: one mode on fib)",
        run: bench,
        pipes: false,
    },
    Command {
        name: "stress",
        usage: "stress [--seconds S] [--toggles N]",
        summary: "switch tracing on and off while every CPU runs traced code",
        run: stress,
        pipes: false,
    },
    Command {
        name: "tour",
        usage: "tour [FUNCTION]",
        summary: "one traced call step by step: the site, the trampolines, the registers, the return hook",
        run: tour,
        pipes: true,
    },
    Command { name: "uptime", usage: "uptime", summary: "timer ticks and seconds since boot", run: uptime, pipes: true },
    Command { name: "meminfo", usage: "meminfo", summary: "heap used and free", run: meminfo, pipes: true },
    Command { name: "poweroff", usage: "poweroff", summary: "power off (QEMU exits with status 0)", run: poweroff, pipes: false },
];

/// The command called `name`.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|command| command.name == name)
}

fn no_arguments(command: &'static str, invocation: &Invocation) -> Result<(), ShellError> {
    if !invocation.args.is_empty() {
        return Err(ShellError::Usage(command));
    }
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect(command));
    }
    Ok(())
}

fn help(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("help", invocation)?;
    let mut out = invocation.out();
    let _ = writeln!(out, "commands:");
    for command in COMMANDS {
        let _ = writeln!(out, "  {:<40} {}", command.usage, command.summary);
    }
    let _ = writeln!(out, "a command's output can be piped (COMMAND | FILTER | ...), and a filter can read a file:");
    for filter in &::shell::filter::FILTERS {
        let _ = writeln!(out, "  {:<40} {}", filter.usage, filter.summary);
    }
    Ok(())
}

fn echo(invocation: &Invocation) -> Result<(), ShellError> {
    let text = invocation.args.join(" ");
    let (file, mode) = match invocation.redirect {
        None => {
            let _ = writeln!(invocation.out(), "{text}");
            return Ok(());
        }
        Some(::shell::Redirect::Truncate(file)) => (file, FilterMode::Replace),
        Some(::shell::Redirect::Append(file)) => (file, FilterMode::Append),
    };
    tracefs::write(&resolve(file)?, &text, mode).map_err(|e| ShellError::Failed(e.to_string()))
}

/// The one optional DIR of `ls` and `cd`, resolved; `alone` without one.
fn directory_argument(invocation: &Invocation, command: &'static str, alone: String) -> Result<String, ShellError> {
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect(command));
    }
    match invocation.args {
        [] => Ok(alone),
        [dir] => resolve(dir),
        _ => Err(ShellError::Usage(find(command).map_or(command, |command| command.usage))),
    }
}

fn ls(invocation: &Invocation) -> Result<(), ShellError> {
    let dir = directory_argument(invocation, "ls", super::working_directory())?;
    let mut out = invocation.out();
    let out = &mut *out;
    if !is_directory(&dir) && tracefs::exists(&dir) {
        // A file: its name as given, as ls prints one.
        let _ = writeln!(out, "{}", invocation.args.first().map_or(dir.as_str(), String::as_str));
        return Ok(());
    }
    match dir.as_str() {
        "" => print_entries_under(tracefs::names(), "", out)?,
        "instances" => trace::array::instances::names().iter().for_each(|name| {
            let _ = writeln!(out, "{name}/");
        }),
        dir if dir.starts_with("instances/") => {
            let path = dir.strip_prefix("instances/").unwrap_or("");
            let name = path.split_once('/').map_or(path, |(name, _)| name);
            let no_such = || ShellError::Failed(format!("no such directory: {dir}"));
            print_entries_under(tracefs::instances::instance_names(name).ok_or_else(no_such)?, dir, out)?;
        }
        dir => print_entries_under(tracefs::names(), dir, out)?,
    }
    Ok(())
}

/// Prints what of `names` is directly under `dir`, named as in `dir` (as
/// Linux's `ls DIR` names them): files, and directories with a `/`; none is
/// an error.
fn print_entries_under(names: impl Iterator<Item = String>, dir: &str, out: &mut dyn Write) -> Result<(), ShellError> {
    let prefix = match dir {
        "" => String::new(),
        dir => format!("{dir}/"),
    };
    let mut entries: Vec<String> = Vec::new();
    for name in names {
        let Some(rest) = name.strip_prefix(&prefix) else { continue };
        let entry = match rest.split_once('/') {
            Some((first, _)) => format!("{first}/"),
            None => String::from(rest),
        };
        if !entries.contains(&entry) {
            entries.push(entry);
        }
    }
    if entries.is_empty() {
        return Err(ShellError::Failed(format!("no such directory: {dir}")));
    }
    entries.iter().for_each(|entry| {
        let _ = writeln!(out, "{entry}");
    });
    Ok(())
}

/// `cd [DIR]`: into a tracefs directory; alone, back to tracefs's root.
fn cd(invocation: &Invocation) -> Result<(), ShellError> {
    let dir = directory_argument(invocation, "cd", String::new())?;
    if !is_directory(&dir) {
        return Err(ShellError::Failed(format!("cd: {}: no such directory", invocation.args.join(" "))));
    }
    super::set_working_directory(dir);
    Ok(())
}

fn pwd(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("pwd", invocation)?;
    let _ = writeln!(invocation.out(), "{}", ::shell::path::absolute(&super::working_directory()));
    Ok(())
}

/// Whether `dir` (a path inside tracefs) is a directory: the root,
/// `instances`, or what some file's name starts with.
fn is_directory(dir: &str) -> bool {
    if dir.is_empty() || dir == "instances" {
        return true;
    }
    let prefix = format!("{dir}/");
    if let Some(rest) = dir.strip_prefix("instances/") {
        let name = rest.split('/').next().unwrap_or("");
        return tracefs::instances::instance_names(name)
            .is_some_and(|mut names| rest == name || names.any(|file| file.starts_with(&prefix)));
    }
    tracefs::names().any(|file| file.starts_with(&prefix))
}

fn mkdir(invocation: &Invocation) -> Result<(), ShellError> {
    let [dir] = invocation.args else { return Err(ShellError::Usage("mkdir instances/NAME")) };
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("mkdir"));
    }
    tracefs::instances::mkdir(&resolve(dir)?).map_err(|e| ShellError::Failed(e.to_string()))
}

fn rmdir(invocation: &Invocation) -> Result<(), ShellError> {
    let [dir] = invocation.args else { return Err(ShellError::Usage("rmdir instances/NAME")) };
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("rmdir"));
    }
    tracefs::instances::rmdir(&resolve(dir)?).map_err(|e| ShellError::Failed(e.to_string()))
}

/// `cat FILE...`: each file in turn; a file that cannot be read is reported
/// after the others are printed, as cat does.
fn cat(invocation: &Invocation) -> Result<(), ShellError> {
    if invocation.args.is_empty() {
        return Err(ShellError::Usage("cat FILE..."));
    }
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("cat"));
    }
    let mut first_error = None;
    for file in invocation.args {
        let read = resolve(file)
            .and_then(|file| tracefs::read(&file, &mut *invocation.out()).map_err(|e| ShellError::Failed(e.to_string())));
        // A filter that has all it needs closed the pipe: stop, as cat
        // does on Linux (the failed write is no error; an earlier file's
        // still is).
        if invocation.out().is_closed() {
            break;
        }
        if let Err(error) = read {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn run(invocation: &Invocation) -> Result<(), ShellError> {
    const USAGE: &str = "run fib N | run fs | run par T WORKLOAD ARGS...";
    let Some((name, args)) = invocation.args.split_first() else {
        return Err(ShellError::Usage(USAGE));
    };
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("run"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = match (name.as_str(), args.as_slice()) {
        ("par", [threads, workload, rest @ ..]) => {
            let threads = threads.parse().map_err(|_| ShellError::Usage("run par T WORKLOAD ARGS... (T from 1 to 16)"))?;
            workload::run_parallel(threads, workload, rest)
        }
        ("par", _) => return Err(ShellError::Usage("run par T WORKLOAD ARGS... (T from 1 to 16)")),
        _ => workload::run(name, &args),
    };
    let output = output.map_err(|e| ShellError::Failed(e.to_string()))?;
    let _ = writeln!(invocation.out(), "{output}");
    Ok(())
}

fn ps(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("ps", invocation)?;
    let mut out = invocation.out();
    let _ = writeln!(out, "{:>5} {:>3} {:<9} NAME", "PID", "CPU", "STATE");
    for task in crate::sched::tasks() {
        let _ = writeln!(out, "{:>5} {:>3} {:<9} {}", task.pid, task.cpu, task.state.name(), task.name);
    }
    Ok(())
}

fn cpus(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("cpus", invocation)?;
    let mut out = invocation.out();
    let _ = writeln!(out, "CPU  TASK");
    for (cpu, task) in crate::sched::cpus() {
        let _ = writeln!(out, "{cpu:>3}  {} (pid {})", task.name, task.pid);
    }
    Ok(())
}

fn uptime(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("uptime", invocation)?;
    let ticks = arch::time::ticks();
    let hz = arch::time::HZ;
    let _ = writeln!(invocation.out(), "up {ticks} ticks ({}.{:03} s at {hz} Hz)", ticks / hz, (ticks % hz) * 1000 / hz);
    Ok(())
}

fn meminfo(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("meminfo", invocation)?;
    let heap = crate::heap::stats();
    let _ = writeln!(
        invocation.out(),
        "heap: {} KiB used, {} KiB free, {} KiB total",
        heap.used / 1024,
        heap.free / 1024,
        heap.total / 1024
    );
    Ok(())
}

fn poweroff(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("poweroff", invocation)?;
    crate::record::send_if_recording();
    println!("power off");
    arch::exit(arch::ExitCode::Success)
}

/// `bench`'s usage, in `help` and in its refusal.
const BENCH_USAGE: &str = "bench [vs-linux [MODE...]|attach MODE|detach]";

fn bench(invocation: &Invocation) -> Result<(), ShellError> {
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("bench"));
    }
    let args: Vec<&str> = invocation.args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => crate::bench::run().map_err(ShellError::Failed)?,
        ["vs-linux", modes @ ..] => {
            if let Some(bad) = modes.iter().find(|mode| !crate::bench::vs_linux::MODES.contains(mode)) {
                return Err(ShellError::Failed(format!("bench: no mode '{bad}' ({})", crate::bench::vs_linux::MODES.join(", "))));
            }
            crate::bench::vs_linux::run(modes).map_err(ShellError::Failed)?;
        }
        ["attach", mode] => {
            let Some(client) = crate::bench::Client::named(mode) else {
                let modes: Vec<&str> = crate::bench::Client::ALL.iter().map(|client| client.name()).collect();
                return Err(ShellError::Failed(format!("bench: no mode '{mode}' to attach ({})", modes.join(", "))));
            };
            crate::bench::attach(client).map_err(ShellError::Failed)?;
            println!("bench: {mode} attached to kernel::workload::fib");
        }
        ["detach"] => {
            let client = crate::bench::detach().map_err(ShellError::Failed)?;
            println!("bench: {} detached", client.name());
        }
        _ => return Err(ShellError::Usage(BENCH_USAGE)),
    }
    Ok(())
}

fn tour(invocation: &Invocation) -> Result<(), ShellError> {
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("tour"));
    }
    let function = match invocation.args {
        [] => None,
        [function] => Some(function.as_str()),
        _ => return Err(ShellError::Usage("tour [FUNCTION]")),
    };
    let mut out = String::new();
    let result = crate::tour::run(function, &mut out);
    let _ = invocation.out().write_str(&out);
    result.map_err(|error| ShellError::Failed(error.to_string()))
}

fn stress(invocation: &Invocation) -> Result<(), ShellError> {
    if invocation.redirect.is_some() {
        return Err(ShellError::NoRedirect("stress"));
    }
    let args: Vec<&str> = invocation.args.iter().map(String::as_str).collect();
    let limits = crate::stress::Limits::parse(&args).map_err(ShellError::Usage)?;
    let report = crate::stress::run(limits).map_err(ShellError::Failed)?;
    println!("{report}");
    Ok(())
}
