//! `docs/tracefs.md` documents exactly the files the kernel serves: the
//! tree `ls` shows, walked from tracefs's root (with an instance, a probe
//! event and a synthetic event made first, so that every kind of directory
//! is there), against the rows of the document.
//!
//! The document's convention (stated at its top): each file is one table
//! row `` | `PATH` | yes | `` or `` | `PATH` | no | ``, PATH relative to
//! `/sys/kernel/tracing`, with `GROUP`, `EVENT`, `NAME` and `N` standing for
//! an event group, an event, an instance and a CPU number; `yes` when every
//! instance has the file too, as `instances/NAME/PATH`. Directories have no
//! rows, except `instances/` and `instances/NAME/`.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use ktest_macros::ktest;

use crate::shell;

/// The document, as the kernel was built with it.
const DOC: &str = include_str!("../../../../docs/tracefs.md");

const ROOT: &str = "/sys/kernel/tracing";
const INSTANCE: &str = "docs";

/// Runs a shell line, which must succeed; what it printed.
fn run(line: &str) -> String {
    shell::execute_to_text(line).unwrap_or_else(|error| panic!("{line}: {error}"))
}

/// What the test makes: an instance, an fprobe event, a synthetic event.
fn set_up() {
    run("echo 'f:docs_probe kernel::workload::fib n=$arg1' >> /sys/kernel/tracing/dynamic_events");
    run("echo 'docs_synth u64 n' >> /sys/kernel/tracing/synthetic_events");
    run(&format!("mkdir {ROOT}/instances/{INSTANCE}"));
}

/// Undoes [`set_up`] (also after a panic, so the next test finds none of it).
fn tear_down() {
    let _ = shell::execute_to_text(&format!("rmdir {ROOT}/instances/{INSTANCE}"));
    let _ = shell::execute_to_text("echo '!docs_synth' >> /sys/kernel/tracing/synthetic_events");
    let _ = shell::execute_to_text("echo '-:fprobes/docs_probe' >> /sys/kernel/tracing/dynamic_events");
}

/// Every path `ls` shows under tracefs's root, recursively: the files, and
/// the directories `instances/` and `instances/X/` (with their `/`).
fn walk() -> Vec<String> {
    let mut served = Vec::new();
    let mut dirs = alloc::vec![String::new()];
    while let Some(dir) = dirs.pop() {
        let listing = match dir.as_str() {
            "" => run(&format!("ls {ROOT}")),
            dir => run(&format!("ls {ROOT}/{dir}")),
        };
        for entry in listing.lines() {
            let path = match dir.as_str() {
                "" => entry.to_string(),
                dir => format!("{dir}/{entry}"),
            };
            let Some(sub) = path.strip_suffix('/') else {
                served.push(path);
                continue;
            };
            let instance_dir = sub == "instances" || sub.strip_prefix("instances/").is_some_and(|name| !name.contains('/'));
            if instance_dir {
                served.push(path.clone());
            }
            dirs.push(sub.to_string());
        }
    }
    served
}

/// Whether `text` is a CPU number.
fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit())
}

/// A path within one trace array, as the document writes it.
fn array_form(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["events", _group, _event, file] => format!("events/GROUP/EVENT/{file}"),
        ["events", _group, file] => format!("events/GROUP/{file}"),
        ["per_cpu", cpu, file] if cpu.strip_prefix("cpu").is_some_and(is_number) => format!("per_cpu/cpuN/{file}"),
        ["trace_stat", file] if file.strip_prefix("function").is_some_and(is_number) => "trace_stat/functionN".into(),
        _ => path.to_string(),
    }
}

/// A served path, as the document writes it.
fn documented_form(path: &str) -> String {
    let Some(rest) = path.strip_prefix("instances/") else { return array_form(path) };
    match rest.split_once('/') {
        None => path.to_string(),
        Some((_, "")) => "instances/NAME/".into(),
        Some((_, inner)) => format!("instances/NAME/{}", array_form(inner)),
    }
}

/// The paths the document's rows give (each `yes` row twice: at the top
/// level and in `instances/NAME/`), and what is wrong with its rows.
fn documented() -> (BTreeSet<String>, Vec<String>) {
    let mut paths = BTreeSet::new();
    let mut problems = Vec::new();
    for line in DOC.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let path = cells.get(1).and_then(|cell| cell.strip_prefix('`')?.strip_suffix('`')).filter(|path| !path.contains('`'));
        let Some(path) = path else {
            problems.push(format!("not one backquoted path: {line}"));
            continue;
        };
        let instances = match cells.get(2) {
            Some(&"yes") => true,
            Some(&"no") => false,
            _ => {
                problems.push(format!("{path}: the second cell is neither yes nor no"));
                continue;
            }
        };
        if path.starts_with('/') || !paths.insert(path.to_string()) {
            problems.push(format!("{path}: documented twice, or not relative to {ROOT}"));
        }
        if instances {
            paths.insert(format!("instances/NAME/{path}"));
        }
    }
    (paths, problems)
}

/// Lists `items` one a line, indented, for a failure message.
fn listed<'a>(items: impl Iterator<Item = &'a String>) -> String {
    items.map(|item| format!("\n  {item}")).collect()
}

#[ktest(after_panic = tear_down)]
fn the_tracefs_reference_documents_exactly_the_files_served() {
    set_up();
    let served_paths = walk();
    tear_down();
    let served: BTreeSet<String> = served_paths.iter().map(|path| documented_form(path)).collect();
    // The walk reached every kind of directory.
    for expected in [
        "trace",
        "options/markers",
        "per_cpu/cpuN/stats",
        "trace_stat/functionN",
        "events/GROUP/EVENT/hist",
        "instances/NAME/",
        "instances/NAME/events/GROUP/EVENT/trigger",
        "instances/NAME/per_cpu/cpuN/trace",
    ] {
        assert!(served.contains(expected), "the walk missed {expected}:{}", listed(served.iter()));
    }
    for group in ["sched", "fprobes", "synthetic"] {
        let enable = format!("events/{group}/enable");
        assert!(served_paths.contains(&enable), "the walk missed {enable}");
    }

    let (documented, problems) = documented();
    assert!(problems.is_empty(), "docs/tracefs.md has rows that break its convention:{}", listed(problems.iter()));
    let undocumented: Vec<&String> = served.difference(&documented).collect();
    let unserved: Vec<&String> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "docs/tracefs.md and the files served differ.\nServed, with no row in docs/tracefs.md:{}\nDocumented, not served:{}",
        listed(undocumented.into_iter()),
        listed(unserved.into_iter()),
    );
}
