//! `trace_printk!`: a line of text from kernel code into the trace, as
//! Linux's `trace_printk()` puts one there, the debugging tool that costs
//! far less than a console print and shows up among the traced calls:
//!
//! ```text
//!            shell-1       [000] .....   812.403517: kernel::workload::fib: n=25
//! ```
//!
//! It takes `format!`'s arguments and writes a print event (Linux's
//! `TRACE_PRINT`, the record `trace_marker` writes too) into the top level's
//! buffer, where Linux's goes. The event keeps the caller's address, shown
//! as its function (`options/sym-offset` and `options/sym-addr` apply);
//! `options/trace_printk` off drops every call, and
//! `options/printk-msg-only` prints the text alone.
//!
//! Design: the text is formatted twice, once to count its bytes and once
//! straight into the event the buffer reserved for it, so nothing is
//! allocated and no copy of the text sits on the stack (Linux formats into
//! a per-CPU buffer and copies). The buffer's writer masks interrupts and
//! takes no lock: any context may call it, a tracing callback included.
//! The arguments are formatted inside the buffer's write (a foreign
//! write, `TraceBuffer::write_foreign`): an event that traced code run by
//! that formatting tries to write on this CPU is dropped and counted
//! (`WriteError::Nested`), never written over this one. A
//! text past [`PRINTK_MAX`] bytes is cut there (before a character that
//! would not fit whole); an argument whose text
//! changes between the two passes is cut, or padded with NULs, to the
//! first pass's length. Like Linux's, the text is kept as given: a line
//! shows it without one trailing newline, so `"x\n"` and `"x"` print alike.
//!
//! Failure modes: none to report but whether the event was written
//! (`false`: the option is off, the buffer is not recording, or it is full
//! and does not overwrite).

use crate::array::trace_array::TraceArray;
use crate::events::record::event_common;
use core::fmt::{self, Write};

use crate::array::options::TraceOption;
use crate::events::record::{encode_print_with, print_text_event_size, PrintWriter, TRACE_PRINT};

/// The most bytes of text an event keeps: what the largest event the ring
/// buffer takes holds (Linux's `TRACE_BUF_SIZE` keeps 1023).
pub const PRINTK_MAX: usize = ring_buffer::per_cpu::MAX_PAYLOAD - print_text_event_size(0);

/// Writes a line of text into the trace, formatted as `format!` does;
/// answers whether it was recorded. See the [module](crate::printk)
/// documentation.
///
/// ```ignore
/// ftrace::trace_printk!("n={n} depth={}\n", depth);
/// ```
#[macro_export]
macro_rules! trace_printk {
    ($($arg:tt)*) => {
        $crate::printk::trace_printk(::core::format_args!($($arg)*))
    };
}

/// What [`trace_printk!`](crate::trace_printk) calls. Never inlined: its
/// return address is the caller's place, the address its event keeps.
#[inline(never)]
pub fn trace_printk(args: fmt::Arguments) -> bool {
    let top = crate::array::instances::top();
    if !top.option(TraceOption::TracePrintk) {
        return false;
    }
    // This function's frame record holds its return address: a place in
    // the caller.
    // (No frame record to read: this function's own address, which names it.)
    let ip =
        ftrace::graph::unwind::return_addresses(arch::cpu::frame_pointer()).next().unwrap_or(trace_printk as *const () as usize);
    let mut counter = Counter(0);
    // A `Display` that fails only cuts the text short.
    let _ = counter.write_fmt(args);
    let len = counter.0.min(PRINTK_MAX);
    let common = crate::events::record::event_common(TRACE_PRINT);
    let size = print_text_event_size(len);
    top.buffer()
        .write_foreign(size, |_, out| {
            encode_print_with(common, PrintWriter::Kernel(ip as u64), len, out, |room| {
                let mut filler = Filler { room, at: 0, full: false };
                let _ = filler.write_fmt(args);
                let at = filler.at;
                filler.room[at..].fill(0);
            })
        })
        .is_some()
}

/// Counts the bytes written through it.
struct Counter(usize);

impl Write for Counter {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0 += text.len();
        Ok(())
    }
}

/// Writes into `room` from `at`, and drops what does not fit, from the
/// first character that does not on (so the text stays UTF-8).
struct Filler<'a> {
    room: &'a mut [u8],
    at: usize,
    full: bool,
}

impl Write for Filler<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if self.full {
            return Ok(());
        }
        let mut take = text.len().min(self.room.len() - self.at);
        while !text.is_char_boundary(take) {
            take -= 1;
        }
        self.full = take < text.len();
        self.room[self.at..self.at + take].copy_from_slice(&text.as_bytes()[..take]);
        self.at += take;
        Ok(())
    }
}

/// The longest `trace_marker` text an event keeps (longer is cut).
pub const MARKER_MAX: usize = 1000;

/// `echo TEXT > trace_marker`: a print event with TEXT (and a newline, as
/// `echo` writes), if the array is recording. Answers whether it was.
pub fn write_marker(array: &TraceArray, text: &str) -> bool {
    let mut bytes = alloc::vec::Vec::with_capacity(text.len().min(MARKER_MAX) + 1);
    bytes.extend_from_slice(&text.as_bytes()[..text.len().min(MARKER_MAX)]);
    // One newline at the end, as Linux's `tracing_mark_write` adds it only
    // when the text has none.
    if bytes.last() != Some(&b'\n') {
        bytes.push(b'\n');
    }
    write_print(array, PrintWriter::Marker, &bytes)
}

/// Records `text` (ending in a newline) as a print event of `writer`, if
/// the array is recording. Answers whether it was. Neither allocates nor
/// waits: callable from a callback.
pub(crate) fn write_print(array: &TraceArray, writer: PrintWriter, text: &[u8]) -> bool {
    let common = event_common(crate::events::record::TRACE_PRINT);
    let size = crate::events::record::print_event_size(text);
    array.buffer().write_with(size, |_, out| crate::events::record::encode_print(common, writer, text, out)).is_some()
}
