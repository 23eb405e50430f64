//! The output's host tests: context columns, functions, and the
//! function_graph tracer's lines (`graph`).

use super::*;
use crate::events::record::TRACE_FN;
use alloc::string::String;

/// Two functions: fib at 0x1000 (0x60 bytes), run at 0x2000 (0x80 bytes).
pub(crate) fn test_names(address: usize) -> Option<Symbol<'static>> {
    [
        Symbol { name: "kernel::workload::fib", address: 0x1000, size: 0x60 },
        Symbol { name: "kernel::workload::run", address: 0x2000, size: 0x80 },
    ]
    .into_iter()
    .find(|symbol| symbol.contains(address))
}

#[test]
fn func_repeats_line_matches_linux() {
    let names = test_names;
    let comms = |_: i32| None;
    let event = FuncRepeatsEvent {
        common: Common { kind: crate::events::record::TRACE_FUNC_REPEATS, flags: 0, preempt_count: 0, pid: 0 },
        ip: 0x1000,
        parent_ip: 0x1010,
        count: 3,
        delta: 2_000_600,
    };
    let decoded = FuncRepeatsEvent::decode(&crate::events::record::FixedEvent::to_bytes(&event));
    assert_eq!(decoded, Some(event), "the 48-bit delta split and joined again");
    let mut line = String::new();
    write_func_repeats(&mut line, When::at(0, 12_345_678_901), &event, &names, &comms, FunctionOptions::default()).unwrap();
    assert_eq!(
        line,
        "          <idle>-0       [000] .....    12.345679: kernel::workload::fib <-kernel::workload::fib (repeats: 3, last_ts:    12.343678)\n"
    );
}

#[test]
fn function_line_matches_linux() {
    let names = test_names;
    let event = FunctionEvent {
        common: Common { kind: TRACE_FN, flags: flags::IRQS_OFF, preempt_count: 0, pid: 0 },
        ip: 0x1000,
        parent_ip: 0x201c,
    };
    let mut line = String::new();
    let comms = |_: i32| None;
    write_function(&mut line, When::at(0, 12_345_678_901), &event, &names, &comms, FunctionOptions::default()).unwrap();
    assert_eq!(line, "          <idle>-0       [000] d....    12.345679: kernel::workload::fib <-kernel::workload::run\n");
    let mut unknown = String::new();
    let event = FunctionEvent { parent_ip: 0x9999, ..event };
    write_function(&mut unknown, When::at(1, 0), &event, &names, &comms, FunctionOptions::default()).unwrap();
    assert!(unknown.ends_with("kernel::workload::fib <-0x9999\n"), "{unknown}");

    // `irq-info`, `context-info` and `sym-addr` change it as Linux's.
    let event = FunctionEvent { parent_ip: 0x201c, ..event };
    let line = |options: FunctionOptions| {
        let mut line = String::new();
        write_function(&mut line, When::at(0, 12_345_678_901), &event, &names, &comms, options).unwrap();
        line
    };
    let plain = FunctionOptions::default();
    let no_irq = ContextOptions { irq_info: false, ..plain.context };
    assert_eq!(
        line(FunctionOptions { context: no_irq, ..plain }),
        "          <idle>-0       [000]     12.345679: kernel::workload::fib <-kernel::workload::run\n"
    );
    let no_context = ContextOptions { context_info: false, ..plain.context };
    assert_eq!(line(FunctionOptions { context: no_context, ..plain }), "kernel::workload::fib <-kernel::workload::run\n");
    assert_eq!(
        line(FunctionOptions { context: no_context, sym_addr: true, ..plain }),
        "kernel::workload::fib <0000000000001000> <-kernel::workload::run <000000000000201c>\n"
    );
    let raw = ContextOptions { raw_time: true, irq_info: false, ..plain.context };
    assert_eq!(
        line(FunctionOptions { context: raw, print_parent: false, ..plain }),
        "          <idle>-0       [000]   12345678901: kernel::workload::fib\n"
    );
}

#[test]
fn flags_columns() {
    let common = |flags| Common { kind: TRACE_FN, flags, preempt_count: 0, pid: 0 };
    assert_eq!(&latency_flags(&common(0)), b".....");
    assert_eq!(&latency_flags(&common(flags::IRQS_OFF | flags::HARDIRQ)), b"d.h..");
    let mut header = String::new();
    let stats = Stats { entries: 15, written: 15, overrun: 0, read: 0, dropped: 0 };
    write_header(&mut header, "function", stats, 1, ContextOptions::default()).unwrap();
    assert!(header.starts_with("# tracer: function\n#\n# entries-in-buffer/entries-written: 15/15   #P:1\n"));
    assert!(header.ends_with(
        "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n#              | |         |   |||||     |         |\n"
    ));
    let mut header = String::new();
    write_header(&mut header, "function", stats, 1, ContextOptions { irq_info: false, ..ContextOptions::default() }).unwrap();
    assert!(!header.contains("irqs-off"), "{header}");
    assert!(header
        .ends_with("#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n#              | |         |         |         |\n"));
    let mut header = String::new();
    write_header(&mut header, "function", stats, 1, ContextOptions { context_info: false, ..ContextOptions::default() }).unwrap();
    assert_eq!(header, "# tracer: function\n#\n");
}

#[test]
fn latency_format_lines_and_header_match_linux() {
    let names = test_names;
    let comms = |pid: i32| (pid == 7).then(|| String::from("kworker/0:1"));
    let common = Common { kind: TRACE_FN, flags: flags::IRQS_OFF | flags::HARDIRQ, preempt_count: 1, pid: 7 };
    let event = FunctionEvent { common, ip: 0x1000, parent_ip: 0x201c };
    let latency = FunctionOptions {
        context: ContextOptions { latency: Some(LatencyStart { time: 1_000_000_000, cpu: 1 }), ..ContextOptions::default() },
        ..FunctionOptions::default()
    };
    let line = |when: When, options: FunctionOptions| {
        let mut line = String::new();
        write_function(&mut line, when, &event, &names, &comms, options).unwrap();
        line
    };
    // 12.4995 us after the start, the next line 10.501 us later: `+`.
    let when = When { cpu: 1, time: 1_000_012_499, next: 1_000_023_000, index: 0 };
    assert_eq!(line(when, latency), "kworker/-7         1d.h1.   12us+: kernel::workload::fib <-kernel::workload::run\n");
    // The last line (no next) has no mark; 100.5 us is `!`.
    assert_eq!(
        line(When::at(0, 1_000_000_000), latency),
        "kworker/-7         0d.h1.    0us : kernel::workload::fib <-kernel::workload::run\n"
    );
    assert!(line(When { next: 1_000_100_501, ..When::at(0, 1_000_000_000) }, latency).contains(" 0us!: "));
    // A clock that is no time: counts, no mark; no context-info: nothing.
    let raw = ContextOptions { raw_time: true, ..latency.context };
    assert!(line(when, FunctionOptions { context: raw, ..latency }).starts_with("kworker/-7         1d.h1. 12499: "));
    let bare = ContextOptions { context_info: false, ..latency.context };
    assert_eq!(line(when, FunctionOptions { context: bare, ..latency }), "kernel::workload::fib <-kernel::workload::run\n");

    let mut header = String::new();
    let stats = Stats { entries: 6, written: 9, overrun: 3, read: 0, dropped: 0 };
    write_header(&mut header, "function", stats, 2, latency.context).unwrap();
    let lines: alloc::vec::Vec<&str> = header.lines().collect();
    assert_eq!(lines[..3], ["# tracer: function", "#", &alloc::format!("# function latency trace v1.1.5 on {RELEASE}")]);
    assert_eq!(lines[3], alloc::format!("# {}", "-".repeat(68)));
    assert_eq!(lines[4], "# latency: 0 us, #6/9, CPU#1 | (M:PREEMPT VP:0, KP:0, SP:0 HP:0 #P:2)");
    assert_eq!(lines[6], "#    | task: -0 (uid:0 nice:0 policy:0 rt_prio:0)");
    assert_eq!(lines[8..10], ["#", "#                    _------=> CPU#            "]);
    assert_eq!(lines[17], "#     \\   /        ||||||  \\    |    /       ");
    assert_eq!(lines.len(), 18);
    // Over an empty buffer, the tracer's name alone.
    let mut header = String::new();
    write_header(&mut header, "function", Stats::default(), 2, latency.context).unwrap();
    assert_eq!(header, "# tracer: function\n#\n");

    // verbose: the long form, in milliseconds; the banner without the
    // legend.
    let verbose = FunctionOptions { context: ContextOptions { verbose: true, ..latency.context }, ..latency };
    assert_eq!(
        line(When { index: 26, ..when }, verbose),
        "     kworker/0:1       7   1 9 00000001 0000001a [000f424c] 0.012ms (+0.011ms): kernel::workload::fib <-kernel::workload::run\n"
    );
    let raw = FunctionOptions { context: ContextOptions { raw_time: true, ..verbose.context }, ..verbose };
    assert!(line(when, raw).contains(" [000000003b9afad3] 12499 (+10501): "), "{}", line(when, raw));
    let mut header = String::new();
    write_header(&mut header, "function", stats, 2, verbose.context).unwrap();
    assert_eq!(header.lines().count(), 9, "{header}");
    let mut header = String::new();
    write_header(&mut header, "function", stats, 2, ContextOptions { verbose: true, ..ContextOptions::default() }).unwrap();
    assert_eq!(header, "# tracer: function\n#\n", "verbose without latency-format: no column header");
}

#[test]
fn record_tgid_adds_linux_tgid_column() {
    let names = test_names;
    let comms = |_: i32| None;
    let tgids: Tgids = |pid| (pid == 7).then_some(7);
    let tgid = ContextOptions { tgids: Some(tgids), ..ContextOptions::default() };
    let event =
        FunctionEvent { common: Common { kind: TRACE_FN, flags: 0, preempt_count: 0, pid: 7 }, ip: 0x1000, parent_ip: 0x201c };
    let line = |event: &FunctionEvent, context| {
        let mut line = String::new();
        let options = FunctionOptions { context, ..FunctionOptions::default() };
        write_function(&mut line, When::at(0, 12_345_678_901), event, &names, &comms, options).unwrap();
        line
    };
    assert_eq!(
        line(&event, tgid),
        "           <...>-7       (      7) [000] .....    12.345679: kernel::workload::fib <-kernel::workload::run\n"
    );
    let idle = FunctionEvent { common: Common { pid: 0, ..event.common }, ..event };
    assert!(line(&idle, tgid).starts_with("          <idle>-0       (-------) [000] ....."), "{}", line(&idle, tgid));
    let stats = Stats { entries: 1, written: 1, overrun: 0, read: 0, dropped: 0 };
    let header = |context| {
        let mut header = String::new();
        write_header(&mut header, "function", stats, 1, context).unwrap();
        header
    };
    assert!(
        header(tgid).ends_with(concat!(
            "#                                          _-----=> irqs-off/BH-disabled\n",
            "#                                         / _----=> need-resched\n",
            "#                                        | / _---=> hardirq/softirq\n",
            "#                                        || / _--=> preempt-depth\n",
            "#                                        ||| / _-=> migrate-disable\n",
            "#                                        |||| /     delay\n",
            "#           TASK-PID       TGID    CPU#  |||||  TIMESTAMP  FUNCTION\n",
            "#              | |           |       |   |||||     |         |\n",
        )),
        "{}",
        header(tgid)
    );
    assert!(
        header(ContextOptions { irq_info: false, ..tgid }).ends_with(concat!(
            "#           TASK-PID       TGID    CPU#     TIMESTAMP  FUNCTION\n",
            "#              | |           |       |         |         |\n",
        )),
        "{}",
        header(ContextOptions { irq_info: false, ..tgid })
    );
}

mod graph {
    use super::super::graph::*;
    use super::super::*;
    use crate::events::record::{Event, GraphEntryEvent, GraphExitEvent, TRACE_GRAPH_ENT, TRACE_GRAPH_RET};
    use alloc::string::String;
    use alloc::vec;
    use alloc::vec::Vec;

    fn entry(depth: i32) -> Event {
        let common = Common { kind: TRACE_GRAPH_ENT, ..Common::default() };
        Event::GraphEntry(GraphEntryEvent { common, func: 0x1000, depth })
    }

    fn exit(depth: i32, calltime: u64, rettime: u64, retval: u64) -> Event {
        let common = Common { kind: TRACE_GRAPH_RET, ..Common::default() };
        Event::GraphExit(GraphExitEvent { common, func: 0x1000, retval, depth, overrun: 0, calltime, rettime })
    }

    #[test]
    fn nested_and_leaf_calls_as_linux_prints_them() {
        let names = super::test_names;
        let events: Vec<GraphLine> = vec![
            (0, 0, entry(0), &[]),
            (1, 0, entry(1), &[]),
            (2, 0, exit(1, 1_000, 1_812, 1), &[]),
            (3, 0, exit(0, 0, 2_431, 5), &[]),
        ];
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |_: i32| None;
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        assert_eq!(
            text,
            " 0)               |  kernel::workload::fib() {\n\
             \x20\x200)   0.812 us    |    kernel::workload::fib();\n\
             \x200)   2.431 us    |  }\n"
                .replace("\x20\x200)", " 0)")
        );
        let print = |options: GraphOptions| {
            let mut text = String::new();
            write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, options, &other).unwrap();
            text
        };
        let with_retval = print(GraphOptions { retval: true, ..GraphOptions::default() });
        assert!(with_retval.contains("kernel::workload::fib(); /* ret=0x1 */\n"), "{with_retval}");
        assert!(with_retval.ends_with("|  } /* kernel::workload::fib ret=0x5 */\n"), "{with_retval}");
        // funcgraph-tail: every closing brace names its function.
        let with_tail = print(GraphOptions { tail: true, ..GraphOptions::default() });
        assert!(with_tail.ends_with(" 0)   2.431 us    |  } /* kernel::workload::fib */\n"), "{with_tail}");
        assert!(with_tail.contains("|    kernel::workload::fib();\n"), "a leaf has no brace: {with_tail}");
    }

    #[test]
    fn a_return_without_its_opening_line_names_its_function() {
        let names = super::test_names;
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |_: i32| None;
        // CPU 1's call at depth 0 began before the buffer's first event;
        // CPU 0's call is opened, then closed after CPU 1's return.
        let events: Vec<GraphLine> = vec![
            (0, 0, entry(0), &[]),
            (1, 0, entry(1), &[]),
            (2, 0, exit(1, 1_000, 1_812, 0), &[]),
            (3, 1, exit(0, 0, 900, 0), &[]),
            (4, 0, exit(0, 0, 2_431, 0), &[]),
        ];
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], " 1)   0.900 us    |  } /* kernel::workload::fib */", "{text}");
        assert_eq!(lines[3], " 0)   2.431 us    |  }", "{text}");
    }

    #[test]
    fn graph_options_shape_the_columns_as_linux_does() {
        let names = super::test_names;
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |pid: i32| (pid == 5).then(|| String::from("fib-worker"));
        let of_pid_5 = |record: Event| match record {
            Event::GraphEntry(mut e) => {
                e.common.pid = 5;
                Event::GraphEntry(e)
            }
            Event::GraphExit(mut e) => {
                e.common.pid = 5;
                Event::GraphExit(e)
            }
            other => other,
        };
        let errno = (-22i64) as u64;
        let events: Vec<GraphLine> = vec![
            (0, 0, of_pid_5(entry(0)), &[]),
            (1, 0, of_pid_5(exit(0, 0, 812, errno)), &[]),
            (2_500_000_000, 0, of_pid_5(entry(0)), &[]),
        ];
        let print = |options: GraphOptions| {
            let mut text = String::new();
            write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, options, &other).unwrap();
            let mut header = String::new();
            write_graph_header(&mut header, options, Stats::default(), 1, 0).unwrap();
            (String::from(header.lines().nth(2).unwrap()), String::from(text.lines().next().unwrap()))
        };
        let plain = GraphOptions::default();
        assert_eq!(
            print(GraphOptions { retval: true, ..plain }).1,
            " 0)   0.812 us    |  kernel::workload::fib(); /* ret=-22 */",
            "an error code in decimal"
        );
        assert!(print(GraphOptions { retval: true, retval_hex: true, ..plain }).1.ends_with("/* ret=0xffffffffffffffea */"));
        let int_errno = GraphOptions { retval: true, ..plain };
        let mut text = String::new();
        let int_events: Vec<GraphLine> = vec![(0, 0, entry(0), &[]), (1, 0, exit(0, 0, 812, 0xffff_ffea), &[])];
        write_graph(&mut GraphState::default(), &mut text, &int_events, &names, &comms, int_errno, &other).unwrap();
        assert!(text.ends_with("/* ret=-22 */\n"), "an int's error code too: {text}");
        assert_eq!(
            print(GraphOptions { duration: false, ..plain }),
            ("# CPU               FUNCTION CALLS".into(), " 0) kernel::workload::fib();".into())
        );
        assert_eq!(
            print(GraphOptions { cpu: false, ..plain }),
            ("#  DURATION                  FUNCTION CALLS".into(), "  0.812 us    |  kernel::workload::fib();".into())
        );
        let (header, line) = print(GraphOptions { proc: true, ..plain });
        assert_eq!(header, "# CPU  TASK/PID         DURATION                  FUNCTION CALLS");
        assert_eq!(line, " 0)   fib-wor-5    |   0.812 us    |  kernel::workload::fib();", "the name cut to 7, centred in 14");
        let (header, line) = print(GraphOptions { abstime: true, ..plain });
        assert_eq!(header, "#     TIME        CPU  DURATION                  FUNCTION CALLS");
        assert_eq!(line, "    0.000000 |   0)   0.812 us    |  kernel::workload::fib();");
        // context-info off: no columns before the function, no column header.
        let bare = GraphOptions { context_info: false, proc: true, abstime: true, ..plain };
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, bare, &other).unwrap();
        assert_eq!(text.lines().next(), Some("kernel::workload::fib();"));
        let mut header = String::new();
        write_graph_header(&mut header, bare, Stats::default(), 1, 0).unwrap();
        assert_eq!(header, "# tracer: function_graph\n#\n");

        // latency-format: the flags after the task, under their legend.
        let latency = GraphOptions { latency: true, proc: true, ..plain };
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, latency, &other).unwrap();
        assert_eq!(text.lines().next().unwrap(), " 0)   fib-wor-5    |  ..... |   0.812 us    |  kernel::workload::fib();");
        let mut header = String::new();
        let stats = Stats { entries: 3, written: 3, ..Stats::default() };
        write_graph_header(&mut header, latency, stats, 2, 0).unwrap();
        let lines: Vec<&str> = header.lines().collect();
        assert_eq!(lines[2], alloc::format!("# function_graph latency trace v1.1.5 on {RELEASE}"));
        assert_eq!(lines[4], "# latency: 0 us, #3/3, CPU#0 | (M:PREEMPT VP:0, KP:0, SP:0 HP:0 #P:2)");
        assert_eq!(lines[9], alloc::format!("#{}  _-----=> irqs-off        ", " ".repeat(21)));
        assert_eq!(lines[14], "# CPU  TASK/PID       ||||     DURATION                  FUNCTION CALLS");
        assert_eq!(lines[15], "# |     |    |        ||||      |   |                     |   |   |   |");
        let mut header = String::new();
        write_graph_header(&mut header, latency, Stats::default(), 2, 0).unwrap();
        assert_eq!(header, "# tracer: function_graph\n#\n", "nothing more over an empty buffer");
    }

    #[test]
    fn a_leaf_is_found_across_other_cpus_events_and_task_changes_are_marked() {
        let names = super::test_names;
        let pid = |record: Event, pid: i32| match record {
            Event::GraphEntry(mut e) => {
                e.common.pid = pid;
                Event::GraphEntry(e)
            }
            Event::GraphExit(mut e) => {
                e.common.pid = pid;
                Event::GraphExit(e)
            }
            other => other,
        };
        // CPU 0 runs pid 5 then pid 6; CPU 1's event sits between pid 5's
        // entry and return.
        let events: Vec<GraphLine> = vec![
            (0, 0, pid(entry(0), 5), &[]),
            (1, 1, pid(entry(0), 7), &[]),
            (2, 0, pid(exit(0, 0, 900, 0), 5), &[]),
            (3, 0, pid(entry(0), 6), &[]),
        ];
        let other = |_: &[u8], _: &mut dyn Write| Ok(());
        let comms = |pid: i32| (pid == 5).then(|| String::from("fib/0"));
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], " 0)   0.900 us    |  kernel::workload::fib();", "{text}");
        assert_eq!(lines[1], " 1)               |  kernel::workload::fib() {");
        assert_eq!(lines[2], " ------------------------------------------");
        assert_eq!(lines[3], " 0)    fib/0-5     =>    <...>-6    ");
        // Pid 5 enters and sleeps, pid 6 enters and sleeps, pid 5 returns:
        // pid 6's call is no leaf with pid 5's return.
        let events: Vec<GraphLine> =
            vec![(0, 0, pid(entry(0), 5), &[]), (1, 0, pid(entry(0), 6), &[]), (2, 0, pid(exit(0, 0, 900, 0), 5), &[])];
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let calls: Vec<&str> =
            text.lines().filter(|line| !line.is_empty() && !line.contains("---") && !line.contains("=>")).collect();
        assert_eq!(
            calls,
            [
                " 0)               |  kernel::workload::fib() {",
                " 0)               |  kernel::workload::fib() {",
                " 0)   0.900 us    |  }"
            ],
            "{text}"
        );
    }

    #[test]
    fn comments_are_indented_inside_the_call_they_happen_in() {
        let names = super::test_names;
        let events: Vec<GraphLine> = vec![
            (0, 0, entry(0), &[]),
            (1, 0, Event::Other(Common::default()), &[]),
            (2, 0, entry(1), &[]),
            (3, 0, entry(2), &[]),
            (4, 0, exit(2, 3, 4, 0), &[]),
            (5, 0, Event::Other(Common::default()), &[]),
            (6, 0, exit(1, 2, 6, 0), &[]),
            (7, 0, Event::Other(Common::default()), &[]),
            (8, 0, exit(0, 0, 8, 0), &[]),
            (9, 0, Event::Other(Common::default()), &[]),
        ];
        let other = |_: &[u8], out: &mut dyn Write| out.write_str("event");
        let comms = |_: i32| None;
        let mut text = String::new();
        write_graph(&mut GraphState::default(), &mut text, &events, &names, &comms, GraphOptions::default(), &other).unwrap();
        let comments: Vec<&str> = text.lines().filter(|line| line.contains("/* event */")).collect();
        assert_eq!(
            comments,
            [
                " 0)               |  /* event */",
                " 0)               |      /* event */",
                " 0)               |  /* event */",
                " 0)               |  /* event */",
            ],
            "as Linux indents them: one level inside the depth-1 call after its leaf child; \
             none inside the top-level call or after it:\n{text}"
        );
    }

    #[test]
    fn durations_use_linux_widths_and_marks() {
        let mut text = String::new();
        write_duration(&mut text, 812, true).unwrap();
        assert_eq!(text, "  0.812 us    |  ");
        text.clear();
        write_duration(&mut text, 12_345, true).unwrap();
        assert_eq!(text, "+ 12.345 us   |  ");
        text.clear();
        write_duration(&mut text, 123_456_789, true).unwrap();
        assert_eq!(text, "@ 123456.7 us |  ");
        text.clear();
        write_duration(&mut text, 1_234_567_890, true).unwrap();
        assert_eq!(text, "$ 1234567 us  |  ", "seven digits: no decimals");
        text.clear();
        write_duration(&mut text, 123_456_789, false).unwrap();
        assert_eq!(text, "  123456.7 us |  ", "funcgraph-overhead off: no mark, the same width");
    }
}
