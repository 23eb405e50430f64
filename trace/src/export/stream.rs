//! The trace stream: how a kernel hands its trace to the host.
//!
//! At power-off with recording on, the kernel writes one stream through the
//! architecture's trace channel: a magic number, then records, each a header
//! (tag, length) and a payload, ending with an `End` record. The host tool
//! `tools/tracedat` reads it back with [`parse`] and writes a `trace.dat`.
//! Without the `End` record the stream is incomplete: the channel broke.
//!
//! Records:
//! - `Meta`: `key=value` lines (architecture, page size, CPU count...);
//! - `Format`: an event system's name, a NUL, and one event's format text
//!   (system `ftrace` for the tracers' own events);
//! - `Cmdlines`: the task names, `pid comm` lines (Linux's
//!   `saved_cmdlines`);
//! - `Cpu`: a CPU number (u64), then that CPU's ring-buffer pages, oldest
//!   first, in Linux's page format, exactly as the ring holds them.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// The first bytes of every stream.
pub const MAGIC: [u8; 16] = *b"KTRACE-STREAM-1\0";

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Tag {
    End = 0,
    Meta = 1,
    Format = 2,
    Cpu = 3,
    Cmdlines = 4,
}

impl Tag {
    fn from_u32(value: u32) -> Option<Tag> {
        match value {
            0 => Some(Tag::End),
            1 => Some(Tag::Meta),
            2 => Some(Tag::Format),
            3 => Some(Tag::Cpu),
            4 => Some(Tag::Cmdlines),
            _ => None,
        }
    }
}

/// A record's header: tag, reserved, payload length.
pub const RECORD_HEADER: usize = 16;

/// The header bytes of a record of `tag` with `len` payload bytes.
pub fn record_header(tag: Tag, len: usize) -> [u8; RECORD_HEADER] {
    let mut header = [0u8; RECORD_HEADER];
    header[0..4].copy_from_slice(&(tag as u32).to_le_bytes());
    header[8..16].copy_from_slice(&(len as u64).to_le_bytes());
    header
}

/// A stream, read back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    pub meta: Vec<(String, String)>,
    /// (system, format text).
    pub formats: Vec<(String, String)>,
    /// (CPU, its pages back to back).
    pub cpus: Vec<(u64, Vec<u8>)>,
    /// `pid comm` lines.
    pub cmdlines: String,
}

impl Stream {
    /// A `Meta` value.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Why a stream could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// Nothing arrived: the session recorded nothing.
    Empty,
    /// Not a trace stream.
    BadMagic,
    /// The stream stops before its `End` record: the channel broke.
    Truncated,
    /// A record that makes no sense.
    Corrupt(&'static str),
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Empty => write!(f, "the session recorded nothing (no trace stream arrived)"),
            StreamError::BadMagic => write!(f, "not a ktrace stream"),
            StreamError::Truncated => write!(f, "the trace stream is incomplete: the channel broke"),
            StreamError::Corrupt(why) => write!(f, "corrupt trace stream: {why}"),
        }
    }
}

/// Reads a whole stream.
pub fn parse(bytes: &[u8]) -> Result<Stream, StreamError> {
    if bytes.is_empty() {
        return Err(StreamError::Empty);
    }
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(if bytes.len() < MAGIC.len() { StreamError::Truncated } else { StreamError::BadMagic });
    }
    let mut stream = Stream::default();
    let mut at = MAGIC.len();
    loop {
        let header = bytes.get(at..at + RECORD_HEADER).ok_or(StreamError::Truncated)?;
        let tag = u32::from_le_bytes(header[0..4].try_into().unwrap());
        let len = u64::from_le_bytes(header[8..16].try_into().unwrap()) as usize;
        let tag = Tag::from_u32(tag).ok_or(StreamError::Corrupt("unknown record tag"))?;
        // A length past what any stream holds would wrap the sum.
        let end = (at + RECORD_HEADER).checked_add(len).ok_or(StreamError::Corrupt("record length out of range"))?;
        let payload = bytes.get(at + RECORD_HEADER..end).ok_or(StreamError::Truncated)?;
        at = end;
        match tag {
            Tag::End => return Ok(stream),
            Tag::Meta => {
                let text = core::str::from_utf8(payload).map_err(|_| StreamError::Corrupt("meta is not UTF-8"))?;
                for line in text.lines() {
                    if let Some((key, value)) = line.split_once('=') {
                        stream.meta.push((key.to_string(), value.to_string()));
                    }
                }
            }
            Tag::Format => {
                let nul = payload.iter().position(|&b| b == 0).ok_or(StreamError::Corrupt("format without a system"))?;
                let text = |b: &[u8]| {
                    core::str::from_utf8(b).map(str::to_string).map_err(|_| StreamError::Corrupt("format is not UTF-8"))
                };
                stream.formats.push((text(&payload[..nul])?, text(&payload[nul + 1..])?));
            }
            Tag::Cmdlines => {
                stream.cmdlines =
                    core::str::from_utf8(payload).map_err(|_| StreamError::Corrupt("cmdlines are not UTF-8"))?.to_string();
            }
            Tag::Cpu => {
                let cpu = payload.get(0..8).ok_or(StreamError::Corrupt("CPU record without a CPU"))?;
                let pages = &payload[8..];
                if pages.len() % ring_buffer::per_cpu::PAGE_SIZE != 0 {
                    return Err(StreamError::Corrupt("CPU data is not whole pages"));
                }
                stream.cpus.push((u64::from_le_bytes(cpu.try_into().unwrap()), pages.to_vec()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring_buffer::per_cpu::PAGE_SIZE;

    fn record(out: &mut Vec<u8>, tag: Tag, payload: &[u8]) {
        out.extend_from_slice(&record_header(tag, payload.len()));
        out.extend_from_slice(payload);
    }

    fn sample() -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        record(&mut out, Tag::Meta, b"arch=x86_64\ncpus=1\n");
        record(&mut out, Tag::Format, b"ftrace\0name: function\n");
        let mut cpu = 0u64.to_le_bytes().to_vec();
        cpu.extend_from_slice(&[7u8; PAGE_SIZE * 2]);
        record(&mut out, Tag::Cpu, &cpu);
        record(&mut out, Tag::End, &[]);
        out
    }

    #[test]
    fn round_trip() {
        let stream = parse(&sample()).unwrap();
        assert_eq!(stream.meta("arch"), Some("x86_64"));
        assert_eq!(stream.meta("cpus"), Some("1"));
        assert_eq!(stream.formats, [("ftrace".to_string(), "name: function\n".to_string())]);
        assert_eq!(stream.cpus.len(), 1);
        assert_eq!(stream.cpus[0].1.len(), PAGE_SIZE * 2);
    }

    #[test]
    fn empty_broken_and_foreign_streams_are_errors() {
        assert_eq!(parse(&[]), Err(StreamError::Empty));
        let whole = sample();
        assert_eq!(parse(&whole[..whole.len() - RECORD_HEADER]), Err(StreamError::Truncated));
        assert_eq!(parse(&whole[..100]), Err(StreamError::Truncated));
        assert_eq!(parse(b"GARBAGE-GARBAGE-GARBAGE"), Err(StreamError::BadMagic));
        let mut bad = whole.clone();
        bad[MAGIC.len()] = 9;
        assert!(matches!(parse(&bad), Err(StreamError::Corrupt(_))));
        let mut huge = whole.clone();
        huge[MAGIC.len() + 8..MAGIC.len() + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse(&huge), Err(StreamError::Corrupt("record length out of range")), "no wrap, no panic");
    }
}
