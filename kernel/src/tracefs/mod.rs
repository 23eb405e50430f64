//! The tracing files, in Linux's tracefs names and output shapes.
//!
//! The shell reads them with `cat FILE` and writes them with `echo TEXT > FILE`
//! (or `>>` to append, where Linux supports it). A write that cannot be
//! applied is an error and changes nothing.
//!
//! `mkdir instances/NAME` makes an instance (`trace::array::trace_array`): a
//! directory `instances/NAME/` with its own copy of the per-array files
//! (its own buffer, tracer, filters, `tracing_on`, and `events/` and
//! `set_event` for the events it records); `rmdir` removes it.
//!
//! This module is the table of every file ([`FILES`]: its name, whether
//! instances have it, its reader and writer), path resolution and the
//! read/write entry points, with `README` and `error_log`. The files live
//! in the module of the directory or the part of Linux's
//! `Documentation/trace` they belong to (see `docs/tracefs.md`): [`buffer`],
//! `functions`, `function_graph`, `options`, `events` (`events/`,
//! `set_event`, the event pid filters), `dynamic_events`, `per_cpu`,
//! `trace_stat`, `stack_trace`, `saved_cmdlines` and [`instances`].

pub(crate) mod buffer;
mod dynamic_events;
mod events;
mod function_graph;
mod functions;
pub(crate) mod instances;
mod options;
mod per_cpu;
mod saved_cmdlines;
mod stack_trace;
mod trace_stat;

use alloc::format;
use alloc::string::{String, ToString};
use core::fmt::{self, Write};
use events::event_file;
use events::event_names;
use events::EventFile;
use options::option_file;
use options::set_option;
use per_cpu::per_cpu_file;
use per_cpu::per_cpu_names;
use per_cpu::read_per_cpu;
use trace_stat::trace_stat_file;

use ftrace::FilterMode;
use trace::array::instances::InstanceError;
use trace::array::options::TraceOption;
use trace::array::trace_array::TraceArray;

/// Why a tracefs access failed; printed as `error: ...`.
#[derive(Debug, PartialEq, Eq)]
pub enum TracefsError {
    NoSuchFile(String),
    NotReadable(&'static str),
    NotWritable(&'static str),
    /// The text written is not valid for this file.
    Invalid(String),
    /// An event filter (or a trigger's, `trigger`) that was refused:
    /// `command` is the filter as written, `error` why and where, which
    /// `error_log` keeps in Linux's words with a caret there.
    Filter {
        command: String,
        error: trace::events::filter::FilterError,
        trigger: bool,
    },
}

impl fmt::Display for TracefsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TracefsError::NoSuchFile(name) => write!(f, "no such file: {name} (try 'ls')"),
            TracefsError::NotReadable(name) => write!(f, "{name} is write-only"),
            TracefsError::NotWritable(name) => write!(f, "{name} is read-only"),
            TracefsError::Invalid(message) => f.write_str(message),
            TracefsError::Filter { error, trigger: false, .. } => write!(f, "{error}"),
            TracefsError::Filter { error, trigger: true, .. } => write!(f, "trigger filter: {error}"),
        }
    }
}

impl From<InstanceError> for TracefsError {
    fn from(error: InstanceError) -> Self {
        TracefsError::Invalid(error.to_string())
    }
}

impl From<ftrace::FtraceError> for TracefsError {
    fn from(error: ftrace::FtraceError) -> Self {
        TracefsError::Invalid(error.to_string())
    }
}

/// The trace array a file belongs to: the top level's, or an instance's.
type Array = &'static TraceArray;
type Reader = fn(Array, &mut dyn Write) -> fmt::Result;
type Writer = fn(Array, &str, FilterMode) -> Result<(), TracefsError>;

/// Where a file exists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// At the top level only (it is about the whole system).
    Top,
    /// At the top level and in every instance (it is about one array).
    Array,
}

/// One file: its name, where it exists, and what reading and writing it do.
struct File {
    name: &'static str,
    scope: Scope,
    read: Option<Reader>,
    write: Option<Writer>,
}

const fn top(name: &'static str, read: Option<Reader>, write: Option<Writer>) -> File {
    File { name, scope: Scope::Top, read, write }
}

const fn per_array(name: &'static str, read: Option<Reader>, write: Option<Writer>) -> File {
    File { name, scope: Scope::Array, read, write }
}

const FILES: &[File] = &[
    top("README", Some(read_readme), None),
    per_array("available_tracers", Some(functions::read_available_tracers), None),
    per_array("current_tracer", Some(functions::read_current_tracer), Some(functions::write_current_tracer)),
    top("available_filter_functions", Some(functions::read_available_filter_functions), None),
    top("available_filter_functions_addrs", Some(functions::read_available_filter_functions_addrs), None),
    per_array("set_ftrace_filter", Some(functions::read_ftrace_filter), Some(functions::write_ftrace_filter)),
    per_array("set_ftrace_notrace", Some(functions::read_ftrace_notrace), Some(functions::write_ftrace_notrace)),
    per_array("set_ftrace_pid", Some(functions::read_ftrace_pid), Some(functions::write_ftrace_pid)),
    per_array("set_ftrace_notrace_pid", Some(functions::read_ftrace_notrace_pid), Some(functions::write_ftrace_notrace_pid)),
    top("enabled_functions", Some(functions::read_enabled_functions), None),
    top("touched_functions", Some(functions::read_touched_functions), None),
    top("dyn_ftrace_total_info", Some(functions::read_dyn_ftrace_total_info), None),
    per_array("tracing_on", Some(buffer::read_tracing_on), Some(buffer::write_tracing_on)),
    top("ftrace_enabled", Some(functions::read_ftrace_enabled), Some(functions::write_ftrace_enabled)),
    per_array("trace", Some(buffer::read_trace), Some(buffer::write_trace)),
    per_array("trace_pipe", Some(buffer::read_trace_pipe), None),
    per_array("trace_marker", None, Some(buffer::write_trace_marker)),
    per_array("snapshot", Some(buffer::read_snapshot), Some(buffer::write_snapshot)),
    top("recursed_functions", Some(functions::read_recursed_functions), Some(functions::write_recursed_functions)),
    per_array("set_graph_function", Some(function_graph::read_graph_function), Some(function_graph::write_graph_function)),
    per_array("set_graph_notrace", Some(function_graph::read_graph_notrace), Some(function_graph::write_graph_notrace)),
    per_array("max_graph_depth", Some(function_graph::read_max_graph_depth), Some(function_graph::write_max_graph_depth)),
    per_array("trace_options", Some(options::read_trace_options), Some(options::write_trace_options)),
    per_array("buffer_size_kb", Some(buffer::read_buffer_size_kb), Some(buffer::write_buffer_size_kb)),
    per_array("buffer_total_size_kb", Some(buffer::read_buffer_total_size_kb), None),
    per_array("free_buffer", None, Some(buffer::write_free_buffer)),
    top("dynamic_events", Some(dynamic_events::read_dynamic_events), Some(dynamic_events::write_dynamic_events)),
    top("kprobe_events", Some(dynamic_events::read_kprobe_events), Some(dynamic_events::write_kprobe_events)),
    top("synthetic_events", Some(dynamic_events::read_synthetic_events), Some(dynamic_events::write_synthetic_events)),
    top("kprobe_profile", Some(dynamic_events::read_kprobe_profile), None),
    top("available_events", Some(events::read_available_events), None),
    per_array("set_event", Some(events::read_set_event), Some(events::write_set_event)),
    per_array("set_event_pid", Some(events::read_event_pid), Some(events::write_event_pid)),
    per_array("set_event_notrace_pid", Some(events::read_event_notrace_pid), Some(events::write_event_notrace_pid)),
    per_array("trace_clock", Some(buffer::read_trace_clock), Some(buffer::write_trace_clock)),
    per_array("timestamp_mode", Some(buffer::read_timestamp_mode), None),
    per_array("tracing_cpumask", Some(buffer::read_tracing_cpumask), Some(buffer::write_tracing_cpumask)),
    top(
        "function_profile_enabled",
        Some(trace_stat::read_function_profile_enabled),
        Some(trace_stat::write_function_profile_enabled),
    ),
    top("tracing_thresh", Some(function_graph::read_tracing_thresh), Some(function_graph::write_tracing_thresh)),
    top("stack_tracer_enabled", Some(stack_trace::read_stack_tracer_enabled), Some(stack_trace::write_stack_tracer_enabled)),
    top("stack_max_size", Some(stack_trace::read_stack_max_size), Some(stack_trace::write_stack_max_size)),
    top("stack_trace", Some(stack_trace::read_stack_trace), None),
    top("stack_trace_filter", Some(stack_trace::read_stack_trace_filter), Some(stack_trace::write_stack_trace_filter)),
    per_array("error_log", Some(read_error_log), Some(write_error_log)),
    top("saved_cmdlines", Some(saved_cmdlines::read_saved_cmdlines), None),
    top("saved_cmdlines_size", Some(saved_cmdlines::read_saved_cmdlines_size), Some(saved_cmdlines::write_saved_cmdlines_size)),
    top("saved_tgids", Some(saved_cmdlines::read_saved_tgids), None),
];

/// A path resolved: the array it belongs to (held, if an instance's) and
/// the file's name within the array.
struct Resolved<'a> {
    array: Array,
    /// Keeps an instance from being removed while its file is in use.
    hold: Option<trace::array::instances::InstanceRef>,
    name: &'a str,
}

fn resolve(path: &str) -> Result<Resolved<'_>, TracefsError> {
    let Some(rest) = path.strip_prefix("instances/") else {
        return Ok(Resolved { array: trace::array::instances::top(), hold: None, name: path });
    };
    let (instance, name) = rest.split_once('/').unwrap_or((rest, ""));
    let hold = trace::array::instances::find(instance).ok_or_else(|| TracefsError::NoSuchFile(path.to_string()))?;
    Ok(Resolved { array: hold.array(), hold: Some(hold), name })
}

fn find(resolved: &Resolved, path: &str) -> Result<&'static File, TracefsError> {
    let top_level = resolved.hold.is_none();
    FILES
        .iter()
        .find(|file| file.name == resolved.name && (top_level || file.scope == Scope::Array))
        .ok_or_else(|| TracefsError::NoSuchFile(path.to_string()))
}

/// The file names, for `ls`: the fixed ones, each dynamic event's, then
/// each instance's directory.
pub fn names() -> impl Iterator<Item = String> {
    let events = event_names("");
    // The directory itself is always there, as Linux's is.
    let instances = core::iter::once(String::from("instances/"))
        .chain(trace::array::instances::names().into_iter().map(|name| format!("instances/{name}/")));
    let stats = (0..ring_buffer::trace_buffer::cpus()).map(|cpu| format!("trace_stat/function{cpu}"));
    let options = TraceOption::ALL.into_iter().map(|option| format!("options/{}", option.name()));
    FILES
        .iter()
        .map(|file| file.name.to_string())
        .chain(options)
        .chain(per_cpu_names(""))
        .chain(stats)
        .chain(events)
        .chain(instances)
}

/// Linux's mini-HOWTO, for the files this kernel has (every one of them:
/// a test checks).
pub const README: &str = include_str!("readme.txt");

fn read_readme(_array: Array, out: &mut dyn Write) -> fmt::Result {
    out.write_str(README)
}

fn read_error_log(array: Array, out: &mut dyn Write) -> fmt::Result {
    crate::error_log::write(array, out)
}

/// Emptied by `>`, as Linux's is by an open that truncates.
fn write_error_log(array: Array, _text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    if mode == FilterMode::Replace {
        array.error_log().clear();
    }
    Ok(())
}

/// Whether `path` names a file or an instance directory.
pub fn exists(path: &str) -> bool {
    match path.strip_prefix("instances/").map(|rest| rest.trim_end_matches('/')) {
        Some(name) if !name.contains('/') => trace::array::instances::find(name).is_some(),
        _ => resolve(path).is_ok_and(|resolved| {
            find(&resolved, path).is_ok()
                || per_cpu_file(resolved.name).is_some()
                || option_file(resolved.array, resolved.name).is_some()
                || (resolved.hold.is_none() && trace_stat_file(resolved.name).is_some())
                || event_file(resolved.name).is_some()
        }),
    }
}

/// `cat NAME`.
pub fn read(name: &str, out: &mut dyn Write) -> Result<(), TracefsError> {
    let resolved = resolve(name)?;
    let array = resolved.array;
    match event_file(resolved.name) {
        Some(EventFile::Enable(group, event)) => {
            // `*`: triggers keep the event armed (Linux's soft mode).
            let (records, soft_mode) = events::enable_state(array, group, event)?;
            let star = if soft_mode { "*" } else { "" };
            return writeln!(out, "{}{star}", u8::from(records)).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Format(group, event)) => return events::write_format(group, event, out),
        Some(EventFile::Filter(group, event)) => {
            let text = events::filter_text(array, group, event)?;
            return writeln!(out, "{text}").map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Id(group, event)) => {
            let id = events::id(group, event)?;
            return writeln!(out, "{id}").map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Trigger(group, event)) => {
            let text = events::trigger_text(array, group, event)?;
            return out.write_str(&text).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Hist(group, event)) => {
            let text = events::hist_text(array, group, event)?;
            return out.write_str(&text).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::GroupFilter(group)) => {
            let note = events::group_filter_text(group)?;
            return out.write_str(note).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::EnableAll(group)) => {
            let state = events::enabled_all(array, group)?;
            return writeln!(out, "{state}").map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::HeaderPage) => {
            return out.write_str(&ring_buffer::per_cpu::header_page()).map_err(|_| TracefsError::Invalid("output failed".into()))
        }
        Some(EventFile::HeaderEvent) => {
            return out.write_str(ring_buffer::per_cpu::header_event()).map_err(|_| TracefsError::Invalid("output failed".into()))
        }
        None => {}
    }
    if let Some((cpu, file)) = per_cpu_file(resolved.name) {
        return read_per_cpu(resolved.array, cpu, file, out).map_err(|_| TracefsError::Invalid("output failed".into()));
    }
    if let Some(option) = option_file(resolved.array, resolved.name) {
        return writeln!(out, "{}", u8::from(resolved.array.option(option)))
            .map_err(|_| TracefsError::Invalid("output failed".into()));
    }
    if let (Some(cpu), None) = (trace_stat_file(resolved.name), &resolved.hold) {
        return trace::profile::function::write_cpu_stats(cpu, out).map_err(|_| TracefsError::Invalid("output failed".into()));
    }
    let file = find(&resolved, name)?;
    let read = file.read.ok_or(TracefsError::NotReadable(file.name))?;
    read(resolved.array, out).map_err(|_| TracefsError::Invalid("output failed".into()))
}

/// `echo TEXT > NAME` (`Replace`) or `echo TEXT >> NAME` (`Append`). A
/// refused probe definition or event filter is also kept in `error_log`.
///
/// The probe-event files take a command a line, as Linux parses them (a
/// pipeline can write several): the first line with the write's mode, the
/// others appended; a refused line stops the write there (the lines before
/// it stay done) and is logged alone.
pub fn write(name: &str, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    if matches!(name, "dynamic_events" | "kprobe_events") && text.trim_end().contains('\n') {
        for (n, line) in text.split('\n').enumerate() {
            if n > 0 && line.trim().is_empty() {
                continue;
            }
            write_logged(name, line, if n == 0 { mode } else { FilterMode::Append })?;
        }
        return Ok(());
    }
    write_logged(name, text, mode)
}

/// One write, its refusal kept in `error_log`.
fn write_logged(name: &str, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let result = write_file(name, text, mode);
    if let Err(error) = &result {
        log_refusal(name, text, error);
    }
    result
}

/// Keeps the refusal `error` of `text` written to `name` in the
/// `error_log` of the array `name` belongs to (the probe files are the top
/// level's), if Linux logs such a refusal.
fn log_refusal(name: &str, text: &str, error: &TracefsError) {
    // Held while it logs; an instance removed since the write logs nothing.
    let Ok(resolved) = resolve(name) else { return };
    match error {
        TracefsError::Invalid(message) => {
            if let Some(location) = crate::error_log::location(name, text, message) {
                crate::error_log::log(resolved.array, location, message, text);
            }
        }
        TracefsError::Filter { command, error, .. } => crate::error_log::log_filter(resolved.array, command, error),
        _ => {}
    }
}

fn write_file(name: &str, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let resolved = resolve(name)?;
    let array = resolved.array;
    match event_file(resolved.name) {
        Some(EventFile::Enable(group, event)) => {
            return events::set_enabled(array, group, event, parse_switch(text)?);
        }
        Some(EventFile::Format(..)) => return Err(TracefsError::NotWritable("format")),
        Some(EventFile::Id(..)) => return Err(TracefsError::NotWritable("id")),
        Some(EventFile::Hist(..)) => return Err(TracefsError::NotWritable("hist")),
        Some(EventFile::HeaderPage) => return Err(TracefsError::NotWritable("header_page")),
        Some(EventFile::HeaderEvent) => return Err(TracefsError::NotWritable("header_event")),
        Some(EventFile::Filter(group, event)) => return events::set_filter(array, group, event, text),
        Some(EventFile::GroupFilter(group)) => return events::set_group_filter(array, group, text),
        // `>` and `>>` both add, as in Linux (its trigger file clears
        // nothing on a truncating open).
        Some(EventFile::Trigger(group, event)) => return events::write_trigger(array, group, event, text),
        Some(EventFile::EnableAll(group)) => {
            return events::set_enabled_all(array, group, parse_switch(text)?);
        }
        None => {}
    }
    if let Some((cpu, "trace")) = per_cpu_file(resolved.name) {
        // Emptied by `>` (an open that truncates), as `trace` is.
        if mode == FilterMode::Replace {
            resolved.array.buffer().reset_cpu(cpu);
        }
        return Ok(());
    }
    if let Some((_, "buffer_size_kb")) = per_cpu_file(resolved.name) {
        return Err(TracefsError::Invalid("one CPU's ring cannot be resized alone here: write buffer_size_kb".into()));
    }
    if let Some((_, file)) = per_cpu_file(resolved.name) {
        return Err(TracefsError::NotWritable(file));
    }
    if let Some(option) = option_file(resolved.array, resolved.name) {
        return set_option(resolved.array, option, parse_switch(text)?);
    }
    if trace_stat_file(resolved.name).is_some() && resolved.hold.is_none() {
        return Err(TracefsError::NotWritable("trace_stat"));
    }
    let file = find(&resolved, name)?;
    let write = file.write.ok_or(TracefsError::NotWritable(file.name))?;
    write(resolved.array, text, mode)
}

/// What an empty function list reads as, in Linux's words: a filter
/// traces every function, a notrace list leaves every function traced.
fn empty_list_line(filter: bool) -> &'static str {
    if filter {
        "#### all functions enabled ####"
    } else {
        "#### no functions disabled ####"
    }
}

fn parse_switch(text: &str) -> Result<bool, TracefsError> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other => Err(TracefsError::Invalid(format!("expected 0 or 1, not '{other}'"))),
    }
}

/// An unsigned decimal number, as Linux's `kstrtoul(text, 10, ...)` reads
/// a file's value (an optional `+`, no `-`).
fn parse_ulong(text: &str) -> Result<u64, TracefsError> {
    text.trim().parse().map_err(|_| TracefsError::Invalid(format!("expected a number, not '{}'", text.trim())))
}

/// An int as Linux's `proc_dointvec` reads a sysctl: an optional `-`, then
/// digits as C writes them (`0x` hex, a leading `0` octal), within an int.
fn parse_sysctl_int(text: &str) -> Result<i32, TracefsError> {
    let text = text.trim();
    ftrace::number::c_long(text)
        .and_then(|value| i32::try_from(value).ok())
        .ok_or_else(|| TracefsError::Invalid(format!("expected an int, not '{text}'")))
}
