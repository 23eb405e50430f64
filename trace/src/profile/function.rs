//! The function profiler: `echo 1 > function_profile_enabled` counts every
//! call of the functions `set_ftrace_filter` selects (all of them when it is
//! empty) and the time spent in each, per CPU; `trace_stat/functionN`
//! prints CPU N's counts (`crate::profile::stats`), as Linux's profiler does.
//!
//! It is a function-graph user: the entry callback counts the hit and keeps
//! the entry time in the call's data words, the return callback adds the
//! call's duration (children included, unless the top level's `graph-time`
//! is off; the time its task spent switched out too, unless its
//! `sleep-time` is off). A
//! call hooked before profiling last stopped adds nothing when it returns:
//! its entry was counted in tables since emptied, and its duration would
//! span the pause (the data words keep the registration the call came in
//! under, [`FgraphOps::generation`]). Each
//! CPU has its own [`ProfileTable`], made on first use and kept, emptied
//! whenever profiling starts. Callbacks take no lock: the tables are
//! reached through a `Once`, updated with atomics.

use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::Ordering;

use arch::ftrace_abi::FtraceRegs;
use arch::sync::Mutex;
use spin::Once;

use crate::array::options::TraceOption;
use crate::profile::stats::{self, FunctionStat, ProfileTable};
use ftrace::graph::fgraph::{EntryData, FgraphEntry, FgraphOps, FgraphReturn};
use ftrace::symbols::kernel as symbols;
use ftrace::{registry, task, FtraceError, FtraceOps};
use ring_buffer::clock;

/// Per call: the entry time, the registration, and the task's sleep time
/// and profiled time at the entry (for `sleep-time` and `graph-time` off).
static PROFILER: FgraphOps = FgraphOps::new(profile_entry, profile_return).with_data_words(4);

/// One table per CPU.
static TABLES: Once<Vec<ProfileTable>> = Once::new();

/// Whether profiling is on; serialises switching it.
static ENABLED: Mutex<bool> = Mutex::new(false);

/// Why profiling could not start; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileError {
    /// The heap cannot hold the tables.
    NoMemory,
    /// Tracing refused the registration.
    Tracing(FtraceError),
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::NoMemory => write!(f, "not enough memory for the profiler's tables"),
            ProfileError::Tracing(error) => write!(f, "{error}"),
        }
    }
}

/// This CPU's table (a stale CPU number only picks another table: every
/// update is atomic).
#[inline]
fn table() -> Option<&'static ProfileTable> {
    let tables = TABLES.get()?;
    tables.get(arch::cpu::id() % tables.len())
}

fn profile_entry(gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, _fregs: &mut FtraceRegs) -> bool {
    let Some(table) = table() else { return false };
    let state = task::current();
    // The clock, then the sums, with interrupts masked: an interrupt's
    // calls land either before the call or inside it, in both.
    let at_entry = {
        let _irq = arch::irq::IrqGuard::new();
        [clock::now_ns(), state.slept_ns(), state.profiled_ns.load(Ordering::Relaxed)]
    };
    if data.reserve_with([at_entry[0], u64::from(gops.generation()), at_entry[1], at_entry[2]]).is_none() {
        return false;
    }
    table.hit(call.func);
    true
}

/// A call's time, as the top level's options (the profiler's files are
/// there) say: `sleep-time` off takes out the time its task spent switched
/// out, `graph-time` off the time of the profiled calls it made.
///
/// For the second, the task keeps a running sum, `profiled_ns`: each
/// profiled return sets it to what it was at the call's entry plus the
/// call's whole time, so what it grew by between a call's entry and its
/// return is the time of the calls that returned directly inside it (each
/// replaced what its own inner calls added). Interrupts nest strictly, so
/// an interrupt's calls count as calls of the code they interrupted, as
/// with Linux's shadow-stack parent. The clock and the sum are read and
/// the sum written with interrupts masked, so an interrupt's calls are
/// wholly inside the call or outside it. (Recent Linux, since its profiler
/// keeps the inner time in fgraph data, also shows a function with no
/// profiled calls inside as taking no time when `graph-time` is off; here
/// it keeps its time.)
fn profile_return(gops: &FgraphOps, call: &FgraphReturn, data: &[u64], _fregs: &mut FtraceRegs) {
    let &[start, generation, slept_at_entry, profiled_at_entry] = data else { return };
    if generation != u64::from(gops.generation()) {
        return;
    }
    let top = crate::array::instances::top();
    let state = task::current();
    let irq = arch::irq::IrqGuard::new();
    let mut time = clock::now_ns().saturating_sub(start);
    if !top.option(TraceOption::SleepTime) {
        time = time.saturating_sub(state.slept_ns().wrapping_sub(slept_at_entry));
    }
    let inner = state.profiled_ns.load(Ordering::Relaxed).wrapping_sub(profiled_at_entry);
    state.profiled_ns.store(profiled_at_entry.wrapping_add(time), Ordering::Relaxed);
    drop(irq);
    if !top.option(TraceOption::GraphTime) {
        time = time.saturating_sub(inner);
    }
    if let Some(table) = table() {
        table.add_time(call.func, time);
    }
}

/// Makes the tables on first use: room for every patchable function twice
/// over, so the open addressing stays short.
fn tables() -> Result<&'static Vec<ProfileTable>, ProfileError> {
    if let Some(tables) = TABLES.get() {
        return Ok(tables);
    }
    let mut sites = 0;
    registry::for_each_site(|_| sites += 1);
    let mut tables = Vec::new();
    for _ in 0..ring_buffer::trace_buffer::cpus() {
        tables.push(ProfileTable::try_new(sites * 2).ok_or(ProfileError::NoMemory)?);
    }
    Ok(TABLES.call_once(|| tables))
}

/// `echo 0|1 > function_profile_enabled`. Starting empties the counts and
/// takes the filters `from` has (the top level's function tracer).
pub fn set_enabled(on: bool, from: &FtraceOps) -> Result<(), ProfileError> {
    let mut enabled = ENABLED.lock();
    if *enabled == on {
        return Ok(());
    }
    if on {
        for table in tables()? {
            table.reset();
        }
        registry::copy_filters(from, PROFILER.ops()).map_err(ProfileError::Tracing)?;
        PROFILER.register().map_err(ProfileError::Tracing)?;
    } else {
        PROFILER.unregister().map_err(ProfileError::Tracing)?;
    }
    *enabled = on;
    Ok(())
}

/// Whether profiling is on.
pub fn is_enabled() -> bool {
    *ENABLED.lock()
}

/// Follows a change of the filters the profiler takes (`set_ftrace_filter`).
pub fn follow_filters(from: &FtraceOps) -> Result<(), FtraceError> {
    registry::copy_filters(from, PROFILER.ops())
}

/// CPU `cpu`'s counts, the most time first (none before profiling first
/// started).
pub fn cpu_stats(cpu: usize) -> Vec<FunctionStat> {
    TABLES.get().and_then(|tables| tables.get(cpu)).map(ProfileTable::stats).unwrap_or_default()
}

/// `cat trace_stat/functionN`: CPU `cpu`'s counts (but for functions
/// whose average is below `tracing_thresh`, as in Linux).
pub fn write_cpu_stats(cpu: usize, out: &mut dyn Write) -> fmt::Result {
    stats::write_stats(out, &cpu_stats(cpu), crate::tracers::function_graph::tracing_thresh_ns(), &symbols::name_of)
}
