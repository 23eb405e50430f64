//! The names and thread groups traces show for pids (`saved_cmdlines`,
//! `saved_tgids`): every task the tracer learns of leaves its pid and name
//! in a bounded table ([`crate::cmdlines`]), so traces can name tasks that
//! have since exited; `options/record-cmd` and `options/record-tgid`
//! decide whether names and thread groups are saved.

use alloc::string::String;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use arch::sync::SpinLock;

pub use crate::cmdlines::MAX_SAVED_CMDLINES;
use crate::cmdlines::{Cmdlines, SAVED_CMDLINES};

use ftrace::task::TaskTrace;

static CMDLINES: SpinLock<Cmdlines> = SpinLock::new(Cmdlines::new(SAVED_CMDLINES));
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

/// At every switch: the two tasks' names stay saved (see [`keep_name`])
/// and, with `options/record-tgid` on, their thread groups are recorded.
#[inline]
pub(crate) fn at_switch(prev: &TaskTrace, next: &TaskTrace) {
    keep_name(prev);
    keep_name(next);
    if RECORD_TGID_SLOTS.load(Ordering::Relaxed) != 0 {
        save_tgid(prev.pid());
        save_tgid(next.pid());
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
