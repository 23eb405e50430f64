//! The patterns `grep` matches: a small regular-expression subset, matched
//! in time proportional to the line times the pattern (a set of positions
//! is stepped through the line, as Thompson's construction does), so no
//! pattern typed at the console can make a match take long.
//!
//! What is understood: literal characters, `.`, bracket expressions
//! (`[abc]`, `[a-z]`, `[^0-9]`, `[[:digit:]]` and the other POSIX
//! classes), GNU's `\w`, `\W`, `\s`, `\S`, `*` after any of those, `^` at
//! the start and `$` at the end, and `\` before another character to take
//! it literally. Extended patterns (`grep -E`) add `+`, `?` and
//! alternatives split by `|`; basic ones take `\|`, `\+` and `\?` for
//! those, as GNU grep does. There are no groups, intervals, word
//! boundaries or back-references: a pattern using them is an error, not a
//! silent mismatch (as is a range that runs backwards, `[z-a]`).

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
    /// A construct this matcher does not have (groups, intervals,
    /// back-references).
    Unsupported(&'static str),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::UnclosedBracket => f.write_str("unmatched [ in the pattern"),
            PatternError::BadRange => f.write_str("invalid range end in the pattern"),
            PatternError::BadClass(name) => write!(f, "no character class '{name}'"),
            PatternError::TrailingBackslash => f.write_str("trailing backslash in the pattern"),
            PatternError::Unsupported(what) => write!(f, "{what} are not supported in patterns"),
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

/// An atom and how often it may repeat: once, or any number of times
/// (`*`; `a+` is kept as `a` then `a*`, `a?` as an optional `a`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Step {
    atom: Atom,
    repeat: bool,
    optional: bool,
}

/// One alternative: its steps and anchors.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Branch {
    steps: Vec<Step>,
    at_start: bool,
    at_end: bool,
}

/// A compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    branches: Vec<Branch>,
    fold_case: bool,
}

impl Pattern {
    /// Compiles `text` read as `syntax`; `fold_case` is `grep -i`.
    pub fn new(text: &str, syntax: Syntax, fold_case: bool) -> Result<Pattern, PatternError> {
        let branches = match syntax {
            Syntax::Fixed => {
                let steps = text.chars().map(|c| Step { atom: Atom::Char(c), repeat: false, optional: false }).collect();
                alloc::vec![Branch { steps, at_start: false, at_end: false }]
            }
            _ => split_alternatives(text, syntax).iter().map(|branch| compile(branch, syntax)).collect::<Result<_, _>>()?,
        };
        Ok(Pattern { branches, fold_case })
    }

    /// Whether the pattern matches somewhere in `line`.
    pub fn is_match(&self, line: &str) -> bool {
        self.branches.iter().any(|branch| branch_matches(branch, line, self.fold_case))
    }
}

/// The alternatives of `text`: split at `|` (extended) or `\|` (basic)
/// outside brackets.
fn split_alternatives(text: &str, syntax: Syntax) -> Vec<String> {
    let mut branches = alloc::vec![String::new()];
    let mut chars = text.chars().peekable();
    let mut in_bracket = false;
    while let Some(c) = chars.next() {
        let current = branches.last_mut().expect("never empty");
        match c {
            '\\' if !in_bracket => match chars.next() {
                Some('|') if syntax == Syntax::Basic => branches.push(String::new()),
                Some(next) => {
                    current.push('\\');
                    current.push(next);
                }
                None => current.push('\\'),
            },
            '|' if !in_bracket && syntax == Syntax::Extended => branches.push(String::new()),
            '[' if !in_bracket => {
                in_bracket = true;
                current.push(c);
                // A `]` (after an optional `^`) right after the `[` is a
                // member, not the end.
                if chars.peek() == Some(&'^') {
                    current.extend(chars.next());
                }
                if chars.peek() == Some(&']') {
                    current.extend(chars.next());
                }
            }
            // A POSIX class's `]` does not close the bracket.
            '[' if in_bracket && chars.peek() == Some(&':') => {
                current.push(c);
                let mut previous = ' ';
                for inner in chars.by_ref() {
                    current.push(inner);
                    if previous == ':' && inner == ']' {
                        break;
                    }
                    previous = inner;
                }
            }
            ']' if in_bracket => {
                in_bracket = false;
                current.push(c);
            }
            _ => current.push(c),
        }
    }
    branches
}

/// Compiles one alternative.
fn compile(text: &str, syntax: Syntax) -> Result<Branch, PatternError> {
    let extended = syntax == Syntax::Extended;
    let mut chars: Vec<char> = text.chars().collect();
    let at_start = chars.first() == Some(&'^');
    if at_start {
        chars.remove(0);
    }
    // A final `$` anchors, unless escaped (an odd run of backslashes).
    let trailing_backslashes = chars.iter().rev().skip(1).take_while(|&&c| c == '\\').count();
    let at_end = chars.last() == Some(&'$') && trailing_backslashes % 2 == 0;
    if at_end {
        chars.pop();
    }
    let mut steps: Vec<Step> = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        at += 1;
        // Quantifiers: `*` always; `+`/`?` bare in extended, escaped in
        // basic patterns.
        let quantifier = match c {
            '*' => Some('*'),
            '+' | '?' if extended => Some(c),
            '\\' if !extended && matches!(chars.get(at), Some('+' | '?')) => {
                at += 1;
                Some(chars[at - 1])
            }
            _ => None,
        };
        if let Some(quantifier) = quantifier {
            // A quantifier with nothing before it is a literal, as in grep.
            let Some(last) = steps.last_mut() else {
                steps.push(Step { atom: Atom::Char(quantifier), repeat: false, optional: false });
                continue;
            };
            match quantifier {
                '*' => last.repeat = true,
                '?' => last.optional = true,
                _ => {
                    let again = Step { atom: last.atom.clone(), repeat: true, optional: false };
                    steps.push(again);
                }
            }
            continue;
        }
        let atom = match c {
            '.' => Atom::Any,
            '[' => {
                let (set, next) = bracket(&chars, at)?;
                at = next;
                set
            }
            '\\' => {
                let Some(&next) = chars.get(at) else { return Err(PatternError::TrailingBackslash) };
                at += 1;
                if next.is_ascii_digit() {
                    return Err(PatternError::Unsupported("back-references"));
                }
                if !extended && matches!(next, '(' | ')' | '{' | '}') {
                    return Err(PatternError::Unsupported("groups and intervals"));
                }
                match next {
                    'b' | 'B' | '<' | '>' => return Err(PatternError::Unsupported("word boundaries")),
                    'w' | 'W' => Atom::Set { ranges: word_ranges(), negated: next == 'W' },
                    's' | 'S' => Atom::Set { ranges: class_ranges("space").unwrap_or_default(), negated: next == 'S' },
                    other => Atom::Char(other),
                }
            }
            '(' | ')' if extended => return Err(PatternError::Unsupported("groups and intervals")),
            // In ERE a `{` starts an interval only where one can be read
            // (`{2}`, `{1,}`, `{,3}`, `{1,3}`); elsewhere it is literal,
            // as GNU grep takes `{closure`.
            '{' if extended && is_interval(&chars[at..]) => return Err(PatternError::Unsupported("groups and intervals")),
            other => Atom::Char(other),
        };
        steps.push(Step { atom, repeat: false, optional: false });
    }
    Ok(Branch { steps, at_start, at_end })
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

/// Whether `branch` matches in `line`: the set of steps reached is carried
/// along the line, one character at a time.
fn branch_matches(branch: &Branch, line: &str, fold: bool) -> bool {
    let steps = &branch.steps;
    let done = steps.len();
    // `states[i]`: step `i` is reached; `states[done]`: a match.
    let mut states = alloc::vec![false; done + 1];
    let mut next = alloc::vec![false; done + 1];
    let add = |states: &mut [bool], mut i: usize| {
        // Reaching a step that may be skipped reaches the one after it too.
        // A step already reached has had its followers added: each step is
        // added at most once a character, so a step costs O(pattern).
        loop {
            if states[i] {
                return;
            }
            states[i] = true;
            if i == done || !(steps[i].repeat || steps[i].optional) {
                return;
            }
            i += 1;
        }
    };
    add(&mut states, 0);
    let accepted = |states: &[bool], at_end: bool| states[done] && (!branch.at_end || at_end);
    for c in line.chars() {
        if accepted(&states, false) {
            return true;
        }
        next.fill(false);
        for i in (0..done).filter(|&i| states[i]) {
            if steps[i].atom.matches(c, fold) {
                if steps[i].repeat {
                    add(&mut next, i);
                }
                add(&mut next, i + 1);
            }
        }
        // Unanchored, a match may start at every character.
        if !branch.at_start {
            add(&mut next, 0);
        }
        core::mem::swap(&mut states, &mut next);
        if !states.contains(&true) {
            return false;
        }
    }
    accepted(&states, true)
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
        assert!(matches!(Pattern::new("(a)", Syntax::Extended, false), Err(PatternError::Unsupported(_))));
        assert!(matches!(Pattern::new("\\(a\\)", Syntax::Basic, false), Err(PatternError::Unsupported(_))));
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
        let alphabet: Vec<char> = "ab^$.*+?|[]-\\(){}9".chars().collect();
        for _ in 0..20_000 {
            let text: String = (0..next(12)).map(|_| alphabet[next(alphabet.len())]).collect();
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
