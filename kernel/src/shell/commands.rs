//! The command table.

use super::{Invocation, ShellError};
use crate::println;

/// One shell command.
pub struct Command {
    pub name: &'static str,
    pub usage: &'static str,
    pub summary: &'static str,
    pub run: fn(&Invocation) -> Result<(), ShellError>,
}

const COMMANDS: &[Command] = &[
    Command { name: "help", usage: "help", summary: "list the commands", run: help },
    Command {
        name: "echo",
        usage: "echo [TEXT...] [> FILE | >> FILE]",
        summary: "print TEXT, or write it to a file",
        run: echo,
    },
    Command { name: "uptime", usage: "uptime", summary: "timer ticks and seconds since boot", run: uptime },
    Command { name: "meminfo", usage: "meminfo", summary: "heap used and free", run: meminfo },
    Command { name: "poweroff", usage: "poweroff", summary: "power off (QEMU exits with status 0)", run: poweroff },
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
    println!("commands:");
    for command in COMMANDS {
        println!("  {:<40} {}", command.usage, command.summary);
    }
    Ok(())
}

fn echo(invocation: &Invocation) -> Result<(), ShellError> {
    let text = invocation.args.join(" ");
    match invocation.redirect {
        None => {
            println!("{text}");
            Ok(())
        }
        Some(::shell::Redirect::Truncate(file) | ::shell::Redirect::Append(file)) => {
            Err(ShellError::Failed(alloc::format!("no such file: {file}")))
        }
    }
}

fn uptime(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("uptime", invocation)?;
    let ticks = arch::time::ticks();
    let hz = arch::time::HZ;
    println!("up {ticks} ticks ({}.{:03} s at {hz} Hz)", ticks / hz, (ticks % hz) * 1000 / hz);
    Ok(())
}

fn meminfo(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("meminfo", invocation)?;
    let heap = crate::heap::stats();
    println!(
        "heap: {} KiB used, {} KiB free, {} KiB total",
        heap.used / 1024,
        heap.free / 1024,
        heap.total / 1024
    );
    Ok(())
}

fn poweroff(invocation: &Invocation) -> Result<(), ShellError> {
    no_arguments("poweroff", invocation)?;
    println!("power off");
    arch::exit(arch::ExitCode::Success)
}
