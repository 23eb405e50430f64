//! One CPU's trace ring buffer, in Linux's ring-buffer page format, with a
//! writer that takes no lock and readers that never see a torn record.
//!
//! # Page format
//!
//! The buffer is a ring of 4 KiB pages. Each page starts with a 16-byte header
//! (the page's timestamp, then `commit`: how many data bytes follow, plus two
//! flags Linux sets on pages handed to readers: [`RB_MISSED_EVENTS`], records
//! were lost before this page; [`RB_MISSED_STORED`], their count is stored
//! after the data) and holds records, each led by a 32-bit header with a 5-bit
//! `type_len` and a 27-bit `time_delta` from the previous record (the first
//! record of a page counts from the page's timestamp):
//!
//! - `type_len` 1..=28: a data record of `type_len * 4` bytes;
//! - `type_len` 0: a data record whose length (plus 4) is in the next word;
//! - `type_len` 30: a time extend: the delta's upper bits are in the next word
//!   (for gaps of 2^27 ns, about 134 ms, or more);
//! - `type_len` 29 (padding) and 31 (absolute time stamp) are never written
//!   here but are understood when reading.
//!
//! Pages can therefore leave the machine as they are (trace-cmd reads this
//! format).
//!
//! # Concurrency
//!
//! One writer (the buffer's CPU, interrupts masked: it never runs twice at
//! once; a fill that may run traced code, `trace_printk!`'s formatting,
//! marks the ring so that a write from there is dropped, `Nested`, rather
//! than started inside the one being filled) and any number of readers,
//! which serialise among themselves on a readers' lock the writer never
//! takes. Pages never move: the writer fills them in ring order and numbers
//! each page it starts with a sequence number (page `n` is always
//! `pages[n % len]`), so a reader knows which page it wants by number and
//! can tell when the writer has lapped it.
//!
//! Each page has one atomic *tag* word: its sequence number and how many of
//! its data bytes a consuming reader has taken (`consumed`). Both sides
//! change the tag only by read-modify-write, so they meet at one point:
//!
//! - **Writing** appends to the current page and publishes the new `commit`
//!   with release ordering; the bytes below a page's commit never change
//!   again until the writer comes back to that page a lap later. At a page
//!   boundary the writer *claims* the next page by swapping its tag for
//!   `(new sequence, CLAIMING)`: whatever the old tag says was not consumed
//!   is lost, and counted as overrun, there and then (the buffer overwrites
//!   the oldest page; it never waits for a reader). Then it resets the page
//!   and publishes the tag `(new sequence, 0)`.
//! - **A consuming read** ([`RingBuffer::read_page`], Linux's
//!   `ring_buffer_read_page`) looks at the page it wants: if its tag has the
//!   expected sequence number, it copies the records past `consumed` and
//!   moves `consumed` up with a compare-and-swap of the whole tag. The swap
//!   fails if the writer claimed the page meanwhile, and the copy (perhaps
//!   torn by the reset) is dropped: those records are the writer's overrun.
//!   If the tag has a newer sequence number the writer lapped the reader,
//!   which moves on to the oldest page left. The page handed out says
//!   `RB_MISSED_EVENTS` (and how many) when records were lost since the last
//!   read.
//! - **A non-consuming read** ([`RingBuffer::snapshot`], `cat trace`)
//!   pauses the writer (as Linux's `trace` iterator disables recording on
//!   the CPU), waits for a write in progress, copies, and resumes.
//!
//! So a record is either read once, or counted as overrun once, or was
//! never written (the buffer was paused, or the record too large):
//! `written == read + overrun + entries` at rest.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Bytes in a page.
pub const PAGE_SIZE: usize = 4096;
/// The page header: a u64 timestamp and a u64 commit count.
pub const PAGE_HEADER_SIZE: usize = 16;
/// Data bytes a page can hold.
pub const PAGE_DATA_SIZE: usize = PAGE_SIZE - PAGE_HEADER_SIZE;
/// `commit` flag: records were lost between the previous page read and this
/// one (Linux's `RB_MISSED_EVENTS`).
pub const RB_MISSED_EVENTS: u64 = 1 << 31;
/// `commit` flag: the number of lost records is stored after the data
/// (Linux's `RB_MISSED_STORED`).
pub const RB_MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = RB_MISSED_STORED - 1;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// The largest `type_len` of a data record that carries its length in it.
const TYPE_DATA_MAX: u32 = 28;
const TIME_DELTA_BITS: u32 = 27;
const TIME_DELTA_MAX: u64 = (1 << TIME_DELTA_BITS) - 1;
/// The largest record payload [`RingBuffer::write`] accepts.
pub const MAX_PAYLOAD: usize = 1024;

/// One page, laid out as Linux's `buffer_data_page`.
#[repr(C, align(4096))]
pub struct Page {
    bytes: UnsafeCell<[u8; PAGE_SIZE]>,
}

// SAFETY: a page's bytes are written by its one owner (the writer while it
// holds the page, or a reader that took it out of the ring). Readers read
// only bytes below the commit the writer published with release ordering,
// which do not change until the writer comes back to the page a lap
// later. A consuming reader can be that late (the module documentation):
// it then copies while the writer resets and refills the page, with
// volatile reads that assume nothing of the bytes (`copy_to`), and its
// compare-and-swap of the tag fails, so the torn copy is dropped, as
// Linux's lockless readers drop one.
unsafe impl Sync for Page {}

impl Page {
    /// A zeroed page.
    fn empty() -> Page {
        Page { bytes: UnsafeCell::new([0; PAGE_SIZE]) }
    }

    fn base(&self) -> *mut u8 {
        self.bytes.get() as *mut u8
    }

    fn commit_word(&self) -> &AtomicU64 {
        // SAFETY: bytes 8..16 of the page are its commit count, 8-aligned
        // (the page is 4096-aligned); every access to them is atomic.
        unsafe { &*(self.base().add(8) as *const AtomicU64) }
    }

    fn time_word(&self) -> &AtomicU64 {
        // SAFETY: as for `commit_word`, bytes 0..8.
        unsafe { &*(self.base() as *const AtomicU64) }
    }

    /// The timestamp the page's first record counts from.
    pub fn time_stamp(&self) -> u64 {
        self.time_word().load(Ordering::Acquire)
    }

    /// Bytes of records in the page.
    pub fn commit(&self) -> usize {
        (self.commit_word().load(Ordering::Acquire) & COMMIT_MASK) as usize
    }

    fn reset(&self, time_stamp: u64) {
        self.commit_word().store(0, Ordering::Relaxed);
        self.time_word().store(time_stamp, Ordering::Release);
    }

    /// Writes `bytes` at data offset `at` (the owner only).
    fn put(&self, at: usize, bytes: &[u8]) {
        debug_assert!(PAGE_HEADER_SIZE + at + bytes.len() <= PAGE_SIZE);
        // SAFETY: in bounds; only the page's owner writes, above the commit
        // readers may be reading below.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(PAGE_HEADER_SIZE + at), bytes.len()) };
    }

    fn put_u32(&self, at: usize, value: u32) {
        self.put(at, &value.to_ne_bytes());
    }

    /// The data bytes `at..at + len` for the owner to fill.
    #[allow(clippy::mut_from_ref)]
    fn data_mut(&self, at: usize, len: usize) -> &mut [u8] {
        debug_assert!(PAGE_HEADER_SIZE + at + len <= PAGE_SIZE);
        // SAFETY: as for `put`: the owner's bytes, above the commit.
        unsafe { core::slice::from_raw_parts_mut(self.base().add(PAGE_HEADER_SIZE + at), len) }
    }

    /// A copy of the page, header included, with its commit as published.
    /// The data is read a 32-bit word at a time with volatile reads: a
    /// consuming reader may copy while the writer reclaims the page (the
    /// copy is then torn, and dropped by the caller's tag check), so the
    /// compiler may assume nothing about the bytes it reads.
    fn copy_to(&self, out: &mut [u8; PAGE_SIZE]) -> usize {
        let commit = self.commit().min(PAGE_DATA_SIZE);
        out[0..8].copy_from_slice(&self.time_stamp().to_ne_bytes());
        out[8..16].copy_from_slice(&(commit as u64).to_ne_bytes());
        // Records are 4-byte multiples, so the commit is too.
        debug_assert!(commit.is_multiple_of(4) && PAGE_HEADER_SIZE + commit <= PAGE_SIZE);
        let words = self.base().wrapping_add(PAGE_HEADER_SIZE) as *const u32;
        for (i, chunk) in out[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + commit].chunks_exact_mut(4).enumerate() {
            // SAFETY: inside the page (the commit is at most its data
            // size), 4-aligned (the page is 4096-aligned);
            // a volatile read of a word that may be changing, see above.
            let word = unsafe { words.add(i).read_volatile() };
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        commit
    }

    /// The page's records, with absolute timestamps (the owner only).
    fn records(&self) -> PageRecords<'_> {
        let commit = self.commit().min(PAGE_DATA_SIZE);
        // SAFETY: inside the page; the caller owns it, so nothing writes
        // the bytes while the records are read.
        let data = unsafe { core::slice::from_raw_parts(self.base().add(PAGE_HEADER_SIZE), commit) };
        PageRecords { data, offset: 0, time: self.time_stamp() }
    }
}

/// The committed data bytes of a raw page.
pub fn page_commit(page: &[u8]) -> usize {
    let word = page.get(8..16).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
    ((word & COMMIT_MASK) as usize).min(page.len().saturating_sub(PAGE_HEADER_SIZE))
}

/// The records of a raw page (4096 bytes in Linux's page format), for readers
/// of pages that left the ring or the machine.
pub fn page_records(page: &[u8]) -> PageRecords<'_> {
    let word = |at: usize| page.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
    let commit = ((word(8) & COMMIT_MASK) as usize).min(page.len().saturating_sub(PAGE_HEADER_SIZE));
    PageRecords { data: &page[PAGE_HEADER_SIZE.min(page.len())..PAGE_HEADER_SIZE + commit], offset: 0, time: word(0) }
}

/// Whether a raw page says records were lost before it, and how many if it
/// stored the count.
pub fn page_missed(page: &[u8]) -> Option<Option<u64>> {
    let word = |at: usize| page.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()));
    let commit = word(8);
    if commit & RB_MISSED_EVENTS == 0 {
        return None;
    }
    let end = PAGE_HEADER_SIZE + (commit & COMMIT_MASK) as usize;
    Some((commit & RB_MISSED_STORED != 0).then(|| word(end)))
}

/// A data record read back: its timestamp and payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub time: u64,
    pub payload: &'a [u8],
}

/// Iterator over one page's data records.
pub struct PageRecords<'a> {
    data: &'a [u8],
    offset: usize,
    time: u64,
}

impl<'a> PageRecords<'a> {
    /// Where the next record starts (for a reader resuming in a page).
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for PageRecords<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        loop {
            let header = u32::from_ne_bytes(self.data.get(self.offset..self.offset + 4)?.try_into().ok()?);
            let type_len = header & 0x1f;
            let delta = u64::from(header >> 5);
            let word = |at: usize| -> Option<u32> { Some(u32::from_ne_bytes(self.data.get(at..at + 4)?.try_into().ok()?)) };
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
                    return Some(Record { time: self.time, payload: self.data.get(start..start + len)? });
                }
                _ => {
                    let len = type_len as usize * 4;
                    let start = self.offset + 4;
                    self.time += delta;
                    self.offset = start + len;
                    return Some(Record { time: self.time, payload: self.data.get(start..start + len)? });
                }
            }
        }
    }
}

/// Counters, as `cat trace`'s header and `per_cpu/cpuN/stats` print them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records in the buffer, not read yet.
    pub entries: u64,
    /// Records written since the last reset.
    pub written: u64,
    /// Records lost when the oldest page was overwritten.
    pub overrun: u64,
    /// Records consuming readers took out.
    pub read: u64,
    /// Records refused: too large, or written while a reader had the
    /// buffer paused (Linux's "dropped records").
    pub dropped: u64,
}

/// A ring's unread bytes and the time its oldest unread page starts at
/// ([`RingBuffer::usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: usize,
    pub oldest_page_time: u64,
}

/// Counters since the buffer was made, which [`RingBuffer::reset`] does
/// not clear: what became of every record ever written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lifetime {
    pub written: u64,
    pub overrun: u64,
    pub read: u64,
    /// Records emptied out unread by a reset.
    pub erased: u64,
    /// Records in the buffer now.
    pub entries: u64,
}

/// Why a record was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// Empty, or more than [`MAX_PAYLOAD`] bytes.
    TooLarge,
    /// A non-consuming reader paused the buffer.
    Paused,
    /// Recording is off on this CPU (`tracing_cpumask`).
    Masked,
    /// The ring is full of unread records and does not overwrite them
    /// (`options/overwrite` off).
    Full,
    /// A write from inside another write's `fill` on this ring (code the
    /// fill runs was traced): dropped, as Linux's recursion lock drops it,
    /// rather than written over the record being filled.
    Nested,
}

/// `RingBuffer::stopped`: a non-consuming reader paused the writer.
const STOP_PAUSED: u8 = 1;
/// `RingBuffer::stopped`: recording is off on this ring's CPU
/// (`tracing_cpumask`); the writer records nothing, and counts nothing.
const STOP_MASKED: u8 = 2;
/// `RingBuffer::stopped`: the writer runs a fill that may reach traced code
/// ([`RingBuffer::write_with_foreign`]): a write from there is nested in
/// it, and dropped.
const STOP_FILLING: u8 = 4;

/// The writer's own state.
struct Writer {
    /// The sequence number of the page being written.
    seq: u64,
    /// Its index in the ring (`seq % len`, kept so writes never divide).
    index: usize,
    commit: usize,
    last_time: u64,
}

/// The consuming readers' state (under the readers' lock).
struct Reader {
    /// The sequence number of the page to read next.
    next: u64,
    /// The overrun count when the last page was handed out.
    overrun_seen: u64,
}

/// A page's tag: its sequence number (low 32 bits of it) and the data bytes
/// a consuming reader took from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tag {
    seq: u32,
    consumed: u32,
}

impl Tag {
    /// `consumed` while the writer resets a page it claimed.
    const CLAIMING: u32 = u32::MAX;

    fn pack(self) -> u64 {
        u64::from(self.seq) << 32 | u64::from(self.consumed)
    }

    fn unpack(word: u64) -> Tag {
        Tag { seq: (word >> 32) as u32, consumed: word as u32 }
    }
}

/// The page header as Linux describes it (`records/header_page`, and the
/// `header_page` section of a trace.dat): the time stamp, the commit word
/// (its top bits the flags), then the data.
pub fn header_page() -> String {
    alloc::format!(
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
         \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
         \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
         \tfield: char data;\toffset:{PAGE_HEADER_SIZE};\tsize:{};\tsigned:1;\n",
        PAGE_SIZE - PAGE_HEADER_SIZE
    )
}

/// The record header's encoding as Linux describes it (`records/header_event`):
/// see the module documentation.
pub fn header_event() -> &'static str {
    "# compressed entry header\n\
     \ttype_len    :    5 bits\n\
     \ttime_delta  :   27 bits\n\
     \tarray       :   32 bits\n\
     \n\
     \tpadding     : type == 29\n\
     \ttime_extend : type == 30\n\
     \ttime_stamp : type == 31\n\
     \tdata max type_len  == 28\n"
}

/// One CPU's ring of pages. See the module documentation.
pub struct RingBuffer {
    /// The ring: page `n` is `pages[n % len]`.
    pages: Box<[Page]>,
    /// Per page: its [`Tag`], packed.
    tags: Box<[AtomicU64]>,
    /// The sequence number of the writer's page.
    tail: AtomicU64,
    writer: UnsafeCell<Writer>,
    reader: spin::Mutex<Reader>,
    /// Why the writer must not write: [`STOP_PAUSED`] (a non-consuming
    /// reader asks it to stop) and [`STOP_MASKED`] (its CPU is not
    /// traced). One load tests both.
    stopped: AtomicU8,
    /// Whether a full ring overwrites its oldest page (Linux's default)
    /// or drops new records until a reader makes room (`options/overwrite`
    /// off: Linux's producer/consumer mode). Read only when the writer
    /// moves to the next page.
    overwrite: AtomicBool,
    /// The writer is inside `write_with`.
    writing: AtomicBool,
    written: AtomicU64,
    overrun: AtomicU64,
    read: AtomicU64,
    dropped: AtomicU64,
    /// The counters as they were at the last reset (under the readers'
    /// lock).
    before_reset: spin::Mutex<Lifetime>,
}

// SAFETY: `writer` is touched only by the one writer (`write_with`'s
// contract) and by `reset`, which pauses it first; `reader` is locked; the
// rest are atomics and the pages, shared as the module documentation says.
unsafe impl Sync for RingBuffer {}

impl RingBuffer {
    /// A buffer of `pages` pages (at least 2).
    pub fn new(pages: usize) -> Self {
        Self::try_new(pages).expect("ring buffer: out of memory")
    }

    /// A buffer of `pages` pages (at least 2), or `None` if the heap cannot
    /// hold it.
    pub fn try_new(pages: usize) -> Option<Self> {
        let count = pages.max(2);
        let mut all = Vec::new();
        all.try_reserve_exact(count).ok()?;
        all.extend((0..count).map(|_| Page::empty()));
        let mut tags = Vec::new();
        tags.try_reserve_exact(count).ok()?;
        tags.extend((0..count).map(|_| AtomicU64::new(0)));
        Some(RingBuffer {
            pages: all.into_boxed_slice(),
            tags: tags.into_boxed_slice(),
            tail: AtomicU64::new(0),
            writer: UnsafeCell::new(Writer { seq: 0, index: 0, commit: 0, last_time: 0 }),
            reader: spin::Mutex::new(Reader { next: 0, overrun_seen: 0 }),
            stopped: AtomicU8::new(0),
            overwrite: AtomicBool::new(true),
            writing: AtomicBool::new(false),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            overrun: AtomicU64::new(0),
            read: AtomicU64::new(0),
            before_reset: spin::Mutex::new(Lifetime::default()),
        })
    }

    /// Page number `seq` (or the one a lap later that replaced it) and its tag.
    fn page(&self, seq: u64) -> (&Page, &AtomicU64) {
        let index = (seq % self.pages.len() as u64) as usize;
        (&self.pages[index], &self.tags[index])
    }

    /// The page the writer is on. `writer.index` is always a page's index
    /// (`advance` wraps it, `reset` zeroes it), so the traced path indexes
    /// without a check.
    #[inline(always)]
    fn writer_page(&self, writer: &Writer) -> &Page {
        debug_assert!(writer.index < self.pages.len());
        // SAFETY: in bounds, as above.
        unsafe { self.pages.get_unchecked(writer.index) }
    }

    /// How many pages the ring has.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// The oldest page number the ring can still hold.
    fn oldest(&self, tail: u64) -> u64 {
        tail.saturating_sub(self.pages.len() as u64 - 1)
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        let written = self.written.load(Ordering::Acquire);
        let overrun = self.overrun.load(Ordering::Acquire);
        let read = self.read.load(Ordering::Acquire);
        let dropped = self.dropped.load(Ordering::Relaxed);
        Stats { entries: written.saturating_sub(overrun + read), written, overrun, read, dropped }
    }

    /// The counters since the buffer was made.
    pub fn lifetime(&self) -> Lifetime {
        let base = *self.before_reset.lock();
        let now = self.stats();
        Lifetime {
            written: base.written + now.written,
            overrun: base.overrun + now.overrun,
            read: base.read + now.read,
            erased: base.erased,
            entries: now.entries,
        }
    }

    /// Appends a record with `payload` at `time` (nanoseconds; never less
    /// than the previous record's).
    ///
    /// # Safety
    /// As for [`write_with`](Self::write_with).
    pub unsafe fn write(&self, time: u64, payload: &[u8]) -> Result<(), WriteError> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.write_with(time, payload.len(), |bytes| bytes.copy_from_slice(payload)) }
    }

    /// [`write_with`](Self::write_with) for a `fill` that may run traced
    /// code (`trace_printk!`'s arguments' `Display`): a write that code
    /// makes on this ring, nested in this one, is dropped and counted
    /// (`WriteError::Nested`) rather than written over the record being
    /// filled, as Linux's recursion lock drops it. The other writers' fills
    /// are tracing code, which is never traced: their path pays nothing
    /// for this (the flag rides on the `stopped` word they test anyway).
    ///
    /// # Safety
    /// As for [`write_with`](Self::write_with).
    pub unsafe fn write_with_foreign(&self, time: u64, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), WriteError> {
        let filling = |bytes: &mut [u8]| {
            // Atomic: readers on other CPUs set and clear their bits too.
            self.stopped.fetch_or(STOP_FILLING, Ordering::SeqCst);
            fill(bytes);
            self.stopped.fetch_and(!STOP_FILLING, Ordering::SeqCst);
        };
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.write_with(time, len, filling) }
    }

    /// Appends a record of `len` payload bytes at `time`, which `fill`
    /// writes in place (the bytes it gets are exactly `len` long; the
    /// padding to a 4-byte multiple is zeroed here; they start 4-byte
    /// aligned, as every record in a page). One copy, no staging, no lock.
    /// A `fill` that may run traced code goes through
    /// [`write_with_foreign`](Self::write_with_foreign).
    ///
    /// # Safety
    /// One writer at a time: the buffer's CPU, with interrupts masked (the
    /// kernel), or one thread (tests).
    #[inline(always)]
    pub unsafe fn write_with(&self, time: u64, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), WriteError> {
        if len == 0 || len > MAX_PAYLOAD {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Err(WriteError::TooLarge);
        }
        // Pairs with `snapshot`: it sets `STOP_PAUSED`, then waits for
        // `writing`.
        self.writing.store(true, Ordering::SeqCst);
        let stopped = self.stopped.load(Ordering::SeqCst);
        if stopped != 0 {
            if stopped & STOP_FILLING != 0 {
                // Inside the fill of a write on this CPU: that write is
                // not over, so `writing` stays set.
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return Err(WriteError::Nested);
            }
            self.writing.store(false, Ordering::Release);
            if stopped & STOP_MASKED != 0 {
                return Err(WriteError::Masked);
            }
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Err(WriteError::Paused);
        }
        // SAFETY: the one writer (the caller's guarantee).
        let writer = unsafe { &mut *self.writer.get() };
        let padded = len.next_multiple_of(4);
        let small = padded <= TYPE_DATA_MAX as usize * 4;
        let record_size = if small { 4 + padded } else { 8 + padded };

        // The usual case: room on a started page, and a delta the header
        // holds. Anything else (a fresh page, a time extend, the next page)
        // is `make_room`'s.
        let (at, delta) = match time.checked_sub(writer.last_time) {
            Some(delta) if delta <= TIME_DELTA_MAX && writer.commit != 0 && writer.commit + record_size <= PAGE_DATA_SIZE => {
                (writer.commit, delta)
            }
            _ => match self.make_room(writer, time, record_size) {
                Some(place) => place,
                None => {
                    self.writing.store(false, Ordering::Release);
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return Err(WriteError::Full);
                }
            },
        };
        let page = self.writer_page(writer);
        let data_at = if small {
            page.put_u32(at, (padded / 4) as u32 | ((delta as u32) << 5));
            at + 4
        } else {
            page.put_u32(at, (delta as u32) << 5);
            page.put_u32(at + 4, (padded + 4) as u32);
            at + 8
        };
        fill(page.data_mut(data_at, len));
        if padded > len {
            page.data_mut(data_at + len, padded - len).fill(0);
        }
        writer.commit = data_at + padded;
        writer.last_time = time;
        page.commit_word().store(writer.commit as u64, Ordering::Release);
        self.written.fetch_add(1, Ordering::Release);
        self.writing.store(false, Ordering::Release);
        Ok(())
    }

    /// Where a record of `record_size` bytes at `time` goes when the usual
    /// case does not hold: starts the page if it is fresh, moves to the next
    /// page if the record (and a time extend) would not fit, and writes the
    /// time extend a long gap needs. Answers the record header's offset and
    /// the delta it carries; `None` if the next page holds unread records
    /// the ring may not overwrite.
    #[cold]
    #[inline(never)]
    fn make_room(&self, writer: &mut Writer, time: u64, record_size: usize) -> Option<(usize, u64)> {
        if writer.commit == 0 {
            self.writer_page(writer).reset(time);
            writer.last_time = time;
        }
        let mut delta = time.saturating_sub(writer.last_time);
        let extend = if delta > TIME_DELTA_MAX { 8 } else { 0 };
        if writer.commit + extend + record_size > PAGE_DATA_SIZE {
            if !self.overwrite.load(Ordering::Relaxed) && self.next_page_unread(writer) {
                return None;
            }
            self.advance(writer, time);
            delta = 0;
        }
        let page = self.writer_page(writer);
        let mut at = writer.commit;
        if delta > TIME_DELTA_MAX {
            page.put_u32(at, TYPE_TIME_EXTEND | (((delta & TIME_DELTA_MAX) as u32) << 5));
            page.put_u32(at + 4, (delta >> TIME_DELTA_BITS) as u32);
            at += 8;
            delta = 0;
        }
        Some((at, delta))
    }

    /// Whether the page after the writer's still holds records a consuming
    /// reader has not taken (what moving there would overwrite).
    /// (A consuming read moves `consumed` up to the commit it copied, and
    /// only the writer claims pages, so a page is empty of unread records
    /// exactly when `consumed` reached its commit: no walk of its records.)
    fn next_page_unread(&self, writer: &Writer) -> bool {
        let (page, tag) = self.page(writer.seq + 1);
        (Tag::unpack(tag.load(Ordering::Acquire)).consumed as usize) < page.commit()
    }

    /// Switches between overwriting the oldest page when full (`true`,
    /// the default) and dropping new records until a consuming reader
    /// makes room (`false`).
    pub fn set_overwrite(&self, overwrite: bool) {
        self.overwrite.store(overwrite, Ordering::Relaxed);
    }

    /// Moves the writer to the next page: claims it, counting what a
    /// reader had not consumed of it as overrun.
    #[cold]
    fn advance(&self, writer: &mut Writer, time: u64) {
        let seq = writer.seq + 1;
        let (page, tag) = self.page(seq);
        let old = Tag::unpack(tag.swap(Tag { seq: seq as u32, consumed: Tag::CLAIMING }.pack(), Ordering::AcqRel));
        // Only the writer claims pages, and it left this one complete.
        let lost = page.records().skip_while_offset(old.consumed as usize).count();
        if lost > 0 {
            self.overrun.fetch_add(lost as u64, Ordering::AcqRel);
        }
        page.reset(time);
        tag.store(Tag { seq: seq as u32, consumed: 0 }.pack(), Ordering::Release);
        self.tail.store(seq, Ordering::Release);
        writer.seq = seq;
        writer.index = if writer.index + 1 == self.pages.len() { 0 } else { writer.index + 1 };
        writer.commit = 0;
        writer.last_time = time;
    }

    /// Whether finished pages (not only the writer's) wait to be read.
    pub fn has_finished_pages(&self) -> bool {
        let reader = self.reader.lock();
        reader.next < self.tail.load(Ordering::Acquire)
    }

    /// Takes the oldest unread records out of the buffer into `out`, as a
    /// page in Linux's format (with `RB_MISSED_EVENTS` and the count if
    /// records were overwritten since the last read). Returns how many records
    /// it holds, or `None` if there is nothing to read. Any CPU, any time.
    pub fn read_page(&self, out: &mut [u8; PAGE_SIZE]) -> Option<usize> {
        let mut reader = self.reader.lock();
        loop {
            let tail = self.tail.load(Ordering::Acquire);
            reader.next = reader.next.max(self.oldest(tail));
            // The losses before this page: read before its tag, so a page
            // the writer overruns once this one is taken is not counted
            // here (the writer overruns pages in order: one past this page
            // would have taken this page first, and the tag check below
            // would fail).
            let overrun = self.overrun.load(Ordering::Acquire);
            let (page, tag_word) = self.page(reader.next);
            let tag = Tag::unpack(tag_word.load(Ordering::Acquire));
            if tag.seq != reader.next as u32 || tag.consumed == Tag::CLAIMING {
                // The writer lapped the reader: what was there is overrun
                // (`next` is never past the writer's page, and the writer
                // publishes a page's tag before its number).
                reader.next += 1;
                continue;
            }
            let finished = reader.next < tail;
            let skip = tag.consumed as usize;
            let commit = page.copy_to(out);
            let count = page_records(&out[..]).skip_while_offset(skip).count();
            let taken = Tag { consumed: commit as u32, ..tag };
            if tag_word.compare_exchange(tag.pack(), taken.pack(), Ordering::AcqRel, Ordering::Acquire).is_err() {
                continue; // claimed under us: the copy may be torn
            }
            if finished {
                reader.next += 1;
            }
            if count > 0 {
                return Some(self.finish_page(&mut reader, out, skip, count, overrun));
            }
            if !finished {
                return None;
            }
        }
    }

    /// Makes `out`, a copy of a page whose records from data offset `skip` on
    /// (`count` of them) were just consumed, a page of those records alone,
    /// flagged if records were lost before them (`overrun`, the count read
    /// before the page was). Returns `count`.
    fn finish_page(&self, reader: &mut Reader, out: &mut [u8; PAGE_SIZE], skip: usize, count: usize, overrun: u64) -> usize {
        let commit = drop_consumed(out, skip);
        let mut word = commit as u64;
        if overrun > reader.overrun_seen {
            word |= RB_MISSED_EVENTS;
            let end = PAGE_HEADER_SIZE + commit;
            if end + 8 <= PAGE_SIZE {
                out[end..end + 8].copy_from_slice(&(overrun - reader.overrun_seen).to_ne_bytes());
                word |= RB_MISSED_STORED;
            }
            reader.overrun_seen = overrun;
        }
        out[8..16].copy_from_slice(&word.to_ne_bytes());
        self.read.fetch_add(count as u64, Ordering::AcqRel);
        count
    }

    /// Runs `f` with the writer paused and idle: nothing changes in the
    /// ring meanwhile (records written then are dropped, not counted, as
    /// Linux's `trace` file does while it is read).
    fn paused<R>(&self, f: impl FnOnce() -> R) -> R {
        let was = self.stopped.fetch_or(STOP_PAUSED, Ordering::SeqCst);
        while self.writing.load(Ordering::SeqCst) {
            core::hint::spin_loop();
        }
        let result = f();
        if was & STOP_PAUSED == 0 {
            self.stopped.fetch_and(!STOP_PAUSED, Ordering::SeqCst);
        }
        result
    }

    /// Stops (`true`) or resumes recording in this ring for good, as
    /// Linux's `ring_buffer_record_disable_cpu` does for `tracing_cpumask`:
    /// a write meanwhile records nothing and is not counted as dropped.
    pub fn set_masked(&self, masked: bool) {
        match masked {
            true => self.stopped.fetch_or(STOP_MASKED, Ordering::SeqCst),
            false => self.stopped.fetch_and(!STOP_MASKED, Ordering::SeqCst),
        };
    }

    /// Copies every unread page, oldest first (a non-consuming read).
    pub fn snapshot(&self) -> Vec<Box<[u8; PAGE_SIZE]>> {
        let reader = self.reader.lock();
        let mut pages = Vec::new();
        self.paused(|| {
            self.for_each_unread_page(&reader, |copy| {
                if page_records(&copy[..]).next().is_some() {
                    pages.push(Box::new(*copy));
                }
            })
        });
        pages
    }

    /// Calls `f` with a copy of each unread page, oldest first, without
    /// the records a consuming reader already took. The writer must be
    /// paused (or gone) and `reader` held.
    fn for_each_unread_page(&self, reader: &Reader, mut f: impl FnMut(&[u8; PAGE_SIZE])) {
        let tail = self.tail.load(Ordering::Acquire);
        let first = reader.next.max(self.oldest(tail));
        let mut copy = Box::new([0u8; PAGE_SIZE]);
        for seq in first..=tail {
            let (page, tag) = self.page(seq);
            let skip = Tag::unpack(tag.load(Ordering::Acquire)).consumed as usize;
            page.copy_to(&mut copy);
            drop_consumed(&mut copy, skip);
            f(&copy);
        }
    }

    /// Moves this ring into `into`, a new ring (a resize, which keeps the
    /// records, as Linux's does): its unread records go there, oldest first,
    /// each with its time, and so do its counters, as if `into` had been
    /// this ring all along. A smaller `into` keeps the newest that fit, the
    /// older ones counted as overrun (as Linux's resize drops the oldest
    /// pages, whatever `options/overwrite` says). This ring's writer is
    /// paused for good: its CPU is to write into `into` from now on.
    ///
    /// # Safety
    /// The caller is `into`'s one writer (it is not published yet), and
    /// nothing writes this ring any more (a write that did not see it
    /// paused is over).
    pub unsafe fn move_into(&self, into: &RingBuffer) {
        let reader = self.reader.lock();
        self.stopped.fetch_or(STOP_PAUSED, Ordering::SeqCst);
        while self.writing.load(Ordering::SeqCst) {
            core::hint::spin_loop();
        }
        let old = self.stats();
        // A masked `into` (a CPU `tracing_cpumask` leaves out) still takes
        // the records its CPU recorded before.
        let masked = into.stopped.fetch_and(!STOP_MASKED, Ordering::SeqCst) & STOP_MASKED;
        let overwrite = into.overwrite.swap(true, Ordering::Relaxed);
        self.for_each_unread_page(&reader, |copy| {
            for record in page_records(&copy[..]) {
                // SAFETY: the caller is `into`'s one writer. A refused
                // write is counted by `into`.
                let _ = unsafe { into.write(record.time, record.payload) };
            }
        });
        // What became of the records no longer here: `into` wrote the
        // `old.entries` it got, so its `written` gains the rest.
        into.written.fetch_add(old.written - old.entries, Ordering::AcqRel);
        into.overrun.fetch_add(old.overrun, Ordering::AcqRel);
        into.read.fetch_add(old.read, Ordering::AcqRel);
        into.dropped.fetch_add(old.dropped, Ordering::Relaxed);
        *into.before_reset.lock() = *self.before_reset.lock();
        // A consuming reader was told of the overruns it has seen already.
        into.reader.lock().overrun_seen = reader.overrun_seen;
        into.overwrite.store(overwrite, Ordering::Relaxed);
        into.stopped.fetch_or(masked, Ordering::SeqCst);
    }

    /// What `per_cpu/cpuN/stats` shows besides the counters, read without
    /// pausing the writer (as Linux reads them): the bytes of unread records,
    /// and the time stamp of the oldest unread page (Linux's "oldest record
    /// ts" is its reader page's). Figures of a moment: the writer moves on.
    pub fn usage(&self) -> Usage {
        let reader = self.reader.lock();
        let tail = self.tail.load(Ordering::Acquire);
        let first = reader.next.max(self.oldest(tail));
        let mut usage = Usage::default();
        for seq in first..=tail {
            let (page, tag) = self.page(seq);
            let consumed = Tag::unpack(tag.load(Ordering::Acquire)).consumed as usize;
            let unread = page.commit().saturating_sub(consumed);
            if unread > 0 && usage.bytes == 0 {
                usage.oldest_page_time = page.time_stamp();
            }
            usage.bytes += unread;
        }
        usage
    }

    /// Empties the buffer (`echo > trace`). The writer is paused meanwhile.
    pub fn reset(&self) {
        let mut reader = self.reader.lock();
        self.paused(|| {
            // SAFETY: the writer is paused and idle: nothing else touches its
            // state until `paused` returns.
            let writer = unsafe { &mut *self.writer.get() };
            for (page, tag) in self.pages.iter().zip(self.tags.iter()) {
                page.reset(0);
                tag.store(0, Ordering::Release);
            }
            let mut base = self.before_reset.lock();
            let now = self.stats();
            base.written += now.written;
            base.overrun += now.overrun;
            base.read += now.read;
            base.erased += now.entries;
            self.tail.store(0, Ordering::Release);
            *writer = Writer { seq: 0, index: 0, commit: 0, last_time: 0 };
            *reader = Reader { next: 0, overrun_seen: 0 };
            self.written.store(0, Ordering::Release);
            self.overrun.store(0, Ordering::Release);
            self.read.store(0, Ordering::Release);
            // As Linux's reset does (its `dropped records` start over).
            self.dropped.store(0, Ordering::Relaxed);
        })
    }

    /// Every unread record (copied), oldest first.
    pub fn records(&self) -> Vec<(u64, Vec<u8>)> {
        self.snapshot()
            .iter()
            .flat_map(|page| page_records(&page[..]).map(|record| (record.time, record.payload.to_vec())).collect::<Vec<_>>())
            .collect()
    }
}

/// Removes the first `skip` data bytes (records a reader already took) from
/// `page`, a copy of a page: the rest moves down and the page's timestamp
/// becomes the time the first remaining record counts from. Returns the new
/// commit.
fn drop_consumed(page: &mut [u8; PAGE_SIZE], skip: usize) -> usize {
    let commit = (u64::from_ne_bytes(page[8..16].try_into().unwrap()) & COMMIT_MASK) as usize;
    if skip == 0 {
        return commit;
    }
    let base = page_records(&page[..]).time_before_offset(skip);
    page.copy_within(PAGE_HEADER_SIZE + skip..PAGE_HEADER_SIZE + commit, PAGE_HEADER_SIZE);
    page[0..8].copy_from_slice(&base.to_ne_bytes());
    page[8..16].copy_from_slice(&((commit - skip) as u64).to_ne_bytes());
    commit - skip
}

impl PageRecords<'_> {
    /// The records from data offset `offset` on.
    fn skip_while_offset(mut self, offset: usize) -> Self {
        while self.offset < offset {
            if self.next().is_none() {
                break;
            }
        }
        self
    }

    /// The time of the last record that ends at or before `offset` (the
    /// page's timestamp if none).
    fn time_before_offset(mut self, offset: usize) -> u64 {
        let mut time = self.time;
        while self.offset < offset {
            match self.next() {
                Some(record) => time = record.time,
                None => break,
            }
        }
        time
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::sync::Arc;

    fn payload(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|b| (i as usize + b) as u8).collect()
    }

    fn write(ring: &RingBuffer, time: u64, payload: &[u8]) {
        // SAFETY: one writer (the test thread).
        unsafe { ring.write(time, payload) }.unwrap();
    }

    /// A masked ring (`tracing_cpumask`) records nothing and counts
    /// nothing, a reader's pause meanwhile leaves it masked, and unmasking
    /// records again.
    #[test]
    fn a_masked_ring_records_and_counts_nothing() {
        let ring = RingBuffer::new(4);
        write(&ring, 1, &payload(1, 24));
        ring.set_masked(true);
        // SAFETY: one writer (the test thread).
        assert_eq!(unsafe { ring.write(2, &payload(2, 24)) }, Err(WriteError::Masked));
        let copies = ring.snapshot(); // pauses and resumes the writer
        assert_eq!(copies.iter().flat_map(|page| page_records(&page[..])).count(), 1);
        // SAFETY: as above.
        assert_eq!(unsafe { ring.write(3, &payload(3, 24)) }, Err(WriteError::Masked), "still masked after the pause");
        let stats = ring.stats();
        assert_eq!((stats.written, stats.dropped, stats.entries), (1, 0, 1));
        ring.set_masked(false);
        write(&ring, 4, &payload(4, 24));
        assert_eq!(ring.records().iter().map(|(time, _)| *time).collect::<Vec<_>>(), [1, 4]);
    }

    /// A write from inside another's fill (traced code the fill ran) is
    /// dropped and counted; the record being filled is whole.
    #[test]
    fn a_write_nested_in_a_fill_is_dropped() {
        let ring = RingBuffer::new(4);
        let mut nested = None;
        // SAFETY: one writer (the test thread); the nested call is the
        // case under test.
        let outer = unsafe {
            ring.write_with_foreign(1, 24, |room| {
                nested = Some(ring.write(2, &payload(2, 8)));
                room.copy_from_slice(&payload(1, 24));
            })
        };
        assert_eq!((outer, nested), (Ok(()), Some(Err(WriteError::Nested))));
        write(&ring, 3, &payload(3, 24));
        assert_eq!(ring.records(), [(1, payload(1, 24)), (3, payload(3, 24))]);
        let stats = ring.stats();
        assert_eq!((stats.written, stats.dropped, stats.entries), (2, 1, 2));
        assert_eq!(ring.stopped.load(Ordering::Relaxed), 0, "the flag went with the fill");
    }

    /// Without overwrite, a full ring keeps its oldest records and drops
    /// new ones (counted), until a consuming read makes room.
    #[test]
    fn a_ring_that_does_not_overwrite_drops_new_records_when_full() {
        let ring = RingBuffer::new(3);
        ring.set_overwrite(false);
        let mut kept = 0u64;
        // SAFETY: one writer (the test thread).
        while unsafe { ring.write(kept + 1, &payload(1, 24)) }.is_ok() {
            kept += 1;
        }
        let per_page = (PAGE_DATA_SIZE / 28) as u64;
        assert_eq!(kept, 3 * per_page, "every page filled once");
        // SAFETY: as above.
        assert_eq!(unsafe { ring.write(1_000, &payload(2, 24)) }, Err(WriteError::Full));
        let stats = ring.stats();
        assert_eq!((stats.entries, stats.overrun, stats.dropped), (kept, 0, 2));
        assert_eq!(ring.records().first().map(|(time, _)| *time), Some(1), "the oldest kept");
        let mut page = [0u8; PAGE_SIZE];
        assert_eq!(ring.read_page(&mut page), Some(per_page as usize), "a consuming read takes the first page");
        write(&ring, 2_000, &payload(3, 24));
        assert_eq!(ring.records().last().map(|(time, _)| *time), Some(2_000), "room again");
        ring.set_overwrite(true);
        for n in 0..per_page {
            write(&ring, 3_000 + n, &payload(4, 24));
        }
        assert!(ring.stats().overrun > 0, "overwriting again");
    }

    #[test]
    fn records_round_trip_with_times() {
        let ring = RingBuffer::new(4);
        write(&ring, 1_000, &payload(1, 24));
        write(&ring, 1_500, &payload(2, 13)); // padded to 16
        write(&ring, 1_000 + (1 << 30), &payload(3, 24)); // needs a time extend
        write(&ring, 2_000 + (1 << 30), &payload(4, 200)); // length in the next word
        let records = ring.records();
        assert_eq!(records.len(), 4);
        assert_eq!(records[0], (1_000, payload(1, 24)));
        assert_eq!(records[1].0, 1_500);
        assert_eq!(&records[1].1[..13], &payload(2, 13)[..]);
        assert_eq!(records[1].1.len(), 16);
        assert_eq!(records[2].0, 1_000 + (1 << 30));
        assert_eq!(records[3], (2_000 + (1 << 30), payload(4, 200)));
        assert_eq!(ring.stats(), Stats { entries: 4, written: 4, overrun: 0, read: 0, dropped: 0 });
    }

    #[test]
    fn usage_counts_the_unread_bytes_without_pausing_the_writer() {
        let ring = RingBuffer::new(4);
        assert_eq!(ring.usage(), Usage::default());
        let per_page = PAGE_DATA_SIZE / 28;
        for i in 0..per_page + 3 {
            write(&ring, 100 + i as u64, &[7; 24]);
        }
        let copied: usize = ring.snapshot().iter().map(|page| page_commit(&page[..])).sum();
        let usage = ring.usage();
        assert_eq!(usage, Usage { bytes: copied, oldest_page_time: 100 });
        assert!(ring.stopped.load(Ordering::Relaxed) == 0 && ring.stats().dropped == 0);
        // A consuming read takes the first page: the oldest is the next.
        let mut page = [0u8; PAGE_SIZE];
        ring.read_page(&mut page).unwrap();
        let usage = ring.usage();
        assert_eq!(usage.bytes, 3 * 28);
        assert_eq!(usage.oldest_page_time, 100 + per_page as u64);
    }

    #[test]
    fn header_words_are_linux_format() {
        let ring = RingBuffer::new(2);
        write(&ring, 77, &[1, 2, 3, 4, 5, 6, 7, 8]);
        write(&ring, 80, &[9; 8]);
        let pages = ring.snapshot();
        let bytes = &pages[0];
        let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!((word(0), word(8)), (77, 24), "timestamp, commit");
        let header = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(header(16), 2, "type_len 2 (8 bytes), delta 0");
        assert_eq!(header(28), 2 | (3 << 5), "type_len 2, delta 3");
    }

    #[test]
    fn full_ring_overwrites_oldest_and_counts_overruns() {
        let ring = RingBuffer::new(3);
        let per_page = PAGE_DATA_SIZE / 28;
        let total = per_page * 5;
        for i in 0..total {
            write(&ring, i as u64, &(i as u32).to_ne_bytes().repeat(6));
        }
        let stats = ring.stats();
        assert_eq!(stats.written, total as u64);
        assert_eq!(stats.entries + stats.overrun, total as u64);
        assert!(stats.overrun > 0);
        let records = ring.records();
        assert_eq!(records.len() as u64, stats.entries);
        // What is left is the newest records, in order, ending with the last.
        let last = u32::from_ne_bytes(records.last().unwrap().1[..4].try_into().unwrap());
        assert_eq!(last as usize, total - 1);
        assert!(records.windows(2).all(|w| w[0].0 < w[1].0));
        ring.reset();
        assert_eq!(ring.records().len(), 0);
        assert_eq!(ring.stats(), Stats::default());
        let lifetime = ring.lifetime();
        assert_eq!(
            lifetime,
            Lifetime { written: total as u64, overrun: stats.overrun, read: 0, erased: stats.entries, entries: 0 },
            "a reset erases what was left, and says so"
        );
    }

    #[test]
    fn a_ring_moves_into_another_with_its_records_and_counters() {
        let (old, grown, shrunk) = (RingBuffer::new(8), RingBuffer::new(16), RingBuffer::new(2));
        let records: Vec<(u64, Vec<u8>)> = (0..1000).map(|i| (1_000 + i as u64 * 7, payload(i, 40))).collect();
        for (time, bytes) in &records {
            write(&old, *time, bytes);
        }
        let mut page = [0u8; PAGE_SIZE];
        let taken = old.read_page(&mut page).unwrap();
        let before = old.stats();
        assert!(before.overrun > 0 && before.read == taken as u64, "{before:?}");
        let unread = old.records();
        // SAFETY: the test is the one writer of every ring.
        unsafe { old.move_into(&grown) };
        assert_eq!(grown.records(), unread, "every unread record, with its time");
        assert_eq!(grown.stats(), before, "the counters go with them");
        let mut first = [0u8; PAGE_SIZE];
        let taken_after = grown.read_page(&mut first).unwrap();
        assert_eq!(page_missed(&first), None, "the reader was told of those overruns before the move");
        let before = grown.stats();
        assert_eq!(before.read, (taken + taken_after) as u64);
        write(&grown, 9_999, &payload(1, 8));
        assert_eq!(grown.records().last().map(|(time, _)| *time), Some(9_999), "recording goes on after them");
        // SAFETY: as above.
        let late = unsafe { old.write(10_000, &payload(2, 8)) };
        assert_eq!(late, Err(WriteError::Paused), "the old ring records no more");

        // Smaller: the newest that fit, the rest counted as overrun, even
        // into a ring that does not overwrite (as Linux's resize drops the
        // oldest pages).
        shrunk.set_overwrite(false);
        let before = grown.stats();
        // SAFETY: as above.
        unsafe { grown.move_into(&shrunk) };
        let kept = shrunk.records();
        let all = grown.records();
        assert!(!kept.is_empty() && kept.len() < all.len());
        assert_eq!(kept[..], all[all.len() - kept.len()..], "the newest, in order");
        let after = shrunk.stats();
        assert_eq!(after.entries, kept.len() as u64);
        assert_eq!(after.overrun, before.overrun + (all.len() - kept.len()) as u64);
        assert_eq!(after.written, before.written);
        assert!(!shrunk.overwrite.load(Ordering::Relaxed), "its own setting again");
    }

    #[test]
    fn oversized_payload_is_refused() {
        let ring = RingBuffer::new(2);
        // SAFETY: one writer.
        unsafe {
            assert_eq!(ring.write(0, &[0; MAX_PAYLOAD + 1]), Err(WriteError::TooLarge));
            assert_eq!(ring.write(0, &[]), Err(WriteError::TooLarge));
        }
        assert_eq!(ring.stats().dropped, 2, "counted as dropped");
    }

    #[test]
    fn consuming_reads_take_each_record_once_and_flag_what_was_lost() {
        let ring = RingBuffer::new(3);
        let mut out = [0u8; PAGE_SIZE];
        assert_eq!(ring.read_page(&mut out), None, "nothing to read");
        write(&ring, 10, &7u32.to_ne_bytes());
        write(&ring, 11, &8u32.to_ne_bytes());
        assert_eq!(ring.read_page(&mut out), Some(2), "the writer's page, read in place");
        assert_eq!(page_records(&out[..]).map(|e| e.time).collect::<Vec<_>>(), [10, 11]);
        assert_eq!(ring.read_page(&mut out), None, "nothing new");
        write(&ring, 12, &9u32.to_ne_bytes());
        assert_eq!(ring.read_page(&mut out), Some(1), "only the new record");
        assert_eq!(page_records(&out[..]).map(|e| e.time).collect::<Vec<_>>(), [12]);
        // Overflow the ring: the reader learns how many it lost.
        let per_page = PAGE_DATA_SIZE / 8;
        for i in 0..per_page * 6 {
            write(&ring, 100 + i as u64, &(i as u32).to_ne_bytes());
        }
        let mut read = 0;
        let mut missed = None;
        while let Some(count) = ring.read_page(&mut out) {
            read += count as u64;
            missed = missed.or(page_missed(&out[..]));
        }
        let stats = ring.stats();
        assert!(stats.overrun > 0);
        // The first page read after the loss carries the flag, and the count
        // when the page had room for it.
        assert!(matches!(missed, Some(None)) || missed == Some(Some(stats.overrun)), "{missed:?}");
        assert_eq!(stats.read, 3 + read);
        assert_eq!(stats.written, stats.read + stats.overrun + stats.entries);
        assert_eq!(stats.entries, 0);
    }

    /// A writer thread and a reader thread at once: every record the writer
    /// wrote is read once or counted as overrun, none torn, in order.
    #[test]
    fn a_concurrent_reader_never_tears_or_loses_an_record() {
        let ring = Arc::new(RingBuffer::new(4));
        const EVENTS: u64 = 200_000;
        let writer = {
            let ring = ring.clone();
            std::thread::spawn(move || {
                for seq in 0..EVENTS {
                    // Each record: its sequence number, and its complement.
                    let mut bytes = [0u8; 16];
                    bytes[..8].copy_from_slice(&seq.to_ne_bytes());
                    bytes[8..].copy_from_slice(&(!seq).to_ne_bytes());
                    // SAFETY: the only writer.
                    unsafe { ring.write(seq, &bytes) }.unwrap();
                }
            })
        };
        let mut out = [0u8; PAGE_SIZE];
        let (mut read, mut last) = (0u64, None::<u64>);
        let mut check = |out: &[u8; PAGE_SIZE], read: &mut u64| {
            for record in page_records(&out[..]) {
                let seq = u64::from_ne_bytes(record.payload[..8].try_into().unwrap());
                let not = u64::from_ne_bytes(record.payload[8..16].try_into().unwrap());
                assert_eq!(not, !seq, "record {seq} torn");
                assert_eq!(record.time, seq, "its timestamp");
                assert!(last.is_none_or(|last| seq > last), "{seq} after {last:?}");
                last = Some(seq);
                *read += 1;
            }
        };
        while !writer.is_finished() {
            if ring.read_page(&mut out).is_some() {
                check(&out, &mut read);
            }
        }
        writer.join().unwrap();
        while ring.read_page(&mut out).is_some() {
            check(&out, &mut read);
        }
        let stats = ring.stats();
        assert_eq!(stats.written, EVENTS);
        assert_eq!(stats.read, read);
        assert_eq!(read + stats.overrun, EVENTS, "read or counted as overrun, never both, never neither");
    }
}
