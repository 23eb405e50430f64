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

pub mod fetch_arg;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use fetch_arg::parse_arg;

use ftrace::number::c_digits as c_number;

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

#[cfg(test)]
mod tests;
