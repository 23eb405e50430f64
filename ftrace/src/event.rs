//! The records tracers write into the ring buffer, laid out as Linux's:
//! every event starts with the common `trace_entry` header (type, flags,
//! preempt count, pid), then its own fields.

/// Event type of the function tracer's records (Linux's `TRACE_FN`).
pub const TRACE_FN: u16 = 1;
/// A function-graph return (Linux's `TRACE_GRAPH_RET`).
pub const TRACE_GRAPH_RET: u16 = 10;
/// A function-graph entry (Linux's `TRACE_GRAPH_ENT`).
pub const TRACE_GRAPH_ENT: u16 = 11;

/// `trace_entry.flags` bits, as Linux defines them.
pub mod flags {
    /// Interrupts were disabled.
    pub const IRQS_OFF: u8 = 0x01;
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
    fn encode_into(&self, out: &mut [u8]);

    /// The payload as bytes (for tests and host tools).
    fn to_bytes(&self) -> alloc::vec::Vec<u8> {
        let mut out = alloc::vec![0; Self::SIZE];
        self.encode_into(&mut out);
        out
    }
}

impl Common {
    fn encode(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&self.kind.to_ne_bytes());
        out[2] = self.flags;
        out[3] = self.preempt_count;
        out[4..8].copy_from_slice(&self.pid.to_ne_bytes());
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

    #[inline]
    fn encode_into(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        self.common.encode(out);
        out[8..16].copy_from_slice(&self.ip.to_ne_bytes());
        out[16..24].copy_from_slice(&self.parent_ip.to_ne_bytes());
    }
}

impl FunctionEvent {
    /// Reads an event back, if `bytes` holds one.
    pub fn decode(bytes: &[u8]) -> Option<FunctionEvent> {
        let common = Common::decode(bytes)?;
        (common.kind == TRACE_FN).then_some(FunctionEvent {
            common,
            ip: u64_at(bytes, 8)?,
            parent_ip: u64_at(bytes, 16)?,
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

    #[inline]
    fn encode_into(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        self.common.encode(out);
        out[8..16].copy_from_slice(&self.func.to_ne_bytes());
        out[16..20].copy_from_slice(&self.depth.to_ne_bytes());
        out[20..24].fill(0);
    }
}

impl GraphEntryEvent {
    pub fn decode(bytes: &[u8]) -> Option<GraphEntryEvent> {
        let common = Common::decode(bytes)?;
        (common.kind == TRACE_GRAPH_ENT).then_some(GraphEntryEvent {
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

    #[inline]
    fn encode_into(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        self.common.encode(out);
        out[8..16].copy_from_slice(&self.func.to_ne_bytes());
        out[16..24].copy_from_slice(&self.retval.to_ne_bytes());
        out[24..28].copy_from_slice(&self.depth.to_ne_bytes());
        out[28..32].copy_from_slice(&self.overrun.to_ne_bytes());
        out[32..40].copy_from_slice(&self.calltime.to_ne_bytes());
        out[40..48].copy_from_slice(&self.rettime.to_ne_bytes());
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

/// Any event the kernel records, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    Function(FunctionEvent),
    GraphEntry(GraphEntryEvent),
    GraphExit(GraphExitEvent),
    /// A type this decoder does not know (later tracers, probes).
    Other(Common),
}

impl Record {
    /// Decodes an event payload by its type.
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        let common = Common::decode(bytes)?;
        Some(match common.kind {
            TRACE_FN => Record::Function(FunctionEvent::decode(bytes)?),
            TRACE_GRAPH_ENT => Record::GraphEntry(GraphEntryEvent::decode(bytes)?),
            TRACE_GRAPH_RET => Record::GraphExit(GraphExitEvent::decode(bytes)?),
            _ => Record::Other(common),
        })
    }
}

/// The common fields every format description starts with.
pub const COMMON_FIELDS: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
";

/// The format descriptions (Linux's `events/ftrace/*/format`) of the
/// tracers' own events: (name, text).
pub fn ftrace_formats() -> [(&'static str, alloc::string::String); 3] {
    let format = |name: &str, id: u16, fields: &str, print: &str| {
        alloc::format!("name: {name}\nID: {id}\nformat:\n{COMMON_FIELDS}\n{fields}\nprint fmt: {print}\n")
    };
    [
        (
            "function",
            format(
                "function",
                TRACE_FN,
                "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n",
                "\" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip",
            ),
        ),
        (
            "funcgraph_entry",
            format(
                "funcgraph_entry",
                TRACE_GRAPH_ENT,
                "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:int depth;\toffset:16;\tsize:4;\tsigned:1;\n",
                "\"--> %ps (%d)\", (void *)REC->func, REC->depth",
            ),
        ),
        (
            "funcgraph_exit",
            format(
                "funcgraph_exit",
                TRACE_GRAPH_RET,
                "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long retval;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:int depth;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:unsigned int overrun;\toffset:28;\tsize:4;\tsigned:0;\n\tfield:unsigned long long calltime;\toffset:32;\tsize:8;\tsigned:0;\n\tfield:unsigned long long rettime;\toffset:40;\tsize:8;\tsigned:0;\n",
                "\"<-- %ps (%d) (start: %llx  end: %llx) over: %d retval: %lx\", (void *)REC->func, REC->depth, REC->calltime, REC->rettime, REC->depth, REC->retval",
            ),
        ),
    ]
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
        assert!(matches!(Record::decode(&other), Some(Record::Other(c)) if c.kind == 99));
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
    fn graph_events_round_trip() {
        let common = Common { kind: TRACE_GRAPH_ENT, ..Common::default() };
        let entry = GraphEntryEvent { common, func: 0x1000, depth: 3 };
        assert_eq!(Record::decode(&entry.to_bytes()), Some(Record::GraphEntry(entry)));
        let common = Common { kind: TRACE_GRAPH_RET, ..Common::default() };
        let exit = GraphExitEvent { common, func: 0x1000, retval: 5, depth: 3, overrun: 1, calltime: 100, rettime: 912 };
        assert_eq!(Record::decode(&exit.to_bytes()), Some(Record::GraphExit(exit)));
        assert_eq!(exit.duration(), 812);
    }
}
