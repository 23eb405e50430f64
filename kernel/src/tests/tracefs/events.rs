//! `set_event` and `available_events` name every event.

use alloc::format;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

#[ktest]
pub(super) fn set_event_and_available_events_name_every_event() {
    assert_eq!(read("available_events"), "sched:sched_switch\nsched:sched_wakeup\nsched:sched_wakeup_new\n");
    tracefs::write("dynamic_events", "f:ent fib n=$arg1", FilterMode::Append).unwrap();
    assert!(read("available_events").ends_with("fprobes:ent\n"));
    write("set_event", "sched_switch fprobes:*");
    assert_eq!(read("set_event"), "sched:sched_switch\nfprobes:ent\n");
    assert_eq!(read("events/sched/sched_switch/enable"), "1\n");
    assert_eq!(read("events/sched/enable"), "X\n", "one of three");
    assert_eq!(read("events/fprobes/ent/enable"), "1\n");
    assert_eq!(fib(2), 1);
    crate::sched::yield_now();
    let trace = read("trace");
    assert_eq!(trace.lines().filter(|line| line.contains(": ent: (kernel::workload::fib+0x0/")).count(), 3, "{trace}");
    assert!(
        trace.lines().filter(|line| line.contains(": ent: (")).all(|line| line.contains("] ..... ")),
        "recorded with interrupts on, as the call ran: {trace}"
    );
    tracefs::write("set_event", "!sched:*", FilterMode::Append).unwrap();
    assert_eq!(read("set_event"), "fprobes:ent\n");
    for bad in ["nosuch", "sched:nosuch", "nogroup:*"] {
        assert!(matches!(tracefs::write("set_event", bad, FilterMode::Replace), Err(TracefsError::Invalid(_))), "{bad}");
    }
    assert_eq!(read("set_event"), "fprobes:ent\n", "a refused write changes nothing");
    // A bare name is a group as well as an event, and an empty half is
    // every group or every event, as in Linux.
    write("set_event", "sched");
    assert_eq!(read("set_event"), "sched:sched_switch\nsched:sched_wakeup\nsched:sched_wakeup_new\n");
    write("set_event", "fprobes:");
    assert_eq!(read("set_event"), "fprobes:ent\n");
    tracefs::write("set_event", ":sched_wakeup ent", FilterMode::Append).unwrap();
    assert_eq!(read("set_event"), "sched:sched_wakeup\nfprobes:ent\n");
    assert!(read("events/sched/sched_switch/format").starts_with("name: sched_switch\nID: "));
    // `id` is the ID its format gives.
    for event in ["sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new", "fprobes/ent"] {
        let format = read(&format!("events/{event}/format"));
        let id = format.lines().nth(1).unwrap().strip_prefix("ID: ").unwrap();
        assert_eq!(read(&format!("events/{event}/id")), format!("{id}\n"), "{event}");
    }
    assert!(matches!(tracefs::write("events/fprobes/ent/id", "1", FilterMode::Replace), Err(TracefsError::NotWritable(_))));
    write("set_event", "");
    assert_eq!(read("events/enable"), "0\n");
    tracefs::write("dynamic_events", "-:ent", FilterMode::Append).unwrap();
}
