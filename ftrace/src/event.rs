//! The records tracers write into the ring buffer, laid out as Linux's:
//! every event starts with the common `trace_entry` header (type, flags,
//! preempt count, pid), then its own fields.

/// Event type of the function tracer's records (Linux's `TRACE_FN`).
pub const TRACE_FN: u16 = 1;

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

impl FunctionEvent {
    /// Bytes of an encoded event.
    pub const SIZE: usize = COMMON_SIZE + 16;

    /// The event's payload bytes.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut out = [0; Self::SIZE];
        self.common.encode(&mut out);
        out[8..16].copy_from_slice(&self.ip.to_ne_bytes());
        out[16..24].copy_from_slice(&self.parent_ip.to_ne_bytes());
        out
    }

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
        let bytes = event.encode();
        assert_eq!(u16::from_ne_bytes([bytes[0], bytes[1]]), TRACE_FN);
        assert_eq!(FunctionEvent::decode(&bytes), Some(event));
        let mut other = bytes;
        other[0] = 99;
        assert_eq!(FunctionEvent::decode(&other), None);
    }
}
