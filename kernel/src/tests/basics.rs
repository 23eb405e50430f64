//! The base the tracing work stands on: heap, exceptions, timer, backtraces,
//! console input.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use ktest_macros::ktest;

use crate::shell::{self, ShellError};

#[ktest]
fn heap_round_trip() {
    let before = crate::heap::stats();
    {
        let squares: Vec<u64> = (0..10_000u64).map(|i| i * i).collect();
        assert_eq!(squares[9_999], 9_999 * 9_999);
        let mut map = BTreeMap::new();
        for i in 0..1_000u32 {
            map.insert(i.wrapping_mul(2_654_435_761), i);
        }
        assert_eq!(map.len(), 1_000);
        assert_eq!(map.get(&7u32.wrapping_mul(2_654_435_761)), Some(&7));
        assert!(crate::heap::stats().used > before.used);
    }
    assert_eq!(crate::heap::stats().used, before.used, "everything freed again");
}

#[ktest]
fn breakpoint_is_reported_and_execution_resumes() {
    let count = arch::fault::breakpoint_count();
    let mut after = 0;
    arch::cpu::breakpoint();
    after += 1;
    arch::cpu::breakpoint();
    after += 1;
    assert_eq!(arch::fault::breakpoint_count(), count + 2);
    assert_eq!(after, 2, "the code after each breakpoint ran");
    assert_ne!(arch::fault::last_breakpoint(), 0);
}

#[ktest]
fn fault_tolerant_read_reports_the_faulting_address() {
    let address = arch::mm::UNMAPPED_ADDRESS + 0x1230;
    let recovered = arch::fault::recovered_count();
    assert_eq!(arch::fault::read_u64_nofault(address), None);
    assert_eq!(arch::fault::recovered_count(), recovered + 1);
    let fault = arch::fault::last_recovered().expect("a recovered fault");
    assert_eq!(fault.address, Some(address));
    // A mapped address reads normally.
    let value: u64 = 0x1122_3344_5566_7788;
    assert_eq!(arch::fault::read_u64_nofault(&value as *const u64 as usize), Some(value));
}

#[ktest]
fn fault_tolerant_read_refuses_device_registers_and_null() {
    let recovered = arch::fault::recovered_count();
    // A mapped device page: read, it would answer (and could change the
    // device); refused before any read.
    let device = arch::mm::DEVICE_MEMORY.start + 0x1000;
    assert_eq!(arch::fault::read_u64_nofault(device), None);
    assert_eq!(arch::fault::read_u64_nofault(arch::mm::DEVICE_MEMORY.end - 4), None, "a read ending past the registers");
    assert_eq!(arch::fault::recovered_count(), recovered, "refused without touching the device");
    let mut byte = [0u8; 1];
    assert_eq!(arch::fault::read_nofault(0, &mut byte), Err(1), "a null pointer reads as a fault");
    assert_eq!(arch::fault::read_nofault(usize::MAX - 3, &mut [0u8; 8]), Err(8), "a range wrapping around");
}

#[ktest(should_panic = "address 0x1000000008")]
fn unhandled_page_fault_reports_the_address() {
    let address = (arch::mm::UNMAPPED_ADDRESS + 8) as *const u64;
    // SAFETY: not safe at all, on purpose: the read faults and the fault
    // handler panics, which this test expects.
    let value = unsafe { core::ptr::read_volatile(address) };
    core::hint::black_box(value);
}

/// Recurses with a 1 KiB frame until the stack runs out.
#[inline(never)]
fn exhaust_stack(depth: u64) -> u64 {
    let frame = core::hint::black_box([depth; 128]);
    if depth == u64::MAX {
        return 0;
    }
    exhaust_stack(core::hint::black_box(depth + 1)) + frame[(depth % 128) as usize]
}

// Without the guard page (and, on aarch64, the overflow stack the exception
// vectors switch to) this would run into .bss, or fault forever.
#[ktest(should_panic = "kernel stack overflow")]
fn a_kernel_stack_overflow_is_caught_and_reported() {
    core::hint::black_box(exhaust_stack(core::hint::black_box(0)));
}

#[ktest(should_panic)]
fn any_expected_panic_passes() {
    panic!("any message");
}

#[ktest(should_panic = "deliberate")]
fn expected_panic_passes() {
    panic!("deliberate panic");
}

#[ktest]
fn timer_ticks_advance() {
    let start = arch::time::ticks();
    let start_cycles = arch::timer::cycles();
    let mut spins = 0u64;
    while arch::time::ticks() < start + 10 {
        arch::cpu::wait_for_interrupt();
        spins += 1;
        assert!(spins < 1_000_000, "timer stalled at {} ticks", arch::time::ticks());
    }
    assert!(arch::timer::cycles() > start_cycles, "cycle counter advances");
    assert!(arch::timer::cycles_per_second() > 0);
}

#[inline(never)]
fn outer_frame() -> Vec<usize> {
    core::hint::black_box(middle_frame())
}

#[inline(never)]
fn middle_frame() -> Vec<usize> {
    core::hint::black_box(crate::backtrace::capture())
}

#[ktest]
fn backtrace_holds_the_callers() {
    let frames = outer_frame();
    // capture() returns into middle_frame, which returns into outer_frame.
    let within = |address: usize, function: usize| address > function && address < function + 0x100;
    let middle = middle_frame as *const () as usize;
    let outer = outer_frame as *const () as usize;
    assert!(frames.len() >= 3, "frames: {frames:x?}");
    assert!(within(frames[0], middle), "frame 0 {:#x} not in middle_frame {middle:#x}", frames[0]);
    assert!(within(frames[1], outer), "frame 1 {:#x} not in outer_frame {outer:#x}", frames[1]);
    let this = backtrace_holds_the_callers as *const () as usize;
    assert!(within(frames[2], this), "frame 2 {:#x} not in the test {this:#x}", frames[2]);
}

#[ktest]
fn shell_rejects_bad_input() {
    use ::shell::{LineError, LineEvent, LineReader};
    let mut reader = LineReader::<{ shell::MAX_LINE }>::new();
    let mut results = Vec::new();
    let long = [b'x'; shell::MAX_LINE + 1];
    for byte in long.iter().chain(b"\n\x01\n\xc3\x28\nhelp\n") {
        match reader.push(*byte) {
            LineEvent::Line(line) => results.push(Ok(alloc::string::String::from(line))),
            LineEvent::Rejected(error) => results.push(Err(error)),
            _ => {}
        }
    }
    assert_eq!(
        results,
        [
            Err(LineError::TooLong { limit: shell::MAX_LINE }),
            Err(LineError::ControlByte(1)),
            Err(LineError::NotUtf8),
            Ok("help".into()),
        ]
    );
    assert!(matches!(shell::execute("frobnicate"), Err(ShellError::UnknownCommand(_))));
    assert!(matches!(shell::execute("uptime now"), Err(ShellError::Usage(_))));
    assert!(matches!(shell::execute("echo 'unterminated"), Err(ShellError::Failed(_))));
    assert!(matches!(shell::execute("meminfo > x"), Err(ShellError::NoRedirect(_))));
    assert!(shell::execute("").is_ok());
    assert!(shell::execute("echo hello from a test").is_ok());
}

#[ktest(should_panic = "address")]
fn kernel_text_is_read_only() {
    let text = heap_round_trip as *const () as *mut u8;
    // SAFETY: not safe, on purpose: text is mapped read-only, so the write
    // faults and the handler panics, which this test expects.
    unsafe { core::ptr::write_volatile(text, 0xcc) };
}

/// Output going into a file is held whole before the write: past
/// `HELD_MAX` bytes it stops with an error instead of running the heap out
/// (`cat trace_pipe | grep . > trace_marker` would never end otherwise).
#[ktest]
fn a_pipeline_into_a_file_holds_a_bounded_amount() {
    use core::fmt::Write;
    let mut out = shell::output::Output::to_text(::shell::Pipeline::new(alloc::vec![]));
    let line = alloc::format!("{}\n", "y".repeat(1023));
    assert!((0..::shell::HELD_MAX / 1024).all(|_| out.write_str(&line).is_ok()));
    assert!(!out.is_closed(), "exactly the bound fits");
    let _ = out.write_str(&line);
    assert!(out.is_closed(), "the line past the bound closes the output");
    assert!(out.write_str(&line).is_err());
    assert!(matches!(out.finish(), Err(ShellError::Failed(message)) if message.contains("4096 KiB")));
    let mut out = shell::output::Output::to_text(::shell::Pipeline::new(alloc::vec![]));
    out.write_str("fits\n").unwrap();
    assert_eq!(out.finish().unwrap().as_deref(), Some("fits\n"));
}

#[ktest]
fn output_pipes_through_grep_head_tail_and_wc_as_on_linux() {
    let run = |line: &str| shell::execute_to_text(line).unwrap_or_else(|error| panic!("{line}: {error}"));
    let functions = run("cat available_filter_functions");
    let count = |pred: &dyn Fn(&str) -> bool| functions.lines().filter(|line| pred(line)).count();
    // grep and its options against the same listing filtered here.
    assert_eq!(run("cat available_filter_functions | grep '^kernel::workload::fib$'"), "kernel::workload::fib\n");
    assert_eq!(
        run("cat available_filter_functions | grep -c workload"),
        alloc::format!("{}\n", count(&|line| line.contains("workload")))
    );
    assert_eq!(
        run("grep -vc workload available_filter_functions"),
        alloc::format!("{}\n", count(&|line| !line.contains("workload"))),
        "a filter first reads its files"
    );
    assert_eq!(run("cat available_filter_functions | wc -l"), alloc::format!("{}\n", functions.lines().count()));
    let first: alloc::vec::Vec<&str> = functions.lines().take(3).collect();
    assert_eq!(run("cat available_filter_functions | head -n 3"), first.join("\n") + "\n");
    let last = functions.lines().last().unwrap();
    assert_eq!(run("cat available_filter_functions | tail -1"), alloc::format!("{last}\n"));
    // A pipeline's output redirected into a tracefs file: what a user does
    // to trace what grep found. A refused pattern (no intervals here)
    // writes nothing.
    let refused = shell::execute("cat available_filter_functions | grep -E '^kernel::workload::f{1,2}ib$' > set_ftrace_filter");
    assert!(matches!(refused, Err(ShellError::Failed(ref e)) if e.contains("intervals")), "{refused:?}");
    assert_eq!(run("cat set_ftrace_filter"), "#### all functions enabled ####\n");
    run("grep -E '^kernel::workload::(fib|run)$' available_filter_functions > set_ftrace_filter");
    let mut traced: alloc::vec::Vec<alloc::string::String> =
        run("cat set_ftrace_filter").lines().map(alloc::string::String::from).collect();
    traced.sort();
    assert_eq!(traced, ["kernel::workload::fib", "kernel::workload::run"]);
    run("echo > set_ftrace_filter");
    // A satisfied head stops the producer: a trace_pipe that never ends
    // by itself ends after its lines.
    run("echo one > trace_marker");
    run("echo two > trace_marker");
    let piped = run("cat trace_pipe | head -1");
    assert!(piped.ends_with("tracing_mark_write: one\n") && piped.lines().count() == 1, "{piped}");
    // The consuming read took whole pages, as Linux's does: what head did
    // not print is gone with them.
    assert_eq!(run("cat trace | grep -c tracing_mark_write"), "0\n");
    run("echo > trace");
    // wc names the one file it read; tail -n +N starts at line N.
    assert_eq!(
        run("wc -l available_filter_functions"),
        alloc::format!("{} available_filter_functions\n", functions.lines().count())
    );
    let skipped: alloc::vec::Vec<&str> = functions.lines().skip(2).collect();
    assert_eq!(run("cat available_filter_functions | tail -n +3"), skipped.join("\n") + "\n");
    // An unreadable file is still reported when a later one's reader stops.
    assert!(matches!(shell::execute_to_text("cat nosuch available_filter_functions | head -1"), Err(ShellError::Failed(_))));
    // Several definitions piped into dynamic_events: a command a line, as
    // Linux reads the file (the output is whole before the write).
    run("echo 'f:pipeone kernel::workload::fib n=$arg1' >> dynamic_events");
    run("echo 'f:pipetwo kernel::workload::fib%return r=$retval' >> dynamic_events");
    let defined = run("cat dynamic_events");
    run("cat dynamic_events | grep pipe > dynamic_events");
    assert_eq!(run("cat dynamic_events"), defined, "both defined again");
    run("echo > dynamic_events");
    // A refused line stops the write, the lines before it done, and is
    // logged alone, under its own parser's name.
    let refused = crate::tracefs::write(
        "dynamic_events",
        "f:first kernel::workload::fib\np:kprobes/second nosuch\n",
        ftrace::FilterMode::Append,
    );
    assert!(refused.is_err());
    assert_eq!(run("cat dynamic_events"), "f:fprobes/first kernel::workload::fib\n");
    let log = run("cat error_log");
    let last: alloc::vec::Vec<&str> = log.lines().rev().take(3).collect();
    assert!(last[2].ends_with("trace_kprobe: error: unknown symbol 'nosuch'"), "{log}");
    assert_eq!(last[1], "  Command: p:kprobes/second nosuch", "{log}");
    run("echo > dynamic_events");
    // A missing target is found before the pipeline runs: the consuming
    // read takes nothing.
    run("echo kept > trace_marker");
    assert!(matches!(shell::execute_to_text("cat trace_pipe | head -1 > nosuch"), Err(ShellError::Failed(_))));
    assert_eq!(run("cat trace | grep -c tracing_mark_write"), "1\n");
    run("echo > trace");
    // Bad pipelines are refused, and change nothing.
    for bad in [
        "cat trace |",
        "| wc",
        "cat trace | sort",
        "cat trace | grep",
        "cat trace | grep '[x'",
        "cat trace | head -n x",
        "grep fib",
        "cat trace | grep fib trace",
        "bench | wc -l",
        "grep fib trace README",
    ] {
        assert!(matches!(shell::execute(bad), Err(ShellError::Failed(_))), "{bad} is refused");
    }
}
