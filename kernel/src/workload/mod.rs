//! Built-in workloads: ordinary, traced kernel code to trace.
//!
//! `run fib N` computes Fibonacci numbers the slow way: every call is a real
//! call (the results pass through `black_box`, so the compiler cannot turn the
//! recursion into a loop), so `fib(5)` makes exactly 15 calls. `run fs`
//! exercises a small in-memory file system.

pub mod fs;
pub mod generated;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::hint::black_box;

/// The n-th Fibonacci number, by naive recursion: `fib(n)` makes
/// `2 * fib(n + 1) - 1` calls of itself.
#[inline(never)]
pub fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    black_box(fib(black_box(n - 1))) + black_box(fib(black_box(n - 2)))
}

/// The largest `n` `run fib` accepts (fib(32) is millions of calls).
pub const MAX_FIB: u64 = 32;

/// `fib(n)`, but the call sleeps for a millisecond before and after the
/// computation: a traced function a task sleeps inside (and may wake up
/// on another CPU from).
#[inline(never)]
pub fn napping_fib(n: u64) -> u64 {
    crate::sched::sleep_ms(1);
    let result = fib(black_box(n));
    crate::sched::sleep_ms(1);
    result
}

/// The most threads `run par` starts.
pub const MAX_THREADS: usize = 16;

/// Why a workload did not run.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkloadError {
    Unknown(String),
    Usage(&'static str),
    Spawn(crate::sched::SpawnError),
}

impl core::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WorkloadError::Unknown(name) => write!(f, "no such workload '{name}' (fib, fs)"),
            WorkloadError::Usage(usage) => write!(f, "usage: {usage}"),
            WorkloadError::Spawn(error) => write!(f, "{error}"),
        }
    }
}

/// Runs workload `name` with `args` on `threads` kernel threads at once
/// (named `NAME/0`, `NAME/1`, ...; the odd ones run it inside a traced
/// function that sleeps), and returns one line per thread: its name and
/// what it printed. The scheduler places the threads.
pub fn run_parallel(threads: usize, name: &str, args: &[&str]) -> Result<String, WorkloadError> {
    run_parallel_on(threads, |_| u64::MAX, name, args)
}

/// [`run_parallel`] with thread `index` restricted to the CPUs in
/// `affinity(index)` (a bit per CPU): a test that needs its threads on
/// several CPUs says so, rather than count on the scheduler's placement
/// (which, on a loaded host whose other virtual CPUs are slow to run, may
/// leave every thread on one).
pub fn run_parallel_on(
    threads: usize,
    affinity: impl Fn(usize) -> u64,
    name: &str,
    args: &[&str],
) -> Result<String, WorkloadError> {
    if threads == 0 || threads > MAX_THREADS {
        return Err(WorkloadError::Usage("run par T WORKLOAD ARGS... (T from 1 to 16)"));
    }
    // Refuse bad arguments before starting anything.
    check(name, args)?;
    let mut handles = alloc::vec::Vec::new();
    for index in 0..threads {
        let thread_name = format!("{name}/{index}");
        let (name, args): (String, alloc::vec::Vec<String>) = (name.into(), args.iter().map(|a| String::from(*a)).collect());
        let handle = crate::sched::spawn_on(&thread_name, affinity(index), move || {
            let args: alloc::vec::Vec<&str> = args.iter().map(String::as_str).collect();
            let output = if index % 2 == 1 { run_napping(&name, &args) } else { run(&name, &args) };
            let line = output.unwrap_or_else(|error| format!("error: {error}"));
            Box::into_raw(Box::new(line)) as u64
        });
        match handle {
            Ok(handle) => handles.push((thread_name, handle)),
            Err(error) => {
                // The threads that started finish, and their results are
                // freed, before the error is told.
                for (_, handle) in handles {
                    // SAFETY: each thread's result is a `Box<String>` it
                    // leaked above.
                    drop(unsafe { Box::from_raw(handle.join() as *mut String) });
                }
                return Err(WorkloadError::Spawn(error));
            }
        }
    }
    let mut out = String::new();
    for (thread_name, handle) in handles {
        let pid = handle.pid();
        // SAFETY: each thread's result is a `Box<String>` it leaked above.
        let line = unsafe { Box::from_raw(handle.join() as *mut String) };
        out.push_str(&format!("{thread_name} (pid {pid}): {line}\n"));
    }
    out.pop();
    Ok(out)
}

/// The workload's arguments, checked.
fn check(name: &str, args: &[&str]) -> Result<(), WorkloadError> {
    match (name, args) {
        ("fib", [n]) if n.parse::<u64>().is_ok_and(|n| n <= MAX_FIB) => Ok(()),
        ("fib", _) => Err(WorkloadError::Usage("run fib N (0..=32)")),
        ("fs", []) => Ok(()),
        ("fs", _) => Err(WorkloadError::Usage("run fs")),
        (other, _) => Err(WorkloadError::Unknown(other.into())),
    }
}

/// [`run`], sleeping inside traced calls (fib only).
fn run_napping(name: &str, args: &[&str]) -> Result<String, WorkloadError> {
    match (name, args) {
        ("fib", [n]) => {
            let n: u64 = n.parse().ok().filter(|&n| n <= MAX_FIB).ok_or(WorkloadError::Usage("run fib N (0..=32)"))?;
            Ok(format!("fib({n}) = {}", napping_fib(black_box(n))))
        }
        _ => run(name, args),
    }
}

/// Runs workload `name` with `args` and returns what it prints.
#[inline(never)]
pub fn run(name: &str, args: &[&str]) -> Result<String, WorkloadError> {
    match (name, args) {
        ("fib", [n]) => {
            let n: u64 = n.parse().ok().filter(|&n| n <= MAX_FIB).ok_or(WorkloadError::Usage("run fib N (0..=32)"))?;
            let result = fib(black_box(n));
            Ok(format!("fib({n}) = {result}"))
        }
        ("fib", _) => Err(WorkloadError::Usage("run fib N (0..=32)")),
        ("fs", []) => Ok(fs::run()),
        ("fs", _) => Err(WorkloadError::Usage("run fs")),
        (other, _) => Err(WorkloadError::Unknown(other.into())),
    }
}
