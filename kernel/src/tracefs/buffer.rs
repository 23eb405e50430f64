//! The trace buffer's files: `trace` (read; a write empties it),
//! `trace_pipe` (the consuming read), `snapshot`, `trace_marker`,
//! `tracing_on`, `buffer_size_kb`, `buffer_total_size_kb`, `free_buffer`,
//! `trace_clock`, `timestamp_mode` and `tracing_cpumask`, in the top level
//! and in every instance.

use super::parse_ulong;
use super::Array;
use super::TracefsError;
use alloc::format;
use alloc::string::{String, ToString};
use core::fmt::{self, Write};

use ftrace::FilterMode;
use trace::array::options::TraceOption;

/// The KiB `pages` ring pages hold: their data bytes, not their headers,
/// rounded down, as Linux's `buffer_size_kb` counts them (1024 pages of
/// 4080 data bytes: 4080).
pub(super) fn pages_to_kb(pages: usize) -> usize {
    pages * ring_buffer::per_cpu::PAGE_DATA_SIZE / 1024
}

/// The ring pages that hold `kb` KiB of data, as Linux rounds a size up
/// (`DIV_ROUND_UP(size, BUF_PAGE_SIZE)`, at least two pages).
pub(super) fn kb_to_pages(kb: usize) -> usize {
    use ring_buffer::trace_buffer::MIN_PAGES_PER_CPU;
    kb.saturating_mul(1024).div_ceil(ring_buffer::per_cpu::PAGE_DATA_SIZE).max(MIN_PAGES_PER_CPU)
}

pub(super) fn read_buffer_size_kb(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", pages_to_kb(array.buffer().pages_per_cpu()))
}

/// `echo KB > buffer_size_kb`: every CPU's ring becomes KB KiB of data
/// (rounded up to whole pages, at least `MIN_PAGES_PER_CPU`, as Linux
/// rounds it; reading it back gives what the pages hold); the tracer stays
/// on, and the events stay, as in Linux (the newest that fit when the
/// rings shrink).
pub(super) fn write_buffer_size_kb(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
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
pub(super) fn write_free_buffer(array: Array, _text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
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
pub(super) fn read_tracing_cpumask(array: Array, out: &mut dyn Write) -> fmt::Result {
    let width = ring_buffer::trace_buffer::cpus().div_ceil(4);
    writeln!(out, "{:0width$x}", array.buffer().cpumask())
}

/// `echo MASK > tracing_cpumask`: hex, as Linux reads a CPU mask (groups
/// of at most 8 digits, 32 bits each, highest first, between commas);
/// events on other CPUs are not recorded from now on.
pub(super) fn write_tracing_cpumask(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let mask = parse_cpumask(text.trim())
        .ok_or_else(|| TracefsError::Invalid(format!("expected a CPU mask in hex, not '{}'", text.trim())))?;
    array.buffer().set_cpumask(mask).map_err(|error| {
        TracefsError::Invalid(format!("{:#x} names a CPU this machine does not have ({} CPUs)", mask, error.cpus))
    })
}

/// `f`, `ff`, `1,00000000`: 32-bit groups of hex digits, highest first.
/// `None` for anything else, or more than 64 bits.
pub(super) fn parse_cpumask(text: &str) -> Option<u64> {
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

pub(super) fn read_buffer_total_size_kb(array: Array, out: &mut dyn Write) -> fmt::Result {
    let buffer = array.buffer();
    writeln!(out, "{}", pages_to_kb(buffer.pages_per_cpu()) * buffer.cpus())
}

/// `cat trace_clock`: every clock, the array's in brackets.
pub(super) fn read_trace_clock(array: Array, out: &mut dyn Write) -> fmt::Result {
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
pub(super) fn read_timestamp_mode(_array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "[delta] absolute")
}

/// `echo NAME > trace_clock`: switches the array's clock (and empties its
/// buffer).
pub(super) fn write_trace_clock(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let name = text.trim();
    let clock = ring_buffer::clock::TraceClock::from_name(name)
        .ok_or_else(|| TracefsError::Invalid(format!("no clock '{name}' (see trace_clock)")))?;
    array.buffer().set_clock(clock);
    Ok(())
}

pub(super) fn read_tracing_on(array: Array, out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "{}", u8::from(array.buffer().is_on()))
}

/// Any number: not 0 is on, as in Linux.
pub(super) fn write_tracing_on(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    array.buffer().set_on(parse_ulong(text)? != 0);
    Ok(())
}

pub(super) fn read_trace(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::output::read::write_trace(array, out)
}

/// `echo TEXT > trace_marker`: TEXT becomes a `tracing_mark_write` event;
/// refused while `options/markers` is off or the buffer records nothing
/// (`tracing_on` is 0), as Linux refuses it.
pub(super) fn write_trace_marker(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
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

pub(super) fn read_snapshot(array: Array, out: &mut dyn Write) -> fmt::Result {
    trace::output::read::write_snapshot(array, out)
}

/// `echo 0|1|N > snapshot`, as in Linux (see `TraceArray::snapshot_command`).
pub(super) fn write_snapshot(array: Array, text: &str, _mode: FilterMode) -> Result<(), TracefsError> {
    let command = text
        .trim()
        .parse()
        .map_err(|_| TracefsError::Invalid(format!("expected a number (0, 1, or another to clear), not '{}'", text.trim())))?;
    array.snapshot_command(command).map_err(|error| TracefsError::Invalid(error.to_string()))
}

/// How long `trace_pipe` waits between passes over an empty buffer.
pub(super) const PIPE_POLL_MS: u64 = 10;

/// `cat trace_pipe`: prints events as they come, taking them out of the
/// buffer (a consuming read), until a key is pressed on the console.
pub(super) fn read_trace_pipe(array: Array, out: &mut dyn Write) -> fmt::Result {
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
pub(super) fn until_key(_printed: usize) -> bool {
    crate::console::stop_key_pressed()
}

/// `echo > trace` empties the buffer; as in Linux, where only an open
/// that truncates does, `>>` changes nothing.
pub(super) fn write_trace(array: Array, _text: &str, mode: FilterMode) -> Result<(), TracefsError> {
    if mode == FilterMode::Replace {
        array.buffer().reset();
    }
    Ok(())
}
