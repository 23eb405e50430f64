//! Events in instances: which trace arrays other than the top level an
//! event records into, and each one's filter and triggers (Linux keeps one
//! `trace_event_file` per event per array; `instances/NAME/events/...`).
//!
//! # Design
//!
//! The top level's switch, filter and triggers stay where each event keeps
//! them, on the path the benchmarks measure. An event also carries an
//! [`EventArrays`]: a bit per instance slot ([`crate::array::trace_array`] gives each
//! instance one) for the instances that record it, another for those with
//! triggers on it, and (made on first use) a filter and a trigger list per
//! slot. A hit whose event has any bit set takes its slow path, fills the
//! record once, and [`EventArrays::hit`] fires each of those arrays'
//! triggers and writes the record into each that records it, as the top
//! level's path does for the top level.
//!
//! An `enable_event`/`disable_event` trigger in an instance switches the
//! instance's copy of the event it names (its *soft mode*, as the top
//! level's triggers switch the top level's copy). Each array has its own
//! `set_event_pid` (`crate::events::pid`) and `options/stacktrace`, which
//! follows each record there with its chain.
//!
//! # Lifetimes
//!
//! The traced side reads a bit, then the slot's array, its filter and
//! triggers, with interrupts masked. `rmdir` clears the instance's bits,
//! filter and triggers in every event (the hook `trace_array::remove` runs)
//! and empties its slot before the array is queued for its grace period,
//! whose cross-CPU round waits for every CPU that masked interrupts
//! before: so a hit that saw a bit has finished before the array's buffer
//! (or an old filter or trigger list) is freed, and a slot is taken again
//! only with no bit left for it.

use alloc::boxed::Box;
use alloc::string::String;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use crate::array::options::TraceOption;
use crate::array::trace_array::TraceArray;
use crate::events::filter::{FieldValue, FilterError, FilterField, FilterSlot};
use crate::events::trigger::{
    Applied, EventName, EventSwitch, Phase, Request, StackStart, TriggerCommand, TriggerError, Triggers,
};
use ftrace::task::GRAPH_SLOTS;
use ring_buffer::payload::Payload;

/// The instances an event records into or has triggers in, with their
/// filters and triggers. Five words and a pointer, so the fields of an
/// event the traced path reads stay close: the per-instance state is made
/// the first time an instance sets a filter, a trigger or soft mode.
pub struct EventArrays {
    /// A bit per instance slot (never slot 0, the top level's): records
    /// (its `enable`).
    enabled: AtomicU32,
    /// A bit per instance slot: has triggers on the event.
    triggered: AtomicU32,
    /// A bit per instance slot: in soft mode (an `enable_event` or
    /// `disable_event` trigger there names the event): armed, and
    /// recording as `soft_on` says rather than `enabled`.
    soft: AtomicU32,
    /// A bit per instance slot: the soft switch those triggers flip.
    soft_on: AtomicU32,
    /// The slots whose instance ever enabled the event (its buffers may
    /// hold records of it), until that instance goes.
    ever: AtomicU32,
    /// Null until an instance's filter, trigger or soft mode is first set;
    /// then owned here.
    state: AtomicPtr<PerSlot>,
}

/// A filter, a trigger list and a count of the triggers that put the
/// event in soft mode, per instance slot.
struct PerSlot {
    filters: [FilterSlot; GRAPH_SLOTS],
    triggers: [Triggers; GRAPH_SLOTS],
    /// Changed by the callers' writers only (they serialise them).
    soft_refs: [AtomicU32; GRAPH_SLOTS],
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
            soft: AtomicU32::new(0),
            soft_on: AtomicU32::new(0),
            ever: AtomicU32::new(0),
            state: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Whether no instance records the event or has triggers on it: the
    /// traced paths test this first.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) | self.triggered.load(Ordering::Relaxed) | self.soft.load(Ordering::Relaxed) == 0
    }

    /// Whether an instance records the event.
    pub fn any_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) != 0
    }

    /// Whether an instance has triggers on the event.
    pub fn any_triggers(&self) -> bool {
        self.triggered.load(Ordering::Relaxed) != 0
    }

    /// Whether an instance's trigger puts the event in soft mode.
    pub fn any_soft(&self) -> bool {
        self.soft.load(Ordering::Relaxed) != 0
    }

    /// What `cat instances/NAME/events/.../enable` shows: whether the
    /// instance's copy records (in soft mode, as its switch says), and
    /// whether triggers keep it armed (its own, or an `enable_event`
    /// naming it: the `*`).
    pub fn enable_state(&self, array: &TraceArray) -> (bool, bool) {
        let bit = bit(array);
        let records = records_in(
            self.enabled.load(Ordering::Relaxed),
            self.soft.load(Ordering::Relaxed),
            self.soft_on.load(Ordering::Relaxed),
            bit,
        );
        (records, (self.triggered.load(Ordering::Relaxed) | self.soft.load(Ordering::Relaxed)) & bit != 0)
    }

    /// For a new `enable_event`/`disable_event` trigger in instance
    /// `array` naming this event: puts the instance's copy in soft mode
    /// (recording on as it was until a trigger switches it) and answers
    /// the switch. `owner` keeps the event alive for the switch, and
    /// `arrays` finds this in it. The caller serialises the soft-mode
    /// writers of the event, and gives the switch back with
    /// [`release_soft`](Self::release_soft).
    pub fn acquire_soft<O: Send + Sync + 'static>(
        &self,
        array: &TraceArray,
        owner: O,
        arrays: fn(&O) -> &EventArrays,
    ) -> alloc::sync::Arc<dyn EventSwitch> {
        let refs = &self.state_made().soft_refs[array.slot()];
        if refs.fetch_add(1, Ordering::Relaxed) == 0 {
            set_bit(&self.soft_on, array, self.contains(array));
            set_bit(&self.ever, array, true);
            // After the switch: a hit that sees soft mode sees its start.
            self.soft.fetch_or(bit(array), Ordering::Release);
        }
        alloc::sync::Arc::new(SlotSwitch { owner, arrays, bit: bit(array) })
    }

    /// A trigger naming the event in instance `array` went: the last one
    /// takes the copy out of soft mode, leaving it as the triggers did
    /// (switched on: enabled), as in Linux.
    pub fn release_soft(&self, array: &TraceArray) {
        let refs = &self.state_made().soft_refs[array.slot()];
        if refs.load(Ordering::Relaxed) == 0 {
            return;
        }
        if refs.fetch_sub(1, Ordering::Relaxed) == 1 {
            set_bit(&self.enabled, array, self.soft_on.load(Ordering::Relaxed) & bit(array) != 0);
            // After `enabled`: a hit that sees soft mode gone sees it.
            self.soft.fetch_and(!bit(array), Ordering::Release);
        }
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
    /// In soft mode the switch changes too, as the top level's `enable`
    /// does (Linux's write clears or sets SOFT_DISABLED). The caller
    /// serialises this with the soft-mode writers.
    pub fn set(&self, array: &TraceArray, on: bool) {
        set_bit(&self.enabled, array, on);
        set_bit(&self.soft_on, array, on);
        if on {
            set_bit(&self.ever, array, true);
        }
    }

    /// The slots of the instances that ever enabled the event, a bit each
    /// (for `trace_array::reset_buffers_of_slots` when the event goes).
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
            soft_refs: [const { AtomicU32::new(0) }; GRAPH_SLOTS],
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

    /// A parsed line written to `instances/NAME/events/.../trigger` (an
    /// `enable_event`'s switch already resolved, in the same instance).
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
    pub fn hist_text(
        &self,
        array: &TraceArray,
        names: crate::events::hist::Namer,
        comms: crate::events::hist::Comms,
    ) -> Option<String> {
        self.state()?.triggers[array.slot()].hist_text(names, comms)
    }

    /// Forgets instance `array` (its `rmdir`): no bit, filter or trigger.
    pub fn forget(&self, array: &TraceArray) {
        self.set(array, false);
        set_bit(&self.ever, array, false);
        set_bit(&self.triggered, array, false);
        set_bit(&self.soft, array, false);
        set_bit(&self.soft_on, array, false);
        if let Some(state) = self.state() {
            state.soft_refs[array.slot()].store(0, Ordering::Relaxed);
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
            let (soft, soft_on) = (self.soft.load(Ordering::Acquire), self.soft_on.load(Ordering::Relaxed));
            let enabled = self.enabled.load(Ordering::Relaxed);
            let triggered = self.triggered.load(Ordering::Relaxed);
            let state = self.state();
            let mut bits = enabled | triggered | soft;
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let Some(array) = crate::array::instances::in_slot(slot) else { continue };
                let triggers = state.filter(|_| triggered & 1 << slot != 0).map(|state| &state.triggers[slot]);
                if let Some(triggers) = triggers {
                    triggers.fire(array, Phase::BeforeRecord, fields, stack);
                }
                let kept = pid_kept(slot);
                let passes = || state.is_none_or(|state| state.filters[slot].passes(fields));
                if len > 0 && records_in(enabled, soft, soft_on, 1 << slot) && kept && passes() {
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

/// Whether the copy whose bit is `bit` records: as its soft switch says in
/// soft mode, as its `enable` says otherwise.
fn records_in(enabled: u32, soft: u32, soft_on: u32, bit: u32) -> bool {
    match soft & bit != 0 {
        true => soft_on & bit != 0,
        false => enabled & bit != 0,
    }
}

/// An instance's soft switch of an event, for an `enable_event` or
/// `disable_event` trigger there; `owner` keeps the event alive.
struct SlotSwitch<O> {
    owner: O,
    arrays: fn(&O) -> &EventArrays,
    bit: u32,
}

impl<O: Send + Sync> EventSwitch for SlotSwitch<O> {
    fn soft_on(&self) -> bool {
        (self.arrays)(&self.owner).soft_on.load(Ordering::Relaxed) & self.bit != 0
    }

    fn set_soft(&self, on: bool) {
        let soft_on = &(self.arrays)(&self.owner).soft_on;
        match on {
            true => soft_on.fetch_or(self.bit, Ordering::Relaxed),
            false => soft_on.fetch_and(!self.bit, Ordering::Relaxed),
        };
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
