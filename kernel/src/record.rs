//! `record=HOST_PATH` on the command line (`./qemu-run.sh --record FILE`):
//! at power-off the trace goes to the host through the trace channel, where
//! `tools/tracedat` turns it into a `trace.dat`.

use crate::{cmdline, println};

/// Sends the trace if the session is recording.
pub fn send_if_recording() {
    let Some(path) = cmdline::option("record") else { return };
    match ftrace::export::export(path, &fprobe::events::formats()) {
        Ok(bytes) => println!("record: {bytes} bytes of trace sent to the host"),
        Err(error) => println!("record: the trace channel failed: {error:?}"),
    }
}
