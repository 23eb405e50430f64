//! The kernel's trace buffers: one [`RingBuffer`] per CPU.
//!
//! A CPU writes only its own buffer, with interrupts masked for the few
//! instructions of the write (so an interrupt that traces cannot interleave
//! with the event it interrupted, and the task cannot move to another CPU
//! in the middle), under that buffer's lock, which only a reader on another
//! CPU ever contends for. Readers take a copy of a buffer's pages under the
//! same lock and format it at leisure, while tracing goes on. `tracing_on`
//! switches recording without touching any site.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use arch::irq::IrqGuard;
use arch::{cpu, MAX_CPUS};
use spin::Once;

use crate::clock;
use crate::ring_buffer::{Page, RingBuffer, Stats, PAGE_SIZE};

/// Pages per CPU: 4 MiB (Linux's default is 1.4 MiB; a function_graph
/// trace of eight threads running fib(18) puts up to 2.5 MiB on one CPU).
pub const PAGES_PER_CPU: usize = 1024;

static BUFFERS: [Once<spin::Mutex<RingBuffer>>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];
static TRACING_ON: AtomicBool = AtomicBool::new(true);

/// Allocates a buffer for each of `cpus` CPUs. Called once at boot.
pub fn init(cpus: usize) {
    for buffer in BUFFERS.iter().take(cpus.clamp(1, MAX_CPUS)) {
        buffer.call_once(|| spin::Mutex::new(RingBuffer::new(PAGES_PER_CPU)));
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
    let mut ring = BUFFERS[cpu::id()].get()?.lock();
    let time = clock::now_ns();
    ring.write_with(time, len, |bytes| fill(time, bytes)).ok()?;
    Some(time)
}

/// Empties every buffer (`echo > trace`).
pub fn reset() {
    for buffer in BUFFERS.iter().filter_map(Once::get) {
        let _irq = IrqGuard::new();
        buffer.lock().reset();
    }
}

/// A copy of one CPU's buffer, for reading.
pub struct Snapshot {
    pub cpu: usize,
    pub stats: Stats,
    pages: Vec<Box<AlignedPage>>,
}

impl Snapshot {
    /// The copied pages, oldest first, as raw Linux-format pages.
    pub fn pages(&self) -> impl Iterator<Item = &[u8; PAGE_SIZE]> {
        self.pages.iter().map(|page| &page.0)
    }

    /// The events: (timestamp in ns, payload).
    pub fn events(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.pages.iter().flat_map(|page| {
            // SAFETY: `Page` and `AlignedPage` are both `repr(C)` wrappers of
            // `[u8; PAGE_SIZE]` aligned to 4096.
            let page: &Page = unsafe { &*(page.as_ref() as *const AlignedPage as *const Page) };
            page.events().map(|event| (event.time, event.payload))
        })
    }
}

#[repr(C, align(4096))]
struct AlignedPage([u8; PAGE_SIZE]);

/// Copies CPU `cpu`'s buffer.
pub fn snapshot_of(cpu: usize) -> Snapshot {
    let Some(buffer) = BUFFERS.get(cpu).and_then(Once::get) else {
        return Snapshot { cpu, stats: Stats::default(), pages: Vec::new() };
    };
    // Allocate outside the lock (interrupts are masked under it).
    let count = {
        let _irq = IrqGuard::new();
        buffer.lock().pages().count()
    };
    let mut pages: Vec<Box<AlignedPage>> = (0..count).map(|_| Box::new(AlignedPage([0; PAGE_SIZE]))).collect();
    let _irq = IrqGuard::new();
    let ring = buffer.lock();
    let mut used = 0;
    for (copy, page) in pages.iter_mut().zip(ring.pages()) {
        copy.0 = *page.as_bytes();
        used += 1;
    }
    pages.truncate(used);
    Snapshot { cpu, stats: ring.stats(), pages }
}

/// Copies every CPU's buffer.
pub fn snapshot_all() -> Vec<Snapshot> {
    (0..cpus()).map(snapshot_of).collect()
}

/// This CPU's buffer (tests that trace on one CPU).
pub fn snapshot() -> Snapshot {
    let cpu = {
        let _irq = IrqGuard::new();
        cpu::id()
    };
    snapshot_of(cpu)
}
