//! An event's compiled form: its definition with every name resolved and
//! checked (the symbol, each `%REG` against the save its handlers get, each
//! `$argN`), the record's layout, and the state its tracefs files set
//! (enable, filter, triggers, soft mode). Built once, when the event is
//! defined; the traced path ([`super::record`]) only reads it.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arch::ftrace_abi::{FtraceRegs, RegisterArgument, Saved};
use ftrace::symbols::table::NameError;
use kprobes::KprobeError;
use trace::events::arrays::EventArrays;
use trace::events::filter::{FieldKind, FieldValue, FilterField, FilterSlot};
use trace::events::trigger::{EventSwitch, Triggers};

use super::record::{write_words, Context};
use super::{EventError, MAX_ARG_INDEX};
use crate::definition::{ArgType, EventSpec, ProbeKind, Source};
use crate::layout::{Layout, Value, WordRecord, MAX_RECORD};

/// A fetch source with names resolved.
pub(super) enum Fetch {
    Arg(usize),
    Retval,
    Stack(usize),
    StackPointer,
    /// The current task's name: its address, read as a string.
    Comm,
    Register(usize),
    Memory {
        offset: i64,
        base: Box<Fetch>,
    },
    /// A constant: the address `@ADDR` and `@SYM` read at.
    Immediate(u64),
}

/// A fetch arg the fixed-size record path reads with no fetch interpreter:
/// a register value every save of its kind holds, stored as 8 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Quick {
    /// A register argument of an entry save.
    Arg(RegisterArgument),
    /// Argument `n` the entry kept for an exit event.
    SavedArg(usize),
    /// The return-value register.
    Retval,
}

/// A record of [`Quick`] fetches and the function that writes it.
pub(super) struct Words {
    pub(super) fields: Vec<Quick>,
    pub(super) write: WriteWords,
}

/// Writes a record of `WordRecord`'s shape: the event, its fetches, the ips
/// (`[ip, 0]` at entry, `[func, ret_ip]` at exit) and where to fetch from.
pub(super) type WriteWords = fn(&Compiled, &[Quick], [u64; 2], &Context);

/// The most fields an event written by [`write_words`] has.
const MAX_WORD_FIELDS: usize = 6;

/// What the handlers need: immutable once built.
pub(super) struct Compiled {
    pub(super) id: u16,
    pub(super) event: String,
    pub(super) layout: Layout,
    pub(super) fetches: Vec<(Fetch, ArgType)>,
    /// The fetches as [`Quick`] ones, and the writer made for the record's
    /// shape, when every fetch can be one (the usual `$argN`/`$retval`
    /// event, up to [`MAX_WORD_FIELDS`] of them).
    pub(super) words: Option<Words>,
    /// Whether a fetch arg is a string (records of varying size) or an
    /// array: the record is built from values fetched first.
    pub(super) by_values: bool,
    pub(super) exit: bool,
    /// `events/GRP/EVENT/filter`.
    pub(super) filter: FilterSlot,
    /// `events/GRP/EVENT/trigger`.
    pub(super) triggers: Triggers,
    /// `instances/NAME/events/GRP/EVENT/{enable,filter}`: the instances it
    /// records into, with their filters.
    pub(super) arrays: EventArrays,
    /// `events/GRP/EVENT/enable`.
    pub(super) enabled: AtomicBool,
    /// Soft mode: another event's `enable_event`/`disable_event` trigger
    /// names this one. It is armed, and records while `soft_on` (not as
    /// `enabled` says), as Linux's soft mode.
    pub(super) soft_mode: AtomicBool,
    /// The switch those triggers flip from their event's hit path; `enable`
    /// writes set it too.
    pub(super) soft_on: AtomicBool,
    /// Whether a hit takes the short path: enabled, with no strings, no
    /// filter, no trigger, in no instance and not in soft mode (set by [`super::refresh_fast`]
    /// under the events' lock whenever one of those changes).
    pub(super) fast: AtomicBool,
    /// Times a handler recorded or tried to (`kprobe_profile`'s hits).
    pub(super) hits: AtomicU64,
}

impl Compiled {
    /// The fields a filter can name: `common_pid`, the probe's addresses,
    /// then the fetch args (what `format` lists, in that order).
    pub(super) fn filter_fields(&self) -> Vec<FilterField> {
        let ips: &[&str] = if self.exit { &["__probe_func", "__probe_ret_ip"] } else { &["__probe_ip"] };
        let mut fields = alloc::vec![FilterField::new("common_pid", FieldKind::Signed)];
        fields.extend(ips.iter().map(|name| FilterField::new(*name, FieldKind::Unsigned)));
        fields.extend(self.layout.fields.iter().map(|field| {
            let kind = match field.ty {
                _ if field.count > 0 => FieldKind::Array,
                ArgType::Signed(_) => FieldKind::Signed,
                ArgType::String | ArgType::SymStr => FieldKind::String,
                _ => FieldKind::Unsigned,
            };
            FilterField::new(field.name.clone(), kind)
        }));
        fields
    }
}

/// A fetched value as a filter sees it: cut to the field's size (and
/// sign-extended for a signed one), as the record will hold it.
pub(super) fn filter_value<'a>(ty: ArgType, value: Value<'a>) -> FieldValue<'a> {
    let bits = |bits: u8| if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    match (ty, value) {
        (_, Value::Fault) => FieldValue::Missing,
        (_, Value::Str(bytes)) => FieldValue::Str(bytes),
        // An array compares with nothing (Linux's filters take no arrays).
        (_, Value::Array(_)) => FieldValue::Missing,
        (ArgType::Signed(n), Value::Int(v)) => {
            let shift = 64 - u32::from(n.min(64));
            FieldValue::Signed(((v << shift) as i64) >> shift)
        }
        (ArgType::Unsigned(n) | ArgType::Hex(n), Value::Int(v)) => FieldValue::Unsigned(v & bits(n)),
        (ArgType::Char, Value::Int(v)) => FieldValue::Unsigned(v & bits(8)),
        (_, Value::Int(v)) => FieldValue::Unsigned(v),
    }
}

fn compile_source(source: &Source, saved: Saved) -> Result<Fetch, EventError> {
    Ok(match source {
        Source::Arg(n) if *n > MAX_ARG_INDEX => return Err(EventError::ArgOutOfRange(*n)),
        Source::Arg(n) => Fetch::Arg(n - 1),
        Source::Retval => Fetch::Retval,
        Source::Stack(n) => Fetch::Stack(*n),
        Source::StackPointer => Fetch::StackPointer,
        Source::Comm => Fetch::Comm,
        Source::Register(name) => Fetch::Register(
            FtraceRegs::query_register_offset_in(saved, name).map_err(|why| EventError::Register { name: name.clone(), why })?,
        ),
        Source::Memory { offset, base } => Fetch::Memory { offset: *offset, base: Box::new(compile_source(base, saved)?) },
        Source::Address(address) => Fetch::Memory { offset: 0, base: Box::new(Fetch::Immediate(*address)) },
        Source::Symbol { name, offset } => {
            let table = ftrace::symbols::kernel::table().map_err(|_| EventError::UnknownSymbol(name.clone()))?;
            // A static first (what `@SYM` is for), else any function, as
            // Linux looks `SYM` up among every kernel symbol.
            let symbol = match table.resolve_data(name) {
                Err(NameError::Unknown(_)) => table.resolve(name),
                found => found,
            }
            .map_err(EventError::Name)?;
            Fetch::Memory { offset: *offset, base: Box::new(Fetch::Immediate(symbol.address as u64)) }
        }
    })
}

/// Where an event's probe goes, checked: the address, which save its
/// handlers see, and whether `$argN` means anything there (at a function's
/// entry, or its exit, which gets the entry's arguments).
fn place_of(spec: &EventSpec) -> Result<(usize, Saved, bool), EventError> {
    let kprobe_place = |location| kprobes::probe::resolve(location).map_err(EventError::Kprobe);
    match &spec.kind {
        ProbeKind::Fprobe => {
            let table = ftrace::symbols::kernel::table().map_err(|_| EventError::UnknownSymbol(spec.symbol.clone()))?;
            let symbol = table.resolve(&spec.symbol).map_err(EventError::Name)?;
            if ftrace::site(symbol.address).is_none_or(|site| site.failed) {
                return Err(EventError::NotTraceable(spec.symbol.clone()));
            }
            Ok((symbol.address, if spec.exit { Saved::Return } else { Saved::EntryArgs }, true))
        }
        ProbeKind::Kprobe(location) => {
            let place = kprobe_place(location)?;
            // The instruction must be one a probe can run (decoded now, so
            // a bad one is refused at definition, as Linux does).
            if !place.at_entry {
                kprobes::probe::instruction_at(place.address).map_err(|why| {
                    EventError::Kprobe(KprobeError::Instruction { function: place.function.into(), offset: place.offset, why })
                })?;
            }
            Ok((place.address, Saved::EntryFull, place.at_entry))
        }
        ProbeKind::Kretprobe { location, .. } => {
            let place = kprobe_place(location)?;
            if !place.at_entry {
                return Err(EventError::Kprobe(KprobeError::NotAtEntry {
                    function: place.function.into(),
                    offset: place.offset,
                }));
            }
            Ok((place.address, Saved::ReturnFull, true))
        }
    }
}

pub(super) fn compile(spec: &EventSpec) -> Result<(usize, Compiled), EventError> {
    let (address, saved, args_mean_arguments) = place_of(spec)?;
    if !args_mean_arguments && spec.args.iter().any(|arg| arg.source.fetches_an_argument()) {
        return Err(EventError::ArgsOffEntry);
    }
    let fetches =
        spec.args.iter().map(|arg| Ok((compile_source(&arg.source, saved)?, arg.ty))).collect::<Result<Vec<_>, EventError>>()?;
    let layout = Layout::new(spec);
    // Each string takes at least its NUL after the fixed part.
    let smallest = layout.fixed_size + fetches.iter().filter(|(_, ty)| ty.is_string()).count();
    if smallest > MAX_RECORD {
        return Err(EventError::RecordTooLarge(smallest));
    }
    let by_values = fetches.iter().any(|(_, ty)| ty.is_string()) || layout.fields.iter().any(|field| field.count > 0);
    let words = if by_values { None } else { word_fetches(&fetches, &layout, spec.exit) };
    let compiled = Compiled {
        id: 0,
        event: spec.event.clone(),
        layout,
        fetches,
        words,
        by_values,
        exit: spec.exit,
        filter: FilterSlot::new(),
        triggers: Triggers::new(),
        arrays: EventArrays::new(),
        enabled: AtomicBool::new(false),
        soft_mode: AtomicBool::new(false),
        soft_on: AtomicBool::new(false),
        fast: AtomicBool::new(false),
        hits: AtomicU64::new(0),
    };
    Ok((address, compiled))
}

/// The fetches as [`Quick`] ones and their record's writer, if every one
/// is an 8-byte register argument or the return value, and a writer is
/// made for their number.
fn word_fetches(fetches: &[(Fetch, ArgType)], layout: &Layout, exit: bool) -> Option<Words> {
    let fields = fetches
        .iter()
        .map(|(fetch, ty)| match *fetch {
            // A bitfield's bits are taken out after the fetch.
            _ if ty.size() != 8 || matches!(ty, ArgType::Bitfield { .. }) => None,
            Fetch::Arg(n) if exit => Some(Quick::SavedArg(n)),
            Fetch::Arg(n) => Some(Quick::Arg(RegisterArgument::new(n)?)),
            Fetch::Retval => Some(Quick::Retval),
            _ => None,
        })
        .collect::<Option<Vec<Quick>>>()?;
    let write = if exit { word_writer::<true>(fields.len(), layout)? } else { word_writer::<false>(fields.len(), layout)? };
    Some(Words { fields, write })
}

/// The writer for records of `fields` word fields, if `layout` is their
/// shape.
fn word_writer<const EXIT: bool>(fields: usize, layout: &Layout) -> Option<WriteWords> {
    fn shaped<const EXIT: bool, const N: usize>(layout: &Layout) -> Option<WriteWords> {
        WordRecord::<EXIT, N>::fits(layout).then_some(write_words::<EXIT, N> as WriteWords)
    }
    const _: () = assert!(MAX_WORD_FIELDS == 6, "one arm below per field count");
    match fields {
        0 => shaped::<EXIT, 0>(layout),
        1 => shaped::<EXIT, 1>(layout),
        2 => shaped::<EXIT, 2>(layout),
        3 => shaped::<EXIT, 3>(layout),
        4 => shaped::<EXIT, 4>(layout),
        5 => shaped::<EXIT, 5>(layout),
        6 => shaped::<EXIT, 6>(layout),
        _ => None,
    }
}

impl Compiled {
    /// Whether a hit records: as `enable` says, or in soft mode as the
    /// triggers' switch says.
    pub(super) fn records(&self) -> bool {
        match self.soft_mode.load(Ordering::Acquire) {
            true => self.soft_on.load(Ordering::Relaxed),
            false => self.enabled.load(Ordering::Relaxed),
        }
    }
}

impl EventSwitch for Compiled {
    fn soft_on(&self) -> bool {
        self.soft_on.load(Ordering::Relaxed)
    }

    fn set_soft(&self, on: bool) {
        self.soft_on.store(on, Ordering::Relaxed);
    }
}

pub(super) fn fetch_uses_args(fetch: &Fetch) -> bool {
    match fetch {
        Fetch::Arg(_) => true,
        Fetch::Memory { base, .. } => fetch_uses_args(base),
        _ => false,
    }
}

pub(super) fn write_format_of(compiled: &Compiled, out: &mut dyn Write) -> fmt::Result {
    let layout = &compiled.layout;
    writeln!(out, "name: {}", compiled.event)?;
    writeln!(out, "ID: {}", compiled.id)?;
    writeln!(out, "format:")?;
    writeln!(out, "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;")?;
    writeln!(out, "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;")?;
    writeln!(out, "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;")?;
    writeln!(out, "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;")?;
    writeln!(out)?;
    if layout.exit {
        writeln!(out, "\tfield:unsigned long __probe_func;\toffset:{};\tsize:8;\tsigned:0;", Layout::IP)?;
        writeln!(out, "\tfield:unsigned long __probe_ret_ip;\toffset:{};\tsize:8;\tsigned:0;", Layout::RET_IP)?;
    } else {
        writeln!(out, "\tfield:unsigned long __probe_ip;\toffset:{};\tsize:8;\tsigned:0;", Layout::IP)?;
    }
    writeln!(out, "\tfield:unsigned int __probe_faults;\toffset:{};\tsize:4;\tsigned:0;", layout.faults_offset())?;
    for field in &layout.fields {
        let (c_type, signed) = match field.ty {
            ArgType::Unsigned(bits) | ArgType::Hex(bits) | ArgType::Bitfield { container: bits, .. } => (format!("u{bits}"), 0),
            ArgType::Signed(bits) => (format!("s{bits}"), 1),
            // Linux's symbol is an alias of the address-sized unsigned
            // type, and its format says so (`u64`).
            ArgType::Symbol => (format!("u{}", usize::BITS), 0),
            ArgType::String | ArgType::SymStr => ("__data_loc char[]".to_string(), 0),
            // Linux's char is an alias of u8, and its format says so.
            ArgType::Char => ("u8".to_string(), 0),
        };
        // An array's brackets after its name: empty, as Linux prints a
        // probe's array (defined without a length; the size says it).
        let array = if field.count > 0 { "[]" } else { "" };
        writeln!(
            out,
            "\tfield:{c_type} {}{array};\toffset:{};\tsize:{};\tsigned:{signed};",
            field.name,
            field.offset,
            field.size()
        )?;
    }
    writeln!(out)?;
    // The place as `trace` prints it, so that trace-cmd's report of an
    // exported trace reads the same (Linux's says `(%lx)` and `(%lx <-
    // %lx)`, the function first: its reports show bare hex there).
    let mut fmt_text = String::from(if layout.exit { "(%pS <- %ps)" } else { "(%pS)" });
    let mut fmt_args = String::from(if layout.exit {
        "(void *)REC->__probe_ret_ip, (void *)REC->__probe_func"
    } else {
        "(void *)REC->__probe_ip"
    });
    for field in &layout.fields {
        // Each type's format, as Linux's fetch types print it.
        let spec = match field.ty {
            ArgType::Unsigned(64) | ArgType::Bitfield { container: 64, .. } => "%Lu",
            ArgType::Unsigned(_) | ArgType::Bitfield { .. } => "%u",
            ArgType::Char => "'%c'",
            ArgType::Signed(64) => "%Ld",
            ArgType::Signed(_) => "%d",
            ArgType::Hex(64) => "0x%Lx",
            ArgType::Hex(_) => "0x%x",
            ArgType::Symbol => "%pS",
            ArgType::String | ArgType::SymStr => "\\\"%s\\\"",
        };
        if field.count > 0 {
            // `{%x,%x,...}` and each value, as Linux's arrays.
            let specs: Vec<&str> = (0..field.count).map(|_| spec).collect();
            let _ = write!(fmt_text, " {}={{{}}}", field.name, specs.join(","));
            for j in 0..field.count {
                let _ = write!(fmt_args, ", REC->{}[{j}]", field.name);
            }
            continue;
        }
        let _ = write!(fmt_text, " {}={spec}", field.name);
        let _ = match field.ty {
            ArgType::String | ArgType::SymStr => write!(fmt_args, ", __get_str({})", field.name),
            _ => write!(fmt_args, ", REC->{}", field.name),
        };
    }
    writeln!(out, "print fmt: \"{fmt_text}\", {fmt_args}")
}
