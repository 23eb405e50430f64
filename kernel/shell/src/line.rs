//! Line discipline: bytes in, lines (or one-line errors) out.

use core::fmt;

/// Why a line was rejected. The whole line is discarded; the next one starts
/// clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineError {
    /// More than the reader's capacity before the end of the line.
    TooLong { limit: usize },
    /// A control byte other than tab, backspace/delete and the line ends.
    ControlByte(u8),
    /// The bytes of the line are not UTF-8.
    NotUtf8,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::TooLong { limit } => write!(f, "line too long (limit {limit} bytes)"),
            LineError::ControlByte(byte) => write!(f, "control byte {byte:#04x} in line"),
            LineError::NotUtf8 => write!(f, "line is not valid UTF-8"),
        }
    }
}

/// What one input byte did.
#[derive(Debug, PartialEq, Eq)]
pub enum LineEvent<'a> {
    /// Nothing to show.
    Nothing,
    /// Echo this byte back.
    Echo(u8),
    /// Erase the last echoed character (backspace).
    Erase,
    /// A complete line (without its terminator).
    Line(&'a str),
    /// A complete line that was rejected.
    Rejected(LineError),
    /// The line was dropped (^C, ^U): start a new one.
    Cancelled,
}

/// Where the reader is in a terminal escape sequence (an arrow key sends
/// `ESC [ A`, or `ESC O A` in a terminal's application mode): its bytes are
/// dropped, not taken as text. A control byte (Enter, ^C, backspace) ends
/// the sequence and does what it does anywhere.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Started,
    /// After `ESC [` or `ESC O`: until a final byte (`@` to `~`).
    Sequence,
}

/// Accumulates bytes into lines of at most `N` bytes.
///
/// A line ends at `\r` or `\n`; a `\n` right after `\r` is swallowed, so both
/// terminal (CR) and piped (LF, CR LF) input work. Backspace (0x08) and delete
/// (0x7f) remove the last character (all its UTF-8 bytes, so what is on the
/// screen is what is in the line). Tab counts as text. ^C and ^U drop the
/// line; ^D is ignored; a terminal's escape sequences (arrow keys) are
/// dropped.
pub struct LineReader<const N: usize> {
    buf: [u8; N],
    len: usize,
    error: Option<LineError>,
    after_cr: bool,
    escape: Escape,
}

impl<const N: usize> Default for LineReader<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LineReader<N> {
    /// An empty reader.
    pub const fn new() -> Self {
        Self { buf: [0; N], len: 0, error: None, after_cr: false, escape: Escape::None }
    }

    /// Feeds one byte.
    pub fn push(&mut self, byte: u8) -> LineEvent<'_> {
        let after_cr = core::mem::replace(&mut self.after_cr, byte == b'\r');
        match (self.escape, byte) {
            (_, 0x00..=0x1f | 0x7f) | (Escape::None, _) => self.escape = Escape::None,
            (Escape::Started, b'[' | b'O') => {
                self.escape = Escape::Sequence;
                return LineEvent::Nothing;
            }
            (Escape::Sequence, 0x40..=0x7e) | (Escape::Started, _) => {
                self.escape = Escape::None;
                return LineEvent::Nothing;
            }
            (Escape::Sequence, _) => return LineEvent::Nothing,
        }
        match byte {
            b'\n' if after_cr => LineEvent::Nothing,
            b'\r' | b'\n' => self.finish(),
            0x08 | 0x7f => {
                if self.error.is_none() && self.len > 0 {
                    // The whole character: its continuation bytes, then its
                    // first byte.
                    while self.len > 1 && self.buf[self.len - 1] & 0xc0 == 0x80 {
                        self.len -= 1;
                    }
                    self.len -= 1;
                    LineEvent::Erase
                } else {
                    LineEvent::Nothing
                }
            }
            0x03 | 0x15 => {
                self.len = 0;
                self.error = None;
                LineEvent::Cancelled
            }
            0x04 => LineEvent::Nothing,
            0x1b => {
                self.escape = Escape::Started;
                LineEvent::Nothing
            }
            _ if self.error.is_some() => LineEvent::Nothing,
            b'\t' | 0x20.. => {
                if self.len == N {
                    self.error = Some(LineError::TooLong { limit: N });
                    return LineEvent::Nothing;
                }
                self.buf[self.len] = byte;
                self.len += 1;
                LineEvent::Echo(byte)
            }
            _ => {
                self.error = Some(LineError::ControlByte(byte));
                LineEvent::Nothing
            }
        }
    }

    fn finish(&mut self) -> LineEvent<'_> {
        let len = core::mem::take(&mut self.len);
        if let Some(error) = self.error.take() {
            return LineEvent::Rejected(error);
        }
        match core::str::from_utf8(&self.buf[..len]) {
            Ok(line) => LineEvent::Line(line),
            Err(_) => LineEvent::Rejected(LineError::NotUtf8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    /// Feeds `input` and collects the lines and errors it produced.
    fn lines<const N: usize>(input: &[u8]) -> Vec<Result<String, LineError>> {
        let mut reader = LineReader::<N>::new();
        let mut out = Vec::new();
        for &byte in input {
            match reader.push(byte) {
                LineEvent::Line(line) => out.push(Ok(line.to_string())),
                LineEvent::Rejected(error) => out.push(Err(error)),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn lf_cr_and_crlf_end_lines() {
        assert_eq!(
            lines::<64>(b"help\nuptime\rmeminfo\r\npoweroff\n"),
            [Ok("help".into()), Ok("uptime".into()), Ok("meminfo".into()), Ok("poweroff".into())]
        );
    }

    #[test]
    fn backspace_edits() {
        assert_eq!(lines::<64>(b"hepl\x7f\x7flp\n"), [Ok("help".into())]);
        assert_eq!(lines::<64>(b"\x08\x08ok\n"), [Ok("ok".into())]);
    }

    #[test]
    fn too_long_is_rejected_and_next_line_works() {
        assert_eq!(lines::<4>(b"abcdefgh\nabc\n"), [Err(LineError::TooLong { limit: 4 }), Ok("abc".into())]);
    }

    #[test]
    fn control_bytes_are_rejected() {
        assert_eq!(lines::<64>(b"a\x01b\nok\n"), [Err(LineError::ControlByte(0x01)), Ok("ok".into())]);
        assert_eq!(lines::<64>(b"\x00\n"), [Err(LineError::ControlByte(0))]);
    }

    #[test]
    fn escape_sequences_are_dropped_and_ctrl_c_drops_the_line() {
        // Arrow keys (ESC [ A, ESC [ 1 ; 5 C, ESC O B) and an Alt key (ESC x).
        assert_eq!(lines::<64>(b"ca\x1b[At\x1b[1;5C\x1bOB\x1bx trace\n"), [Ok("cat trace".into())]);
        // A control byte ends a sequence and counts: a lone ESC, then Enter.
        assert_eq!(lines::<64>(b"uptime\x1b\nok\x1b[\x7fk\n"), [Ok("uptime".into()), Ok("ok".into())]);
        let mut reader = LineReader::<64>::new();
        for &byte in b"echo 1 > tracing_on" {
            reader.push(byte);
        }
        assert_eq!(reader.push(0x03), LineEvent::Cancelled);
        assert_eq!(reader.push(0x04), LineEvent::Nothing, "^D is ignored");
        assert_eq!(lines::<64>(b"bad\x01\x15ok\n"), [Ok("ok".into())], "^U drops a rejected line too");
    }

    #[test]
    fn backspace_erases_a_whole_character() {
        // '1' and a two-byte character: two backspaces erase both, as the
        // screen shows.
        assert_eq!(lines::<64>("echo 1\u{e9}\x7f\x7f0\n".as_bytes()), [Ok("echo 0".into())]);
        assert_eq!(lines::<64>("\u{1f600}\x7fok\n".as_bytes()), [Ok("ok".into())], "a four-byte character");
    }

    #[test]
    fn non_utf8_is_rejected() {
        assert_eq!(lines::<64>(b"\xff\xfe\nok\n"), [Err(LineError::NotUtf8), Ok("ok".into())]);
        assert_eq!(lines::<64>("caf\u{e9}\n".as_bytes()), [Ok("caf\u{e9}".into())]);
    }

    #[test]
    fn empty_lines_are_lines() {
        assert_eq!(lines::<64>(b"\n\n"), [Ok("".into()), Ok("".into())]);
    }
}
