//! Console output for long listings.

use alloc::string::String;
use core::fmt;

/// A `fmt::Write` that prints whole lines, taking the console lock once per
/// line rather than for the whole output, so a long `cat` never holds off
/// interrupts for long.
#[derive(Default)]
pub struct LineWriter {
    line: String,
}

impl fmt::Write for LineWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for piece in s.split_inclusive('\n') {
            self.line.push_str(piece);
            if self.line.ends_with('\n') {
                arch::print::lock().write_bytes(self.line.as_bytes());
                self.line.clear();
            }
        }
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            arch::print::lock().write_bytes(self.line.as_bytes());
        }
    }
}
