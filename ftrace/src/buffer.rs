//! A trace buffer: one [`RingBuffer`] per CPU, and the `tracing_on`
//! switch. Each trace array (the top level and every instance, see
//! `crate::instance`) has its own.
//!
//! A CPU writes only its own ring, with interrupts masked for the few
//! instructions of the write (so an interrupt that traces cannot interleave
//! with the event it interrupted, and the task cannot move to another CPU
//! in the middle): the one writer the ring asks for, and no lock. Readers
//! on any CPU either consume pages ([`TraceBuffer::read_page`]) or copy
//! them all with that CPU's writer paused for the copy
//! ([`TraceBuffer::snapshot_of`]); see `crate::ring_buffer`. `tracing_on`
//! switches recording without touching any site.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arch::irq::IrqGuard;
use arch::{cpu, MAX_CPUS};

use crate::clock;
use crate::ring_buffer::{page_events, Lifetime, RingBuffer, Stats, PAGE_SIZE};

/// Pages per CPU of the top level's buffer: 4 MiB (Linux's default is
/// 1.4 MiB; a function_graph trace of eight threads running fib(18) puts up
/// to 2.5 MiB on one CPU).
pub const PAGES_PER_CPU: usize = 1024;
/// Pages per CPU of an instance's buffer: 1 MiB.
pub const INSTANCE_PAGES_PER_CPU: usize = 256;

/// How many CPUs buffers are made for (set once at boot).
static CPUS: AtomicUsize = AtomicUsize::new(1);

/// Sets how many CPUs every buffer covers. Called once at boot, before any
/// buffer is made.
pub fn init(cpus: usize) {
    CPUS.store(cpus.clamp(1, MAX_CPUS), Ordering::Relaxed);
}

/// How many CPUs a buffer covers.
pub fn cpus() -> usize {
    CPUS.load(Ordering::Relaxed)
}

/// One trace array's buffer. See the module documentation.
pub struct TraceBuffer {
    rings: Box<[RingBuffer]>,
    on: AtomicBool,
}

impl TraceBuffer {
    /// A buffer of `pages` pages for each CPU, recording; `None` if the
    /// heap cannot hold it.
    pub fn try_new(pages: usize) -> Option<TraceBuffer> {
        let mut rings = Vec::new();
        rings.try_reserve_exact(cpus()).ok()?;
        for _ in 0..cpus() {
            rings.push(RingBuffer::try_new(pages)?);
        }
        Some(TraceBuffer { rings: rings.into_boxed_slice(), on: AtomicBool::new(true) })
    }

    /// Whether events are being recorded (`tracing_on`).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Switches recording (`echo 0|1 > tracing_on`).
    pub fn set_on(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// Records one event now, if recording is on. Returns whether it was.
    #[inline]
    pub fn write(&self, payload: &[u8]) -> bool {
        self.write_with(payload.len(), |_, bytes| bytes.copy_from_slice(payload)).is_some()
    }

    /// Records one event of `len` payload bytes now, if recording is on:
    /// `fill` gets the event's timestamp and writes the payload in place.
    /// Returns the timestamp, so a caller can keep the time its event
    /// carries (one call shows one duration wherever it is read).
    #[inline]
    pub fn write_with(&self, len: usize, fill: impl FnOnce(u64, &mut [u8])) -> Option<u64> {
        if !self.is_on() {
            return None;
        }
        let _irq = IrqGuard::new();
        let ring = self.rings.get(cpu::id())?;
        let time = clock::now_ns();
        // SAFETY: this CPU's ring, interrupts masked: its one writer.
        unsafe { ring.write_with(time, len, |bytes| fill(time, bytes)) }.ok()?;
        Some(time)
    }

    /// Empties every CPU's ring (`echo > trace`).
    pub fn reset(&self) {
        for ring in self.rings.iter() {
            ring.reset();
        }
    }

    /// Copies CPU `cpu`'s unread events (its writer paused meanwhile).
    pub fn snapshot_of(&self, cpu: usize) -> Snapshot {
        match self.rings.get(cpu) {
            Some(ring) => Snapshot { cpu, stats: ring.stats(), pages: ring.snapshot() },
            None => Snapshot { cpu, stats: Stats::default(), pages: Vec::new() },
        }
    }

    /// Copies every CPU's ring.
    pub fn snapshot_all(&self) -> Vec<Snapshot> {
        (0..self.rings.len()).map(|cpu| self.snapshot_of(cpu)).collect()
    }

    /// CPU `cpu`'s counters.
    pub fn stats_of(&self, cpu: usize) -> Stats {
        self.rings.get(cpu).map(RingBuffer::stats).unwrap_or_default()
    }

    /// Every CPU's counters, added up.
    pub fn stats(&self) -> Stats {
        let mut total = Stats::default();
        for ring in self.rings.iter() {
            let one = ring.stats();
            total.entries += one.entries;
            total.written += one.written;
            total.overrun += one.overrun;
            total.read += one.read;
        }
        total
    }

    /// Every CPU's counters since the buffer was made, added up (a reset
    /// does not clear them).
    pub fn lifetime(&self) -> Lifetime {
        let mut total = Lifetime::default();
        for ring in self.rings.iter() {
            let one = ring.lifetime();
            total.written += one.written;
            total.overrun += one.overrun;
            total.read += one.read;
            total.erased += one.erased;
            total.entries += one.entries;
        }
        total
    }

    /// Takes CPU `cpu`'s oldest unread events out, as one page (a consuming
    /// read); how many events, or `None` if there are none.
    pub fn read_page(&self, cpu: usize, out: &mut [u8; PAGE_SIZE]) -> Option<usize> {
        self.rings.get(cpu)?.read_page(out)
    }

    /// How many CPUs it covers.
    pub fn cpus(&self) -> usize {
        self.rings.len()
    }
}

/// A copy of one CPU's buffer, for reading.
pub struct Snapshot {
    pub cpu: usize,
    pub stats: Stats,
    pages: Vec<Box<[u8; PAGE_SIZE]>>,
}

impl Snapshot {
    /// The copied pages, oldest first, as raw Linux-format pages.
    pub fn pages(&self) -> impl Iterator<Item = &[u8; PAGE_SIZE]> {
        self.pages.iter().map(|page| &**page)
    }

    /// The events: (timestamp in ns, payload).
    pub fn events(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.pages.iter().flat_map(|page| page_events(&page[..]).map(|event| (event.time, event.payload)))
    }
}
