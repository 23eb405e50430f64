//! Splitting a line into words and a redirection.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Where a command's output goes instead of the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `> FILE`: replace the file's contents (for tracefs: a write).
    Truncate(String),
    /// `>> FILE`: append (for tracefs: an append-mode write).
    Append(String),
}

/// A parsed line: the words (quotes removed), the words of each command
/// its output is piped through (`| grep fib`), and an optional
/// redirection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    pub words: Vec<String>,
    pub pipes: Vec<Vec<String>>,
    pub redirect: Option<Redirect>,
}

/// Why a line could not be split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// A quote was opened and never closed.
    UnterminatedQuote(char),
    /// `>` or `>>` without a file name after it.
    MissingRedirectTarget,
    /// Something after the redirection target, or a second redirection.
    TrailingAfterRedirect,
    /// A `|` with no command on one side.
    EmptyPipe,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::UnterminatedQuote(q) => write!(f, "unterminated {q} quote"),
            ParseError::MissingRedirectTarget => write!(f, "missing file name after redirection"),
            ParseError::TrailingAfterRedirect => write!(f, "unexpected text after the redirection target"),
            ParseError::EmptyPipe => write!(f, "a pipe needs a command on each side"),
        }
    }
}

/// One lexical token.
#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Truncate,
    Append,
    Pipe,
}

fn tokenize(line: &str) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '|' {
            chars.next();
            tokens.push(Token::Pipe);
        } else if c == '>' {
            chars.next();
            if chars.peek() == Some(&'>') {
                chars.next();
                tokens.push(Token::Append);
            } else {
                tokens.push(Token::Truncate);
            }
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '>' || c == '|' {
                    break;
                }
                chars.next();
                if c == '\\' {
                    // Outside quotes a backslash keeps the next character.
                    word.push(chars.next().unwrap_or('\\'));
                } else if c == '\'' || c == '"' {
                    loop {
                        match chars.next() {
                            Some(end) if end == c => break,
                            // In double quotes `\"`, `\\` and `\$` are escapes, as
                            // in sh; other backslashes stay.
                            Some('\\') if c == '"' && matches!(chars.peek(), Some('"' | '\\' | '$')) => {
                                word.extend(chars.next());
                            }
                            Some(inner) => word.push(inner),
                            None => return Err(ParseError::UnterminatedQuote(c)),
                        }
                    }
                } else {
                    word.push(c);
                }
            }
            tokens.push(Token::Word(word));
        }
    }
    Ok(tokens)
}

/// Splits `line` into words, the commands after each `|`, and at most one
/// trailing redirection. Single and double quotes group text, and a
/// backslash escapes as in sh (outside quotes any character, inside double
/// quotes `"`, `\` and `$`); there is no expansion: `$arg1` stays literal.
pub fn parse(line: &str) -> Result<CommandLine, ParseError> {
    let mut parsed = CommandLine::default();
    let mut tokens = tokenize(line)?.into_iter();
    while let Some(token) = tokens.next() {
        let stage = parsed.pipes.last_mut().unwrap_or(&mut parsed.words);
        let append = match token {
            Token::Word(word) => {
                stage.push(word);
                continue;
            }
            Token::Pipe => {
                if stage.is_empty() {
                    return Err(ParseError::EmptyPipe);
                }
                parsed.pipes.push(Vec::new());
                continue;
            }
            Token::Truncate => false,
            Token::Append => true,
        };
        let Some(Token::Word(target)) = tokens.next() else {
            return Err(ParseError::MissingRedirectTarget);
        };
        if tokens.next().is_some() {
            return Err(ParseError::TrailingAfterRedirect);
        }
        parsed.redirect = Some(if append { Redirect::Append(target) } else { Redirect::Truncate(target) });
    }
    if parsed.pipes.last().is_some_and(Vec::is_empty) {
        return Err(ParseError::EmptyPipe);
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn plain_words() {
        let parsed = parse("  echo   hello world ").unwrap();
        assert_eq!(parsed.words, words(&["echo", "hello", "world"]));
        assert_eq!(parsed.redirect, None);
    }

    #[test]
    fn backslashes_escape_as_in_sh() {
        let parsed = parse(r#"echo "comm ~ \"sh*\" \x" a\ b 'c\"d'"#).unwrap();
        assert_eq!(parsed.words, words(&["echo", r#"comm ~ "sh*" \x"#, "a b", r#"c\"d"#]));
    }

    #[test]
    fn redirections() {
        let parsed = parse("echo function > current_tracer").unwrap();
        assert_eq!(parsed.words, words(&["echo", "function"]));
        assert_eq!(parsed.redirect, Some(Redirect::Truncate("current_tracer".into())));
        let parsed = parse("echo *fib*>>set_ftrace_filter").unwrap();
        assert_eq!(parsed.words, words(&["echo", "*fib*"]));
        assert_eq!(parsed.redirect, Some(Redirect::Append("set_ftrace_filter".into())));
        let parsed = parse("echo > trace").unwrap();
        assert_eq!(parsed.words, words(&["echo"]));
        assert_eq!(parsed.redirect, Some(Redirect::Truncate("trace".into())));
    }

    #[test]
    fn quotes_group_and_keep_dollars() {
        let parsed = parse("echo 'f:fibent FIB n=$arg1' >> dynamic_events").unwrap();
        assert_eq!(parsed.words, vec!["echo".to_string(), "f:fibent FIB n=$arg1".to_string()]);
        assert_eq!(parse("echo a\"b c\"d").unwrap().words, words(&["echo", "ab cd"]));
    }

    #[test]
    fn pipes() {
        let parsed = parse("cat available_filter_functions | grep -v 'a|b' |head -3").unwrap();
        assert_eq!(parsed.words, words(&["cat", "available_filter_functions"]));
        assert_eq!(parsed.pipes, vec![words(&["grep", "-v", "a|b"]), words(&["head", "-3"])]);
        assert_eq!(parsed.redirect, None);
        let parsed = parse("cat x|wc -l > out").unwrap();
        assert_eq!(parsed.pipes, vec![words(&["wc", "-l"])]);
        assert_eq!(parsed.redirect, Some(Redirect::Truncate("out".into())));
        assert_eq!(parse(r"echo a\|b").unwrap().words, words(&["echo", "a|b"]));
        assert_eq!(parse("| grep x"), Err(ParseError::EmptyPipe));
        assert_eq!(parse("cat x |"), Err(ParseError::EmptyPipe));
        assert_eq!(parse("cat x | | wc"), Err(ParseError::EmptyPipe));
        assert_eq!(parse("cat x > f | wc"), Err(ParseError::TrailingAfterRedirect));
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert_eq!(parse("echo 'abc"), Err(ParseError::UnterminatedQuote('\'')));
        assert_eq!(parse("echo x >"), Err(ParseError::MissingRedirectTarget));
        assert_eq!(parse("echo x > >"), Err(ParseError::MissingRedirectTarget));
        assert_eq!(parse("echo x > a b"), Err(ParseError::TrailingAfterRedirect));
        assert_eq!(parse("echo x > a > b"), Err(ParseError::TrailingAfterRedirect));
    }
}
