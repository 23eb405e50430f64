//! The flight recorder: on each CPU, the last few `int3`s the text patcher
//! emulated as a site's new instruction (each moved a stack or an
//! instruction pointer on the tracer's behalf), printed when something
//! goes wrong (a return hook or kprobe stopping with a report, an
//! unhandled exception), so the report shows what happened just before.
//! A layer adds its own lines ([`set_reporter`]): kprobes, the probes
//! armed and their hits (recording each hit would cost a kprobe hit some
//! 2%, measured).
//!
//! Recording costs a few stores on a path that already took an exception;
//! the traced fast paths record nothing. (The hooked calls a task has in
//! flight, the other half of the story, are on its shadow stack, which the
//! return hook's report prints.) Each CPU writes only its own ring, with
//! interrupts masked (exception handlers), so no lock: a report reads the
//! rings racily, which is good enough for a post-mortem.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::MAX_CPUS;

/// What an entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The text patcher's `int3` handler ran a site's new instruction:
    /// the site, the stack pointer after, where it went.
    Int3Emulated = 1,
}

/// A layer's own part of the report (kprobes: the probes armed).
pub type Reporter = fn(out: &mut dyn core::fmt::Write);

static REPORTER: crate::cell::AtomicFn<Reporter> = crate::cell::AtomicFn::none();

/// Adds `reporter`'s lines to every report (one layer: the last set wins).
pub fn set_reporter(reporter: Reporter) {
    REPORTER.store(reporter);
}

const ENTRIES: usize = 16;
const WORDS: usize = 4;

struct Ring {
    next: AtomicUsize,
    entries: [[AtomicU64; WORDS]; ENTRIES],
}

static RINGS: [Ring; MAX_CPUS] =
    [const { Ring { next: AtomicUsize::new(0), entries: [const { [const { AtomicU64::new(0) }; WORDS] }; ENTRIES] } }; MAX_CPUS];

/// Records an event on this CPU's ring: what, at which address, the stack
/// pointer, and where control goes next. Call with interrupts masked.
/// Out of line: its callers are exception paths that should not carry it.
#[inline(never)]
pub fn record(kind: Kind, address: usize, sp: usize, next: usize) {
    let ring = &RINGS[crate::percpu::this().cpu];
    let at = ring.next.load(Ordering::Relaxed);
    for (word, value) in ring.entries[at % ENTRIES].iter().zip([kind as u64, address as u64, sp as u64, next as u64]) {
        word.store(value, Ordering::Relaxed);
    }
    ring.next.store(at.wrapping_add(1), Ordering::Relaxed);
}

/// Prints every CPU's ring, oldest first, addresses named by the kernel's
/// symbolizer (`crate::print`).
pub fn print() {
    use core::fmt::Write;
    let mut console = crate::print::lock();
    let _ = writeln!(console, "flight recorder (the last {ENTRIES} int3 emulations per CPU, oldest first):");
    for (cpu, ring) in RINGS.iter().enumerate() {
        let next = ring.next.load(Ordering::Relaxed);
        for at in next.saturating_sub(ENTRIES)..next {
            let [kind, address, sp, to] = ring.entries[at % ENTRIES].each_ref().map(|word| word.load(Ordering::Relaxed));
            let kind = match kind {
                1 => "int3 emulated",
                _ => continue,
            };
            let _ = write!(console, "  cpu{cpu} {kind:16} at ");
            let _ = crate::print::write_code_address(&mut console, address as usize);
            let _ = write!(console, " sp {sp:#x} -> ");
            let _ = crate::print::write_code_address(&mut console, to as usize);
            let _ = writeln!(console);
        }
    }
    if let Some(reporter) = REPORTER.load() {
        reporter(&mut console);
    }
}
