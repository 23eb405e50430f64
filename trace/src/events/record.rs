//! The records tracers write into the ring buffer, laid out as Linux's:
//! every event starts with the common `trace_entry` header (type, flags,
//! preempt count, pid), then its own fields.

use ring_buffer::payload::{encode_to_vec, Payload, UNALIGNED_STORES};

/// Event type of the function tracer's records (Linux's `TRACE_FN`).
pub const TRACE_FN: u16 = 1;
/// A function-graph return (Linux's `TRACE_GRAPH_RET`).
pub const TRACE_GRAPH_RET: u16 = 10;
/// A function-graph entry (Linux's `TRACE_GRAPH_ENT`).
pub const TRACE_GRAPH_ENT: u16 = 11;
/// A function-graph entry with the call's return address (Linux's
/// `TRACE_GRAPH_RETADDR_ENT`, under `options/funcgraph-retaddr`).
pub const TRACE_GRAPH_RETADDR_ENT: u16 = 12;
/// A call chain (Linux's `TRACE_STACK`): a `stacktrace` command's record.
pub const TRACE_STACK: u16 = 4;
/// The calls `options/func-no-repeats` left out (Linux's
/// `TRACE_FUNC_REPEATS`, numbered as since Linux 6.13, which has
/// `TRACE_GRAPH_RETADDR_ENT`).
pub const TRACE_FUNC_REPEATS: u16 = 20;

/// Where a stack event's addresses start (after the header and `size`).
const STACK_FRAMES: usize = COMMON_SIZE + 8;

/// The size of a stack event holding `frames`.
pub fn stack_event_size(frames: &[u64]) -> usize {
    STACK_FRAMES + 8 * frames.len()
}

/// Writes a stack event (`struct stack_entry`: the header, `size`, then
/// the addresses) into `out` of [`stack_event_size`] bytes.
pub fn encode_stack(common: Common, frames: &[u64], out: &mut Payload) {
    common.encode(out);
    out.put_u64(8, frames.len() as u64);
    for (i, frame) in frames.iter().enumerate() {
        out.put_u64(STACK_FRAMES + 8 * i, *frame);
    }
}

/// A stack event's addresses, if `bytes` holds one.
pub fn decode_stack(bytes: &[u8]) -> Option<impl Iterator<Item = u64> + '_> {
    let common = Common::decode(bytes)?;
    if common.kind != TRACE_STACK {
        return None;
    }
    let count = u64_at(bytes, 8)? as usize;
    let frames = bytes.get(STACK_FRAMES..STACK_FRAMES.checked_add(count.checked_mul(8)?)?)?;
    Some(frames.chunks_exact(8).map(|chunk| u64::from_ne_bytes(chunk.try_into().unwrap())))
}

/// A line of text in the trace (Linux's `TRACE_PRINT`): a `trace_marker`
/// line, or what the kernel itself says there (see [`PrintWriter`]).
pub const TRACE_PRINT: u16 = 5;

/// Where a print event's text starts (after the header and `ip`).
const PRINT_TEXT: usize = COMMON_SIZE + 8;

/// Who wrote a print event. Linux keeps the writer's address in `ip` and
/// prints its name before the text. A [`trace_printk!`](crate::trace_printk)
/// keeps its caller's address there too; tracefs's own writers keep a small
/// number no code has ([`ip`](Self::ip)), and `trace` prints Linux's name
/// for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintWriter {
    /// `echo TEXT > trace_marker`.
    Marker,
    /// A `snapshot` trigger or function command that found no snapshot
    /// buffer.
    Snapshot,
    /// `trace_printk!`, called from this code address.
    Kernel(u64),
}

impl PrintWriter {
    /// What the event's `ip` holds.
    pub const fn ip(self) -> u64 {
        match self {
            PrintWriter::Marker => 0,
            PrintWriter::Snapshot => 1,
            PrintWriter::Kernel(ip) => ip,
        }
    }

    /// The writer whose `ip` this is.
    pub fn of_ip(ip: u64) -> PrintWriter {
        match ip {
            0 => PrintWriter::Marker,
            1 => PrintWriter::Snapshot,
            ip => PrintWriter::Kernel(ip),
        }
    }

    /// The name `trace` shows before the text for tracefs's own writers:
    /// Linux's writer's (`None` for a kernel caller: its symbol).
    pub const fn name(self) -> Option<&'static str> {
        match self {
            PrintWriter::Marker => Some("tracing_mark_write"),
            PrintWriter::Snapshot => Some("tracing_snapshot_instance_cond"),
            PrintWriter::Kernel(_) => None,
        }
    }
}

/// Writes a print event (`struct print_entry`: the header, `ip`, then the
/// text, NUL-terminated) into `out`, which must be
/// [`print_event_size`] bytes.
pub fn encode_print(common: Common, writer: PrintWriter, text: &[u8], out: &mut Payload) {
    encode_print_with(common, writer, text.len(), out, |room| room.copy_from_slice(text));
}

/// [`encode_print`] for a text of `len` bytes that `fill` writes into the
/// room it is given, in place: `out` must be [`print_text_event_size`]`(len)`
/// bytes.
pub fn encode_print_with(common: Common, writer: PrintWriter, len: usize, out: &mut Payload, fill: impl FnOnce(&mut [u8])) {
    common.encode(out);
    out.put_u64(8, writer.ip());
    fill(&mut out.bytes()[PRINT_TEXT..PRINT_TEXT + len]);
    out.put_u8(PRINT_TEXT + len, 0);
}

/// The size of a print event holding `text`.
pub fn print_event_size(text: &[u8]) -> usize {
    print_text_event_size(text.len())
}

/// The size of a print event holding a text of `len` bytes.
pub const fn print_text_event_size(len: usize) -> usize {
    PRINT_TEXT + len + 1
}

/// A print event's writer and text (without its NUL), if `bytes` holds one.
pub fn decode_print(bytes: &[u8]) -> Option<(PrintWriter, &[u8])> {
    let common = Common::decode(bytes)?;
    if common.kind != TRACE_PRINT {
        return None;
    }
    let writer = PrintWriter::of_ip(u64_at(bytes, 8)?);
    let text = bytes.get(PRINT_TEXT..)?;
    Some((writer, &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())]))
}
/// The next type id of a dynamic event (probe events, synthetic events:
/// one numbering, from 1000, so no two events share an id); ids are never
/// reused (a record left in a buffer keeps meaning its event).
static NEXT_DYNAMIC_ID: core::sync::atomic::AtomicU16 = core::sync::atomic::AtomicU16::new(1000);

/// A type id for a new dynamic event, or `None` once every id was used.
pub fn new_dynamic_id() -> Option<u16> {
    use core::sync::atomic::Ordering::Relaxed;
    NEXT_DYNAMIC_ID.fetch_update(Relaxed, Relaxed, |id| id.checked_add(1)).ok()
}

/// `sched:sched_switch` (Linux numbers tracepoints at boot; so do we).
pub const SCHED_SWITCH: u16 = 300;
/// `sched:sched_wakeup`.
pub const SCHED_WAKEUP: u16 = 301;
/// `sched:sched_wakeup_new`.
pub const SCHED_WAKEUP_NEW: u16 = 302;

/// `trace_entry.flags` bits, as Linux defines them.
pub mod flags {
    /// Interrupts were disabled.
    pub const IRQS_OFF: u8 = 0x01;
    /// A reschedule was pending.
    pub const NEED_RESCHED: u8 = 0x04;
    /// Recorded in hardware-interrupt context.
    pub const HARDIRQ: u8 = 0x08;
    /// Recorded in software-interrupt context.
    pub const SOFTIRQ: u8 = 0x10;
    /// Recorded in NMI context.
    pub const NMI: u8 = 0x40;
}

/// The common header (`struct trace_entry`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Common {
    pub kind: u16,
    pub flags: u8,
    pub preempt_count: u8,
    pub pid: i32,
}

/// Bytes of [`Common`].
pub const COMMON_SIZE: usize = 8;

/// An event with a fixed-size payload, written in place into the trace
/// buffer ([`encode_into`](Self::encode_into)).
pub trait FixedEvent {
    /// Payload bytes.
    const SIZE: usize;

    /// Writes the payload into `out` (at least `SIZE` bytes).
    fn encode_into(&self, out: &mut Payload);

    /// The payload as bytes (for tests and host tools).
    fn to_bytes(&self) -> alloc::vec::Vec<u8> {
        encode_to_vec(Self::SIZE, |out| self.encode_into(out))
    }
}

impl Common {
    /// Writes the header at the start of `out`: field by field where
    /// stores may be unaligned (fewest instructions there), else its first
    /// four bytes as one word.
    #[inline(always)]
    pub fn encode(&self, out: &mut Payload) {
        if UNALIGNED_STORES {
            out.put_u16(0, self.kind);
            out.put_u8(2, self.flags);
            out.put_u8(3, self.preempt_count);
        } else {
            let [k0, k1] = self.kind.to_ne_bytes();
            out.put_u32(0, u32::from_ne_bytes([k0, k1, self.flags, self.preempt_count]));
        }
        out.put_u32(4, self.pid as u32);
    }

    /// Reads the header at the start of an event payload.
    pub fn decode(bytes: &[u8]) -> Option<Common> {
        Some(Common {
            kind: u16::from_ne_bytes(bytes.get(0..2)?.try_into().ok()?),
            flags: *bytes.get(2)?,
            preempt_count: *bytes.get(3)?,
            pid: i32::from_ne_bytes(bytes.get(4..8)?.try_into().ok()?),
        })
    }
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// A function tracer record (`struct ftrace_entry`): the traced function and
/// the address it was called from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionEvent {
    pub common: Common,
    pub ip: u64,
    pub parent_ip: u64,
}

impl FixedEvent for FunctionEvent {
    const SIZE: usize = COMMON_SIZE + 16;

    #[inline(always)]
    fn encode_into(&self, out: &mut Payload) {
        self.common.encode(out);
        out.put_u64(8, self.ip);
        out.put_u64(16, self.parent_ip);
    }
}

impl FunctionEvent {
    /// Reads an event back, if `bytes` holds one.
    pub fn decode(bytes: &[u8]) -> Option<FunctionEvent> {
        let common = Common::decode(bytes)?;
        (common.kind == TRACE_FN).then_some(FunctionEvent { common, ip: u64_at(bytes, 8)?, parent_ip: u64_at(bytes, 16)? })
    }
}

/// How many times the function tracer's last call on a CPU was repeated,
/// from the same place, before another call came (`struct
/// func_repeats_entry`, under `options/func-no-repeats`): the function,
/// its caller, the count, and how long before this record the last repeat
/// came (48 bits, split as Linux splits them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncRepeatsEvent {
    pub common: Common,
    pub ip: u64,
    pub parent_ip: u64,
    pub count: u16,
    /// The record's time minus the last repeat's, in the buffer's clock.
    pub delta: u64,
}

impl FixedEvent for FuncRepeatsEvent {
    const SIZE: usize = COMMON_SIZE + 24;

    fn encode_into(&self, out: &mut Payload) {
        self.common.encode(out);
        out.put_u64(8, self.ip);
        out.put_u64(16, self.parent_ip);
        out.put_u16(24, self.count);
        out.put_u16(26, (self.delta >> 32) as u16);
        out.put_u32(28, self.delta as u32);
    }
}

impl FuncRepeatsEvent {
    /// Reads an event back, if `bytes` holds one.
    pub fn decode(bytes: &[u8]) -> Option<FuncRepeatsEvent> {
        let common = Common::decode(bytes)?;
        let top = u16::from_ne_bytes(bytes.get(26..28)?.try_into().ok()?);
        (common.kind == TRACE_FUNC_REPEATS).then_some(FuncRepeatsEvent {
            common,
            ip: u64_at(bytes, 8)?,
            parent_ip: u64_at(bytes, 16)?,
            count: u16::from_ne_bytes(bytes.get(24..26)?.try_into().ok()?),
            delta: u64::from(top) << 32 | u64::from(u32_at(bytes, 28)?),
        })
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// A function-graph entry (`struct ftrace_graph_ent_entry`): the function
/// and its depth on the return stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphEntryEvent {
    pub common: Common,
    pub func: u64,
    pub depth: i32,
}

impl FixedEvent for GraphEntryEvent {
    const SIZE: usize = COMMON_SIZE + 16;

    #[inline(always)]
    fn encode_into(&self, out: &mut Payload) {
        self.common.encode(out);
        out.put_u64(8, self.func);
        out.put_u32(16, self.depth as u32);
        out.put_u32(20, 0);
    }
}

/// Where a return-address entry keeps the address (`struct
/// fgraph_retaddr_ent_entry`: packed after the depth, as Linux packs it).
const RETADDR_AT: usize = COMMON_SIZE + 12;

impl GraphEntryEvent {
    /// The size of a return-address entry.
    pub const RETADDR_SIZE: usize = RETADDR_AT + 8;

    /// Writes the entry as a return-address entry (`TRACE_GRAPH_RETADDR_ENT`,
    /// [`RETADDR_SIZE`](Self::RETADDR_SIZE) bytes) with `retaddr`.
    pub fn encode_with_retaddr(&self, retaddr: u64, out: &mut Payload) {
        Common { kind: TRACE_GRAPH_RETADDR_ENT, ..self.common }.encode(out);
        out.put_u64(8, self.func);
        out.put_u32(16, self.depth as u32);
        out.put_u64(RETADDR_AT, retaddr);
    }

    /// The return address in `bytes`, if they hold a return-address entry.
    pub fn retaddr(bytes: &[u8]) -> Option<u64> {
        (Common::decode(bytes)?.kind == TRACE_GRAPH_RETADDR_ENT).then(|| u64_at(bytes, RETADDR_AT)).flatten()
    }

    /// Reads an entry back (a plain one or a return-address one, whose
    /// address [`retaddr`](Self::retaddr) reads), if `bytes` holds one.
    pub fn decode(bytes: &[u8]) -> Option<GraphEntryEvent> {
        let common = Common::decode(bytes)?;
        matches!(common.kind, TRACE_GRAPH_ENT | TRACE_GRAPH_RETADDR_ENT).then_some(GraphEntryEvent {
            common,
            func: u64_at(bytes, 8)?,
            depth: u32_at(bytes, 16)? as i32,
        })
    }
}

/// A function-graph return (`struct ftrace_graph_ret_entry`): the function,
/// its return value, depth, the overrun count, and call and return times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphExitEvent {
    pub common: Common,
    pub func: u64,
    pub retval: u64,
    pub depth: i32,
    pub overrun: u32,
    pub calltime: u64,
    pub rettime: u64,
}

impl FixedEvent for GraphExitEvent {
    const SIZE: usize = COMMON_SIZE + 40;

    #[inline(always)]
    fn encode_into(&self, out: &mut Payload) {
        self.common.encode(out);
        out.put_u64(8, self.func);
        out.put_u64(16, self.retval);
        out.put_u32(24, self.depth as u32);
        out.put_u32(28, self.overrun);
        out.put_u64(32, self.calltime);
        out.put_u64(40, self.rettime);
    }
}

impl GraphExitEvent {
    pub fn decode(bytes: &[u8]) -> Option<GraphExitEvent> {
        let common = Common::decode(bytes)?;
        (common.kind == TRACE_GRAPH_RET).then_some(GraphExitEvent {
            common,
            func: u64_at(bytes, 8)?,
            retval: u64_at(bytes, 16)?,
            depth: u32_at(bytes, 24)? as i32,
            overrun: u32_at(bytes, 28)?,
            calltime: u64_at(bytes, 32)?,
            rettime: u64_at(bytes, 40)?,
        })
    }

    /// How long the call took, in nanoseconds.
    pub fn duration(&self) -> u64 {
        self.rettime.saturating_sub(self.calltime)
    }
}

/// A task name as events store it: 16 bytes, NUL-padded.
pub type Comm = [u8; 16];

/// The name in a [`Comm`].
pub fn comm_str(comm: &Comm) -> &str {
    let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    core::str::from_utf8(&comm[..len]).unwrap_or("?")
}

/// The default priority of a kernel thread, as Linux reports it.
pub const DEFAULT_PRIO: i32 = 120;

/// `sched_switch` (Linux's layout): the task switched out, its state, and
/// the task switched in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedSwitchEvent {
    pub common: Common,
    pub prev_comm: Comm,
    pub prev_pid: i32,
    pub prev_prio: i32,
    pub prev_state: u64,
    pub next_comm: Comm,
    pub next_pid: i32,
    pub next_prio: i32,
}

impl FixedEvent for SchedSwitchEvent {
    const SIZE: usize = COMMON_SIZE + 56;

    #[inline]
    fn encode_into(&self, out: &mut Payload) {
        self.common.encode(out);
        out.put_slice(8, &self.prev_comm);
        out.put_slice(24, &self.prev_pid.to_ne_bytes());
        out.put_slice(28, &self.prev_prio.to_ne_bytes());
        out.put_slice(32, &self.prev_state.to_ne_bytes());
        out.put_slice(40, &self.next_comm);
        out.put_slice(56, &self.next_pid.to_ne_bytes());
        out.put_slice(60, &self.next_prio.to_ne_bytes());
    }
}

impl SchedSwitchEvent {
    pub fn decode(bytes: &[u8]) -> Option<SchedSwitchEvent> {
        let common = Common::decode(bytes)?;
        (common.kind == SCHED_SWITCH).then_some(SchedSwitchEvent {
            common,
            prev_comm: bytes.get(8..24)?.try_into().ok()?,
            prev_pid: u32_at(bytes, 24)? as i32,
            prev_prio: u32_at(bytes, 28)? as i32,
            prev_state: u64_at(bytes, 32)?,
            next_comm: bytes.get(40..56)?.try_into().ok()?,
            next_pid: u32_at(bytes, 56)? as i32,
            next_prio: u32_at(bytes, 60)? as i32,
        })
    }

    /// `prev_state` as Linux prints it: `R`, `R+` (preempted), `S`, `D`, `X`.
    pub fn state_text(&self) -> &'static str {
        match (self.prev_state & 0xff, self.prev_state & STATE_REPORT_MAX != 0) {
            (0, true) => "R+",
            (0, false) => "R",
            (1, _) => "S",
            (2, _) => "D",
            (0x10, _) => "X",
            _ => "?",
        }
    }
}

/// Linux's `TASK_REPORT_MAX`: the task was preempted (printed as `+`).
pub const STATE_REPORT_MAX: u64 = 0x100;

/// `sched_wakeup` and `sched_wakeup_new` (Linux's layout, one template):
/// the task woken and the CPU it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedWakeupEvent {
    pub common: Common,
    pub comm: Comm,
    pub pid: i32,
    pub prio: i32,
    pub target_cpu: i32,
}

impl FixedEvent for SchedWakeupEvent {
    const SIZE: usize = COMMON_SIZE + 28;

    #[inline]
    fn encode_into(&self, out: &mut Payload) {
        self.common.encode(out);
        out.put_slice(8, &self.comm);
        out.put_slice(24, &self.pid.to_ne_bytes());
        out.put_slice(28, &self.prio.to_ne_bytes());
        out.put_slice(32, &self.target_cpu.to_ne_bytes());
    }
}

impl SchedWakeupEvent {
    pub fn decode(bytes: &[u8]) -> Option<SchedWakeupEvent> {
        let common = Common::decode(bytes)?;
        matches!(common.kind, SCHED_WAKEUP | SCHED_WAKEUP_NEW).then_some(SchedWakeupEvent {
            common,
            comm: bytes.get(8..24)?.try_into().ok()?,
            pid: u32_at(bytes, 24)? as i32,
            prio: u32_at(bytes, 28)? as i32,
            target_cpu: u32_at(bytes, 32)? as i32,
        })
    }
}

/// Any event the kernel records, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Function(FunctionEvent),
    FuncRepeats(FuncRepeatsEvent),
    GraphEntry(GraphEntryEvent),
    GraphExit(GraphExitEvent),
    SchedSwitch(SchedSwitchEvent),
    SchedWakeup(SchedWakeupEvent),
    /// A type this decoder does not know (later tracers, probes).
    Other(Common),
}

impl Event {
    /// Decodes an event payload by its type.
    pub fn decode(bytes: &[u8]) -> Option<Event> {
        let common = Common::decode(bytes)?;
        Some(match common.kind {
            TRACE_FN => Event::Function(FunctionEvent::decode(bytes)?),
            TRACE_FUNC_REPEATS => Event::FuncRepeats(FuncRepeatsEvent::decode(bytes)?),
            TRACE_GRAPH_ENT | TRACE_GRAPH_RETADDR_ENT => Event::GraphEntry(GraphEntryEvent::decode(bytes)?),
            TRACE_GRAPH_RET => Event::GraphExit(GraphExitEvent::decode(bytes)?),
            SCHED_SWITCH => Event::SchedSwitch(SchedSwitchEvent::decode(bytes)?),
            SCHED_WAKEUP | SCHED_WAKEUP_NEW => Event::SchedWakeup(SchedWakeupEvent::decode(bytes)?),
            _ => Event::Other(common),
        })
    }
}

/// The common fields every format description starts with.
pub const COMMON_FIELDS: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
";

/// The fields of `sched_wakeup` and `sched_wakeup_new`.
const WAKEUP_FIELDS: &str = "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n";
/// Their print format.
const WAKEUP_PRINT: &str = "\"comm=%s pid=%d prio=%d target_cpu=%03d\", REC->comm, REC->pid, REC->prio, REC->target_cpu";

/// An event's `format` file: its name and id, the common fields, its own
/// (`fields`, Linux's `\tfield:...` lines) and its print format.
pub fn format_text(name: &str, id: u16, fields: &str, print: &str) -> alloc::string::String {
    alloc::format!("name: {name}\nID: {id}\nformat:\n{COMMON_FIELDS}\n{fields}\nprint fmt: {print}\n")
}

/// The format descriptions of the scheduler's events, as Linux's
/// `events/sched/*/format` (trace-cmd's sched plugin reads them by field
/// name): (name, text).
pub fn sched_formats() -> [(&'static str, alloc::string::String); 3] {
    const STATES: &str = "(((0x0000 | 0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0010 | 0x0020 | 0x0040) + 1) << 1)";
    [
        (
            "sched_switch",
            format_text(
                "sched_switch",
                SCHED_SWITCH,
                "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n",
                &alloc::format!(
                    "\"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ({STATES} - 1)) ? __print_flags(REC->prev_state & ({STATES} - 1), \"|\", {{ 0x0001, \"S\" }}, {{ 0x0002, \"D\" }}, {{ 0x0004, \"T\" }}, {{ 0x0008, \"t\" }}, {{ 0x0010, \"X\" }}, {{ 0x0020, \"Z\" }}, {{ 0x0040, \"P\" }}, {{ 0x0080, \"I\" }}) : \"R\", REC->prev_state & {STATES} ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio"
                ),
            ),
        ),
        ("sched_wakeup", format_text("sched_wakeup", SCHED_WAKEUP, WAKEUP_FIELDS, WAKEUP_PRINT)),
        ("sched_wakeup_new", format_text("sched_wakeup_new", SCHED_WAKEUP_NEW, WAKEUP_FIELDS, WAKEUP_PRINT)),
    ]
}

/// The format descriptions (Linux's `events/ftrace/*/format`) of the
/// tracers' own events: (name, text).
pub fn ftrace_formats() -> [(&'static str, alloc::string::String); 7] {
    [
        (
            "function",
            format_text(
                "function",
                TRACE_FN,
                "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n",
                "\" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip",
            ),
        ),
        (
            "funcgraph_entry",
            format_text(
                "funcgraph_entry",
                TRACE_GRAPH_ENT,
                "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:int depth;\toffset:16;\tsize:4;\tsigned:1;\n",
                "\"--> %ps (%d)\", (void *)REC->func, REC->depth",
            ),
        ),
        (
            "funcgraph_exit",
            format_text(
                "funcgraph_exit",
                TRACE_GRAPH_RET,
                "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long retval;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:int depth;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:unsigned int overrun;\toffset:28;\tsize:4;\tsigned:0;\n\tfield:unsigned long long calltime;\toffset:32;\tsize:8;\tsigned:0;\n\tfield:unsigned long long rettime;\toffset:40;\tsize:8;\tsigned:0;\n",
                "\"<-- %ps (%d) (start: %llx  end: %llx) over: %d retval: %lx\", (void *)REC->func, REC->depth, REC->calltime, REC->rettime, REC->depth, REC->retval",
            ),
        ),
        (
            "print",
            format_text(
                "print",
                TRACE_PRINT,
                "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:1;\n",
                "\"%ps: %s\", (void *)REC->ip, REC->buf",
            ),
        ),
        (
            "kernel_stack",
            format_text(
                "kernel_stack",
                TRACE_STACK,
                "\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:unsigned long caller[0];\toffset:16;\tsize:0;\tsigned:0;\n",
                "\"\\t=> %ps\\n\\t=> %ps\\n\\t=> %ps\\n\\t=> %ps\\n\", (void *)REC->caller[0], (void *)REC->caller[1], (void *)REC->caller[2], (void *)REC->caller[3]",
            ),
        ),
        (
            "fgraph_retaddr_entry",
            format_text(
                "fgraph_retaddr_entry",
                TRACE_GRAPH_RETADDR_ENT,
                "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:int depth;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:unsigned long retaddr;\toffset:20;\tsize:8;\tsigned:0;\n",
                "\"--> %ps (%d) <- %ps\", (void *)REC->func, REC->depth, (void *)REC->retaddr",
            ),
        ),
        (
            "func_repeats",
            format_text(
                "func_repeats",
                TRACE_FUNC_REPEATS,
                "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:u16 count;\toffset:24;\tsize:2;\tsigned:0;\n\tfield:u16 top_delta_ts;\toffset:26;\tsize:2;\tsigned:0;\n\tfield:u32 bottom_delta_ts;\toffset:28;\tsize:4;\tsigned:0;\n",
                "\" %ps <-%ps\\t(repeats:%u  delta: -%llu)\", (void *)REC->ip, (void *)REC->parent_ip, REC->count, (((u64)REC->top_delta_ts << 32) | REC->bottom_delta_ts)",
            ),
        ),
    ]
}

/// The common header for an event recorded now: the context flags, the
/// preempt count and the running task's pid.
#[cfg(target_os = "none")]
#[inline]
pub fn event_common(kind: u16) -> Common {
    let context = ftrace::task::event_context();
    let cpu = context.cpu();
    let mut bits = match cpu.context {
        arch::context::Context::Normal => 0,
        arch::context::Context::Softirq => flags::SOFTIRQ,
        arch::context::Context::Irq => flags::HARDIRQ,
        // Linux's `nmi_enter` counts a hard interrupt too: an NMI-like
        // record (a breakpoint's kprobe event) shows `Z`, as there.
        arch::context::Context::Nmi => flags::NMI | flags::HARDIRQ,
    };
    if !arch::cpu::interrupts_enabled() {
        bits |= flags::IRQS_OFF;
    }
    if cpu.need_resched {
        bits |= flags::NEED_RESCHED;
    }
    Common { kind, flags: bits, preempt_count: cpu.preempt_count.min(255) as u8, pid: context.pid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_event_round_trip() {
        let event = FunctionEvent {
            common: Common { kind: TRACE_FN, flags: flags::IRQS_OFF | flags::HARDIRQ, preempt_count: 0, pid: 0 },
            ip: 0x4008_1234,
            parent_ip: 0x4008_5678,
        };
        let bytes = event.to_bytes();
        assert_eq!(u16::from_ne_bytes([bytes[0], bytes[1]]), TRACE_FN);
        assert_eq!(FunctionEvent::decode(&bytes), Some(event));
        let mut other = bytes;
        other[0] = 99;
        assert_eq!(FunctionEvent::decode(&other), None);
        assert!(matches!(Event::decode(&other), Some(Event::Other(c)) if c.kind == 99));
    }

    #[test]
    fn formats_describe_the_encoded_layout() {
        let formats = ftrace_formats();
        let function = &formats[0].1;
        assert!(function.starts_with("name: function\nID: 1\nformat:\n\tfield:unsigned short common_type;"));
        assert!(function.contains("\tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n"));
        assert!(function.ends_with("print fmt: \" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip\n"));
        assert_eq!(FunctionEvent::SIZE, 24);
        assert!(formats[2].1.contains("field:unsigned long long rettime;\toffset:40;\tsize:8"));
        assert_eq!(GraphExitEvent::SIZE, 48);
    }

    #[test]
    fn stack_events_round_trip() {
        let common = Common { kind: TRACE_STACK, ..Common::default() };
        let frames = [0x1000u64, 0x2000, 0x3000];
        let out = encode_to_vec(stack_event_size(&frames), |out| encode_stack(common, &frames, out));
        assert_eq!(decode_stack(&out).unwrap().collect::<alloc::vec::Vec<_>>(), frames);
        assert!(decode_stack(&out[..20]).is_none(), "cut short");
    }

    #[test]
    fn print_events_round_trip() {
        let common = Common { kind: TRACE_PRINT, pid: 7, ..Common::default() };
        let out = encode_to_vec(print_event_size(b"hello\n"), |out| encode_print(common, PrintWriter::Marker, b"hello\n", out));
        assert_eq!(decode_print(&out), Some((PrintWriter::Marker, &b"hello\n"[..])));
        let out = encode_to_vec(print_event_size(b"x"), |out| encode_print(common, PrintWriter::Snapshot, b"x", out));
        assert_eq!(decode_print(&out), Some((PrintWriter::Snapshot, &b"x"[..])), "the writer is kept");
        let out = encode_to_vec(print_event_size(b"k"), |out| encode_print(common, PrintWriter::Kernel(0x1234), b"k", out));
        assert_eq!(decode_print(&out), Some((PrintWriter::Kernel(0x1234), &b"k"[..])), "a caller's address");
        assert_eq!(Common::decode(&out).unwrap().pid, 7);
        assert_eq!(decode_print(&[0u8; 24]), None, "another type");
        assert!(ftrace_formats()[3].1.contains("\tfield:char buf[];\toffset:16;"));
    }

    #[test]
    fn graph_events_round_trip() {
        let common = Common { kind: TRACE_GRAPH_ENT, ..Common::default() };
        let entry = GraphEntryEvent { common, func: 0x1000, depth: 3 };
        assert_eq!(Event::decode(&entry.to_bytes()), Some(Event::GraphEntry(entry)));
        let common = Common { kind: TRACE_GRAPH_RET, ..Common::default() };
        let exit = GraphExitEvent { common, func: 0x1000, retval: 5, depth: 3, overrun: 1, calltime: 100, rettime: 912 };
        assert_eq!(Event::decode(&exit.to_bytes()), Some(Event::GraphExit(exit)));
        assert_eq!(exit.duration(), 812);
    }
}
