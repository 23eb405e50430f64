//! `set_event_pid` and `set_event_notrace_pid`: the tasks whose events
//! (scheduler and probe events) are recorded, and those whose are not,
//! per trace array (the top level's files and each instance's). As in
//! Linux, a task in the notrace list is never recorded; otherwise an
//! empty `set_event_pid` records every task, and a list only its own.
//!
//! Each task carries the verdicts, a bit per array slot
//! (`TaskTrace::is_event_ignored`), so recording an event checks one flag
//! of a task and takes no lock. Writing a list recomputes every task's
//! bit for that array; a new task gets its bits when it is made, and with
//! an array's `options/event-fork` a child of a listed task joins its
//! parent's lists there (as Linux does).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::array::options::TraceOption;
use crate::array::trace_array::{self, PidError, TraceArray};
use ftrace::task::{self, TaskTrace};
use ftrace::FilterMode;

/// Whether the top level's lists filter: the traced path's first,
/// cheapest test (an instance's records test their task's bit alone).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// `cat set_event_pid` (`notrace`: `set_event_notrace_pid`) of `array`:
/// the pids, in ascending order (Linux keeps them in a bitmap).
pub fn pids(array: &TraceArray, notrace: bool) -> Vec<i32> {
    array.event_pids().lock().sorted(notrace)
}

/// `echo PIDS > set_event_pid` (`notrace`: `set_event_notrace_pid`; `>>`
/// adds) of `array`. A word that is not a pid changes nothing.
pub fn set_pids(array: &TraceArray, notrace: bool, text: &str, mode: FilterMode) -> Result<(), PidError> {
    let parsed = trace_array::parse_pids(text)?;
    let mut lists = array.event_pids().lock();
    lists.write(notrace, &parsed, mode);
    task::for_each(|state| state.set_event_ignored(array.slot(), lists.ignores(state.pid())));
    if array.is_top() {
        ACTIVE.store(lists.is_active(), Ordering::Relaxed);
    }
    Ok(())
}

/// Whether the top level's lists are set (its events must check their
/// task).
#[inline]
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Whether the top level records events of `task`.
#[inline]
pub fn records(task: &TaskTrace) -> bool {
    !task.is_event_ignored(0)
}

/// Whether the top level records events of the current task (no task
/// yet: yes).
#[inline]
pub fn records_current() -> bool {
    !ACTIVE.load(Ordering::Relaxed) || task::try_current().is_none_or(records)
}

/// Whether the array in `slot` records events of `task`.
#[inline]
pub fn records_in(slot: usize, task: &TaskTrace) -> bool {
    !task.is_event_ignored(slot)
}

/// Whether the array in `slot` records events of the current task (no
/// task yet: yes).
#[inline]
pub fn records_current_in(slot: usize) -> bool {
    task::try_current().is_none_or(|task| records_in(slot, task))
}

/// A new task: each array's lists decide; with that array's `event-fork`
/// a child joins the lists its parent is in.
pub(crate) fn filter_new_task(state: &TaskTrace) {
    let parent = task::try_current().map(|parent| parent.pid());
    trace_array::for_each_array(|array| {
        let mut lists = array.event_pids().lock();
        if !lists.is_active() {
            return;
        }
        if let (true, Some(parent)) = (array.option(TraceOption::EventFork), parent) {
            lists.add_child(parent, state.pid());
        }
        state.set_event_ignored(array.slot(), lists.ignores(state.pid()));
    });
}

/// A task gone for good: with an array's `event-fork`, its pid leaves
/// that array's lists, as Linux's fork-following does (a later task may
/// get the pid back).
pub(crate) fn forget_task(state: &TaskTrace) {
    trace_array::for_each_array(|array| {
        if array.option(TraceOption::EventFork) {
            let mut lists = array.event_pids().lock();
            lists.remove(state.pid());
            if array.is_top() {
                ACTIVE.store(lists.is_active(), Ordering::Relaxed);
            }
        }
    });
}
