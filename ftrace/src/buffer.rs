//! The kernel's trace buffers: one [`RingBuffer`] per CPU.
//!
//! A CPU writes only its own buffer, with interrupts masked for the few
//! instructions of the write (so an interrupt that traces cannot interleave
//! with the event it interrupted, and the task cannot move to another CPU
//! in the middle): the one writer the ring asks for, and no lock. Readers
//! on any CPU either consume pages ([`read_page`])
//! or copy them all with that CPU's writer paused for the copy
//! ([`snapshot_of`]); see `crate::ring_buffer`. `tracing_on` switches
//! recording without touching any site.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use arch::irq::IrqGuard;
use arch::{cpu, MAX_CPUS};
use spin::Once;

use crate::clock;
use crate::ring_buffer::{page_events, Lifetime, RingBuffer, Stats, PAGE_SIZE};

/// Pages per CPU: 4 MiB (Linux's default is 1.4 MiB; a function_graph
/// trace of eight threads running fib(18) puts up to 2.5 MiB on one CPU).
pub const PAGES_PER_CPU: usize = 1024;

static BUFFERS: [Once<RingBuffer>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];
static TRACING_ON: AtomicBool = AtomicBool::new(true);

/// Allocates a buffer for each of `cpus` CPUs. Called once at boot.
pub fn init(cpus: usize) {
    for buffer in BUFFERS.iter().take(cpus.clamp(1, MAX_CPUS)) {
        buffer.call_once(|| RingBuffer::new(PAGES_PER_CPU));
    }
}

/// How many CPUs have a buffer.
pub fn cpus() -> usize {
    BUFFERS.iter().take_while(|buffer| buffer.is_completed()).count()
}

/// Whether events are being recorded (`tracing_on`).
pub fn tracing_on() -> bool {
    TRACING_ON.load(Ordering::Relaxed)
}

/// Switches recording (`echo 0|1 > tracing_on`).
pub fn set_tracing_on(on: bool) {
    TRACING_ON.store(on, Ordering::Relaxed);
}

/// Records one event now, if recording is on. Returns whether it was.
#[inline]
pub fn write(payload: &[u8]) -> bool {
    write_with(payload.len(), |_, bytes| bytes.copy_from_slice(payload)).is_some()
}

/// Records one event of `len` payload bytes now, if recording is on:
/// `fill` gets the event's timestamp and writes the payload in place.
/// Returns the timestamp, so a caller can keep the time its event carries
/// (one call shows one duration wherever it is read).
#[inline]
pub fn write_with(len: usize, fill: impl FnOnce(u64, &mut [u8])) -> Option<u64> {
    if !tracing_on() {
        return None;
    }
    let _irq = IrqGuard::new();
    let ring = BUFFERS[cpu::id()].get()?;
    let time = clock::now_ns();
    // SAFETY: this CPU's buffer, interrupts masked: its one writer.
    unsafe { ring.write_with(time, len, |bytes| fill(time, bytes)) }.ok()?;
    Some(time)
}

/// Empties every buffer (`echo > trace`).
pub fn reset() {
    for buffer in BUFFERS.iter().filter_map(Once::get) {
        buffer.reset();
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

/// Copies CPU `cpu`'s unread events (its writer paused meanwhile).
pub fn snapshot_of(cpu: usize) -> Snapshot {
    match BUFFERS.get(cpu).and_then(Once::get) {
        Some(ring) => Snapshot { cpu, stats: ring.stats(), pages: ring.snapshot() },
        None => Snapshot { cpu, stats: Stats::default(), pages: Vec::new() },
    }
}

/// Copies every CPU's buffer.
pub fn snapshot_all() -> Vec<Snapshot> {
    (0..cpus()).map(snapshot_of).collect()
}

/// CPU `cpu`'s counters.
pub fn stats_of(cpu: usize) -> Stats {
    BUFFERS.get(cpu).and_then(Once::get).map(RingBuffer::stats).unwrap_or_default()
}

/// Every CPU's counters since boot, added up (a reset does not clear them).
pub fn lifetime() -> Lifetime {
    let mut total = Lifetime::default();
    for ring in BUFFERS.iter().filter_map(Once::get) {
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
pub fn read_page(cpu: usize, out: &mut [u8; PAGE_SIZE]) -> Option<usize> {
    BUFFERS.get(cpu).and_then(Once::get)?.read_page(out)
}
