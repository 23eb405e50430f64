//! The layout of the record an fprobe event writes into the trace buffer,
//! and how `cat trace` prints it.
//!
//! Layout (Linux's, field by field, no padding): the common `trace_entry`
//! header; `__probe_ip` (entry events) or `__probe_func` and `__probe_ret_ip`
//! (exit events); `__probe_faults`, one bit per fetch arg whose memory read
//! faulted; then each fetch arg at its own size (a string as a `__data_loc`
//! word: length << 16 | offset; an array as its values one after another),
//! then the strings' bytes, NUL-terminated.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use ring_buffer::payload::Payload;
use trace::events::record::{Common, COMMON_SIZE};
use trace::output::{write_code_address, write_sym_addr, write_symbol, Namer};

use crate::definition::{ArgType, EventSpec};

/// The longest string a fetch arg records (without its NUL).
pub const MAX_STRING: usize = 128;
/// The largest record.
pub const MAX_RECORD: usize = 1024;

/// One fetch arg's place in the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: ArgType,
    /// An array's number of values (`:TYPE[N]`); 0 for one value.
    pub count: usize,
    pub offset: usize,
}

impl Field {
    /// Bytes the field takes in the record.
    pub fn size(&self) -> usize {
        self.ty.size() * self.count.max(1)
    }
}

/// Where everything is in an event's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub exit: bool,
    pub fields: Vec<Field>,
    /// The fixed part's size; strings' bytes follow it.
    pub fixed_size: usize,
}

/// A fetched value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Int(u64),
    /// String bytes (no NUL).
    Str(&'a [u8]),
    /// An array's values, as memory held them.
    Array(&'a [u8]),
    /// The memory read faulted.
    Fault,
}

impl Layout {
    /// Offset of `__probe_ip` (entry) / `__probe_func` (exit).
    pub const IP: usize = COMMON_SIZE;
    /// Offset of `__probe_ret_ip` (exit only).
    pub const RET_IP: usize = COMMON_SIZE + 8;
    /// The smallest record: the header, an ip and the faults word.
    pub const SMALLEST: usize = Self::IP + 8 + 4;

    /// The offset of `__probe_faults`.
    pub fn faults_offset(&self) -> usize {
        COMMON_SIZE + if self.exit { 16 } else { 8 }
    }

    /// The layout for `spec`'s records.
    pub fn new(spec: &EventSpec) -> Layout {
        let mut layout = Layout { exit: spec.exit, fields: Vec::new(), fixed_size: 0 };
        let mut offset = layout.faults_offset() + 4;
        for arg in &spec.args {
            let field = Field { name: arg.name.clone(), ty: arg.ty, count: arg.count, offset };
            offset += field.size();
            layout.fields.push(field);
        }
        layout.fixed_size = offset;
        layout
    }

    /// Writes a record into `out`; returns its length (0 if it does not fit).
    /// `ips` is `[ip]` for entry events, `[func, ret_ip]` for exit events.
    pub fn encode(&self, common: Common, ips: &[u64], values: &[Value], out: &mut [u8]) -> usize {
        let strings: usize = values.iter().map(|v| if let Value::Str(s) = v { s.len().min(MAX_STRING) + 1 } else { 0 }).sum();
        let total = self.fixed_size + strings;
        if total > out.len() || values.len() != self.fields.len() {
            return 0;
        }
        out[..total].fill(0);
        out[0..2].copy_from_slice(&common.kind.to_ne_bytes());
        out[2] = common.flags;
        out[3] = common.preempt_count;
        out[4..8].copy_from_slice(&common.pid.to_ne_bytes());
        for (i, ip) in ips.iter().take(if self.exit { 2 } else { 1 }).enumerate() {
            out[Self::IP + 8 * i..Self::IP + 8 * i + 8].copy_from_slice(&ip.to_ne_bytes());
        }
        let mut faults = 0u32;
        let mut data_at = self.fixed_size;
        for (i, (field, value)) in self.fields.iter().zip(values).enumerate() {
            let at = field.offset;
            match (field.ty, value) {
                (_, Value::Fault) => faults |= 1 << i,
                (ArgType::String | ArgType::SymStr, Value::Str(bytes)) => {
                    let len = bytes.len().min(MAX_STRING);
                    out[data_at..data_at + len].copy_from_slice(&bytes[..len]);
                    let loc = ((len as u32 + 1) << 16) | data_at as u32;
                    out[at..at + 4].copy_from_slice(&loc.to_ne_bytes());
                    data_at += len + 1;
                }
                (_, Value::Array(bytes)) if bytes.len() == field.size() => out[at..at + bytes.len()].copy_from_slice(bytes),
                (ty, Value::Int(v)) if field.count == 0 => {
                    let size = ty.size();
                    out[at..at + size].copy_from_slice(&v.to_ne_bytes()[..size]);
                }
                (_, Value::Int(_) | Value::Array(_)) => faults |= 1 << i,
                (_, Value::Str(_)) => faults |= 1 << i,
            }
        }
        let at = self.faults_offset();
        out[at..at + 4].copy_from_slice(&faults.to_ne_bytes());
        total
    }

    /// Writes the fields of a record without strings into `out`, after
    /// [`encode_head`](Self::encode_head), taking field `i`'s value from
    /// `value(&sources[i], type)` (`None`: the read faulted). The traced
    /// path's encoder: no values array to build first, nothing to copy
    /// after.
    #[inline]
    pub fn encode_numbers<S>(&self, sources: &[S], mut value: impl FnMut(&S, ArgType) -> Option<u64>, out: &mut Payload) {
        let mut faults = 0u32;
        for (i, (field, source)) in self.fields.iter().zip(sources).enumerate() {
            let v = value(source, field.ty).unwrap_or_else(|| {
                faults |= 1 << i;
                0
            });
            let at = field.offset;
            // Each size its own store (a copy of a run-time length would
            // call memcpy for a few bytes).
            match field.ty.size() {
                1 => out.put_u8(at, v as u8),
                2 => out.put_u16(at, v as u16),
                4 => out.put_u32(at, v as u32),
                _ => out.put_u64(at, v),
            }
        }
        out.put_u32(self.faults_offset(), faults);
    }

    /// Writes the header and the ips of a record without strings into
    /// `out` ([`fixed_size`](Self::fixed_size) bytes; `false` if it is
    /// shorter than any record). The fields follow with
    /// [`encode_numbers`](Self::encode_numbers).
    #[inline(always)]
    pub fn encode_head(&self, common: Common, ips: &[u64], out: &mut Payload) -> bool {
        debug_assert_eq!(out.len(), self.fixed_size);
        // Every record has the header, an ip and the faults word: one test
        // of the length covers their stores (each put tests its own bounds
        // against the run-time length otherwise).
        if out.len() < Self::SMALLEST {
            return false;
        }
        common.encode(out);
        out.put_u64(Self::IP, ips.first().copied().unwrap_or(0));
        if self.exit && out.len() >= Self::RET_IP + 8 {
            out.put_u64(Self::RET_IP, ips.get(1).copied().unwrap_or(0));
        }
        true
    }

    /// Prints a record as Linux does:
    /// `EVENT: (fib+0x0/0x60) n=0x5` or `EVENT: (run+0x1c/0x80 <- fib) n=0x5 ret=0x5`;
    /// with `sym_addr` (`options/sym-addr`) each address's value follows
    /// its name: `(fib+0x0/0x60 <0000000040228778>)`.
    pub fn write(&self, event: &str, payload: &[u8], names: Namer, sym_addr: bool, out: &mut dyn Write) -> fmt::Result {
        let word = |at: usize| payload.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
        let value = |out: &mut dyn Write, at: usize| if sym_addr { write_sym_addr(out, word(at)) } else { Ok(()) };
        write!(out, "{event}: (")?;
        if self.exit {
            write_code_address(out, word(Self::RET_IP) as usize, names)?;
            value(out, Self::RET_IP)?;
            out.write_str(" <- ")?;
            write_symbol(out, word(Self::IP) as usize, names)?;
            value(out, Self::IP)?;
        } else {
            write_code_address(out, word(Self::IP) as usize, names)?;
            value(out, Self::IP)?;
        }
        out.write_char(')')?;
        let faults_at = self.faults_offset();
        let faults = payload.get(faults_at..faults_at + 4).map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap()));
        for (i, field) in self.fields.iter().enumerate() {
            write!(out, " {}=", field.name)?;
            if faults & (1 << i) != 0 {
                out.write_str("(fault)")?;
                continue;
            }
            if field.count == 0 {
                write_value(out, field.ty, payload, field.offset, names)?;
                continue;
            }
            // An array, as Linux prints one: `{v0,v1,...}`.
            out.write_char('{')?;
            for j in 0..field.count {
                if j > 0 {
                    out.write_char(',')?;
                }
                write_value(out, field.ty, payload, field.offset + j * field.ty.size(), names)?;
            }
            out.write_char('}')?;
        }
        Ok(())
    }
}

/// Prints one value of type `ty` kept at `offset` in `payload` (a
/// string's `__data_loc` word there, its bytes where that says).
fn write_value(out: &mut dyn Write, ty: ArgType, payload: &[u8], offset: usize, names: Namer) -> fmt::Result {
    let raw = |size: usize| {
        let mut bytes = [0u8; 8];
        if let Some(src) = payload.get(offset..offset + size) {
            bytes[..size].copy_from_slice(src);
        }
        u64::from_ne_bytes(bytes)
    };
    match ty {
        ArgType::Unsigned(bits) | ArgType::Bitfield { container: bits, .. } => write!(out, "{}", raw(usize::from(bits / 8))),
        ArgType::Char => match raw(1) as u8 {
            byte if byte.is_ascii_graphic() || byte == b' ' => write!(out, "'{}'", byte as char),
            byte => write!(out, "'\\x{byte:02x}'"),
        },
        ArgType::Signed(bits) => {
            let shift = 64 - u32::from(bits);
            write!(out, "{}", ((raw(usize::from(bits / 8)) << shift) as i64) >> shift)
        }
        ArgType::Hex(bits) => write!(out, "{:#x}", raw(usize::from(bits / 8))),
        ArgType::Symbol => write_code_address(out, raw(8) as usize, names),
        ArgType::String | ArgType::SymStr => {
            let loc = raw(4) as u32;
            let (start, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            let bytes = payload.get(start..start + len.saturating_sub(1)).unwrap_or(b"");
            out.write_char('"')?;
            for &byte in bytes {
                if byte.is_ascii_graphic() || byte == b' ' {
                    out.write_char(byte as char)?;
                } else {
                    write!(out, "\\x{byte:02x}")?;
                }
            }
            out.write_char('"')
        }
    }
}

/// The record of an event whose fields are all 8-byte numbers, with its
/// shape (an exit event or not, `N` fields) known at build time: sizes and
/// offsets are constants, so each field is one store with no bounds test,
/// and there is no per-field dispatch. The bytes are
/// [`Layout::encode`]'s for the same record.
pub struct WordRecord<const EXIT: bool, const N: usize>;

impl<const EXIT: bool, const N: usize> WordRecord<EXIT, N> {
    /// The offset of `__probe_faults`.
    pub const FAULTS: usize = Layout::IP + if EXIT { 16 } else { 8 };
    /// The record's size.
    pub const SIZE: usize = Self::FAULTS + 4 + 8 * N;

    /// Whether `layout`'s records have this shape.
    pub fn fits(layout: &Layout) -> bool {
        layout.exit == EXIT
            && layout.fixed_size == Self::SIZE
            && layout.fields.len() == N
            && layout.fields.iter().enumerate().all(|(i, field)| {
                !field.ty.is_string() && field.count == 0 && field.ty.size() == 8 && field.offset == Self::FAULTS + 4 + 8 * i
            })
    }

    /// Writes the record into `out` ([`SIZE`](Self::SIZE) bytes), taking
    /// field `i`'s value from `value(i)` (`None`: the read faulted). `ips`
    /// is `[ip, 0]` for entry events, `[func, ret_ip]` for exit events.
    #[inline(always)]
    pub fn encode(common: Common, ips: [u64; 2], mut value: impl FnMut(usize) -> Option<u64>, out: &mut Payload) {
        common.encode(out);
        out.put_u64(Layout::IP, ips[0]);
        if EXIT {
            out.put_u64(Layout::RET_IP, ips[1]);
        }
        let mut faults = 0u32;
        for i in 0..N {
            let v = value(i).unwrap_or_else(|| {
                faults |= 1 << i;
                0
            });
            out.put_u64(Self::FAULTS + 4 + 8 * i, v);
        }
        out.put_u32(Self::FAULTS, faults);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::{parse, Command};

    fn layout(line: &str) -> Layout {
        match parse(line).unwrap() {
            Command::Define(spec) => Layout::new(&spec),
            other => panic!("{other:?}"),
        }
    }

    use ftrace::symbols::table::Symbol;

    fn names(address: usize) -> Option<Symbol<'static>> {
        [
            Symbol { name: "kernel::workload::fib", address: 0x1000, size: 0x60 },
            Symbol { name: "kernel::workload::run", address: 0x2000, size: 0x80 },
        ]
        .into_iter()
        .find(|symbol| symbol.contains(address))
    }

    #[test]
    fn entry_and_exit_records_print_as_linux() {
        let common = Common { kind: 1001, ..Common::default() };
        let entry = layout("f:fibent kernel::workload::fib n=$arg1");
        let mut buf = [0u8; MAX_RECORD];
        let len = entry.encode(common, &[0x1000], &[Value::Int(5)], &mut buf);
        assert_eq!(len, 8 + 8 + 4 + 8);
        let mut text = String::new();
        entry.write("fibent", &buf[..len], &names, false, &mut text).unwrap();
        assert_eq!(text, "fibent: (kernel::workload::fib+0x0/0x60) n=0x5");

        let exit = layout("f:fibret kernel::workload::fib%return n=$arg1 ret=$retval");
        let len = exit.encode(common, &[0x1000, 0x201c], &[Value::Int(5), Value::Int(5)], &mut buf);
        let mut text = String::new();
        exit.write("fibret", &buf[..len], &names, false, &mut text).unwrap();
        assert_eq!(text, "fibret: (kernel::workload::run+0x1c/0x80 <- kernel::workload::fib) n=0x5 ret=0x5");
    }

    #[test]
    fn sym_addr_follows_each_address_with_its_value() {
        let common = Common { kind: 1001, ..Common::default() };
        let mut buf = [0u8; MAX_RECORD];
        let entry = layout("f:fibent kernel::workload::fib n=$arg1");
        let len = entry.encode(common, &[0x1000], &[Value::Int(5)], &mut buf);
        let mut text = String::new();
        entry.write("fibent", &buf[..len], &names, true, &mut text).unwrap();
        assert_eq!(text, "fibent: (kernel::workload::fib+0x0/0x60 <0000000000001000>) n=0x5");

        let exit = layout("f:fibret kernel::workload::fib%return");
        let len = exit.encode(common, &[0x1000, 0x201c], &[], &mut buf);
        let mut text = String::new();
        exit.write("fibret", &buf[..len], &names, true, &mut text).unwrap();
        assert_eq!(
            text,
            "fibret: (kernel::workload::run+0x1c/0x80 <000000000000201c> <- kernel::workload::fib <0000000000001000>)"
        );
    }

    #[test]
    fn types_strings_symbols_and_faults() {
        let l = layout(
            "f:e s a=$arg1:u8 b=$arg1:s16 c=$arg1:x32 d=+0($arg1):string e=$arg1:symbol f=+0($arg1):u64 g=+0($arg2):string",
        );
        let values = [
            Value::Int(0x1ff),
            Value::Int(0xfffe),
            Value::Int(0xdead_beef),
            Value::Str(b"hello\n"),
            Value::Int(0x1004),
            Value::Fault,
            Value::Fault,
        ];
        let mut buf = [0u8; MAX_RECORD];
        let len = l.encode(Common::default(), &[0x1000], &values, &mut buf);
        assert!(len > 0);
        let mut text = String::new();
        l.write("e", &buf[..len], &names, false, &mut text).unwrap();
        assert_eq!(
            text,
            "e: (kernel::workload::fib+0x0/0x60) a=255 b=-2 c=0xdeadbeef d=\"hello\\x0a\" e=kernel::workload::fib+0x4/0x60 f=(fault) g=(fault)"
        );
    }

    #[test]
    fn arrays_take_their_values_in_a_row_and_print_in_braces() {
        let l = layout("f:e s a=+0($arg1):x8[4] b=+0($arg2):s16[2] n=$arg3:u8 c=+0($arg1):symbol[2]");
        assert_eq!(l.fields.iter().map(Field::size).collect::<Vec<_>>(), [4, 4, 1, 16]);
        assert_eq!(l.fields[1].offset, l.fields[0].offset + 4);
        let a = [1u8, 0x22, 0xff, 0];
        let b = [(-2i16).to_ne_bytes(), 300i16.to_ne_bytes()].concat();
        let c = [0x1004u64.to_ne_bytes(), 0x2000u64.to_ne_bytes()].concat();
        let values = [Value::Array(&a), Value::Array(&b), Value::Int(7), Value::Array(&c)];
        let mut buf = [0u8; MAX_RECORD];
        let len = l.encode(Common::default(), &[0x1000], &values, &mut buf);
        assert_eq!(len, l.fixed_size);
        let mut text = String::new();
        l.write("e", &buf[..len], &names, false, &mut text).unwrap();
        let symbols = "{kernel::workload::fib+0x4/0x60,kernel::workload::run+0x0/0x80}";
        assert_eq!(
            text,
            alloc::format!("e: (kernel::workload::fib+0x0/0x60) a={{0x1,0x22,0xff,0x0}} b={{-2,300}} n=7 c={symbols}")
        );
        // A short array or a number in an array's place is a fault, not a
        // record with bytes from nowhere.
        let values = [Value::Array(&a[..3]), Value::Int(1), Value::Int(7), Value::Fault];
        let len = l.encode(Common::default(), &[0x1000], &values, &mut buf);
        let mut text = String::new();
        l.write("e", &buf[..len], &names, false, &mut text).unwrap();
        assert!(text.ends_with(" a=(fault) b=(fault) n=7 c=(fault)"), "{text}");
    }

    /// The shaped encoder writes the general encoder's bytes, faults and
    /// all, and claims only the layouts of its shape.
    #[test]
    fn word_records_match_the_general_encoder() {
        fn check<const EXIT: bool, const N: usize>(line: &str, ips: [u64; 2], values: &[Value]) {
            let l = layout(line);
            assert!(WordRecord::<EXIT, N>::fits(&l), "{line}");
            let mut general = [0u8; MAX_RECORD];
            let len = l.encode(Common { kind: 7, flags: 1, preempt_count: 2, pid: 3 }, &ips, values, &mut general);
            assert_eq!(len, WordRecord::<EXIT, N>::SIZE);
            let common = Common { kind: 7, flags: 1, preempt_count: 2, pid: 3 };
            let shaped = ring_buffer::payload::encode_to_vec(len, |out| {
                WordRecord::<EXIT, N>::encode(
                    common,
                    ips,
                    |i| match values[i] {
                        Value::Int(v) => Some(v),
                        _ => None,
                    },
                    out,
                )
            });
            assert_eq!(&general[..len], &shaped[..], "{line}");
        }
        check::<false, 0>("f:e s", [0x1000, 0], &[]);
        check::<false, 2>("f:e s a=$arg1 b=$arg2:x64", [0x1000, 0], &[Value::Int(5), Value::Fault]);
        check::<true, 1>("f:r s%return r=$retval", [0x1000, 0x2000], &[Value::Int(u64::MAX)]);
        check::<true, 3>(
            "f:r s%return a=$arg1:s64 b=$arg2:symbol r=$retval",
            [1, 2],
            &[Value::Fault, Value::Int(9), Value::Int(4)],
        );

        assert!(!WordRecord::<false, 1>::fits(&layout("f:e s a=$arg1:u32")), "a 4-byte field");
        assert!(!WordRecord::<true, 1>::fits(&layout("f:e s a=$arg1")), "an entry event");
        assert!(!WordRecord::<false, 2>::fits(&layout("f:e s a=$arg1")), "one field, not two");
        assert!(!WordRecord::<false, 1>::fits(&layout("f:e s a=+0($arg1):string")), "a string");
    }

    #[test]
    fn records_that_do_not_fit_are_refused() {
        let l = layout("f:e s d=+0($arg1):string");
        let mut small = [0u8; 16];
        assert_eq!(l.encode(Common::default(), &[0], &[Value::Str(b"x")], &mut small), 0);
    }
}
