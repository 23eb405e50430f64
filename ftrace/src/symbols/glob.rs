//! Function-name globs and the filter language of `set_ftrace_filter`.
//!
//! A glob is matched against a whole name: `*` matches any run of characters
//! (including none), `?` any one character, `[...]` one character of a
//! class (`[abc]`, ranges `[a-c]`, `[!a-c]` for any other, a
//! `]` first stands for itself; a `[` with no `]` after it is itself), as
//! Linux's `glob_match`, and everything else itself. So `kernel::*`,
//! `*::fib`, `*fs*`, `kernel::*::lookup`, `kernel::workload::fi[a-c]` all
//! work. (Rust names hold `[`, as in `drop_in_place::<[u8; 4]>`: a name
//! written whole is that name, see [`apply_filter`].) A pattern
//! without `::` also matches a name whose last path segment it matches, as a
//! C function name would: `fib` finds `kernel::workload::fib`, `*alloc`
//! every path ending in `alloc` ([`name_match`]).
//!
//! A filter text is whitespace-separated words ([`filter_words`]); `GLOB`
//! adds what it matches, `!GLOB` removes it. A word that matches nothing is
//! an error and the whole text changes nothing. Rust names hold spaces
//! inside their brackets (`<alloc::string::String as core::fmt::Display>::fmt`,
//! `BTreeMap<K, V>`): whitespace inside brackets does not split, so every
//! line of `available_filter_functions` can be written back as it reads.

use alloc::string::{String, ToString};
use core::fmt;

use crate::patch::bitmap::Bitmap;

/// Whether `glob` matches all of `name`.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (glob, name) = (glob.as_bytes(), name.as_bytes());
    let (mut g, mut n) = (0, 0);
    // Where to resume after the most recent `*`: (glob index after it, name index).
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some(b'*') => {
                star = Some((g + 1, n));
                g += 1;
            }
            Some(b'[') if class_end(&glob[g..]).is_some() => {
                let end = g + class_end(&glob[g..]).unwrap_or_default();
                if class_matches(&glob[g + 1..end], name[n]) {
                    g = end + 1;
                    n += 1;
                } else if let Some((after_star, matched)) = star {
                    g = after_star;
                    n = matched + 1;
                    star = Some((after_star, matched + 1));
                } else {
                    return false;
                }
            }
            Some(&c) if c == b'?' || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((after_star, matched)) => {
                    g = after_star;
                    n = matched + 1;
                    star = Some((after_star, matched + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

/// Where the class that opens `glob` (at its `[`) closes: the index of
/// its `]`, the first after the `!` and the character after it (so a
/// `]` first stands for itself). None: no `]`, so the `[` is itself.
fn class_end(glob: &[u8]) -> Option<usize> {
    let mut first = 1;
    if glob.get(first) == Some(&b'!') {
        first += 1;
    }
    glob.iter().skip(first + 1).position(|&c| c == b']').map(|at| at + first + 1)
}

/// Whether `c` is in the class `body` (what lies between `[` and `]`).
fn class_matches(body: &[u8], c: u8) -> bool {
    let (negate, body) = match body.split_first() {
        Some((b'!', rest)) => (true, rest),
        _ => (false, body),
    };
    let mut i = 0;
    let mut found = false;
    while i < body.len() {
        if body.get(i + 1) == Some(&b'-') && i + 2 < body.len() {
            found |= (body[i]..=body[i + 2]).contains(&c);
            i += 3;
        } else {
            found |= body[i] == c;
            i += 1;
        }
    }
    found != negate
}

/// The last segment of a Rust path (`fib` of `kernel::workload::fib`),
/// ignoring `::` inside generic arguments (`drop_in_place<a::B>` stays
/// whole).
pub fn last_segment(name: &str) -> &str {
    let bytes = name.as_bytes();
    let (mut depth, mut start) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    &name[start..]
}

/// Whether a filter pattern selects `name`: the whole name, or, for a
/// pattern without `::`, its last path segment.
pub fn name_match(pattern: &str, name: &str) -> bool {
    glob_match(pattern, name) || (!pattern.contains("::") && glob_match(pattern, last_segment(name)))
}

/// Brackets deep at each character of `line`: `<>`, `()`, `[]`, `{}` (the
/// `>` of a `->` closes nothing), never below zero. Calls `at` with each
/// character's byte offset, the character and the depth before it.
fn walk_brackets(line: &str, mut at: impl FnMut(usize, char, usize)) {
    let mut depth = 0usize;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        at(i, c, depth);
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' if previous == '-' => {}
            '>' | ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        previous = c;
    }
}

/// The words of a filter text: split at whitespace outside brackets, and
/// at every line's end (an unbalanced bracket reaches no further).
pub fn filter_words(text: &str) -> impl Iterator<Item = &str> {
    text.lines().flat_map(|line| {
        let mut cuts = alloc::vec::Vec::new();
        walk_brackets(line, |i, c, depth| {
            if c.is_whitespace() && depth == 0 {
                cuts.push(i);
            }
        });
        let mut start = 0;
        let mut words = alloc::vec::Vec::new();
        for cut in cuts.into_iter().chain(core::iter::once(line.len())) {
            let word = line[start..cut].trim();
            if !word.is_empty() {
                words.push(word);
            }
            start = cut;
        }
        words
    })
}

/// `text` split at its last single `:` outside brackets: `FUNC:COMMAND`,
/// a fetch arg's `FETCHARG:TYPE` (a `::` separates path segments;
/// `{shim:vtable#0}` is part of a name). `None` if there is none, or
/// either side is empty.
pub fn split_last_colon(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut last = None;
    walk_brackets(text, |i, c, depth| {
        let single = i == 0 || bytes[i - 1] != b':';
        if c == ':' && depth == 0 && single && bytes.get(i + 1) != Some(&b':') {
            last = Some(i);
        }
    });
    let at = last?;
    let (head, tail) = (&text[..at], &text[at + 1..]);
    (!head.is_empty() && !tail.is_empty()).then_some((head, tail))
}

/// How a filter text combines with the current set (`>` or `>>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterMode {
    /// Start from the empty set (`echo X > set_ftrace_filter`).
    Replace,
    /// Start from the current set (`echo X >> set_ftrace_filter`).
    Append,
}

/// Why a filter text was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FunctionFilterError {
    /// This word matched no traceable function.
    NoMatch(String),
}

impl fmt::Display for FunctionFilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FunctionFilterError::NoMatch(word) => write!(f, "'{word}' matches no traceable function"),
        }
    }
}

/// Applies `text` to `current` over `count` functions named by `name_of`.
/// Returns the new set; on error nothing is changed.
pub fn apply_filter<'a>(
    current: &Bitmap,
    text: &str,
    mode: FilterMode,
    count: usize,
    name_of: impl Fn(usize) -> &'a str,
) -> Result<Bitmap, FunctionFilterError> {
    let mut result = match mode {
        FilterMode::Replace => Bitmap::new(count),
        FilterMode::Append => current.clone(),
    };
    for word in filter_words(text) {
        let (remove, glob) = match word.strip_prefix('!') {
            Some(glob) => (true, glob),
            None => (false, word),
        };
        // A function's exact name is that function, even when it holds a
        // glob's `*` or `?` (`<*const T as Debug>::fmt`): what
        // `available_filter_functions` lists selects only itself.
        let exact = (0..count).any(|i| name_of(i) == glob);
        let mut matched = false;
        for index in (0..count).filter(|&i| if exact { name_of(i) == glob } else { name_match(glob, name_of(i)) }) {
            matched = true;
            if remove {
                result.clear(index);
            } else {
                result.set(index);
            }
        }
        if !matched {
            return Err(FunctionFilterError::NoMatch(word.to_string()));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_outside_brackets_and_at_line_ends() {
        let words = |text| filter_words(text).collect::<alloc::vec::Vec<_>>();
        assert_eq!(words(" fib  *lookup\n!run "), ["fib", "*lookup", "!run"]);
        assert_eq!(
            words("<kernel::A as core::fmt::Display>::fmt alloc::BTreeMap<K, V>::insert"),
            ["<kernel::A as core::fmt::Display>::fmt", "alloc::BTreeMap<K, V>::insert"]
        );
        assert_eq!(words("<fn(u8) -> u64 as T>::call x"), ["<fn(u8) -> u64 as T>::call", "x"], "-> closes nothing");
        assert_eq!(words("*Vec<* fib\nrun"), ["*Vec<* fib", "run"], "an open bracket reaches the line's end only");
        assert_eq!(words("a>  b"), ["a>", "b"], "never below zero");
    }

    #[test]
    fn an_exact_name_selects_only_itself() {
        let names = ["<*const T as Debug>::fmt", "<*const *const T as Debug>::fmt", "kernel::fib"];
        assert!(glob_match(names[0], names[1]), "as a glob, the first name spells the second too");
        let apply = |text| apply_filter(&Bitmap::new(3), text, FilterMode::Replace, 3, |i| names[i]).unwrap();
        let set = apply("<*const T as Debug>::fmt");
        assert_eq!((set.get(0), set.get(1)), (true, false), "the name, not the glob it spells");
        let set = apply("<*const*");
        assert_eq!((set.get(0), set.get(1), set.get(2)), (true, true, false), "a glob is still a glob");
    }

    #[test]
    fn texts_split_at_a_single_colon_outside_brackets() {
        assert_eq!(split_last_colon("kernel::workload::fib:traceoff"), Some(("kernel::workload::fib", "traceoff")));
        assert_eq!(split_last_colon("kernel::workload::fib"), None);
        assert_eq!(split_last_colon("<X as Y>::call::{shim:vtable#0}"), None);
        assert_eq!(
            split_last_colon("<X as Y>::call::{shim:vtable#0}:traceon"),
            Some(("<X as Y>::call::{shim:vtable#0}", "traceon"))
        );
        assert_eq!(split_last_colon(":traceon"), None);
        assert_eq!(split_last_colon("fib:"), None);
    }

    #[test]
    fn bare_names_match_the_last_path_segment() {
        assert_eq!(last_segment("kernel::workload::fib"), "fib");
        assert_eq!(last_segment("fib"), "fib");
        assert_eq!(last_segment("core::ptr::drop_in_place<alloc::string::String>"), "drop_in_place<alloc::string::String>");
        assert!(name_match("fib", "kernel::workload::fib"));
        assert!(!name_match("fib", "kernel::workload::napping_fib"));
        assert!(name_match("*alloc", "alloc::alloc::alloc"));
        assert!(name_match("*alloc", "__rust_alloc"));
        assert!(!name_match("*alloc", "alloc::alloc::alloc_zeroed"));
        assert!(name_match("*fs*", "kernel::workload::fs::lookup"), "the whole name still matches");
        assert!(!name_match("workload::fib", "kernel::workload::fib"), "a pattern with :: matches whole names only");
    }

    #[test]
    fn globs() {
        assert!(glob_match("fib", "fib"));
        assert!(!glob_match("fib", "fibs"));
        assert!(glob_match("kernel::*", "kernel::workload::fib"));
        assert!(glob_match("*::fib", "kernel::workload::fib"));
        assert!(!glob_match("*::fib", "kernel::workload::fib2"));
        assert!(glob_match("*fib*", "kernel::workload::fib"));
        assert!(glob_match("*fs*", "kernel::workload::fs::lookup"));
        assert!(glob_match("kernel::*::lookup", "kernel::workload::fs::lookup"));
        assert!(!glob_match("kernel::*::lookup", "kernel::workload::fs::lookup_all"));
        assert!(glob_match("f?b", "fib"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("**a", "ba"));
    }

    #[test]
    fn character_classes() {
        assert!(glob_match("kernel::workload::fi[a-c]", "kernel::workload::fib"));
        assert!(!glob_match("kernel::workload::fi[c-z]", "kernel::workload::fib"));
        assert!(glob_match("[kx]*", "kernel::workload::fib"));
        assert!(!glob_match("[!k]*", "kernel::workload::fib"));
        assert!(glob_match("[^x]*", "^"), "^ is itself, as in Linux");
        assert!(glob_match("*fi[abc]", "kernel::workload::fib"), "after a star");
        assert!(glob_match("*[b]", "kernel::workload::fib"), "backtracks into the star");
        assert!(glob_match("a[]]b", "a]b"), "a ] first is itself");
        assert!(glob_match("a[!]]b", "axb"));
        assert!(!glob_match("a[!]]b", "a]b"));
        assert!(glob_match("a[-x]b", "a-b"), "a - first is itself");
        assert!(glob_match("a[x-]b", "a-b"), "and last");
        assert!(glob_match("a[b", "a[b"), "a [ with no ] is itself");
        assert!(!glob_match("a[bc]", "a[bc]"), "a class matches one character");
        assert!(glob_match("a[[]bc]", "a[bc]"));
    }

    /// The characters in 0x20..0x7f that `glob` (one character long, as
    /// a whole-name match) accepts: both ends of every class pinned.
    fn accepted(glob: &str) -> String {
        (0x20u8..0x7f).filter(|&c| glob_match(glob, core::str::from_utf8(&[c]).unwrap())).map(char::from).collect()
    }

    #[test]
    fn every_range_and_class_is_exactly_its_characters() {
        assert_eq!(accepted("[a-c]"), "abc", "a range holds both its ends and nothing past them");
        assert_eq!(accepted("[a-a]"), "a", "a one-character range");
        assert_eq!(accepted("[b-b]"), "b");
        assert_eq!(accepted("[0-9]"), "0123456789");
        assert_eq!(accepted("[A-Z]").len(), 26);
        assert_eq!(accepted("[c-a]"), "", "a backwards range holds nothing");
        assert_eq!(accepted("[a-cx-z]"), "abcxyz", "two ranges");
        assert_eq!(accepted("[a-c_]"), "_abc", "a range and a character");
        assert_eq!(accepted("[_a-c]"), "_abc", "a character and a range");
        assert_eq!(accepted("[abc]"), "abc");
        assert_eq!(accepted("[b]"), "b");
        assert_eq!(accepted("[-a]"), "-a", "a - first is itself");
        assert_eq!(accepted("[a-]"), "-a", "and last");
        assert_eq!(accepted("[]]"), "]", "a ] first is itself");
        assert_eq!(accepted("[]a]"), "]a");
        let printable = |except: &str| (0x20u8..0x7f).map(char::from).filter(|c| !except.contains(*c)).collect::<String>();
        assert_eq!(accepted("[!a-c]"), printable("abc"), "a negated range: everything else, both ends out");
        assert_eq!(accepted("[!a-a]"), printable("a"));
        assert_eq!(accepted("[!abc]"), printable("abc"));
        assert_eq!(accepted("[!]]"), printable("]"));
        assert_eq!(accepted("[!-]"), printable("-"));
        assert_eq!(accepted("?"), printable(""), "? is any one character");
        assert_eq!(accepted("[?]"), "?", "inside a class ? is itself");
        assert_eq!(accepted("[*]"), "*", "and so is *");
    }

    #[test]
    fn question_marks_match_exactly_one_character_each() {
        assert!(glob_match("?", "a"));
        assert!(!glob_match("?", ""), "not none");
        assert!(!glob_match("?", "ab"), "not two");
        assert!(glob_match("??", "ab"));
        assert!(!glob_match("??", "abc"));
        assert!(glob_match("f?b", "fib"));
        assert!(!glob_match("f?b", "fb"));
        assert!(!glob_match("f?b", "fiib"));
        assert!(glob_match("*?", "x"), "a star then one");
        assert!(!glob_match("*?", ""));
        assert!(glob_match("a?[b-c]", "axc"));
        assert!(!glob_match("a?[b-c]", "axd"));
    }

    #[test]
    fn a_class_at_either_end_of_a_name_pins_that_end() {
        assert!(glob_match("[f-f]ib", "fib"));
        assert!(!glob_match("[g-z]ib", "fib"));
        assert!(!glob_match("[a-e]ib", "fib"), "the character after the range's end is out");
        assert!(glob_match("fi[b-b]", "fib"));
        assert!(!glob_match("fi[a-a]", "fib"), "the character after a one-character range is out");
        assert!(!glob_match("fi[c-c]", "fib"), "and the one before");
        assert!(glob_match("*::fi[!a]", "kernel::workload::fib"));
        assert!(!glob_match("*::fi[!b]", "kernel::workload::fib"));
        assert!(!glob_match("*::fi[!a-b]", "kernel::workload::fib"), "a negated range's end is out");
        assert!(glob_match("*::fi[!c-z]", "kernel::workload::fib"));
    }

    const NAMES: [&str; 5] = [
        "kernel::workload::fib",
        "kernel::workload::run",
        "kernel::workload::fs::lookup",
        "kernel::workload::fs::mkdir",
        "kernel::shell::run",
    ];

    fn apply(current: &Bitmap, text: &str, mode: FilterMode) -> Result<Bitmap, FunctionFilterError> {
        apply_filter(current, text, mode, NAMES.len(), |i| NAMES[i])
    }

    fn members(set: &Bitmap) -> alloc::vec::Vec<usize> {
        set.iter_ones().collect()
    }

    #[test]
    fn add_remove_append_replace() {
        let empty = Bitmap::new(NAMES.len());
        let fs = apply(&empty, "*::fs::*", FilterMode::Replace).unwrap();
        assert_eq!(members(&fs), [2, 3]);
        let more = apply(&fs, "*fib", FilterMode::Append).unwrap();
        assert_eq!(members(&more), [0, 2, 3]);
        let fewer = apply(&more, "!*mkdir", FilterMode::Append).unwrap();
        assert_eq!(members(&fewer), [0, 2]);
        let replaced = apply(&fewer, "*run !kernel::shell::*", FilterMode::Replace).unwrap();
        assert_eq!(members(&replaced), [1]);
        let cleared = apply(&replaced, "", FilterMode::Replace).unwrap();
        assert!(cleared.is_empty());
    }

    #[test]
    fn no_match_changes_nothing() {
        let empty = Bitmap::new(NAMES.len());
        let fs = apply(&empty, "*::fs::*", FilterMode::Replace).unwrap();
        assert_eq!(apply(&fs, "*fib nosuch*", FilterMode::Append), Err(FunctionFilterError::NoMatch("nosuch*".into())));
        assert_eq!(apply(&fs, "!nosuch", FilterMode::Append), Err(FunctionFilterError::NoMatch("!nosuch".into())));
    }
}
