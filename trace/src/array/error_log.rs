//! The refused commands a trace array keeps for its `error_log` file, as
//! Linux keeps them per trace array (`tr->err_log`): the last [`KEPT`], each
//! with when it was refused, who refused it, why, the command and where the
//! caret goes under it.
//!
//! This is the store only. What goes in (which parser Linux would name,
//! where its caret would be) and how `cat error_log` prints it belong to
//! the tracefs files that refuse the writes.

use alloc::collections::VecDeque;
use alloc::string::String;

/// Entries kept (Linux's `TRACING_LOG_ERRS_MAX`).
pub const KEPT: usize = 8;

/// One refused command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorEntry {
    /// When it was refused, in nanoseconds since boot.
    pub time_ns: u64,
    /// Who refused it (`trace_kprobe`, `event filter parse error`,
    /// `hist:GRP:EVENT`, ...).
    pub location: String,
    /// Why.
    pub message: String,
    /// The command as written.
    pub command: String,
    /// Where in `command` (in characters) the caret goes.
    pub column: usize,
}

/// One array's log: the newest [`KEPT`] entries, oldest first.
pub struct ErrorLog {
    entries: spin::Mutex<VecDeque<ErrorEntry>>,
}

impl ErrorLog {
    /// An empty log.
    pub const fn new() -> ErrorLog {
        ErrorLog { entries: spin::Mutex::new(VecDeque::new()) }
    }

    /// Keeps `entry`, dropping the oldest past [`KEPT`].
    pub fn push(&self, entry: ErrorEntry) {
        let mut entries = self.entries.lock();
        if entries.len() == KEPT {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// `echo > error_log`: forgets every entry.
    pub fn clear(&self) {
        self.entries.lock().clear();
    }

    /// The entries, oldest first (a copy: the log is not held while the
    /// caller prints them).
    pub fn entries(&self) -> alloc::vec::Vec<ErrorEntry> {
        self.entries.lock().iter().cloned().collect()
    }
}

impl Default for ErrorLog {
    fn default() -> Self {
        ErrorLog::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn entry(n: u64) -> ErrorEntry {
        ErrorEntry { time_ns: n, location: "loc".into(), message: "why".into(), command: "cmd".into(), column: 0 }
    }

    fn times(log: &ErrorLog) -> Vec<u64> {
        log.entries().iter().map(|entry| entry.time_ns).collect()
    }

    #[test]
    fn keeps_the_newest_entries_oldest_first() {
        let log = ErrorLog::new();
        for n in 0..KEPT as u64 + 3 {
            log.push(entry(n));
        }
        assert_eq!(times(&log), (3..KEPT as u64 + 3).collect::<Vec<_>>());
        log.clear();
        assert!(times(&log).is_empty());
    }
}
