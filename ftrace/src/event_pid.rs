//! `set_event_pid` and `set_event_notrace_pid`: the tasks whose events
//! (scheduler and probe events) are recorded, and those whose are not. As
//! in Linux, a task in the notrace list is never recorded; otherwise an
//! empty `set_event_pid` records every task, and a list only its own.
//!
//! Each task carries the verdict (`TaskTrace::is_event_ignored`), so
//! recording an event checks one flag of the current task and takes no
//! lock. Writing a list recomputes every task's flag; a new task gets
//! its flag when it is made, and with `options/event-fork` a child of a
//! listed task joins its parent's lists (as Linux does).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use arch::sync::Mutex;

use crate::instance::{top, PidError, TraceOption};
use crate::pid_list::PidLists;
use crate::task::{self, TaskTrace};
use crate::FilterMode;

/// The two lists (`crate::pid_list`).
static LISTS: Mutex<PidLists> = Mutex::new(PidLists::new());
/// Whether a list filters: the traced path's first, cheapest test.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// `cat set_event_pid` (`notrace`: `set_event_notrace_pid`): the pids, in
/// ascending order (Linux keeps them in a bitmap).
pub fn pids(notrace: bool) -> Vec<i32> {
    LISTS.lock().sorted(notrace)
}

/// `echo PIDS > set_event_pid` (`notrace`: `set_event_notrace_pid`; `>>`
/// adds). A word that is not a pid changes nothing.
pub fn set_pids(notrace: bool, text: &str, mode: FilterMode) -> Result<(), PidError> {
    let parsed = crate::instance::parse_pids(text)?;
    let mut lists = LISTS.lock();
    lists.write(notrace, &parsed, mode);
    task::for_each(|state| state.set_event_ignored(lists.ignores(state.pid())));
    ACTIVE.store(lists.is_active(), Ordering::Relaxed);
    Ok(())
}

/// Whether a list is set (events must check their task).
#[inline]
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Whether events of `task` are recorded.
#[inline]
pub fn records(task: &TaskTrace) -> bool {
    !task.is_event_ignored()
}

/// Whether events of the current task are recorded (no task yet: yes).
#[inline]
pub fn records_current() -> bool {
    !ACTIVE.load(Ordering::Relaxed) || task::try_current().is_none_or(records)
}

/// A new task: the lists decide; with `event-fork` a child joins the
/// lists its parent is in.
pub(crate) fn filter_new_task(state: &TaskTrace) {
    let mut lists = LISTS.lock();
    if !lists.is_active() {
        return;
    }
    let parent = task::try_current().map(|parent| parent.pid());
    if let (true, Some(parent)) = (top().option(TraceOption::EventFork), parent) {
        lists.add_child(parent, state.pid());
    }
    state.set_event_ignored(lists.ignores(state.pid()));
}

/// A task gone for good: with `event-fork`, its pid leaves both lists, as
/// Linux's fork-following does (a later task may get the pid back).
pub(crate) fn forget_task(state: &TaskTrace) {
    if top().option(TraceOption::EventFork) {
        let mut lists = LISTS.lock();
        lists.remove(state.pid());
        ACTIVE.store(lists.is_active(), Ordering::Relaxed);
    }
}
