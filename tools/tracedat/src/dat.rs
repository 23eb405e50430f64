//! The trace.dat writer, trace-cmd's file format version 6
//! (trace-cmd.dat.v6(5)):
//!
//! ```text
//! "\x17\x08D" "tracing" "6\0"   endianness (0: little)  long size  page size
//! "header_page\0"  u64 size  text          the ring-buffer page header
//! "header_event\0" u64 size  text          the event header encoding
//! u32 count  (u64 size  text)*             ftrace's own event formats
//! u32 systems  (name\0 u32 count (u64 size text)*)*   other event formats
//! u32 size  kallsyms text
//! u32 size  printk formats (none)
//! u64 size  saved cmdlines ("pid comm")
//! u32 cpus  "options  \0"  (u16 id  u32 size  data)*  u16 0
//! "flyrecord\0"  (u64 offset  u64 size) per CPU
//! padding to a page, then each CPU's ring-buffer pages as they are
//! ```

use ring_buffer::per_cpu::{header_event, header_page, page_records, PAGE_SIZE};
use trace::export::stream::Stream;

/// Events in the stream's pages.
pub fn count_events(stream: &Stream) -> usize {
    stream.cpus.iter().flat_map(|(_, pages)| pages.chunks(PAGE_SIZE)).map(|page| page_records(page).count()).sum()
}

/// The option that ends the options (`TRACECMD_OPTION_DONE`).
const OPTION_DONE: u16 = 0;
/// The trace clock option (`TRACECMD_OPTION_TRACECLOCK`).
const OPTION_TRACECLOCK: u16 = 4;

struct Writer(Vec<u8>);

impl Writer {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn u16(&mut self, value: u16) {
        self.bytes(&value.to_le_bytes());
    }

    fn u32(&mut self, value: u32) {
        self.bytes(&value.to_le_bytes());
    }

    fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }

    fn sized64(&mut self, text: &str) {
        self.u64(text.len() as u64);
        self.bytes(text.as_bytes());
    }

    fn sized32(&mut self, text: &str) {
        self.u32(text.len() as u32);
        self.bytes(text.as_bytes());
    }
}

/// The whole trace.dat for `stream`, with `kallsyms` as the symbol text.
pub fn write(stream: &Stream, kallsyms: &str) -> Result<Vec<u8>, String> {
    let page_size = stream.meta("page_size").and_then(|p| p.parse().ok()).unwrap_or(PAGE_SIZE as u32);
    if page_size as usize != PAGE_SIZE {
        return Err(format!("unexpected page size {page_size}"));
    }
    let mut out = Writer(Vec::new());
    out.bytes(&[0x17, 0x08, 0x44]);
    out.bytes(b"tracing6\0");
    out.bytes(&[0, 8]); // little endian, 8-byte longs
    out.u32(page_size);

    out.bytes(b"header_page\0");
    out.sized64(&header_page());
    out.bytes(b"header_event\0");
    out.sized64(header_event());

    let ftrace: Vec<&str> = stream.formats.iter().filter(|(s, _)| s == "ftrace").map(|(_, t)| t.as_str()).collect();
    out.u32(ftrace.len() as u32);
    for text in &ftrace {
        out.sized64(text);
    }
    let mut systems: Vec<(&str, Vec<&str>)> = Vec::new();
    for (system, text) in stream.formats.iter().filter(|(s, _)| s != "ftrace") {
        match systems.iter_mut().find(|(name, _)| name == system) {
            Some((_, texts)) => texts.push(text),
            None => systems.push((system, vec![text])),
        }
    }
    out.u32(systems.len() as u32);
    for (system, texts) in &systems {
        out.bytes(system.as_bytes());
        out.bytes(&[0]);
        out.u32(texts.len() as u32);
        for text in texts {
            out.sized64(text);
        }
    }

    out.sized32(kallsyms);
    out.sized32(""); // no trace_printk formats
    let cmdlines = if stream.cmdlines.is_empty() { String::from("0 <idle>\n") } else { stream.cmdlines.clone() };
    out.sized64(&cmdlines);

    out.u32(stream.cpus.len() as u32);
    // One option: the trace clock, as the `trace_clock` file shows it, so
    // trace-cmd prints a clock that counts events as counts, not seconds.
    out.bytes(b"options  \0");
    let clock = format!("[{}]\n", stream.meta("clock").unwrap_or("local"));
    out.u16(OPTION_TRACECLOCK);
    out.u32(clock.len() as u32);
    out.bytes(clock.as_bytes());
    out.u16(OPTION_DONE);
    out.bytes(b"flyrecord\0");
    let table_at = out.0.len();
    for _ in &stream.cpus {
        out.u64(0);
        out.u64(0);
    }
    for (index, (_, pages)) in stream.cpus.iter().enumerate() {
        let padding = out.0.len().next_multiple_of(PAGE_SIZE) - out.0.len();
        out.bytes(&vec![0u8; padding]);
        let offset = out.0.len() as u64;
        out.bytes(pages);
        let entry = table_at + 16 * index;
        out.0[entry..entry + 8].copy_from_slice(&offset.to_le_bytes());
        out.0[entry + 8..entry + 16].copy_from_slice(&(pages.len() as u64).to_le_bytes());
    }
    Ok(out.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the file back section by section, as trace-cmd does.
    struct Reader<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl<'a> Reader<'a> {
        fn take(&mut self, len: usize) -> &'a [u8] {
            let out = &self.bytes[self.at..self.at + len];
            self.at += len;
            out
        }
        fn u32(&mut self) -> u32 {
            u32::from_le_bytes(self.take(4).try_into().unwrap())
        }
        fn u64(&mut self) -> u64 {
            u64::from_le_bytes(self.take(8).try_into().unwrap())
        }
        fn cstr(&mut self) -> &'a str {
            let len = self.bytes[self.at..].iter().position(|&b| b == 0).unwrap();
            let s = std::str::from_utf8(self.take(len)).unwrap();
            self.take(1);
            s
        }
        fn text64(&mut self) -> &'a str {
            let len = self.u64() as usize;
            std::str::from_utf8(self.take(len)).unwrap()
        }
        fn text32(&mut self) -> &'a str {
            let len = self.u32() as usize;
            std::str::from_utf8(self.take(len)).unwrap()
        }
    }

    fn sample() -> Stream {
        let mut page = vec![0u8; PAGE_SIZE];
        page[0..8].copy_from_slice(&1000u64.to_le_bytes());
        page[8..16].copy_from_slice(&12u64.to_le_bytes());
        page[16..20].copy_from_slice(&2u32.to_le_bytes()); // one 8-byte event, delta 0
        Stream {
            meta: vec![("page_size".into(), "4096".into()), ("clock".into(), "counter".into())],
            formats: vec![
                ("ftrace".into(), "name: function\n".into()),
                ("ftrace".into(), "name: funcgraph_entry\n".into()),
                ("fprobes".into(), "name: fibent\n".into()),
                ("fprobes".into(), "name: fibret\n".into()),
                ("tests".into(), "name: probe\n".into()),
            ],
            cpus: vec![(0, page)],
            cmdlines: String::new(),
        }
    }

    #[test]
    fn every_section_reads_back() {
        let stream = sample();
        let bytes = write(&stream, "0000000000001000 T kernel::workload::fib\n").unwrap();
        let mut r = Reader { bytes: &bytes, at: 0 };
        assert_eq!(r.take(3), [0x17, 0x08, 0x44]);
        assert_eq!(r.take(7), b"tracing");
        assert_eq!(r.cstr(), "6");
        assert_eq!(r.take(2), [0, 8], "little endian, 8-byte long");
        assert_eq!(r.u32(), 4096);
        assert_eq!(r.cstr(), "header_page");
        let page = r.text64();
        assert!(page.contains("field: local_t commit;\toffset:8;\tsize:8;"), "{page}");
        assert!(page.contains("field: char data;\toffset:16;\tsize:4080;"), "{page}");
        assert_eq!(r.cstr(), "header_event");
        assert!(r.text64().contains("time_extend : type == 30"));
        assert_eq!(r.u32(), 2, "ftrace formats");
        assert_eq!(r.text64(), "name: function\n");
        assert_eq!(r.text64(), "name: funcgraph_entry\n");
        assert_eq!(r.u32(), 2, "two other systems");
        assert_eq!(r.cstr(), "fprobes");
        assert_eq!(r.u32(), 2);
        assert_eq!(r.text64(), "name: fibent\n");
        assert_eq!(r.text64(), "name: fibret\n");
        assert_eq!(r.cstr(), "tests");
        assert_eq!(r.u32(), 1);
        assert_eq!(r.text64(), "name: probe\n");
        assert_eq!(r.text32(), "0000000000001000 T kernel::workload::fib\n", "kallsyms");
        assert_eq!(r.text32(), "", "printk formats");
        assert_eq!(r.text64(), "0 <idle>\n", "cmdlines");
        assert_eq!(r.u32(), 1, "cpus");
        assert_eq!(r.take(10), b"options  \0");
        assert_eq!(r.take(2), OPTION_TRACECLOCK.to_le_bytes());
        assert_eq!(r.text32(), "[counter]\n", "the clock the kernel used");
        assert_eq!(r.take(2), OPTION_DONE.to_le_bytes());
        assert_eq!(r.take(10), b"flyrecord\0");
        let (offset, size) = (r.u64() as usize, r.u64() as usize);
        assert_eq!(offset % PAGE_SIZE, 0, "CPU data is page aligned");
        assert_eq!(size, PAGE_SIZE);
        assert_eq!(&bytes[offset..offset + size], &stream.cpus[0].1[..], "pages as the ring held them");
        assert_eq!(offset + size, bytes.len());
        assert_eq!(count_events(&stream), 1);
    }

    #[test]
    fn a_foreign_page_size_is_refused() {
        let mut stream = sample();
        stream.meta = vec![("page_size".into(), "16384".into())];
        assert!(write(&stream, "").is_err());
    }
}
