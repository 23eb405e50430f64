//! A trace buffer: one [`RingBuffer`] per CPU, and the `tracing_on`
//! switch. Each trace array (the top level and every instance, see
//! `trace::array::trace_array`) has its own.
//!
//! A CPU writes only its own ring, with interrupts masked for the few
//! instructions of the write (so an interrupt that traces cannot interleave
//! with the record it interrupted, and the task cannot move to another CPU
//! in the middle): the one writer the ring asks for, and no lock. Readers
//! on any CPU either consume pages ([`TraceBuffer::read_page`]) or copy
//! them all with that CPU's writer paused for the copy
//! ([`TraceBuffer::snapshot_of`]); see `crate::per_cpu`. `tracing_on`
//! switches recording without touching any site.
//!
//! The `snapshot` file's buffer is a second set of rings of the same size
//! (the *spare*), allocated on request. Taking a snapshot swaps the two
//! sets' pointers: no copy, no allocation, so a callback can do it
//! (`FUNC:snapshot`). A write that loaded the old pointer just before the
//! swap finishes in the set that is now the snapshot: the per-CPU rings
//! stay each CPU's own in both sets, so that is safe, and readers see it
//! as one more record.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use arch::irq::IrqGuard;
use arch::sync::{Mutex, MutexGuard};
use arch::{cpu, MAX_CPUS};

use crate::clock::{self, TraceClock};
use crate::payload::Payload;
use crate::per_cpu::{page_records, Lifetime, RingBuffer, Stats, PAGE_SIZE};

/// Pages per CPU of the top level's buffer: 4 MiB (Linux's default is
/// 1.4 MiB; a function_graph trace of eight threads running fib(18) puts up
/// to 2.5 MiB on one CPU).
pub const PAGES_PER_CPU: usize = 1024;
/// Pages per CPU of an instance's buffer: 1 MiB.
pub const INSTANCE_PAGES_PER_CPU: usize = 256;

/// A buffer's `on` word: its low byte is `tracing_on` and the clock, the
/// rest counts readers pausing it ([`PAUSE`]). A write records only when
/// the whole word is [`ON_LOCAL`] or [`ON_OTHER_CLOCK`]: recording with the
/// `local` clock (the default, and the fast path) is 0, so the write's
/// first test is a test for zero.
const ON_LOCAL: u32 = 0;
/// Not recording (`tracing_on` 0).
const OFF: u32 = 1;
/// Recording, with another clock (the buffer's `clock`).
const ON_OTHER_CLOCK: u32 = 2;
/// The `tracing_on` and clock part of the word.
const STATE: u32 = 0xff;
/// One reader pausing the buffer (`cat trace`): added while it reads. A
/// count, not a flag, so that overlapping readers and `tracing_on` writes
/// during a read each keep their effect (Linux's `tracing_stop` is a count
/// apart from `tracing_on` too).
const PAUSE: u32 = 0x100;

/// The `on` state of a buffer recording with `clock`.
fn on_state(clock: TraceClock) -> u32 {
    match clock {
        TraceClock::Local => ON_LOCAL,
        _ => ON_OTHER_CLOCK,
    }
}

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
///
/// Resizing (`buffer_size_kb`) replaces every CPU's ring: writers reach the
/// rings through one pointer they load with interrupts masked, readers
/// while holding `readers`. A resize, holding `readers`, pauses recording
/// and waits until every CPU has unmasked interrupts once (so no write
/// still uses the old rings), moves the records into the new rings, swaps
/// the pointer and frees the old rings.
pub struct TraceBuffer {
    /// The first of `cpus` rings, a leaked boxed slice.
    rings: AtomicPtr<RingBuffer>,
    /// How many rings: [`cpus`] when the buffer was made (it never changes
    /// after boot), kept here so a write reads it next to the pointer.
    cpus: usize,
    pages: AtomicUsize,
    /// `tracing_on`, and the clock: [`OFF`], [`ON_LOCAL`] or [`ON_OTHER_CLOCK`]
    /// (so the write tests the clock on a value it loads anyway), plus the
    /// pausing readers ([`PAUSE`]).
    on: AtomicU32,
    /// Its `trace_clock` ([`TraceClock::ALL`]'s index).
    clock: AtomicU8,
    /// Held by every reader and by a resize.
    readers: Mutex<()>,
    /// The snapshot's rings (`cpus` of them, leaked), or null before
    /// `snapshot` is allocated. Swapped with `rings` to take a snapshot.
    spare: AtomicPtr<RingBuffer>,
    /// Taken (never waited for, in tracing code) while the two pointers
    /// change: by a swap, and by whoever frees or replaces the spare; and
    /// by a reader or clearer of the live rings, so that they stay the live
    /// ones while it works (a callback's swap meanwhile is skipped).
    swapping: AtomicBool,
    /// `tracing_cpumask`: the CPUs whose rings record (a bit each; the
    /// rings of the others, live and spare, are masked).
    cpumask: AtomicU64,
    /// `options/overwrite`: whether full rings overwrite their oldest page.
    overwrite: AtomicBool,
    /// How many times each CPU's ring was emptied (`echo > trace`, a clock
    /// change, `echo > per_cpu/cpuN/trace`): a reader holding records it
    /// took from that ring before drops them.
    emptied: [AtomicU64; MAX_CPUS],
    /// The clock's time at the last [`reset`](TraceBuffer::reset) (0
    /// before one): the latency format's times count from it (Linux's
    /// `array_buffer.time_start`).
    time_start: AtomicU64,
    /// The CPU the function tracer last started on, which the latency
    /// format's banner names (Linux's `array_buffer.cpu`).
    start_cpu: AtomicUsize,
}

/// Held while [`TraceBuffer`]'s two ring pointers change.
struct SwapGuard<'a>(&'a AtomicBool);

impl<'a> SwapGuard<'a> {
    fn try_new(flag: &'a AtomicBool) -> Option<SwapGuard<'a>> {
        (!flag.swap(true, Ordering::Acquire)).then_some(SwapGuard(flag))
    }

    /// Outside tracing code: spins until the flag is free.
    fn new(flag: &'a AtomicBool) -> SwapGuard<'a> {
        loop {
            if let Some(guard) = Self::try_new(flag) {
                return guard;
            }
            core::hint::spin_loop();
        }
    }
}

impl Drop for SwapGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Every CPU's bit (what `tracing_cpumask` starts as).
pub fn all_cpus() -> u64 {
    u64::MAX >> (64 - cpus())
}

/// What every ring of a buffer is set to: its live rings, the snapshot's,
/// and the rings a resize makes.
#[derive(Clone, Copy)]
struct RingSettings {
    /// `tracing_cpumask`: the CPUs whose rings record.
    cpumask: u64,
    /// `options/overwrite`.
    overwrite: bool,
}

impl RingSettings {
    /// Sets CPU `cpu`'s ring `ring` so.
    fn apply(self, cpu: usize, ring: &RingBuffer) {
        ring.set_masked(self.cpumask & 1 << cpu == 0);
        ring.set_overwrite(self.overwrite);
    }
}

/// The rings of a new buffer, leaked, set as `settings` say; `None` if the
/// heap cannot hold them.
fn make_rings(pages: usize, settings: RingSettings) -> Option<*mut RingBuffer> {
    let mut rings = Vec::new();
    rings.try_reserve_exact(cpus()).ok()?;
    for cpu in 0..cpus() {
        let ring = RingBuffer::try_new(pages)?;
        settings.apply(cpu, &ring);
        rings.push(ring);
    }
    Some(Box::into_raw(rings.into_boxed_slice()) as *mut RingBuffer)
}

/// Whether the heap still has room to read a buffer of `pages` pages a CPU
/// (`cat trace`, `snapshot`: the copy and the list of its records, about
/// twice its size). Checked whenever rings are made, while a refusal still
/// changes nothing: a buffer the heap could hold but not read would make
/// every read fail.
fn room_to_read(pages: usize) -> bool {
    alloc::vec::Vec::<u8>::new().try_reserve_exact(2 * pages * PAGE_SIZE * cpus()).is_ok()
}

/// Makes rings as [`make_rings`] does, if room to read them is left after.
fn make_readable_rings(pages: usize, settings: RingSettings) -> Option<*mut RingBuffer> {
    let rings = make_rings(pages, settings)?;
    if !room_to_read(pages) {
        // SAFETY: just made, never published.
        unsafe { free_rings(rings) };
        return None;
    }
    Some(rings)
}

/// Moves each CPU's ring of `from` into its ring of `into` (a resize).
///
/// # Safety
/// Both came from [`make_rings`]; nothing writes `from` any more, nor
/// reads it, and the caller is the one writer of `into`.
unsafe fn move_rings(from: *mut RingBuffer, into: *mut RingBuffer) {
    for cpu in 0..cpus() {
        // SAFETY: `cpus()` rings each (the CPU count never changes after
        // boot); the rest is the caller's promise, passed on.
        unsafe { (*from.add(cpu)).move_into(&*into.add(cpu)) };
    }
}

/// Frees rings made by [`make_rings`].
///
/// # Safety
/// `rings` came from `make_rings` and nothing uses it any more.
unsafe fn free_rings(rings: *mut RingBuffer) {
    // SAFETY: the caller's guarantee: a leaked boxed slice of `cpus()`
    // rings (the CPU count never changes after boot).
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(rings, cpus())) });
}

/// Why a resize failed; the buffer is as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeError {
    /// Fewer than 2 pages, or more than [`MAX_PAGES_PER_CPU`].
    BadSize,
    /// The heap cannot hold the new rings and room to read them.
    NoMemory,
}

/// Why [`TraceBuffer::swap_snapshot`] took no snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapRefused {
    /// No snapshot buffer is allocated (`echo 0 > snapshot` freed it).
    NotAllocated,
    /// Another swap (or the snapshot's allocation, emptying or freeing) is
    /// under way.
    Busy,
}

/// A `tracing_cpumask` with a CPU this machine does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMaskError {
    /// The CPUs there are.
    pub cpus: usize,
}

/// The largest ring a resize makes: 64 MiB a CPU.
pub const MAX_PAGES_PER_CPU: usize = 16 * 1024;
/// The fewest pages a ring may have (as in Linux: its writer and its reader
/// each need one).
pub const MIN_PAGES_PER_CPU: usize = 2;

impl TraceBuffer {
    /// A buffer of `pages` pages for each CPU, recording; `None` if the
    /// heap cannot hold it.
    pub fn try_new(pages: usize) -> Option<TraceBuffer> {
        let rings = make_readable_rings(pages, RingSettings { cpumask: all_cpus(), overwrite: true })?;
        Some(TraceBuffer {
            rings: AtomicPtr::new(rings),
            cpus: cpus(),
            pages: AtomicUsize::new(pages.max(2)),
            on: AtomicU32::new(ON_LOCAL),
            clock: AtomicU8::new(0),
            readers: Mutex::new(()),
            spare: AtomicPtr::new(core::ptr::null_mut()),
            swapping: AtomicBool::new(false),
            cpumask: AtomicU64::new(all_cpus()),
            overwrite: AtomicBool::new(true),
            emptied: [const { AtomicU64::new(0) }; MAX_CPUS],
            time_start: AtomicU64::new(0),
            start_cpu: AtomicUsize::new(0),
        })
    }

    /// The rings, for a reader holding `readers` (the guard's lifetime
    /// bounds the slice).
    fn rings<'a>(&'a self, _readers: &'a MutexGuard<'_, ()>) -> &'a [RingBuffer] {
        // SAFETY: a resize frees rings only while holding `readers`, which
        // the caller holds for as long as the slice lives.
        unsafe { &*core::ptr::slice_from_raw_parts(self.rings.load(Ordering::Acquire), self.cpus) }
    }

    /// Replaces every CPU's ring with one of `pages` pages
    /// (`echo N > buffer_size_kb`), keeping the records, as Linux does: each
    /// CPU's unread records move into its new ring, the newest that fit when
    /// it is smaller (see [`RingBuffer::move_into`]), and so do the
    /// snapshot's. The tracer and `tracing_on` stay as they are; recording
    /// pauses while the records move.
    pub fn resize(&self, pages: usize) -> Result<(), ResizeError> {
        if !(MIN_PAGES_PER_CPU..=MAX_PAGES_PER_CPU).contains(&pages) {
            return Err(ResizeError::BadSize);
        }
        let _readers = self.readers.lock();
        let settings = self.settings();
        let new = make_readable_rings(pages, settings).ok_or(ResizeError::NoMemory)?;
        let new_spare = match self.spare.load(Ordering::Acquire).is_null() {
            true => core::ptr::null_mut(),
            false => match make_readable_rings(pages, settings) {
                Some(spare) => spare,
                None => {
                    // SAFETY: just made, never published.
                    unsafe { free_rings(new) };
                    return Err(ResizeError::NoMemory);
                }
            },
        };
        // Recording pauses, and no snapshot swaps the rings, while the
        // records move. A write loads the rings and writes with interrupts
        // masked: once every CPU has taken an interrupt, none that missed
        // the pause is still writing into the old rings.
        self.pause();
        let (old, old_spare) = {
            let _swap = SwapGuard::new(&self.swapping);
            arch::smp::sync_all();
            let (old, old_spare) = (self.rings.load(Ordering::Acquire), self.spare.load(Ordering::Acquire));
            // SAFETY: the old rings are written no more (above) and read
            // by no one else (`readers` is held); the new ones are not
            // published yet: this is their one writer.
            unsafe {
                move_rings(old, new);
                if !old_spare.is_null() {
                    move_rings(old_spare, new_spare);
                }
            }
            (self.rings.swap(new, Ordering::AcqRel), self.spare.swap(new_spare, Ordering::AcqRel))
        };
        self.pages.store(pages, Ordering::Relaxed);
        self.resume();
        // SAFETY: made by `make_rings`; no writer (above) and no reader
        // (`readers` is held) uses them any more.
        unsafe {
            free_rings(old);
            if !old_spare.is_null() {
                free_rings(old_spare);
            }
        }
        Ok(())
    }

    /// Allocates the snapshot's rings if they are not (`echo 1 >
    /// snapshot`, `FUNC:snapshot`), empty.
    pub fn alloc_snapshot(&self) -> Result<(), ResizeError> {
        let _readers = self.readers.lock();
        if self.spare.load(Ordering::Acquire).is_null() {
            let spare = make_readable_rings(self.pages_per_cpu(), self.settings()).ok_or(ResizeError::NoMemory)?;
            self.spare.store(spare, Ordering::Release);
        }
        Ok(())
    }

    /// Frees the snapshot's rings (`echo 0 > snapshot`).
    pub fn free_snapshot(&self) {
        let _readers = self.readers.lock();
        let spare = {
            let _swap = SwapGuard::new(&self.swapping);
            self.spare.swap(core::ptr::null_mut(), Ordering::AcqRel)
        };
        if !spare.is_null() {
            // Writers that loaded it (before a swap made it the spare) are
            // done once every CPU took an interrupt.
            arch::smp::sync_all();
            // SAFETY: made by `make_rings`, unpublished; no writer (above)
            // and no reader (`readers` is held) uses it.
            unsafe { free_rings(spare) };
        }
    }

    /// `tracing_cpumask`: the CPUs whose records are recorded, a bit each.
    pub fn cpumask(&self) -> u64 {
        self.cpumask.load(Ordering::Relaxed)
    }

    /// `echo MASK > tracing_cpumask`: records only on the CPUs of `mask`
    /// (a bit each; none is allowed, as in Linux), from the next write on.
    /// What the rings hold stays. A bit for a CPU that does not exist is
    /// refused, and nothing changes.
    pub fn set_cpumask(&self, mask: u64) -> Result<(), CpuMaskError> {
        if mask & !all_cpus() != 0 {
            return Err(CpuMaskError { cpus: cpus() });
        }
        self.change_settings(|| self.cpumask.store(mask, Ordering::Relaxed));
        Ok(())
    }

    /// Whether full rings overwrite their oldest page (`options/overwrite`).
    pub fn overwrites(&self) -> bool {
        self.overwrite.load(Ordering::Relaxed)
    }

    /// `echo 0|1 > options/overwrite`: off, a full ring keeps what it has
    /// and drops new records (counted in `dropped records`) until a
    /// consuming reader (`trace_pipe`) or `echo > trace` makes room, as
    /// Linux's producer/consumer mode does.
    pub fn set_overwrite(&self, overwrite: bool) {
        self.change_settings(|| self.overwrite.store(overwrite, Ordering::Relaxed));
    }

    fn settings(&self) -> RingSettings {
        RingSettings { cpumask: self.cpumask(), overwrite: self.overwrites() }
    }

    /// Runs `change` (to the settings' atomics) and applies the settings to
    /// every ring, live and spare. Neither set of rings changes places
    /// meanwhile: resizes and snapshot allocations (which read the
    /// settings) take `readers`, and swaps wait for `swapping`.
    fn change_settings(&self, change: impl FnOnce()) {
        let readers = self.readers.lock();
        let _swap = SwapGuard::new(&self.swapping);
        change();
        let settings = self.settings();
        let spare = self.spare_rings(&readers).unwrap_or(&[]);
        for rings in [self.rings(&readers), spare] {
            for (cpu, ring) in rings.iter().enumerate() {
                settings.apply(cpu, ring);
            }
        }
    }

    /// Whether the snapshot's rings are allocated.
    pub fn snapshot_allocated(&self) -> bool {
        !self.spare.load(Ordering::Acquire).is_null()
    }

    /// Takes a snapshot: the recorded records become the snapshot's, and
    /// recording goes on in what was the snapshot. No allocation and no
    /// waiting: callable from a callback.
    pub fn swap_snapshot(&self) -> Result<(), SwapRefused> {
        let _irq = IrqGuard::new();
        let Some(_swap) = SwapGuard::try_new(&self.swapping) else { return Err(SwapRefused::Busy) };
        let spare = self.spare.load(Ordering::Acquire);
        if spare.is_null() {
            return Err(SwapRefused::NotAllocated);
        }
        self.swap_rings(spare);
        Ok(())
    }

    /// Makes `spare` (the snapshot's rings) the live ones, and the live
    /// ones the snapshot. The caller holds `swapping`, interrupts masked.
    fn swap_rings(&self, spare: *mut RingBuffer) {
        let recorded = self.rings.swap(spare, Ordering::AcqRel);
        self.spare.store(recorded, Ordering::Release);
    }

    /// The snapshot's rings, for a reader holding `readers` (`None`: not
    /// allocated).
    fn spare_rings<'a>(&'a self, _readers: &'a MutexGuard<'_, ()>) -> Option<&'a [RingBuffer]> {
        let spare = self.spare.load(Ordering::Acquire);
        // SAFETY: the spare is freed or replaced only under `readers`, which
        // the caller holds for as long as the slice lives.
        (!spare.is_null()).then(|| unsafe { &*core::ptr::slice_from_raw_parts(spare, self.cpus) })
    }

    /// Copies every CPU's ring of the snapshot (`cat snapshot`); `None`
    /// if none is allocated.
    pub fn snapshot_copies(&self) -> Option<Vec<Snapshot>> {
        let readers = self.readers.lock();
        let rings = self.spare_rings(&readers)?;
        Some(rings.iter().enumerate().map(|(cpu, ring)| Snapshot { cpu, stats: ring.stats(), pages: ring.snapshot() }).collect())
    }

    /// Empties the snapshot, keeping it allocated (`echo 2 > snapshot`).
    pub fn reset_snapshot(&self) {
        self.empty_snapshot(false);
    }

    /// `echo 1 > snapshot` once allocated: empties the snapshot and takes
    /// one at once. `false` if no snapshot buffer is allocated.
    pub fn take_snapshot(&self) -> bool {
        self.empty_snapshot(true)
    }

    /// Empties the snapshot's rings and, if `take`, swaps them in as the
    /// live ones, with no callback's swap in between (which would reverse
    /// it). `false` if no snapshot buffer is allocated.
    fn empty_snapshot(&self, take: bool) -> bool {
        let readers = self.readers.lock();
        let _swap = SwapGuard::new(&self.swapping);
        let Some(spare) = self.spare_rings(&readers) else { return false };
        for ring in spare {
            ring.reset();
        }
        if take {
            let _irq = IrqGuard::new();
            self.swap_rings(self.spare.load(Ordering::Acquire));
        }
        true
    }

    /// Whether records are being recorded (`tracing_on`).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed) & STATE != OFF
    }

    /// Switches recording (`echo 0|1 > tracing_on`).
    pub fn set_on(&self, on: bool) {
        // The clock is read inside the update: a clock switch meanwhile
        // changes the word, so the update is tried again with the new one.
        let _ = self.on.fetch_update(Ordering::Relaxed, Ordering::Acquire, |word| {
            let state = if on { on_state(self.clock()) } else { OFF };
            Some(word & !STATE | state)
        });
    }

    /// Its `trace_clock`.
    pub fn clock(&self) -> TraceClock {
        TraceClock::from_index(self.clock.load(Ordering::Relaxed))
    }

    /// A timestamp by its clock (what its records are stamped with).
    pub fn now(&self) -> u64 {
        clock::now(self.clock())
    }

    /// `echo NAME > trace_clock`: switches its clock and empties it and its
    /// snapshot, as Linux does, so that no ring mixes two clocks.
    pub fn set_clock(&self, new: TraceClock) {
        self.clock.store(new as u8, Ordering::Relaxed);
        let state = on_state(new);
        // Always a store (released, so a `set_on` that reads this word reads
        // the new clock too).
        let _ = self.on.fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
            Some(if word & STATE != OFF { word & !STATE | state } else { word })
        });
        // A write reads its clock with interrupts masked: after this round
        // no write that read the old one is still under way, and the reset
        // leaves no ring mixing two clocks.
        arch::smp::sync_all();
        self.reset();
        self.reset_snapshot();
    }

    /// Stops recording until [`resume`](Self::resume), whatever
    /// `tracing_on` says (a reader, so reading does not trace itself).
    pub fn pause(&self) {
        self.on.fetch_add(PAUSE, Ordering::Relaxed);
    }

    /// Ends one [`pause`](Self::pause).
    pub fn resume(&self) {
        self.on.fetch_sub(PAUSE, Ordering::Relaxed);
    }

    /// Records one record now, if recording is on. Returns whether it was.
    #[inline]
    pub fn write(&self, payload: &[u8]) -> bool {
        self.write_with(payload.len(), |_, out| out.put_slice(0, payload)).is_some()
    }

    /// Records one record of `len` payload bytes now, if recording is on:
    /// `fill` gets the record's timestamp and writes the payload in place.
    /// Returns the timestamp, so a caller can keep the time its record
    /// carries (one call shows one duration wherever it is read).
    // Always inlined: it is most of every tracer's callback, and a call
    // would cost it a frame (some 20 instructions, measured).
    #[inline(always)]
    pub fn write_with(&self, len: usize, fill: impl FnOnce(u64, &mut Payload)) -> Option<u64> {
        self.write_stamped::<false, false>(len, fill)
    }

    /// [`write_with`](Self::write_with) for a `fill` that may run traced
    /// code (`trace_printk!`'s arguments): a record that code writes on
    /// this CPU meanwhile is dropped (see
    /// [`RingBuffer::write_with_foreign`](crate::per_cpu::RingBuffer::write_with_foreign)).
    pub fn write_foreign(&self, len: usize, fill: impl FnOnce(u64, &mut Payload)) -> Option<u64> {
        self.write_stamped::<false, true>(len, fill)
    }

    /// [`write_with`](Self::write_with) for a record that times something
    /// (function_graph's call and return times): `fill` gets, and the call
    /// returns, a time in nanoseconds of the local clock, as Linux times
    /// graph calls whatever `trace_clock` says. It is the record's own
    /// timestamp when the buffer's clock is the local one (`local`,
    /// `perf`); under any other the local clock is read as well, so one
    /// call's two times never come from two clocks.
    #[inline(always)]
    pub fn write_timed(&self, len: usize, fill: impl FnOnce(u64, &mut Payload)) -> Option<u64> {
        self.write_stamped::<true, false>(len, fill)
    }

    /// The three above: `NS` asks for a nanosecond time rather than the
    /// timestamp, `FOREIGN` says the fill may run traced code.
    #[inline(always)]
    fn write_stamped<const NS: bool, const FOREIGN: bool>(
        &self,
        len: usize,
        fill: impl FnOnce(u64, &mut Payload),
    ) -> Option<u64> {
        // Interrupts masked first: the state (and so the clock) is read
        // where a clock switch's cross-CPU round waits for this write.
        let _irq = IrqGuard::new();
        // The clock is tested on the value loaded for `tracing_on` anyway
        // (a separate load of the clock cost 3 to 7 instructions a call).
        let state = self.on.load(Ordering::Relaxed);
        if state != ON_LOCAL && state != ON_OTHER_CLOCK {
            return None; // off, or paused
        }
        let rings = self.rings.load(Ordering::Acquire);
        let cpu = cpu::id();
        if cpu >= self.cpus {
            return None;
        }
        // SAFETY: `cpus()` rings live at `rings`; loaded with interrupts
        // masked, they stay until this CPU unmasks them (see `resize`).
        let ring = unsafe { &*rings.add(cpu) };
        let (time, given) = match state {
            ON_LOCAL => {
                let time = clock::now_ns();
                (time, time)
            }
            _ => {
                let clock = self.clock();
                let time = clock::now_other(clock);
                (time, if NS && !clock.is_local() { clock::now_ns() } else { time })
            }
        };
        let fill = |bytes: &mut [u8]| {
            // SAFETY: the ring's payloads start 4-byte aligned
            // (`RingBuffer::write_with`).
            fill(given, &mut unsafe { Payload::in_ring(bytes) })
        };
        match FOREIGN {
            // SAFETY: this CPU's ring, interrupts masked: its one writer.
            true => unsafe { ring.write_with_foreign(time, len, fill) },
            // SAFETY: as above.
            false => unsafe { ring.write_with(time, len, fill) },
        }
        .ok()?;
        Some(given)
    }

    /// How many times CPU `cpu`'s ring was emptied so far.
    pub fn emptied(&self, cpu: usize) -> u64 {
        self.emptied.get(cpu).map_or(0, |count| count.load(Ordering::Acquire))
    }

    /// Empties CPU `cpu`'s ring (`echo > per_cpu/cpuN/trace`).
    pub fn reset_cpu(&self, cpu: usize) {
        if let Some(count) = self.emptied.get(cpu) {
            count.fetch_add(1, Ordering::AcqRel);
        }
        let readers = self.readers.lock();
        let _swap = SwapGuard::new(&self.swapping); // the live rings stay live
        if let Some(ring) = self.rings(&readers).get(cpu) {
            ring.reset();
        }
    }

    /// The clock's time when the buffer was last emptied whole (0 before
    /// that): where the latency format's times start.
    pub fn time_start(&self) -> u64 {
        self.time_start.load(Ordering::Relaxed)
    }

    /// The CPU the function tracer last started on (0 before it did).
    pub fn start_cpu(&self) -> usize {
        self.start_cpu.load(Ordering::Relaxed)
    }

    /// Notes the CPU a function tracer starts on, for the latency banner.
    pub fn set_start_cpu(&self, cpu: usize) {
        self.start_cpu.store(cpu, Ordering::Relaxed);
    }

    /// Empties every CPU's ring (`echo > trace`).
    pub fn reset(&self) {
        self.emptied.iter().for_each(|count| _ = count.fetch_add(1, Ordering::AcqRel));
        // A reading, as Linux's `buffer_ftrace_now`: with the `counter`
        // clock, a count.
        self.time_start.store(self.now(), Ordering::Relaxed);
        let readers = self.readers.lock();
        let _swap = SwapGuard::new(&self.swapping); // the live rings stay live
        for ring in self.rings(&readers) {
            ring.reset();
        }
    }

    /// Copies CPU `cpu`'s unread records (its writer paused meanwhile).
    pub fn snapshot_of(&self, cpu: usize) -> Snapshot {
        let readers = self.readers.lock();
        match self.rings(&readers).get(cpu) {
            Some(ring) => Snapshot { cpu, stats: ring.stats(), pages: ring.snapshot() },
            None => Snapshot { cpu, stats: Stats::default(), pages: Vec::new() },
        }
    }

    /// CPU `cpu`'s unread bytes and oldest page time, its writer left
    /// running (`per_cpu/cpuN/stats`).
    pub fn usage_of(&self, cpu: usize) -> crate::per_cpu::Usage {
        let readers = self.readers.lock();
        self.rings(&readers).get(cpu).map(|ring| ring.usage()).unwrap_or_default()
    }

    /// Copies every CPU's ring, all from one set of rings (a snapshot
    /// swap meanwhile cannot give some CPUs from before it and some from
    /// after).
    pub fn snapshot_all(&self) -> Vec<Snapshot> {
        let readers = self.readers.lock();
        let rings = self.rings(&readers);
        rings.iter().enumerate().map(|(cpu, ring)| Snapshot { cpu, stats: ring.stats(), pages: ring.snapshot() }).collect()
    }

    /// CPU `cpu`'s counters.
    pub fn stats_of(&self, cpu: usize) -> Stats {
        let readers = self.readers.lock();
        self.rings(&readers).get(cpu).map(RingBuffer::stats).unwrap_or_default()
    }

    /// Every CPU's counters, added up.
    pub fn stats(&self) -> Stats {
        let mut total = Stats::default();
        let readers = self.readers.lock();
        for ring in self.rings(&readers) {
            let one = ring.stats();
            total.entries += one.entries;
            total.written += one.written;
            total.overrun += one.overrun;
            total.read += one.read;
            total.dropped += one.dropped;
        }
        total
    }

    /// Every CPU's counters since the buffer was made, added up (a reset
    /// does not clear them).
    pub fn lifetime(&self) -> Lifetime {
        let mut total = Lifetime::default();
        let readers = self.readers.lock();
        for ring in self.rings(&readers) {
            let one = ring.lifetime();
            total.written += one.written;
            total.overrun += one.overrun;
            total.read += one.read;
            total.erased += one.erased;
            total.entries += one.entries;
        }
        total
    }

    /// Takes CPU `cpu`'s oldest unread records out, as one page (a consuming
    /// read); how many records, or `None` if there are none.
    pub fn read_page(&self, cpu: usize, out: &mut [u8; PAGE_SIZE]) -> Option<usize> {
        let readers = self.readers.lock();
        let _swap = SwapGuard::new(&self.swapping); // the live rings stay live
        self.rings(&readers).get(cpu)?.read_page(out)
    }

    /// Whether CPU `cpu`'s ring has finished pages to read (more than the
    /// page its writer fills): a reader may read again at once.
    pub fn has_finished_pages(&self, cpu: usize) -> bool {
        let readers = self.readers.lock();
        let _swap = SwapGuard::new(&self.swapping); // the live rings stay live
        self.rings(&readers).get(cpu).is_some_and(RingBuffer::has_finished_pages)
    }

    /// How many CPUs it covers.
    pub fn cpus(&self) -> usize {
        cpus()
    }

    /// Each CPU's ring size in pages.
    pub fn pages_per_cpu(&self) -> usize {
        self.pages.load(Ordering::Relaxed)
    }
}

impl Drop for TraceBuffer {
    fn drop(&mut self) {
        let spare = *self.spare.get_mut();
        // SAFETY: made by `make_rings`; `&mut self`: nothing else uses them.
        unsafe {
            free_rings(*self.rings.get_mut());
            if !spare.is_null() {
                free_rings(spare);
            }
        }
    }
}

// SAFETY: the rings are shared as the type's documentation says (writers
// with interrupts masked, readers under `readers`); everything else is
// atomics and a mutex.
unsafe impl Sync for TraceBuffer {}
// SAFETY: as above; the rings pointer owns its slice.
unsafe impl Send for TraceBuffer {}

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

    /// The records: (timestamp in ns, payload).
    pub fn records(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.pages.iter().flat_map(|page| page_records(&page[..]).map(|record| (record.time, record.payload)))
    }
}
