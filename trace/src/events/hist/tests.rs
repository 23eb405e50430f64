//! The histogram triggers' host tests: parsing, the table, printing.

extern crate std;

use super::spec::*;
use super::*;
use crate::events::filter::{FieldKind, FieldValue, FilterField};
use crate::events::hist::expr::ExprError;

fn fields() -> Vec<FilterField> {
    alloc::vec![
        FilterField::new("common_pid", FieldKind::Signed),
        FilterField::new("prev_comm", FieldKind::String),
        FilterField::new("prev_pid", FieldKind::Signed),
        FilterField::new("ip", FieldKind::Unsigned),
        FilterField::new("bytes", FieldKind::Unsigned),
    ]
}

fn spec(text: &str) -> HistSpec {
    parse(text, &fields()).unwrap_or_else(|error| panic!("{text}: {error}"))
}

#[test]
fn lines_read_back_as_linux_prints_them() {
    assert_eq!(spec("keys=prev_pid").line(), "hist:keys=prev_pid:vals=hitcount:sort=hitcount:size=2048");
    assert_eq!(
        spec("keys=common_pid.execname,ip.sym:vals=bytes,hitcount:sort=bytes.descending,hitcount:size=1000").line(),
        "hist:keys=common_pid.execname,ip.sym:vals=hitcount,bytes:sort=bytes.descending,hitcount:size=1024"
    );
    assert_eq!(spec("key=ip.hex:size=65").line(), "hist:keys=ip.hex:vals=hitcount:sort=hitcount:size=128");
    assert_eq!(spec("keys=ip:size=0x800").line(), "hist:keys=ip:vals=hitcount:sort=hitcount:size=2048", "hex, as kstrtouint");
    assert_eq!(spec("keys=prev_pid:pause").controls.on_existing(), Some(HistControl::Pause));
    for line in ["keys=prev_pid:pause:cont", "keys=prev_pid:cont:pause", "keys=prev_pid:clear:pause"] {
        assert_eq!(spec(line).controls.on_existing(), Some(HistControl::Pause), "pause first, as in Linux: {line}");
    }
    assert_eq!(spec("keys=prev_pid:clear:cont").controls.on_existing(), Some(HistControl::Cont), "then cont");
    assert!(spec("keys=prev_pid:pause:cont").controls.needs_existing(), "cont: on an existing one only");
    assert!(!spec("keys=prev_pid:pause").controls.needs_existing());
    assert!(spec("keys=prev_pid:size=4096:clear").same_as(&spec("keys=prev_pid")), "size and control do not count");
    assert!(!spec("keys=prev_pid").same_as(&spec("keys=prev_pid.hex")));
}

#[test]
fn bad_lines_say_why() {
    let error = |text: &str| parse(text, &fields()).unwrap_err();
    assert_eq!(error("vals=bytes"), HistError::NoKeys);
    assert_eq!(error("keys="), HistError::Empty("keys".into()));
    assert_eq!(error("keys=ip:sort="), HistError::Empty("sort".into()));
    assert_eq!(error("keys=nosuch"), HistError::NoSuchField("nosuch".into()));
    assert_eq!(error("keys=prev_pid.bogus"), HistError::BadModifier("prev_pid.bogus".into()));
    assert_eq!(error("keys=prev_pid.execname"), HistError::BadModifier("prev_pid.execname".into()));
    assert_eq!(error("keys=prev_comm.hex"), HistError::BadModifier("prev_comm.hex".into()));
    for bad in ["prev_pid.buckets=0", "prev_pid.buckets=", "prev_pid.buckets=x", "prev_pid.buckets", "prev_comm.buckets=4"] {
        assert_eq!(error(&format!("keys={bad}")), HistError::BadModifier(bad.into()));
    }
    assert_eq!(error("keys=prev_pid:vals=prev_pid.buckets=4"), HistError::BadModifier("prev_pid.buckets=4".into()), "keys only");
    assert_eq!(error("keys=ip:vals=prev_comm"), HistError::NotANumber("prev_comm".into()));
    assert_eq!(error("keys=ip,bytes,prev_pid,common_pid"), HistError::TooManyKeys);
    assert_eq!(error("keys=ip:vals=bytes,ip,prev_pid,common_pid"), HistError::TooManyVals);
    assert_eq!(error("keys=ip:sort=bytes"), HistError::BadSortKey("bytes".into()));
    assert_eq!(error("keys=ip:size=0"), HistError::BadSize("0".into()));
    assert_eq!(error("keys=ip:size=64"), HistError::BadSize("64".into()), "under 128, as Linux refuses it");
    assert_eq!(error("keys=ip:size=200000"), HistError::BadSize("200000".into()));
    assert_eq!(error("keys=ip:size=0+400"), HistError::BadSize("0+400".into()), "a sign only first, as kstrtouint");
    assert_eq!(error("keys=ip:name=foo"), HistError::Unknown("name=foo".into()));
    assert_eq!(error("keys=ip:onmax($x).save(ip)"), HistError::Expr(ExprError::NotOwnVar("x".into())));
    assert_eq!(error("keys=ip:x=ip:onmax($x).save(nosuch)"), HistError::Expr(ExprError::BadOperand("nosuch".into())));
    assert_eq!(error("keys=ip:x=ip:onmax(x).save(ip)"), HistError::Expr(ExprError::BadAction("onmax(x).save(ip)".into())));
}

/// One event: `prev_pid`, `prev_comm`, `bytes` (the others 0).
fn hit(histogram: &Histogram, pid: i64, comm: &'static [u8], bytes: u64) {
    histogram.hit(
        &|index| match index {
            0 | 2 => FieldValue::Signed(pid),
            1 => FieldValue::Str(comm),
            3 => FieldValue::Unsigned(0x1010),
            _ => FieldValue::Unsigned(bytes),
        },
        &|| bytes * 1000,
        &|words| words.iter_mut().zip([0x1010, 0x1020, 0x9999]).for_each(|(word, address)| *word = address),
    );
}

fn output(histogram: &Histogram) -> String {
    let mut out = String::new();
    let names = |address: usize| {
        (0x1000..0x1100).contains(&address).then_some(Symbol { name: "kernel::workload::fib", address: 0x1000, size: 0x100 })
    };
    let comms = |pid: i32| (pid == 7).then(|| String::from("fib-worker"));
    histogram.write(&histogram.spec.line(), &mut out, &names, &comms).unwrap();
    out
}

#[test]
fn string_keys_that_differ_late_are_two_keys() {
    let histogram = Histogram::try_new(spec("keys=prev_comm")).unwrap();
    hit(&histogram, 1, b"kernel::workload::napping_fib+0x20/0x4c\0", 0);
    hit(&histogram, 1, b"kernel::workload::napping_fib+0x3c/0x4c\0", 0);
    hit(&histogram, 1, b"kernel::workload::napping_fib+0x3c/0x4c\0", 0);
    let text = output(&histogram);
    assert!(text.contains("    Hits: 3\n    Entries: 2\n"), "{text}");
    assert!(text.contains("{ prev_comm: kernel::workload::napping_fib+0x3c/0x4c"), "{text}");
}

#[test]
fn counts_sums_and_prints_as_linux() {
    let histogram = Histogram::try_new(spec("keys=prev_pid:vals=bytes")).unwrap();
    for (pid, bytes) in [(7, 10), (3, 1), (7, 20), (7, 30), (-1, 5)] {
        hit(&histogram, pid, b"fib\0\0\0", bytes);
    }
    assert_eq!(
        output(&histogram),
        "# event histogram\n#\n# trigger info: hist:keys=prev_pid:vals=hitcount,bytes:sort=hitcount:size=2048\n#\n\n\
         { prev_pid: 18446744073709551615 } hitcount:          1  bytes:          5\n\
         { prev_pid:          3 } hitcount:          1  bytes:          1\n\
         { prev_pid:          7 } hitcount:          3  bytes:         60\n\
         \nTotals:\n    Hits: 5\n    Entries: 3\n    Dropped: 0\n"
    );
    // Between its two waits the slots are free (a reader of its
    // variables finds no entry) before any word is zeroed.
    let waits = core::cell::Cell::new(0);
    let key = [7u64];
    histogram.clear(|| {
        waits.set(waits.get() + 1);
        if waits.get() == 2 {
            assert_eq!(histogram.map.find(&key), None, "freed before zeroed");
            assert!(histogram.map.keys.iter().any(|word| word.load(Ordering::Relaxed) == 7), "not zeroed yet");
        }
    });
    assert_eq!(waits.get(), 2);
    assert!(histogram.map.keys.iter().all(|word| word.load(Ordering::Relaxed) == 0));
    assert!(output(&histogram).ends_with("#\n\n\nTotals:\n    Hits: 0\n    Entries: 0\n    Dropped: 0\n"));
    histogram.set_paused(true);
    hit(&histogram, 1, b"x", 1);
    assert_eq!(histogram.map.totals(), (0, 0), "a paused histogram counts nothing");
}

#[test]
fn percent_and_graph_show_a_values_share_of_its_column() {
    let histogram = Histogram::try_new(spec("keys=prev_pid:vals=hitcount.percent,bytes.graph:sort=prev_pid")).unwrap();
    // As Linux has it: the raw hitcount first, `hitcount.percent` a
    // column of its own.
    assert_eq!(histogram.spec().line(), "hist:keys=prev_pid:vals=hitcount,hitcount.percent,bytes.graph:sort=prev_pid:size=2048");
    for (pid, bytes) in [(1, 40), (2, 10), (2, 0), (3, 20)] {
        hit(&histogram, pid, b"", bytes);
    }
    let out = output(&histogram);
    let lines: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
    let bar = |hashes: usize| format!("{}{}", "#".repeat(hashes), " ".repeat(20 - hashes));
    assert_eq!(lines[0], format!("{{ prev_pid:          1 }} hitcount:          1  hitcount (%):  25.00  bytes: {}", bar(20)));
    assert_eq!(lines[1], format!("{{ prev_pid:          2 }} hitcount:          2  hitcount (%):  50.00  bytes: {}", bar(5)));
    assert_eq!(lines[2], format!("{{ prev_pid:          3 }} hitcount:          1  hitcount (%):  25.00  bytes: {}", bar(10)));
    let plain = spec("keys=prev_pid:vals=hitcount,bytes");
    assert!(!plain.same_as(&spec("keys=prev_pid:vals=hitcount.percent,bytes")), "a removal names the modifier too");
    assert_eq!(
        (hundredths_of_percent(0, 0), hundredths_of_percent(1, 3), hundredths_of_percent(u64::MAX, u64::MAX)),
        (Some(0), Some(3333), Some(10_000))
    );
    let again = spec("keys=prev_pid:vals=hitcount.percent,bytes.graph:sort=prev_pid");
    assert!(again.same_as(&spec(&histogram.spec().line()["hist:".len()..])), "the line it shows names it");
    for bad in
        ["keys=prev_pid.percent", "keys=prev_pid.graph", "keys=prev_pid:vals=hitcount.log2", "keys=prev_pid:vals=bytes.log2"]
    {
        assert!(matches!(parse(bad, &fields()), Err(HistError::BadModifier(_))), "{bad}");
    }
    assert_eq!(parse("keys=hitcount", &fields()).unwrap_err(), HistError::NoSuchField("hitcount".into()));
}

#[test]
fn modifiers_strings_and_sorting() {
    let histogram =
        Histogram::try_new(spec("keys=common_pid.execname,prev_comm,ip.sym:vals=bytes.hex:sort=bytes.descending")).unwrap();
    hit(&histogram, 7, b"worker\0", 0x10);
    hit(&histogram, 3, b"shell", 0xff);
    let out = output(&histogram);
    let lines: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
    let comm = format!("{:<50}", "shell");
    let sym = format!("{:<45}", "kernel::workload::fib");
    assert_eq!(
        lines[0],
        format!("{{ common_pid: <...>           [         3], prev_comm: {comm}, ip: [1010] {sym} }} hitcount:          1  bytes:         ff")
    );
    assert!(lines[1].starts_with("{ common_pid: fib-worker      [         7], prev_comm: worker "), "{}", lines[1]);
    let log2 = Histogram::try_new(spec("keys=bytes.log2:sort=bytes")).unwrap();
    for bytes in [0, 1, 3, 4, 5, 1000] {
        hit(&log2, 1, b"", bytes);
    }
    let out = output(&log2);
    let keys: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).map(|line| &line[..16]).collect();
    assert_eq!(keys, ["{ bytes: ~ 2^0  ", "{ bytes: ~ 2^2  ", "{ bytes: ~ 2^3  ", "{ bytes: ~ 2^10 "]);
    assert_eq!((log2_bucket(u64::MAX), log2_bucket(1 << 63)), (64, 63), "no overflow at the top");
    // buckets=SIZE: a range of SIZE values per key, as Linux prints it.
    let buckets = Histogram::try_new(spec("keys=bytes.buckets=10:sort=bytes")).unwrap();
    assert_eq!(buckets.spec().line(), "hist:keys=bytes.buckets=10:vals=hitcount:sort=bytes.buckets=10:size=2048");
    for bytes in [0, 9, 10, 19, 25, u64::MAX] {
        hit(&buckets, 1, b"", bytes);
    }
    let out = output(&buckets);
    let keys: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).map(|line| line.split(" }").next().unwrap()).collect();
    let top = format!("{{ bytes: ~ {}-{}", u64::MAX - u64::MAX % 10, u64::MAX);
    assert_eq!(keys, ["{ bytes: ~ 0-9", "{ bytes: ~ 10-19", "{ bytes: ~ 20-29", &top]);
    assert!(out.contains("{ bytes: ~ 0-9 } hitcount:          2"), "{out}");
}

#[test]
fn a_stacktrace_key_counts_each_chain_and_prints_a_frame_a_line() {
    let histogram = Histogram::try_new(spec("keys=stacktrace")).unwrap();
    assert_eq!(histogram.spec().line(), "hist:keys=common_stacktrace:vals=hitcount:sort=hitcount:size=2048");
    hit(&histogram, 1, b"a", 1);
    hit(&histogram, 2, b"b", 2);
    let out = output(&histogram);
    let entry = "{ common_stacktrace:\n         kernel::workload::fib+0x10/0x100\n         kernel::workload::fib+0x20/0x100\n         0x9999\n} hitcount:          2\n";
    assert!(out.contains(entry), "one chain, twice: {out}");
    let other = Histogram::try_new(spec("keys=common_stacktrace,prev_pid")).unwrap();
    hit(&other, 5, b"a", 1);
    assert!(output(&other).contains("         0x9999\n, prev_pid:          5} hitcount:          1"), "{}", output(&other));
    assert_eq!(
        parse("keys=common_stacktrace.hex", &fields()).unwrap_err(),
        HistError::BadModifier("common_stacktrace.hex".into())
    );
    assert_eq!(parse("keys=prev_pid:vals=stacktrace", &fields()).unwrap_err(), HistError::KeyOnly("common_stacktrace".into()));
}

#[test]
fn generic_keys_read_the_recording_cpu_and_task() {
    // The host's stand-ins: CPU 1, task "host".
    let histogram = Histogram::try_new(spec("keys=cpu,comm:vals=bytes")).unwrap();
    assert_eq!(histogram.spec().line(), "hist:keys=common_cpu,common_comm:vals=hitcount,bytes:sort=hitcount:size=2048");
    hit(&histogram, 7, b"worker", 5);
    let out = output(&histogram);
    let line = out.lines().find(|line| line.starts_with('{')).unwrap();
    assert!(line.starts_with("{ common_cpu:          1, common_comm: host "), "{line}");
    assert!(line.ends_with("} hitcount:          1  bytes:          5"), "{line}");
    let own = parse("keys=prev_comm,common_cpu,common_comm", &fields()).unwrap();
    assert_eq!(own.line(), "hist:keys=prev_comm,common_cpu,common_comm:vals=hitcount:sort=hitcount:size=2048");
    let with_comm = [FilterField::new("comm", FieldKind::String)];
    assert_eq!(
        parse("keys=comm", &with_comm).unwrap().line(),
        "hist:keys=comm:vals=hitcount:sort=hitcount:size=2048",
        "its own first"
    );
    assert_eq!(parse("keys=cpus", &fields()).unwrap_err(), HistError::NoSuchField("cpus".into()));
}

/// What a mock synthetic event was given.
#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<Vec<u64>>>);

impl SynthTarget for Recorded {
    fn fire(&self, values: &[FieldValue]) {
        let numbers = values.iter().map(|value| number(*value, Modifier::Plain)).collect();
        self.0.lock().unwrap().push(numbers);
    }
}

/// For a histogram without `.snapshot()`: never asked for.
fn no_snapshot() -> Result<Arc<dyn SnapshotTarget>, HistError> {
    unreachable!("no .snapshot() action")
}

/// A mock snapshot buffer: how often it was taken and released, and
/// whether a swap is refused (another under way).
#[derive(Default)]
struct Snapshots {
    taken: AtomicUsize,
    released: AtomicUsize,
    busy: AtomicBool,
}

impl SnapshotTarget for Snapshots {
    fn take(&self) -> bool {
        if self.busy.load(Ordering::Relaxed) {
            return false;
        }
        self.taken.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn release(&self) {
        self.released.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn onmax_snapshot_takes_one_each_time_a_value_passes_every_entrys() {
    let mut hist = Histogram::try_new(spec("keys=prev_pid:v=bytes:onmax($v).snapshot()")).unwrap();
    assert_eq!(hist.spec().line(), "hist:keys=prev_pid:vals=hitcount:v=bytes:sort=hitcount:size=2048:onmax($v).snapshot()");
    let refused = hist.resolve(|_| None, |_| None, || Err(HistError::NoMemory));
    assert_eq!(refused.unwrap_err(), HistError::NoMemory, "no snapshot buffer: refused");
    let snapshots = Arc::new(Snapshots::default());
    let target: Arc<dyn SnapshotTarget> = snapshots.clone();
    hist.resolve(|_| None, |_| None, || Ok(target)).unwrap();
    hit(&hist, 3, b"", 0);
    assert!(!output(&hist).contains("Snapshot taken"), "none taken yet: a first 0 is no new max (tracked from 0)");
    snapshots.busy.store(true, Ordering::Relaxed);
    hit(&hist, 3, b"", 40);
    snapshots.busy.store(false, Ordering::Relaxed);
    assert!(!output(&hist).contains("Snapshot taken"), "a swap refused is not recorded");
    for (pid, bytes) in [(1, 10), (2, 5), (2, 30), (1, 20), (2, 30)] {
        hit(&hist, pid, b"", bytes);
    }
    assert_eq!(snapshots.taken.load(Ordering::Relaxed), 2, "at 10, the first, and at 30; not at 5 or 20, each its entry's max");
    let out = output(&hist);
    assert!(!out.contains("\tmax:"), "no max line per entry, as Linux's print_actions skips a snapshot: {out}");
    let details = "\nSnapshot taken (see tracing/snapshot).  Details:\n\ttriggering value { onmax($v) }:         30\ttriggered by event with key: { prev_pid:          2 }\n\nTotals:";
    assert!(out.contains(details), "{out}");
    hist.detach();
    assert_eq!(snapshots.released.load(Ordering::Relaxed), 1, "released when its trigger goes");
    drop(hist);
    assert_eq!(snapshots.released.load(Ordering::Relaxed), 2, "and on drop (a release after the first does nothing)");
    let bad = Vars::default().add_track("onmax($v).snapshot(x)", &fields()).unwrap_err();
    assert!(matches!(bad, ExprError::BadAction(_)), "{bad:?}");
    let two = parse("keys=prev_pid:v=bytes:onmax($v).snapshot():onchange($v).snapshot()", &fields()).unwrap_err();
    assert_eq!(two, HistError::Expr(ExprError::SecondSnapshot));
}

#[test]
fn values_may_be_expressions_and_variables_of_other_histograms() {
    let hist = Histogram::try_new(spec("keys=prev_pid:vals=bytes-1,bytes*2:sort=bytes-1.descending")).unwrap();
    assert_eq!(hist.spec().line(), "hist:keys=prev_pid:vals=hitcount,bytes-1,bytes*2:sort=bytes-1.descending:size=2048");
    for (pid, bytes) in [(1, 10), (1, 5), (2, 100)] {
        hit(&hist, pid, b"", bytes);
    }
    let out = output(&hist);
    let rows: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
    assert_eq!(
        rows,
        [
            "{ prev_pid:          2 } hitcount:          1  bytes-1:         99  bytes*2:        200",
            "{ prev_pid:          1 } hitcount:          2  bytes-1:         13  bytes*2:         30"
        ]
    );
    // `$NAME`: another histogram's variable, read by this hit's key.
    let start = Arc::new(Histogram::try_new(spec("keys=prev_pid:t=bytes")).unwrap());
    let mut sums = Histogram::try_new(spec("keys=prev_pid:vals=$t")).unwrap();
    sums.resolve(|name| (name == "t").then(|| (start.clone(), 0)), |_| None, no_snapshot).unwrap();
    hit(&start, 1, b"", 7);
    hit(&sums, 1, b"", 0);
    hit(&sums, 1, b"", 0);
    hit(&sums, 2, b"", 0); // no t for pid 2: not counted
    assert!(output(&sums).contains("{ prev_pid:          1 } hitcount:          2  $t:         14"), "{}", output(&sums));
    assert_eq!(
        parse("keys=prev_pid:vals=bytes-nosuch", &fields()).unwrap_err(),
        HistError::Expr(ExprError::BadOperand("nosuch".into()))
    );
}

#[test]
fn keys_may_be_expressions_with_a_numbers_modifier() {
    let hist = Histogram::try_new(spec("keys=bytes/10,bytes*2.log2:sort=bytes/10")).unwrap();
    assert_eq!(hist.spec().line(), "hist:keys=bytes/10,bytes*2.log2:vals=hitcount:sort=bytes/10:size=2048");
    for bytes in [5, 12, 14, 40] {
        hit(&hist, 1, b"", bytes);
    }
    let out = output(&hist);
    let rows: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
    // 5: 0 and 2^4 (10); 12, 14: 1 and 2^5 (24, 28); 40: 4 and 2^7 (80).
    assert_eq!(
        rows,
        [
            "{ bytes/10:          0, bytes*2: ~ 2^4  } hitcount:          1",
            "{ bytes/10:          1, bytes*2: ~ 2^5  } hitcount:          2",
            "{ bytes/10:          4, bytes*2: ~ 2^7  } hitcount:          1"
        ]
    );
    assert_eq!(parse("keys=bytes-$t", &fields()).unwrap_err(), HistError::KeyReadsVariable("bytes-$t".into()));
    assert_eq!(parse("keys=bytes*2.graph", &fields()).unwrap_err(), HistError::BadModifier("bytes*2.graph".into()));
    // The `-` of a modifier is no operator.
    assert_eq!(spec("keys=ip.sym-offset").line(), "hist:keys=ip.sym-offset:vals=hitcount:sort=hitcount:size=2048");
}

#[test]
fn onmax_and_onchange_can_record_a_synthetic_event() {
    let line = "keys=prev_pid:v=bytes:onmax($v).trace(big,$v,prev_pid):onchange($v).moved($v)";
    let mut hist = Histogram::try_new(spec(line)).unwrap();
    assert_eq!(
        hist.spec().line(),
        "hist:keys=prev_pid:vals=hitcount:v=bytes:sort=hitcount:size=2048:onmax($v).trace(big,$v,prev_pid):onchange($v).moved($v)"
    );
    let (big, moved) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()));
    let targets: [(&str, Arc<dyn SynthTarget>, usize); 2] = [("big", big.clone(), 2), ("moved", moved.clone(), 1)];
    let synth = |name: &str| {
        let (_, target, fields) = targets.iter().find(|(known, _, _)| *known == name)?;
        Some((target.clone(), alloc::vec![false; *fields]))
    };
    hist.resolve(|_| None, synth, no_snapshot).unwrap();
    for (pid, bytes) in [(1, 10), (1, 5), (1, 30), (2, 7), (2, 7), (1, 30)] {
        hit(&hist, pid, b"", bytes);
    }
    assert_eq!(*big.0.lock().unwrap(), [[10, 1], [30, 1], [7, 2]], "each entry's new largest");
    assert_eq!(*moved.0.lock().unwrap(), [[10], [5], [30], [7]], "each entry's change");
    // Mixed with `onmatch()` and `.save()`: each call gets its own
    // event, and the line reads back in the order it was written.
    let line = "keys=prev_pid:v=bytes:onmax($v).trace(big,$v,prev_pid):onmatch(a.b).every($v):onchange($v).save(prev_comm):onchange($v).moved($v)";
    let mut mixed = Histogram::try_new(spec(line)).unwrap();
    assert!(mixed.spec().line().ends_with(&line["keys=prev_pid:v=bytes".len()..]), "{}", mixed.spec().line());
    let (big, moved, every) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()), Arc::new(Recorded::default()));
    let targets: [(&str, Arc<dyn SynthTarget>, usize); 3] =
        [("big", big.clone(), 2), ("moved", moved.clone(), 1), ("every", every.clone(), 1)];
    let mixed_synth = |name: &str| {
        let (_, target, fields) = targets.iter().find(|(known, _, _)| *known == name)?;
        Some((target.clone(), alloc::vec![false; *fields]))
    };
    mixed.resolve(|_| None, mixed_synth, no_snapshot).unwrap();
    for (pid, bytes) in [(1, 10), (1, 5), (1, 5)] {
        hit(&mixed, pid, b"", bytes);
    }
    assert_eq!(*every.0.lock().unwrap(), [[10], [5], [5]], "onmatch: every hit");
    assert_eq!(*big.0.lock().unwrap(), [[10, 1]]);
    assert_eq!(*moved.0.lock().unwrap(), [[10], [5]]);
    let mut wrong = Histogram::try_new(spec("keys=prev_pid:v=bytes:onmax($v).big($v)")).unwrap();
    assert!(matches!(wrong.resolve(|_| None, synth, no_snapshot), Err(HistError::ParamMismatch(_))), "big has two fields");
}

#[test]
fn a_variable_read_once_by_key_makes_one_latency_per_start() {
    // `prev_pid` plays the pid in both; `bytes * 1000` is the clock.
    let start = Arc::new(Histogram::try_new(spec("keys=prev_pid:ts0=common_timestamp.usecs")).unwrap());
    assert_eq!(
        start.spec().line(),
        "hist:keys=prev_pid:vals=hitcount:ts0=common_timestamp.usecs:sort=hitcount:size=2048:clock=global"
    );
    let mut end = Histogram::try_new(spec(
        "keys=prev_pid:lat=common_timestamp.usecs-$ts0:onmatch(sched.sched_wakeup).trace(wakeup_latency,$lat,prev_pid)",
    ))
    .unwrap();
    let recorded = Arc::new(Recorded::default());
    let target: Arc<dyn SynthTarget> = recorded.clone();
    let missing = end.resolve(|_| None, |_| Some((target.clone(), alloc::vec![false, false])), no_snapshot);
    assert_eq!(
        missing.map_err(|e| e.to_string()),
        Err("hist: no histogram of this trace array defines '$ts0' (or several do)".into())
    );
    let one_field = end.resolve(|_| Some((start.clone(), 0)), |_| Some((target.clone(), alloc::vec![false])), no_snapshot);
    assert!(matches!(one_field, Err(HistError::ParamMismatch(_))), "two params for one field");
    let string = end.resolve(|_| Some((start.clone(), 0)), |_| Some((target.clone(), alloc::vec![false, true])), no_snapshot);
    assert!(matches!(string, Err(HistError::ParamMismatch(_))), "a number for a string");
    end.resolve(
        |name| (name == "ts0").then(|| (start.clone(), 0)),
        |_| Some((target.clone(), alloc::vec![false, false])),
        no_snapshot,
    )
    .unwrap();
    hit(&end, 7, b"", 50); // no start for pid 7 yet: nothing
    hit(&start, 7, b"", 100); // ts0 = 100 us
    hit(&start, 8, b"", 120);
    hit(&end, 7, b"", 130); // 30 us later
    hit(&end, 7, b"", 140); // ts0 was read once: nothing
    hit(&end, 8, b"", 125);
    assert_eq!(*recorded.0.lock().unwrap(), [[30, 7], [5, 8]]);
    assert_eq!(end.map.totals(), (2, 0), "the hits without a start are not counted");
    let other_keys = Histogram::try_new(spec("keys=prev_comm:x=$ts0")).unwrap();
    assert!(!other_keys.keys_match(&start));
}

#[test]
fn a_variables_units_carry_along_a_chain_of_histograms() {
    // ts0 holds microseconds; `copy` holds $ts0, so microseconds too
    // (worked out once, when `copy`'s histogram is resolved).
    let start = Arc::new(Histogram::try_new(spec("keys=prev_pid:ts0=common_timestamp.usecs")).unwrap());
    let mut copy = Histogram::try_new(spec("keys=prev_pid:copy=$ts0")).unwrap();
    assert!(!copy.var_usecs(0), "unresolved: not known yet");
    copy.resolve(|name| (name == "ts0").then(|| (start.clone(), 0)), |_| None, no_snapshot).unwrap();
    assert!(start.var_usecs(0) && copy.var_usecs(0));
    let copy = Arc::new(copy);
    let find = |name: &str| (name == "copy").then(|| (copy.clone(), 0));
    let mut mixed = Histogram::try_new(spec("keys=prev_pid:d=common_timestamp-$copy")).unwrap();
    let refused = mixed.resolve(find, |_| None, no_snapshot);
    assert!(refused.is_err_and(|error| error.to_string().contains("usecs")), "nanoseconds minus microseconds");
    let mut same = Histogram::try_new(spec("keys=prev_pid:d=common_timestamp.usecs-$copy")).unwrap();
    same.resolve(find, |_| None, no_snapshot).unwrap();
    assert!(same.var_usecs(0));
}

#[test]
fn onmax_and_onchange_keep_a_value_and_the_fields_of_its_hit() {
    let max = Histogram::try_new(spec("keys=prev_pid:v=bytes:onmax($v).save(prev_comm,ip)")).unwrap();
    assert_eq!(
        max.spec().line(),
        "hist:keys=prev_pid:vals=hitcount:v=bytes:sort=hitcount:size=2048:onmax($v).save(prev_comm,ip)"
    );
    let change = Histogram::try_new(spec("keys=prev_pid:v=bytes:onchange($v).save(prev_comm)")).unwrap();
    for (comm, bytes) in [(&b"first\0"[..], 10), (b"second\0", 30), (b"third\0", 20), (b"fourth\0", 20)] {
        hit(&max, 7, comm, bytes);
        hit(&change, 7, comm, bytes);
    }
    let entry = |histogram: &Histogram| {
        let out = output(histogram);
        out[out.find('{').unwrap()..out.find("\nTotals").unwrap()].to_string()
    };
    assert_eq!(
        entry(&max),
        format!(
            "{{ prev_pid:          7 }} hitcount:          4\n\tmax:         30  prev_comm: {:<32}  ip:       4112\n",
            "second"
        )
    );
    assert_eq!(
        entry(&change),
        format!("{{ prev_pid:          7 }} hitcount:          4\n\tchanged:         20  prev_comm: {:<32}\n", "third")
    );
}

#[test]
fn variables_and_actions_name_their_histogram() {
    let line = "keys=prev_pid:vals=bytes:a=bytes,b=prev_pid+1:onmatch(g.e).s($a,$b):sort=bytes";
    let with = spec(line);
    assert_eq!(
        with.line(),
        "hist:keys=prev_pid:vals=hitcount,bytes:a=bytes,b=prev_pid+1:sort=bytes:size=2048:onmatch(g.e).s($a,$b)"
    );
    assert!(with.same_as(&spec(&with.line()["hist:".len()..])), "its line names it");
    assert!(!with.same_as(&spec("keys=prev_pid:vals=bytes:sort=bytes")), "the variables count");
    let error = |text: &str| parse(text, &fields()).unwrap_err();
    assert_eq!(error("keys=ip:x=nosuch"), HistError::Expr(ExprError::BadOperand("nosuch".into())));
    assert_eq!(spec("keys=ip:onmatch(g.e).s($y)").vars().refs.len(), 1, "a read of another histogram's");
    assert_eq!(
        spec("keys=ip:clock=local").line(),
        "hist:keys=ip:vals=hitcount:sort=hitcount:size=2048",
        "no timestamp: no clock"
    );
    assert_eq!(spec("keys=ip:t=common_timestamp:clock=counter").clock(), Some("counter"));
    assert_eq!(error("keys=ip:clock="), HistError::Unknown("clock=".into()));
}

#[test]
fn a_full_table_drops_and_counts() {
    let histogram = Histogram::try_new(spec("keys=bytes:size=128")).unwrap();
    for bytes in 0..200 {
        hit(&histogram, 1, b"", bytes);
    }
    hit(&histogram, 1, b"", 5); // a key already there still counts
    let (hits, drops) = histogram.map.totals();
    assert_eq!((hits, drops), (129, 72));
    assert!(output(&histogram).ends_with("Hits: 129\n    Entries: 128\n    Dropped: 72\n"));
}

#[test]
fn concurrent_hits_are_all_counted() {
    let histogram = std::sync::Arc::new(Histogram::try_new(spec("keys=bytes:vals=prev_pid")).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let histogram = histogram.clone();
            std::thread::spawn(move || {
                for n in 0..20_000u64 {
                    hit(&histogram, 1, b"", n % 100);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|thread| thread.join().unwrap());
    // A host thread can be preempted between claiming a slot and
    // publishing its key (the kernel's hit path cannot: interrupts are
    // masked), and another then drops its hit after waiting: every hit
    // is counted once or dropped once, and no key is in two entries.
    let entries = histogram.map.entries();
    let (hits, drops) = histogram.map.totals();
    assert_eq!(hits + drops, 80_000);
    assert_eq!(entries.iter().map(|(_, sums)| sums[0]).sum::<u64>(), hits);
    assert!(entries.iter().all(|(_, sums)| sums[0] == sums[1]), "the sums add up with the counts");
    let mut keys: Vec<u64> = entries.iter().map(|(key, _)| key[0]).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), entries.len(), "each key once");
}

#[test]
fn tables_together_stay_within_their_budget() {
    // One string key in 32768 entries: about 9 MiB; three at the
    // largest size: over the budget whole.
    let big = spec("keys=prev_comm,prev_comm,prev_comm:size=131072");
    assert_eq!(Histogram::try_new(big).map(drop), Err(HistError::NoMemory));
    let large = spec("keys=prev_comm:size=32768");
    let first = Histogram::try_new(large.clone()).unwrap();
    assert_eq!(Histogram::try_new(large.clone()).map(drop), Err(HistError::NoMemory), "two would pass the budget");
    drop(first);
    assert!(Histogram::try_new(large).is_ok(), "a freed table gives its bytes back");
}
