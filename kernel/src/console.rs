//! Console helpers: the keys that stop a long command. (Where a command's
//! output goes is the shell's `output` module.)

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
