//! Our side of the side-by-side benchmark against Linux (`bench vs-linux`,
//! or `./qemu-run.sh ARCH --icount --bench-vs-linux`; `bench/side-by-side.sh`
//! runs both sides, `bench/vs-linux.sh` being Linux's).
//!
//! The job is the one `bench/linux-init.c` gives Linux: a loop of calls of
//! one never-inlined function ([`traced_call`], standing in for the
//! `getppid` handler), timed best of [`RUNS`] loops of [`CALLS`] calls,
//! untraced, traced, then untraced again, for each mode, set up through the
//! tracing files exactly as a Linux user would. Under QEMU's `-icount
//! shift=0` a nanosecond of guest time is one guest instruction, so the
//! figure a mode prints is the instructions tracing adds to one call.
//!
//! Prints `vso MODE BEFORE TRACED AFTER ADDED VARIANT events=N` per mode
//! (the three loop totals in ns, the instructions added per call, what was
//! traced, and how many events the buffers took: a check that tracing
//! really happened), then `vso-done`.

use alloc::format;
use alloc::string::String;
use core::hint::black_box;

use ftrace::FilterMode;

use crate::{println, tracefs};

/// Calls in one loop.
pub const CALLS: u64 = 100_000;
/// Loops per measurement; the best is kept.
pub const RUNS: usize = 5;
/// Untraced loops before measuring anything.
const WARMUP_LOOPS: usize = 20;

/// The traced function: a never-inlined call with one argument and a
/// result, as `getppid`'s handler is on Linux's side.
#[inline(never)]
pub extern "C" fn traced_call(a: u64) -> u64 {
    black_box(a.wrapping_add(1))
}

/// What the `busy` mode's instance traces: never called by the loop.
#[inline(never)]
pub extern "C" fn other_call(a: u64) -> u64 {
    black_box(a.wrapping_sub(1))
}

const FUNC: &str = "kernel::bench::vs_linux::traced_call";
const OTHER: &str = "kernel::bench::vs_linux::other_call";
const INSTANCE: &str = "instances/b";

/// The modes, in the order Linux's side runs them.
pub const MODES: [&str; 7] = ["function", "two_instances", "busy", "function_graph", "entry_event", "exit_event", "kprobe_mid"];

/// One loop of [`CALLS`] calls, in ns of the trace clock.
fn loop_ns() -> u64 {
    let start = ring_buffer::clock::now_ns();
    let mut acc = 0u64;
    for i in 0..CALLS {
        acc = acc.wrapping_add(traced_call(black_box(i)));
    }
    black_box(acc);
    ring_buffer::clock::now_ns() - start
}

/// The best of [`RUNS`] loops.
fn best_ns() -> u64 {
    (0..RUNS).map(|_| loop_ns()).min().unwrap_or(0)
}

fn must(file: &str, text: &str, mode: FilterMode) -> Result<(), String> {
    tracefs::write(file, text, mode).map_err(|error| format!("writing '{text}' to {file}: {error}"))
}

/// Back to nothing traced.
fn reset() -> Result<(), String> {
    must("events/enable", "0", FilterMode::Replace)?;
    if tracefs::exists(INSTANCE) {
        must("instances/b/current_tracer", "nop", FilterMode::Replace)?;
        must("instances/b/set_ftrace_filter", "", FilterMode::Replace)?;
        tracefs::instances::rmdir(INSTANCE).map_err(|error| format!("rmdir {INSTANCE}: {error}"))?;
    }
    must("current_tracer", "nop", FilterMode::Replace)?;
    must("set_ftrace_filter", "", FilterMode::Replace)?;
    must("dynamic_events", "", FilterMode::Replace)?;
    must("trace", "", FilterMode::Replace)
}

/// Sets up `mode`; returns what it traces.
fn setup(mode: &str) -> Result<String, String> {
    let replace = FilterMode::Replace;
    match mode {
        "function" => {
            must("set_ftrace_filter", FUNC, replace)?;
            must("current_tracer", "function", replace)?;
            Ok(format!("function:{FUNC}"))
        }
        "two_instances" | "busy" => {
            must("set_ftrace_filter", FUNC, replace)?;
            must("current_tracer", "function", replace)?;
            tracefs::instances::mkdir(INSTANCE).map_err(|error| format!("mkdir {INSTANCE}: {error}"))?;
            let (theirs, variant) = match mode {
                "busy" => (OTHER, format!("function:{FUNC},instance:{OTHER}")),
                _ => (FUNC, format!("function+instance:{FUNC}")),
            };
            must("instances/b/set_ftrace_filter", theirs, replace)?;
            must("instances/b/current_tracer", "function", replace)?;
            Ok(variant)
        }
        "function_graph" => {
            must("set_ftrace_filter", FUNC, replace)?;
            must("current_tracer", "function_graph", replace)?;
            Ok(format!("function_graph:{FUNC}"))
        }
        "entry_event" => {
            must("dynamic_events", &format!("f:bench/ent {FUNC} a=$arg1"), FilterMode::Append)?;
            must("events/bench/ent/enable", "1", replace)?;
            Ok(format!("fprobe-entry:{FUNC}"))
        }
        "exit_event" => {
            must("dynamic_events", &format!("f:bench/ret {FUNC}%return r=$retval"), FilterMode::Append)?;
            must("events/bench/ret/enable", "1", replace)?;
            Ok(format!("fprobe-exit:{FUNC}"))
        }
        "kprobe_mid" => {
            // The first instruction after the function's ftrace site: a
            // breakpoint, the instruction stepped out of line or simulated.
            let offset = arch::ftrace::CALL_OFFSET + arch::ftrace::INSN_LEN;
            must("kprobe_events", &format!("p:bench/mid {FUNC}+{offset}"), FilterMode::Append)?;
            must("events/bench/mid/enable", "1", replace)?;
            Ok(format!("kprobe:{FUNC}+{offset}"))
        }
        _ => Err(format!("no mode '{mode}'")),
    }
}

/// Events the buffers of the top level and of the instance took.
fn events() -> u64 {
    let count = |stats: ring_buffer::per_cpu::Stats| stats.entries + stats.overrun;
    let mut total = count(trace::array::instances::top().stats());
    if let Some(instance) = trace::array::instances::find("b") {
        total += count(instance.stats());
    }
    total
}

/// Why the job cannot start: it sets every tracing file it uses itself and
/// resets them after each mode, so it runs only with tracing idle (as
/// `stress` does), rather than wipe what a user set up.
fn busy() -> Option<&'static str> {
    let top = trace::array::instances::top();
    let read = |file: &str| {
        let mut text = String::new();
        let _ = tracefs::read(file, &mut text);
        text
    };
    if top.current_tracer() != trace::tracers::Tracer::Nop {
        Some("set current_tracer to nop first")
    } else if !top.tracer_filter_names(ftrace::FilterKind::Filter).is_empty() {
        Some("empty set_ftrace_filter first")
    } else if !read("dynamic_events").is_empty() || !read("set_event").is_empty() {
        Some("remove the events first")
    } else if tracefs::exists(INSTANCE) {
        Some("remove instances/b first")
    } else {
        None
    }
}

/// Runs every mode (or the ones named) and prints a line for each. Refused
/// unless tracing is idle; a mode that cannot be set up is undone.
pub fn run(only: &[&str]) -> Result<(), String> {
    if let Some(why) = busy() {
        return Err(format!("bench vs-linux: {why}"));
    }
    println!("vso-info {} func {FUNC} other {OTHER} calls {CALLS} runs {RUNS}", arch::NAME);
    // Never called, but it must exist to be traced.
    black_box(other_call as extern "C" fn(u64) -> u64);
    reset()?;
    for _ in 0..WARMUP_LOOPS {
        loop_ns();
    }
    for mode in MODES.iter().filter(|mode| only.is_empty() || only.contains(mode)) {
        let before = best_ns();
        let variant = setup(mode).inspect_err(|_| {
            let _ = reset();
        })?;
        let traced = best_ns();
        let events = events();
        reset()?;
        let after = best_ns();
        let added = (traced as f64 - (before + after) as f64 / 2.0) / CALLS as f64;
        println!("vso {mode} {before} {traced} {after} {added:.1} {variant} events={events}");
    }
    println!("vso-done");
    Ok(())
}
