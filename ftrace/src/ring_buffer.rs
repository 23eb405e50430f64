//! One CPU's trace ring buffer, in Linux's ring-buffer page format.
//!
//! The buffer is a ring of 4 KiB pages. Each page starts with a 16-byte header
//! (the page's timestamp, then `commit`: how many data bytes follow) and holds
//! events, each led by a 32-bit header with a 5-bit `type_len` and a 27-bit
//! `time_delta` from the previous event (the first event of a page counts from
//! the page's timestamp):
//!
//! - `type_len` 1..=28: a data event of `type_len * 4` bytes;
//! - `type_len` 0: a data event whose length (plus 4) is in the next word;
//! - `type_len` 30: a time extend: the delta's upper bits are in the next word
//!   (for gaps of 2^27 ns, about 134 ms, or more);
//! - `type_len` 29 (padding) and 31 (absolute time stamp) are never written
//!   here but are understood when reading.
//!
//! Pages can therefore leave the machine as they are (trace-cmd reads this
//! format). When the ring is full the oldest page is overwritten and its events
//! counted as overruns.
//!
//! This type is plain data: it knows nothing of CPUs or interrupts. The kernel
//! keeps one per CPU and writes it with interrupts masked.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// Bytes in a page.
pub const PAGE_SIZE: usize = 4096;
/// The page header: a u64 timestamp and a u64 commit count.
pub const PAGE_HEADER_SIZE: usize = 16;
/// Data bytes a page can hold.
pub const PAGE_DATA_SIZE: usize = PAGE_SIZE - PAGE_HEADER_SIZE;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// The largest `type_len` of a data event that carries its length in it.
const TYPE_DATA_MAX: u32 = 28;
const TIME_DELTA_BITS: u32 = 27;
const TIME_DELTA_MAX: u64 = (1 << TIME_DELTA_BITS) - 1;
/// The largest event payload [`RingBuffer::write`] accepts.
pub const MAX_PAYLOAD: usize = 1024;

/// One page, laid out as Linux's `buffer_data_page`.
#[repr(C, align(4096))]
pub struct Page {
    bytes: [u8; PAGE_SIZE],
}

impl Page {
    fn new() -> Box<Page> {
        Box::new(Page { bytes: [0; PAGE_SIZE] })
    }

    fn word(&self, offset: usize) -> u64 {
        u64::from_ne_bytes(self.bytes[offset..offset + 8].try_into().expect("8 bytes"))
    }

    /// The timestamp the page's first event counts from.
    pub fn time_stamp(&self) -> u64 {
        self.word(0)
    }

    /// Bytes of events in the page.
    pub fn commit(&self) -> usize {
        self.word(8) as usize
    }

    /// The whole page, header included, as it would leave the machine.
    pub fn as_bytes(&self) -> &[u8; PAGE_SIZE] {
        &self.bytes
    }

    fn reset(&mut self, time_stamp: u64) {
        self.bytes[0..8].copy_from_slice(&time_stamp.to_ne_bytes());
        self.bytes[8..16].copy_from_slice(&0u64.to_ne_bytes());
    }

    fn set_commit(&mut self, commit: usize) {
        self.bytes[8..16].copy_from_slice(&(commit as u64).to_ne_bytes());
    }

    fn put_u32(&mut self, offset: usize, value: u32) {
        let at = PAGE_HEADER_SIZE + offset;
        self.bytes[at..at + 4].copy_from_slice(&value.to_ne_bytes());
    }

    fn data(&self) -> &[u8] {
        &self.bytes[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + self.commit()]
    }

    /// The page's events, with absolute timestamps.
    pub fn events(&self) -> PageEvents<'_> {
        PageEvents { data: self.data(), offset: 0, time: self.time_stamp() }
    }
}

/// The events of a raw page (4096 bytes in Linux's page format), for readers
/// of pages that left the machine.
pub fn page_events(page: &[u8]) -> PageEvents<'_> {
    let word = |at: usize| page.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
    let commit = (word(8) as usize).min(page.len().saturating_sub(PAGE_HEADER_SIZE));
    PageEvents { data: &page[PAGE_HEADER_SIZE.min(page.len())..PAGE_HEADER_SIZE + commit], offset: 0, time: word(0) }
}

/// A data event read back: its timestamp and payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    pub time: u64,
    pub payload: &'a [u8],
}

/// Iterator over one page's data events.
pub struct PageEvents<'a> {
    data: &'a [u8],
    offset: usize,
    time: u64,
}

impl<'a> Iterator for PageEvents<'a> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        loop {
            let header = u32::from_ne_bytes(self.data.get(self.offset..self.offset + 4)?.try_into().ok()?);
            let type_len = header & 0x1f;
            let delta = u64::from(header >> 5);
            let word = |at: usize| -> Option<u32> {
                Some(u32::from_ne_bytes(self.data.get(at..at + 4)?.try_into().ok()?))
            };
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        return None; // the rest of the page is unused
                    }
                    let skip = word(self.offset + 4)? as usize;
                    self.offset += 4 + skip;
                }
                TYPE_TIME_EXTEND => {
                    self.time += delta | (u64::from(word(self.offset + 4)?) << TIME_DELTA_BITS);
                    self.offset += 8;
                }
                TYPE_TIME_STAMP => {
                    self.time = delta | (u64::from(word(self.offset + 4)?) << TIME_DELTA_BITS);
                    self.offset += 8;
                }
                0 => {
                    let len = (word(self.offset + 4)? as usize).checked_sub(4)?;
                    let start = self.offset + 8;
                    self.time += delta;
                    self.offset = start + len.next_multiple_of(4);
                    return Some(Event { time: self.time, payload: self.data.get(start..start + len)? });
                }
                _ => {
                    let len = type_len as usize * 4;
                    let start = self.offset + 4;
                    self.time += delta;
                    self.offset = start + len;
                    return Some(Event { time: self.time, payload: self.data.get(start..start + len)? });
                }
            }
        }
    }
}

/// Counters, as `cat trace`'s header prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events still in the buffer.
    pub entries: u64,
    /// Events written since the last reset.
    pub written: u64,
    /// Events lost when the oldest page was overwritten.
    pub overrun: u64,
}

/// Why an event was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge;

/// One CPU's ring of pages. See the module documentation.
pub struct RingBuffer {
    pages: Vec<Box<Page>>,
    page_entries: Vec<u32>,
    /// The oldest page holding events.
    head: usize,
    /// The page being written.
    tail: usize,
    last_time: u64,
    stats: Stats,
}

impl RingBuffer {
    /// A buffer of `pages` pages (at least 2).
    pub fn new(pages: usize) -> Self {
        let pages = pages.max(2);
        Self {
            pages: (0..pages).map(|_| Page::new()).collect(),
            page_entries: alloc::vec![0; pages],
            head: 0,
            tail: 0,
            last_time: 0,
            stats: Stats::default(),
        }
    }

    /// Empties the buffer (`echo > trace`).
    pub fn reset(&mut self) {
        for page in &mut self.pages {
            page.reset(0);
        }
        self.page_entries.fill(0);
        self.head = 0;
        self.tail = 0;
        self.stats = Stats::default();
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Moves to the next page, overwriting the oldest if the ring is full.
    fn advance(&mut self, time: u64) {
        self.tail = (self.tail + 1) % self.pages.len();
        if self.tail == self.head {
            let lost = u64::from(self.page_entries[self.head]);
            self.stats.overrun += lost;
            self.stats.entries -= lost;
            self.head = (self.head + 1) % self.pages.len();
        }
        self.pages[self.tail].reset(time);
        self.page_entries[self.tail] = 0;
    }

    /// Appends an event with `payload` at `time` (nanoseconds; never less
    /// than the previous event's).
    pub fn write(&mut self, time: u64, payload: &[u8]) -> Result<(), TooLarge> {
        self.write_with(time, payload.len(), |bytes| bytes.copy_from_slice(payload))
    }

    /// Appends an event of `len` payload bytes at `time`, which `fill`
    /// writes in place (the bytes it gets are exactly `len` long; the
    /// padding to a 4-byte multiple is zeroed here). One copy, no staging.
    #[inline]
    pub fn write_with(&mut self, time: u64, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), TooLarge> {
        if len == 0 || len > MAX_PAYLOAD {
            return Err(TooLarge);
        }
        let padded = len.next_multiple_of(4);
        let small = padded <= TYPE_DATA_MAX as usize * 4;
        let event_size = if small { 4 + padded } else { 8 + padded };

        let mut commit = self.pages[self.tail].commit();
        if commit == 0 {
            self.pages[self.tail].reset(time);
            self.last_time = time;
        }
        let mut delta = time.saturating_sub(self.last_time);
        let extend = if delta > TIME_DELTA_MAX { 8 } else { 0 };
        if commit + extend + event_size > PAGE_DATA_SIZE {
            self.advance(time);
            commit = 0;
            delta = 0;
            self.last_time = time;
        }
        let page = &mut self.pages[self.tail];
        if delta > TIME_DELTA_MAX {
            page.put_u32(commit, TYPE_TIME_EXTEND | (((delta & TIME_DELTA_MAX) as u32) << 5));
            page.put_u32(commit + 4, (delta >> TIME_DELTA_BITS) as u32);
            commit += 8;
            delta = 0;
        }
        let data_at = if small {
            page.put_u32(commit, (padded / 4) as u32 | ((delta as u32) << 5));
            commit + 4
        } else {
            page.put_u32(commit, (delta as u32) << 5);
            page.put_u32(commit + 4, (padded + 4) as u32);
            commit + 8
        };
        let start = PAGE_HEADER_SIZE + data_at;
        fill(&mut page.bytes[start..start + len]);
        page.bytes[start + len..start + padded].fill(0);
        page.set_commit(data_at + padded);

        self.last_time = time;
        self.page_entries[self.tail] += 1;
        self.stats.entries += 1;
        self.stats.written += 1;
        Ok(())
    }

    /// The pages holding events, oldest first.
    pub fn pages(&self) -> impl Iterator<Item = &Page> + '_ {
        let count = (self.tail + self.pages.len() - self.head) % self.pages.len() + 1;
        (0..count)
            .map(move |i| &*self.pages[(self.head + i) % self.pages.len()])
            .filter(|page| page.commit() > 0)
    }

    /// Every event, oldest first.
    pub fn events(&self) -> impl Iterator<Item = Event<'_>> + '_ {
        self.pages().flat_map(Page::events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|b| (i as usize + b) as u8).collect()
    }

    #[test]
    fn events_round_trip_with_times() {
        let mut ring = RingBuffer::new(4);
        ring.write(1_000, &payload(1, 24)).unwrap();
        ring.write(1_500, &payload(2, 13)).unwrap(); // padded to 16
        ring.write(1_000 + (1 << 30), &payload(3, 24)).unwrap(); // needs a time extend
        ring.write(2_000 + (1 << 30), &payload(4, 200)).unwrap(); // length in the next word
        let events: Vec<Event> = ring.events().collect();
        assert_eq!(events.len(), 4);
        assert_eq!(events[0], Event { time: 1_000, payload: &payload(1, 24) });
        assert_eq!(events[1].time, 1_500);
        assert_eq!(&events[1].payload[..13], &payload(2, 13)[..]);
        assert_eq!(events[1].payload.len(), 16);
        assert_eq!(events[2].time, 1_000 + (1 << 30));
        assert_eq!(events[3], Event { time: 2_000 + (1 << 30), payload: &payload(4, 200) });
        assert_eq!(ring.stats(), Stats { entries: 4, written: 4, overrun: 0 });
    }

    #[test]
    fn header_words_are_linux_format() {
        let mut ring = RingBuffer::new(2);
        ring.write(77, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        ring.write(80, &[9; 8]).unwrap();
        let page = ring.pages().next().unwrap();
        let bytes = page.as_bytes();
        assert_eq!(page.time_stamp(), 77);
        assert_eq!(page.commit(), 24);
        let header = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(header(16), 2, "type_len 2 (8 bytes), delta 0");
        assert_eq!(header(28), 2 | (3 << 5), "type_len 2, delta 3");
    }

    #[test]
    fn full_ring_overwrites_oldest_and_counts_overruns() {
        let mut ring = RingBuffer::new(3);
        let per_page = PAGE_DATA_SIZE / 28;
        let total = per_page * 5;
        for i in 0..total {
            ring.write(i as u64, &(i as u32).to_ne_bytes().repeat(6)).unwrap();
        }
        let stats = ring.stats();
        assert_eq!(stats.written, total as u64);
        assert_eq!(stats.entries + stats.overrun, total as u64);
        assert!(stats.overrun > 0);
        let events: Vec<Event> = ring.events().collect();
        assert_eq!(events.len() as u64, stats.entries);
        // What is left is the newest events, in order, ending with the last.
        let last = u32::from_ne_bytes(events.last().unwrap().payload[..4].try_into().unwrap());
        assert_eq!(last as usize, total - 1);
        assert!(events.windows(2).all(|w| w[0].time < w[1].time));
        ring.reset();
        assert_eq!(ring.events().count(), 0);
        assert_eq!(ring.stats(), Stats::default());
    }

    #[test]
    fn oversized_payload_is_refused() {
        let mut ring = RingBuffer::new(2);
        assert_eq!(ring.write(0, &[0; MAX_PAYLOAD + 1]), Err(TooLarge));
        assert_eq!(ring.write(0, &[]), Err(TooLarge));
    }
}
