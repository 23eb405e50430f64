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
//! with `==`, `!=`, `<`, `<=`, `>`, `>=` and `&` (some bit set), in decimal
//! or `0x` hex (a quoted value is a string, refused there); strings with
//! `==`, `!=` and `~` (a glob: `*`, `?` and `[...]` classes, see
//! [`crate::glob`]), quoted or not.
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

use crate::glob::glob_match;

/// Where a [`FilterError::Syntax`] is when the filter ended too soon.
pub const END_OF_FILTER: &str = "end of filter";

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
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::BitAnd => "&",
            Op::Glob => "~",
        }
    }
}

/// Where a comparison reads its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The event's field at this index.
    Field(usize),
    /// The CPU recording the event (`CPU`, `cpu`, `common_cpu`).
    Cpu,
    /// The running task's name (`COMM`, `comm`).
    Comm,
}

impl Source {
    /// The source `name` names for an event with `fields`, and its kind.
    fn find(name: &str, fields: &[FilterField]) -> Option<(Source, FieldKind)> {
        if let Some(index) = fields.iter().position(|field| field.name == name) {
            return Some((Source::Field(index), fields[index].kind));
        }
        match name {
            "CPU" | "cpu" | "common_cpu" => Some((Source::Cpu, FieldKind::Signed)),
            "COMM" | "comm" => Some((Source::Comm, FieldKind::String)),
            _ => None,
        }
    }

    fn read<'a>(self, value: &dyn Fn(usize) -> FieldValue<'a>) -> FieldValue<'a> {
        match self {
            Source::Field(index) => value(index),
            Source::Cpu => FieldValue::Signed(generic::cpu() as i64),
            Source::Comm => generic::comm().map_or(FieldValue::Missing, |comm| FieldValue::Str(comm)),
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
        crate::task::try_current().map(|task| &task.comm_bytes()[..])
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
    Number { source: Source, op: Op, value: i128 },
    Text { source: Source, op: Op, value: String },
}

/// A parsed filter: the text as written, and its tree.
#[derive(Debug)]
pub struct EventFilter {
    text: String,
    root: Node,
}

/// Why a filter was refused; the event's filter is as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterError {
    Empty,
    UnknownField(String),
    /// An operator the field's type has no meaning for.
    BadOperator {
        field: String,
        op: &'static str,
    },
    BadNumber {
        field: String,
        value: String,
    },
    /// A field no filter compares (an array).
    NotComparable(String),
    /// Anything else the grammar does not allow, at this token.
    Syntax(String),
    /// More than [`MAX_NESTING`] levels of `(` and `!`, or more than
    /// [`MAX_PREDICATES`] comparisons: the parser and the traced path's
    /// evaluation recurse that deep.
    TooComplex,
}

/// The deepest nesting of `(` and `!` a filter may have.
pub const MAX_NESTING: usize = 16;
/// The most comparisons one filter may hold.
pub const MAX_PREDICATES: usize = 32;

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::Empty => write!(f, "empty filter (write 0 to clear it)"),
            FilterError::UnknownField(name) => write!(f, "no field '{name}' in this event (see its format)"),
            FilterError::NotComparable(name) => write!(f, "field '{name}' is an array: filters compare single values"),
            FilterError::BadOperator { field, op } => write!(f, "'{op}' does not apply to field '{field}'"),
            FilterError::BadNumber { field, value } => write!(f, "'{value}' is not a number for field '{field}'"),
            FilterError::Syntax(at) => write!(f, "syntax error at '{at}'"),
            FilterError::TooComplex => {
                write!(f, "filter too complex (at most {MAX_NESTING} levels of '(' and '!', {MAX_PREDICATES} comparisons)")
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Op(Op),
    And,
    Or,
    Not,
    Open,
    Close,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(word) => write!(f, "{word}"),
            Token::Quoted(text) => write!(f, "\"{text}\""),
            Token::Op(op) => write!(f, "{}", op.symbol()),
            Token::And => write!(f, "&&"),
            Token::Or => write!(f, "||"),
            Token::Not => write!(f, "!"),
            Token::Open => write!(f, "("),
            Token::Close => write!(f, ")"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, FilterError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        // Any whitespace separates, as the word scanner below treats it:
        // a word there would be empty, and the scan would not move.
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        let next = bytes.get(i + 1).copied();
        let (token, len) = match (bytes[i], next) {
            (b'&', Some(b'&')) => (Token::And, 2),
            (b'|', Some(b'|')) => (Token::Or, 2),
            (b'=', Some(b'=')) => (Token::Op(Op::Eq), 2),
            (b'!', Some(b'=')) => (Token::Op(Op::Ne), 2),
            (b'<', Some(b'=')) => (Token::Op(Op::Le), 2),
            (b'>', Some(b'=')) => (Token::Op(Op::Ge), 2),
            (b'<', _) => (Token::Op(Op::Lt), 1),
            (b'>', _) => (Token::Op(Op::Gt), 1),
            (b'&', _) => (Token::Op(Op::BitAnd), 1),
            (b'~', _) => (Token::Op(Op::Glob), 1),
            (b'!', _) => (Token::Not, 1),
            (b'(', _) => (Token::Open, 1),
            (b')', _) => (Token::Close, 1),
            (quote @ (b'"' | b'\''), _) => {
                let end = text[i + 1..].find(quote as char).ok_or_else(|| FilterError::Syntax(text[i..].into()))?;
                (Token::Quoted(text[i + 1..i + 1 + end].into()), end + 2)
            }
            (b'=' | b'|', _) => return Err(FilterError::Syntax(text[i..].into())),
            _ => {
                let len = text[i..].find(|c: char| c.is_whitespace() || "()&|=!<>~\"'".contains(c)).unwrap_or(text.len() - i);
                (Token::Word(text[i..i + len].into()), len)
            }
        };
        tokens.push(token);
        i += len;
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    fields: &'a [FilterField],
    /// Levels of `(` and `!` open now.
    depth: usize,
    /// Comparisons parsed so far.
    predicates: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn error_here(&self) -> FilterError {
        match self.tokens.get(self.at.min(self.tokens.len())) {
            Some(token) => FilterError::Syntax(token.to_string()),
            None => FilterError::Syntax(END_OF_FILTER.into()),
        }
    }

    fn or(&mut self) -> Result<Node, FilterError> {
        let mut node = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            node = Node::Or(Box::new(node), Box::new(self.and()?));
        }
        Ok(node)
    }

    fn and(&mut self) -> Result<Node, FilterError> {
        let mut node = self.unary()?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            node = Node::And(Box::new(node), Box::new(self.unary()?));
        }
        Ok(node)
    }

    fn unary(&mut self) -> Result<Node, FilterError> {
        if matches!(self.peek(), Some(Token::Not | Token::Open)) {
            if self.depth == MAX_NESTING {
                return Err(FilterError::TooComplex);
            }
            self.depth += 1;
            let node = self.nested();
            self.depth -= 1;
            return node;
        }
        self.predicate()
    }

    /// `!` or `(`, one level down.
    fn nested(&mut self) -> Result<Node, FilterError> {
        match self.next() {
            Some(Token::Not) => Ok(Node::Not(Box::new(self.unary()?))),
            _ => {
                let node = self.or()?;
                match self.next() {
                    Some(Token::Close) => Ok(node),
                    _ => {
                        self.at -= 1;
                        Err(self.error_here())
                    }
                }
            }
        }
    }

    fn predicate(&mut self) -> Result<Node, FilterError> {
        self.predicates += 1;
        if self.predicates > MAX_PREDICATES {
            return Err(FilterError::TooComplex);
        }
        let Some(Token::Word(name)) = self.peek().cloned() else { return Err(self.error_here()) };
        self.at += 1;
        let (source, kind) = Source::find(&name, self.fields).ok_or(FilterError::UnknownField(name.clone()))?;
        let Some(Token::Op(op)) = self.peek().cloned() else { return Err(self.error_here()) };
        self.at += 1;
        let (value, quoted) = match self.next() {
            Some(Token::Word(value)) => (value, false),
            Some(Token::Quoted(value)) => (value, true),
            _ => {
                self.at -= 1;
                return Err(self.error_here());
            }
        };
        let bad_operator = || FilterError::BadOperator { field: name.clone(), op: op.symbol() };
        match kind {
            FieldKind::Array => Err(FilterError::NotComparable(name.clone())),
            FieldKind::String => match op {
                Op::Eq | Op::Ne | Op::Glob => Ok(Node::Text { source, op, value }),
                _ => Err(bad_operator()),
            },
            FieldKind::Unsigned | FieldKind::Signed => match op {
                Op::Glob => Err(bad_operator()),
                // A quoted value is a string, even one that spells a
                // number: refused, as Linux expects a numeric literal.
                _ => match parse_number(&value).filter(|_| !quoted) {
                    Some(number) => Ok(Node::Number { source, op, value: number }),
                    None => Err(FilterError::BadNumber {
                        field: name.clone(),
                        value: if quoted { alloc::format!("\"{value}\"") } else { value },
                    }),
                },
            },
        }
    }
}

fn parse_number(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    // As C writes it, as Linux's filter reads it (`kstrtoll`, base 0):
    // `010` is 8, `08` no number; a sign is `-` alone.
    let magnitude = crate::number::c_digits(digits)?;
    Some(if negative { -i128::from(magnitude) } else { i128::from(magnitude) })
}

impl EventFilter {
    /// Parses `text` against an event's `fields`.
    pub fn parse(text: &str, fields: &[FilterField]) -> Result<EventFilter, FilterError> {
        let text = text.trim();
        let tokens = tokenize(text)?;
        if tokens.is_empty() {
            return Err(FilterError::Empty);
        }
        let mut parser = Parser { tokens, at: 0, fields, depth: 0, predicates: 0 };
        let root = parser.or()?;
        if parser.at < parser.tokens.len() {
            return Err(parser.error_here());
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
                Op::Glob => false,
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
                _ => false,
            }
        }
    }
}

/// An event's filter as tracing code reads it: published whole, replaced
/// whole (the old one freed after a grace period), read without a lock.
#[cfg(target_os = "none")]
pub struct FilterSlot {
    filter: crate::deferred::Published<EventFilter>,
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
        FilterSlot { filter: crate::deferred::Published::empty(), writers: arch::sync::Mutex::new(()) }
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
        assert!(check("comm ~ kw*", 0, "kworker", 0));
        assert!(!check("comm == 'kw'", 0, "kworker", 0));
        assert!(check("comm != kw", 0, "kworker", 0));
    }

    #[test]
    fn and_binds_tighter_than_or_and_parentheses_group() {
        assert!(check("pid == 1 || pid == 2 && comm == x", 1, "y", 0));
        assert!(!check("(pid == 1 || pid == 2) && comm == x", 1, "y", 0));
        assert!(check("!(pid == 1)", 2, "y", 0));
    }

    #[test]
    fn nul_padded_strings_compare_up_to_the_nul() {
        let filter = EventFilter::parse("comm == sh", &fields()).unwrap();
        assert!(filter.matches(&|_| FieldValue::Str(b"sh\0\0\0\0")));
        assert!(!filter.matches(&|_| FieldValue::Missing));
    }

    #[test]
    fn bad_filters_are_refused_with_the_reason() {
        let parse = |text| EventFilter::parse(text, &fields()).unwrap_err();
        assert_eq!(parse(""), FilterError::Empty);
        assert_eq!(parse("cpus == 1"), FilterError::UnknownField("cpus".into()));
        assert_eq!(parse("CPU ~ 1"), FilterError::BadOperator { field: "CPU".into(), op: "~" });
        assert_eq!(parse("COMM < 1"), FilterError::BadOperator { field: "COMM".into(), op: "<" });
        assert_eq!(parse("comm < 3"), FilterError::BadOperator { field: "comm".into(), op: "<" });
        assert_eq!(parse("pid ~ 3*"), FilterError::BadOperator { field: "pid".into(), op: "~" });
        assert_eq!(parse("pid == x"), FilterError::BadNumber { field: "pid".into(), value: "x".into() });
        assert_eq!(parse("pid == \"1\""), FilterError::BadNumber { field: "pid".into(), value: "\"1\"".into() }, "a string");
        assert_eq!(parse("pid == 1 &&"), FilterError::Syntax("end of filter".into()));
        assert_eq!(parse("(pid == 1"), FilterError::Syntax("end of filter".into()));
        assert_eq!(parse("pid == 1 pid"), FilterError::Syntax("pid".into()));
        assert_eq!(parse("pid = 1"), FilterError::Syntax("= 1".into()));
        assert_eq!(parse("comm == \"open"), FilterError::Syntax("\"open".into()));
    }

    #[test]
    fn generic_fields_read_the_recording_cpu_and_task_after_the_events_own() {
        // The host's stand-ins: CPU 1, task "host"; the event's comm is "ev".
        assert!(check("CPU == 1 && cpu == 1 && common_cpu < 2", 0, "ev", 0));
        assert!(!check("CPU == 0", 0, "ev", 0));
        assert!(check("COMM == host && COMM ~ \"ho*\"", 0, "ev", 0));
        assert!(check("comm == ev", 0, "ev", 0), "the event's own field first");
        let no_comm = EventFilter::parse("comm == host", &fields()[..1]).unwrap();
        assert!(no_comm.matches(&|_| FieldValue::Signed(0)), "generic where the event has none");
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
        assert_eq!(parse(&nested(MAX_NESTING + 1)).unwrap_err(), FilterError::TooComplex);
        assert_eq!(parse(&format!("{}pid == 1", "!".repeat(200))).unwrap_err(), FilterError::TooComplex);
        assert_eq!(parse(&"(".repeat(300)).unwrap_err(), FilterError::TooComplex, "refused before the missing ')'");
        let chain = |n: usize| alloc::vec!["pid == 1"; n].join(" && ");
        assert!(parse(&chain(MAX_PREDICATES)).is_ok());
        assert_eq!(parse(&chain(MAX_PREDICATES + 1)).unwrap_err(), FilterError::TooComplex);
    }
}
