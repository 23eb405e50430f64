//! A pair of pid lists, as both pid filters keep them: `set_ftrace_pid` /
//! `set_ftrace_notrace_pid` (per trace array, [`crate::array::trace_array`]) and
//! `set_event_pid` / `set_event_notrace_pid` ([`crate::events::pid`]), after
//! Linux's pair of `trace_pid_list`s and its `trace_filter_add_remove_task`.
//!
//! A task in the notrace list is left out; otherwise, once the traced list
//! was given pids, only its tasks are kept. The traced list stays set when
//! the tasks in it have all gone (with fork-following their pids leave
//! it): as in Linux, only writing no pids lifts it. The lists read in
//! ascending order, as Linux's pid bitmap does.

use alloc::vec::Vec;

use ftrace::FilterMode;

/// The traced and notrace lists of one pid filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PidLists {
    traced: Vec<i32>,
    ignored: Vec<i32>,
    /// The traced list was given pids (and no empty write came since).
    traced_set: bool,
}

impl PidLists {
    pub const fn new() -> PidLists {
        PidLists { traced: Vec::new(), ignored: Vec::new(), traced_set: false }
    }

    fn list(&mut self, notrace: bool) -> &mut Vec<i32> {
        if notrace {
            &mut self.ignored
        } else {
            &mut self.traced
        }
    }

    /// Whether either list filters.
    pub fn is_active(&self) -> bool {
        self.traced_set || !self.ignored.is_empty()
    }

    /// Whether the list is set: the notrace one when it holds pids, the
    /// traced one from a write of pids until a write of none.
    pub fn is_set(&self, notrace: bool) -> bool {
        if notrace {
            !self.ignored.is_empty()
        } else {
            self.traced_set
        }
    }

    /// Whether `pid`'s task is left out.
    pub fn ignores(&self, pid: i32) -> bool {
        (self.traced_set && !self.traced.contains(&pid)) || self.ignored.contains(&pid)
    }

    /// One list's pids, in ascending order.
    pub fn sorted(&self, notrace: bool) -> Vec<i32> {
        let mut list = if notrace { self.ignored.clone() } else { self.traced.clone() };
        list.sort_unstable();
        list
    }

    /// A write of `pids` to one list (`Replace`: instead of what it held).
    pub fn write(&mut self, notrace: bool, pids: &[i32], mode: FilterMode) {
        let list = self.list(notrace);
        if mode == FilterMode::Replace {
            list.clear();
        }
        for &pid in pids {
            if !list.contains(&pid) {
                list.push(pid);
            }
        }
        if !notrace {
            self.traced_set = !self.traced.is_empty();
        }
    }

    /// Fork-following: `child` joins each list `parent` is in.
    pub fn add_child(&mut self, parent: i32, child: i32) {
        for list in [&mut self.traced, &mut self.ignored] {
            if list.contains(&parent) && !list.contains(&child) {
                list.push(child);
            }
        }
    }

    /// Fork-following: a task that is gone leaves both lists.
    pub fn remove(&mut self, pid: i32) {
        self.traced.retain(|&listed| listed != pid);
        self.ignored.retain(|&listed| listed != pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_filter_follow_forks_and_stay_set_when_emptied() {
        let mut lists = PidLists::new();
        assert!(!lists.is_active() && !lists.ignores(5));
        lists.write(false, &[9, 3, 5], FilterMode::Replace);
        assert_eq!(lists.sorted(false), [3, 5, 9]);
        assert!(!lists.ignores(3) && lists.ignores(4));
        lists.add_child(3, 10);
        assert!(!lists.ignores(10), "a child joins its parent's list");
        lists.write(true, &[10], FilterMode::Append);
        assert!(lists.ignores(10), "notrace wins");
        for pid in [3, 5, 9, 10] {
            lists.remove(pid);
        }
        assert!(lists.sorted(false).is_empty() && lists.is_set(false) && lists.ignores(3), "emptied, still set");
        assert!(!lists.is_set(true));
        lists.write(false, &[], FilterMode::Replace);
        assert!(!lists.is_active() && !lists.ignores(3), "a write of no pids lifts it");
    }
}
