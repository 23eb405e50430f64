//! `set_event_pid`: the tasks whose events (scheduler and probe events) are
//! recorded. Empty, every task's are.
//!
//! Each task carries the verdict (`TaskTrace::is_event_ignored`), so
//! recording an event checks one flag of the current task and takes no
//! lock. Writing the list recomputes every task's flag; a new task gets
//! its flag when it is made, and with `options/event-fork` a child of a
//! listed task joins the list (as Linux does).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use arch::sync::Mutex;

use crate::instance::{top, PidError, TraceOption};
use crate::task::{self, TaskTrace};
use crate::FilterMode;

static PIDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Whether the list is not empty: the traced path's first, cheapest test.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// `cat set_event_pid`: the pids, in the order written.
pub fn pids() -> Vec<i32> {
    PIDS.lock().clone()
}

/// `echo PIDS > set_event_pid` (`>>` adds). A word that is not a pid
/// changes nothing.
pub fn set_pids(text: &str, mode: FilterMode) -> Result<(), PidError> {
    let parsed = crate::instance::parse_pids(text)?;
    let mut pids = PIDS.lock();
    if mode == FilterMode::Replace {
        pids.clear();
    }
    for pid in parsed {
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    task::for_each(|state| state.set_event_ignored(!pids.is_empty() && !pids.contains(&state.pid())));
    ACTIVE.store(!pids.is_empty(), Ordering::Relaxed);
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

/// A new task: the list decides, `event-fork` adds a listed task's child.
pub(crate) fn filter_new_task(state: &TaskTrace) {
    let mut pids = PIDS.lock();
    if pids.is_empty() {
        return;
    }
    let parent = task::try_current().map(|parent| parent.pid());
    if top().option(TraceOption::EventFork) && parent.is_some_and(|parent| pids.contains(&parent)) {
        pids.push(state.pid());
    }
    state.set_event_ignored(!pids.contains(&state.pid()));
}
