//! The trace's other ways of printing an event, Linux's `raw`, `hex` and
//! `fields` options (`trace_options`), for `trace` and `trace_pipe` under
//! every tracer but function_graph (whose lines are its own, as in Linux).
//!
//! - **raw** ([`write_raw`]): the context as numbers (`PID CPU TIMESTAMP `,
//!   the timestamp in the clock's own units), then the event's raw form:
//!   a function call's two addresses in hex, a repeat count's numbers, a
//!   print event's `# IP TEXT`; any other event only says its type
//!   (`type: 300`), as Linux prints an event that has no raw form.
//! - **hex** ([`write_hex`]): the same numbers as fixed-width hex words
//!   (8 digits for an `int`, 16 for a 64-bit value, each followed by a
//!   space), the function call's addresses as the only event that has a
//!   hex form, then an empty line's newline, as Linux ends a hex record.
//! - **fields** ([`EventFields`]): the event's name and every field of its
//!   own (not the common ones), `name=value`, read from the record as the
//!   event's `format` describes it: strings as text, the function tracer's
//!   addresses as `function+0xOFF/0xSIZE`, numbers as Linux's
//!   `print_fields` shows them by size (`0x19 (25)`; a 64-bit value as a
//!   symbol if it is a code address).
//!
//! `hex` wins over `raw`, and both over `fields`, as in Linux (whose `bin`,
//! the binary form, is not offered: a console shows text). A record too
//! short for a field its format names prints `<OVERFLOW>` there, as Linux
//! does; nothing here can fail on a damaged record.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::events::record::{decode_print, Common, Event};
use crate::output::{self, Namer, When};

/// How `trace` prints its events (under any tracer but function_graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintMode {
    /// Each event's own text (`options/fields` off).
    Text,
    /// Each event field by field (`options/fields`).
    Fields,
    /// Numbers (`options/raw`).
    Raw,
    /// Hex words (`options/hex`).
    Hex,
}

/// `PID CPU TIMESTAMP ` then the event's raw form, one line (`context_info`:
/// `options/context-info`, without which the numbers are left out).
pub fn write_raw(out: &mut dyn Write, when: When, payload: &[u8], context_info: bool) -> fmt::Result {
    let common = Common::decode(payload).unwrap_or_default();
    if context_info {
        write!(out, "{} {} {} ", common.pid, when.cpu, when.time)?;
    }
    match Event::decode(payload) {
        Some(Event::Function(event)) => writeln!(out, "{:x} {:x}", event.ip, event.parent_ip),
        // Linux's `trace_func_repeats_raw`: the addresses in decimal.
        Some(Event::FuncRepeats(event)) => {
            writeln!(out, "{} {} {} {}", event.ip, event.parent_ip, event.count, event.delta)
        }
        _ => match decode_print(payload) {
            Some((writer, text)) => writeln!(out, "# {:x} {}", writer.ip(), output::print_text(text)),
            None => writeln!(out, "type: {}", common.kind),
        },
    }
}

/// The context and event of [`write_raw`] as hex words, then a newline.
pub fn write_hex(out: &mut dyn Write, when: When, payload: &[u8], context_info: bool) -> fmt::Result {
    let common = Common::decode(payload).unwrap_or_default();
    if context_info {
        // `int` pid and CPU, the 64-bit timestamp.
        write!(out, "{:08x} {:08x} {:016x} ", common.pid as u32, when.cpu as u32, when.time)?;
    }
    match Event::decode(payload) {
        Some(Event::Function(event)) => write!(out, "{:016x} {:016x} ", event.ip, event.parent_ip)?,
        _ => writeln!(out, "type: {}", common.kind)?,
    }
    out.write_char('\n')
}

/// How a field's value prints under `options/fields`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldPrint {
    /// A function tracer address (Linux's `__field_fn`): the symbol alone.
    Function,
    /// `char name[N]`: text up to its NUL (`char name[]`, size 0: the rest
    /// of the record, without the newline a print event's text ends in;
    /// Linux prints nothing for a field of size 0).
    StaticString,
    /// `__data_loc char[] name`: a 32-bit offset and length to the text.
    DynString,
    /// `__data_loc TYPE[] name`: its bytes in hex, comma-separated.
    DynArray,
    /// A number of the field's size.
    Number,
}

/// One of an event's own fields, from its format.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldSpec {
    name: String,
    print: FieldPrint,
    offset: usize,
    size: usize,
}

/// An event's name and own fields, read from its `format` text once, to
/// print its records field by field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFields {
    name: String,
    fields: Vec<FieldSpec>,
}

impl EventFields {
    /// The fields `format` (an event's `format` file) describes, or `None`
    /// if it names no event.
    pub fn parse(format: &str) -> Option<EventFields> {
        let name = format.lines().find_map(|line| line.strip_prefix("name: "))?.trim();
        let fields = format.lines().filter_map(|line| FieldSpec::parse(name, line)).collect();
        Some(EventFields { name: String::from(name), fields })
    }

    /// `NAME: field=value field=value...` and a newline, for the record
    /// `payload`.
    pub fn write(&self, out: &mut dyn Write, payload: &[u8], names: Namer) -> fmt::Result {
        write!(out, "{}:", self.name)?;
        if self.fields.is_empty() {
            return writeln!(out, "No fields found");
        }
        for field in &self.fields {
            write!(out, " {}=", field.name)?;
            match payload.get(field.offset..field.offset + field.size) {
                Some(bytes) => field.write_value(out, bytes, payload, names)?,
                None => out.write_str("<OVERFLOW>")?,
            }
        }
        out.write_char('\n')
    }
}

impl FieldSpec {
    /// The field a `\tfield:DECLARATION;\toffset:N;\tsize:N;\tsigned:N;`
    /// line of event `event`'s format describes; `None` for other lines and
    /// the common fields.
    fn parse(event: &str, line: &str) -> Option<FieldSpec> {
        let mut parts = line.trim().split(';').map(str::trim);
        let declaration = parts.next()?.strip_prefix("field:")?;
        let number = |part: Option<&str>, key: &str| part?.strip_prefix(key)?.parse::<usize>().ok();
        let offset = number(parts.next(), "offset:")?;
        let size = number(parts.next(), "size:")?;
        let (c_type, name) = declaration.rsplit_once(' ')?;
        let (name, array) = match name.split_once('[') {
            Some((name, _)) => (name, true),
            None => (name, false),
        };
        if name.starts_with("common_") {
            return None;
        }
        let print = if c_type.starts_with("__data_loc") {
            if c_type.contains("char") {
                FieldPrint::DynString
            } else {
                FieldPrint::DynArray
            }
        } else if array && c_type.contains("char") {
            FieldPrint::StaticString
        } else if matches!(event, "function" | "func_repeats") && matches!(name, "ip" | "parent_ip") {
            FieldPrint::Function
        } else {
            FieldPrint::Number
        };
        Some(FieldSpec { name: String::from(name), print, offset, size })
    }

    /// The value in `bytes` (the field's own, inside `record`).
    fn write_value(&self, out: &mut dyn Write, bytes: &[u8], record: &[u8], names: Namer) -> fmt::Result {
        match self.print {
            FieldPrint::StaticString => {
                if self.size > 0 {
                    return write_text(out, bytes);
                }
                let rest = record.get(self.offset..).unwrap_or_default();
                let text = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
                write_text(out, text.strip_suffix(b"\n").unwrap_or(text))
            }
            FieldPrint::Function => output::write_code_address(out, uint(bytes) as usize, names),
            FieldPrint::DynString | FieldPrint::DynArray if self.size == 4 => {
                let loc = uint(bytes);
                let (at, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
                match record.get(at..at + len) {
                    Some(data) if self.print == FieldPrint::DynString => write_text(out, data),
                    Some(data) => data.iter().enumerate().try_for_each(|(i, byte)| match i {
                        0 => write!(out, "{byte:02x}"),
                        _ => write!(out, ",{byte:02x}"),
                    }),
                    None => out.write_str("<OVERFLOW>"),
                }
            }
            FieldPrint::DynString | FieldPrint::DynArray | FieldPrint::Number => write_number(out, bytes, names),
        }
    }
}

/// A field of 1, 2, 4 or 8 bytes, in the record's native order, as a
/// number (0 for another size, which no caller reads as a number).
fn uint(bytes: &[u8]) -> u64 {
    match bytes.len() {
        1 => u64::from(bytes[0]),
        2 => u64::from(u16::from_ne_bytes([bytes[0], bytes[1]])),
        4 => u64::from(u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        8 => u64::from_ne_bytes(bytes.try_into().unwrap_or_default()),
        _ => 0,
    }
}

/// Text up to its first NUL. A control byte, or one that is not UTF-8, is
/// written `\xNN` (Linux writes the bytes as they are; a console would act
/// on them).
fn write_text(out: &mut dyn Write, bytes: &[u8]) -> fmt::Result {
    let text = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
    for chunk in text.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                c if c.is_control() && (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32)?,
                c => out.write_char(c)?,
            }
        }
        chunk.invalid().iter().try_for_each(|byte| write!(out, "\\x{byte:02x}"))?;
    }
    Ok(())
}

/// A number as Linux's `print_fields` shows one of its size.
fn write_number(out: &mut dyn Write, bytes: &[u8], names: Namer) -> fmt::Result {
    let value = uint(bytes);
    match bytes.len() {
        1 => {
            let byte = value as u8;
            if byte.is_ascii_graphic() || byte == b' ' {
                write!(out, "'{}'", byte as char)?;
            }
            write!(out, "({byte})")
        }
        2 => write!(out, "{value:#x} ({value})"),
        4 => write!(out, "{:#x} ({})", value as u32, value as u32 as i32),
        8 => {
            output::write_code_address(out, value as usize, names)?;
            write!(out, " ({})", value as i64)
        }
        _ => out.write_str("<INVALID-SIZE>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::record::{encode_print, print_event_size, FixedEvent, FunctionEvent, PrintWriter, TRACE_FN};
    use ftrace::symbols::table::Symbol;
    use ring_buffer::payload::encode_to_vec;

    fn names(address: usize) -> Option<Symbol<'static>> {
        (0x1000..0x1100).contains(&address).then_some(Symbol { name: "fib", address: 0x1000, size: 0x100 })
    }

    fn function() -> Vec<u8> {
        let common = Common { kind: TRACE_FN, pid: 7, ..Common::default() };
        FunctionEvent { common, ip: 0x1004, parent_ip: 0x2000 }.to_bytes()
    }

    fn line(write: impl FnOnce(&mut String) -> fmt::Result) -> String {
        let mut out = String::new();
        write(&mut out).unwrap();
        out
    }

    #[test]
    fn raw_prints_numbers_and_the_type_of_an_event_without_a_raw_form() {
        let when = When::at(1, 12_345);
        assert_eq!(line(|out| write_raw(out, when, &function(), true)), "7 1 12345 1004 2000\n");
        assert_eq!(line(|out| write_raw(out, when, &function(), false)), "1004 2000\n");
        let common = Common { kind: crate::events::record::TRACE_PRINT, pid: 7, ..Common::default() };
        let print = encode_to_vec(print_event_size(b"hi\n"), |out| encode_print(common, PrintWriter::Kernel(0xab), b"hi\n", out));
        assert_eq!(line(|out| write_raw(out, when, &print, false)), "# ab hi\n");
        let other = Common { kind: 300, pid: 2, ..Common::default() };
        let mut bytes = [0u8; 16];
        bytes[..2].copy_from_slice(&300u16.to_ne_bytes());
        bytes[4..8].copy_from_slice(&other.pid.to_ne_bytes());
        assert_eq!(line(|out| write_raw(out, when, &bytes, true)), "2 1 12345 type: 300\n");
    }

    #[test]
    fn hex_prints_fixed_width_words_and_ends_with_an_empty_line() {
        let when = When::at(1, 0x1234);
        assert_eq!(
            line(|out| write_hex(out, when, &function(), true)),
            "00000007 00000001 0000000000001234 0000000000001004 0000000000002000 \n"
        );
        let mut bytes = [0u8; 8];
        bytes[..2].copy_from_slice(&301u16.to_ne_bytes());
        assert_eq!(line(|out| write_hex(out, when, &bytes, false)), "type: 301\n\n");
    }

    #[test]
    fn fields_print_each_own_field_by_its_type() {
        let format = crate::events::record::format_text(
            "probe",
            1000,
            "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:char comm[8];\toffset:16;\tsize:8;\tsigned:0;\n\
             \tfield:int n;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:u16 w;\toffset:28;\tsize:2;\tsigned:0;\n\
             \tfield:u8 c;\toffset:30;\tsize:1;\tsigned:0;\n\
             \tfield:u8 d;\toffset:31;\tsize:1;\tsigned:0;\n\
             \tfield:__data_loc char[] s;\toffset:32;\tsize:4;\tsigned:0;\n\
             \tfield:__data_loc u8[] a;\toffset:36;\tsize:4;\tsigned:0;\n\
             \tfield:u64 big;\toffset:40;\tsize:8;\tsigned:0;\n",
            "\"\"",
        );
        let fields = EventFields::parse(&format).unwrap();
        assert_eq!(fields.fields.len(), 9, "the common fields are left out");
        let mut record = alloc::vec![0u8; 48];
        record[8..16].copy_from_slice(&0x1010u64.to_le_bytes());
        record[16..20].copy_from_slice(b"b\x1bsh");
        record[24..28].copy_from_slice(&(-2i32).to_le_bytes());
        record[28..30].copy_from_slice(&300u16.to_le_bytes());
        record[30] = b'x';
        record[31] = 3;
        record[40..48].copy_from_slice(&25u64.to_le_bytes());
        record.extend_from_slice(b"hey\0");
        record.extend_from_slice(&[1, 0xab]);
        record[32..36].copy_from_slice(&(48u32 | 4 << 16).to_le_bytes());
        record[36..40].copy_from_slice(&(52u32 | 2 << 16).to_le_bytes());
        assert_eq!(
            line(|out| fields.write(out, &record, &names)),
            "probe: __probe_ip=fib+0x10/0x100 (4112) comm=b\\x1bsh n=0xfffffffe (-2) w=0x12c (300) c='x'(120) d=(3) \
             s=hey a=01,ab big=0x19 (25)\n"
        );
        assert_eq!(
            line(|out| fields.write(out, &record[..26], &names)),
            "probe: __probe_ip=fib+0x10/0x100 (4112) comm=b\\x1bsh n=<OVERFLOW> w=<OVERFLOW> c=<OVERFLOW> d=<OVERFLOW> \
             s=<OVERFLOW> a=<OVERFLOW> big=<OVERFLOW>\n",
            "a short record"
        );
    }

    #[test]
    fn the_function_tracers_addresses_are_symbols_alone() {
        let format = &crate::events::record::ftrace_formats()[0].1;
        let fields = EventFields::parse(format).unwrap();
        assert_eq!(line(|out| fields.write(out, &function(), &names)), "function: ip=fib+0x4/0x100 parent_ip=0x2000\n");
        let print = EventFields::parse(&crate::events::record::ftrace_formats()[3].1).unwrap();
        let common = Common { kind: crate::events::record::TRACE_PRINT, ..Common::default() };
        let record = encode_to_vec(print_event_size(b"hi\n"), |out| encode_print(common, PrintWriter::Marker, b"hi\n", out));
        assert_eq!(line(|out| print.write(out, &record, &names)), "print: ip=0x0 (0) buf=hi\n", "the text, one line");
        assert_eq!(EventFields::parse("no name"), None);
    }
}
