//! Where a command's output goes: line by line through the filters its
//! line pipes it into (`| grep fib | head -3`), then to the console, or
//! into a string (a pipeline's output redirected into a tracefs file, and
//! tests).
//!
//! Each line goes to the console as soon as it is complete, under the
//! console lock for that line only, so a long `cat` never holds off
//! interrupts for long. Once the filters need no more input (a `head` has
//! its lines), the output is closed: writes fail, and the command stops
//! as a writer to a closed pipe does ([`Output::is_closed`] tells it the
//! failure is no error).
//!
//! What the output holds in memory is bounded: a `tail`'s lines, and the
//! text going into a file, at most [`HELD_MAX`] bytes each. Past that the
//! output is closed as well, and [`Output::finish`] says why, rather than
//! let `cat trace_pipe | tail -n 99999999` run the kernel out of memory.

use alloc::string::String;
use core::fmt;

use ::shell::{Flow, Pipeline, HELD_MAX};

use super::ShellError;

/// Where the filtered lines end up.
enum Sink {
    Console,
    Text(String),
}

impl Sink {
    /// Takes one line; false if it would pass [`HELD_MAX`] bytes of text.
    fn line(&mut self, line: &str) -> bool {
        match self {
            Sink::Console => {
                let mut console = arch::print::lock();
                console.write_bytes(line.as_bytes());
                console.write_bytes(b"\n");
                true
            }
            Sink::Text(text) if text.len() + line.len() + 1 > HELD_MAX => false,
            Sink::Text(text) => {
                text.push_str(line);
                text.push('\n');
                true
            }
        }
    }
}

/// A command's output.
pub struct Output {
    /// Text written after the last newline.
    partial: String,
    pipeline: Pipeline,
    sink: Sink,
    closed: bool,
    /// Closed because it would hold more than [`HELD_MAX`] bytes.
    too_much: bool,
}

impl Output {
    /// Output through `pipeline` to the console.
    pub fn to_console(pipeline: Pipeline) -> Output {
        Output { partial: String::new(), pipeline, sink: Sink::Console, closed: false, too_much: false }
    }

    /// Output through `pipeline` into a string ([`finish`](Self::finish)
    /// answers it).
    pub fn to_text(pipeline: Pipeline) -> Output {
        Output { partial: String::new(), pipeline, sink: Sink::Text(String::new()), closed: false, too_much: false }
    }

    /// Whether the filters want no more input: a write that failed was the
    /// pipe closing, not an error.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Ends the output: a last line without its newline, then what the
    /// filters held back (a `tail`'s lines, a count). Answers the text, for
    /// output into a string; an error if it held too much.
    pub fn finish(mut self) -> Result<Option<String>, ShellError> {
        if !self.partial.is_empty() && !self.closed {
            let line = core::mem::take(&mut self.partial);
            self.line(&line);
        }
        if !self.too_much {
            let sink = &mut self.sink;
            let mut fits = true;
            self.pipeline.finish(&mut |line| fits &= sink.line(line));
            self.too_much = !fits;
        }
        if self.too_much {
            return Err(ShellError::Failed(alloc::format!(
                "stopped: a tail's lines, or a pipeline's output into a file, may hold {} KiB at most",
                HELD_MAX / 1024
            )));
        }
        Ok(match self.sink {
            Sink::Text(text) => Some(text),
            Sink::Console => None,
        })
    }

    fn line(&mut self, line: &str) {
        let sink = &mut self.sink;
        let mut fits = true;
        let flow = self.pipeline.push(line, &mut |line| fits &= sink.line(line));
        self.too_much |= !fits || flow == Flow::TooMuchHeld;
        self.closed |= self.too_much || flow == Flow::Done;
    }
}

impl fmt::Write for Output {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for piece in s.split_inclusive('\n') {
            if self.closed {
                return Err(fmt::Error);
            }
            match piece.strip_suffix('\n') {
                Some(end) if self.partial.is_empty() => self.line(end),
                Some(end) => {
                    let mut line = core::mem::take(&mut self.partial);
                    line.push_str(end);
                    self.line(&line);
                }
                None if self.partial.len() + piece.len() > HELD_MAX => {
                    self.too_much = true;
                    self.closed = true;
                    return Err(fmt::Error);
                }
                None => self.partial.push_str(piece),
            }
        }
        Ok(())
    }
}
