//! The scheduler's events (`sched_switch`, `sched_wakeup`,
//! `sched_wakeup_new`) and the task start and end hooks
//! ([`process_fork`], [`process_exit`]).
//!
//! The kernel's scheduler calls [`trace_switch`] at every switch,
//! [`trace_wakeup`] when it wakes a task that slept or blocked, and
//! [`trace_wakeup_new`] when it queues a new task, each before the task can
//! run (as Linux's `try_to_wake_up` and `wake_up_new_task` do, under the
//! run-queue lock); they record an event only while
//! that event is enabled (`events/sched/.../enable`, or `--record`, which
//! enables every one as `trace-cmd record -e sched` would), and fire its
//! triggers (`events/sched/.../trigger`, see [`crate::events::trigger`])
//! whether or not it is enabled. At every switch the two tasks' names stay
//! saved ([`crate::task_names`]).

use crate::task_names;
use alloc::string::String;

pub use crate::cmdlines::MAX_SAVED_CMDLINES;

use crate::array::trace_array::TraceArray;
use crate::events::arrays::EventArrays;
use crate::events::filter::{FieldKind, FieldValue, FilterError, FilterField};
use crate::events::record::event_common;
use crate::events::record::{
    FixedEvent, SchedSwitchEvent, SchedWakeupEvent, DEFAULT_PRIO, SCHED_SWITCH, SCHED_WAKEUP, SCHED_WAKEUP_NEW, STATE_REPORT_MAX,
};
use crate::events::state::EventState;
use crate::events::trigger::{Applied, EventSwitch, Request, TriggerError};
use ftrace::task::TaskTrace;

/// `prev_state` of a preempted task (`R+`).
pub const STATE_PREEMPTED: u64 = STATE_REPORT_MAX;
/// `prev_state` of a task that gives the CPU up still runnable, as an idle
/// task does when work comes (`R`: Linux's `schedule_idle` is no
/// preemption).
pub const STATE_RUNNING: u64 = 0;
/// `prev_state` of a task going to sleep (`S`).
pub const STATE_SLEEPING: u64 = 0x1;
/// `prev_state` of a task blocking (`D`).
pub const STATE_BLOCKED: u64 = 0x2;
/// `prev_state` of an exiting task (`X`).
pub const STATE_DEAD: u64 = 0x10;

/// A scheduler event tracefs can switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedEvent {
    Switch,
    Wakeup,
    /// A new task's first wake-up.
    WakeupNew,
}

/// The scheduler events' group (`events/sched/...`).
pub const GROUP: &str = "sched";

impl SchedEvent {
    /// Every one, in `available_events` order.
    pub const ALL: [SchedEvent; 3] = [SchedEvent::Switch, SchedEvent::Wakeup, SchedEvent::WakeupNew];

    /// The static event `group/event` names, if any (a dynamic event may
    /// live in the same group under another name).
    pub fn find(group: &str, event: &str) -> Option<SchedEvent> {
        (group == GROUP).then(|| Self::from_name(event)).flatten()
    }

    /// The event's name.
    pub fn name(self) -> &'static str {
        match self {
            SchedEvent::Switch => "sched_switch",
            SchedEvent::Wakeup => "sched_wakeup",
            SchedEvent::WakeupNew => "sched_wakeup_new",
        }
    }

    /// The event's type id (`events/sched/NAME/id`, the `common_type` of
    /// its records).
    pub fn id(self) -> u16 {
        match self {
            SchedEvent::Switch => SCHED_SWITCH,
            SchedEvent::Wakeup => SCHED_WAKEUP,
            SchedEvent::WakeupNew => SCHED_WAKEUP_NEW,
        }
    }

    /// The event called `name`.
    pub fn from_name(name: &str) -> Option<SchedEvent> {
        Self::ALL.into_iter().find(|event| event.name() == name)
    }

    /// Its switches, filter and triggers.
    fn state(self) -> &'static EventState {
        &STATES[self as usize]
    }

    /// The fields its filter can name, in the order the recording side
    /// numbers them (the `format` file's fields).
    pub fn filter_fields(self) -> alloc::vec::Vec<FilterField> {
        use FieldKind::{Signed, String, Unsigned};
        let fields: &[(&str, FieldKind)] = match self {
            SchedEvent::Switch => &[
                ("common_pid", Signed),
                ("prev_comm", String),
                ("prev_pid", Signed),
                ("prev_prio", Signed),
                ("prev_state", Unsigned),
                ("next_comm", String),
                ("next_pid", Signed),
                ("next_prio", Signed),
            ],
            SchedEvent::Wakeup | SchedEvent::WakeupNew => {
                &[("common_pid", Signed), ("comm", String), ("pid", Signed), ("prio", Signed), ("target_cpu", Signed)]
            }
        };
        fields.iter().map(|(name, kind)| FilterField::new(*name, *kind)).collect()
    }

    // Each operation that takes an `array` acts on that trace array's copy
    // of the event (`crate::events::state`).

    /// `echo EXPR > events/sched/NAME/filter` (`0` clears it).
    pub fn set_filter(self, array: &TraceArray, text: &str) -> Result<(), FilterError> {
        self.state().set_filter(array, text, &self.filter_fields())
    }

    /// `cat events/sched/NAME/filter`.
    pub fn filter_text(self, array: &TraceArray) -> alloc::string::String {
        self.state().filter_text(array)
    }

    /// The instances it records into (`instances/NAME/events/sched/...`),
    /// with their filters.
    pub fn arrays(self) -> &'static EventArrays {
        self.state().arrays()
    }

    /// A parsed line written to `events/sched/NAME/trigger`.
    pub fn apply_trigger(self, array: &TraceArray, request: Request) -> Result<Applied, TriggerError> {
        self.state().apply_trigger(array, request)
    }

    /// For a new `enable_event`/`disable_event` trigger in `array` naming
    /// it: the switch of `array`'s copy (in soft mode while one exists).
    /// (Always `Some`: the scheduler's events are never retired.)
    pub fn acquire_soft(self, array: &TraceArray) -> Option<alloc::sync::Arc<dyn EventSwitch>> {
        self.state().acquire_soft(array, self, |event: &SchedEvent| event.state())
    }

    /// A trigger naming it went: the last one takes it out of soft mode,
    /// leaving it as the triggers did (switched on: enabled), as in Linux.
    pub fn release_soft(self, array: &TraceArray) {
        self.state().release_soft(array)
    }

    /// What `cat events/sched/NAME/enable` shows: whether it records, and
    /// whether triggers keep it armed (its own, or another event's naming
    /// it: the `*`).
    pub fn enable_state(self, array: &TraceArray) -> (bool, bool) {
        self.state().enable_state(array)
    }

    /// `cat events/sched/NAME/trigger`.
    pub fn trigger_text(self, array: &TraceArray) -> alloc::string::String {
        self.state().trigger_text(array)
    }

    /// `cat events/sched/NAME/hist`: its `hist` triggers' tables, if any.
    pub fn hist_text(
        self,
        array: &TraceArray,
        names: crate::events::hist::Namer,
        comms: crate::events::hist::Comms,
    ) -> Option<String> {
        self.state().hist_text(array, names, comms)
    }

    /// Whether `enable` is 1.
    pub fn is_enabled(self, array: &TraceArray) -> bool {
        self.state().is_enabled(array)
    }

    /// Switches it (in soft mode, the soft switch too, as in Linux).
    pub fn set_enabled(self, array: &TraceArray, on: bool) {
        self.state().set_enabled(array, on);
    }
}

/// Each event's state, indexed by [`SchedEvent`].
static STATES: [EventState; SchedEvent::ALL.len()] = [const { EventState::new() }; SchedEvent::ALL.len()];

fn switch_field(event: &SchedSwitchEvent, field: usize) -> FieldValue<'_> {
    match field {
        0 => FieldValue::Signed(event.common.pid.into()),
        1 => FieldValue::Str(&event.prev_comm),
        2 => FieldValue::Signed(event.prev_pid.into()),
        3 => FieldValue::Signed(event.prev_prio.into()),
        4 => FieldValue::Unsigned(event.prev_state),
        5 => FieldValue::Str(&event.next_comm),
        6 => FieldValue::Signed(event.next_pid.into()),
        _ => FieldValue::Signed(event.next_prio.into()),
    }
}

fn wakeup_field(event: &SchedWakeupEvent, field: usize) -> FieldValue<'_> {
    match field {
        0 => FieldValue::Signed(event.common.pid.into()),
        1 => FieldValue::Str(&event.comm),
        2 => FieldValue::Signed(event.pid.into()),
        3 => FieldValue::Signed(event.prio.into()),
        _ => FieldValue::Signed(event.target_cpu.into()),
    }
}

/// Records a switch from `prev` (leaving in `prev_state`) to `next`
/// (unless `set_event_pid` leaves both out, or the filter drops it), and
/// fires the event's triggers.
///
/// Never inlined: a `stacktrace` trigger's chain starts from this
/// function's frame record, at its caller.
#[inline(never)]
pub fn trace_switch(prev: &TaskTrace, prev_state: u64, next: &TaskTrace) {
    // For `sleep-time` off: the time a task spends switched out.
    TaskTrace::switched(prev, next, ring_buffer::clock::now_ns());
    task_names::at_switch(prev, next);
    let state = SchedEvent::Switch.state();
    if !state.is_live() {
        return;
    }
    let mut common = event_common(SCHED_SWITCH);
    common.pid = prev.pid();
    let event = SchedSwitchEvent {
        common,
        prev_comm: *prev.comm_bytes(),
        prev_pid: prev.pid(),
        prev_prio: DEFAULT_PRIO,
        prev_state,
        next_comm: *next.comm_bytes(),
        next_pid: next.pid(),
        next_prio: DEFAULT_PRIO,
    };
    let fields = |field| switch_field(&event, field);
    let pid_kept = |slot| crate::events::pid::records_in(slot, prev) || crate::events::pid::records_in(slot, next);
    state.hit(&pid_kept, &fields, SchedSwitchEvent::SIZE, &|bytes| event.encode_into(bytes));
}

/// Records that `task`, which slept or blocked, was woken to run on
/// `target_cpu` (unless `set_event_pid` leaves out both it and the waker,
/// or the filter drops it), and fires the event's triggers. Never inlined,
/// as [`trace_switch`].
#[inline(never)]
pub fn trace_wakeup(task: &TaskTrace, target_cpu: usize) {
    wakeup_event(SchedEvent::Wakeup, task, target_cpu);
}

/// [`trace_wakeup`] for a new task, queued for the first time
/// (`sched_wakeup_new`).
#[inline(never)]
pub fn trace_wakeup_new(task: &TaskTrace, target_cpu: usize) {
    wakeup_event(SchedEvent::WakeupNew, task, target_cpu);
}

/// The body of [`trace_wakeup`] and [`trace_wakeup_new`] (inlined, so that
/// a `stacktrace` trigger's chain starts at their caller).
#[inline(always)]
fn wakeup_event(kind: SchedEvent, task: &TaskTrace, target_cpu: usize) {
    let state = kind.state();
    if !state.is_live() {
        return;
    }
    let event = SchedWakeupEvent {
        common: event_common(kind.id()),
        comm: *task.comm_bytes(),
        pid: task.pid(),
        prio: DEFAULT_PRIO,
        target_cpu: target_cpu as i32,
    };
    let fields = |field| wakeup_field(&event, field);
    let pid_kept = |slot| crate::events::pid::records_in(slot, task) || crate::events::pid::records_current_in(slot);
    state.hit(&pid_kept, &fields, SchedWakeupEvent::SIZE, &|bytes| event.encode_into(bytes));
}

/// A task begins (the scheduler calls this once it has registered the
/// task's tracing state, as Linux's `sched_process_fork` tracepoint fires):
/// its name is saved for `saved_cmdlines` while an array records names, and
/// the pid filters that follow forks (`function-fork`, `event-fork`) take
/// it in. (It was registered first, then filtered: a pid list changing in
/// between reaches it either way, by its walk over every task or here.)
pub fn process_fork(state: &TaskTrace) {
    if task_names::records_names() {
        state.set_name_seq(task_names::save_cmdline(state.pid(), state.comm_bytes()));
    }
    crate::array::trace_array::filter_new_task(state);
    crate::events::pid::filter_new_task(state);
}

/// The running task ends (the scheduler, from the task itself, before its
/// last switch; Linux's `sched_process_exit`): with `function-fork` or
/// `event-fork`, its pid leaves the pid lists, as Linux's fork-following
/// drops a freed task's. It takes the lists' locks, which may sleep: so it
/// runs in the task's own context, never in the switch that frees it (the
/// task switched to may be the one holding them).
pub fn process_exit(state: &TaskTrace) {
    crate::array::trace_array::forget_task(state);
    crate::events::pid::forget_task(state);
}
