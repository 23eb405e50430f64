//! The console shell: reads lines from the serial port and runs commands.
//!
//! Input handling (echo, editing, rejecting bad bytes) is the `shell` crate's
//! [`LineReader`]; splitting a line into words, pipes and a redirection is
//! its [`shell::parse`], and the filters a command's output is piped
//! through (`cat available_filter_functions | grep fib`) are its
//! [`shell::filter`]. This module owns the command table and where output
//! goes ([`output`]). Every error is one `error: ...` line, never filtered,
//! and the prompt comes back: input never panics the kernel.
//!
//! The shell has a working directory inside tracefs (`cd`, `pwd`), where it
//! starts: file arguments are relative to it, or absolute under
//! `/sys/kernel/tracing` (or `/sys/kernel/debug/tracing`), as on Linux.

mod commands;
pub(crate) mod output;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cell::{RefCell, RefMut};
use core::fmt;

use ::shell::{Filter, LineEvent, LineReader, Pipeline, Redirect};
use ftrace::FilterMode;

use self::output::Output;
use arch::sync::SpinLock;

use crate::print;

/// The longest accepted line, in bytes.
pub const MAX_LINE: usize = 512;

const PROMPT: &str = "> ";

/// A command line, split, as a command sees it.
pub struct Invocation<'a> {
    /// The words after the command name.
    pub args: &'a [String],
    /// `> FILE` or `>> FILE`, if given (a pipeline's is the shell's).
    pub redirect: Option<&'a Redirect>,
    out: &'a RefCell<Output>,
}

impl Invocation<'_> {
    /// Where the command prints: through the line's filters to the
    /// console. A command takes it for its writes and gives it back before
    /// it returns (a second borrow while one is held would panic).
    pub fn out(&self) -> RefMut<'_, Output> {
        self.out.borrow_mut()
    }
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

/// Runs one line, printing to the console. Used by the shell loop and by
/// tests.
pub fn execute(line: &str) -> Result<(), ShellError> {
    run_line(line, Output::to_console).map(drop)
}

/// Runs one line and answers what it printed (for tests).
#[cfg(test)]
pub fn execute_to_text(line: &str) -> Result<String, ShellError> {
    run_line(line, Output::to_text).map(Option::unwrap_or_default)
}

fn run_line(line: &str, output: fn(Pipeline) -> Output) -> Result<Option<String>, ShellError> {
    let failed = |error: &dyn fmt::Display| ShellError::Failed(error.to_string());
    let parsed = ::shell::parse(line).map_err(|e| failed(&e))?;
    let Some((name, args)) = parsed.words.split_first() else {
        return match parsed.redirect {
            Some(_) => Err(ShellError::Failed("missing command before redirection".into())),
            None => Ok(None),
        };
    };
    let mut filters = Vec::new();
    // A filter starting the line reads its FILE operands, as `cat` would
    // print them.
    let (command, args) = if Filter::is_filter(name) {
        let (mut filter, files) = Filter::parse(&parsed.words).map_err(|e| failed(&e))?;
        let [file] = files else {
            return Err(ShellError::Failed(match files {
                [] => format!("{name}: give it a FILE or a pipe (there is no standard input)"),
                _ => format!("{name}: reads one FILE (cat several into a pipe)"),
            }));
        };
        filter.reads_file(file);
        filters.push(filter);
        (commands::find("cat").expect("cat is a command"), files)
    } else {
        (commands::find(name).ok_or_else(|| ShellError::UnknownCommand(name.clone()))?, args)
    };
    for stage in &parsed.pipes {
        let (filter, files) = Filter::parse(stage).map_err(|e| failed(&e))?;
        if let Some(file) = files.first() {
            return Err(ShellError::Failed(format!("{}: reads the pipe, not '{file}'", stage[0])));
        }
        filters.push(filter);
    }
    if filters.is_empty() {
        let out = RefCell::new(output(Pipeline::new(filters)));
        let result = (command.run)(&Invocation { args, redirect: parsed.redirect.as_ref(), out: &out });
        let text = out.into_inner().finish();
        return result.and(text);
    }
    if !command.pipes {
        return Err(ShellError::Failed(format!("'{}' prints to the console as it goes: it cannot be piped", command.name)));
    }
    // A pipeline's output redirected into a file is written there whole,
    // as `echo` writes its text; the file is found before anything runs.
    let into_file = match &parsed.redirect {
        Some(Redirect::Truncate(file)) => Some((resolve(file)?, FilterMode::Replace)),
        Some(Redirect::Append(file)) => Some((resolve(file)?, FilterMode::Append)),
        None => None,
    };
    if let Some((file, _)) = into_file.as_ref().filter(|(file, _)| !crate::tracefs::exists(file)) {
        return Err(ShellError::Failed(format!("no such file: {file} (try 'ls')")));
    }
    let out = RefCell::new(match into_file {
        Some(_) => Output::to_text(Pipeline::new(filters)),
        None => output(Pipeline::new(filters)),
    });
    let result = (command.run)(&Invocation { args, redirect: None, out: &out });
    let text = out.into_inner().finish();
    result?;
    let text = text?;
    let Some((file, mode)) = into_file else { return Ok(text) };
    crate::tracefs::write(&file, text.as_deref().unwrap_or_default(), mode).map_err(|e| failed(&e))?;
    Ok(None)
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
