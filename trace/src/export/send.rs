//! Sending the trace to the host: the stream of [`crate::export::stream`] through
//! the architecture's trace channel, written at power-off when recording.
//!
//! Pages go straight from a copy of each CPU's ring to the channel; nothing
//! is assembled in memory first.

use alloc::format;
use alloc::string::String;

use arch::channel;
use arch::ChannelError;

use crate::events::record::{ftrace_formats, sched_formats};
use crate::export::stream::{record_header, Tag, MAGIC};
use ring_buffer::per_cpu::PAGE_SIZE;
use ring_buffer::trace_buffer;

/// Writes the whole trace to the host file `host_path`: metadata, the event
/// formats (the tracers' own, the scheduler's, the synthetic events' and
/// `extra` ones, as (system, format text)), the task names, and every
/// CPU's pages.
pub fn export(host_path: &str, extra: &[(String, String)]) -> Result<usize, ChannelError> {
    let mut channel = channel::open(host_path)?;
    let mut written = 0usize;
    let mut send = |bytes: &[u8]| {
        written += bytes.len();
        channel.write(bytes)
    };
    send(&MAGIC)?;
    let meta = format!(
        "arch={}\ncpus={}\npage_size={PAGE_SIZE}\nlong_size=8\nclock={}\ntracer={}\n",
        arch::NAME,
        trace_buffer::cpus(),
        crate::array::instances::top().buffer().clock().name(),
        crate::array::instances::top().current_tracer().name()
    );
    send(&record_header(Tag::Meta, meta.len()))?;
    send(meta.as_bytes())?;
    let own = ftrace_formats().into_iter().map(|(_, text)| (String::from("ftrace"), text));
    let sched = sched_formats().into_iter().map(|(_, text)| (String::from("sched"), text));
    let synthetic = crate::events::synth::all()
        .into_iter()
        .map(|synth| (String::from(crate::events::synth::GROUP), synth.def().format(synth.id())));
    for (system, text) in own.chain(sched).chain(synthetic).chain(extra.iter().cloned()) {
        send(&record_header(Tag::Format, system.len() + 1 + text.len()))?;
        send(system.as_bytes())?;
        send(&[0])?;
        send(text.as_bytes())?;
    }
    let mut cmdlines = String::new();
    for (pid, comm) in crate::task_names::saved_cmdlines() {
        cmdlines.push_str(&format!("{pid} {comm}\n"));
    }
    send(&record_header(Tag::Cmdlines, cmdlines.len()))?;
    send(cmdlines.as_bytes())?;
    for snapshot in crate::array::instances::top().buffer().snapshot_all() {
        let pages = snapshot.pages().count();
        send(&record_header(Tag::Cpu, 8 + pages * PAGE_SIZE))?;
        send(&(snapshot.cpu as u64).to_le_bytes())?;
        for page in snapshot.pages() {
            send(page)?;
        }
    }
    send(&record_header(Tag::End, 0))?;
    channel.close()?;
    Ok(written)
}
