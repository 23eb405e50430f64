//! Event filters: the expressions written to `events/GRP/EVENT/filter`,
//! as Linux takes them (`prev_pid == 0 && next_comm ~ "kw*"`).
//!
//! A filter is parsed once, against the event's fields, into a tree
//! ([`EventFilter`]); recording an event evaluates the tree on the values
//! the event is about to record and drops the event if it does not match.
//! Parsing checks everything evaluation relies on (every field exists, an
//! operator suits the field's type, a number is a number), so evaluation
//! cannot fail: a bad filter is refused whole and the old one stays.
//!
//! The grammar: `expr := and ('||' and)*`, `and := unary ('&&' unary)*`,
//! `unary := '!' unary | '(' expr ')' | FIELD OP VALUE`. Numbers compare
//! with `==`, `!=`, `<`, `<=`, `>`, `>=` and `&` (some bit set), written
//! as C writes them (`0x` hex, `0` octal; `-` only for a signed field);
//! strings, quoted (`"..."` or `'...'`), with `==`, `!=` and `~` (a glob:
//! `*`, `?` and `[...]` classes, see [`ftrace::symbols::glob`]; `"!GLOB"` matches what
//! `GLOB` does not). A number holding a CPU also compares with Linux's
//! `CPUS{LIST}` (`CPU & CPUS{0-1,3}`: one of those CPUs; `==`, `!=`; a
//! list of one CPU is that CPU). A value neither quoted nor a number is
//! refused, as Linux refuses it ("did you forget quotes"?).
//!
//! A refused filter says why in Linux's words ([`FilterErrorKind`]) and
//! where, at the byte Linux's parser reports (`error_log` puts its caret
//! there): the quotes and parentheses are checked first, as Linux's first
//! look does, then each comparison. Where this parser differs from Linux's,
//! it is on purpose and said so: any Unicode whitespace separates (a
//! pasted no-break space), a trailing `&&`, `||` or `!` is refused, and so
//! is `CPU & N` (Linux's never matches).
//!
//! A name the event has no field for may be one of Linux's generic fields,
//! which every event offers: `CPU` (also `cpu`, `common_cpu`), the CPU the
//! event is recorded on, and `COMM` (also `comm`), the running task's name.
//! The event's own field comes first: `comm` in `sched_wakeup` is the woken
//! task's, as in Linux.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use ftrace::symbols::glob::glob_match;

/// What a field holds, for choosing operators and reading operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Unsigned,
    Signed,
    String,
    /// Several values in a row (a probe's `:TYPE[N]`): shown in the
    /// format, but no filter or `hist` key compares it.
    Array,
}

/// One field an event offers to filters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterField {
    pub name: String,
    pub kind: FieldKind,
}

impl FilterField {
    /// A field called `name` holding `kind`.
    pub fn new(name: impl Into<String>, kind: FieldKind) -> FilterField {
        FilterField { name: name.into(), kind }
    }
}

/// A field's value in one event.
#[derive(Clone, Copy, Debug)]
pub enum FieldValue<'a> {
    Unsigned(u64),
    Signed(i64),
    Str(&'a [u8]),
    /// The value could not be read (a faulting fetch): no predicate on it
    /// matches.
    Missing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    BitAnd,
    Glob,
    /// `~ "!GLOB"`: a string `GLOB` does not match (a string that could
    /// not be read matches neither).
    NotGlob,
}

/// Where a comparison (or a `hist` key or value) reads its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The event's field at this index.
    Field(usize),
    /// The CPU recording the event (`CPU`, `cpu`, `common_cpu`).
    Cpu,
    /// The running task's name (`COMM`, `comm`).
    Comm,
    /// The call chain that led to the event (`common_stacktrace`): only a
    /// `hist` key reads it, as a whole chain; as one value it is missing.
    Stack,
}

impl Source {
    /// The source `name` names for an event with `fields`, and its kind.
    pub fn find(name: &str, fields: &[FilterField]) -> Option<(Source, FieldKind)> {
        if let Some(index) = fields.iter().position(|field| field.name == name) {
            return Some((Source::Field(index), fields[index].kind));
        }
        match name {
            "CPU" | "cpu" | "common_cpu" => Some((Source::Cpu, FieldKind::Signed)),
            "COMM" | "comm" => Some((Source::Comm, FieldKind::String)),
            _ => None,
        }
    }

    /// [`find`](Self::find), and Linux's generic fields by their `common_`
    /// names (`common_cpu`, `common_comm`), as `hist` keys, variables and
    /// action parameters take them.
    pub fn find_common(name: &str, fields: &[FilterField]) -> Option<(Source, FieldKind)> {
        match name {
            "common_cpu" => Some((Source::Cpu, FieldKind::Signed)),
            "common_comm" => Some((Source::Comm, FieldKind::String)),
            _ => Source::find(name, fields),
        }
    }

    /// Its value in an event whose field `i` holds `value(i)`, read where
    /// the event is recorded.
    #[inline]
    pub fn read<'a>(self, value: &dyn Fn(usize) -> FieldValue<'a>) -> FieldValue<'a> {
        match self {
            Source::Field(index) => value(index),
            Source::Cpu => FieldValue::Signed(generic::cpu() as i64),
            Source::Comm => generic::comm().map_or(FieldValue::Missing, FieldValue::Str),
            Source::Stack => FieldValue::Missing,
        }
    }
}

/// The generic fields' values where the event is recorded.
#[cfg(target_os = "none")]
mod generic {
    pub fn cpu() -> usize {
        arch::cpu::id()
    }

    pub fn comm() -> Option<&'static [u8]> {
        ftrace::task::try_current().map(|task| &task.comm_bytes()[..])
    }
}

/// The host tests' stand-ins: CPU 1, task `host`.
#[cfg(not(target_os = "none"))]
mod generic {
    pub fn cpu() -> usize {
        1
    }

    pub fn comm() -> Option<&'static [u8]> {
        Some(b"host\0")
    }
}

#[derive(Debug)]
enum Node {
    Or(Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Number {
        source: Source,
        op: Op,
        value: i128,
    },
    Text {
        source: Source,
        op: Op,
        value: String,
    },
    /// A number against a `CPUS{...}` list of two CPUs or more: `&` holds
    /// when the number is one of them; `==` never (the number is one CPU),
    /// `!=` always, as Linux's `do_filter_scalar_cpumask`.
    Cpus {
        source: Source,
        op: Op,
        cpus: CpuList,
    },
}

/// The CPUs a `CPUS{...}` names: inclusive ranges, as written.
#[derive(Debug)]
struct CpuList(Vec<(u64, u64)>);

impl CpuList {
    /// A cpulist as Linux's `cpulist_parse` reads the common forms: CPUs
    /// and ranges (`2,4,6,8-32`), in decimal. (Its `A-B:USED/GROUP` form
    /// is refused.)
    fn parse(text: &str) -> Option<CpuList> {
        let number = |text: &str| -> Option<u64> {
            (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok()).flatten()
        };
        let ranges = text.split(',').map(|part| {
            let (from, to) = part.split_once('-').unwrap_or((part, part));
            let (from, to) = (number(from)?, number(to)?);
            (from <= to).then_some((from, to))
        });
        Some(CpuList(ranges.collect::<Option<Vec<_>>>()?))
    }

    /// The one CPU it names, if it names exactly one.
    fn single(&self) -> Option<u64> {
        let first = self.0.first()?.0;
        self.0.iter().all(|&(from, to)| from == first && to == first).then_some(first)
    }

    fn contains(&self, cpu: u64) -> bool {
        self.0.iter().any(|&(from, to)| (from..=to).contains(&cpu))
    }
}

/// A parsed filter: the text as written, and its tree.
#[derive(Debug)]
pub struct EventFilter {
    text: String,
    root: Node,
}

/// Why a filter was refused: Linux's reasons (`FILT_ERR_*`, whose texts
/// [`text`](Self::text) gives), and three of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterErrorKind {
    InvalidOp,
    /// An unmatched `(`.
    TooManyOpen,
    /// An unmatched `)`.
    TooManyClose,
    MissingQuote,
    OperandTooLong,
    /// A number compared with a string field.
    ExpectString,
    /// A string compared with a number field.
    ExpectDigit,
    IllegalFieldOp,
    FieldNotFound,
    IllegalIntval,
    /// Something other than `&&`, `||` or `)` after a comparison, or more
    /// than [`MAX_PREDICATES`] comparisons.
    TooManyPreds,
    /// Ours: `&&`, `||` or `!` with no comparison after it (Linux's
    /// parser takes `pid == 1 &&` as `pid == 1`; a typo, refused here).
    Unfinished,
    /// A value neither quoted nor a number.
    InvalidValue,
    /// Nothing to filter on (`!` alone).
    NoFilter,
    /// A field name missing where one goes: Linux's parser answers with a
    /// bare `-EINVAL`, logged as `Error`.
    Error,
    /// Ours: nothing written (`0` clears a filter; Linux's parser answers
    /// `Error`).
    Empty,
    /// Ours: more than [`MAX_NESTING`] levels of `(` and `!` (the parser
    /// and the traced path's evaluation recurse that deep).
    TooDeep,
    /// `CPUS` not followed by `{`.
    MissingBraceOpen,
    /// `CPUS{` with no `}`.
    MissingBraceClose,
    /// `CPUS{}` empty, or not a list of CPUs and ranges.
    InvalidCpulist,
}

impl FilterErrorKind {
    /// What Linux's `error_log` says (ours, for our two).
    pub fn text(self) -> &'static str {
        match self {
            FilterErrorKind::InvalidOp => "Invalid operator",
            FilterErrorKind::TooManyOpen => "Too many '('",
            FilterErrorKind::TooManyClose => "Too few '('",
            FilterErrorKind::MissingQuote => "Missing matching quote",
            FilterErrorKind::OperandTooLong => "Operand too long",
            FilterErrorKind::ExpectString => "Expecting string field",
            FilterErrorKind::ExpectDigit => "Expecting numeric field",
            FilterErrorKind::IllegalFieldOp => "Illegal operation for field type",
            FilterErrorKind::FieldNotFound => "Field not found",
            FilterErrorKind::IllegalIntval => "Illegal integer value",
            FilterErrorKind::TooManyPreds => "Too many terms in predicate expression",
            FilterErrorKind::Unfinished => "Nothing after '&&', '||' or '!'",
            FilterErrorKind::InvalidValue => "Invalid value (did you forget quotes)?",
            FilterErrorKind::NoFilter => "No filter found",
            FilterErrorKind::Error | FilterErrorKind::Empty => "Error",
            FilterErrorKind::TooDeep => "Too many levels of '(' and '!'",
            FilterErrorKind::MissingBraceOpen => "Missing '{'",
            FilterErrorKind::MissingBraceClose => "Missing '}'",
            FilterErrorKind::InvalidCpulist => "Invalid cpulist",
        }
    }
}

/// A refused filter: why, where (a byte offset into the filter as
/// written, trimmed: where Linux's parser puts its caret), and the word
/// there. The event's filter is as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    pub kind: FilterErrorKind,
    pub at: usize,
    pub word: String,
}

/// The deepest nesting of `(` and `!` a filter may have.
pub const MAX_NESTING: usize = 16;
/// The most comparisons one filter may hold.
pub const MAX_PREDICATES: usize = 32;
/// The longest string value (Linux's `MAX_FILTER_STR_VAL` less its NUL).
const MAX_STRING: usize = 255;
/// The longest number as written (Linux's buffer for one, less its NUL).
const MAX_NUMBER: usize = 23;

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.text())?;
        match self.kind {
            FilterErrorKind::Empty => f.write_str(": an empty filter (write 0 to clear it)"),
            FilterErrorKind::FieldNotFound => write!(f, ": '{}' (see the event's format)", self.word),
            FilterErrorKind::TooManyPreds if self.word.is_empty() => write!(f, " (at most {MAX_PREDICATES})"),
            _ if self.word.is_empty() => Ok(()),
            _ => write!(f, ": '{}'", self.word),
        }
    }
}

/// The filter's first look, as Linux's (`calc_stack`): quotes closed and
/// parentheses balanced, or where not.
fn check_balance(text: &str) -> Result<(), FilterError> {
    let bytes = text.as_bytes();
    let mut open = Vec::new();
    let mut quote: Option<(u8, usize)> = None;
    for (i, &byte) in bytes.iter().enumerate() {
        match (quote, byte) {
            (Some((q, _)), _) if byte == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some((byte, i)),
            (None, b'(') => open.push(i),
            (None, b')') => {
                open.pop().ok_or_else(|| error_at(text, FilterErrorKind::TooManyClose, i))?;
            }
            _ => {}
        }
    }
    if let Some((_, at)) = quote {
        return Err(error_at(text, FilterErrorKind::MissingQuote, at));
    }
    match open.last() {
        Some(&at) => Err(error_at(text, FilterErrorKind::TooManyOpen, at)),
        None => Ok(()),
    }
}

/// An error of `kind` at byte `at` of `text`, naming the word there.
fn error_at(text: &str, kind: FilterErrorKind, at: usize) -> FilterError {
    let rest = text.get(at..).unwrap_or_default();
    let word = match rest.chars().next() {
        Some(c @ ('(' | ')' | '"' | '\'')) => c.to_string(),
        _ => rest.split(char::is_whitespace).next().unwrap_or_default().to_string(),
    };
    FilterError { kind, at, word }
}

/// The comparison operators, longest first where one starts another.
const OPS: [(&str, Op); 8] = [
    ("~", Op::Glob),
    ("!=", Op::Ne),
    ("==", Op::Eq),
    ("<=", Op::Le),
    ("<", Op::Lt),
    (">=", Op::Ge),
    (">", Op::Gt),
    ("&", Op::BitAnd),
];

/// A recursive-descent parser over the filter's text. Errors carry the
/// offsets Linux's parser reports (its comparisons' are one byte past the
/// place, as Linux counts them from one past a comparison's start).
struct Parser<'a> {
    text: &'a str,
    at: usize,
    fields: &'a [FilterField],
    /// Levels of `(` and `!` open now.
    depth: usize,
    /// Comparisons parsed so far.
    predicates: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn error(&self, kind: FilterErrorKind, at: usize) -> FilterError {
        error_at(self.text, kind, at)
    }

    /// An error in a comparison, about the word at `place`: Linux reports
    /// it one byte further on (its comparison parser counts from one past
    /// the comparison's start), and so does this.
    fn misplaced(&self, kind: FilterErrorKind, place: usize) -> FilterError {
        FilterError { at: place + 1, ..error_at(self.text, kind, place) }
    }

    /// Takes `token` if the text goes on with it (after spaces).
    fn take(&mut self, token: &str) -> bool {
        self.skip_spaces();
        let taken = self.rest().starts_with(token);
        if taken {
            self.at += token.len();
        }
        taken
    }

    fn or(&mut self) -> Result<Node, FilterError> {
        let mut node = self.and()?;
        while self.take("||") {
            node = Node::Or(Box::new(node), Box::new(self.and()?));
        }
        Ok(node)
    }

    fn and(&mut self) -> Result<Node, FilterError> {
        let mut node = self.unary()?;
        while self.take("&&") {
            node = Node::And(Box::new(node), Box::new(self.unary()?));
        }
        Ok(node)
    }

    fn unary(&mut self) -> Result<Node, FilterError> {
        self.skip_spaces();
        let rest = self.rest();
        let not = rest.starts_with('!') && !rest.starts_with("!=") && !rest.starts_with("!~");
        if !not && !rest.starts_with('(') {
            return self.predicate();
        }
        if self.depth == MAX_NESTING {
            return Err(self.error(FilterErrorKind::TooDeep, self.at));
        }
        self.at += 1;
        self.depth += 1;
        let node = match not {
            true => self.unary().map(|inner| Node::Not(Box::new(inner))),
            // The first look balanced the parentheses, and a comparison is
            // followed by `&&`, `||`, `)` or the end: here, `)`.
            false => self.or().and_then(|inner| {
                self.take(")");
                self.connective_follows().map(|_| inner)
            }),
        };
        self.depth -= 1;
        node
    }

    /// What may follow a comparison or a `)`: `&&`, `||`, `)` or the end.
    fn connective_follows(&mut self) -> Result<(), FilterError> {
        self.skip_spaces();
        let rest = self.rest();
        match rest.is_empty() || rest.starts_with(')') || rest.starts_with("&&") || rest.starts_with("||") {
            true => Ok(()),
            false => Err(self.error(FilterErrorKind::TooManyPreds, self.at)),
        }
    }

    /// `FIELD OP VALUE`, then `&&`, `||`, `)` or the end.
    fn predicate(&mut self) -> Result<Node, FilterError> {
        let start = self.at;
        if self.rest().is_empty() {
            let kind = if self.predicates == 0 { FilterErrorKind::NoFilter } else { FilterErrorKind::Unfinished };
            return Err(self.error(kind, self.text.len()));
        }
        self.predicates += 1;
        if self.predicates > MAX_PREDICATES {
            return Err(FilterError { kind: FilterErrorKind::TooManyPreds, at: start, word: String::new() });
        }
        let name_len = self.rest().find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(self.rest().len());
        if name_len == 0 {
            // No field name where one goes: Linux reports no place.
            return Err(FilterError { at: 0, ..self.error(FilterErrorKind::Error, start) });
        }
        let name = &self.text[start..start + name_len];
        let Some((source, kind)) = Source::find(name, self.fields) else {
            let at = start + name_len + 1;
            return Err(FilterError { kind: FilterErrorKind::FieldNotFound, at, word: name.to_string() });
        };
        self.at += name_len;
        self.skip_spaces();
        let Some(&(symbol, op)) = OPS.iter().find(|(symbol, _)| self.rest().starts_with(symbol)) else {
            return Err(self.misplaced(FilterErrorKind::InvalidOp, self.at));
        };
        self.at += symbol.len();
        self.skip_spaces();
        let value_at = self.at;
        if self.rest().starts_with("CPUS") {
            let node = self.cpus(source, kind, op)?;
            self.connective_follows()?;
            return Ok(node);
        }
        let node = match self.rest().as_bytes().first() {
            Some(&quote @ (b'"' | b'\'')) => {
                if !matches!(op, Op::Eq | Op::Ne | Op::Glob) {
                    return Err(self.misplaced(FilterErrorKind::IllegalFieldOp, value_at));
                }
                if kind != FieldKind::String {
                    return Err(self.misplaced(FilterErrorKind::ExpectDigit, value_at));
                }
                // The first look found the closing quote.
                let len = self.text[value_at + 1..].find(quote as char).unwrap_or(self.text.len() - value_at - 1);
                self.at = value_at + 1 + len + 1;
                if len > MAX_STRING {
                    return Err(self.misplaced(FilterErrorKind::OperandTooLong, self.at - 1));
                }
                let value = &self.text[value_at + 1..value_at + 1 + len];
                // A glob starting with `!` matches what the rest does not.
                match (op, value.strip_prefix('!')) {
                    (Op::Glob, Some(pattern)) => Node::Text { source, op: Op::NotGlob, value: pattern.to_string() },
                    _ => Node::Text { source, op, value: value.to_string() },
                }
            }
            Some(&first) if first.is_ascii_digit() || first == b'-' => {
                if kind == FieldKind::String {
                    return Err(self.misplaced(FilterErrorKind::ExpectString, value_at));
                }
                // Linux's CPU comparison has no `&` (it never matches there).
                if op == Op::Glob || kind == FieldKind::Array || (source == Source::Cpu && op == Op::BitAnd) {
                    return Err(self.misplaced(FilterErrorKind::IllegalFieldOp, value_at));
                }
                let digits = &self.rest()[usize::from(first == b'-')..];
                let len = usize::from(first == b'-') + digits.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(digits.len());
                self.at += len;
                if len > MAX_NUMBER {
                    return Err(self.misplaced(FilterErrorKind::OperandTooLong, self.at));
                }
                let number = &self.text[value_at..self.at];
                match parse_number(number, kind == FieldKind::Signed) {
                    Some(value) => Node::Number { source, op, value },
                    None => return Err(self.misplaced(FilterErrorKind::IllegalIntval, value_at)),
                }
            }
            _ => return Err(self.misplaced(FilterErrorKind::InvalidValue, value_at)),
        };
        self.connective_follows()?;
        Ok(node)
    }
}

impl Parser<'_> {
    /// `FIELD OP CPUS{LIST}` (Linux 6.6): a number field (the generic `CPU`
    /// or a field holding a CPU, `target_cpu`) against a list of CPUs, with
    /// `&` (one of them), `==` or `!=`. A list of one CPU is that CPU: `&`
    /// then means `==`, as in Linux.
    fn cpus(&mut self, source: Source, kind: FieldKind, op: Op) -> Result<Node, FilterError> {
        let value_at = self.at;
        if !matches!(kind, FieldKind::Unsigned | FieldKind::Signed) || !matches!(op, Op::Eq | Op::Ne | Op::BitAnd) {
            return Err(self.misplaced(FilterErrorKind::IllegalFieldOp, value_at));
        }
        let open = value_at + "CPUS".len();
        if !self.text[open..].starts_with('{') {
            // Linux reports it past the byte that is not `{`.
            return Err(self.misplaced(FilterErrorKind::MissingBraceOpen, open + 1));
        }
        let Some(len) = self.text[open + 1..].find('}') else {
            return Err(self.misplaced(FilterErrorKind::MissingBraceClose, self.text.len()));
        };
        let close = open + 1 + len;
        let list = CpuList::parse(&self.text[open + 1..close]);
        let Some(cpus) = list else { return Err(self.misplaced(FilterErrorKind::InvalidCpulist, close)) };
        self.at = close + 1;
        Ok(match cpus.single() {
            Some(cpu) => {
                let op = if op == Op::BitAnd { Op::Eq } else { op };
                Node::Number { source, op, value: i128::from(cpu) }
            }
            None => Node::Cpus { source, op, cpus },
        })
    }
}

/// A number as C writes it, as Linux's filter reads it (`kstrtoll` for a
/// signed field, `kstrtoull` for an unsigned one, base 0): `010` is 8, `08`
/// no number; a sign is `-` alone, and only for a signed field.
fn parse_number(text: &str, signed: bool) -> Option<i128> {
    match signed {
        true => ftrace::number::c_long(text).map(i128::from),
        false => ftrace::number::c_digits(text).map(i128::from),
    }
}

impl EventFilter {
    /// Parses `text` against an event's `fields`.
    pub fn parse(text: &str, fields: &[FilterField]) -> Result<EventFilter, FilterError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(FilterError { kind: FilterErrorKind::Empty, at: 0, word: String::new() });
        }
        check_balance(text)?;
        let mut parser = Parser { text, at: 0, fields, depth: 0, predicates: 0 };
        let root = parser.or()?;
        // Each comparison and `)` checked what follows it, and the
        // parentheses balance: only a stray `)` could be left, which the
        // first look refused.
        if !parser.rest().is_empty() {
            return Err(parser.error(FilterErrorKind::TooManyPreds, parser.at));
        }
        Ok(EventFilter { text: text.to_string(), root })
    }

    /// The filter as written (`cat filter`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether an event whose field `i` holds `value(i)` passes (the
    /// generic fields are read here, where the event is recorded).
    pub fn matches<'a>(&self, value: &dyn Fn(usize) -> FieldValue<'a>) -> bool {
        eval(&self.root, value)
    }
}

fn eval<'a>(node: &Node, value: &dyn Fn(usize) -> FieldValue<'a>) -> bool {
    match node {
        Node::Or(left, right) => eval(left, value) || eval(right, value),
        Node::And(left, right) => eval(left, value) && eval(right, value),
        Node::Not(inner) => !eval(inner, value),
        Node::Number { source, op, value: operand } => {
            let actual = match source.read(value) {
                FieldValue::Unsigned(n) => i128::from(n),
                FieldValue::Signed(n) => i128::from(n),
                FieldValue::Str(_) | FieldValue::Missing => return false,
            };
            match op {
                Op::Eq => actual == *operand,
                Op::Ne => actual != *operand,
                Op::Lt => actual < *operand,
                Op::Le => actual <= *operand,
                Op::Gt => actual > *operand,
                Op::Ge => actual >= *operand,
                Op::BitAnd => actual & *operand != 0,
                Op::Glob | Op::NotGlob => false,
            }
        }
        Node::Cpus { source, op, cpus } => {
            let cpu = match source.read(value) {
                FieldValue::Unsigned(n) => Some(n),
                FieldValue::Signed(n) => u64::try_from(n).ok(),
                FieldValue::Str(_) | FieldValue::Missing => return false,
            };
            match op {
                Op::BitAnd => cpu.is_some_and(|cpu| cpus.contains(cpu)),
                Op::Ne => true,
                _ => false,
            }
        }
        Node::Text { source, op, value: operand } => {
            let FieldValue::Str(bytes) = source.read(value) else { return false };
            // Fixed-size fields (`comm`) end at their first NUL.
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let Ok(actual) = core::str::from_utf8(&bytes[..end]) else { return false };
            match op {
                Op::Eq => actual == operand,
                Op::Ne => actual != operand,
                Op::Glob => glob_match(operand, actual),
                Op::NotGlob => !glob_match(operand, actual),
                _ => false,
            }
        }
    }
}

/// An event's filter as tracing code reads it: published whole, replaced
/// whole (the old one freed after a grace period), read without a lock.
#[cfg(target_os = "none")]
pub struct FilterSlot {
    filter: ftrace::deferred::Published<EventFilter>,
    writers: arch::sync::Mutex<()>,
}

#[cfg(target_os = "none")]
impl Default for FilterSlot {
    fn default() -> FilterSlot {
        FilterSlot::new()
    }
}

#[cfg(target_os = "none")]
impl FilterSlot {
    /// No filter: every event passes.
    pub const fn new() -> FilterSlot {
        FilterSlot { filter: ftrace::deferred::Published::empty(), writers: arch::sync::Mutex::new(()) }
    }

    /// `echo EXPR > filter` (`0` clears). A bad filter changes nothing.
    pub fn set(&self, text: &str, fields: &[FilterField]) -> Result<(), FilterError> {
        let filter = match text.trim() {
            "0" => None,
            text => Some(EventFilter::parse(text, fields)?),
        };
        let _writers = self.writers.lock();
        self.filter.replace(filter);
        Ok(())
    }

    /// `cat filter`: the filter as written, or `none`.
    pub fn text(&self) -> String {
        let _writers = self.writers.lock();
        self.filter.read(|filter| filter.map_or_else(|| "none".to_string(), |filter| filter.text().to_string()))
    }

    /// Whether a filter is set (tracing code: take the filtering path).
    #[inline]
    pub fn is_set(&self) -> bool {
        self.filter.read(|filter| filter.is_some())
    }

    /// Whether an event passes (no filter: yes).
    ///
    /// The filter is read with interrupts masked, which the grace period
    /// before a replaced filter is freed waits for (its cross-CPU round).
    /// Callers are not all inside an entry trampoline, whose task counters
    /// the grace period also waits for: return callbacks (fprobe exit
    /// events) and the scheduler's tracepoints run outside one, and may be
    /// preempted.
    #[inline]
    pub fn passes<'a>(&self, value: &dyn Fn(usize) -> FieldValue<'a>) -> bool {
        let _irq = arch::irq::IrqGuard::new();
        self.filter.read(|filter| filter.is_none_or(|filter| filter.matches(value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    fn fields() -> Vec<FilterField> {
        alloc::vec![
            FilterField::new("pid", FieldKind::Signed),
            FilterField::new("comm", FieldKind::String),
            FilterField::new("state", FieldKind::Unsigned),
        ]
    }

    fn check(text: &str, pid: i64, comm: &str, state: u64) -> bool {
        let filter = EventFilter::parse(text, &fields()).unwrap();
        filter.matches(&|i| match i {
            0 => FieldValue::Signed(pid),
            1 => FieldValue::Str(comm.as_bytes()),
            _ => FieldValue::Unsigned(state),
        })
    }

    #[test]
    fn comparisons_and_globs_match_as_linux() {
        assert!(check("pid == 3", 3, "a", 0));
        assert!(!check("pid != 3", 3, "a", 0));
        assert!(check("pid < 4 && pid >= 3", 3, "a", 0));
        assert!(!check("pid > 3", 3, "a", 0));
        assert!(check("pid <= -1", -2, "a", 0));
        assert!(check("state & 0x2", 0, "a", 6));
        assert!(check("pid == 010", 8, "a", 0), "octal, as C writes it");
        assert!(check("pid == -010", -8, "a", 0));
        assert!(!check("state & 1", 0, "a", 6));
        assert!(check("comm ~ \"kw*\"", 0, "kworker", 0));
        assert!(!check("comm == 'kw'", 0, "kworker", 0));
        assert!(check("comm != 'kw'", 0, "kworker", 0));
        assert!(check("state == 0xffffffffffffffff", 0, "a", u64::MAX), "the whole unsigned range");
    }

    #[test]
    fn a_glob_starting_with_a_bang_matches_what_the_rest_does_not() {
        assert!(!check("comm ~ \"!kw*\"", 0, "kworker", 0));
        assert!(check("comm ~ \"!kw*\"", 0, "shell", 0));
        assert!(!check("comm == \"!kw\"", 0, "kw", 0), "only a glob: == compares the text");
        assert!(check("comm == \"!kw\"", 0, "!kw", 0));
        let filter = EventFilter::parse("comm ~ \"!kw*\"", &fields()).unwrap();
        assert!(!filter.matches(&|_| FieldValue::Missing), "a value not read matches neither");
    }

    #[test]
    fn and_binds_tighter_than_or_and_parentheses_group() {
        assert!(check("pid == 1 || pid == 2 && comm == 'x'", 1, "y", 0));
        assert!(!check("(pid == 1 || pid == 2) && comm == 'x'", 1, "y", 0));
        assert!(check("!(pid == 1)", 2, "y", 0));
        assert!(check("!pid == 1 && (comm == 'y')", 2, "y", 0));
    }

    #[test]
    fn nul_padded_strings_compare_up_to_the_nul() {
        let filter = EventFilter::parse("comm == \"sh\"", &fields()).unwrap();
        assert!(filter.matches(&|_| FieldValue::Str(b"sh\0\0\0\0")));
        assert!(!filter.matches(&|_| FieldValue::Missing));
    }

    /// The kind, the offset Linux reports (its caret) and the word there.
    fn refusal(text: &str) -> (FilterErrorKind, usize, String) {
        let error = EventFilter::parse(text, &fields()).unwrap_err();
        (error.kind, error.at, error.word)
    }

    #[test]
    fn bad_filters_are_refused_with_linuxs_reason_and_place() {
        use FilterErrorKind::*;
        let refused = |text, kind, at, word: &str| assert_eq!(refusal(text), (kind, at, word.into()), "{text}");
        refused("", Empty, 0, "");
        // A comparison's places one byte on, as Linux's parser counts them.
        refused("cpus == 1", FieldNotFound, 5, "cpus");
        refused("pid == 1 && nosuch == 1", FieldNotFound, 19, "nosuch");
        refused("CPU ~ 1", IllegalFieldOp, 7, "1");
        refused("COMM < 1", ExpectString, 8, "1");
        refused("comm == 3", ExpectString, 9, "3");
        refused("comm < \"x\"", IllegalFieldOp, 8, "\"");
        refused("pid ~ 3*", IllegalFieldOp, 7, "3*");
        refused("pid == x", InvalidValue, 8, "x");
        refused("comm == sh", InvalidValue, 9, "sh");
        refused("pid == \"1\"", ExpectDigit, 8, "\"");
        refused("state == -1", IllegalIntval, 10, "-1");
        refused("pid == 0x", IllegalIntval, 8, "0x");
        refused("pid == 9223372036854775808", IllegalIntval, 8, "9223372036854775808");
        refused("pid = 1", InvalidOp, 5, "=");
        refused("pid", InvalidOp, 4, "");
        // The first look: quotes and parentheses, where they are.
        refused("(pid == 1", TooManyOpen, 0, "(");
        refused("(pid == 1) && ((pid == 2)", TooManyOpen, 14, "(");
        refused("pid == 0)", TooManyClose, 8, ")");
        refused("comm == \"open", MissingQuote, 8, "\"");
        // What follows a comparison, at its place.
        refused("pid == 1 pid", TooManyPreds, 9, "pid");
        refused("(pid == 1) pid == 2", TooManyPreds, 11, "pid");
        refused("pid == 1 & pid == 2", TooManyPreds, 9, "&");
        refused("pid == 1 &&", Unfinished, 11, "");
        refused("pid == 1 && !", Unfinished, 13, "");
        refused("CPU & 1", IllegalFieldOp, 7, "1");
        refused("!", NoFilter, 1, "");
        refused("pid == 1 && == 2", Error, 0, "==");
    }

    #[test]
    fn an_error_says_linuxs_reason_and_the_word() {
        let message = |text| EventFilter::parse(text, &fields()).unwrap_err().to_string();
        assert_eq!(message("nosuch == 1"), "Field not found: 'nosuch' (see the event's format)");
        assert_eq!(message("comm == sh"), "Invalid value (did you forget quotes)?: 'sh'");
        assert_eq!(message(" "), "Error: an empty filter (write 0 to clear it)");
    }

    #[test]
    fn generic_fields_read_the_recording_cpu_and_task_after_the_events_own() {
        // The host's stand-ins: CPU 1, task "host"; the event's comm is "ev".
        assert!(check("CPU == 1 && cpu == 1 && common_cpu < 2", 0, "ev", 0));
        assert!(!check("CPU == 0", 0, "ev", 0));
        assert!(check("COMM == 'host' && COMM ~ \"ho*\"", 0, "ev", 0));
        assert!(check("comm == 'ev'", 0, "ev", 0), "the event's own field first");
        let no_comm = EventFilter::parse("comm == 'host'", &fields()[..1]).unwrap();
        assert!(no_comm.matches(&|_| FieldValue::Signed(0)), "generic where the event has none");
    }

    #[test]
    fn cpus_lists_match_a_cpu_field_or_the_recording_cpu_as_linux() {
        // The host's stand-in CPU is 1; `state` holds a CPU number here,
        // `pid` a negative one (no CPU).
        let cases = [
            ("CPU & CPUS{0-1,3}", 0, true),
            ("CPU & CPUS{2-3,5}", 0, false),
            ("state & CPUS{2,4,6,8-32}", 17, true),
            ("state & CPUS{2,4,6,8-32}", 7, false),
            // One CPU is that CPU: `&` is `==`.
            ("CPU & CPUS{1}", 0, true),
            ("CPU == CPUS{1}", 0, true),
            ("CPU & CPUS{0}", 0, false),
            ("CPU != CPUS{0}", 0, true),
            // Several CPUs: a number is never equal to them all.
            ("state == CPUS{1-2}", 1, false),
            ("state != CPUS{1-2}", 1, true),
            ("pid & CPUS{0-3}", 0, false),
            ("(CPU & CPUS{1,2}) && state == 3", 3, true),
        ];
        for (filter, state, matches) in cases {
            assert_eq!(check(filter, -1, "a", state), matches, "{filter} with state {state}");
        }
        assert_eq!(EventFilter::parse("CPU & CPUS{0-1}", &fields()).unwrap().text(), "CPU & CPUS{0-1}");
    }

    #[test]
    fn bad_cpus_lists_are_refused_with_linuxs_reason_and_place() {
        // Linux's places, one past the byte (see `Parser::misplaced`).
        assert_eq!(refusal("comm & CPUS{1}"), (FilterErrorKind::IllegalFieldOp, 8, "CPUS{1}".into()));
        assert_eq!(refusal("CPU < CPUS{1}").0, FilterErrorKind::IllegalFieldOp);
        assert_eq!(refusal("CPU & CPUS 1"), (FilterErrorKind::MissingBraceOpen, 12, "1".into()));
        assert_eq!(refusal("CPU & CPUS{1"), (FilterErrorKind::MissingBraceClose, 13, String::new()));
        for bad in ["CPU & CPUS{}", "CPU & CPUS{a}", "CPU & CPUS{3-1}", "CPU & CPUS{1,}", "CPU & CPUS{0-9:2/5}"] {
            assert_eq!(refusal(bad).0, FilterErrorKind::InvalidCpulist, "{bad}");
        }
        assert_eq!(refusal("CPU & CPUS{}").1, 12, "at the closing brace");
        assert_eq!(FilterErrorKind::InvalidCpulist.text(), "Invalid cpulist");
    }

    #[test]
    fn any_whitespace_separates_tokens() {
        // A no-break space (as pasted from a web page) is whitespace too:
        // the tokenizer once stood still on it, pushing empty words.
        assert!(check("pid ==\u{a0}1", 1, "x", 0));
        assert!(check("pid\u{3000}==\u{2028}1", 1, "x", 0));
    }

    #[test]
    fn nesting_and_size_are_bounded() {
        let parse = |text: &str| EventFilter::parse(text, &fields());
        let nested = |depth: usize| format!("{}pid == 1{}", "(".repeat(depth), ")".repeat(depth));
        assert!(parse(&nested(MAX_NESTING)).is_ok());
        let kind = |text: &str| parse(text).unwrap_err().kind;
        assert_eq!(kind(&nested(MAX_NESTING + 1)), FilterErrorKind::TooDeep);
        assert_eq!(kind(&format!("{}pid == 1", "!".repeat(200))), FilterErrorKind::TooDeep);
        assert_eq!(kind(&"(".repeat(300)), FilterErrorKind::TooManyOpen, "found without recursing");
        let chain = |n: usize| alloc::vec!["pid == 1"; n].join(" && ");
        assert!(parse(&chain(MAX_PREDICATES)).is_ok());
        assert_eq!(kind(&chain(MAX_PREDICATES + 1)), FilterErrorKind::TooManyPreds);
    }
}
