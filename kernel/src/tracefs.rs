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

use alloc::format;
use alloc::string::{String, ToString};
use core::fmt::{self, Write};

use ftrace::{FilterKind, FilterMode, Trampoline};
use trace::array::instances;
use trace::array::instances::InstanceError;
use trace::array::options::TraceOption;
use trace::array::trace_array::{GraphList, TraceArray};
use trace::tracers::Tracer;

use crate::trace_events;

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
    per_array("available_tracers", Some(read_available_tracers), None),
    per_array("current_tracer", Some(read_current_tracer), Some(write_current_tracer)),
    top("available_filter_functions", Some(read_available_filter_functions), None),
    top("available_filter_functions_addrs", Some(read_available_filter_functions_addrs), None),
    per_array("set_ftrace_filter", Some(read_ftrace_filter), Some(write_ftrace_filter)),
    per_array("set_ftrace_notrace", Some(read_ftrace_notrace), Some(write_ftrace_notrace)),
    per_array("set_ftrace_pid", Some(read_ftrace_pid), Some(write_ftrace_pid)),
    per_array("set_ftrace_notrace_pid", Some(read_ftrace_notrace_pid), Some(write_ftrace_notrace_pid)),
    top("enabled_functions", Some(read_enabled_functions), None),
    top("touched_functions", Some(read_touched_functions), None),
    top("dyn_ftrace_total_info", Some(read_dyn_ftrace_total_info), None),
    per_array("tracing_on", Some(read_tracing_on), Some(write_tracing_on)),
    top("ftrace_enabled", Some(read_ftrace_enabled), Some(write_ftrace_enabled)),
    per_array("trace", Some(read_trace), Some(write_trace)),
    per_array("trace_pipe", Some(read_trace_pipe), None),
    per_array("trace_marker", None, Some(write_trace_marker)),
    per_array("snapshot", Some(read_snapshot), Some(write_snapshot)),
    top("recursed_functions", Some(read_recursed_functions), Some(write_recursed_functions)),
    per_array("set_graph_function", Some(read_graph_function), Some(write_graph_function)),
    per_array("set_graph_notrace", Some(read_graph_notrace), Some(write_graph_notrace)),
    per_array("max_graph_depth", Some(read_max_graph_depth), Some(write_max_graph_depth)),
    per_array("trace_options", Some(read_trace_options), Some(write_trace_options)),
    per_array("buffer_size_kb", Some(read_buffer_size_kb), Some(write_buffer_size_kb)),
    per_array("buffer_total_size_kb", Some(read_buffer_total_size_kb), None),
    per_array("free_buffer", None, Some(write_free_buffer)),
    top("dynamic_events", Some(read_dynamic_events), Some(write_dynamic_events)),
    top("kprobe_events", Some(read_kprobe_events), Some(write_kprobe_events)),
    top("synthetic_events", Some(read_synthetic_events), Some(write_synthetic_events)),
    top("kprobe_profile", Some(read_kprobe_profile), None),
    top("available_events", Some(read_available_events), None),
    per_array("set_event", Some(read_set_event), Some(write_set_event)),
    per_array("set_event_pid", Some(read_event_pid), Some(write_event_pid)),
    per_array("set_event_notrace_pid", Some(read_event_notrace_pid), Some(write_event_notrace_pid)),
    per_array("trace_clock", Some(read_trace_clock), Some(write_trace_clock)),
    per_array("timestamp_mode", Some(read_timestamp_mode), None),
    per_array("tracing_cpumask", Some(read_tracing_cpumask), Some(write_tracing_cpumask)),
    top("function_profile_enabled", Some(read_function_profile_enabled), Some(write_function_profile_enabled)),
    top("tracing_thresh", Some(read_tracing_thresh), Some(write_tracing_thresh)),
    top("stack_tracer_enabled", Some(read_stack_tracer_enabled), Some(write_stack_tracer_enabled)),
    top("stack_max_size", Some(read_stack_max_size), Some(write_stack_max_size)),
    top("stack_trace", Some(read_stack_trace), None),
    top("stack_trace_filter", Some(read_stack_trace_filter), Some(write_stack_trace_filter)),
    per_array("error_log", Some(read_error_log), Some(write_error_log)),
    top("saved_cmdlines", Some(read_saved_cmdlines), None),
    top("saved_cmdlines_size", Some(read_saved_cmdlines_size), Some(write_saved_cmdlines_size)),
    top("saved_tgids", Some(read_saved_tgids), None),
];

/// A path resolved: the array it belongs to (held, if an instance's) and
/// the file's name within the array.
struct Resolved<'a> {
    array: Array,
    /// Keeps an instance from being removed while its file is in use.
    hold: Option<instances::InstanceRef>,
    name: &'a str,
}

fn resolve(path: &str) -> Result<Resolved<'_>, TracefsError> {
    let Some(rest) = path.strip_prefix("instances/") else {
        return Ok(Resolved { array: instances::top(), hold: None, name: path });
    };
    let (instance, name) = rest.split_once('/').unwrap_or((rest, ""));
    let hold = instances::find(instance).ok_or_else(|| TracefsError::NoSuchFile(path.to_string()))?;
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
        .chain(instances::names().into_iter().map(|name| format!("instances/{name}/")));
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

/// The files of instance `name`, for `ls instances/NAME`.
pub fn instance_names(name: &str) -> Option<impl Iterator<Item = String>> {
    instances::find(name)?;
    let prefix = format!("instances/{name}/");
    let files = FILES.iter().filter(|file| file.scope == Scope::Array).map(|file| format!("{prefix}{}", file.name));
    let options = TraceOption::ALL
        .into_iter()
        .filter(|option| !option.top_level_only())
        .map(|option| format!("{prefix}options/{}", option.name()));
    let events = event_names(&prefix);
    Some(files.chain(options).chain(per_cpu_names(&prefix)).chain(events).collect::<alloc::vec::Vec<_>>().into_iter())
}

/// Each event's files.
const EVENT_FILES: [&str; 6] = ["enable", "filter", "format", "hist", "id", "trigger"];

/// The files under `{prefix}events/`.
fn event_names(prefix: &str) -> alloc::vec::Vec<String> {
    let groups: alloc::collections::BTreeSet<String> = trace_events::all().into_iter().map(|(group, _)| group).collect();
    let group_files =
        groups.into_iter().flat_map(|group| ["enable", "filter"].map(|file| format!("{prefix}events/{group}/{file}")));
    let events = trace_events::all()
        .into_iter()
        .flat_map(|(group, event)| EVENT_FILES.iter().map(move |file| format!("{prefix}events/{group}/{event}/{file}")));
    let headers = ["header_page", "header_event"].map(|file| format!("{prefix}events/{file}"));
    core::iter::once(format!("{prefix}events/enable")).chain(headers).chain(group_files).chain(events).collect()
}

/// The files each CPU has under `per_cpu/cpuN/`.
const PER_CPU_FILES: [&str; 4] = ["trace", "trace_pipe", "stats", "buffer_size_kb"];

fn per_cpu_names(prefix: &str) -> impl Iterator<Item = String> + '_ {
    (0..ring_buffer::trace_buffer::cpus())
        .flat_map(move |cpu| PER_CPU_FILES.iter().map(move |file| format!("{prefix}per_cpu/cpu{cpu}/{file}")))
}

/// `per_cpu/cpuN/FILE` within an array: (N, FILE), for a CPU that exists.
fn per_cpu_file(name: &str) -> Option<(usize, &'static str)> {
    let (cpu, file) = name.strip_prefix("per_cpu/cpu")?.split_once('/')?;
    let cpu: usize = cpu.parse().ok().filter(|&cpu| cpu < ring_buffer::trace_buffer::cpus())?;
    PER_CPU_FILES.iter().find(|&&known| known == file).map(|&file| (cpu, file))
}

/// Reads `per_cpu/cpuN/FILE`.
fn read_per_cpu(array: Array, cpu: usize, file: &str, out: &mut dyn Write) -> fmt::Result {
    if file == "trace" {
        return trace::output::read::write_trace_of(array, Some(cpu), out);
    }
    if file == "trace_pipe" {
        return pipe(array, Some(cpu), out, &mut until_key);
    }
    if file == "buffer_size_kb" {
        // Every CPU's ring has the same size here.
        return read_buffer_size_kb(array, out);
    }
    // Linux's layout (`tracing_stats_read`), timestamps in seconds; read
    // without pausing the CPU's writer, as Linux does (a pause would drop
    // the events it records meanwhile).
    let buffer = array.buffer();
    let stats = buffer.stats_of(cpu);
    let usage = buffer.usage_of(cpu);
    // By the array's clock: seconds, or the number for one that is no time.
    let in_ns = buffer.clock().in_ns();
    let seconds = |ns: u64| match in_ns {
        true => format!("{:5}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000),
        false => format!("{ns}"),
    };
    writeln!(out, "entries: {}", stats.entries)?;
    writeln!(out, "overrun: {}", stats.overrun)?;
    writeln!(out, "commit overrun: 0")?;
    writeln!(out, "bytes: {}", usage.bytes)?;
    writeln!(out, "oldest event ts: {}", seconds(usage.oldest_page_time))?;
    writeln!(out, "now ts: {}", seconds(buffer.now()))?;
    writeln!(out, "dropped events: {}", stats.dropped)?;
    writeln!(out, "read events: {}", stats.read)
}

/// `trace_stat/functionN` (top level only): CPU N, when it exists.
fn trace_stat_file(name: &str) -> Option<usize> {
    name.strip_prefix("trace_stat/function")?.parse().ok().filter(|&cpu| cpu < ring_buffer::trace_buffer::cpus())
}

fn read_function_profile_enabled(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(trace::profile::function::is_enabled()))
}

/// Any decimal number, not 0 on (Linux's `kstrtoul` then `!!val`): reads
/// back 0 or 1.
fn write_function_profile_enabled(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let on = parse_ulong(text)? != 0;
    array.set_function_profile(on).map_err(|error| TracefsError::Invalid(error.to_string()))
}

/// Linux's `/proc/sys/kernel/stack_tracer_enabled`, as a tracefs file here:
/// the int last written.
fn read_stack_tracer_enabled(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::tracers::stack::enabled_value())
}

/// Any int (not 0 is on), read as Linux's `proc_dointvec` does.
fn write_stack_tracer_enabled(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    Ok(trace::tracers::stack::set_enabled(parse_sysctl_int(text)?)?)
}

fn read_stack_max_size(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::tracers::stack::max_size())
}

/// A number of bytes: the maximum a new chain must beat (`0` starts over
/// and forgets the chain too).
fn write_stack_max_size(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let bytes =
        text.trim().parse().map_err(|_| TracefsError::Invalid(format!("expected a number of bytes, not '{}'", text.trim())))?;
    trace::tracers::stack::set_max_size(bytes);
    Ok(())
}

/// Linux's mini-HOWTO, for the files this kernel has (every one of them:
/// a test checks).
pub const README: &str = include_str!("tracefs_readme.txt");

fn read_readme(_array: Array, out: &mut dyn Write) -> fmt::Result {
    out.write_str(README)
}

/// `PID COMM`, one task a line: the names traces show.
fn read_saved_cmdlines(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::task_names::saved_cmdlines().iter().try_for_each(|(pid, comm)| writeln!(out, "{pid} {comm}"))
}

fn read_saved_tgids(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::task_names::saved_tgids().iter().try_for_each(|(pid, tgid)| writeln!(out, "{pid} {tgid}"))
}

fn read_saved_cmdlines_size(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::task_names::saved_cmdlines_size())
}

/// How many task names to keep (the oldest go first).
fn write_saved_cmdlines_size(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let max = trace::task_names::MAX_SAVED_CMDLINES;
    let refused = || TracefsError::Invalid(format!("expected a number of names from 1 to {max}, not '{}'", text.trim()));
    let n: usize = text.trim().parse().map_err(|_| refused())?;
    trace::task_names::set_saved_cmdlines_size(n).ok_or_else(refused)
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

fn read_stack_trace(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::tracers::stack::write_trace(out)
}

fn read_stack_trace_filter(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let names = ftrace::filter_names(trace::tracers::stack::ops(), FilterKind::Filter);
    if names.is_empty() {
        return writeln!(out, "#### all functions enabled ####");
    }
    names.iter().try_for_each(|name| writeln!(out, "{name}"))
}

fn write_stack_trace_filter(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(ftrace::set_filter(trace::tracers::stack::ops(), FilterKind::Filter, text, mode)?)
}

/// The KiB `pages` ring pages hold: their data bytes, not their headers,
/// rounded down, as Linux's `buffer_size_kb` counts them (1024 pages of
/// 4080 data bytes: 4080).
fn pages_to_kb(pages: usize) -> usize {
    pages * ring_buffer::per_cpu::PAGE_DATA_SIZE / 1024
}

/// The ring pages that hold `kb` KiB of data, as Linux rounds a size up
/// (`DIV_ROUND_UP(size, BUF_PAGE_SIZE)`, at least two pages).
fn kb_to_pages(kb: usize) -> usize {
    use ring_buffer::trace_buffer::MIN_PAGES_PER_CPU;
    kb.saturating_mul(1024).div_ceil(ring_buffer::per_cpu::PAGE_DATA_SIZE).max(MIN_PAGES_PER_CPU)
}

fn read_buffer_size_kb(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", pages_to_kb(array.buffer().pages_per_cpu()))
}

/// `echo KB > buffer_size_kb`: every CPU's ring becomes KB KiB of data
/// (rounded up to whole pages, at least `MIN_PAGES_PER_CPU`, as Linux
/// rounds it; reading it back gives what the pages hold); the tracer stays
/// on, and the events stay, as in Linux (the newest that fit when the
/// rings shrink).
fn write_buffer_size_kb(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    use ring_buffer::trace_buffer::{ResizeError, MAX_PAGES_PER_CPU};
    let range = || format!("1 to {}", pages_to_kb(MAX_PAGES_PER_CPU));
    let kb: usize = text
        .trim()
        .parse()
        .map_err(|_| TracefsError::Invalid(format!("expected a size in KiB ({}), not '{}'", range(), text.trim())))?;
    if kb == 0 {
        return Err(TracefsError::Invalid(format!("0 KiB is out of range ({})", range())));
    }
    match array.buffer().resize(kb_to_pages(kb)) {
        Ok(()) => Ok(()),
        Err(ResizeError::BadSize) => Err(TracefsError::Invalid(format!("{kb} KiB is out of range ({})", range()))),
        Err(ResizeError::NoMemory) => {
            Err(TracefsError::Invalid(format!("not enough memory for {kb} KiB per CPU (and a copy to read it)")))
        }
    }
}

/// `echo > free_buffer`: the array's rings shrink to the fewest pages
/// (what Linux's close of the file does: a resize to 0, which it rounds up
/// to two pages; `buffer_size_kb` then reads 7), whatever was written; the
/// tracer stays, and the newest events that fit. With
/// `options/disable_on_free` on, recording stops first, as Linux's close
/// stops it.
fn write_free_buffer(array: Array, _text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    if array.option(TraceOption::DisableOnFree) {
        array.buffer().set_on(false);
    }
    array
        .buffer()
        .resize(ring_buffer::trace_buffer::MIN_PAGES_PER_CPU)
        .map_err(|_| TracefsError::Invalid("the buffer could not be shrunk".into()))
}

/// The CPUs that record, in hex as Linux prints a CPU mask: one digit per
/// four CPUs (`f` for four CPUs, `01` for CPU 0 of eight).
fn read_tracing_cpumask(array: Array, out: &mut dyn Write) -> fmt::Result {
    let width = ring_buffer::trace_buffer::cpus().div_ceil(4);
    writeln!(out, "{:0width$x}", array.buffer().cpumask())
}

/// `echo MASK > tracing_cpumask`: hex, as Linux reads a CPU mask (groups
/// of at most 8 digits, 32 bits each, highest first, between commas);
/// events on other CPUs are not recorded from now on.
fn write_tracing_cpumask(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let mask = parse_cpumask(text.trim())
        .ok_or_else(|| TracefsError::Invalid(format!("expected a CPU mask in hex, not '{}'", text.trim())))?;
    array.buffer().set_cpumask(mask).map_err(|error| {
        TracefsError::Invalid(format!("{:#x} names a CPU this machine does not have ({} CPUs)", mask, error.cpus))
    })
}

/// `f`, `ff`, `1,00000000`: 32-bit groups of hex digits, highest first.
/// `None` for anything else, or more than 64 bits.
fn parse_cpumask(text: &str) -> Option<u64> {
    let groups: alloc::vec::Vec<&str> = text.split(',').collect();
    if groups.len() > 2 {
        return None;
    }
    groups.iter().try_fold(0u64, |mask, group| {
        let digits = (1..=8).contains(&group.len()) && group.chars().all(|c| c.is_ascii_hexdigit());
        let value = u32::from_str_radix(group, 16).ok().filter(|_| digits)?;
        Some(mask << 32 | u64::from(value))
    })
}

fn read_buffer_total_size_kb(array: Array, out: &mut dyn Write) -> fmt::Result {
    let buffer = array.buffer();
    writeln!(out, "{}", pages_to_kb(buffer.pages_per_cpu()) * buffer.cpus())
}

/// Whether `path` names a file or an instance directory.
pub fn exists(path: &str) -> bool {
    match path.strip_prefix("instances/").map(|rest| rest.trim_end_matches('/')) {
        Some(name) if !name.contains('/') => instances::find(name).is_some(),
        _ => resolve(path).is_ok_and(|resolved| {
            find(&resolved, path).is_ok()
                || per_cpu_file(resolved.name).is_some()
                || option_file(resolved.array, resolved.name).is_some()
                || (resolved.hold.is_none() && trace_stat_file(resolved.name).is_some())
                || event_file(resolved.name).is_some()
        }),
    }
}

/// `mkdir instances/NAME`.
pub fn mkdir(path: &str) -> Result<(), TracefsError> {
    Ok(instances::create(instance_dir(path)?)?)
}

/// `rmdir instances/NAME`.
pub fn rmdir(path: &str) -> Result<(), TracefsError> {
    Ok(instances::remove(instance_dir(path)?, trace_events::forget_array)?)
}

/// The NAME of `instances/NAME` (the only directories one makes). `path`
/// is resolved: empty is the root (`mkdir instances/..`).
fn instance_dir(path: &str) -> Result<&str, TracefsError> {
    let shown = if path.is_empty() { "/sys/kernel/tracing" } else { path };
    path.trim_end_matches('/')
        .strip_prefix("instances/")
        .filter(|name| !name.is_empty())
        .ok_or_else(|| TracefsError::Invalid(format!("{shown}: only instances/NAME can be made or removed")))
}

/// A file under `events/`.
enum EventFile<'a> {
    /// `events/GRP/EVENT/enable`.
    Enable(&'a str, &'a str),
    /// `events/GRP/EVENT/format`.
    Format(&'a str, &'a str),
    /// `events/GRP/EVENT/filter`.
    Filter(&'a str, &'a str),
    /// `events/GRP/EVENT/id`.
    Id(&'a str, &'a str),
    /// `events/GRP/EVENT/trigger`.
    Trigger(&'a str, &'a str),
    /// `events/GRP/EVENT/hist`.
    Hist(&'a str, &'a str),
    /// `events/enable` (`None`) or `events/GRP/enable`.
    EnableAll(Option<&'a str>),
    /// `events/GRP/filter`.
    GroupFilter(&'a str),
    /// `events/header_page`, `events/header_event`: the ring buffer's
    /// page and event headers, as tools that read raw pages parse them.
    HeaderPage,
    HeaderEvent,
}

fn event_file(name: &str) -> Option<EventFile<'_>> {
    let parts: alloc::vec::Vec<&str> = name.strip_prefix("events/")?.split('/').collect();
    match parts.as_slice() {
        ["enable"] => Some(EventFile::EnableAll(None)),
        ["header_page"] => Some(EventFile::HeaderPage),
        ["header_event"] => Some(EventFile::HeaderEvent),
        [group, "enable"] => Some(EventFile::EnableAll(Some(group))),
        [group, "filter"] => Some(EventFile::GroupFilter(group)),
        [group, event, "enable"] => Some(EventFile::Enable(group, event)),
        [group, event, "format"] => Some(EventFile::Format(group, event)),
        [group, event, "filter"] => Some(EventFile::Filter(group, event)),
        [group, event, "id"] => Some(EventFile::Id(group, event)),
        [group, event, "trigger"] => Some(EventFile::Trigger(group, event)),
        [group, event, "hist"] => Some(EventFile::Hist(group, event)),
        _ => None,
    }
}

fn event_error(error: probe_events::events::EventError) -> TracefsError {
    TracefsError::Invalid(error.to_string())
}

/// `cat NAME`.
pub fn read(name: &str, out: &mut dyn Write) -> Result<(), TracefsError> {
    let resolved = resolve(name)?;
    let array = resolved.array;
    match event_file(resolved.name) {
        Some(EventFile::Enable(group, event)) => {
            // `*`: triggers keep the event armed (Linux's soft mode).
            let (records, soft_mode) = trace_events::enable_state(array, group, event)?;
            let star = if soft_mode { "*" } else { "" };
            return writeln!(out, "{}{star}", u8::from(records)).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Format(group, event)) => return trace_events::write_format(group, event, out),
        Some(EventFile::Filter(group, event)) => {
            let text = trace_events::filter_text(array, group, event)?;
            return writeln!(out, "{text}").map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Id(group, event)) => {
            let id = trace_events::id(group, event)?;
            return writeln!(out, "{id}").map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Trigger(group, event)) => {
            let text = trace_events::trigger_text(array, group, event)?;
            return out.write_str(&text).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::Hist(group, event)) => {
            let text = trace_events::hist_text(array, group, event)?;
            return out.write_str(&text).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::GroupFilter(group)) => {
            let note = trace_events::group_filter_text(group)?;
            return out.write_str(note).map_err(|_| TracefsError::Invalid("output failed".into()));
        }
        Some(EventFile::EnableAll(group)) => {
            let state = trace_events::enabled_all(array, group)?;
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
            return trace_events::set_enabled(array, group, event, parse_switch(text)?);
        }
        Some(EventFile::Format(..)) => return Err(TracefsError::NotWritable("format")),
        Some(EventFile::Id(..)) => return Err(TracefsError::NotWritable("id")),
        Some(EventFile::Hist(..)) => return Err(TracefsError::NotWritable("hist")),
        Some(EventFile::HeaderPage) => return Err(TracefsError::NotWritable("header_page")),
        Some(EventFile::HeaderEvent) => return Err(TracefsError::NotWritable("header_event")),
        Some(EventFile::Filter(group, event)) => return trace_events::set_filter(array, group, event, text),
        Some(EventFile::GroupFilter(group)) => return trace_events::set_group_filter(array, group, text),
        // `>` and `>>` both add, as in Linux (its trigger file clears
        // nothing on a truncating open).
        Some(EventFile::Trigger(group, event)) => return trace_events::write_trigger(array, group, event, text),
        Some(EventFile::EnableAll(group)) => {
            return trace_events::set_enabled_all(array, group, parse_switch(text)?);
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

fn read_available_tracers(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let names: alloc::vec::Vec<&str> = Tracer::ALL.iter().map(|t| t.name()).collect();
    writeln!(out, "{}", names.join(" "))
}

fn read_current_tracer(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", array.current_tracer().name())
}

fn write_current_tracer(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let name = text.trim();
    let tracer = Tracer::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no such tracer '{name}' (see available_tracers)")))?;
    array.set_current_tracer(tracer)?;
    Ok(())
}

fn read_available_filter_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && !site.failed {
            result = writeln!(out, "{}", site.name);
        }
    });
    result
}

fn read_available_filter_functions_addrs(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let mut result = Ok(());
    ftrace::for_each_site(|site| {
        if result.is_ok() && !site.failed {
            result = writeln!(out, "{:016x} {}", site.ip, site.name);
        }
    });
    result
}

fn read_filter(array: Array, out: &mut dyn Write, kind: FilterKind) -> fmt::Result {
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

fn read_ftrace_filter(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_filter(array, out, FilterKind::Filter)
}

fn read_ftrace_notrace(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_filter(array, out, FilterKind::Notrace)
}

/// `set_ftrace_filter` takes globs (the tracers' filter) and function
/// commands (`FUNC:traceoff[:N]`, `!FUNC:traceoff` to remove, see
/// `trace::tracers::function_commands`). As in Linux, `>` empties the filter first (an
/// open that truncates), commands or not; `>>` with commands alone leaves
/// it as it is.
fn write_ftrace_filter(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
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
fn apply_ftrace_filter(
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
            (false, Some(target)) => Some(trace_events::event_hook(array, target)?),
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
type ParsedCommand<'a> = (bool, &'a str, trace::tracers::function_commands::Command, Option<Option<u64>>);

/// A function command: (remove, FUNC, COMMAND, COUNT) from
/// `[!]FUNC:COMMAND[:COUNT]` or `[!]FUNC:enable_event:GRP:EVENT[:COUNT]`
/// (and `disable_event`), or `None` for a plain glob. The `:` before
/// COMMAND is a single one: FUNC's own `::` separate path segments.
/// COUNT is `Some` when one was written (the command with a count, apart
/// from the one without, as in Linux), and holds the number it reads as;
/// a removal does not read it (`!FUNC:traceoff:count=3`, as `cat` lists
/// it, takes the counted one off), as Linux does not.
fn parse_command(word: &str) -> Option<Result<ParsedCommand<'_>, TracefsError>> {
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

fn write_ftrace_notrace(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(array.set_tracer_filter(FilterKind::Notrace, text, mode)?)
}

/// `cat set_ftrace_pid`: the pids, or Linux's `no pid` when no list is
/// set (a list emptied by exits still filters, and reads as nothing).
fn read_pids(array: Array, notrace: bool, out: &mut dyn Write) -> fmt::Result {
    let pids = array.pids(notrace);
    if pids.is_empty() && !array.pid_list_set(notrace) {
        return writeln!(out, "no pid");
    }
    pids.iter().try_for_each(|pid| writeln!(out, "{pid}"))
}

fn read_ftrace_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_pids(array, false, out)
}

fn read_ftrace_notrace_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_pids(array, true, out)
}

fn write_ftrace_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    array.set_pids(false, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

fn write_ftrace_notrace_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    array.set_pids(true, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

/// `cat trace_clock`: every clock, the array's in brackets.
fn read_trace_clock(array: Array, out: &mut dyn Write) -> fmt::Result {
    let current = array.buffer().clock();
    let names: alloc::vec::Vec<String> = ring_buffer::clock::TraceClock::available()
        .map(|clock| match clock == current {
            true => format!("[{}]", clock.name()),
            false => String::from(clock.name()),
        })
        .collect();
    writeln!(out, "{}", names.join(" "))
}

/// `cat timestamp_mode`: how the ring buffer stamps events, Linux's two
/// modes with the one in use in brackets. Here always `delta`: each event
/// holds its distance from the one before (`ring_buffer::per_cpu`); Linux
/// switches a buffer to `absolute` for hist variables, which this kernel
/// has not. Read-only, as in Linux.
fn read_timestamp_mode(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "[delta] absolute")
}

/// `echo NAME > trace_clock`: switches the array's clock (and empties its
/// buffer).
fn write_trace_clock(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let name = text.trim();
    let clock = ring_buffer::clock::TraceClock::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no clock '{name}' (see trace_clock)")))?;
    array.buffer().set_clock(clock);
    Ok(())
}

/// `cat set_event_pid`: the pids (nothing when empty, as Linux prints it).
fn read_event_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::events::pid::pids(array, false).iter().try_for_each(|pid| writeln!(out, "{pid}"))
}

fn write_event_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    trace::events::pid::set_pids(array, false, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

/// `cat set_event_notrace_pid`, as `set_event_pid`.
fn read_event_notrace_pid(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::events::pid::pids(array, true).iter().try_for_each(|pid| writeln!(out, "{pid}"))
}

fn write_event_notrace_pid(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    trace::events::pid::set_pids(array, true, text, mode).map_err(|error| TracefsError::Invalid(error.to_string()))
}

fn read_enabled_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    write_sites(out, |site| site.ops_count > 0)
}

/// `cat touched_functions`: every function an ops traced since boot, in
/// `enabled_functions`' format (a count of 0 once none does), as Linux's.
fn read_touched_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    write_sites(out, |site| site.touched)
}

/// The site table's size and how long building it took at boot, in
/// Linux 6.13's lines (no modules here: their update time is 0).
fn read_dyn_ftrace_total_info(_array: Array, out: &mut dyn Write) -> fmt::Result {
    let Some(info) = ftrace::total_info() else { return Ok(()) };
    writeln!(out, "{} pages:{} groups: {}", info.sites, info.pages, info.groups)?;
    writeln!(out, "ftrace boot update time = {} (ns)", info.boot_update_ns)?;
    writeln!(out, "ftrace module total update time = 0 (ns)")
}

/// The sites `shown` picks: `NAME (OPS)`, then ` R` on the full-registers
/// trampoline and ` I` under an IPMODIFY ops.
fn write_sites(out: &mut dyn Write, shown: impl Fn(&ftrace::SiteInfo) -> bool) -> fmt::Result {
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

fn read_tracing_on(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(array.buffer().is_on()))
}

/// Any number: not 0 is on, as in Linux.
fn write_tracing_on(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    array.buffer().set_on(parse_ulong(text)? != 0);
    Ok(())
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

fn read_ftrace_enabled(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(ftrace::is_enabled()))
}

fn write_ftrace_enabled(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    Ok(ftrace::set_enabled(parse_switch(text)?)?)
}

fn read_trace(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::output::read::write_trace(array, out)
}

/// `echo TEXT > trace_marker`: TEXT becomes a `tracing_mark_write` event;
/// refused while `options/markers` is off or the buffer records nothing
/// (`tracing_on` is 0), as Linux refuses it.
fn write_trace_marker(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    if !array.option(TraceOption::Markers) {
        return Err(TracefsError::Invalid("trace_marker is off (options/markers is 0)".into()));
    }
    // Linux's `tracing_mark_write` fails (EBADF) when the buffer takes no
    // event, rather than drop the text silently.
    if !trace::printk::write_marker(array, text) {
        let why = if array.buffer().is_on() { "the buffer took no event" } else { "tracing_on is 0" };
        return Err(TracefsError::Invalid(format!("trace_marker: nothing recorded, {why}")));
    }
    Ok(())
}

fn read_available_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace_events::write_available(out)
}

fn read_set_event(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace_events::write_enabled(array, out)
}

fn write_set_event(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    trace_events::set_events(array, text, mode)
}

fn read_tracing_thresh(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", trace::tracers::function_graph::tracing_thresh_us())
}

/// `echo US > tracing_thresh`: function_graph records only calls of at
/// least US microseconds (0: every call).
fn write_tracing_thresh(_array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    // Decimal, as Linux reads it; kept in nanoseconds: a number of
    // microseconds whose nanoseconds overflow could not read back as written.
    let us = text
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|us| us.checked_mul(1000).is_some())
        .ok_or_else(|| TracefsError::Invalid(format!("expected microseconds (0 for off), not '{}'", text.trim())))?;
    trace::tracers::function_graph::set_tracing_thresh_us(us);
    Ok(())
}

fn read_snapshot(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::output::read::write_snapshot(array, out)
}

/// `echo 0|1|N > snapshot`, as in Linux (see `TraceArray::snapshot_command`).
fn write_snapshot(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let command = text
        .trim()
        .parse()
        .map_err(|_| TracefsError::Invalid(format!("expected a number (0, 1, or another to clear), not '{}'", text.trim())))?;
    array.snapshot_command(command).map_err(|error| TracefsError::Invalid(error.to_string()))
}

/// How long `trace_pipe` waits between passes over an empty buffer.
const PIPE_POLL_MS: u64 = 10;

/// `cat trace_pipe`: prints events as they come, taking them out of the
/// buffer (a consuming read), until a key is pressed on the console.
fn read_trace_pipe(array: Array, out: &mut dyn Write) -> fmt::Result {
    pipe(array, None, out, &mut until_key)
}

/// Consuming passes over `array`'s buffer (one CPU's or all), printing
/// each pass's events oldest first, until `stop` (told how many were
/// printed so far) says so after a pass.
pub fn pipe(array: Array, cpu: Option<usize>, out: &mut dyn Write, stop: &mut dyn FnMut(usize) -> bool) -> fmt::Result {
    let mut reader = trace::output::pipe::PipeReader::new();
    let mut printed = 0;
    loop {
        // A pass takes a page per CPU: while finished pages wait, the
        // next pass reads at once; otherwise it waits for the writers.
        let pass = reader.pass(array, cpu, out)?;
        printed += pass.printed;
        if stop(printed) {
            return Ok(());
        }
        if !pass.more {
            crate::sched::sleep_ms(PIPE_POLL_MS);
        }
    }
}

/// Whether a key was pressed (it stops the pipe).
fn until_key(_printed: usize) -> bool {
    crate::console::stop_key_pressed()
}

/// `echo > trace` empties the buffer; as in Linux, where only an open
/// that truncates does, `>>` changes nothing.
fn write_trace(array: Array, _text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    if mode == FilterMode::Replace {
        array.buffer().reset();
    }
    Ok(())
}

/// `FUNCTION:\tCALLER` for every function a callback recursed into.
fn read_recursed_functions(_array: Array, out: &mut dyn Write) -> fmt::Result {
    for (ip, parent) in ftrace::recursion::recursed_functions() {
        let name = |address| ftrace::symbols::kernel::name_of(address).unwrap_or("?");
        writeln!(out, "{}:\t{}", name(ip), name(parent))?;
    }
    Ok(())
}

fn write_recursed_functions(_array: Array, _text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    ftrace::recursion::clear_recursed_functions();
    Ok(())
}

fn read_graph_list(array: Array, out: &mut dyn Write, list: GraphList) -> fmt::Result {
    let names = array.graph_list_names(list);
    if names.is_empty() {
        return writeln!(out, "{}", empty_list_line(list == GraphList::Functions));
    }
    for name in names {
        writeln!(out, "{name}")?;
    }
    Ok(())
}

fn read_graph_function(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_graph_list(array, out, GraphList::Functions)
}

fn read_graph_notrace(array: Array, out: &mut dyn Write) -> fmt::Result {
    read_graph_list(array, out, GraphList::Notrace)
}

fn write_graph_function(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(array.set_graph_list(GraphList::Functions, text, mode)?)
}

fn write_graph_notrace(array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    Ok(array.set_graph_list(GraphList::Notrace, text, mode)?)
}

fn read_max_graph_depth(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", array.max_graph_depth())
}

/// `echo N > max_graph_depth`: N is a 32-bit count, as Linux reads it
/// (`kstrtouint`: a larger number is out of range).
fn write_max_graph_depth(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let depth: u32 = text.trim().parse().map_err(|_| {
        TracefsError::Invalid(format!("expected a depth from 0 (no limit) to {}, not '{}'", u32::MAX, text.trim()))
    })?;
    array.set_max_graph_depth(depth as usize);
    Ok(())
}

/// `options/NAME` within `array`: the option, if it has one so called
/// (an instance has no file for a top-level-only option).
fn option_file(array: Array, name: &str) -> Option<TraceOption> {
    TraceOption::from_name(name.strip_prefix("options/")?).filter(|option| array.is_top() || !option.top_level_only())
}

/// `cat trace_options`: every option, `no` in front of those that are off.
/// The generic options, then the current tracer's, as Linux lists them
/// (another tracer's are only in `options/`).
fn read_trace_options(array: Array, out: &mut dyn Write) -> fmt::Result {
    for option in TraceOption::ALL.into_iter().filter(|option| of_current_tracer(array, *option)) {
        let no = if array.option(option) { "" } else { "no" };
        writeln!(out, "{no}{}", option.name())?;
    }
    Ok(())
}

/// Whether `option` is generic or the current tracer's.
fn of_current_tracer(array: Array, option: TraceOption) -> bool {
    option.tracer().is_none_or(|tracer| tracer == array.current_tracer())
}

/// `echo NAME > trace_options` sets it, `echo noNAME > trace_options` clears
/// it; a tracer's option only while that tracer is current, as in Linux
/// (`options/NAME` takes it whenever).
fn write_trace_options(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let word = text.trim();
    let (name, on) = match word.strip_prefix("no") {
        Some(name) if TraceOption::from_name(name).is_some() => (name, false),
        _ => (word, true),
    };
    let option = TraceOption::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no such option '{name}' (see trace_options)")))?;
    if !of_current_tracer(array, option) {
        let tracer = option.tracer().map_or("", |tracer| tracer.name());
        return Err(TracefsError::Invalid(format!(
            "'{name}' is an option of the {tracer} tracer, which is not current (or write options/{name})"
        )));
    }
    set_option(array, option, on)
}

/// Switches an option (`options/NAME`, `trace_options`); the probe events
/// learn of `stacktrace`, which takes them off their fast path.
fn set_option(array: Array, option: TraceOption, on: bool) -> Result<(), TracefsError> {
    array.set_option(option, on)?;
    if option == TraceOption::StackTrace && array.is_top() {
        probe_events::events::stack_trace_option_changed();
    }
    Ok(())
}

fn read_dynamic_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    probe_events::events::read_dynamic_events(out)?;
    trace::events::synth::write_definitions(out, true)
}

/// The probe events' commands, and Linux's `s:[synthetic/]NAME FIELDS`
/// defining a synthetic event and `-:[synthetic/]NAME` removing one. A
/// truncating write (`>`) first removes every dynamic event of both kinds,
/// as Linux's does when it opens the file; all of them or none (each kind
/// checked before either goes, as Linux checks them all), and not for a
/// line that is refused: a definition is checked first (each kind's own
/// truncating write does that, the first to run), and a removal, which
/// would find nothing left, is refused.
fn write_dynamic_events(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    let line = text.trim();
    let synthetic_definition = line.strip_prefix("s:").map(|def| def.strip_prefix("synthetic/").unwrap_or(def));
    let synthetic_removal = line.strip_prefix("-:").map(|name| name.strip_prefix("synthetic/").unwrap_or(name).trim());
    if mode == FilterMode::Append {
        if let Some(definition) = synthetic_definition {
            return trace_events::write_synthetic(definition, FilterMode::Append);
        }
        if let Some(name) = synthetic_removal.filter(|name| trace::events::synth::find(name).is_some()) {
            return trace_events::write_synthetic(&format!("!{name}"), FilterMode::Append);
        }
        return probe_events::events::write_dynamic_events(text, FilterMode::Append).map_err(event_error);
    }
    if line.starts_with("-:") {
        return Err(TracefsError::Invalid(format!(
            "'{line}': '>' removes every dynamic event first, so there is nothing left for it to remove (write it with '>>')"
        )));
    }
    probe_events::events::check_removable_all().map_err(event_error)?;
    trace_events::check_synthetic_removable_all()?;
    match synthetic_definition {
        Some(definition) => {
            trace_events::write_synthetic(definition, FilterMode::Replace)?;
            probe_events::events::write_dynamic_events("", FilterMode::Replace).map_err(event_error)
        }
        None => {
            probe_events::events::write_dynamic_events(text, FilterMode::Replace).map_err(event_error)?;
            trace_events::write_synthetic("", FilterMode::Replace)
        }
    }
}

fn read_synthetic_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::events::synth::write_definitions(out, false)
}

fn write_synthetic_events(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    trace_events::write_synthetic(text, mode)
}

fn read_kprobe_events(_array: Array, out: &mut dyn Write) -> fmt::Result {
    probe_events::events::read_kprobe_events(out)
}

fn write_kprobe_events(_array: Array, text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    probe_events::events::write_kprobe_events(text, mode).map_err(event_error)
}

fn read_kprobe_profile(_array: Array, out: &mut dyn Write) -> fmt::Result {
    probe_events::events::read_kprobe_profile(out)
}
