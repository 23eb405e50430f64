//! The scheduler's events (`sched_switch`, `sched_wakeup`,
//! `sched_wakeup_new`) and the task names traces show (`saved_cmdlines`).
//!
//! The kernel's scheduler calls [`trace_switch`] at every switch,
//! [`trace_wakeup`] when it wakes a task that slept or blocked, and
//! [`trace_wakeup_new`] when it queues a new task, each before the task can
//! run (as Linux's `try_to_wake_up` and `wake_up_new_task` do, under the
//! run-queue lock); they record an event only while
//! that event is enabled (`events/sched/.../enable`, or `--record`, which
//! enables every one as `trace-cmd record -e sched` would), and fire its
//! triggers (`events/sched/.../trigger`, see [`crate::events::trigger`])
//! whether or not it is enabled. Every task the
//! tracer learns of leaves its pid and name in a bounded table, so traces
//! can name tasks that have since exited.

use alloc::string::String;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use arch::sync::SpinLock;

pub use crate::cmdlines::MAX_SAVED_CMDLINES;
use crate::cmdlines::{Cmdlines, SAVED_CMDLINES};

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
    keep_name(prev);
    keep_name(next);
    if RECORD_TGID_SLOTS.load(Ordering::Relaxed) != 0 {
        save_tgid(prev.pid());
        save_tgid(next.pid());
    }
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

static CMDLINES: SpinLock<Cmdlines> = SpinLock::new(Cmdlines::new(SAVED_CMDLINES));

/// A task begins (the scheduler calls this once it has registered the
/// task's tracing state, as Linux's `sched_process_fork` tracepoint fires):
/// its name is saved for `saved_cmdlines` while an array records names, and
/// the pid filters that follow forks (`function-fork`, `event-fork`) take
/// it in. (It was registered first, then filtered: a pid list changing in
/// between reaches it either way, by its walk over every task or here.)
pub fn process_fork(state: &TaskTrace) {
    if records_names() {
        state.set_name_seq(save_cmdline(state.pid(), state.comm_bytes()));
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

/// Remembers `pid`'s name (the newest name wins; the oldest entry goes
/// when the table is full).
pub fn save_cmdline(pid: i32, comm: &[u8; 16]) -> u64 {
    let mut table = CMDLINES.lock();
    let seq = table.save(pid, comm);
    EVICTED.store(table.evicted_upto(), Ordering::Relaxed);
    seq
}

/// [`Cmdlines::evicted_upto`] of the table, read without its lock at
/// every switch.
static EVICTED: AtomicU64 = AtomicU64::new(0);

/// Saves `task`'s name again if newer tasks pushed it out of the table:
/// a task that keeps running keeps its name in traces (Linux records the
/// names of the tasks at each `sched_switch`). A name pushed out leaves a
/// full table, so the save allocates nothing (a resize reserves room for
/// every name): it may run inside the scheduler. A task that started while
/// no array saved names (`options/record-cmd`) has no save yet (sequence
/// 0) and gets one here if that needs no allocation (else at a later
/// switch).
#[inline]
fn keep_name(task: &TaskTrace) {
    if task.pid() != 0 && task.name_seq() <= EVICTED.load(Ordering::Relaxed) && records_names() {
        let mut table = CMDLINES.lock();
        if let Some(seq) = table.save_without_allocating(task.pid(), task.comm_bytes()) {
            EVICTED.store(table.evicted_upto(), Ordering::Relaxed);
            task.set_name_seq(seq);
        }
    }
}

/// How many names are kept (`saved_cmdlines_size`).
pub fn saved_cmdlines_size() -> usize {
    CMDLINES.lock().capacity()
}

/// `echo N > saved_cmdlines_size`: keeps up to `n` names (1 to
/// [`MAX_SAVED_CMDLINES`]; the oldest go if there are more). `None`:
/// out of range, nothing changed.
pub fn set_saved_cmdlines_size(n: usize) -> Option<()> {
    let mut table = CMDLINES.lock();
    table.resize(n)?;
    EVICTED.store(table.evicted_upto(), Ordering::Relaxed);
    Some(())
}

/// The name of `pid`, if known (pid 0 is the idle task, `<idle>`).
pub fn comm_of(pid: i32) -> Option<String> {
    if pid == 0 {
        return Some(String::from("<idle>"));
    }
    let table = CMDLINES.lock();
    let name = table.iter().find(|(saved, _)| *saved == pid).map(|(_, comm)| String::from(crate::events::record::comm_str(comm)));
    name
}

/// The highest pid whose thread-group id can be recorded, plus one
/// (Linux's default `pid_max`). Linux's pids wrap there; the pids here
/// only grow, so the tasks made after the first 32767 are not recorded
/// (their lines show `(-------)`).
const PID_MAX: usize = 32768;

/// The pids whose thread-group id was recorded (`saved_tgids`), a bit
/// each. Every task here is a kernel thread, its own thread group (as a
/// Linux kernel thread is): a recorded pid's tgid is the pid.
static TGIDS: [AtomicU64; PID_MAX / 64] = [const { AtomicU64::new(0) }; PID_MAX / 64];

/// The trace arrays (a bit per slot) with `options/record-cmd` on: task
/// names are saved while any is (the top level's, slot 0, from boot).
static RECORD_CMD_SLOTS: AtomicU32 = AtomicU32::new(1);

/// `options/record-cmd` of the array in `slot` turned on or off (on when
/// an instance is made with it, off when it goes).
pub fn set_record_cmd(slot: usize, on: bool) {
    match on {
        true => RECORD_CMD_SLOTS.fetch_or(1 << slot, Ordering::Relaxed),
        false => RECORD_CMD_SLOTS.fetch_and(!(1 << slot), Ordering::Relaxed),
    };
}

/// Whether task names are saved now: some trace array has
/// `options/record-cmd` on.
#[inline]
pub fn records_names() -> bool {
    RECORD_CMD_SLOTS.load(Ordering::Relaxed) != 0
}

/// The trace arrays (a bit per slot) with `options/record-tgid` on: the
/// switches record tgids while any is.
static RECORD_TGID_SLOTS: AtomicU32 = AtomicU32::new(0);

/// `options/record-tgid` of the array in `slot` turned on or off (off too
/// when the array goes). On, every task there is now is recorded at once
/// (Linux records a task at its next switch; a task here may run a whole
/// traced command without one), then each task that switches in. The
/// recorded tgids stay when it goes off, as Linux's do.
pub fn set_record_tgid(slot: usize, on: bool) {
    if on {
        RECORD_TGID_SLOTS.fetch_or(1 << slot, Ordering::Relaxed);
        ftrace::task::for_each(|task| save_tgid(task.pid()));
    } else {
        RECORD_TGID_SLOTS.fetch_and(!(1 << slot), Ordering::Relaxed);
    }
}

/// Records `pid`'s thread group (not the idle tasks', pid 0, as Linux
/// does not).
fn save_tgid(pid: i32) {
    if let Some(index) = usize::try_from(pid).ok().filter(|&pid| pid > 0 && pid < PID_MAX) {
        TGIDS[index / 64].fetch_or(1 << (index % 64), Ordering::Relaxed);
    }
}

/// `pid`'s thread-group id, if recorded.
pub fn tgid_of(pid: i32) -> Option<i32> {
    let index = usize::try_from(pid).ok().filter(|&pid| pid < PID_MAX)?;
    (TGIDS[index / 64].load(Ordering::Relaxed) & 1 << (index % 64) != 0).then_some(pid)
}

/// Every recorded (pid, tgid), by pid (`saved_tgids`).
pub fn saved_tgids() -> alloc::vec::Vec<(i32, i32)> {
    (1..PID_MAX as i32).filter_map(|pid| Some((pid, tgid_of(pid)?))).collect()
}

/// Every remembered (pid, name), oldest first (`saved_cmdlines`).
pub fn saved_cmdlines() -> alloc::vec::Vec<(i32, String)> {
    CMDLINES.lock().iter().map(|(pid, comm)| (pid, String::from(crate::events::record::comm_str(comm)))).collect()
}
