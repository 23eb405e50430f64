//! The filters a command's output can be piped through, as a Linux user
//! types them: `cat available_filter_functions | grep fib`, `cat trace |
//! head -20`, `cat enabled_functions | wc -l`.
//!
//! A [`Filter`] is parsed from one pipeline stage's words; a [`Pipeline`]
//! runs a list of them over lines as they come (a `cat trace_pipe` never
//! ends, so nothing waits for the whole output), and tells the producer
//! when no more input can change what it prints ([`Flow::Done`]: a `head`
//! has all its lines), so the producer stops, as a writer to a closed
//! pipe does on Linux.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::pattern::{Pattern, PatternError, Syntax};

/// Why a filter's words were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterError {
    /// Not a filter command.
    Unknown(String),
    /// An option the filter does not have.
    BadOption(&'static str, String),
    /// A line count that is not a number.
    BadCount(&'static str, String),
    /// `grep` without a pattern.
    MissingPattern,
    /// `grep -E` and `-F` together.
    ConflictingMatchers,
    /// The pattern could not be compiled.
    Pattern(PatternError),
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::Unknown(name) => {
                write!(f, "'{name}' cannot read a pipe (")?;
                for (i, command) in FILTERS.iter().enumerate() {
                    let joint = match i {
                        0 => "",
                        _ if i + 1 == FILTERS.len() => " and ",
                        _ => ", ",
                    };
                    write!(f, "{joint}{}", command.name)?;
                }
                f.write_str(" can)")
            }
            FilterError::BadOption(command, option) => write!(f, "{command}: unknown option '{option}'"),
            FilterError::BadCount(command, count) => write!(f, "{command}: invalid number of lines: '{count}'"),
            FilterError::MissingPattern => write!(f, "usage: {GREP_USAGE}"),
            FilterError::ConflictingMatchers => f.write_str("grep: conflicting matchers specified"),
            FilterError::Pattern(error) => write!(f, "grep: {error}"),
        }
    }
}

/// What `wc` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcCounts {
    pub lines: bool,
    pub words: bool,
    pub bytes: bool,
}

/// Which lines `tail` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailLines {
    /// `-n N`: the last N.
    Last(usize),
    /// `-n +N`: from line N (counted from 1) on.
    From(usize),
}

/// One filter, as parsed.
#[derive(Clone, Debug)]
pub enum Filter {
    /// `grep [-v] [-c] [-i] [-E|-F] PATTERN`.
    Grep { pattern: Pattern, invert: bool, count: bool },
    /// `head [-n N | -N]` (10 lines by default).
    Head(usize),
    /// `tail [-n [+]N | -N]`.
    Tail(TailLines),
    /// `wc [-l] [-w] [-c]` (all three by default), and the file it read,
    /// named after the counts as wc names it.
    Wc { counts: WcCounts, file: Option<String> },
}

/// Whether the producer should go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    More,
    /// No further line can change the output: stop producing.
    Done,
    /// A filter holds more than [`HELD_MAX`] bytes of lines (a `tail` with a
    /// large count over an endless `trace_pipe`): stop producing, and say
    /// so, rather than run the kernel out of memory.
    TooMuchHeld,
}

/// The most bytes of text a pipeline may hold back, and a pipeline's
/// output into a file may come to.
pub const HELD_MAX: usize = 4 << 20;

/// The lines `head` and `tail` keep when not told.
const DEFAULT_LINES: usize = 10;

/// A filter command: what `help` lists and how its words are parsed.
pub struct FilterCommand {
    pub name: &'static str,
    pub usage: &'static str,
    pub summary: &'static str,
    parse: ParseFilter,
}

/// Parses the words after a filter's name: the filter, and the operands
/// left after it.
type ParseFilter = fn(&[String]) -> Result<(Filter, &[String]), FilterError>;

const GREP_USAGE: &str = "grep [-vicEF] PATTERN [FILE]";

/// Every filter command, in the order `help` lists them.
pub static FILTERS: [FilterCommand; 4] = [
    FilterCommand {
        name: "grep",
        usage: GREP_USAGE,
        summary: "the lines that match (-v: that do not; -c: count them)",
        parse: parse_grep,
    },
    FilterCommand { name: "head", usage: "head [-n N] [FILE]", summary: "the first N lines (10)", parse: parse_head },
    FilterCommand {
        name: "tail",
        usage: "tail [-n [+]N] [FILE]",
        summary: "the last N lines (10; +N: from line N on)",
        parse: parse_tail,
    },
    FilterCommand { name: "wc", usage: "wc [-lwc] [FILE]", summary: "count lines, words, bytes", parse: parse_wc },
];

fn filter_command(name: &str) -> Option<&'static FilterCommand> {
    FILTERS.iter().find(|command| command.name == name)
}

impl Filter {
    /// Whether `name` is a filter command.
    pub fn is_filter(name: &str) -> bool {
        filter_command(name).is_some()
    }

    /// Parses `words` (the command name first); answers the filter and
    /// the operands left after it (files to read, when the filter starts
    /// the line).
    pub fn parse(words: &[String]) -> Result<(Filter, &[String]), FilterError> {
        let Some((name, args)) = words.split_first() else { return Err(FilterError::Unknown(String::new())) };
        let command = filter_command(name).ok_or_else(|| FilterError::Unknown(name.clone()))?;
        (command.parse)(args)
    }

    /// Tells the filter the file it reads (first on a line): `wc` names it.
    pub fn reads_file(&mut self, name: &str) {
        if let Filter::Wc { file, .. } = self {
            *file = Some(name.to_string());
        }
    }
}

/// Leading options (`-x`, or several in one word: `-vi`) of `args`, each
/// handed to `option`; returns the words after them (`--` ends them).
fn options<'a>(
    command: &'static str,
    args: &'a [String],
    mut option: impl FnMut(char) -> bool,
) -> Result<&'a [String], FilterError> {
    let mut at = 0;
    while let Some(word) = args.get(at) {
        if word == "--" {
            return Ok(&args[at + 1..]);
        }
        let Some(letters) = word.strip_prefix('-').filter(|letters| !letters.is_empty()) else { break };
        if let Some(bad) = letters.chars().find(|&c| !option(c)) {
            return Err(FilterError::BadOption(command, format!("-{bad}")));
        }
        at += 1;
    }
    Ok(&args[at..])
}

fn parse_grep(args: &[String]) -> Result<(Filter, &[String]), FilterError> {
    let (mut invert, mut count, mut fold) = (false, false, false);
    let mut syntax = None;
    let mut conflict = false;
    let rest = options("grep", args, |c| {
        let chosen = match c {
            'v' | 'c' | 'i' => {
                match c {
                    'v' => invert = true,
                    'c' => count = true,
                    _ => fold = true,
                }
                return true;
            }
            'E' => Syntax::Extended,
            'F' => Syntax::Fixed,
            'G' => Syntax::Basic,
            _ => return false,
        };
        conflict |= syntax.is_some_and(|earlier| earlier != chosen);
        syntax = Some(chosen);
        true
    })?;
    if conflict {
        return Err(FilterError::ConflictingMatchers);
    }
    let syntax = syntax.unwrap_or(Syntax::Basic);
    let Some((text, files)) = rest.split_first() else { return Err(FilterError::MissingPattern) };
    let pattern = Pattern::new(text, syntax, fold).map_err(FilterError::Pattern)?;
    Ok((Filter::Grep { pattern, invert, count }, files))
}

/// `-n N`, `-nN` or `-N` at the start of `args`: whether the count had a
/// `+` (`tail -n +N`: from line N), and the count.
fn parse_count<'a>(command: &'static str, args: &'a [String]) -> Result<((bool, usize), &'a [String]), FilterError> {
    let number = |text: &str| {
        let (from, digits) = match text.strip_prefix('+') {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        match digits.bytes().all(|b| b.is_ascii_digit()) {
            true => digits.parse::<usize>().map(|n| (from, n)).map_err(|_| FilterError::BadCount(command, text.to_string())),
            false => Err(FilterError::BadCount(command, text.to_string())),
        }
    };
    match args.first().map(String::as_str) {
        Some("-n") => {
            let text = args.get(1).ok_or_else(|| FilterError::BadCount(command, String::new()))?;
            Ok((number(text)?, &args[2..]))
        }
        Some(word) if word.starts_with("-n") => Ok((number(&word[2..])?, &args[1..])),
        Some(word) if word.len() > 1 && word.starts_with('-') && word[1..].bytes().all(|b| b.is_ascii_digit()) => {
            Ok((number(&word[1..])?, &args[1..]))
        }
        Some(word) if word.starts_with('-') && word.len() > 1 => Err(FilterError::BadOption(command, word.to_string())),
        _ => Ok(((false, DEFAULT_LINES), args)),
    }
}

fn parse_head(args: &[String]) -> Result<(Filter, &[String]), FilterError> {
    let ((_, lines), rest) = parse_count("head", args)?;
    Ok((Filter::Head(lines), rest))
}

fn parse_tail(args: &[String]) -> Result<(Filter, &[String]), FilterError> {
    let ((from, lines), rest) = parse_count("tail", args)?;
    Ok((Filter::Tail(if from { TailLines::From(lines) } else { TailLines::Last(lines) }), rest))
}

fn parse_wc(args: &[String]) -> Result<(Filter, &[String]), FilterError> {
    let mut counts = WcCounts { lines: false, words: false, bytes: false };
    let rest = options("wc", args, |c| {
        match c {
            'l' => counts.lines = true,
            'w' => counts.words = true,
            'c' => counts.bytes = true,
            _ => return false,
        }
        true
    })?;
    if counts == (WcCounts { lines: false, words: false, bytes: false }) {
        counts = WcCounts { lines: true, words: true, bytes: true };
    }
    Ok((Filter::Wc { counts, file: None }, rest))
}

/// A filter with its running state.
enum Stage {
    Grep {
        pattern: Pattern,
        invert: bool,
        count: Option<u64>,
    },
    Head {
        left: usize,
    },
    Tail {
        keep: usize,
        lines: VecDeque<String>,
        /// The bytes `lines` take ([`held_bytes`]).
        bytes: usize,
    },
    /// `tail -n +N`: lines before `skip` are dropped, the rest pass.
    TailFrom {
        skip: usize,
    },
    Wc {
        counts: WcCounts,
        file: Option<String>,
        lines: u64,
        words: u64,
        bytes: u64,
    },
}

impl Stage {
    fn new(filter: Filter) -> Stage {
        match filter {
            Filter::Grep { pattern, invert, count } => Stage::Grep { pattern, invert, count: count.then_some(0) },
            Filter::Head(lines) => Stage::Head { left: lines },
            Filter::Tail(TailLines::Last(lines)) => Stage::Tail { keep: lines, lines: VecDeque::new(), bytes: 0 },
            Filter::Tail(TailLines::From(line)) => Stage::TailFrom { skip: line.saturating_sub(1) },
            Filter::Wc { counts, file } => Stage::Wc { counts, file, lines: 0, words: 0, bytes: 0 },
        }
    }

    /// Takes one line; what passes goes to `next`.
    fn take(&mut self, line: &str, next: &mut dyn FnMut(&str)) {
        match self {
            Stage::Grep { pattern, invert, count } => {
                if pattern.is_match(line) != *invert {
                    match count {
                        Some(count) => *count += 1,
                        None => next(line),
                    }
                }
            }
            Stage::Head { left } => {
                if *left > 0 {
                    *left -= 1;
                    next(line);
                }
            }
            Stage::Tail { keep, lines, bytes } => {
                if *keep > 0 {
                    if lines.len() == *keep {
                        *bytes -= lines.pop_front().map_or(0, |line| held_bytes(&line));
                    }
                    *bytes += held_bytes(line);
                    lines.push_back(line.to_string());
                }
            }
            Stage::TailFrom { skip } => match *skip {
                0 => next(line),
                _ => *skip -= 1,
            },
            Stage::Wc { lines, words, bytes, .. } => {
                *lines += 1;
                *words += line.split_whitespace().count() as u64;
                *bytes += line.len() as u64 + 1;
            }
        }
    }

    /// The input ended: what the stage held back goes to `next`.
    fn finish(&mut self, next: &mut dyn FnMut(&str)) {
        match self {
            Stage::Grep { count: Some(count), .. } => next(&count.to_string()),
            Stage::Tail { lines, .. } => lines.drain(..).for_each(|line| next(&line)),
            Stage::Wc { counts, file, lines, words, bytes } => {
                let shown: Vec<u64> = [(counts.lines, *lines), (counts.words, *words), (counts.bytes, *bytes)]
                    .iter()
                    .filter(|(shown, _)| *shown)
                    .map(|&(_, value)| value)
                    .collect();
                // As GNU wc prints what it reads from a pipe: one count
                // bare, several in columns of seven.
                let mut text = match shown.as_slice() {
                    [one] => one.to_string(),
                    several => several.iter().map(|value| format!("{value:>7}")).collect::<Vec<_>>().join(" "),
                };
                if let Some(file) = file {
                    text = format!("{text} {file}");
                }
                next(&text);
            }
            _ => {}
        }
    }

    /// Whether no more input can change what this stage passes on.
    fn is_done(&self) -> bool {
        matches!(self, Stage::Head { left: 0 })
    }

    /// Whether it holds more than [`HELD_MAX`] bytes.
    fn holds_too_much(&self) -> bool {
        matches!(self, Stage::Tail { bytes, .. } if *bytes > HELD_MAX)
    }
}

/// The memory a held line takes: its text, its `String`, and about what
/// the allocator adds to a block (so that short or empty lines count too).
fn held_bytes(line: &str) -> usize {
    line.len() + core::mem::size_of::<String>() + 16
}

/// Filters chained, first to last.
pub struct Pipeline {
    stages: Vec<Stage>,
}

impl Pipeline {
    pub fn new(filters: Vec<Filter>) -> Pipeline {
        Pipeline { stages: filters.into_iter().map(Stage::new).collect() }
    }

    /// Whether there is no filter (lines pass unchanged).
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// One line of input (without its newline); what comes out of the last
    /// filter goes to `out`.
    pub fn push(&mut self, line: &str, out: &mut dyn FnMut(&str)) -> Flow {
        feed(&mut self.stages, line, out);
        if self.stages.iter().any(Stage::holds_too_much) {
            Flow::TooMuchHeld
        } else if self.stages.iter().any(Stage::is_done) {
            Flow::Done
        } else {
            Flow::More
        }
    }

    /// The input ended: each filter in turn gives what it held back (a
    /// `tail`'s lines, a count) to the ones after it.
    pub fn finish(&mut self, out: &mut dyn FnMut(&str)) {
        for at in 0..self.stages.len() {
            let (stage, after) = self.stages[at..].split_first_mut().expect("in range");
            stage.finish(&mut |line| feed(after, line, out));
        }
    }
}

fn feed(stages: &mut [Stage], line: &str, out: &mut dyn FnMut(&str)) {
    match stages.split_first_mut() {
        None => out(line),
        Some((stage, after)) => stage.take(line, &mut |line| feed(after, line, out)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    /// `input` through the filters of `stages` (`|`-separated).
    fn run(stages: &str, input: &[&str]) -> Vec<String> {
        let filters = stages
            .split('|')
            .map(|stage| {
                let words = words(stage);
                let (filter, rest) = Filter::parse(&words).unwrap();
                assert!(rest.is_empty());
                filter
            })
            .collect();
        let mut pipeline = Pipeline::new(filters);
        let mut out = Vec::new();
        for line in input {
            if pipeline.push(line, &mut |l| out.push(l.to_string())) == Flow::Done {
                break;
            }
        }
        pipeline.finish(&mut |l| out.push(l.to_string()));
        out
    }

    const LINES: [&str; 5] = ["kernel::workload::fib", "kernel::workload::run", "ftrace::ops::call", "FIB upper", "last one"];

    #[test]
    fn grep_and_its_options() {
        assert_eq!(run("grep fib", &LINES), vec!["kernel::workload::fib"]);
        assert_eq!(run("grep -i fib", &LINES), vec!["kernel::workload::fib", "FIB upper"]);
        assert_eq!(run("grep -v workload", &LINES), vec!["ftrace::ops::call", "FIB upper", "last one"]);
        assert_eq!(run("grep -c workload", &LINES), vec!["2"]);
        assert_eq!(run("grep -vc workload", &LINES), vec!["3"]);
        let (filter, _) = Filter::parse(&[String::from("grep"), String::from("-E"), String::from("fib|run")]).unwrap();
        let mut pipeline = Pipeline::new(vec![filter]);
        let mut out = Vec::new();
        for line in LINES {
            pipeline.push(line, &mut |l| out.push(l.to_string()));
        }
        assert_eq!(out, vec!["kernel::workload::fib", "kernel::workload::run"]);
    }

    #[test]
    fn a_tail_holds_at_most_held_max_bytes() {
        let (filter, _) = Filter::parse(&words("tail -n 99999999")).unwrap();
        let mut pipeline = Pipeline::new(vec![filter]);
        let line = "x".repeat(1023 - core::mem::size_of::<String>() - 16);
        let mut flows = (0..=HELD_MAX / 1023).map(|_| pipeline.push(&line, &mut |_| panic!("tail passes nothing on")));
        assert!(flows.by_ref().take(HELD_MAX / 1023).all(|flow| flow == Flow::More));
        assert_eq!(flows.next(), Some(Flow::TooMuchHeld));
        // Empty lines take memory too.
        let (filter, _) = Filter::parse(&words("tail -n 99999999")).unwrap();
        let mut pipeline = Pipeline::new(vec![filter]);
        assert!((0..HELD_MAX).any(|_| pipeline.push("", &mut |_| {}) == Flow::TooMuchHeld));
        // A small count keeps dropping the oldest: never too much.
        let (filter, _) = Filter::parse(&words("tail -n 3")).unwrap();
        let mut pipeline = Pipeline::new(vec![filter]);
        assert!((0..2 * HELD_MAX / 1023).all(|_| pipeline.push(&line, &mut |_| {}) == Flow::More));
    }

    #[test]
    fn head_tail_and_wc() {
        assert_eq!(run("head -n 2", &LINES), vec!["kernel::workload::fib", "kernel::workload::run"]);
        assert_eq!(run("head -2", &LINES), run("head -n2", &LINES));
        assert_eq!(run("head", &LINES).len(), 5, "ten by default");
        assert_eq!(run("tail -n 2", &LINES), vec!["FIB upper", "last one"]);
        assert_eq!(run("tail -0", &LINES), Vec::<String>::new());
        assert_eq!(run("tail -n +4", &LINES), vec!["FIB upper", "last one"], "from line 4 on, as GNU tail");
        assert_eq!(run("tail -n+1", &LINES).len(), 5);
        assert_eq!(run("tail -n +0", &LINES).len(), 5);
        assert_eq!(run("wc -l", &LINES), vec!["5"]);
        assert_eq!(run("wc", &["a b", "c"]), vec!["      2       3       6"]);
        assert_eq!(run("wc -lw", &["a b", "c"]), vec!["      2       3"]);
        assert_eq!(run("wc -l", &[]), vec!["0"]);
    }

    #[test]
    fn filters_chain_in_order() {
        assert_eq!(run("grep workload | tail -1", &LINES), vec!["kernel::workload::run"]);
        assert_eq!(run("tail -3 | grep -c o", &LINES), vec!["2"]);
        assert_eq!(run("head -4 | tail -2 | wc -l", &LINES), vec!["2"]);
        assert_eq!(run("grep -c x | wc -l", &LINES), vec!["1"], "a count is a line for what follows");
    }

    #[test]
    fn a_satisfied_head_stops_the_producer() {
        let (head, _) = Filter::parse(&words("head -n 2")).unwrap();
        let (count, _) = Filter::parse(&words("wc -l")).unwrap();
        let mut pipeline = Pipeline::new(vec![head, count]);
        let mut out = Vec::new();
        assert_eq!(pipeline.push("a", &mut |l| out.push(l.to_string())), Flow::More);
        assert_eq!(pipeline.push("b", &mut |l| out.push(l.to_string())), Flow::Done);
        pipeline.finish(&mut |l| out.push(l.to_string()));
        assert_eq!(out, vec!["2"]);
    }

    #[test]
    fn wc_names_the_file_it_read() {
        let words = words("wc -l trace");
        let (mut filter, files) = Filter::parse(&words).unwrap();
        filter.reads_file(&files[0]);
        let mut pipeline = Pipeline::new(vec![filter]);
        let mut out = Vec::new();
        pipeline.push("a", &mut |l| out.push(l.to_string()));
        pipeline.finish(&mut |l| out.push(l.to_string()));
        assert_eq!(out, vec!["1 trace"]);
    }

    #[test]
    fn operands_after_the_filter_are_files() {
        let words = words("grep -v fib trace set_event");
        let (_, files) = Filter::parse(&words).unwrap();
        assert_eq!(files, &words[3..]);
        let words = super::tests::words("head -n 3 trace");
        assert_eq!(Filter::parse(&words).unwrap().1, &words[3..]);
        let words = super::tests::words("grep -- -v trace");
        assert_eq!(Filter::parse(&words).unwrap().1, &words[3..], "-- ends the options: -v is the pattern");
    }

    #[test]
    fn bad_filters_are_errors() {
        let parse = |line: &str| Filter::parse(&words(line)).map(|_| ()).unwrap_err().to_string();
        assert_eq!(parse("grep"), "usage: grep [-vicEF] PATTERN [FILE]");
        assert_eq!(parse("grep -E -F x"), "grep: conflicting matchers specified");
        assert_eq!(parse("tail -n +x"), "tail: invalid number of lines: '+x'");
        assert_eq!(parse("head -n -3"), "head: invalid number of lines: '-3'");
        assert_eq!(parse("grep -x fib"), "grep: unknown option '-x'");
        assert_eq!(parse("grep [fib"), "grep: unmatched [ in the pattern");
        assert_eq!(parse("head -n many"), "head: invalid number of lines: 'many'");
        assert_eq!(parse("head -n"), "head: invalid number of lines: ''");
        assert_eq!(parse("tail -q"), "tail: unknown option '-q'");
        assert_eq!(parse("wc -m"), "wc: unknown option '-m'");
        assert_eq!(parse("sort"), "'sort' cannot read a pipe (grep, head, tail and wc can)");
    }
}
