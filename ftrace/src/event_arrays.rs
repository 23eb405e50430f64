//! Events in instances: which trace arrays other than the top level an
//! event records into, and each one's filter (Linux keeps one
//! `trace_event_file` per event per array; `instances/NAME/events/...`).
//!
//! # Design
//!
//! The top level's switch, filter and triggers stay where each event keeps
//! them, on the path the benchmarks measure. An event also carries an
//! [`EventArrays`]: a bit per instance slot ([`crate::instance`] gives each
//! instance one) and a filter per slot. A hit whose event has any bit set
//! takes its slow path, fills the record once, and [`EventArrays::record`]
//! writes it into each of those arrays whose filter passes it.
//!
//! What stays the top level's: triggers and `hist` (they act on the top
//! level in this kernel), `set_event_pid` and `options/stacktrace`.
//!
//! # Lifetimes
//!
//! The traced side reads a bit, then the slot's array, with interrupts
//! masked. `rmdir` clears the instance's bit and filter in every event
//! (the hook `instance::remove` runs) and empties its slot before the array
//! is queued for its grace period, whose cross-CPU round waits for every
//! CPU that masked interrupts before: so a write that saw the bit has
//! finished before the array's buffer is freed, and a slot is taken again
//! only with no bit left for it.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::event_filter::{FieldValue, FilterError, FilterField, FilterSlot};
use crate::instance::{self, TraceArray};
use crate::payload::Payload;
use crate::task::GRAPH_SLOTS;

/// The instances an event records into, and their filters.
pub struct EventArrays {
    /// A bit per instance slot (never slot 0, the top level's).
    enabled: AtomicU32,
    filters: [FilterSlot; GRAPH_SLOTS],
}

impl Default for EventArrays {
    fn default() -> EventArrays {
        EventArrays::new()
    }
}

impl EventArrays {
    /// Recording into no instance, no filters.
    pub const fn new() -> EventArrays {
        EventArrays { enabled: AtomicU32::new(0), filters: [const { FilterSlot::new() }; GRAPH_SLOTS] }
    }

    /// Whether no instance records the event: the traced paths test this
    /// first.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) == 0
    }

    /// Whether instance `array` records the event (never for the top level).
    pub fn contains(&self, array: &TraceArray) -> bool {
        self.enabled.load(Ordering::Relaxed) & bit(array) != 0
    }

    /// Switches recording into instance `array` (the top level is not one:
    /// nothing changes for it).
    pub fn set(&self, array: &TraceArray, on: bool) {
        match on {
            true => self.enabled.fetch_or(bit(array), Ordering::Relaxed),
            false => self.enabled.fetch_and(!bit(array), Ordering::Relaxed),
        };
    }

    /// The filter of instance `array`'s copy of the event.
    pub fn filter(&self, array: &TraceArray) -> &FilterSlot {
        &self.filters[array.slot()]
    }

    /// `echo EXPR > instances/NAME/events/.../filter` (`0` clears it); a
    /// bad filter changes nothing.
    pub fn set_filter(&self, array: &TraceArray, text: &str, fields: &[FilterField]) -> Result<(), FilterError> {
        self.filter(array).set(text, fields)
    }

    /// Forgets instance `array` (its `rmdir`): no bit, no filter.
    pub fn forget(&self, array: &TraceArray) {
        self.set(array, false);
        // Clearing cannot fail: "0" parses to no filter.
        let _ = self.filter(array).set("0", &[]);
    }

    /// Records an event of `len` bytes, which `fill` writes, into every
    /// instance that records it and whose filter passes `fields`. Out of
    /// line: only hits of events enabled in an instance come here.
    #[inline(never)]
    pub fn record<'a>(&self, fields: &dyn Fn(usize) -> FieldValue<'a>, len: usize, fill: &dyn Fn(&mut Payload)) {
        arch::irq::without_interrupts(|| {
            let mut bits = self.enabled.load(Ordering::Relaxed);
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(array) = instance::in_slot(slot) else { continue };
                if self.filters[slot].passes(fields) {
                    array.buffer().write_with(len, |_, out| fill(out));
                }
            }
        });
    }
}

fn bit(array: &TraceArray) -> u32 {
    match array.slot() {
        0 => 0,
        slot => 1 << slot,
    }
}
