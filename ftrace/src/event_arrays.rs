//! Events in instances: which trace arrays other than the top level an
//! event records into, and each one's filter and triggers (Linux keeps one
//! `trace_event_file` per event per array; `instances/NAME/events/...`).
//!
//! # Design
//!
//! The top level's switch, filter and triggers stay where each event keeps
//! them, on the path the benchmarks measure. An event also carries an
//! [`EventArrays`]: a bit per instance slot ([`crate::instance`] gives each
//! instance one) for the instances that record it, another for those with
//! triggers on it, and (made on first use) a filter and a trigger list per
//! slot. A hit whose event has any bit set takes its slow path, fills the
//! record once, and [`EventArrays::hit`] fires each of those arrays'
//! triggers and writes the record into each that records it, as the top
//! level's path does for the top level.
//!
//! What stays the top level's: `enable_event`/`disable_event` triggers
//! (soft mode is a switch of the top level's copy of an event). Each array
//! has its own `set_event_pid` (`crate::event_pid`) and
//! `options/stacktrace`, which follows each record there with its chain.
//!
//! # Lifetimes
//!
//! The traced side reads a bit, then the slot's array, its filter and
//! triggers, with interrupts masked. `rmdir` clears the instance's bits,
//! filter and triggers in every event (the hook `instance::remove` runs)
//! and empties its slot before the array is queued for its grace period,
//! whose cross-CPU round waits for every CPU that masked interrupts
//! before: so a hit that saw a bit has finished before the array's buffer
//! (or an old filter or trigger list) is freed, and a slot is taken again
//! only with no bit left for it.

use alloc::boxed::Box;
use alloc::string::String;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use crate::event_filter::{FieldValue, FilterError, FilterField, FilterSlot};
use crate::event_trigger::{Applied, EventName, Phase, Request, StackStart, TriggerCommand, TriggerError, Triggers};
use crate::instance::{self, TraceArray, TraceOption};
use crate::payload::Payload;
use crate::task::GRAPH_SLOTS;

/// The instances an event records into or has triggers in, with their
/// filters and triggers. Three words and a pointer, so the fields of an
/// event the traced path reads stay close: the per-instance state is made
/// the first time an instance sets a filter or a trigger.
pub struct EventArrays {
    /// A bit per instance slot (never slot 0, the top level's): records.
    enabled: AtomicU32,
    /// A bit per instance slot: has triggers on the event.
    triggered: AtomicU32,
    /// The slots whose instance ever enabled the event (its buffers may
    /// hold records of it), until that instance goes.
    ever: AtomicU32,
    /// Null until an instance's filter or trigger is first set; then owned
    /// here.
    state: AtomicPtr<PerSlot>,
}

/// A filter and a trigger list per instance slot.
struct PerSlot {
    filters: [FilterSlot; GRAPH_SLOTS],
    triggers: [Triggers; GRAPH_SLOTS],
}

impl Drop for EventArrays {
    fn drop(&mut self) {
        let state = *self.state.get_mut();
        if !state.is_null() {
            // SAFETY: made by `Box::into_raw` in `state_made` and owned
            // here; whoever drops the event is its last user (an event's
            // handlers are gone by then).
            drop(unsafe { Box::from_raw(state) });
        }
    }
}

impl Default for EventArrays {
    fn default() -> EventArrays {
        EventArrays::new()
    }
}

impl EventArrays {
    /// In no instance.
    pub const fn new() -> EventArrays {
        EventArrays {
            enabled: AtomicU32::new(0),
            triggered: AtomicU32::new(0),
            ever: AtomicU32::new(0),
            state: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Whether no instance records the event or has triggers on it: the
    /// traced paths test this first.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) | self.triggered.load(Ordering::Relaxed) == 0
    }

    /// Whether an instance records the event.
    pub fn any_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) != 0
    }

    /// Whether an instance has triggers on the event.
    pub fn any_triggers(&self) -> bool {
        self.triggered.load(Ordering::Relaxed) != 0
    }

    /// Whether instance `array` records the event (never for the top level).
    pub fn contains(&self, array: &TraceArray) -> bool {
        self.enabled.load(Ordering::Relaxed) & bit(array) != 0
    }

    /// Whether instance `array` has triggers on the event.
    pub fn has_triggers(&self, array: &TraceArray) -> bool {
        self.triggered.load(Ordering::Relaxed) & bit(array) != 0
    }

    /// Switches recording into instance `array` (the top level is not one:
    /// nothing changes for it).
    pub fn set(&self, array: &TraceArray, on: bool) {
        set_bit(&self.enabled, array, on);
        if on {
            set_bit(&self.ever, array, true);
        }
    }

    /// The slots of the instances that ever enabled the event, a bit each
    /// (for `instance::reset_buffers_of_slots` when the event goes).
    pub fn ever_enabled(&self) -> u32 {
        self.ever.load(Ordering::Relaxed)
    }

    /// The per-instance state, if an instance ever set a filter or trigger.
    fn state(&self) -> Option<&PerSlot> {
        // SAFETY: null, or made by `state_made` and freed only with `self`.
        unsafe { self.state.load(Ordering::Acquire).as_ref() }
    }

    /// The per-instance state, made now if need be.
    fn state_made(&self) -> &PerSlot {
        if let Some(state) = self.state() {
            return state;
        }
        let made = Box::into_raw(Box::new(PerSlot {
            filters: [const { FilterSlot::new() }; GRAPH_SLOTS],
            triggers: [const { Triggers::new() }; GRAPH_SLOTS],
        }));
        match self.state.compare_exchange(core::ptr::null_mut(), made, Ordering::AcqRel, Ordering::Acquire) {
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
        match self.state() {
            Some(state) => state.filters[array.slot()].text(),
            None => String::from("none"),
        }
    }

    /// `echo EXPR > instances/NAME/events/.../filter` (`0` clears it); a
    /// bad filter changes nothing.
    pub fn set_filter(&self, array: &TraceArray, text: &str, fields: &[FilterField]) -> Result<(), FilterError> {
        self.state_made().filters[array.slot()].set(text, fields)
    }

    /// A parsed line written to `instances/NAME/events/.../trigger`. The
    /// caller refuses `enable_event`/`disable_event` first (they switch the
    /// top level's copy of an event).
    pub fn apply_trigger(&self, array: &TraceArray, request: Request) -> Result<Applied, TriggerError> {
        let triggers = &self.state_made().triggers[array.slot()];
        triggers.apply_noting(array, request, |left| set_bit(&self.triggered, array, left))
    }

    /// Takes back a trigger [`apply_trigger`](Self::apply_trigger) added
    /// (its event could not go on with it).
    pub fn remove_trigger(&self, array: &TraceArray, command: TriggerCommand, target: Option<&EventName>) {
        let triggers = &self.state_made().triggers[array.slot()];
        triggers.remove_noting(command, target, |left| set_bit(&self.triggered, array, left));
    }

    /// `cat instances/NAME/events/.../trigger`.
    pub fn trigger_text(&self, array: &TraceArray) -> String {
        match self.state() {
            Some(state) => state.triggers[array.slot()].text(),
            None => Triggers::new().text(),
        }
    }

    /// `cat instances/NAME/events/.../hist`: its `hist` triggers' tables,
    /// if any.
    pub fn hist_text(&self, array: &TraceArray, names: crate::hist::Namer, comms: crate::hist::Comms) -> Option<String> {
        self.state()?.triggers[array.slot()].hist_text(names, comms)
    }

    /// Forgets instance `array` (its `rmdir`): no bit, filter or trigger.
    pub fn forget(&self, array: &TraceArray) {
        self.set(array, false);
        set_bit(&self.ever, array, false);
        set_bit(&self.triggered, array, false);
        if let Some(state) = self.state() {
            // Clearing cannot fail: "0" parses to no filter.
            let _ = state.filters[array.slot()].set("0", &[]);
            state.triggers[array.slot()].clear();
        }
    }

    /// One hit of the event in the instances: in each that has triggers
    /// on it or records it, fires the triggers acting before the record,
    /// writes the record of `len` bytes that `fill` writes (if the instance
    /// records the event, its `set_event_pid` keeps the hit,
    /// `pid_kept(slot)`, and its filter passes `fields`), then fires the
    /// triggers acting after it (if `set_event_pid` keeps the hit), as the
    /// top level's path does (with a stack trace after each record when
    /// the instance's `options/stacktrace` is on). A record of no bytes (one that could not be
    /// encoded) is not written. Out of line: only hits of events in an
    /// instance come here.
    #[inline(never)]
    pub fn hit<'a>(
        &self,
        pid_kept: &dyn Fn(usize) -> bool,
        fields: &dyn Fn(usize) -> FieldValue<'a>,
        stack: StackStart,
        len: usize,
        fill: &dyn Fn(&mut Payload),
    ) {
        arch::irq::without_interrupts(|| {
            let enabled = self.enabled.load(Ordering::Relaxed);
            let triggered = self.triggered.load(Ordering::Relaxed);
            let state = self.state();
            let mut bits = enabled | triggered;
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(array) = instance::in_slot(slot) else { continue };
                let triggers = state.filter(|_| triggered & 1 << slot != 0).map(|state| &state.triggers[slot]);
                if let Some(triggers) = triggers {
                    triggers.fire(array, Phase::BeforeRecord, fields, stack);
                }
                let kept = pid_kept(slot);
                let passes = || state.is_none_or(|state| state.filters[slot].passes(fields));
                if len > 0 && enabled & 1 << slot != 0 && kept && passes() {
                    let written = array.buffer().write_with(len, |_, out| fill(out)).is_some();
                    if written && array.option(TraceOption::StackTrace) {
                        stack.record(array);
                    }
                }
                if let (Some(triggers), true) = (triggers, kept) {
                    triggers.fire(array, Phase::AfterRecord, fields, stack);
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

fn set_bit(bits: &AtomicU32, array: &TraceArray, on: bool) {
    match on {
        true => bits.fetch_or(bit(array), Ordering::Relaxed),
        false => bits.fetch_and(!bit(array), Ordering::Relaxed),
    };
}
