//! The task names traces show (`saved_cmdlines`): a pid's name is
//! remembered when its task starts, so a trace read after the task is gone
//! still names it. A table of a fixed size (`saved_cmdlines_size`), the
//! oldest entry going first; the scheduler's events module (`sched`) keeps
//! the kernel's one, and saves a running task's name again at a switch
//! once newer tasks pushed it out (as Linux records names at
//! `sched_switch`): each save has a sequence number, and every entry
//! numbered up to [`Cmdlines::evicted_upto`] is gone.

use alloc::collections::VecDeque;

/// How many task names a table keeps at first (Linux keeps 128
/// by default; tasks here are few and short-lived ones matter).
pub const SAVED_CMDLINES: usize = 1024;

/// The most names `saved_cmdlines_size` may ask for (Linux's
/// `PID_MAX_DEFAULT`).
pub const MAX_SAVED_CMDLINES: usize = 32768;

/// The remembered names, oldest first, and how many may be kept.
pub struct Cmdlines {
    /// (pid, name, the save's sequence number), oldest first.
    names: VecDeque<(i32, [u8; 16], u64)>,
    capacity: usize,
    /// The last save's sequence number (the first is 1).
    saved: u64,
    /// The newest sequence number that left the table, pushed out.
    evicted: u64,
}

impl Cmdlines {
    pub const fn new(capacity: usize) -> Cmdlines {
        Cmdlines { names: VecDeque::new(), capacity, saved: 0, evicted: 0 }
    }

    /// Every save numbered up to this is gone from the table (entries
    /// leave oldest first; a pid saved again has a new number).
    pub fn evicted_upto(&self) -> u64 {
        self.evicted
    }

    fn evict_oldest(&mut self) {
        if let Some((_, _, seq)) = self.names.pop_front() {
            self.evicted = self.evicted.max(seq);
        }
    }

    /// Remembers `pid`'s name: the newest name wins, the oldest entry goes
    /// when the table is full. Pid 0, the idle tasks (one per CPU, each
    /// named for its CPU), is `<idle>` in every trace and is not kept, as
    /// in Linux.
    /// Answers the save's sequence number (0 for pid 0).
    pub fn save(&mut self, pid: i32, comm: &[u8; 16]) -> u64 {
        if pid == 0 {
            return 0;
        }
        self.names.retain(|(saved, _, _)| *saved != pid);
        if self.names.len() >= self.capacity {
            self.evict_oldest();
        }
        self.saved += 1;
        self.names.push_back((pid, *comm, self.saved));
        self.saved
    }

    /// [`save`](Self::save) if it needs no allocation (the table is full,
    /// so a name goes first, or it has room reserved): what a save inside
    /// the scheduler may do. `None`: nothing saved.
    pub fn save_without_allocating(&mut self, pid: i32, comm: &[u8; 16]) -> Option<u64> {
        let room = self.names.len() >= self.capacity || self.names.len() < self.names.capacity();
        room.then(|| self.save(pid, comm))
    }

    /// How many names it keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Every (pid, name), oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (i32, &[u8; 16])> {
        self.names.iter().map(|(pid, comm, _)| (*pid, comm))
    }

    /// Keeps up to `n` names from now on (the oldest go if there are more);
    /// `None` (nothing changed) unless 1 <= `n` <= [`MAX_SAVED_CMDLINES`].
    pub fn resize(&mut self, n: usize) -> Option<()> {
        if !(1..=MAX_SAVED_CMDLINES).contains(&n) {
            return None;
        }
        self.capacity = n;
        while self.names.len() > n {
            self.evict_oldest();
        }
        // Room for every name now: a save at a switch (the scheduler's,
        // interrupts masked) then never allocates.
        self.names.reserve(n - self.names.len());
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
        table.names.iter().map(|(pid, _, _)| *pid).collect()
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
        assert_eq!(table.names.back().map(|(_, name, _)| crate::events::record::comm_str(name)), Some("renamed"));
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

    #[test]
    fn a_save_knows_when_it_was_pushed_out() {
        let mut table = Cmdlines::new(2);
        let first = table.save(1, &comm("shell"));
        assert!(first > table.evicted_upto(), "kept");
        let second = table.save(2, &comm("a"));
        table.save(3, &comm("b"));
        assert!(first <= table.evicted_upto() && second > table.evicted_upto(), "1 went, 2 stays");
        let again = table.save(1, &comm("shell"));
        assert!(again > table.evicted_upto() && pids(&table) == [3, 1]);
        assert!(second <= table.evicted_upto(), "saving 1 again pushed 2 out");
        table.resize(1);
        assert_eq!((pids(&table), table.evicted_upto() >= again - 1), (alloc::vec![1], true));
    }

    #[test]
    fn a_save_inside_the_scheduler_never_allocates() {
        let mut table = Cmdlines::new(4);
        assert_eq!(table.save_without_allocating(1, &comm("a")), None, "no room reserved yet");
        assert!(pids(&table).is_empty());
        table.resize(2);
        assert!(table.save_without_allocating(1, &comm("a")).is_some(), "the resize reserved room");
        assert!(table.save_without_allocating(2, &comm("b")).is_some());
        let capacity = table.names.capacity();
        assert!(table.save_without_allocating(3, &comm("c")).is_some(), "full: the oldest goes");
        assert_eq!((pids(&table), table.names.capacity()), (alloc::vec![2, 3], capacity));
    }
}
