//! `record=HOST_PATH` on the command line (`./qemu-run.sh --record FILE`):
//! at power-off the trace goes to the host through the trace channel, where
//! `tools/tracedat` turns it into a `trace.dat`.

use crate::{cmdline, println};

/// When recording, records the scheduler's events too, as
/// `trace-cmd record -e sched` would: the host needs them to tell which
/// task ran where.
pub fn start_if_recording() {
    if cmdline::option("record").is_some() {
        for event in trace::events::sched::SchedEvent::ALL {
            event.set_enabled(trace::array::instances::top(), true);
        }
    }
}

/// Sends the trace if the session is recording.
pub fn send_if_recording() {
    let Some(path) = cmdline::option("record") else { return };
    match trace::export::send::export(path, &probe_events::events::formats()) {
        Ok(bytes) => println!("record: {bytes} bytes of trace sent to the host"),
        Err(error) => println!("record: the trace channel failed: {error:?}"),
    }
}
