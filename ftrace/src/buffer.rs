//! The kernel's trace buffers: one [`RingBuffer`] per CPU.
//!
//! A CPU writes only its own buffer, with interrupts masked for the few
//! instructions of the write, so an interrupt that traces cannot interleave
//! with the event it interrupted. Readers take a copy of the pages (also with
//! interrupts masked) and format it at leisure, while tracing goes on.
//! `tracing_on` switches recording without touching any site.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use arch::irq::IrqGuard;
use arch::{cpu, MAX_CPUS};

use crate::clock;
use crate::ring_buffer::{Page, RingBuffer, Stats, PAGE_SIZE};

/// Pages per CPU: 1 MiB.
pub const PAGES_PER_CPU: usize = 256;

struct PerCpu(UnsafeCell<Option<RingBuffer>>);

// SAFETY: each CPU's buffer is touched only by that CPU, with interrupts
// masked (see `with_buffer`), so accesses never overlap.
unsafe impl Sync for PerCpu {}

static BUFFERS: [PerCpu; MAX_CPUS] = [const { PerCpu(UnsafeCell::new(None)) }; MAX_CPUS];
static TRACING_ON: AtomicBool = AtomicBool::new(true);

/// Runs `f` on this CPU's buffer with interrupts masked.
#[inline(always)]
fn with_buffer<R>(f: impl FnOnce(&mut Option<RingBuffer>) -> R) -> R {
    let _irq = IrqGuard::new();
    // SAFETY: this CPU's slot, interrupts masked: no other access can run
    // until the guard drops (see `PerCpu`).
    f(unsafe { &mut *BUFFERS[cpu::id()].0.get() })
}

/// Allocates this CPU's buffer. Called once at boot.
pub fn init() {
    let ring = RingBuffer::new(PAGES_PER_CPU);
    with_buffer(|slot| *slot = Some(ring));
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
    with_buffer(|slot| {
        let ring = slot.as_mut()?;
        let time = clock::now_ns();
        ring.write_with(time, len, |bytes| fill(time, bytes)).ok()?;
        Some(time)
    })
}

/// Empties every buffer (`echo > trace`).
pub fn reset() {
    with_buffer(|slot| {
        if let Some(ring) = slot {
            ring.reset();
        }
    });
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

/// Copies this CPU's buffer.
pub fn snapshot() -> Snapshot {
    with_buffer(|slot| {
        let Some(ring) = slot else {
            return Snapshot { cpu: cpu::id(), stats: Stats::default(), pages: Vec::new() };
        };
        let pages = ring.pages().map(|page| Box::new(AlignedPage(*page.as_bytes()))).collect();
        Snapshot { cpu: cpu::id(), stats: ring.stats(), pages }
    })
}
