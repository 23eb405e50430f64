//! The dynamic probe event language, as Linux's `dynamic_events` and
//! `kprobe_events` take it:
//!
//! ```text
//! f[:[GRP/][EVENT]] SYM [FETCHARGS]                  an fprobe entry event
//! f[:[GRP/][EVENT]] SYM%return [FETCHARGS]           an fprobe exit event
//! p[:[GRP/][EVENT]] SYM[+OFFS]|ADDR [FETCHARGS]      a kprobe event
//! r[MAXACTIVE][:[GRP/][EVENT]] SYM[+0] [FETCHARGS]   a kretprobe event
//! -:[GRP/]EVENT                                      remove an event
//! ```
//!
//! `kprobe_events` takes only `p`, `r` and `-` ([`Syntax::Kprobe`]).
//!
//! Fetch args: `$argN` (1-based; also at exit), `$retval` (exit only),
//! `$stackN`, `$stack`, `$comm` (or `$COMM`), `%REG`, `+|-OFFS(FETCHARG)` (memory at the
//! address), `@ADDR` and `@SYM[+|-OFFS]` (memory at an address, or at a
//! static's or a function's), each optionally `NAME=` before and `:TYPE` after (`u8`..`u64`,
//! `s8`..`s64`, `x8`..`x64`, `string`, `symbol`, `symstr`, `char`,
//! `b<width>@<offset>/<size>`; `x64` by default; `TYPE[N]` for N values in a
//! row, on a memory fetch). A definition's name may be `GRP.EVENT` too (a
//! removal's only `GRP/EVENT`). The group defaults to
//! `fprobes`, the event to `SYM__entry` / `SYM__exit` (made a valid name);
//! for kprobes to `kprobes` and `p_SYM_OFFS` / `r_SYM_OFFS`, as Linux.
//!
//! Parsing checks only the text; whether the symbol and registers exist is
//! checked when the event is created. Every refusal is a [`DefinitionError`].

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use ftrace::number::{c_digits as c_number, c_long};

pub use kprobes::location::{Location, LocationError};

/// The default event group.
pub const DEFAULT_GROUP: &str = "fprobes";
/// The default group of kprobe and kretprobe events.
pub const KPROBE_GROUP: &str = "kprobes";
/// The longest definition accepted.
pub const MAX_DEFINITION: usize = 480;
/// The most fetch args an event may have.
pub const MAX_ARGS: usize = 16;
/// The deepest `+OFFS(...)` nesting.
pub const MAX_DEREF: usize = 4;

/// Where a fetch arg's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `$argN`: argument N (1-based, as Linux).
    Arg(usize),
    /// `$retval`.
    Retval,
    /// `$stackN`: the Nth word on the stack.
    Stack(usize),
    /// `$stack`: the stack pointer.
    StackPointer,
    /// `$comm`: the current task's name (a string).
    Comm,
    /// `%REG`.
    Register(String),
    /// `+OFFS(BASE)`: memory at `BASE + OFFS`.
    Memory { offset: i64, base: Box<Source> },
    /// `@ADDR`: memory at a kernel address.
    Address(u64),
    /// `@SYM[+|-OFFS]`: memory at a static's (else a function's) address
    /// plus `OFFS`.
    Symbol { name: String, offset: i64 },
}

impl Source {
    /// Whether it reads an argument (`$argN`, also as a memory base).
    pub fn fetches_an_argument(&self) -> bool {
        match self {
            Source::Arg(_) => true,
            Source::Memory { base, .. } => base.fetches_an_argument(),
            _ => false,
        }
    }
}

/// How a fetched value is stored and printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    Unsigned(u8),
    Signed(u8),
    Hex(u8),
    /// A NUL-terminated string at the address.
    String,
    /// A code address, printed `function+0xOFF/0xSIZE`.
    Symbol,
    /// A code address turned into the string `function+0xOFF/0xSIZE` when
    /// the event is recorded (Linux's `symstr`): a string field, which
    /// filters and `hist` keys can match by name.
    SymStr,
    /// One byte, printed as a character in quotes (`char`).
    Char,
    /// `b<width>@<offset>/<container>`: bits `offset..offset + width` of a
    /// `container`-bit value, kept and printed as an unsigned number of
    /// that size, as Linux's bitfield type.
    Bitfield {
        width: u8,
        offset: u8,
        container: u8,
    },
}

impl ArgType {
    /// Bytes the value takes in a record (a string's is its `__data_loc`).
    pub fn size(self) -> usize {
        match self {
            ArgType::Unsigned(bits) | ArgType::Signed(bits) | ArgType::Hex(bits) => usize::from(bits / 8),
            ArgType::Bitfield { container, .. } => usize::from(container / 8),
            ArgType::String | ArgType::SymStr => 4,
            ArgType::Symbol => 8,
            ArgType::Char => 1,
        }
    }

    /// Whether the record keeps a string (a `__data_loc`), written when the
    /// event is recorded: `string` and `symstr`.
    #[inline(always)]
    pub fn is_string(self) -> bool {
        matches!(self, ArgType::String | ArgType::SymStr)
    }

    /// The value a fetched word stands for in this type: a bitfield's
    /// bits, shifted down; any other type's word unchanged (the record
    /// keeps what fits its size).
    #[inline(always)]
    pub fn extract(self, word: u64) -> u64 {
        match self {
            ArgType::Bitfield { width, offset, .. } => (word >> offset) & (u64::MAX >> (64 - u32::from(width))),
            _ => word,
        }
    }

    /// The type's name in definitions.
    pub fn name(self) -> String {
        match self {
            ArgType::Unsigned(bits) => format!("u{bits}"),
            ArgType::Signed(bits) => format!("s{bits}"),
            ArgType::Hex(bits) => format!("x{bits}"),
            ArgType::String => "string".into(),
            ArgType::Symbol => "symbol".into(),
            ArgType::SymStr => "symstr".into(),
            ArgType::Char => "char".into(),
            ArgType::Bitfield { width, offset, container } => format!("b{width}@{offset}/{container}"),
        }
    }

    fn parse(text: &str) -> Option<ArgType> {
        let sized = |rest: &str| rest.parse::<u8>().ok().filter(|bits| matches!(bits, 8 | 16 | 32 | 64));
        // A bitfield's width and offset, read as C reads them (Linux's
        // simple_strtoul with base 0).
        let number = |text: &str| c_number(text).and_then(|n| u8::try_from(n).ok());
        match text {
            "string" => Some(ArgType::String),
            "symbol" => Some(ArgType::Symbol),
            "symstr" => Some(ArgType::SymStr),
            "char" => Some(ArgType::Char),
            _ => match text.split_at_checked(1)? {
                ("u", rest) => sized(rest).map(ArgType::Unsigned),
                ("s", rest) => sized(rest).map(ArgType::Signed),
                ("x", rest) => sized(rest).map(ArgType::Hex),
                ("b", rest) => {
                    // b<width>@<offset>/<container>: the bits must fit.
                    let (width, rest) = rest.split_once('@')?;
                    let (offset, container) = rest.split_once('/')?;
                    let (width, offset, container) = (number(width)?, number(offset)?, sized(container)?);
                    let fits = width > 0 && u16::from(width) + u16::from(offset) <= u16::from(container);
                    fits.then_some(ArgType::Bitfield { width, offset, container })
                }
                _ => None,
            },
        }
    }
}

/// One fetch arg.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchArg {
    pub name: String,
    pub source: Source,
    pub ty: ArgType,
    /// `:TYPE[N]`: `N` values of the type, one after another in memory
    /// (Linux's array types); 0 for one value.
    pub count: usize,
    /// The fetch as written, without its `NAME=` (`cat dynamic_events`
    /// shows `NAME=` and this, as Linux does, named or not).
    pub text: String,
}

/// What kind of probe an event rides on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// `f`: an fprobe (entry, or exit with `%return`).
    Fprobe,
    /// `p`: a kprobe at `SYM[+OFFS]` or an address.
    Kprobe(Location),
    /// `r[MAXACTIVE]`: a kretprobe (0: the default limit).
    Kretprobe { location: Location, maxactive: usize },
}

/// A parsed event definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    pub group: String,
    pub event: String,
    /// The function (fprobe events), or the location as written.
    pub symbol: String,
    /// An event at a function's return (`%return`, or a kretprobe).
    pub exit: bool,
    pub kind: ProbeKind,
    pub args: Vec<FetchArg>,
}

impl fmt::Display for EventSpec {
    /// The definition as `cat dynamic_events` (or `kprobe_events`) shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ProbeKind::Fprobe => {
                write!(f, "f:{}/{} {}{}", self.group, self.event, self.symbol, if self.exit { "%return" } else { "" })?
            }
            ProbeKind::Kprobe(location) => write!(f, "p:{}/{} {location}", self.group, self.event)?,
            ProbeKind::Kretprobe { location, maxactive: 0 } => write!(f, "r:{}/{} {location}", self.group, self.event)?,
            ProbeKind::Kretprobe { location, maxactive } => write!(f, "r{maxactive}:{}/{} {location}", self.group, self.event)?,
        }
        for arg in &self.args {
            write!(f, " {}={}", arg.name, arg.text)?;
        }
        Ok(())
    }
}

/// A line written to `dynamic_events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Define(EventSpec),
    /// `-:[GRP/]EVENT [PLACE [ARGS...]]`: removes the event (`event`
    /// empty, from `-:GRP/`: every event of the group); with words after
    /// the name, only one whose definition starts with them, as in Linux.
    Remove {
        group: Option<String>,
        event: String,
        matching: Vec<String>,
    },
}

impl EventSpec {
    /// Whether `words` start the definition as Linux matches a removal's
    /// arguments: the place (an fprobe's bare symbol, without `%return`; a
    /// kprobe's `SYM[+OFFS]` or address), then each argument as
    /// `NAME=FETCH`.
    pub fn starts_with(&self, words: &[String]) -> bool {
        let place = match &self.kind {
            ProbeKind::Fprobe => self.symbol.clone(),
            ProbeKind::Kprobe(location) | ProbeKind::Kretprobe { location, .. } => location.to_string(),
        };
        let args = self.args.iter().map(|arg| format!("{}={}", arg.name, arg.text));
        let mut listed = core::iter::once(place).chain(args);
        words.iter().all(|word| listed.next().as_deref() == Some(word.as_str()))
    }
}

/// Which lines a file takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// `dynamic_events`: `f`, `p`, `r` and `-`.
    Dynamic,
    /// `kprobe_events`: `p`, `r` and `-`.
    Kprobe,
}

/// Why a definition was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DefinitionError {
    Empty,
    TooLong,
    /// A head that is no probe type of the file it was written to.
    UnknownType {
        head: String,
        syntax: Syntax,
    },
    BadLocation(LocationError),
    /// The head (`r0:NAME`) and what is wrong with its MAXACTIVE.
    BadMaxactive(String, Maxactive),
    BadName(String),
    MissingSymbol,
    BadSymbol(String),
    BadFetchArg {
        arg: String,
        why: &'static str,
    },
    BadArgType {
        arg: String,
        ty: String,
    },
    RetvalAtEntry(String),
    /// `:string` on a fetch that is not a dereference (Linux: BAD_STRING).
    StringNeedsDereference(String),
    /// `p:` with no name after the `:` (Linux: NO_EVENT_NAME).
    NoEventName,
    /// A group or event name longer than [`MAX_NAME`] (Linux:
    /// EVENT_TOO_LONG, GROUP_TOO_LONG).
    NameTooLong(String),
    TooManyArgs,
    DuplicateArgName(String),
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefinitionError::Empty => write!(f, "empty event definition"),
            DefinitionError::TooLong => write!(f, "event definition longer than {MAX_DEFINITION} bytes"),
            DefinitionError::UnknownType { head, syntax: Syntax::Dynamic } => {
                write!(f, "unknown probe type '{head}' (expected 'f', 'p' or 'r' to define, '-:' to remove)")
            }
            DefinitionError::UnknownType { head, syntax: Syntax::Kprobe } => write!(
                f,
                "unknown probe type '{head}' (expected 'p' or 'r' to define, '-:' to remove; fprobe events go to dynamic_events)"
            ),
            DefinitionError::BadLocation(error) => write!(f, "{error}"),
            DefinitionError::BadMaxactive(head, Maxactive::OnlyForReturn) => {
                write!(f, "invalid '{head}': MAXACTIVE is only for function exit ('r')")
            }
            DefinitionError::BadMaxactive(head, Maxactive::Invalid) => {
                write!(f, "invalid '{head}': MAXACTIVE is a number of calls, 1 to {MAX_MAXACTIVE}")
            }
            DefinitionError::BadMaxactive(head, Maxactive::TooBig) => {
                write!(f, "invalid '{head}': MAXACTIVE is too big (at most {MAX_MAXACTIVE})")
            }
            DefinitionError::BadName(name) => write!(f, "invalid group or event name '{name}'"),
            DefinitionError::MissingSymbol => write!(f, "missing function symbol"),
            DefinitionError::BadSymbol(symbol) => write!(f, "invalid symbol '{symbol}'"),
            DefinitionError::BadFetchArg { arg, why } => write!(f, "invalid fetch argument '{arg}': {why}"),
            DefinitionError::BadArgType { arg, ty } => write!(f, "unknown type '{ty}' in fetch argument '{arg}'"),
            DefinitionError::RetvalAtEntry(arg) => {
                write!(f, "'{arg}': $retval is only available in %return events")
            }
            DefinitionError::StringNeedsDereference(arg) => {
                write!(f, "'{arg}': the string type needs a dereference, such as +0($arg1):string")
            }
            DefinitionError::NoEventName => write!(f, "no event name after ':' (leave out the ':' for a default name)"),
            DefinitionError::NameTooLong(name) => write!(f, "'{name}' is longer than {MAX_NAME} characters"),
            DefinitionError::TooManyArgs => write!(f, "more than {MAX_ARGS} fetch arguments"),
            DefinitionError::DuplicateArgName(name) => write!(f, "duplicate argument name '{name}'"),
        }
    }
}

/// Whether `name` is a valid group, event or argument name.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `kernel::workload::fib` -> `kernel__workload__fib`: a symbol made a name.
pub fn sanitize(symbol: &str) -> String {
    symbol.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// Parses one `dynamic_events` line.
pub fn parse(line: &str) -> Result<Command, DefinitionError> {
    parse_as(line, Syntax::Dynamic)
}

/// `p`, `r`, `rN`, `f` before the `:` of a definition's head.
#[derive(Clone, Copy)]
enum Head {
    Fprobe,
    Kprobe,
    Kretprobe(usize),
}

/// What is wrong with a head's MAXACTIVE (Linux's `BAD_MAXACT_TYPE`,
/// `BAD_MAXACT`, `MAXACT_TOO_BIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maxactive {
    /// On a `p:` probe.
    OnlyForReturn,
    /// Not a number, or 0.
    Invalid,
    /// Over [`MAX_MAXACTIVE`].
    TooBig,
}

fn parse_head(kind: &str, head: &str, syntax: Syntax) -> Result<Head, DefinitionError> {
    match kind {
        "f" if syntax == Syntax::Dynamic => Ok(Head::Fprobe),
        "p" => Ok(Head::Kprobe),
        "r" => Ok(Head::Kretprobe(0)),
        _ => match kind.strip_prefix('r') {
            // A number as C writes it (`r16`, `r0x10`, `r020`), as
            // Linux reads MAXACTIVE (kstrtouint, base 0).
            Some(digits) if digits.starts_with(|c: char| c.is_ascii_digit()) => {
                let bad = |why| DefinitionError::BadMaxactive(head.into(), why);
                match c_number(digits).map(|n| usize::try_from(n).unwrap_or(usize::MAX)) {
                    None | Some(0) => Err(bad(Maxactive::Invalid)),
                    Some(maxactive) if maxactive > MAX_MAXACTIVE => Err(bad(Maxactive::TooBig)),
                    Some(maxactive) => Ok(Head::Kretprobe(maxactive)),
                }
            }
            _ if kind.starts_with('p') && kind[1..].starts_with(|c: char| c.is_ascii_digit()) => {
                Err(DefinitionError::BadMaxactive(head.into(), Maxactive::OnlyForReturn))
            }
            _ => Err(DefinitionError::UnknownType { head: head.into(), syntax }),
        },
    }
}

/// The longest group or event name, as Linux's `MAX_EVENT_NAME_LEN` allows.
pub const MAX_NAME: usize = 63;

/// The most calls a kretprobe event may hook at once (`rN`).
pub const MAX_MAXACTIVE: usize = 4096;

/// Parses one line of a file that takes `syntax`.
pub fn parse_as(line: &str, syntax: Syntax) -> Result<Command, DefinitionError> {
    if line.len() > MAX_DEFINITION {
        return Err(DefinitionError::TooLong);
    }
    let mut words = line.split_whitespace();
    let head = words.next().ok_or(DefinitionError::Empty)?;
    if let Some(name) = head.strip_prefix("-:") {
        let (group, event) = split_name(name, Naming::Removal)?;
        // `-:GRP/` names every event of the group, as in Linux; `-:`
        // alone names nothing.
        let event = match (&group, event) {
            (_, Some(event)) => event,
            (Some(_), None) => String::new(),
            (None, None) => return Err(DefinitionError::BadName(name.into())),
        };
        return Ok(Command::Remove { group, event, matching: words.map(String::from).collect() });
    }
    let (kind, name) = head.split_once(':').unwrap_or((head, ""));
    let head_kind = parse_head(kind, head, syntax)?;
    // `p fib` takes a default name; `p: fib` names nothing (`p:grp/ fib`
    // takes one in that group), as Linux reads them.
    if head.ends_with(':') {
        return Err(DefinitionError::NoEventName);
    }
    let (group, event) = split_name(name, Naming::Definition)?;
    let symbol_word = words.next().ok_or(DefinitionError::MissingSymbol)?;
    let (symbol, exit, kind) = match head_kind {
        Head::Fprobe => {
            let (symbol, exit) = match symbol_word.strip_suffix("%return") {
                Some(symbol) => (symbol, true),
                None => (symbol_word, false),
            };
            if symbol.is_empty() || symbol.contains('%') || symbol.contains('=') {
                return Err(DefinitionError::BadSymbol(symbol_word.into()));
            }
            (symbol, exit, ProbeKind::Fprobe)
        }
        Head::Kprobe | Head::Kretprobe(_) => {
            // `p SYM%return` is a kretprobe, as Linux reads it (since 5.11);
            // `r SYM%return` says so twice, which Linux takes too.
            let (symbol_word, head_kind) = match (symbol_word.strip_suffix("%return"), head_kind) {
                (Some(symbol), Head::Kprobe) => (symbol, Head::Kretprobe(0)),
                (Some(symbol), Head::Kretprobe(maxactive)) => (symbol, Head::Kretprobe(maxactive)),
                _ => (symbol_word, head_kind),
            };
            let location = Location::parse(symbol_word).map_err(DefinitionError::BadLocation)?;
            match head_kind {
                Head::Kretprobe(maxactive) => (symbol_word, true, ProbeKind::Kretprobe { location, maxactive }),
                _ => (symbol_word, false, ProbeKind::Kprobe(location)),
            }
        }
    };
    let mut args = Vec::new();
    for (index, text) in words.enumerate() {
        if args.len() == MAX_ARGS {
            return Err(DefinitionError::TooManyArgs);
        }
        let arg = parse_arg(text, index + 1, exit)?;
        if args.iter().any(|a: &FetchArg| a.name == arg.name) {
            return Err(DefinitionError::DuplicateArgName(arg.name));
        }
        args.push(arg);
    }
    let event = event.unwrap_or_else(|| default_event_name(&kind, symbol, exit));
    let default_group = if kind == ProbeKind::Fprobe { DEFAULT_GROUP } else { KPROBE_GROUP };
    Ok(Command::Define(EventSpec {
        group: group.unwrap_or_else(|| default_group.into()),
        event,
        symbol: symbol.into(),
        exit,
        kind,
        args,
    }))
}

/// Linux's default names: `SYM__entry`/`SYM__exit` for fprobes,
/// `p_SYM_OFFS`/`r_SYM_OFFS` (or `p_0xADDR`) for kprobes.
fn default_event_name(kind: &ProbeKind, symbol: &str, exit: bool) -> String {
    let location = match kind {
        ProbeKind::Fprobe => return format!("{}__{}", sanitize(symbol), if exit { "exit" } else { "entry" }),
        ProbeKind::Kprobe(location) | ProbeKind::Kretprobe { location, .. } => location,
    };
    let prefix = if exit { 'r' } else { 'p' };
    match location {
        Location::Symbol { symbol, offset } => format!("{prefix}_{}_{offset}", sanitize(symbol)),
        Location::Address(address) => format!("{prefix}_0x{address:x}"),
    }
}

/// Which command a `[GRP/][EVENT]` name is read for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// A definition: `GRP.EVENT` also separates the two, as Linux reads
    /// it (since 5.15; `/` comes first if there are both).
    Definition,
    /// A removal (`-:`): only `/` separates them, as in Linux.
    Removal,
}

/// `[GRP/][EVENT]` -> (group, event), each optional.
fn split_name(name: &str, naming: Naming) -> Result<(Option<String>, Option<String>), DefinitionError> {
    let split = match name.split_once('/') {
        None if naming == Naming::Definition => name.split_once('.'),
        split => split,
    };
    let (group, event) = match split {
        Some((group, event)) => (Some(group), event),
        None => (None, name),
    };
    let check = |part: &str| {
        if part.len() > MAX_NAME {
            Err(DefinitionError::NameTooLong(part.into()))
        } else if is_identifier(part) {
            Ok(part.to_string())
        } else {
            Err(DefinitionError::BadName(name.into()))
        }
    };
    let group = group.map(check).transpose()?;
    let event = if event.is_empty() { None } else { Some(check(event)?) };
    Ok((group, event))
}

/// The most values an array type (`:TYPE[N]`) holds (Linux's `MAX_ARRAY_LEN`).
pub const MAX_ARRAY: usize = 64;

/// Splits `TYPE[N]` into `TYPE` and `N` (0 without brackets), with
/// Linux's reasons for a bad array.
fn split_array(ty: &str) -> Result<(&str, usize), &'static str> {
    let Some((base, count)) = ty.split_once('[') else { return Ok((ty, 0)) };
    let count = match count.split_once(']') {
        Some((count, "")) => count,
        Some(_) => return Err("the array has a wrong suffix"),
        None => return Err("the array is not closed"),
    };
    match c_number(count) {
        Some(0) | None => Err("invalid array size"),
        Some(n) if n as usize > MAX_ARRAY => Err("the array number is too big (at most 64)"),
        Some(n) => Ok((base, n as usize)),
    }
}

/// The longest argument name, as Linux's `MAX_ARG_NAME_LEN` allows.
const MAX_ARG_NAME: usize = 32;

/// `[NAME=]FETCHARG[:TYPE]`.
fn parse_arg(text: &str, position: usize, exit: bool) -> Result<FetchArg, DefinitionError> {
    let bad = |why| DefinitionError::BadFetchArg { arg: text.into(), why };
    let (name, rest) = match text.split_once('=') {
        Some((name, rest)) => {
            if !is_identifier(name) || name.starts_with("__probe") || name.starts_with("common_") {
                return Err(bad("invalid argument name"));
            }
            if name.len() > MAX_ARG_NAME {
                return Err(bad("argument name too long (at most 32 characters)"));
            }
            (name.to_string(), rest)
        }
        None => (format!("arg{position}"), text),
    };
    // The type follows the last single ':' outside parentheses (a `::`
    // is part of an `@SYM`'s path).
    let (body, ty, count) = match ftrace::symbols::glob::split_last_colon(rest) {
        Some((body, ty_text)) => {
            let (base, count) = split_array(ty_text).map_err(bad)?;
            let ty = ArgType::parse(base).ok_or_else(|| DefinitionError::BadArgType { arg: text.into(), ty: ty_text.into() })?;
            (body, Some(ty), count)
        }
        None => (rest, None, 0),
    };
    let source = parse_source(body, 0).map_err(bad)?;
    // `$comm` is a string, as in Linux (its type may be left out).
    let ty = match (&source, ty) {
        (Source::Comm, None | Some(ArgType::String)) => ArgType::String,
        (Source::Comm, Some(_)) => return Err(bad("$comm is a string (:string, or no type)")),
        (_, ty) => ty.unwrap_or(ArgType::Hex(64)),
    };
    if !exit && uses_retval(&source) {
        return Err(DefinitionError::RetvalAtEntry(text.into()));
    }
    if ty == ArgType::String
        && !matches!(source, Source::Memory { .. } | Source::Address(_) | Source::Symbol { .. } | Source::Comm)
    {
        return Err(DefinitionError::StringNeedsDereference(text.into()));
    }
    if count > 0 {
        if ty.is_string() || matches!(ty, ArgType::Bitfield { .. }) {
            return Err(bad("arrays of strings or bitfields are not supported"));
        }
        if !matches!(source, Source::Memory { .. } | Source::Address(_) | Source::Symbol { .. }) {
            return Err(bad("an array is read from memory: +OFFS(FETCHARG), @ADDR or @SYM"));
        }
    }
    Ok(FetchArg { name, source, ty, count, text: rest.into() })
}

fn uses_retval(source: &Source) -> bool {
    match source {
        Source::Retval => true,
        Source::Memory { base, .. } => uses_retval(base),
        _ => false,
    }
}

fn parse_source(text: &str, depth: usize) -> Result<Source, &'static str> {
    if let Some(rest) = text.strip_prefix('$') {
        return match rest {
            "retval" => Ok(Source::Retval),
            "stack" => Ok(Source::StackPointer),
            // Linux takes `$COMM` too.
            "comm" | "COMM" if depth > 0 => Err("$comm is a string, not an address"),
            "comm" | "COMM" => Ok(Source::Comm),
            _ => {
                if let Some(n) = rest.strip_prefix("arg") {
                    let n = parse_index(n).ok_or("expected $argN with N from 1")?;
                    if n == 0 {
                        return Err("arguments count from $arg1");
                    }
                    Ok(Source::Arg(n))
                } else if let Some(n) = rest.strip_prefix("stack") {
                    let n = parse_index(n).filter(|&n| n <= MAX_STACK_INDEX).ok_or("expected $stackN with N up to 4095")?;
                    Ok(Source::Stack(n))
                } else {
                    Err("unknown variable (expected $argN, $retval, $stackN, $stack or $comm)")
                }
            }
        };
    }
    if let Some(register) = text.strip_prefix('%') {
        if !is_identifier(register) {
            return Err("invalid register name");
        }
        return Ok(Source::Register(register.into()));
    }
    if text.starts_with('+') || text.starts_with('-') {
        if depth == MAX_DEREF {
            return Err("memory fetches nested too deep");
        }
        let open = text.find('(').ok_or("expected +OFFS(FETCHARG)")?;
        let inner = text[open + 1..].strip_suffix(')').ok_or("unbalanced parentheses")?;
        let offset = parse_offset(&text[..open]).ok_or("invalid offset")?;
        let base = parse_source(inner, depth + 1)?;
        return Ok(Source::Memory { offset, base: Box::new(base) });
    }
    if let Some(place) = text.strip_prefix('@') {
        return parse_global(place);
    }
    Err("expected $argN, $retval, $stackN, $stack, $comm, %REG, @ADDR, @SYM[+|-OFFS] or +|-OFFS(FETCHARG)")
}

/// What follows the `@` of `@ADDR` (a number, as C reads it) or
/// `@SYM[+|-OFFS]`.
fn parse_global(place: &str) -> Result<Source, &'static str> {
    if place.starts_with(|c: char| c.is_ascii_digit()) {
        return c_number(place).map(Source::Address).ok_or("invalid address after @");
    }
    // An offset is the text after the last + or - that parses as one (a
    // name's own `-` sits in `->`, inside brackets).
    let split = place.rfind(['+', '-']).and_then(|at| Some((&place[..at], parse_offset(&place[at..])?)));
    let (name, offset) = split.unwrap_or((place, 0));
    if name.is_empty() {
        return Err("expected a symbol after @");
    }
    Ok(Source::Symbol { name: name.into(), offset })
}

/// The largest `N` of `$stackN`: words of a task's stack (as Linux's
/// `PARAM_MAX_STACK` bounds it by the stack size).
const MAX_STACK_INDEX: usize = 4095;

/// A decimal index: digits only (no sign, as Linux's `kstrtoul`).
fn parse_index(text: &str) -> Option<usize> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten()
}

/// `+8`, `-0x10`: one sign, then decimal or `0x` hex digits only (so
/// neither `+-8` nor `+0x-8`, and no magnitude that overflows).
fn parse_offset(text: &str) -> Option<i64> {
    match text.split_at_checked(1)? {
        ("+", digits) => i64::try_from(c_number(digits)?).ok(),
        // Down to `-0x8000000000000000`, as Linux's `kstrtol` reads it.
        ("-", _) => c_long(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn define(line: &str) -> EventSpec {
        match parse(line) {
            Ok(Command::Define(spec)) => spec,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn the_done_when_definitions() {
        let entry = define("f:fibent kernel::workload::fib n=$arg1");
        assert_eq!((entry.group.as_str(), entry.event.as_str(), entry.exit), ("fprobes", "fibent", false));
        assert_eq!(entry.symbol, "kernel::workload::fib");
        assert_eq!(
            entry.args,
            vec![FetchArg { name: "n".into(), source: Source::Arg(1), ty: ArgType::Hex(64), count: 0, text: "$arg1".into() }]
        );
        let exit = define("f:fibret kernel::workload::fib%return n=$arg1 ret=$retval");
        assert!(exit.exit);
        assert_eq!(exit.args[1].source, Source::Retval);
        assert_eq!(exit.to_string(), "f:fprobes/fibret kernel::workload::fib%return n=$arg1 ret=$retval");
    }

    #[test]
    fn defaults_groups_types_and_every_fetch_arg() {
        let spec = define("f kernel::workload::fs::lookup");
        assert_eq!((spec.group.as_str(), spec.event.as_str()), ("fprobes", "kernel__workload__fs__lookup__entry"));
        let spec = define("f:mygrp/ev sym%return");
        assert_eq!((spec.group.as_str(), spec.event.as_str(), spec.exit), ("mygrp", "ev", true));
        assert_eq!(define("f:g/ sym%return").event, "sym__exit");
        let spec =
            define("f:e sym $arg2:u32 s=$stack3:s16 $stack p=%di:x8 m=+8($arg1):u8 d=-0x10(+0(%sp)):string f=$arg1:symbol");
        let sources: Vec<(&str, &Source, ArgType)> = spec.args.iter().map(|a| (a.name.as_str(), &a.source, a.ty)).collect();
        assert_eq!(sources[0], ("arg1", &Source::Arg(2), ArgType::Unsigned(32)));
        assert_eq!(sources[1], ("s", &Source::Stack(3), ArgType::Signed(16)));
        assert_eq!(sources[2], ("arg3", &Source::StackPointer, ArgType::Hex(64)));
        assert_eq!(sources[3], ("p", &Source::Register("di".into()), ArgType::Hex(8)));
        assert_eq!(sources[4].1, &Source::Memory { offset: 8, base: Box::new(Source::Arg(1)) });
        assert_eq!(
            sources[5].1,
            &Source::Memory {
                offset: -16,
                base: Box::new(Source::Memory { offset: 0, base: Box::new(Source::Register("sp".into())) })
            }
        );
        assert_eq!(sources[5].2, ArgType::String);
        assert_eq!(sources[6].2, ArgType::Symbol);
        let array = define("f:e sym a=+8($arg1):x8[4] b=@kernel::X:u64[0x10]");
        assert_eq!((array.args[0].ty, array.args[0].count, array.args[1].count), (ArgType::Hex(8), 4, 16));
        assert_eq!(array.to_string(), "f:fprobes/e sym a=+8($arg1):x8[4] b=@kernel::X:u64[0x10]");
        assert_eq!(define("f:e sym a=+8($arg1):x8").args[0].count, 0, "no brackets: one value");
        for bad in [
            "+0($arg1):x8[4",
            "+0($arg1):x8[4]z",
            "+0($arg1):x8[0]",
            "+0($arg1):x8[65]",
            "+0($arg1):x8[z]",
            "$arg1:x8[2]",
            "+0($arg1):string[2]",
        ] {
            assert!(matches!(parse(&format!("f:e sym a={bad}")), Err(DefinitionError::BadFetchArg { .. })), "{bad}");
        }
        let symstr = define("f:e sym f=$arg1:symstr");
        assert_eq!((symstr.args[0].ty, symstr.to_string().as_str()), (ArgType::SymStr, "f:fprobes/e sym f=$arg1:symstr"));
        assert!(symstr.args[0].ty.is_string() && ArgType::String.is_string() && !ArgType::Symbol.is_string());
        assert_eq!(define("f:e s%return r=$arg1 v=$retval:s32").args[1].ty, ArgType::Signed(32));
        let spec = define("f:e sym g=@kernel::tick::TICKS:u64 h=@COUNT-0x8 a=@0x1000:x32 p=+8(@kernel::X+16):string");
        let sources: Vec<&Source> = spec.args.iter().map(|a| &a.source).collect();
        assert_eq!(sources[0], &Source::Symbol { name: "kernel::tick::TICKS".into(), offset: 0 });
        assert_eq!(spec.args[0].ty, ArgType::Unsigned(64), "the type after the path's last single colon");
        assert_eq!(sources[1], &Source::Symbol { name: "COUNT".into(), offset: -8 });
        assert_eq!((sources[2], spec.args[2].ty), (&Source::Address(0x1000), ArgType::Hex(32)));
        assert_eq!(
            sources[3],
            &Source::Memory { offset: 8, base: Box::new(Source::Symbol { name: "kernel::X".into(), offset: 16 }) }
        );
        assert_eq!(
            define("f:e sym s=@NAME:string").args[0].ty,
            ArgType::String,
            "a static is memory: a string may be read there"
        );
        let spec = define("f:e sym c=+0($arg1):char b=$arg2:b4@2/32");
        assert_eq!((spec.args[0].ty, spec.args[0].ty.size()), (ArgType::Char, 1));
        let bits = spec.args[1].ty;
        assert_eq!(
            (bits, bits.size(), bits.name()),
            (ArgType::Bitfield { width: 4, offset: 2, container: 32 }, 4, "b4@2/32".into())
        );
        assert_eq!(bits.extract(0b1101_0110), 0b0101, "bits 2..6");
        assert_eq!(ArgType::Bitfield { width: 64, offset: 0, container: 64 }.extract(u64::MAX), u64::MAX);
        assert_eq!(define("f:e sym b=$arg1:b0x4@010/32").args[0].ty, ArgType::Bitfield { width: 4, offset: 8, container: 32 });
        let spec = define("f:e sym a=@0100 b=@X+010 c=+0X10($arg1)");
        let sources: Vec<&Source> = spec.args.iter().map(|a| &a.source).collect();
        assert_eq!(sources[0], &Source::Address(0o100), "numbers are read as C reads them");
        assert_eq!(sources[1], &Source::Symbol { name: "X".into(), offset: 8 });
        assert_eq!(sources[2], &Source::Memory { offset: 16, base: Box::new(Source::Arg(1)) });
        assert_eq!(ArgType::Bitfield { width: 1, offset: 63, container: 64 }.extract(1 << 63), 1);
    }

    #[test]
    fn kprobe_and_kretprobe_definitions() {
        let spec = define("p:kprobes/fibmid kernel::workload::fib+16 n=%di sp=$stack");
        assert_eq!(spec.kind, ProbeKind::Kprobe(Location::Symbol { symbol: "kernel::workload::fib".into(), offset: 16 }));
        assert_eq!((spec.group.as_str(), spec.event.as_str(), spec.exit), ("kprobes", "fibmid", false));
        assert_eq!(spec.to_string(), "p:kprobes/fibmid kernel::workload::fib+16 n=%di sp=$stack");
        let spec = define("p fib+0x10");
        assert_eq!((spec.group.as_str(), spec.event.as_str()), ("kprobes", "p_fib_16"));
        assert_eq!(define("p 0x1000").event, "p_0x1000");
        let spec = define("r:fibret fib $retval");
        assert_eq!(
            spec.kind,
            ProbeKind::Kretprobe { location: Location::Symbol { symbol: "fib".into(), offset: 0 }, maxactive: 0 }
        );
        assert!(spec.exit);
        assert_eq!(spec.to_string(), "r:kprobes/fibret fib arg1=$retval", "unnamed args show their names, as Linux");
        let spec = define("r16 fib");
        assert_eq!((spec.event.as_str(), spec.to_string().as_str()), ("r_fib_0", "r16:kprobes/r_fib_0 fib"));
        assert_eq!(parse_as("p:a fib", Syntax::Kprobe).map(|_| ()), Ok(()));
        let spec = define("p:pret fib%return r=$retval");
        assert_eq!(spec.to_string(), "r:kprobes/pret fib r=$retval", "p SYM%return is a kretprobe, as Linux lists it");
        assert!(matches!(parse("r:a fib%ret"), Err(DefinitionError::BadLocation(_))));
    }

    #[test]
    fn bad_kprobe_definitions_are_refused() {
        use DefinitionError::*;
        let refused = parse_as("f:a fib", Syntax::Kprobe);
        assert_eq!(refused, Err(UnknownType { head: "f:a".into(), syntax: Syntax::Kprobe }));
        assert!(refused.unwrap_err().to_string().contains("expected 'p' or 'r'"), "kprobe_events does not offer 'f'");
        assert!(matches!(parse("p:a fib+zz"), Err(BadLocation(_))));
        assert!(matches!(parse("p:a fib-4"), Err(BadLocation(_))));
        assert_eq!(parse("p:a fib $retval"), Err(RetvalAtEntry("$retval".into())));
        assert_eq!(parse("p4:a fib"), Err(BadMaxactive("p4:a".into(), Maxactive::OnlyForReturn)));
        assert_eq!(parse("r0:a fib"), Err(BadMaxactive("r0:a".into(), Maxactive::Invalid)));
        assert_eq!(parse("r99999:a fib"), Err(BadMaxactive("r99999:a".into(), Maxactive::TooBig)));
        assert_eq!(
            parse("r99999999999999999999999:a fib"),
            Err(BadMaxactive("r99999999999999999999999:a".into(), Maxactive::Invalid))
        );
        assert_eq!(parse("r1x:a fib"), Err(BadMaxactive("r1x:a".into(), Maxactive::Invalid)));
        assert_eq!(
            parse("p0x10:a fib"),
            Err(BadMaxactive("p0x10:a".into(), Maxactive::OnlyForReturn)),
            "MAXACTIVE on a p: probe"
        );
        // As C writes numbers, as Linux reads MAXACTIVE: 0x10 is 16, 020 is 16.
        for head in ["r16", "r0x10", "r020"] {
            match parse(&format!("{head}:a fib")) {
                Ok(Command::Define(EventSpec { kind: ProbeKind::Kretprobe { maxactive: 16, .. }, .. })) => {}
                other => panic!("{head}: {other:?}"),
            }
        }
        assert_eq!(parse("rx:a fib"), Err(UnknownType { head: "rx:a".into(), syntax: Syntax::Dynamic }));
        assert_eq!(parse("p:a"), Err(MissingSymbol));
        assert!(matches!(parse("p:a fib %"), Err(BadFetchArg { .. })));
    }

    #[test]
    fn numbers_in_fetch_args_take_one_sign_and_digits() {
        let accepted = |arg: &str| parse(&format!("f:a fib x={arg}")).is_ok();
        for good in
            ["+8($arg1)", "-0x10(%di)", "$stack4095", "$arg12", "-0x8000000000000000($arg1)", "-9223372036854775808($arg1)"]
        {
            assert!(accepted(good), "{good}");
        }
        for bad in [
            "+-8($arg1)",
            "--8($arg1)",
            "+0x-8($arg1)",
            "--9223372036854775808($arg1)",
            "+0x8000000000000000($arg1)",
            "-0x8000000000000001($arg1)",
            "$arg+1",
            "$stack+2",
            "$stack4096",
        ] {
            assert!(!accepted(bad), "{bad}");
        }
    }

    #[test]
    fn removal() {
        assert_eq!(parse("-:fibent"), Ok(Command::Remove { group: None, event: "fibent".into(), matching: vec![] }));
        assert_eq!(
            parse("-:fprobes/fibent"),
            Ok(Command::Remove { group: Some("fprobes".into()), event: "fibent".into(), matching: vec![] })
        );
        let matching = vec![String::from("fib"), String::from("n=$arg1")];
        assert_eq!(parse("-:fibent fib n=$arg1"), Ok(Command::Remove { group: None, event: "fibent".into(), matching }));
        assert!(parse("-:").is_err());
        let group = Command::Remove { group: Some("a".into()), event: String::new(), matching: vec![] };
        assert_eq!(parse("-:a/"), Ok(group), "every event of group a, as in Linux");
        assert!(parse("-:/").is_err());
    }

    #[test]
    fn bad_definitions_are_refused_with_a_reason() {
        use DefinitionError::*;
        assert_eq!(parse(""), Err(Empty));
        assert_eq!(parse("x:kprobe sym"), Err(UnknownType { head: "x:kprobe".into(), syntax: Syntax::Dynamic }));
        assert_eq!(parse("f:1bad sym"), Err(BadName("1bad".into())));
        assert_eq!(parse("f:a/b/c sym"), Err(BadName("a/b/c".into())));
        assert_eq!(parse("f:ev"), Err(MissingSymbol));
        assert_eq!(parse("f:ev %return"), Err(BadSymbol("%return".into())));
        assert_eq!(parse("f:ev sym $retval"), Err(RetvalAtEntry("$retval".into())));
        assert_eq!(parse("f:ev sym x=+8($retval)"), Err(RetvalAtEntry("x=+8($retval)".into())));
        assert!(matches!(parse("f:ev sym $arg0"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym $argx"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym $bogus"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym x=$arg1:b+4@0/8"), Err(BadArgType { .. })), "no sign, as C's digits");
        for bad in ["@", "@+8", "@0xzz", "@12ab", "@-4", "@0x+10", "@09"] {
            assert!(matches!(parse(&format!("f:ev sym x={bad}")), Err(BadFetchArg { .. })), "{bad}");
        }
        assert!(matches!(parse("f:ev sym +8($arg1"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym +z($arg1)"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym 9"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym 1x=$arg1"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev sym +0(+0(+0(+0(+0($arg1)))))"), Err(BadFetchArg { .. })));
        assert_eq!(parse("f:ev sym $arg1:u7"), Err(BadArgType { arg: "$arg1:u7".into(), ty: "u7".into() }));
        for bad in ["b0@0/8", "b4@5/8", "b65@0/64", "b4@0/24", "b4/8", "b4@0", "bx@0/8"] {
            let arg = format!("$arg1:{bad}");
            assert_eq!(parse(&format!("f:ev sym {arg}")), Err(BadArgType { arg, ty: bad.into() }), "{bad}");
        }
        assert_eq!(parse("f:ev sym a=$arg1 a=$arg2"), Err(DuplicateArgName("a".into())));
        let longest = format!("{}=$arg1", "a".repeat(MAX_ARG_NAME));
        assert!(parse(&format!("f:ev sym {longest}")).is_ok());
        assert!(matches!(parse(&format!("f:ev sym a{longest}")), Err(BadFetchArg { .. })), "33 characters: too long");
        let many: String = (1..=17).map(|i| alloc::format!(" a{i}=$arg1")).collect();
        assert_eq!(parse(&alloc::format!("f:ev sym{many}")), Err(TooManyArgs));
        let long = alloc::format!("f:ev sym {}", "x".repeat(MAX_DEFINITION));
        assert_eq!(parse(&long), Err(TooLong));
    }

    #[test]
    fn linux_refusals_of_names_and_strings() {
        use DefinitionError::*;
        assert_eq!(parse("p: fib"), Err(NoEventName));
        assert_eq!(parse("f: fib"), Err(NoEventName));
        assert_eq!(define("p:grp/ fib").event, "p_fib_0", "a group and no name: the default name");
        let name = "e".repeat(MAX_NAME);
        assert_eq!(define(&alloc::format!("f:{name} fib")).event, name);
        let long = "e".repeat(MAX_NAME + 1);
        assert_eq!(parse(&alloc::format!("f:{long} fib")), Err(NameTooLong(long.clone())));
        assert_eq!(parse(&alloc::format!("f:{long}/ev fib")), Err(NameTooLong(long)));
        for plain in ["$arg1:string", "s=%di:string", "$stack0:string"] {
            assert!(matches!(parse(&alloc::format!("f:ev fib {plain}")), Err(StringNeedsDereference(_))), "{plain}");
        }
        assert!(matches!(parse("f:ev fib%return $retval:string"), Err(StringNeedsDereference(_))));
        assert_eq!(define("f:ev fib s=+0($arg1):string").to_string(), "f:fprobes/ev fib s=+0($arg1):string");
        let comm = define("f:ev fib $comm c=$comm:string");
        assert_eq!((comm.args[0].source.clone(), comm.args[0].ty), (Source::Comm, ArgType::String), "a string by default");
        assert_eq!(comm.args[1].ty, ArgType::String);
        assert!(matches!(parse("f:ev fib $comm:u32"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("f:ev fib +0($comm)"), Err(BadFetchArg { .. })));
    }

    #[test]
    fn a_kretprobe_may_say_percent_return_too() {
        for (line, shown) in [
            ("r:ev fib%return n=$retval", "r:kprobes/ev fib n=$retval"),
            ("r8:ev fib+0%return", "r8:kprobes/ev fib"),
            ("p:ev fib%return", "r:kprobes/ev fib"),
        ] {
            let spec = define(line);
            assert!(spec.exit, "{line}");
            assert_eq!(spec.to_string(), shown);
        }
        assert_eq!(define("r fib%return").event, "r_fib_0");
    }

    #[test]
    fn comm_in_capitals_is_comm() {
        use DefinitionError::*;
        let spec = define("p:ev fib c=$COMM d=$COMM:string");
        assert_eq!((spec.args[0].source.clone(), spec.args[0].ty), (Source::Comm, ArgType::String));
        assert_eq!(spec.args[1].ty, ArgType::String);
        assert_eq!(spec.to_string(), "p:kprobes/ev fib c=$COMM d=$COMM:string");
        assert!(matches!(parse("p:ev fib $COMM:u32"), Err(BadFetchArg { .. })));
        assert!(matches!(parse("p:ev fib +0($COMM)"), Err(BadFetchArg { .. })));
    }

    #[test]
    fn a_dot_separates_group_and_event_in_a_definition() {
        use DefinitionError::*;
        let spec = define("p:mygrp.ev fib");
        assert_eq!((spec.group.as_str(), spec.event.as_str()), ("mygrp", "ev"));
        assert_eq!(spec.to_string(), "p:mygrp/ev fib");
        let spec = define("f:mygrp. fib");
        assert_eq!((spec.group.as_str(), spec.event.as_str()), ("mygrp", "fib__entry"));
        assert_eq!(parse("p:.ev fib"), Err(BadName(".ev".into())));
        assert_eq!(parse("p:a/b.c fib"), Err(BadName("a/b.c".into())), "'/' first, then the event must be a name");
        // A removal splits at '/' only, as Linux's does.
        assert!(matches!(parse("-:mygrp.ev"), Err(BadName(_))));
    }
}
