//! The console shell: reads lines from the serial port and runs commands.
//!
//! Input handling (echo, editing, rejecting bad bytes) is the `shell` crate's
//! [`LineReader`]; splitting a line into words and a redirection is its
//! [`shell::parse`]. This module owns the command table. Every error is one
//! `error: ...` line and the prompt comes back: input never panics the kernel.
//!
//! The shell has a working directory inside tracefs (`cd`, `pwd`), where it
//! starts: file arguments are relative to it, or absolute under
//! `/sys/kernel/tracing` (or `/sys/kernel/debug/tracing`), as on Linux.

mod commands;

use alloc::string::String;
use core::fmt;

use ::shell::{LineEvent, LineReader, Redirect};
use arch::sync::SpinLock;

use crate::print;

/// The longest accepted line, in bytes.
pub const MAX_LINE: usize = 512;

const PROMPT: &str = "> ";

/// A command line, split, as a command sees it.
pub struct Invocation<'a> {
    /// The words after the command name.
    pub args: &'a [String],
    /// `> FILE` or `>> FILE`, if given.
    pub redirect: Option<&'a Redirect>,
}

/// Why a command failed; printed as `error: ...`.
#[derive(Debug)]
pub enum ShellError {
    /// The command does not exist.
    UnknownCommand(String),
    /// Wrong arguments: the usage string.
    Usage(&'static str),
    /// The command does not take a redirection.
    NoRedirect(&'static str),
    /// Anything else, already phrased for the user.
    Failed(String),
}

impl fmt::Display for ShellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShellError::UnknownCommand(name) => write!(f, "unknown command '{name}' (try 'help')"),
            ShellError::Usage(usage) => write!(f, "usage: {usage}"),
            ShellError::NoRedirect(name) => write!(f, "'{name}' does not take a redirection"),
            ShellError::Failed(message) => f.write_str(message),
        }
    }
}

/// The working directory: a path inside tracefs, empty for its root.
static CWD: SpinLock<String> = SpinLock::new(String::new());

/// The tracefs file or directory `path` names, from the working directory.
pub fn resolve(path: &str) -> Result<String, ShellError> {
    ::shell::path::resolve(&CWD.lock(), path).map_err(|error| ShellError::Failed(alloc::format!("{error}")))
}

/// The working directory (a path inside tracefs).
pub fn working_directory() -> String {
    CWD.lock().clone()
}

/// Changes the working directory (the caller checked it is a directory).
fn set_working_directory(dir: String) {
    *CWD.lock() = dir;
}

/// Runs one line. Used by the shell loop and by tests.
pub fn execute(line: &str) -> Result<(), ShellError> {
    let parsed = ::shell::parse(line).map_err(|e| ShellError::Failed(alloc::format!("{e}")))?;
    let Some((name, args)) = parsed.words.split_first() else {
        return match parsed.redirect {
            Some(_) => Err(ShellError::Failed("missing command before redirection".into())),
            None => Ok(()),
        };
    };
    let command = commands::find(name).ok_or_else(|| ShellError::UnknownCommand(name.clone()))?;
    (command.run)(&Invocation { args, redirect: parsed.redirect.as_ref() })
}

/// The shell loop: never returns (`poweroff` leaves through `arch::exit`).
pub fn run() -> ! {
    let mut reader = LineReader::<MAX_LINE>::new();
    print!("{PROMPT}");
    loop {
        let Some(byte) = arch::input::read_byte() else {
            arch::cpu::wait_for_interrupt();
            continue;
        };
        match reader.push(byte) {
            LineEvent::Nothing => {}
            LineEvent::Echo(byte) => arch::print::lock().write_bytes(&[byte]),
            LineEvent::Erase => print!("\x08 \x08"),
            LineEvent::Line(line) => {
                print!("\n");
                if let Err(error) = execute(line) {
                    print!("error: {error}\n");
                }
                // Housekeeping between commands: free what tracing changes
                // retired (normal context, outside every callback).
                ftrace::deferred::reclaim();
                print!("{PROMPT}");
            }
            LineEvent::Rejected(error) => print!("\nerror: {error}\n{PROMPT}"),
            LineEvent::Cancelled => print!("^C\n{PROMPT}"),
        }
    }
}
