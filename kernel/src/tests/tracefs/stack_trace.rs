//! The stack tracer's files.

use alloc::format;
use alloc::string::String;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// A stack deepest inside the timer interrupt goes through the exception
/// entry: the frame after its call into the handler is the interrupted pc.
#[ktest]
pub(super) fn the_stack_tracer_goes_through_the_exception_entry() {
    write("stack_trace_filter", "kernel_sched_tick");
    write("stack_max_size", "0");
    write("stack_tracer_enabled", "1");
    let start = arch::time::ticks();
    while arch::time::ticks() < start + 3 {
        arch::cpu::wait_for_interrupt();
    }
    write("stack_tracer_enabled", "0");
    let trace = read("stack_trace");
    write("stack_max_size", "0");
    write("stack_trace_filter", "");
    let mut entry = String::new();
    ftrace::symbols::kernel::write_return_address(&mut entry, arch::exceptions::handler_return()).unwrap();
    let lines: alloc::vec::Vec<&str> = trace.lines().collect();
    assert!(lines.get(2).is_some_and(|line| line.contains(" kernel_sched_tick+0x0/")), "{trace}");
    let at = lines.iter().position(|line| line.ends_with(&format!(" {entry}")));
    assert!(at.is_some_and(|at| at + 1 < lines.len()), "the handler's return into the entry, then the interrupted code: {trace}");
}

#[ktest]
pub(super) fn the_stack_tracer_finds_the_deepest_fib_frame() {
    write("stack_trace_filter", "fib");
    write("stack_max_size", "0");
    write("stack_tracer_enabled", "1");
    assert_eq!(fib(12), 144);
    write("stack_tracer_enabled", "0");
    let max: usize = read("stack_max_size").trim().parse().unwrap();
    let trace = read("stack_trace");
    let lines: alloc::vec::Vec<&str> = trace.lines().collect();
    assert!(lines[0].starts_with("        Depth    Size   Location    ("), "{trace}");
    // Entry 0 is the deepest fib call, at the maximum depth; its callers
    // follow: fib(12) down to fib(1) is twelve nested calls.
    assert!(lines[2].starts_with(&format!("  0) {max:>8}   ")) && lines[2].contains("kernel::workload::fib+0x0/"), "{trace}");
    let fibs = lines[2..].iter().take_while(|line| line.contains(" kernel::workload::fib+")).count();
    assert_eq!(fibs, 12, "{trace}");
    let depths: alloc::vec::Vec<usize> =
        lines[2..].iter().map(|line| line.split_whitespace().nth(1).unwrap().parse().unwrap()).collect();
    assert!(depths.windows(2).all(|pair| pair[0] > pair[1]), "depths shrink outwards: {depths:?}");
    assert!(matches!(tracefs::write("stack_max_size", "big", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    write("stack_max_size", "1000000");
    assert_eq!(read("stack_max_size"), "1000000\n", "any number, as in Linux");
    write("stack_tracer_enabled", "1");
    assert_eq!(fib(12), 144);
    write("stack_tracer_enabled", "0");
    assert_eq!(read("stack_max_size"), "1000000\n", "no stack that deep");
    assert_eq!(read("stack_trace"), trace, "so the chain stays");
    write("stack_max_size", "0");
    assert_eq!(read("stack_max_size"), "0\n");
    write("stack_trace_filter", "");
    assert_eq!(read("stack_trace_filter"), "#### all functions enabled ####\n");
    assert_eq!(read("enabled_functions"), "");
}

/// `stack_tracer_enabled` is Linux's sysctl int (`proc_dointvec`): any
/// int, negative or in C's bases, is kept as written; not 0 is on.
#[ktest]
pub(super) fn stack_tracer_enabled_takes_any_int_as_the_sysctl_does() {
    write("stack_trace_filter", "fib");
    for (text, back, on) in [("2", "2", true), ("-1", "-1", true), ("0x10", "16", true), ("010", "8", true), ("0", "0", false)] {
        write("stack_tracer_enabled", text);
        assert_eq!(read("stack_tracer_enabled"), format!("{back}\n"), "{text}");
        assert_eq!(trace::tracers::stack::is_enabled(), on, "{text}");
        assert_eq!(read("enabled_functions").is_empty(), !on, "{text}: the ops follows");
    }
    write("stack_tracer_enabled", "5");
    for bad in ["on", "+1", "2147483648", "-2147483649", "08", "-", "1x", ""] {
        let result = tracefs::write("stack_tracer_enabled", bad, FilterMode::Replace);
        assert!(matches!(result, Err(TracefsError::Invalid(_))), "{bad:?}: {result:?}");
        assert_eq!(read("stack_tracer_enabled"), "5\n", "{bad:?} changes nothing");
    }
    write("stack_tracer_enabled", "-2147483648");
    assert_eq!(read("stack_tracer_enabled"), "-2147483648\n", "the smallest int");
    write("stack_tracer_enabled", "0");
    write("stack_max_size", "0");
    write("stack_trace_filter", "");
    assert_eq!(read("enabled_functions"), "");
}

/// With the tracer off and no maximum, `stack_trace` says how to turn it
/// on, after the header, as Linux's does.
#[ktest]
pub(super) fn stack_trace_says_the_tracer_is_disabled() {
    write("stack_tracer_enabled", "0");
    write("stack_max_size", "0");
    assert_eq!(
        read("stack_trace"),
        "        Depth    Size   Location    (0 entries)\n\
         \x20       -----    ----   --------\n\
         #\n\
         #  Stack tracer disabled\n\
         #\n\
         # To enable the stack tracer, either add 'stacktrace' to the\n\
         # kernel command line\n\
         # or 'echo 1 > /proc/sys/kernel/stack_tracer_enabled'\n\
         #\n"
    );
    // A maximum kept (or the tracer on) is not "disabled".
    write("stack_max_size", "100");
    assert!(!read("stack_trace").contains("disabled"));
    write("stack_max_size", "0");
    write("stack_trace_filter", "fib");
    write("stack_tracer_enabled", "1");
    assert!(!read("stack_trace").contains("disabled"));
    write("stack_tracer_enabled", "0");
    write("stack_max_size", "0");
    write("stack_trace_filter", "");
}
