//! The task names traces show (`saved_cmdlines`): a pid's name is
//! remembered when its task starts, so a trace read after the task is gone
//! still names it. A table of a fixed size (`saved_cmdlines_size`), the
//! oldest entry going first; the scheduler's events module (`sched`) keeps
//! the kernel's one.

use alloc::collections::VecDeque;

/// How many task names a table keeps at first (Linux keeps 128
/// by default; tasks here are few and short-lived ones matter).
pub const SAVED_CMDLINES: usize = 1024;

/// The most names `saved_cmdlines_size` may ask for (Linux's
/// `PID_MAX_DEFAULT`).
pub const MAX_SAVED_CMDLINES: usize = 32768;

/// The remembered names, oldest first, and how many may be kept.
pub struct Cmdlines {
    names: VecDeque<(i32, [u8; 16])>,
    capacity: usize,
}

impl Cmdlines {
    pub const fn new(capacity: usize) -> Cmdlines {
        Cmdlines { names: VecDeque::new(), capacity }
    }

    /// Remembers `pid`'s name: the newest name wins, the oldest entry goes
    /// when the table is full. Pid 0, the idle tasks (one per CPU, each
    /// named for its CPU), is `<idle>` in every trace and is not kept, as
    /// in Linux.
    pub fn save(&mut self, pid: i32, comm: &[u8; 16]) {
        if pid == 0 {
            return;
        }
        self.names.retain(|(saved, _)| *saved != pid);
        if self.names.len() >= self.capacity {
            self.names.pop_front();
        }
        self.names.push_back((pid, *comm));
    }

    /// How many names it keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Every name, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &(i32, [u8; 16])> {
        self.names.iter()
    }

    /// Keeps up to `n` names from now on (the oldest go if there are more);
    /// `None` (nothing changed) unless 1 <= `n` <= [`MAX_SAVED_CMDLINES`].
    pub fn resize(&mut self, n: usize) -> Option<()> {
        if !(1..=MAX_SAVED_CMDLINES).contains(&n) {
            return None;
        }
        self.capacity = n;
        while self.names.len() > n {
            self.names.pop_front();
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(name: &str) -> [u8; 16] {
        let mut comm = [0u8; 16];
        comm[..name.len()].copy_from_slice(name.as_bytes());
        comm
    }

    fn pids(table: &Cmdlines) -> alloc::vec::Vec<i32> {
        table.names.iter().map(|(pid, _)| *pid).collect()
    }

    #[test]
    fn saved_cmdlines_keep_the_newest_names_within_their_size() {
        let mut table = Cmdlines::new(3);
        for pid in [1, 2, 3, 4, 0] {
            table.save(pid, &comm("task"));
        }
        assert_eq!(pids(&table), [2, 3, 4], "the oldest went (and idle's 0 never came)");
        table.save(3, &comm("renamed"));
        assert_eq!(pids(&table), [2, 4, 3], "a new name moves its pid to the newest");
        assert_eq!(table.names.back().map(|(_, name)| crate::event::comm_str(name)), Some("renamed"));
        assert_eq!(table.resize(2), Some(()));
        assert_eq!(pids(&table), [4, 3], "shrinking drops the oldest");
        for refused in [0, MAX_SAVED_CMDLINES + 1] {
            assert_eq!(table.resize(refused), None);
            assert_eq!((table.capacity(), pids(&table)), (2, alloc::vec![4, 3]), "{refused} changes nothing");
        }
        assert_eq!(table.resize(MAX_SAVED_CMDLINES), Some(()));
        table.save(9, &comm("more"));
        assert_eq!(pids(&table), [4, 3, 9]);
    }
}
