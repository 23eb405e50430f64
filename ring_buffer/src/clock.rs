//! The trace clock: nanoseconds since boot, from the cycle counter.
//!
//! `ns = (cycles - boot) * mult >> 32`, with `mult` computed once from the
//! counter's frequency, so a timestamp costs a counter read, a subtraction
//! and a multiplication.
//!
//! Each trace array's buffer takes its records' timestamps from its own
//! `trace_clock` ([`TraceClock`], read with [`now`]), as in Linux: `local`
//! (the above, the default), `global` (the same, but never behind a
//! timestamp any CPU took before: one shared atomic per record), `counter`
//! (a record count, not a time, printed raw) or `uptime` (timer ticks,
//! Linux's jiffies, printed raw). Linux's `perf`, `mono`, `mono_raw`,
//! `boot` and `tai` are there too, under what they come to in this kernel,
//! which neither suspends nor corrects its clock's rate: `perf` reads as
//! `local` does, the others as `global` does; and so is the architecture's
//! own clock where Linux has one (the raw cycle counter, printed raw, under
//! the name `arch::timer::TRACE_CLOCK` gives it). Switching empties that
//! buffer, as Linux does, so no ring mixes two clocks.

use core::sync::atomic::{AtomicU64, Ordering};

static BOOT_CYCLES: AtomicU64 = AtomicU64::new(0);
static MULT: AtomicU64 = AtomicU64::new(0);
const SHIFT: u32 = 32;

/// Starts the clock at zero now.
pub fn init() {
    let hz = arch::timer::cycles_per_second().max(1);
    MULT.store(((1_000_000_000u128 << SHIFT) / u128::from(hz)) as u64, Ordering::Relaxed);
    BOOT_CYCLES.store(arch::timer::cycles(), Ordering::Relaxed);
}

/// Nanoseconds since [`init`].
#[inline(always)]
pub fn now_ns() -> u64 {
    cycles_to_ns(arch::timer::cycles().wrapping_sub(BOOT_CYCLES.load(Ordering::Relaxed)))
}

/// Converts a cycle count to nanoseconds.
#[inline(always)]
pub fn cycles_to_ns(cycles: u64) -> u64 {
    ((u128::from(cycles) * u128::from(MULT.load(Ordering::Relaxed))) >> SHIFT) as u64
}

/// A clock `trace_clock` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceClock {
    /// This CPU's cycle counter, in nanoseconds (fast; CPUs may disagree
    /// slightly).
    Local,
    /// Nanoseconds, monotonic across CPUs.
    Global,
    /// A count of records, shared by every CPU.
    Counter,
    /// Timer ticks since boot (Linux's jiffies).
    Uptime,
    /// Linux's `perf` clock: here, [`TraceClock::Local`]'s reading.
    Perf,
    /// Linux's `mono`: here, [`TraceClock::Global`]'s reading.
    Mono,
    /// Linux's `mono_raw` (no rate correction): here, as `mono`.
    MonoRaw,
    /// Linux's `boot` (time in suspend included): here, as `mono`.
    Boot,
    /// Linux's `tai` (international atomic time): here, as `mono`.
    Tai,
    /// The architecture's cycle counter, raw (Linux's `x86-tsc`); offered
    /// only where the architecture names it.
    Arch,
}

impl TraceClock {
    /// Every clock, in `trace_clock` order ([`TraceClock::Arch`] even
    /// where the architecture has none: see [`TraceClock::available`]).
    pub const ALL: [TraceClock; 10] = [
        TraceClock::Local,
        TraceClock::Global,
        TraceClock::Counter,
        TraceClock::Uptime,
        TraceClock::Perf,
        TraceClock::Mono,
        TraceClock::MonoRaw,
        TraceClock::Boot,
        TraceClock::Tai,
        TraceClock::Arch,
    ];

    /// The clocks `trace_clock` offers here, in its order.
    pub fn available() -> impl Iterator<Item = TraceClock> {
        Self::ALL.into_iter().filter(|clock| *clock != TraceClock::Arch || arch::timer::TRACE_CLOCK.is_some())
    }

    /// Its name in `trace_clock`.
    pub fn name(self) -> &'static str {
        match self {
            TraceClock::Local => "local",
            TraceClock::Global => "global",
            TraceClock::Counter => "counter",
            TraceClock::Uptime => "uptime",
            TraceClock::Perf => "perf",
            TraceClock::Mono => "mono",
            TraceClock::MonoRaw => "mono_raw",
            TraceClock::Boot => "boot",
            TraceClock::Tai => "tai",
            TraceClock::Arch => arch::timer::TRACE_CLOCK.unwrap_or("arch"),
        }
    }

    /// The clock called `name`, if offered here.
    pub fn from_name(name: &str) -> Option<TraceClock> {
        Self::available().find(|clock| clock.name() == name)
    }

    /// Whether its readings are nanoseconds (printed as seconds).
    pub fn in_ns(self) -> bool {
        !matches!(self, TraceClock::Counter | TraceClock::Uptime | TraceClock::Arch)
    }

    /// Whether it reads the local clock itself (`local`, `perf`).
    pub fn is_local(self) -> bool {
        matches!(self, TraceClock::Local | TraceClock::Perf)
    }

    /// The clock numbered `value` (as [`TraceClock::ALL`] orders them), to
    /// keep one in an atomic byte.
    pub(crate) fn from_index(value: u8) -> TraceClock {
        Self::ALL.get(usize::from(value)).copied().unwrap_or(TraceClock::Local)
    }
}

/// `global`: the latest timestamp taken on any CPU.
static GLOBAL_LAST: AtomicU64 = AtomicU64::new(0);
/// `counter`: the records counted so far.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A timestamp by `clock`.
#[inline(always)]
pub fn now(clock: TraceClock) -> u64 {
    match clock {
        TraceClock::Local => now_ns(),
        other => now_other(other),
    }
}

/// [`now`] for the clocks other than `local`: out of line, so the default
/// costs one test.
#[cold]
#[inline(never)]
pub fn now_other(clock: TraceClock) -> u64 {
    match clock {
        TraceClock::Local | TraceClock::Perf => now_ns(),
        TraceClock::Global | TraceClock::Mono | TraceClock::MonoRaw | TraceClock::Boot | TraceClock::Tai => {
            let now = now_ns();
            GLOBAL_LAST.fetch_max(now, Ordering::Relaxed).max(now)
        }
        TraceClock::Counter => COUNTER.fetch_add(1, Ordering::Relaxed) + 1,
        TraceClock::Uptime => arch::time::ticks(),
        TraceClock::Arch => arch::timer::cycles(),
    }
}
