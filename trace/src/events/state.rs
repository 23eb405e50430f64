//! One event's switches, filter and triggers, in every trace array: what
//! each event tracefs lists keeps, whatever records it (the scheduler's
//! static events, synthetic events). The top level's copy is kept here,
//! on the path its hits read first; an instance's by the event's
//! [`EventArrays`].
//!
//! Each operation that takes an `array` acts on that trace array's copy
//! of the event.

use alloc::string::String;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arch::sync::SpinLock;

use crate::array::options::TraceOption;
use crate::array::trace_array::TraceArray;
use crate::events::arrays::EventArrays;
use crate::events::filter::{FieldValue, FilterError, FilterField, FilterSlot};
use crate::events::trigger::{Applied, EventSwitch, Phase, Request, StackStart, TriggerError, Triggers};

/// Serialises the soft-mode writers of every event: a trigger naming one
/// added or removed, an instance's `enable` written.
static SOFT_WRITERS: SpinLock<()> = SpinLock::new(());

/// One event's switches, filter and triggers.
pub struct EventState {
    /// The top level's `enable`.
    pub(crate) on: AtomicBool,
    pub(crate) filter: FilterSlot,
    pub(crate) triggers: Triggers,
    /// The soft switch `enable_event`/`disable_event` triggers flip, and
    /// how many such triggers name the event.
    pub(crate) soft_on: AtomicBool,
    pub(crate) soft_refs: AtomicUsize,
    /// Its copies in instances.
    pub(crate) arrays: EventArrays,
    /// The event is going (a synthetic event removed): no trigger may
    /// name it any more.
    retired: AtomicBool,
}

impl Default for EventState {
    fn default() -> Self {
        Self::new()
    }
}

impl EventState {
    pub const fn new() -> EventState {
        EventState {
            on: AtomicBool::new(false),
            filter: FilterSlot::new(),
            triggers: Triggers::new(),
            soft_on: AtomicBool::new(false),
            soft_refs: AtomicUsize::new(0),
            arrays: EventArrays::new(),
            retired: AtomicBool::new(false),
        }
    }

    /// Its copies in instances, with their filters and triggers.
    pub fn arrays(&self) -> &EventArrays {
        &self.arrays
    }

    /// The top level's triggers.
    pub fn triggers(&self) -> &Triggers {
        &self.triggers
    }

    /// `echo EXPR > events/GRP/NAME/filter` (`0` clears it), over the
    /// event's `fields`.
    pub fn set_filter(&self, array: &TraceArray, text: &str, fields: &[FilterField]) -> Result<(), FilterError> {
        match array.is_top() {
            true => self.filter.set(text, fields),
            false => self.arrays.set_filter(array, text, fields),
        }
    }

    /// `cat events/GRP/NAME/filter`.
    pub fn filter_text(&self, array: &TraceArray) -> String {
        match array.is_top() {
            true => self.filter.text(),
            false => self.arrays.filter_text(array),
        }
    }

    /// A parsed line written to `events/GRP/NAME/trigger`.
    pub fn apply_trigger(&self, array: &TraceArray, request: Request) -> Result<Applied, TriggerError> {
        match array.is_top() {
            true => self.triggers.apply(array, request),
            false => self.arrays.apply_trigger(array, request),
        }
    }

    /// What `cat events/GRP/NAME/enable` shows: whether it records, and
    /// whether triggers keep it armed (its own, or another event's naming
    /// it: the `*`).
    pub fn enable_state(&self, array: &TraceArray) -> (bool, bool) {
        if !array.is_top() {
            return self.arrays.enable_state(array);
        }
        (self.records(), self.triggers.is_set() || self.soft_refs.load(Ordering::Relaxed) > 0)
    }

    /// Whether the top level's copy records: as `enable` says, or in soft
    /// mode (another event's trigger names it) as that trigger's switch
    /// says.
    pub fn records(&self) -> bool {
        match self.soft_refs.load(Ordering::Acquire) > 0 {
            true => self.soft_on.load(Ordering::Relaxed),
            false => self.on.load(Ordering::Relaxed),
        }
    }

    /// `cat events/GRP/NAME/trigger`.
    pub fn trigger_text(&self, array: &TraceArray) -> String {
        match array.is_top() {
            true => self.triggers.text(),
            false => self.arrays.trigger_text(array),
        }
    }

    /// `cat events/GRP/NAME/hist`: its `hist` triggers' tables, if any.
    pub fn hist_text(
        &self,
        array: &TraceArray,
        names: crate::events::hist::Namer,
        comms: crate::events::hist::Comms,
    ) -> Option<String> {
        match array.is_top() {
            true => self.triggers.hist_text(names, comms),
            false => self.arrays.hist_text(array, names, comms),
        }
    }

    /// Whether `enable` is 1.
    pub fn is_enabled(&self, array: &TraceArray) -> bool {
        match array.is_top() {
            true => self.on.load(Ordering::Relaxed),
            false => self.arrays.contains(array),
        }
    }

    /// Switches the top level's copy (in soft mode, the soft switch too,
    /// as in Linux), or an instance's (under the soft-mode writers' lock,
    /// as [`EventArrays::set`] asks).
    pub fn set_enabled(&self, array: &TraceArray, on: bool) {
        // Serialised with the soft-mode writers, which read and write the
        // same switches.
        let _writers = SOFT_WRITERS.lock();
        if !array.is_top() {
            return self.arrays.set(array, on);
        }
        self.on.store(on, Ordering::Relaxed);
        self.soft_on.store(on, Ordering::Relaxed);
    }

    /// For a new `enable_event`/`disable_event` trigger in `array` naming
    /// the event (`owner`, which `state` leads back to this state, and
    /// which the switch keeps): the switch of `array`'s copy, in soft mode
    /// while such a trigger exists; `None` once the event is
    /// [retired](Self::retire).
    pub fn acquire_soft<O: Send + Sync + 'static>(
        &self,
        array: &TraceArray,
        owner: O,
        state: fn(&O) -> &EventState,
    ) -> Option<alloc::sync::Arc<dyn EventSwitch>> {
        let _writers = SOFT_WRITERS.lock();
        if self.retired.load(Ordering::Relaxed) {
            return None;
        }
        if !array.is_top() {
            return Some(self.arrays.acquire_soft(array, (owner, state), arrays_of::<O>));
        }
        if self.soft_refs.load(Ordering::Relaxed) == 0 {
            // Recording goes on as it was until a trigger switches it.
            self.soft_on.store(self.on.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        // After the switch: a hit that sees soft mode sees its start.
        self.soft_refs.fetch_add(1, Ordering::Release);
        Some(alloc::sync::Arc::new(TopSwitch { owner, state }))
    }

    /// Marks the event going, if no trigger names it and it is not armed
    /// in any trace array (`armed()` asks the rest, under the same lock);
    /// from then on no trigger can name it. Answers whether it was marked.
    pub fn retire(&self, armed: impl FnOnce() -> bool) -> bool {
        let _writers = SOFT_WRITERS.lock();
        if self.has_soft_refs() || !self.arrays.is_empty() || armed() {
            return false;
        }
        self.retired.store(true, Ordering::Relaxed);
        true
    }

    /// Takes back a [`retire`](Self::retire) (a removal of several events
    /// that another refused).
    pub fn unretire(&self) {
        let _writers = SOFT_WRITERS.lock();
        self.retired.store(false, Ordering::Relaxed);
    }

    /// A trigger naming the event in `array` went: the last one takes that
    /// copy out of soft mode, leaving it as the triggers did (switched on:
    /// enabled), as in Linux.
    pub fn release_soft(&self, array: &TraceArray) {
        let _writers = SOFT_WRITERS.lock();
        if !array.is_top() {
            return self.arrays.release_soft(array);
        }
        match self.soft_refs.load(Ordering::Relaxed) {
            0 => return,
            1 => self.on.store(self.soft_on.load(Ordering::Relaxed), Ordering::Relaxed),
            _ => {}
        }
        self.soft_refs.fetch_sub(1, Ordering::Release);
    }

    /// Whether a trigger names the event in the top level (soft mode).
    pub fn has_soft_refs(&self) -> bool {
        self.soft_refs.load(Ordering::Relaxed) > 0
    }

    /// Whether any trace array's copy records or has triggers: a hit must
    /// look further.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.records() || self.triggers.is_set() || !self.arrays.is_empty()
    }

    /// One hit of the event: into each instance that records it or has
    /// triggers on it, then the top level's triggers, filter and record
    /// (`len` bytes that `fill` writes). `pid_kept(slot)`: `set_event_pid`
    /// of the array in `slot` (the top level's is 0) keeps the hit.
    /// Inlined: a `stacktrace` trigger's chain starts at the caller.
    #[inline(always)]
    pub fn hit<'a>(
        &self,
        pid_kept: &dyn Fn(usize) -> bool,
        fields: &dyn Fn(usize) -> FieldValue<'a>,
        len: usize,
        fill: &dyn Fn(&mut ring_buffer::payload::Payload),
    ) {
        let stack = StackStart { addresses: [0; 2], fp: arch::cpu::frame_pointer() };
        if !self.arrays.is_empty() {
            self.arrays.hit(pid_kept, fields, stack, len, fill);
        }
        let kept = pid_kept(0);
        let records = self.records() && kept && self.filter.passes(fields);
        let triggered = self.triggers.is_set();
        record_with_triggers(&self.triggers, triggered, kept, fields, stack, || {
            records && crate::array::instances::top().buffer().write_with(len, |_, out| fill(out)).is_some()
        });
    }
}

/// Runs `record` (which answers whether it recorded the event) between
/// the triggers that act before and after an event's record, and records
/// the stack after it if `options/stacktrace` is on.
///
/// `pid_kept`: `set_event_pid` keeps this hit. The triggers that act after
/// the record (conditional and post triggers) fire only then, as Linux
/// calls them only once the event's buffer space is reserved, which the
/// pid filter refuses first; the others fire on every hit.
#[inline(always)]
fn record_with_triggers<'a>(
    triggers: &Triggers,
    triggered: bool,
    pid_kept: bool,
    fields: &dyn Fn(usize) -> FieldValue<'a>,
    stack: StackStart,
    record: impl FnOnce() -> bool,
) {
    let top = crate::array::instances::top();
    if triggered {
        triggers.fire(top, Phase::BeforeRecord, fields, stack);
    }
    if record() && top.option(TraceOption::StackTrace) {
        stack.record(top);
    }
    if triggered && pid_kept {
        triggers.fire(top, Phase::AfterRecord, fields, stack);
    }
}

/// The copies in instances of the event an (owner, path to its state)
/// pair leads to.
fn arrays_of<O>(owner: &(O, fn(&O) -> &EventState)) -> &EventArrays {
    &(owner.1)(&owner.0).arrays
}

/// The top level's soft switch of an event, for a trigger naming it:
/// `state` leads from `owner` (kept alive by the switch) to the event's
/// state.
struct TopSwitch<O> {
    owner: O,
    state: fn(&O) -> &EventState,
}

impl<O: Send + Sync> EventSwitch for TopSwitch<O> {
    fn soft_on(&self) -> bool {
        (self.state)(&self.owner).soft_on.load(Ordering::Relaxed)
    }

    fn set_soft(&self, on: bool) {
        (self.state)(&self.owner).soft_on.store(on, Ordering::Relaxed);
    }
}
