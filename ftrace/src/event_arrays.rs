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
//! level in this kernel) and `options/stacktrace`. Each array has its own
//! `set_event_pid` (`crate::event_pid`).
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

use alloc::boxed::Box;
use alloc::string::String;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use crate::event_filter::{FieldValue, FilterError, FilterField, FilterSlot};
use crate::instance::{self, TraceArray};
use crate::payload::Payload;
use crate::task::GRAPH_SLOTS;

/// The instances an event records into, and their filters. Two words and
/// a pointer, so the fields of an event the traced path reads stay close:
/// the filters are made the first time one is set.
pub struct EventArrays {
    /// A bit per instance slot (never slot 0, the top level's).
    enabled: AtomicU32,
    /// The slots whose instance ever enabled the event (its buffers may
    /// hold records of it), until that instance goes.
    ever: AtomicU32,
    /// Null until an instance's filter is first set; then owned here.
    filters: AtomicPtr<Filters>,
}

/// A filter per instance slot.
struct Filters([FilterSlot; GRAPH_SLOTS]);

impl Drop for EventArrays {
    fn drop(&mut self) {
        let filters = *self.filters.get_mut();
        if !filters.is_null() {
            // SAFETY: made by `Box::into_raw` in `filters_made` and owned
            // here; whoever drops the event is its last user (an event's
            // handlers are gone by then).
            drop(unsafe { Box::from_raw(filters) });
        }
    }
}

impl Default for EventArrays {
    fn default() -> EventArrays {
        EventArrays::new()
    }
}

impl EventArrays {
    /// Recording into no instance, no filters.
    pub const fn new() -> EventArrays {
        EventArrays { enabled: AtomicU32::new(0), ever: AtomicU32::new(0), filters: AtomicPtr::new(core::ptr::null_mut()) }
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
            true => {
                self.ever.fetch_or(bit(array), Ordering::Relaxed);
                self.enabled.fetch_or(bit(array), Ordering::Relaxed)
            }
            false => self.enabled.fetch_and(!bit(array), Ordering::Relaxed),
        };
    }

    /// The slots of the instances that ever enabled the event, a bit each
    /// (for `instance::reset_buffers_of_slots` when the event goes).
    pub fn ever_enabled(&self) -> u32 {
        self.ever.load(Ordering::Relaxed)
    }

    /// The filters, if one was ever set.
    fn filters(&self) -> Option<&Filters> {
        // SAFETY: null, or made by `filters_made` and freed only with
        // `self`.
        unsafe { self.filters.load(Ordering::Acquire).as_ref() }
    }

    /// The filters, made now if need be.
    fn filters_made(&self) -> &Filters {
        if let Some(filters) = self.filters() {
            return filters;
        }
        let made = Box::into_raw(Box::new(Filters([const { FilterSlot::new() }; GRAPH_SLOTS])));
        match self.filters.compare_exchange(core::ptr::null_mut(), made, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: just published; freed only with `self`.
            Ok(_) => unsafe { &*made },
            Err(theirs) => {
                // SAFETY: `made` was never published: still ours alone.
                drop(unsafe { Box::from_raw(made) });
                // SAFETY: published by the writer that won, freed only with
                // `self`.
                unsafe { &*theirs }
            }
        }
    }

    /// `cat instances/NAME/events/.../filter`: the filter, or `none`.
    pub fn filter_text(&self, array: &TraceArray) -> String {
        match self.filters() {
            Some(filters) => filters.0[array.slot()].text(),
            None => String::from("none"),
        }
    }

    /// `echo EXPR > instances/NAME/events/.../filter` (`0` clears it); a
    /// bad filter changes nothing.
    pub fn set_filter(&self, array: &TraceArray, text: &str, fields: &[FilterField]) -> Result<(), FilterError> {
        self.filters_made().0[array.slot()].set(text, fields)
    }

    /// Forgets instance `array` (its `rmdir`): no bit, no filter.
    pub fn forget(&self, array: &TraceArray) {
        self.set(array, false);
        self.ever.fetch_and(!bit(array), Ordering::Relaxed);
        if let Some(filters) = self.filters() {
            // Clearing cannot fail: "0" parses to no filter.
            let _ = filters.0[array.slot()].set("0", &[]);
        }
    }

    /// Records an event of `len` bytes, which `fill` writes, into every
    /// instance that records it, whose `set_event_pid` keeps it
    /// (`pid_kept(slot)`, see `crate::event_pid::records_in`) and whose
    /// filter passes `fields`. Out of line: only hits of events enabled in
    /// an instance come here.
    #[inline(never)]
    pub fn record<'a>(
        &self,
        pid_kept: &dyn Fn(usize) -> bool,
        fields: &dyn Fn(usize) -> FieldValue<'a>,
        len: usize,
        fill: &dyn Fn(&mut Payload),
    ) {
        arch::irq::without_interrupts(|| {
            let mut bits = self.enabled.load(Ordering::Relaxed);
            let filters = self.filters();
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(array) = instance::in_slot(slot) else { continue };
                if pid_kept(slot) && filters.is_none_or(|filters| filters.0[slot].passes(fields)) {
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
