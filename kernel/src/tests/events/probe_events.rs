//! kprobe events through tracefs, as a Linux user writes them:
//! `kprobe_events`, `events/kprobes/`, `kprobe_profile`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;

use ftrace::FilterMode;
use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tracefs::{self, TracefsError};
use crate::workload::fib;

/// Where the instructions after a function's ftrace site start.
const SITE_END: usize = arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN;

/// The value of `name=` in a trace line (hex or decimal).
fn field(line: &str, name: &str) -> u64 {
    let marker = format!(" {name}=");
    let start = line.find(&marker).unwrap_or_else(|| panic!("no {name}= in {line}")) + marker.len();
    let text = line[start..].split(' ').next().unwrap();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    }
    .unwrap_or_else(|_| panic!("{name} in {line}"))
}

fn lines_of<'a>(trace: &'a str, event: &str) -> Vec<&'a str> {
    let marker = format!(": {event}: (");
    trace.lines().filter(|line| line.contains(&marker)).collect()
}

/// Every argument fib(n) is called with, itself included, sorted.
fn fib_arguments(n: u64) -> Vec<u64> {
    fn walk(n: u64, out: &mut Vec<u64>) {
        out.push(n);
        if n >= 2 {
            walk(n - 1, out);
            walk(n - 2, out);
        }
    }
    let mut out = Vec::new();
    walk(n, &mut out);
    out.sort_unstable();
    out
}

fn fib_by_loop(n: u64) -> u64 {
    (0..n).fold((0, 1), |(a, b), _| (b, a + b)).0
}

/// Runs fib(10) with `event` enabled and answers the trace.
/// The hard/soft interrupt character of a trace line's flags column
/// (`d.Z..`: the third).
fn context_flag(line: &str) -> Option<char> {
    line.split_whitespace().nth(2)?.chars().nth(2)
}

fn traced_fib(event: &str) -> String {
    write("trace", "");
    write(&format!("events/kprobes/{event}/enable"), "1");
    assert_eq!(fib(black_box(10)), 55, "the workload's result is unchanged");
    write(&format!("events/kprobes/{event}/enable"), "0");
    read("trace")
}

#[ktest]
fn a_kprobe_event_inside_fib_records_registers_and_the_stack() {
    let arg0 = arch::ftrace_abi::ARGUMENT_NAMES[0];
    let definition = format!("p:kprobes/fibmid kernel::workload::fib+{SITE_END} n=%{arg0} sp=$stack top=$stack0");
    write("kprobe_events", &definition);
    assert_eq!(read("kprobe_events"), format!("{definition}\n"));
    assert!(read("dynamic_events").contains(&definition));
    assert!(read("events/kprobes/fibmid/format").contains("field:unsigned long __probe_ip;"));
    let trace = traced_fib("fibmid");
    let lines = lines_of(&trace, "fibmid");
    let mut seen: Vec<u64> = lines.iter().map(|line| field(line, "n")).collect();
    seen.sort_unstable();
    assert_eq!(seen, fib_arguments(10), "{trace}");
    let at = format!("(kernel::workload::fib+{SITE_END:#x}/");
    for line in &lines {
        assert!(line.contains(&at), "{line}");
        // Recorded in the breakpoint exception, which Linux enters as an
        // NMI (that also counts as a hard interrupt): `Z`.
        assert_eq!(context_flag(line), Some('Z'), "{line}");
        let sp = field(line, "sp");
        assert!(sp != 0 && sp % 8 == 0, "{line}");
        if arch::regs::RETURN_ADDRESS == arch::ftrace_abi::ReturnAddress::Stack {
            // fib's first instruction: $stack0 is the return address, into
            // fib itself or into the test.
            let top = ftrace::symbols::kernel::table().unwrap().lookup(field(line, "top") as usize).map(|symbol| symbol.name);
            assert!(
                matches!(top, Some("kernel::workload::fib" | "kernel::tests::events::probe_events::traced_fib")),
                "{top:?}: {line}"
            );
        }
    }
    let profile = read("kprobe_profile");
    let row: Vec<&str> =
        profile.lines().find(|row| row.trim_start().starts_with("fibmid ")).unwrap().split_whitespace().collect();
    assert_eq!(row, ["fibmid", "177", "0"], "{profile}");
    write("kprobe_events", "-:fibmid");
    assert_eq!(read("kprobe_events"), "");
}

#[ktest]
fn a_kretprobe_event_records_the_return_value_and_an_entry_argument() {
    write("kprobe_events", "r:kprobes/fibret kernel::workload::fib ret=$retval n=$arg1");
    let trace = traced_fib("fibret");
    let lines = lines_of(&trace, "fibret");
    assert_eq!(lines.len(), 177, "{trace}");
    for line in &lines {
        assert_eq!(context_flag(line), Some('.'), "recorded in the task: {line}");
        assert_eq!(field(line, "ret"), fib_by_loop(field(line, "n")), "{line}");
        assert!(line.contains(" <- kernel::workload::fib)"), "{line}");
    }
    write("kprobe_events", "-:fibret");
}

#[ktest]
fn sym_addr_shows_a_probe_events_addresses() {
    write("kprobe_events", "p:kprobes/fibaddr kernel::workload::fib\nr:kprobes/fibaddrret kernel::workload::fib");
    write("options/sym-addr", "1");
    write("trace", "");
    write("events/kprobes/enable", "1");
    assert_eq!(fib(black_box(1)), 1);
    write("events/kprobes/enable", "0");
    let trace = read("trace");
    write("options/sym-addr", "0");
    write("kprobe_events", "-:fibaddr");
    write("kprobe_events", "-:fibaddrret");
    // As Linux's `seq_print_ip_sym`: ` <ADDRESS>` after every name.
    let fib_address = crate::workload::fib as fn(u64) -> u64 as usize;
    let entry = lines_of(&trace, "fibaddr");
    assert_eq!(entry.len(), 1, "{trace}");
    assert!(entry[0].ends_with(&format!("(kernel::workload::fib+0x0/{:#x} <{fib_address:016x}>)", fib_size())), "{trace}");
    let exit = lines_of(&trace, "fibaddrret");
    assert_eq!(exit.len(), 1, "{trace}");
    assert!(exit[0].ends_with(&format!(" <- kernel::workload::fib <{fib_address:016x}>)")), "{trace}");
    let ret = exit[0].split(" (").nth(1).unwrap().split(" <- ").next().unwrap();
    let (place, value) = ret.split_once(" <").unwrap();
    let value = usize::from_str_radix(value.strip_suffix('>').unwrap(), 16).unwrap();
    let table = ftrace::symbols::kernel::table().unwrap();
    let caller = table.lookup(value).unwrap();
    assert_eq!(place, format!("{}+{:#x}/{:#x}", caller.name, value - caller.address, caller.size), "{trace}");
}

/// A probe event's `print fmt` prints each type in Linux's format for it
/// (the place stays `%pS`, as `trace` shows it, for trace-cmd's reports);
/// a symbol's field is a `u64`, as Linux's format names it.
#[ktest]
fn a_probe_events_print_fmt_has_linuxs_type_formats() {
    write(
        "kprobe_events",
        "p:kprobes/fmtent kernel::workload::fib a=$arg1:u64 b=$arg1:s64 c=$arg1 s=$arg1:symbol\n\
         r:kprobes/fmtret kernel::workload::fib r=$retval:u32",
    );
    let print_fmt = |event: &str| {
        let format = read(&format!("events/kprobes/{event}/format"));
        String::from(format.lines().find_map(|line| line.strip_prefix("print fmt: ")).unwrap())
    };
    let entry = print_fmt("fmtent");
    let exit = print_fmt("fmtret");
    let symbol_field = read("events/kprobes/fmtent/format").lines().any(|line| line.starts_with("\tfield:u64 s;"));
    write("kprobe_events", "-:fmtent");
    write("kprobe_events", "-:fmtret");
    assert_eq!(entry, r#""(%pS) a=%Lu b=%Ld c=0x%Lx s=%pS", (void *)REC->__probe_ip, REC->a, REC->b, REC->c, REC->s"#);
    assert!(symbol_field, "a symbol is a u64 field");
    assert_eq!(exit, r#""(%pS <- %ps) r=%u", (void *)REC->__probe_ret_ip, (void *)REC->__probe_func, REC->r"#);
}

/// fib's size in bytes, as its symbol says.
fn fib_size() -> usize {
    let fib_address = crate::workload::fib as fn(u64) -> u64 as usize;
    ftrace::symbols::kernel::table().unwrap().lookup(fib_address).unwrap().size
}

#[ktest]
fn a_kprobe_event_at_fibs_entry_rides_on_the_ftrace_site() {
    let arg0 = arch::ftrace_abi::ARGUMENT_NAMES[0];
    write("kprobe_events", &format!("p:kprobes/fibent kernel::workload::fib n=%{arg0} m=$arg1"));
    write("trace", "");
    write("events/kprobes/fibent/enable", "1");
    let listed = read("enabled_functions");
    assert_eq!(fib(black_box(10)), 55);
    write("events/kprobes/fibent/enable", "0");
    let trace = read("trace");
    let after = read("enabled_functions");
    write("kprobe_events", "-:fibent");
    assert!(listed.lines().any(|line| line.starts_with("kernel::workload::fib ")), "{listed}");
    assert!(!after.lines().any(|line| line.starts_with("kernel::workload::fib ")), "{after}");
    // Recorded through the site's trampoline (a full save), not a
    // breakpoint: the task's own context, every call with its argument.
    let lines = lines_of(&trace, "fibent");
    let mut seen: Vec<u64> = lines.iter().map(|line| field(line, "n")).collect();
    seen.sort_unstable();
    assert_eq!(seen, fib_arguments(10), "{trace}");
    for line in &lines {
        assert_eq!(field(line, "m"), field(line, "n"), "%{arg0} is $arg1: {line}");
        assert!(line.contains("(kernel::workload::fib+0x0/"), "{line}");
        assert_eq!(context_flag(line), Some('.'), "recorded in the task, not a breakpoint: {line}");
    }
}

#[ktest]
fn bad_kprobe_definitions_are_refused_and_change_nothing() {
    write("kprobe_events", "p:kprobes/keep kernel::workload::fib n=$arg1");
    let before = read("kprobe_events");
    let fib_address = crate::workload::fib as fn(u64) -> u64 as usize;
    let size = ftrace::symbols::kernel::table().unwrap().lookup(fib_address).unwrap().size;
    // An offset inside an instruction (aarch64's are all 4 bytes).
    let inside = (SITE_END + 1..size)
        .find(|&offset| {
            matches!(
                kprobes::probe::resolve(&kprobes::Location::Address(fib_address + offset)),
                Err(kprobes::KprobeError::NotInstructionBoundary { .. })
            )
        })
        .unwrap();
    let bad = [
        "p:a no_such_function".into(),
        format!("p:a kernel::workload::fib+{inside}"),
        format!("p:a kernel::workload::fib+{size}"),
        "p:a kernel::workload::fib+1".into(),
        format!("r:a kernel::workload::fib+{SITE_END}"),
        "p:a ftrace::deferred::synchronize".into(),
        "p:a kernel::workload::fib $retval".into(),
        // As in Linux: past the entry, the argument registers are not the
        // arguments any more.
        format!("p:a kernel::workload::fib+{SITE_END} n=$arg1"),
        format!("p:a kernel::workload::fib+{SITE_END} n=+8($arg1)"),
        "p:a kernel::workload::fib %nosuchreg".into(),
        "p5:a kernel::workload::fib".into(),
        "r0:a kernel::workload::fib".into(),
        "f:a kernel::workload::fib".into(),
        "q:a kernel::workload::fib".into(),
        "p:1bad kernel::workload::fib".into(),
        "p:a kernel::workload::fib+zz".into(),
        "p:kprobes/keep kernel::workload::fib".into(),
        "-:nosuch".into(),
    ];
    write("error_log", "");
    for text in &bad {
        let result = tracefs::write("kprobe_events", text, FilterMode::Append);
        assert!(matches!(result, Err(TracefsError::Invalid(_))), "{text}: {result:?}");
    }
    assert_eq!(read("kprobe_events"), before);
    // error_log keeps the last 8, in Linux's shape.
    let log = read("error_log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 8 * 3, "{log}");
    let last = lines[lines.len() - 3..].to_vec();
    assert!(last[0].starts_with('[') && last[0].contains("] trace_kprobe: error: "), "{log}");
    assert_eq!(last[1], "  Command: p:kprobes/keep kernel::workload::fib", "a failed removal is not logged, as in Linux: {log}");
    assert_eq!(last[2], "             ^", "under the word the message quotes");
    // Emptying the file while one of its events is enabled is refused, and
    // not logged either (Linux answers EBUSY).
    write("events/kprobes/keep/enable", "1");
    let busy = tracefs::write("kprobe_events", "", FilterMode::Replace);
    write("events/kprobes/keep/enable", "0");
    assert!(busy.is_err());
    assert_eq!(read("error_log"), log, "the refused emptying is not logged");
    let unknown = tracefs::write("kprobe_events", "p:a nosuch_function", FilterMode::Append);
    assert!(unknown.is_err());
    let fetch = tracefs::write("kprobe_events", "p:fib kernel::workload::fib fib=%bogus", FilterMode::Append);
    assert!(fetch.is_err());
    let log = read("error_log");
    let carets: Vec<&str> = log.lines().rev().step_by(3).take(2).collect();
    // "  Command: " is 11 columns; `%bogus` starts 32 into its command
    // (after the name `fib`, which the symbol also holds), `nosuch_function`
    // 4 into its.
    assert_eq!(carets, [format!("{:43}^", ""), format!("{:15}^", "")], "under %bogus, then nosuch_function: {log}");
    // A refused place: under it, though the message prints it its own way
    // (an address inside an instruction, as the function holding it).
    let inside_address = format!("{:#x}", fib_address + inside);
    for place in ["0x0", "kernel::workload::fib+3", &inside_address] {
        assert!(tracefs::write("kprobe_events", &format!("p:a {place}"), FilterMode::Append).is_err());
    }
    assert!(tracefs::write("kprobe_events", "r:a kernel::workload::fib+8", FilterMode::Append).is_err());
    let log = read("error_log");
    let carets: Vec<&str> = log.lines().rev().step_by(3).take(4).collect();
    assert!(carets.len() == 4 && carets.iter().all(|caret| *caret == format!("{:15}^", "")), "under each place: {log}");
    // A refused `$` variable: under it.
    let variables = [
        String::from("p:a kernel::workload::fib c=$comm $arg9"),
        format!("p:a kernel::workload::fib+{SITE_END} c=$comm n=$arg1"),
    ];
    for command in &variables {
        assert!(tracefs::write("kprobe_events", command, FilterMode::Append).is_err());
    }
    let log = read("error_log");
    let carets: Vec<String> = log.lines().rev().step_by(3).take(2).map(String::from).collect();
    let under_dollar = |command: &str| format!("{:width$}^", "", width = 11 + command.rfind('$').unwrap());
    assert_eq!(carets, [under_dollar(&variables[1]), under_dollar(&variables[0])], "{log}");
    // A refused filter: Linux's words, and its caret (past the place, as
    // Linux's comparison parser counts).
    for (filter, why, caret) in [
        ("prev_pid == 0)", "Too few '('", 13),
        ("prev_pid == abc", "Invalid value (did you forget quotes)?", 13),
        ("prev_comm == 3", "Expecting string field", 14),
        ("prev_pid == 1 && bogus == 2", "Field not found", 23),
    ] {
        let bad_filter = tracefs::write("events/sched/sched_switch/filter", filter, FilterMode::Replace);
        assert!(bad_filter.is_err(), "{filter}");
        let log = read("error_log");
        let entry: Vec<&str> = log.lines().rev().take(3).collect();
        assert!(entry[2].ends_with(&format!("] event filter parse error: error: {why}")), "{log}");
        assert_eq!(entry[1], format!("  Command: {filter}"), "{log}");
        assert_eq!(entry[0], format!("{:width$}^", "", width = 11 + caret), "{log}");
    }
    assert_eq!(read("events/sched/sched_switch/filter"), "none\n", "each refusal changed nothing");
    write("error_log", "");
    assert_eq!(read("error_log"), "");
    write("kprobe_events", "");
    assert_eq!(read("kprobe_events"), "");
}
