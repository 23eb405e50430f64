//! `error_log`: the last few refused definitions, as Linux's tracefs keeps
//! them, so that a script (or a user who missed the console's message) can
//! read why `echo ... > kprobe_events` failed:
//!
//! ```text
//! [    1.234567] trace_kprobe: error: $arg* can be used only on function entry or exit
//!   Command: p:mid kernel::workload::fib+8 n=$arg1
//!            ^
//! ```
//!
//! Linux logs probe definitions (`kprobe_events`, `dynamic_events`),
//! event filters and `hist` triggers (under `hist:GRP:EVENT`); so does this.
//! An event filter's entry (a trigger's filter's too) is Linux's: its
//! words, the filter alone, the caret where Linux's parser puts it
//! ([`log_filter`]). Elsewhere the caret marks where Linux's parser
//! stopped; ours marks the word the message quotes (`unknown symbol
//! 'nosuch'`: under `nosuch`); for a probe
//! whose place is refused (`0x0 is not inside a kernel function`, a return
//! probe away from an entry), the place, as Linux marks it; for a refused
//! `$` variable (`$arg9: ...`), the argument using it; otherwise the
//! command's start. A failed removal (`-:NAME`) is not logged, as in Linux.
//! `echo > error_log` empties it.
//!
//! Each trace array keeps its own log (`trace::array::error_log`), the last 8
//! entries, as in Linux: an instance's `error_log` has the refused filters
//! and `hist` triggers of its own events; the top level's has its events'
//! and every probe definition's (the probe files are the top level's).

use alloc::format;
use alloc::string::String;
use core::fmt::{self, Write};

use trace::array::error_log::ErrorEntry;
use trace::array::trace_array::TraceArray;

/// How a refused `hist` trigger is reported (`trace::events::hist`).
const HIST: &str = "hist: ";

/// Which parser Linux would name for a write of `text` to the tracefs file
/// `name` refused with `message`, if Linux logs such errors at all (of a
/// trigger, a `hist` trigger's; filters have [`log_filter`]).
pub fn location(name: &str, text: &str, message: &str) -> Option<String> {
    let probe = || match text.trim_start().chars().next() {
        Some('f') => "trace_fprobe",
        _ => "trace_kprobe",
    };
    let is_probe_file = matches!(name, "kprobe_events" | "dynamic_events");
    if is_probe_file && (text.trim_start().starts_with('-') || text.trim().is_empty()) {
        // A removal, or `echo > kprobe_events` emptying the file: Linux
        // answers ENOENT or EBUSY and logs nothing.
        return None;
    }
    // An instance's event files are named as the top level's are.
    let in_array = name.strip_prefix("instances/").and_then(|rest| rest.split_once('/')).map_or(name, |(_, file)| file);
    let event = in_array.strip_prefix("events/");
    let location = match name {
        "kprobe_events" => "trace_kprobe",
        "dynamic_events" => probe(),
        _ if name.ends_with("/trigger") && message.starts_with(HIST) => {
            let (group, event) = event?.strip_suffix("/trigger")?.split_once('/')?;
            return Some(format!("hist:{group}:{event}"));
        }
        _ => return None,
    };
    Some(String::from(location))
}

/// Logs a refused command in `array`'s log.
pub fn log(array: &TraceArray, location: String, message: &str, command: &str) {
    let command = command.trim();
    let probe = location.starts_with("trace_");
    // The location already says it: `hist:GRP:EVENT: error: hist: ...`
    // would say it twice.
    let message = message.strip_prefix(HIST).unwrap_or(message);
    let column = fault_column(message, command)
        .or_else(|| probe.then(|| place_column(message, command).or_else(|| variable_column(message, command))).flatten())
        .unwrap_or(0);
    array.error_log().push(ErrorEntry {
        time_ns: ring_buffer::clock::now_ns(),
        location,
        message: message.into(),
        command: command.into(),
        column,
    });
}

/// Logs a refused event filter (`command`, as written) in `array`'s log as
/// Linux does: `event filter parse error`, Linux's words for why, and the
/// caret at the byte Linux's parser reports (past the end: at the end).
pub fn log_filter(array: &TraceArray, command: &str, error: &trace::events::filter::FilterError) {
    let column = command.char_indices().take_while(|&(at, _)| at < error.at).count();
    array.error_log().push(ErrorEntry {
        time_ns: ring_buffer::clock::now_ns(),
        location: String::from("event filter parse error"),
        message: error.kind.text().into(),
        command: command.into(),
        column,
    });
}

/// Where the first word the message quotes (`'...'`) starts in `command`,
/// as a word of its own (not inside a longer one) and the last such place
/// (a probe's symbol and arguments come after its name).
fn fault_column(message: &str, command: &str) -> Option<usize> {
    let quoted = message.split('\'').nth(1).filter(|quoted| !quoted.is_empty())?;
    word_places(command, quoted).map(|at| command[..at].chars().count()).last() // columns, not bytes
}

/// Where `word` occurs in `text` as a word of its own (not inside a longer
/// one), in bytes.
fn word_places<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
    text.match_indices(word)
        .filter(move |(at, _)| boundary(text[..*at].chars().last()) && boundary(text[at + word.len()..].chars().next()))
        .map(|(at, _)| at)
}

/// Where a probe definition's place (its second word: `SYM[+OFFS]`,
/// `ADDR`, `SYM%return`) starts, if the message names it: the address as
/// written, the symbol (messages print the offset their own way), or, for
/// an address, the function holding it (`fn+0x2c is not an instruction
/// boundary`).
fn place_column(message: &str, command: &str) -> Option<usize> {
    let mut words = command.split_whitespace();
    words.next()?;
    let place = words.next()?;
    let symbol = place.split(['+', '%']).next().filter(|symbol| !symbol.is_empty())?;
    let holder = place
        .strip_prefix("0x")
        .and_then(|hex| usize::from_str_radix(hex, 16).ok())
        .and_then(|address| ftrace::symbols::kernel::table().ok()?.lookup(address))
        .map(|function| function.name);
    let named = |word: &str| word_places(message, word).next().is_some();
    if !named(place) && !named(symbol) && !holder.is_some_and(named) {
        return None;
    }
    let at = command.find(char::is_whitespace)? + command[command.find(char::is_whitespace)?..].find(place)?;
    Some(command[..at].chars().count())
}

/// Where the fetch argument a message opens with (`$arg9: only ...`, or
/// `$arg* can be used ...` for any `$argN`) is in a probe definition `command`:
/// the `$` in the first argument (a word after the place) that uses it.
fn variable_column(message: &str, command: &str) -> Option<usize> {
    let variable = message.split([':', ' ']).next().filter(|word| word.starts_with('$'))?;
    let (variable, any_number) = match variable.strip_suffix('*') {
        Some(prefix) => (prefix, true),
        None => (variable, false),
    };
    let mut at = 0;
    for (index, word) in command.split_whitespace().enumerate() {
        let start = at + command[at..].find(word)?;
        at = start + word.len();
        if index < 2 {
            continue; // the probe's name and place
        }
        let uses = |(offset, _): &(usize, &str)| {
            let rest = &word[offset + variable.len()..];
            let next = rest.chars().next();
            next.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) || any_number && next.is_some_and(|c| c.is_ascii_digit())
        };
        if let Some((offset, _)) = word.match_indices(variable).find(uses) {
            return Some(command[..start + offset].chars().count());
        }
    }
    None
}

/// `cat error_log` of `array`.
pub fn write(array: &TraceArray, out: &mut dyn Write) -> fmt::Result {
    for entry in array.error_log().entries() {
        let seconds = format!("{:5}.{:06}", entry.time_ns / 1_000_000_000, entry.time_ns % 1_000_000_000 / 1_000);
        writeln!(out, "[{seconds}] {}: error: {}", entry.location, entry.message)?;
        writeln!(out, "  Command: {}", entry.command)?;
        writeln!(out, "{:width$}^", "", width = 11 + entry.column)?;
    }
    Ok(())
}
