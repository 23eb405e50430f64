//! Built-in workloads: ordinary, traced kernel code to trace.
//!
//! `run fib N` computes Fibonacci numbers the slow way: every call is a real
//! call (the results pass through `black_box`, so the compiler cannot turn the
//! recursion into a loop), so `fib(5)` makes exactly 15 calls. `run fs`
//! exercises a small in-memory file system.

pub mod fs;
pub mod generated;

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

/// Why a workload did not run.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkloadError {
    Unknown(String),
    Usage(&'static str),
}

impl core::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WorkloadError::Unknown(name) => write!(f, "no such workload '{name}' (fib, fs)"),
            WorkloadError::Usage(usage) => write!(f, "usage: {usage}"),
        }
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
