//! Console helpers: output for long listings, and the keys that stop a
//! long command.

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

/// Whether a key was pressed, for a command that runs until one is (`cat
/// trace_pipe`, `stress`): Enter or ^C is taken (it only stops the
/// command); any other key is left as the start of the next command line.
pub fn stop_key_pressed() -> bool {
    match arch::input::peek_byte() {
        Some(b'\n' | b'\r' | 0x03) => {
            arch::input::read_byte();
            true
        }
        Some(_) => true,
        None => false,
    }
}

/// Whether ^C was typed, even behind other keys (it is taken, they stay):
/// what stops a command that scripts run with their next commands already
/// typed ahead (`stress`).
pub fn ctrl_c_pressed() -> bool {
    arch::input::take_typed(0x03)
}
