//! The patterns `grep` matches: POSIX regular expressions, basic and
//! extended, as GNU grep reads them, without intervals, word boundaries and
//! back-references.
//!
//! What is understood: literal characters, `.`, bracket expressions
//! (`[abc]`, `[a-z]`, `[^0-9]`, `[[:digit:]]` and the other POSIX
//! classes), GNU's `\w`, `\W`, `\s`, `\S`, groups, alternatives, `*`, `+`
//! and `?` after any of those, `^` and `$` anchors, and `\` before another
//! character to take it literally. Extended patterns (`grep -E`) write
//! groups `( )`, alternatives `|`, `+` and `?` bare; basic ones write them
//! `\( \)`, `\|`, `\+`, `\?`, take `^` (`$`) as an anchor only at the
//! start (end) of a branch, and a quantifier with nothing to repeat as a
//! literal (in extended ones it repeats the empty string). Intervals, word
//! boundaries and back-references are an error, not a silent mismatch (as
//! is a range that runs backwards, `[z-a]`, or `[:space:]` outside a
//! bracket).
//!
//! A pattern is parsed by recursive descent into a tree (`Node`), compiled
//! into a Thompson NFA (`State`s) and matched by stepping the set of states
//! reached through the line, one character at a time: time proportional to
//! the line times the pattern, so no pattern typed at the console can make
//! a match take long. The tree is at most [`MAX_NESTING`] groups deep, with
//! one quantifier a level (stacked ones, `a+*?`, are merged), so parsing,
//! compiling and dropping it recurse only so deep.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Why a pattern was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// A `[` without its `]`.
    UnclosedBracket,
    /// A range whose end is before its start (`[z-a]`).
    BadRange,
    /// `[[:name:]]` with an unknown name.
    BadClass(String),
    /// A `\` as the last character.
    TrailingBackslash,
    /// A construct this matcher does not have (intervals, word
    /// boundaries, back-references).
    Unsupported(&'static str),
    /// A group not closed, or a `\)` that closes none.
    UnmatchedGroup,
    /// Groups inside groups past [`MAX_NESTING`].
    TooDeep,
    /// `[:space:]` outside a bracket.
    BareClass,
}

/// The deepest group nesting a pattern may have.
pub const MAX_NESTING: usize = 16;

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::UnclosedBracket => f.write_str("unmatched [ in the pattern"),
            PatternError::BadRange => f.write_str("invalid range end in the pattern"),
            PatternError::BadClass(name) => write!(f, "no character class '{name}'"),
            PatternError::TrailingBackslash => f.write_str("trailing backslash in the pattern"),
            PatternError::Unsupported(what) => write!(f, "{what} are not supported in patterns"),
            PatternError::UnmatchedGroup => f.write_str("unmatched ( or ) in the pattern"),
            PatternError::TooDeep => write!(f, "groups nested deeper than {MAX_NESTING} in the pattern"),
            PatternError::BareClass => f.write_str("a character class is written [[:space:]], not [:space:]"),
        }
    }
}

/// How a pattern is read: `grep`'s `-E`, `-F` or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Basic,
    Extended,
    Fixed,
}

/// One character class.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Atom {
    Char(char),
    Any,
    /// Inclusive ranges (a single character is a range of one), negated
    /// or not.
    Set {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
}

impl Atom {
    fn matches(&self, c: char, fold: bool) -> bool {
        match self {
            Atom::Char(want) => *want == c || (fold && want.eq_ignore_ascii_case(&c)),
            Atom::Any => true,
            Atom::Set { ranges, negated } => {
                let within = |c: char| ranges.iter().any(|&(low, high)| (low..=high).contains(&c));
                let hit = within(c) || (fold && (within(c.to_ascii_lowercase()) || within(c.to_ascii_uppercase())));
                hit != *negated
            }
        }
    }
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    /// Matches the empty string (an empty pattern or branch).
    Empty,
    Atom(Atom),
    /// `^`: the line's start.
    Start,
    /// `$`: the line's end.
    End,
    Concat(Vec<Node>),
    Alternatives(Vec<Node>),
    /// `*`.
    Star(Box<Node>),
    /// `+`.
    Plus(Box<Node>),
    /// `?`.
    Optional(Box<Node>),
}

/// One NFA state: what it needs to go on, and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Consumes a character `atom` matches.
    Atom(Atom, usize),
    /// Goes both ways without consuming.
    Split(usize, usize),
    /// Goes on only at the line's start.
    Start(usize),
    /// Goes on only at the line's end.
    End(usize),
    Match,
}

/// A compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    states: Vec<State>,
    entry: usize,
    fold_case: bool,
}

impl Pattern {
    /// Compiles `text` read as `syntax`; `fold_case` is `grep -i`.
    pub fn new(text: &str, syntax: Syntax, fold_case: bool) -> Result<Pattern, PatternError> {
        let chars: Vec<char> = text.chars().collect();
        let node = match syntax {
            Syntax::Fixed => Node::Concat(chars.iter().map(|&c| Node::Atom(Atom::Char(c))).collect()),
            _ => {
                let mut parser = Parser { chars: &chars, at: 0, extended: syntax == Syntax::Extended };
                let node = parser.alternatives(0)?;
                if parser.at < chars.len() {
                    // Only a `\)` closing no group stops the top level.
                    return Err(PatternError::UnmatchedGroup);
                }
                node
            }
        };
        let mut states = alloc::vec![State::Match];
        let entry = compile(&node, 0, &mut states);
        Ok(Pattern { states, entry, fold_case })
    }

    /// Whether the pattern matches somewhere in `line`.
    pub fn is_match(&self, line: &str) -> bool {
        let count = self.states.len();
        let (mut current, mut next) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let mut seen = alloc::vec![usize::MAX; count];
        let mut stack = Vec::new();
        let chars: Vec<char> = line.chars().collect();
        for at in 0..=chars.len() {
            // Unanchored: a match may start at every position.
            if self.add(self.entry, at, chars.len(), &mut current, &mut seen, &mut stack) {
                return true;
            }
            let Some(&c) = chars.get(at) else { break };
            next.clear();
            for &state in &current {
                if let State::Atom(atom, to) = &self.states[state] {
                    if atom.matches(c, self.fold_case) && self.add(*to, at + 1, chars.len(), &mut next, &mut seen, &mut stack) {
                        return true;
                    }
                }
            }
            core::mem::swap(&mut current, &mut next);
        }
        false
    }

    /// Adds `state` and what it reaches without consuming, at position
    /// `at` of a line of `len` characters, to `list` (each state once a
    /// position: `seen` holds the position it was last added at). Answers
    /// whether the match state is reached.
    fn add(
        &self,
        state: usize,
        at: usize,
        len: usize,
        list: &mut Vec<usize>,
        seen: &mut [usize],
        stack: &mut Vec<usize>,
    ) -> bool {
        stack.clear();
        stack.push(state);
        while let Some(state) = stack.pop() {
            if seen[state] == at {
                continue;
            }
            seen[state] = at;
            match self.states[state] {
                State::Match => return true,
                State::Atom(..) => list.push(state),
                State::Split(first, second) => {
                    stack.push(second);
                    stack.push(first);
                }
                State::Start(to) if at == 0 => stack.push(to),
                State::End(to) if at == len => stack.push(to),
                State::Start(_) | State::End(_) => {}
            }
        }
        false
    }
}

/// Compiles `node` to states that go on to `next`; answers its entry.
/// Built backwards, each state pointing at states already made.
fn compile(node: &Node, next: usize, states: &mut Vec<State>) -> usize {
    fn push(states: &mut Vec<State>, state: State) -> usize {
        states.push(state);
        states.len() - 1
    }
    match node {
        Node::Empty => next,
        Node::Atom(atom) => push(states, State::Atom(atom.clone(), next)),
        Node::Start => push(states, State::Start(next)),
        Node::End => push(states, State::End(next)),
        Node::Concat(nodes) => nodes.iter().rev().fold(next, |next, node| compile(node, next, states)),
        Node::Alternatives(branches) => {
            let mut entries = branches.iter().map(|branch| compile(branch, next, states)).collect::<Vec<_>>();
            let last = entries.pop().unwrap_or(next);
            entries.into_iter().rev().fold(last, |rest, entry| push(states, State::Split(entry, rest)))
        }
        Node::Star(inner) | Node::Plus(inner) => {
            // The loop: a split back into the body or on.
            let split = push(states, State::Split(next, next));
            let body = compile(inner, split, states);
            states[split] = State::Split(body, next);
            if matches!(node, Node::Star(_)) {
                split
            } else {
                body
            }
        }
        Node::Optional(inner) => {
            let body = compile(inner, next, states);
            push(states, State::Split(body, next))
        }
    }
}

/// A recursive-descent parser over a pattern's characters.
struct Parser<'a> {
    chars: &'a [char],
    at: usize,
    extended: bool,
}

impl Parser<'_> {
    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.at + offset).copied()
    }

    /// Whether an operator written `c` in extended and `\c` in basic
    /// patterns comes next; consumes it if so.
    fn operator(&mut self, c: char) -> bool {
        let width = match self.extended {
            true if self.peek(0) == Some(c) => 1,
            false if self.peek(0) == Some('\\') && self.peek(1) == Some(c) => 2,
            _ => return false,
        };
        self.at += width;
        true
    }

    /// Whether a group closes next (not consumed).
    fn closes(&self) -> bool {
        match self.extended {
            true => self.peek(0) == Some(')'),
            false => self.peek(0) == Some('\\') && self.peek(1) == Some(')'),
        }
    }

    /// `branch|branch|...` at group depth `depth`.
    fn alternatives(&mut self, depth: usize) -> Result<Node, PatternError> {
        let mut branches = alloc::vec![self.branch(depth)?];
        while self.operator('|') {
            branches.push(self.branch(depth)?);
        }
        Ok(match branches.len() {
            1 => branches.pop().unwrap_or(Node::Empty),
            _ => Node::Alternatives(branches),
        })
    }

    /// One branch: pieces up to a `|`, a group's close or the end.
    fn branch(&mut self, depth: usize) -> Result<Node, PatternError> {
        let mut pieces = Vec::new();
        loop {
            let at_bar = match self.extended {
                true => self.peek(0) == Some('|'),
                false => self.peek(0) == Some('\\') && self.peek(1) == Some('|'),
            };
            // An extended `)` closing no group is a literal, as GNU grep
            // takes it.
            if self.peek(0).is_none() || at_bar || (self.closes() && (depth > 0 || !self.extended)) {
                break;
            }
            let first = pieces.is_empty();
            let piece = self.piece(depth, first)?;
            pieces.push(piece);
        }
        Ok(match pieces.len() {
            0 => Node::Empty,
            1 => pieces.pop().unwrap_or(Node::Empty),
            _ => Node::Concat(pieces),
        })
    }

    /// An atom and its quantifiers.
    fn piece(&mut self, depth: usize, first: bool) -> Result<Node, PatternError> {
        let node = self.atom(depth, first)?;
        // A basic `^` repeats nothing: what follows it starts the branch
        // (`^*` is a literal `*` after the anchor).
        if node == Node::Start && !self.extended {
            return Ok(node);
        }
        // Stacked quantifiers merge into one (`a+?` is `a*`, `a??` is
        // `a?`), so a run of them adds one level to the tree, not many.
        let mut quantifier: Option<char> = None;
        loop {
            let next = if self.peek(0) == Some('*') {
                self.at += 1;
                '*'
            } else if self.operator('+') {
                '+'
            } else if self.operator('?') {
                '?'
            } else if self.interval_follows() {
                return Err(PatternError::Unsupported("intervals"));
            } else {
                break;
            };
            quantifier = Some(match quantifier {
                None => next,
                Some(same) if same == next => same,
                Some(_) => '*',
            });
        }
        Ok(match quantifier {
            Some('*') => Node::Star(Box::new(node)),
            Some('+') => Node::Plus(Box::new(node)),
            Some(_) => Node::Optional(Box::new(node)),
            None => node,
        })
    }

    /// One atom; `first` in its branch (where a basic `^` anchors, and an
    /// extended quantifier repeats the empty string).
    fn atom(&mut self, depth: usize, first: bool) -> Result<Node, PatternError> {
        let Some(c) = self.peek(0) else { return Ok(Node::Empty) };
        // A group.
        let opens = match self.extended {
            true => c == '(',
            false => c == '\\' && self.peek(1) == Some('('),
        };
        if opens {
            if depth == MAX_NESTING {
                return Err(PatternError::TooDeep);
            }
            self.at += if self.extended { 1 } else { 2 };
            let inner = self.alternatives(depth + 1)?;
            if !self.closes() {
                return Err(PatternError::UnmatchedGroup);
            }
            self.at += if self.extended { 1 } else { 2 };
            return Ok(inner);
        }
        self.at += 1;
        let atom = match c {
            '^' if self.extended || first => return Ok(Node::Start),
            '$' if self.extended || self.ends_branch() => return Ok(Node::End),
            // A quantifier with nothing before it: an extended one repeats
            // the empty string, as GNU grep reads it (a basic `*` reaches
            // here only so placed, and is a literal below).
            '*' | '+' | '?' if self.extended && first => {
                self.at -= 1;
                return Ok(Node::Empty);
            }
            '{' if self.extended && first && is_interval(&self.chars[self.at..]) => {
                return Err(PatternError::Unsupported("intervals"))
            }
            '.' => Atom::Any,
            '[' => {
                let (set, next) = bracket(self.chars, self.at)?;
                // `[:space:]` alone is a mistake GNU grep refuses.
                let inner = &self.chars[self.at..next - 1];
                if inner.len() >= 2 && inner.first() == Some(&':') && inner.last() == Some(&':') {
                    return Err(PatternError::BareClass);
                }
                self.at = next;
                set
            }
            '\\' => {
                let Some(next) = self.peek(0) else { return Err(PatternError::TrailingBackslash) };
                self.at += 1;
                match next {
                    '1'..='9' => return Err(PatternError::Unsupported("back-references")),
                    'b' | 'B' | '<' | '>' => return Err(PatternError::Unsupported("word boundaries")),
                    'w' | 'W' => Atom::Set { ranges: word_ranges(), negated: next == 'W' },
                    's' | 'S' => Atom::Set { ranges: class_ranges("space").unwrap_or_default(), negated: next == 'S' },
                    other => Atom::Char(other),
                }
            }
            other => Atom::Char(other),
        };
        Ok(Node::Atom(atom))
    }

    /// Whether an interval comes next: `{N,M}` (extended; a `{` that
    /// starts none is a literal), `\{` (basic).
    fn interval_follows(&self) -> bool {
        match self.extended {
            true => self.peek(0) == Some('{') && is_interval(&self.chars[self.at + 1..]),
            false => self.peek(0) == Some('\\') && self.peek(1) == Some('{'),
        }
    }

    /// Whether the branch ends right here (after a basic `$`).
    fn ends_branch(&self) -> bool {
        self.peek(0).is_none() || (self.peek(0) == Some('\\') && matches!(self.peek(1), Some('|' | ')')))
    }
}

/// The bracket expression starting after the `[` at `chars[at - 1]`, and
/// where the pattern goes on after its `]`.
fn bracket(chars: &[char], mut at: usize) -> Result<(Atom, usize), PatternError> {
    let negated = chars.get(at) == Some(&'^');
    if negated {
        at += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let Some(&c) = chars.get(at) else { return Err(PatternError::UnclosedBracket) };
        if c == ']' && !first {
            return Ok((Atom::Set { ranges, negated }, at + 1));
        }
        first = false;
        // `[:name:]`: a POSIX class.
        if c == '[' && chars.get(at + 1) == Some(&':') {
            let rest: String = chars[at + 2..].iter().collect();
            let Some(end) = rest.find(":]") else { return Err(PatternError::UnclosedBracket) };
            let name = &rest[..end];
            ranges.extend(class_ranges(name).ok_or_else(|| PatternError::BadClass(name.into()))?);
            at += 2 + name.chars().count() + 2;
            continue;
        }
        // `a-z`, unless the `-` is last (`[a-]`).
        match (chars.get(at + 1), chars.get(at + 2)) {
            (Some('-'), Some(&high)) if high != ']' => {
                if high < c {
                    return Err(PatternError::BadRange);
                }
                ranges.push((c, high));
                at += 3;
            }
            _ => {
                ranges.push((c, c));
                at += 1;
            }
        }
    }
}

/// The characters of POSIX class `name` (`[[:name:]]`), as ranges.
fn class_ranges(name: &str) -> Option<Vec<(char, char)>> {
    let ranges: &[(char, char)] = match name {
        "digit" => &[('0', '9')],
        "xdigit" => &[('0', '9'), ('a', 'f'), ('A', 'F')],
        "lower" => &[('a', 'z')],
        "upper" => &[('A', 'Z')],
        "alpha" => &[('a', 'z'), ('A', 'Z')],
        "alnum" => &[('a', 'z'), ('A', 'Z'), ('0', '9')],
        "space" => &[(' ', ' '), ('\t', '\r')],
        "blank" => &[(' ', ' '), ('\t', '\t')],
        "punct" => &[('!', '/'), (':', '@'), ('[', '`'), ('{', '~')],
        "print" => &[(' ', '~')],
        "graph" => &[('!', '~')],
        "cntrl" => &[('\0', '\x1f'), ('\x7f', '\x7f')],
        _ => return None,
    };
    Some(ranges.to_vec())
}

/// GNU's `\w`: letters, digits and `_`.
fn word_ranges() -> Vec<(char, char)> {
    alloc::vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')]
}

/// Whether `rest` (after a `{`) reads as an interval's `N}`, `N,}`, `,M}`
/// or `N,M}`.
fn is_interval(rest: &[char]) -> bool {
    let Some(end) = rest.iter().position(|&c| c == '}') else { return false };
    let body = &rest[..end];
    let commas = body.iter().filter(|&&c| c == ',').count();
    body.iter().any(char::is_ascii_digit) && commas <= 1 && body.iter().all(|&c| c == ',' || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, syntax: Syntax, line: &str) -> bool {
        Pattern::new(pattern, syntax, false).unwrap().is_match(line)
    }

    #[test]
    fn literals_and_anchors() {
        assert!(matches("fib", Syntax::Basic, "kernel::workload::fib"));
        assert!(!matches("fob", Syntax::Basic, "kernel::workload::fib"));
        assert!(matches("^kernel", Syntax::Basic, "kernel::workload::fib"));
        assert!(!matches("^workload", Syntax::Basic, "kernel::workload::fib"));
        assert!(matches("fib$", Syntax::Basic, "kernel::workload::fib"));
        assert!(!matches("fib$", Syntax::Basic, "kernel::workload::fib_x"));
        assert!(matches("^kernel::workload::fib$", Syntax::Basic, "kernel::workload::fib"));
        assert!(matches("", Syntax::Basic, "anything"), "the empty pattern matches every line");
        assert!(matches("^$", Syntax::Basic, ""));
        assert!(!matches("^$", Syntax::Basic, "x"));
        assert!(matches("a\\$", Syntax::Basic, "cost a$ b"), "an escaped $ is literal");
    }

    #[test]
    fn dots_stars_and_brackets() {
        assert!(matches("w.rk", Syntax::Basic, "workload"));
        assert!(matches("fi*b", Syntax::Basic, "fb"));
        assert!(matches("fi*b", Syntax::Basic, "fiiib"));
        assert!(matches("k.*fib", Syntax::Basic, "kernel::workload::fib"));
        assert!(matches("cpu[0-3]", Syntax::Basic, "per_cpu/cpu2/trace"));
        assert!(!matches("cpu[0-1]$", Syntax::Basic, "cpu2"));
        assert!(matches("[^a-z]", Syntax::Basic, "abc1"));
        assert!(!matches("^[^a-z]*$", Syntax::Basic, "abc"));
        assert!(matches("[]x]", Syntax::Basic, "a]b"), "a ] first in brackets is a member");
        assert!(matches("[a-]", Syntax::Basic, "-"));
        assert!(matches("*fib", Syntax::Basic, "*fib"), "a leading * is literal");
    }

    #[test]
    fn extended_and_basic_alternatives() {
        assert!(matches("fib|run", Syntax::Extended, "kernel::workload::run"));
        assert!(!matches("fib|run", Syntax::Basic, "kernel::workload::run"), "a bare | is literal in basic");
        assert!(matches("fib\\|run", Syntax::Basic, "kernel::workload::run"));
        assert!(matches("fi+b", Syntax::Extended, "fiib"));
        assert!(!matches("fi+b", Syntax::Extended, "fb"));
        assert!(matches("fi\\+b", Syntax::Basic, "fiib"));
        assert!(matches("fi?b", Syntax::Extended, "fb"));
        assert!(matches("^(a)", Syntax::Fixed, "x^(a)y"), "fixed strings are literal");
        assert!(matches("[|]", Syntax::Extended, "a|b"), "a | inside brackets is a member");
    }

    #[test]
    fn classes_and_braces() {
        assert!(matches("cpu[[:digit:]]$", Syntax::Basic, "cpu3"));
        assert!(!matches("^[[:digit:]]", Syntax::Basic, "x3"));
        assert!(matches("[^[:space:]]x", Syntax::Basic, " ax"));
        assert!(matches("\\w\\s\\W", Syntax::Basic, "a .."));
        assert!(!matches("^\\S", Syntax::Basic, " a"));
        assert!(matches("{closure", Syntax::Extended, "run::{closure#0}"), "a {{ that starts no interval is literal");
        assert!(matches("{shim:vtable#0}$", Syntax::Extended, "call_once::{shim:vtable#0}"));
        assert!(matches("{closure", Syntax::Basic, "run::{closure#0}"));
        assert!(matches("[[:digit:][]|x", Syntax::Extended, "x"), "a class's ] closes no bracket");
        assert!(matches("[[:space:]|]", Syntax::Extended, "a|b"));
    }

    #[test]
    fn groups_and_alternatives_nest() {
        assert!(matches("^kernel::workload::(fib|run)$", Syntax::Extended, "kernel::workload::run"));
        assert!(!matches("^kernel::workload::(fib|run)$", Syntax::Extended, "kernel::workload::fs::run"));
        assert!(matches("^\\(ab\\)*c$", Syntax::Basic, "ababc"));
        assert!(!matches("^\\(ab\\)*c$", Syntax::Basic, "abac"));
        assert!(matches("x(a|b(c|d)+)?y", Syntax::Extended, "xbcdcy"));
        assert!(matches("x(a|b(c|d)+)?y", Syntax::Extended, "xy"));
        assert!(!matches("x(a|b(c|d)+)?y", Syntax::Extended, "xby"));
        assert!(matches("(^a|b$)", Syntax::Extended, "cab"), "anchors inside groups: b at the end");
        assert!(!matches("(^a|b$)", Syntax::Extended, "cbc"));
        assert!(matches("a||b", Syntax::Extended, "zzz"), "an empty alternative matches everywhere");
        assert!(matches("a)", Syntax::Extended, "a)"), "a ) closing no group is literal in extended");
        assert!(matches("a^b", Syntax::Basic, "a^b"), "a basic ^ inside a branch is literal");
        assert!(matches("a$b", Syntax::Basic, "a$b"));
        assert!(matches("\\(^a\\)", Syntax::Basic, "ab"), "a basic ^ first in a group anchors");
        assert!(matches("(a*)*b", Syntax::Extended, "aaab"), "a star of a star ends");
        assert!(matches("()", Syntax::Extended, "x"));
    }

    #[test]
    fn quantifiers_with_nothing_to_repeat_and_escaped_parentheses() {
        assert!(matches("fib\\(\\)", Syntax::Extended, "fib()"), "an extended \\) is a literal");
        assert!(!matches("^*ab", Syntax::Basic, "xab"), "a basic ^* is the anchor, then a literal *");
        assert!(matches("^*ab", Syntax::Basic, "*ab"));
        assert!(matches("^*$", Syntax::Basic, "*") && !matches("^*$", Syntax::Basic, "hello"));
        assert!(matches("^\\+x", Syntax::Basic, "+x"));
        assert!(matches("^\\{", Syntax::Basic, "{"));
        assert!(matches("*fib", Syntax::Extended, "kernel::workload::fib"), "an extended * repeats the empty string");
        assert!(matches("a|+b", Syntax::Extended, "b"));
        assert!(matches!(Pattern::new("{1}a", Syntax::Extended, false), Err(PatternError::Unsupported(_))));
        assert_eq!(Pattern::new("[:space:]", Syntax::Basic, false), Err(PatternError::BareClass));
    }

    #[test]
    fn stacked_quantifiers_merge() {
        let long = alloc::format!("a{}b", "+?*".repeat(160));
        let pattern = Pattern::new(&long, Syntax::Extended, false).unwrap();
        assert!(pattern.states.len() < 8, "one quantifier node: {} states", pattern.states.len());
        assert!(pattern.is_match("b") && pattern.is_match("aaab"));
        assert!(matches("^a??$", Syntax::Extended, "") && !matches("^a??$", Syntax::Extended, "aa"));
        assert!(matches("^a++$", Syntax::Extended, "aaa") && !matches("^a++$", Syntax::Extended, ""));
    }

    #[test]
    fn case_folding() {
        let pattern = Pattern::new("FIB", Syntax::Basic, true).unwrap();
        assert!(pattern.is_match("kernel::workload::fib"));
        let pattern = Pattern::new("[A-C]x", Syntax::Basic, true).unwrap();
        assert!(pattern.is_match("bx"));
    }

    #[test]
    fn what_is_not_supported_is_an_error() {
        assert_eq!(Pattern::new("[abc", Syntax::Basic, false), Err(PatternError::UnclosedBracket));
        assert_eq!(Pattern::new("abc\\", Syntax::Basic, false), Err(PatternError::TrailingBackslash));
        assert_eq!(Pattern::new("(a", Syntax::Extended, false), Err(PatternError::UnmatchedGroup));
        assert_eq!(Pattern::new("a\\)", Syntax::Basic, false), Err(PatternError::UnmatchedGroup));
        assert_eq!(Pattern::new(&("(".repeat(17) + &")".repeat(17)), Syntax::Extended, false), Err(PatternError::TooDeep));
        assert!(Pattern::new(&("(".repeat(16) + "a" + &")".repeat(16)), Syntax::Extended, false).is_ok());
        assert!(matches!(Pattern::new("a\\{2\\}", Syntax::Basic, false), Err(PatternError::Unsupported(_))));
        assert!(matches!(Pattern::new("a\\1", Syntax::Basic, false), Err(PatternError::Unsupported(_))));
        assert!(matches!(Pattern::new("\\<fib\\>", Syntax::Basic, false), Err(PatternError::Unsupported(_))));
        assert!(matches!(Pattern::new("a{2}", Syntax::Extended, false), Err(PatternError::Unsupported(_))));
        assert_eq!(Pattern::new("[z-a]", Syntax::Basic, false), Err(PatternError::BadRange));
        assert_eq!(Pattern::new("[[:digits:]]", Syntax::Basic, false), Err(PatternError::BadClass("digits".into())));
        assert_eq!(Pattern::new("[[:digit:", Syntax::Basic, false), Err(PatternError::UnclosedBracket));
        assert!(matches("(a)", Syntax::Basic, "(a)"), "bare parentheses are literal in basic");
    }

    #[test]
    fn random_patterns_never_panic() {
        // A fixed-seed generator over the characters that mean something.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let alphabet: Vec<char> = "ab^$.*+?|[]-\\(){}9:ws".chars().collect();
        for _ in 0..20_000 {
            let text: String = (0..next(24)).map(|_| alphabet[next(alphabet.len())]).collect();
            let line: String = (0..next(16)).map(|_| alphabet[next(alphabet.len())]).collect();
            for syntax in [Syntax::Basic, Syntax::Extended, Syntax::Fixed] {
                if let Ok(pattern) = Pattern::new(&text, syntax, next(2) == 0) {
                    let _ = pattern.is_match(&line);
                }
            }
        }
    }

    #[test]
    fn many_stars_stay_linear() {
        let pattern = Pattern::new(&".*".repeat(200), Syntax::Basic, false).unwrap();
        let line = "a".repeat(4000) + "!";
        let with_bang = Pattern::new(&(".*a".repeat(100) + "b"), Syntax::Basic, false).unwrap();
        assert!(pattern.is_match(&line));
        assert!(!with_bang.is_match(&line));
    }
}
