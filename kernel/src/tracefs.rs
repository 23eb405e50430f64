//! The tracing files, in Linux's tracefs names and output shapes.
//!
//! The shell reads them with `cat FILE` and writes them with `echo TEXT > FILE`
//! (or `>>` to append, where Linux supports it). A write that cannot be
//! applied is an error and changes nothing.

use alloc::format;
use alloc::string::{String, ToString};
use core::fmt::{self, Write};

use ftrace::tracer::{self, GraphList, Tracer, FUNCTION_OPS};
use ftrace::{FilterKind, FilterMode, Trampoline};

/// Why a tracefs access failed; printed as `error: ...`.
#[derive(Debug, PartialEq, Eq)]
pub enum TracefsError {
    NoSuchFile(String),
    NotReadable(&'static str),
    NotWritable(&'static str),
    /// The text written is not valid for this file.
    Invalid(String),
}

impl fmt::Display for TracefsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TracefsError::NoSuchFile(name) => write!(f, "no such file: {name} (try 'ls')"),
            TracefsError::NotReadable(name) => write!(f, "{name} is write-only"),
            TracefsError::NotWritable(name) => write!(f, "{name} is read-only"),
            TracefsError::Invalid(message) => f.write_str(message),
        }
    }
}

impl From<ftrace::FtraceError> for TracefsError {
    fn from(error: ftrace::FtraceError) -> Self {
        TracefsError::Invalid(error.to_string())
    }
}

type Reader = fn(&mut dyn Write) -> fmt::Result;
type Writer = fn(&str, FilterMode) -> Result<(), TracefsError>;

/// One file: its name and what reading and writing it do.
struct File {
    name: &'static str,
    read: Option<Reader>,
    write: Option<Writer>,
}

const FILES: &[File] = &[
    File { name: "available_tracers", read: Some(read_available_tracers), write: None },
    File { name: "current_tracer", read: Some(read_current_tracer), write: Some(write_current_tracer) },
    File { name: "available_filter_functions", read: Some(read_available_filter_functions), write: None },
    File {
        name: "available_filter_functions_addrs",
        read: Some(read_available_filter_functions_addrs),
        write: None,
    },
    File { name: "set_ftrace_filter", read: Some(read_ftrace_filter), write: Some(write_ftrace_filter) },
    File { name: "set_ftrace_notrace", read: Some(read_ftrace_notrace), write: Some(write_ftrace_notrace) },
    File { name: "enabled_functions", read: Some(read_enabled_functions), write: None },
    File { name: "tracing_on", read: Some(read_tracing_on), write: Some(write_tracing_on) },
    File { name: "ftrace_enabled", read: Some(read_ftrace_enabled), write: Some(write_ftrace_enabled) },
    File { name: "trace", read: Some(read_trace), write: Some(write_trace) },
    File { name: "recursed_functions", read: Some(read_recursed_functions), write: Some(write_recursed_functions) },
    File { name: "set_graph_function", read: Some(read_graph_function), write: Some(write_graph_function) },
    File { name: "set_graph_notrace", read: Some(read_graph_notrace), write: Some(write_graph_notrace) },
    File { name: "max_graph_depth", read: Some(read_max_graph_depth), write: Some(write_max_graph_depth) },
    File { name: "options/funcgraph-retval", read: Some(read_funcgraph_retval), write: Some(write_funcgraph_retval) },
    File { name: "dynamic_events", read: Some(read_dynamic_events), write: Some(write_dynamic_events) },
];

fn find(name: &str) -> Result<&'static File, TracefsError> {
    FILES.iter().find(|file| file.name == name).ok_or_else(|| TracefsError::NoSuchFile(name.to_string()))
}

/// The file names, for `ls`: the fixed ones, then each dynamic event's.
pub fn names() -> impl Iterator<Item = String> {
    let events = fprobe::events::event_names().into_iter().flat_map(|event| {
        [format!("events/{event}/enable"), format!("events/{event}/format")]
    });
    FILES.iter().map(|file| file.name.to_string()).chain(events)
}

/// A per-event file: `events/GRP/EVENT/enable` or `.../format`.
enum EventFile<'a> {
    Enable(&'a str, &'a str),
    Format(&'a str, &'a str),
}

fn event_file(name: &str) -> Option<EventFile<'_>> {
    let mut parts = name.strip_prefix("events/")?.split('/');
    let (group, event, file, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else {
        return None;
    };
    match file {
        "enable" => Some(EventFile::Enable(group, event)),
        "format" => Some(EventFile::Format(group, event)),
        _ => None,
    }
}

fn event_error(error: fprobe::events::EventError) -> TracefsError {
    TracefsError::Invalid(error.to_string())
}

/// `cat NAME`.
pub fn read(name: &str, out: &mut dyn Write) -> Result<(), TracefsError> {
    match event_file(name) {
        Some(EventFile::Enable(group, event)) => {
            let enabled = fprobe::events::is_enabled(group, event).map_err(event_error)?;
            return writeln!(out, "{}", u8::from(enabled)).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Format(group, event)) => return fprobe::events::write_format(group, event, out).map_err(event_error),
        None => {}
    }
    let file = find(name)?;
    let read = file.read.ok_or(TracefsError::NotReadable(file.name))?;
    read(out).map_err(|_| TracefsError::Invalid("output failed".into()))
}

/// `echo TEXT > NAME` (`Replace`) or `echo TEXT >> NAME` (`Append`).
pub fn write(name: &str, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    match event_file(name) {
        Some(EventFile::Enable(group, event)) => {
            return fprobe::events::set_enabled(group, event, parse_switch(text)?).map_err(event_error);
        }
        Some(EventFile::Format(..)) => return Err(TracefsError::NotWritable("format")),
        None => {}
    }
    let file = find(name)?;
    let write = file.write.ok_or(TracefsError::NotWritable(file.name))?;
    write(text, mode)
}

fn read_available_tracers(out: &mut dyn Write) -> fmt::Result {
    let names: alloc::vec::Vec<&str> = Tracer::ALL.iter().map(|t| t.name()).collect();
    writeln!(out, "{}", names.join(" "))
}

fn read_current_tracer(out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", tracer::current().name())
}

fn write_current_tracer(text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let name = text.trim();
    let tracer = Tracer::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no such tracer '{name}' (see available_tracers)")))?;
    tracer::set_current(tracer)?;
    Ok(())
}

fn read_available_filter_functions(out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && !site.failed {
            result = writeln!(out, "{}", site.name);
        }
    });
    result
}

fn read_available_filter_functions_addrs(out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && !site.failed {
            result = writeln!(out, "{:016x} {}", site.ip, site.name);
        }
    });
    result
}

fn read_filter(out: &mut dyn Write, kind: FilterKind) -> fmt::Result {
    let names = ftrace::filter_names(&FUNCTION_OPS, kind);
    if names.is_empty() && kind == FilterKind::Filter {
        return writeln!(out, "#### all functions enabled ####");
    }
    for name in names {
        writeln!(out, "{name}")?;
    }
    Ok(())
}

fn read_ftrace_filter(out: &mut dyn Write) -> fmt::Result {
    read_filter(out, FilterKind::Filter)
}

fn read_ftrace_notrace(out: &mut dyn Write) -> fmt::Result {
    read_filter(out, FilterKind::Notrace)
}

fn write_ftrace_filter(text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(tracer::set_tracer_filter(FilterKind::Filter, text, mode)?)
}

fn write_ftrace_notrace(text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(tracer::set_tracer_filter(FilterKind::Notrace, text, mode)?)
}

fn read_enabled_functions(out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && site.ops_count > 0 {
            let regs = if site.trampoline == Some(Trampoline::Regs) { " R" } else { "" };
            let ipmodify = if site.ipmodify { " I" } else { "" };
            result = writeln!(out, "{} ({}){regs}{ipmodify}", site.name, site.ops_count);
        }
    });
    result
}

fn parse_switch(text: &str) -> Result<bool, TracefsError> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other => Err(TracefsError::Invalid(format!("expected 0 or 1, not '{other}'"))),
    }
}

fn read_tracing_on(out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(ftrace::buffer::tracing_on()))
}

fn write_tracing_on(text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    ftrace::buffer::set_tracing_on(parse_switch(text)?);
    Ok(())
}

fn read_ftrace_enabled(out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(ftrace::is_enabled()))
}

fn write_ftrace_enabled(text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    Ok(ftrace::set_enabled(parse_switch(text)?)?)
}

fn read_trace(out: &mut dyn Write) -> fmt::Result {
    tracer::write_trace(out)
}

/// Any write empties the buffer (`echo > trace`), as in Linux.
fn write_trace(_text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    ftrace::buffer::reset();
    Ok(())
}

/// `FUNCTION:\tCALLER` for every function a callback recursed into.
fn read_recursed_functions(out: &mut dyn Write) -> fmt::Result {
    for (ip, parent) in ftrace::recursion::recursed_functions() {
        let name = |address| ftrace::symbols::name_of(address).unwrap_or("?");
        writeln!(out, "{}:\t{}", name(ip), name(parent))?;
    }
    Ok(())
}

fn write_recursed_functions(_text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    ftrace::recursion::clear_recursed_functions();
    Ok(())
}

fn read_graph_list(out: &mut dyn Write, list: GraphList) -> fmt::Result {
    let names = tracer::graph_list_names(list);
    if names.is_empty() && list == GraphList::Functions {
        return writeln!(out, "#### all functions enabled ####");
    }
    for name in names {
        writeln!(out, "{name}")?;
    }
    Ok(())
}

fn read_graph_function(out: &mut dyn Write) -> fmt::Result {
    read_graph_list(out, GraphList::Functions)
}

fn read_graph_notrace(out: &mut dyn Write) -> fmt::Result {
    read_graph_list(out, GraphList::Notrace)
}

fn write_graph_function(text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(tracer::set_graph_list(GraphList::Functions, text, mode)?)
}

fn write_graph_notrace(text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(tracer::set_graph_list(GraphList::Notrace, text, mode)?)
}

fn read_max_graph_depth(out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", tracer::max_graph_depth())
}

fn write_max_graph_depth(text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let depth = text
        .trim()
        .parse()
        .map_err(|_| TracefsError::Invalid(format!("expected a depth (0 for no limit), not '{}'", text.trim())))?;
    tracer::set_max_graph_depth(depth);
    Ok(())
}

fn read_funcgraph_retval(out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(tracer::graph_retval()))
}

fn write_funcgraph_retval(text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    tracer::set_graph_retval(parse_switch(text)?);
    Ok(())
}

fn read_dynamic_events(out: &mut dyn Write) -> fmt::Result {
    fprobe::events::read_dynamic_events(out)
}

fn write_dynamic_events(text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    fprobe::events::write_dynamic_events(text, mode).map_err(event_error)
}
