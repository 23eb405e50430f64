//! `saved_cmdlines` names the tasks in the trace.

use alloc::format;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// `saved_cmdlines` lists the names traces show; `saved_cmdlines_size`
/// takes 1 to 32768.
#[ktest]
pub(super) fn saved_cmdlines_name_the_tasks_in_the_trace() {
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert_eq!(fib(1), 1);
    let trace = read("trace");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
    // `           ktest-1       [000] ...` : the task column.
    let line = trace.lines().find(|line| line.contains(": kernel::workload::fib <-")).unwrap();
    let (name, rest) = line.trim_start().split_once('-').unwrap();
    let pid = rest.split_whitespace().next().unwrap();
    let saved = read("saved_cmdlines");
    assert!(saved.lines().any(|line| line == format!("{pid} {name}")), "{pid} {name} not in {saved}");
    assert_eq!(read("saved_cmdlines_size"), "1024\n");
    for bad in ["0", "32769", "many", ""] {
        let refused = tracefs::write("saved_cmdlines_size", bad, FilterMode::Replace);
        assert!(matches!(refused, Err(TracefsError::Invalid(_))), "{bad}: {refused:?}");
    }
    write("saved_cmdlines_size", "32768");
    assert_eq!(read("saved_cmdlines_size"), "32768\n");
    write("saved_cmdlines_size", "1024");
    assert_eq!(read("saved_cmdlines"), saved, "growing and back kept every name");
    // A running task pushed out by newer ones is named again at its next
    // switch, as Linux records names at sched_switch: the two workers push
    // this task out, and its waits for them switch it away and back.
    let me = format!("{pid} {name}");
    write("saved_cmdlines_size", "2");
    crate::workload::run_parallel(2, "fib", &["2"]).unwrap();
    assert!(read("saved_cmdlines").lines().any(|line| line == me), "named again: {}", read("saved_cmdlines"));
    write("saved_cmdlines_size", "1024");
}
