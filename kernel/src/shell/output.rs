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

use alloc::string::String;
use core::fmt;

use ::shell::{Flow, Pipeline};

/// Where the filtered lines end up.
enum Sink {
    Console,
    Text(String),
}

impl Sink {
    fn line(&mut self, line: &str) {
        match self {
            Sink::Console => {
                let mut console = arch::print::lock();
                console.write_bytes(line.as_bytes());
                console.write_bytes(b"\n");
            }
            Sink::Text(text) => {
                text.push_str(line);
                text.push('\n');
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
}

impl Output {
    /// Output through `pipeline` to the console.
    pub fn to_console(pipeline: Pipeline) -> Output {
        Output { partial: String::new(), pipeline, sink: Sink::Console, closed: false }
    }

    /// Output through `pipeline` into a string ([`finish`](Self::finish)
    /// answers it).
    pub fn to_text(pipeline: Pipeline) -> Output {
        Output { partial: String::new(), pipeline, sink: Sink::Text(String::new()), closed: false }
    }

    /// Whether the filters want no more input: a write that failed was the
    /// pipe closing, not an error.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Ends the output: a last line without its newline, then what the
    /// filters held back (a `tail`'s lines, a count). Answers the text, for
    /// output into a string.
    pub fn finish(mut self) -> Option<String> {
        if !self.partial.is_empty() && !self.closed {
            let line = core::mem::take(&mut self.partial);
            self.line(&line);
        }
        let sink = &mut self.sink;
        self.pipeline.finish(&mut |line| sink.line(line));
        match self.sink {
            Sink::Text(text) => Some(text),
            Sink::Console => None,
        }
    }

    fn line(&mut self, line: &str) {
        let sink = &mut self.sink;
        if self.pipeline.push(line, &mut |line| sink.line(line)) == Flow::Done {
            self.closed = true;
        }
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
                None => self.partial.push_str(piece),
            }
        }
        Ok(())
    }
}
