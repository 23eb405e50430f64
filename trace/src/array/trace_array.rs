//! One trace array (Linux's `struct trace_array`): the top level of
//! tracefs or one instance.
//!
//! Each has its own buffer, `tracing_on`, tracer, tracer filters, graph
//! settings and `error_log`: `mkdir instances/NAME` makes one,
//! `rmdir instances/NAME` removes it. A tracer is an ops embedded in its
//! trace array, so a traced call finds the array (and its buffer) from the
//! ops it was called with: two arrays tracing one function are two ops on
//! the site, as in Linux.
//!
//! The graph tracer keeps per-task markers (`set_graph_function`,
//! `set_graph_notrace`) in a slot of each task's state; every array owns
//! one of [`GRAPH_SLOTS`](ftrace::task::GRAPH_SLOTS) slots, which bounds the instances to
//! [`MAX_INSTANCES`](crate::array::instances::MAX_INSTANCES) (Linux bounds function-graph users the same way).

use crate::array::instances::{top, INSTANCES};
use crate::array::options::TraceOption;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arch::sync::Mutex;
use arch::MAX_CPUS;
use spin::Once;

use crate::array::error_log::ErrorLog;
use crate::array::pid_list::PidLists;
use crate::events::record::PrintWriter;
use crate::tracers::Tracer;
use ftrace::deferred::{Deferred, Published};
use ftrace::graph::fgraph::FgraphOps;
use ftrace::ops::{FtraceOps, OpsFlags};
use ftrace::registry::{self, FilterKind, FtraceError};
use ftrace::symbols::glob::FilterMode;
use ftrace::task::{self};
use ring_buffer::per_cpu::Stats;
use ring_buffer::trace_buffer::{SwapRefused, TraceBuffer};

/// The function_graph tracer's settings of one array.
pub struct GraphSettings {
    /// `max_graph_depth` (0: no limit).
    pub(crate) max_depth: AtomicUsize,
    /// `set_graph_function` and `set_graph_notrace`: sorted function
    /// addresses, published as immutable snapshots (nothing published: an
    /// empty list), so the traced path reads them without a lock and never
    /// misses a match because a writer holds one.
    pub(crate) functions: Published<Vec<usize>>,
    pub(crate) notrace: Published<Vec<usize>>,
    /// Serialises the lists' writers (and readers outside the traced path).
    lists: Mutex<()>,
    /// No pid filter, graph list, depth limit or `tracing_thresh`, and
    /// `funcgraph-irqs` on: the graph tracer's entry can skip every check
    /// (kept by [`TraceArray::refresh_graph_plain`]).
    pub(crate) plain: AtomicBool,
    /// Serialises the refreshes of `plain`: each change first, then its
    /// refresh, so the last refresh sees every change (two refreshes
    /// storing in the other order could leave a stale value).
    refreshing: Mutex<()>,
}

impl GraphSettings {
    const fn new() -> GraphSettings {
        GraphSettings {
            max_depth: AtomicUsize::new(0),
            functions: Published::empty(),
            notrace: Published::empty(),
            lists: Mutex::new(()),
            plain: AtomicBool::new(true),
            refreshing: Mutex::new(()),
        }
    }
}

/// Which graph list a change applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphList {
    /// `set_graph_function`.
    Functions,
    /// `set_graph_notrace`.
    Notrace,
}

/// One trace array. See the module documentation.
pub struct TraceArray {
    pub(super) name: String,
    /// This array's slot of every task's graph markers.
    pub(super) slot: usize,
    pub(super) buffer: Once<TraceBuffer>,
    tracer: Mutex<Tracer>,
    /// The function tracer: its filters are `set_ftrace_filter` and
    /// `set_ftrace_notrace`.
    pub(crate) function_ops: FtraceOps,
    /// The function_graph tracer, with the same filters.
    pub(crate) graph_ops: FgraphOps,
    pub(crate) graph: GraphSettings,
    /// The function tracer when a pid filter is set or
    /// `options/func_stack_trace` is on: it leaves out the tasks the filter
    /// marks and adds the stack traces (the plain `function_ops` checks
    /// nothing).
    pub(crate) checking_ops: FtraceOps,
    /// `set_ftrace_pid` and `set_ftrace_notrace_pid`.
    pids: Mutex<PidLists>,
    /// `set_event_pid` and `set_event_notrace_pid` (`crate::events::pid`).
    event_pids: Mutex<PidLists>,
    /// The trace options that are on, a [`TraceOption::bit`] each.
    options: AtomicU64,
    /// Its `error_log`: the refused writes to its files.
    error_log: ErrorLog,
    /// Each CPU's last function call, for `options/func-no-repeats`.
    pub(crate) last_calls: [crate::tracers::function::LastCall; MAX_CPUS],
    /// Handles out: `rmdir` is refused while there are any.
    pub(super) users: AtomicUsize,
    /// The `hist` trigger whose `.snapshot()` action holds the snapshot
    /// buffer (Linux's conditional snapshot, one per trace array), by its
    /// line, and how many holds it has (a `pause`, `cont` or `clear` line
    /// of the same trigger holds it too while it is applied). While it is
    /// held the `snapshot` file refuses writes, as Linux's does.
    cond_snapshot: Mutex<Option<(String, usize)>>,
    /// Queues the free after `rmdir`.
    pub(super) node: Deferred,
}

impl TraceArray {
    pub(super) const fn new(name: String, slot: usize) -> TraceArray {
        TraceArray {
            name,
            slot,
            buffer: Once::new(),
            tracer: Mutex::new(Tracer::Nop),
            function_ops: FtraceOps::of::<crate::tracers::function::FunctionTrace>(OpsFlags::RECURSION),
            graph_ops: crate::tracers::function_graph::graph_ops(),
            graph: GraphSettings::new(),
            checking_ops: FtraceOps::new(crate::tracers::function::function_trace_call_checking, OpsFlags::RECURSION),
            pids: Mutex::new(PidLists::new()),
            event_pids: Mutex::new(PidLists::new()),
            options: AtomicU64::new(TraceOption::DEFAULTS),
            error_log: ErrorLog::new(),
            last_calls: [const { crate::tracers::function::LastCall::new() }; MAX_CPUS],
            users: AtomicUsize::new(0),
            cond_snapshot: Mutex::new(None),
            node: Deferred::new(),
        }
    }

    /// Its name (empty for the top level).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is the top level (not an instance).
    pub fn is_top(&self) -> bool {
        core::ptr::eq(self, top())
    }

    /// Its `error_log` (the top level's keeps the probe definitions'
    /// errors too, as Linux's does).
    pub fn error_log(&self) -> &ErrorLog {
        &self.error_log
    }

    /// Its slot of every task's graph markers.
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    /// Its buffer.
    #[inline]
    pub fn buffer(&self) -> &TraceBuffer {
        // Made before the array is reachable: `init` for the top level,
        // `create` for an instance.
        self.buffer.get().expect("a trace array's buffer is made with it")
    }

    /// Its buffer, without the test that it was made: for its tracers'
    /// callbacks, on every traced call (the test costs five instructions).
    ///
    /// # Safety
    /// The buffer must have been made. It is when a tracer ops of this array
    /// runs: the top level's at boot (`init`) before any ops can be
    /// registered, an instance's (`create`) before the instance can be
    /// reached.
    #[inline(always)]
    pub(crate) unsafe fn buffer_made(&self) -> &TraceBuffer {
        debug_assert!(self.buffer.is_completed());
        // SAFETY: made, the caller's promise.
        unsafe { self.buffer.get_unchecked() }
    }

    /// Its buffer's counters.
    pub fn stats(&self) -> Stats {
        self.buffer().stats()
    }

    /// The current tracer.
    pub fn current_tracer(&self) -> Tracer {
        *self.tracer.lock()
    }

    /// Switches tracers: stops the old one, empties the buffer, starts the
    /// new. If the new one cannot start, the old one is restarted.
    pub fn set_current_tracer(&'static self, tracer: Tracer) -> Result<(), FtraceError> {
        let mut current = self.tracer.lock();
        if *current == tracer {
            return Ok(());
        }
        self.stop(*current)?;
        self.buffer().reset();
        if let Err(error) = self.start(tracer) {
            let _ = self.start(*current);
            return Err(error);
        }
        *current = tracer;
        Ok(())
    }

    fn start(&'static self, tracer: Tracer) -> Result<(), FtraceError> {
        match tracer {
            Tracer::Nop => Ok(()),
            Tracer::Function => {
                // A run starts with no call to repeat.
                self.last_calls.iter().for_each(crate::tracers::function::LastCall::forget);
                // The latency banner's CPU, as Linux's `function_trace_init`.
                self.buffer().set_start_cpu(arch::cpu::id());
                registry::register(self.active_function_ops())
            }
            Tracer::FunctionGraph => self.graph_ops.register(),
        }
    }

    /// Whether the function tracer needs [`Self::checking_ops`].
    fn needs_checking_ops(&self) -> bool {
        self.pids.lock().is_active() || self.option(TraceOption::FuncStackTrace) || self.option(TraceOption::FuncNoRepeats)
    }

    /// The function tracer's ops: the one that checks pids and options
    /// while something asks for it, the one that does not otherwise (Linux
    /// swaps its callback the same way).
    fn active_function_ops(&self) -> &FtraceOps {
        match self.needs_checking_ops() {
            true => &self.checking_ops,
            false => &self.function_ops,
        }
    }

    /// Whether the checking ops is the one registered (for the function
    /// tracer running): asked of the registry, not worked out from the
    /// pids and options, which a task's exit may change under the tracer
    /// (`forget_task`).
    fn checking_ops_live(&self) -> bool {
        registry::is_registered(&self.checking_ops)
    }

    /// After a change that may ask for the other function ops (the
    /// caller holds `tracer`, the tracer running is `tracer`): swaps them if
    /// the function tracer runs.
    fn swap_function_ops(&'static self, tracer: Tracer) -> Result<(), FtraceError> {
        let checking = self.needs_checking_ops();
        if tracer == Tracer::Function && checking != self.checking_ops_live() {
            let (old, new) = match checking {
                true => (&self.function_ops, &self.checking_ops),
                false => (&self.checking_ops, &self.function_ops),
            };
            registry::register(new)?;
            let _ = registry::unregister(old);
        }
        Ok(())
    }

    fn stop(&'static self, tracer: Tracer) -> Result<(), FtraceError> {
        match tracer {
            Tracer::Nop => Ok(()),
            Tracer::Function => match self.checking_ops_live() {
                true => registry::unregister(&self.checking_ops),
                false => registry::unregister(&self.function_ops),
            },
            Tracer::FunctionGraph => self.graph_ops.unregister(),
        }
    }

    /// Sets a tracer filter (`set_ftrace_filter` / `set_ftrace_notrace`):
    /// it applies to both tracers, as Linux's per-array filter does. On
    /// error nothing changes.
    pub fn set_tracer_filter(&self, kind: FilterKind, text: &str, mode: FilterMode) -> Result<(), FtraceError> {
        registry::set_filter(&self.function_ops, kind, text, mode)?;
        // Same records, same text: if the first applied, this one does too;
        // keep the two identical even so.
        registry::copy_filters(&self.function_ops, self.graph_ops.ops())?;
        registry::copy_filters(&self.function_ops, &self.checking_ops)?;
        if core::ptr::eq(self, top()) {
            // The function profiler counts what the top level's filter selects.
            crate::profile::function::follow_filters(&self.function_ops)?;
        }
        Ok(())
    }

    /// Whether [`set_tracer_filter`](Self::set_tracer_filter) would take
    /// `text` (every glob matches a function), changing nothing: for a
    /// write that must check everything before it changes anything.
    pub fn check_tracer_filter(&self, text: &str, mode: FilterMode) -> Result<(), FtraceError> {
        registry::match_functions(&[], text, mode).map(drop)
    }

    /// `echo 0|1 > function_profile_enabled` (the top level's filters).
    pub fn set_function_profile(&self, on: bool) -> Result<(), crate::profile::function::ProfileError> {
        crate::profile::function::set_enabled(on, &self.function_ops)
    }

    /// The functions a tracer filter names.
    pub fn tracer_filter_names(&self, kind: FilterKind) -> Vec<&'static str> {
        registry::filter_names(&self.function_ops, kind)
    }

    /// Sets `options/funcgraph-retval`.
    pub fn set_graph_retval(&'static self, on: bool) {
        let _ = self.set_option(TraceOption::FuncgraphRetval, on);
    }

    /// `options/funcgraph-retval`.
    pub fn graph_retval(&self) -> bool {
        self.option(TraceOption::FuncgraphRetval)
    }

    /// `set_event_pid` and `set_event_notrace_pid`, for `crate::events::pid`.
    pub(crate) fn event_pids(&self) -> &Mutex<PidLists> {
        &self.event_pids
    }

    /// `set_ftrace_pid` (`notrace` false) or `set_ftrace_notrace_pid`: the
    /// pids, in ascending order (Linux keeps them in a bitmap).
    pub fn pids(&self, notrace: bool) -> Vec<i32> {
        self.pids.lock().sorted(notrace)
    }

    /// Whether `set_ftrace_pid` (`notrace`: `set_ftrace_notrace_pid`) is
    /// set: given pids, and not cleared since (the traced list stays set
    /// once its tasks have all gone).
    pub fn pid_list_set(&self, notrace: bool) -> bool {
        self.pids.lock().is_set(notrace)
    }

    /// `echo PIDS > set_ftrace_pid` (or `>>`; `notrace`: the notrace list):
    /// the function tracers then trace only the listed tasks (or all but
    /// the notrace ones). Empty text with `Replace` clears the list. A word
    /// that is not a pid changes nothing.
    pub fn set_pids(&'static self, notrace: bool, text: &str, mode: FilterMode) -> Result<(), PidError> {
        let parsed = parse_pids(text)?;
        let tracer = self.tracer.lock();
        let old = {
            let mut pids = self.pids.lock();
            let old = pids.clone();
            pids.write(notrace, &parsed, mode);
            old
        };
        self.refresh_ignored();
        self.refresh_graph_plain();
        self.swap_function_ops(*tracer).map_err(|_| {
            // Refused: the list as it was (the ops were not swapped).
            *self.pids.lock() = old;
            self.refresh_ignored();
            self.refresh_graph_plain();
            PidError(String::from("(tracing refused the change)"))
        })
    }

    /// Marks every task this array's pid filter leaves out.
    fn refresh_ignored(&self) {
        let pids = self.pids.lock();
        task::for_each(|state| state.set_ignored(self.slot, pids.ignores(state.pid())));
    }

    /// `echo N > snapshot`: 0 frees the snapshot; 1 allocates it if need
    /// be and takes one (the buffer's events move to the snapshot, and
    /// recording goes on in an empty buffer); any other number empties the
    /// snapshot and keeps it. Refused while a `hist` action takes
    /// snapshots.
    pub fn snapshot_command(&self, command: u64) -> Result<(), SnapshotError> {
        // Held across the command: a hold cannot start between the check
        // and a free.
        let held = self.cond_snapshot.lock();
        if held.is_some() {
            return Err(SnapshotError::Busy);
        }
        let buffer = self.buffer();
        match command {
            0 => buffer.free_snapshot(),
            1 => {
                buffer.alloc_snapshot().map_err(|_| SnapshotError::NoMemory)?;
                // What recording goes on in (the old snapshot) starts empty.
                buffer.take_snapshot();
            }
            _ => buffer.reset_snapshot(),
        }
        Ok(())
    }

    /// The snapshot buffer, allocated if need be and held for the `hist`
    /// trigger `owner` (its line), whose action takes snapshots (Linux's
    /// conditional snapshot): the `snapshot` file refuses writes until
    /// every hold is released. Another trigger's hold refuses it (`Busy`).
    pub fn hold_cond_snapshot(&'static self, owner: &str) -> Result<Arc<dyn crate::events::hist::SnapshotTarget>, SnapshotError> {
        let mut held = self.cond_snapshot.lock();
        match &mut *held {
            Some((line, holds)) if line == owner => *holds += 1,
            Some(_) => return Err(SnapshotError::Busy),
            None => {
                self.buffer().alloc_snapshot().map_err(|_| SnapshotError::NoMemory)?;
                *held = Some((String::from(owner), 1));
            }
        }
        Ok(Arc::new(CondSnapshot { array: self, released: AtomicBool::new(false) }))
    }

    /// Runs a write that may allocate the snapshot buffer (a snapshot
    /// command, a `hist` `.snapshot()` action): if it is refused, a buffer
    /// that was not there before goes again (unless a `hist` action holds
    /// it), so the refusal changes nothing.
    pub fn giving_back_snapshot_on_error<T, E>(&self, write: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let had_snapshot = self.buffer().snapshot_allocated();
        let result = write();
        if result.is_err() && !had_snapshot {
            let held = self.cond_snapshot.lock();
            if held.is_none() {
                self.buffer().free_snapshot();
            }
        }
        result
    }

    /// A `snapshot` trigger's or function command's snapshot, as Linux's
    /// `tracing_snapshot_instance_cond`: with no snapshot buffer (`echo 0 >
    /// snapshot` freed it) it says so in the trace and turns tracing off,
    /// which keeps the trace as it was there. Neither allocates nor waits:
    /// callable from a callback.
    pub fn snapshot_or_stop(&self) {
        let buffer = self.buffer();
        if buffer.swap_snapshot() == Err(SwapRefused::NotAllocated) {
            for line in ["*** SNAPSHOT NOT ALLOCATED ***\n", "*** stopping trace here!   ***\n"] {
                crate::printk::write_print(self, PrintWriter::Snapshot, line.as_bytes());
            }
            buffer.set_on(false);
        }
    }

    /// Whether trace option `option` is on.
    pub fn option(&self, option: TraceOption) -> bool {
        self.options.load(Ordering::Relaxed) & option.bit() != 0
    }

    /// Switches trace option `option` (`echo 0|1 > options/NAME`).
    pub fn set_option(&'static self, option: TraceOption, on: bool) -> Result<(), FtraceError> {
        let tracer = self.tracer.lock();
        if option == TraceOption::FuncNoRepeats && on && !self.option(option) {
            // Counting starts with no call to repeat (nothing counts while
            // the option is off).
            self.last_calls.iter().for_each(crate::tracers::function::LastCall::forget);
        }
        let before = match on {
            true => self.options.fetch_or(option.bit(), Ordering::Relaxed),
            false => self.options.fetch_and(!option.bit(), Ordering::Relaxed),
        };
        let swapped = self.swap_function_ops(*tracer);
        match swapped {
            // Tracing refused the other ops: the option stays as it was.
            Err(_) => self.options.store(before, Ordering::Relaxed),
            Ok(()) if option == TraceOption::Overwrite => self.buffer().set_overwrite(on),
            Ok(()) if option == TraceOption::RecordTgid => crate::task_names::set_record_tgid(self.slot, on),
            Ok(()) if option == TraceOption::RecordCmd => crate::task_names::set_record_cmd(self.slot, on),
            Ok(()) if matches!(option, TraceOption::FuncgraphIrqs | TraceOption::SleepTime | TraceOption::FuncgraphRetaddr) => {
                self.refresh_graph_plain()
            }
            Ok(()) => {}
        }
        swapped
    }

    /// How `trace` prints the function tracer's lines.
    pub fn function_options(&self) -> crate::output::FunctionOptions {
        crate::output::FunctionOptions {
            sym_offset: self.option(TraceOption::SymOffset),
            sym_addr: self.option(TraceOption::SymAddr),
            print_parent: self.option(TraceOption::PrintParent),
            context: self.context_options(),
        }
    }

    /// How `trace` prints events (under any tracer but function_graph):
    /// `hex` first, then `raw`, then `fields`, as Linux chooses.
    pub fn print_mode(&self) -> crate::output::print_modes::PrintMode {
        use crate::output::print_modes::PrintMode;
        match () {
            _ if self.option(TraceOption::Hex) => PrintMode::Hex,
            _ if self.option(TraceOption::Raw) => PrintMode::Raw,
            _ if self.option(TraceOption::Fields) => PrintMode::Fields,
            _ => PrintMode::Text,
        }
    }

    /// What the start of every line shows (`trace`, `trace_pipe`).
    pub fn context_options(&self) -> crate::output::ContextOptions {
        crate::output::ContextOptions {
            context_info: self.option(TraceOption::ContextInfo),
            irq_info: self.option(TraceOption::IrqInfo),
            raw_time: !self.buffer().clock().in_ns(),
            latency: self
                .option(TraceOption::LatencyFormat)
                .then(|| crate::output::LatencyStart { time: self.buffer().time_start(), cpu: self.buffer().start_cpu() }),
            verbose: self.option(TraceOption::Verbose),
            tgids: self.option(TraceOption::RecordTgid).then_some(crate::task_names::tgid_of as crate::output::Tgids),
        }
    }

    /// How `trace` prints the graph tracer's lines.
    pub fn graph_options(&self) -> crate::output::graph::GraphOptions {
        crate::output::graph::GraphOptions {
            retval: self.option(TraceOption::FuncgraphRetval),
            retval_hex: self.option(TraceOption::FuncgraphRetvalHex),
            retaddr: self.option(TraceOption::FuncgraphRetaddr),
            sym_addr: self.option(TraceOption::SymAddr),
            cpu: self.option(TraceOption::FuncgraphCpu),
            raw_time: !self.buffer().clock().in_ns(),
            proc: self.option(TraceOption::FuncgraphProc),
            abstime: self.option(TraceOption::FuncgraphAbstime),
            duration: self.option(TraceOption::FuncgraphDuration),
            overhead: self.option(TraceOption::FuncgraphOverhead),
            tail: self.option(TraceOption::FuncgraphTail),
            overrun: self.option(TraceOption::FuncgraphOverrun),
            context_info: self.option(TraceOption::ContextInfo),
            print_parent: self.option(TraceOption::PrintParent),
            latency: self.option(TraceOption::LatencyFormat),
        }
    }

    /// Sets `max_graph_depth` (0: no limit).
    pub fn set_max_graph_depth(&self, depth: usize) {
        self.graph.max_depth.store(depth, Ordering::Relaxed);
        self.refresh_graph_plain();
    }

    /// Recomputes [`GraphSettings::plain`] after a change to what it sums up.
    pub(super) fn refresh_graph_plain(&self) {
        let _one_at_a_time = self.graph.refreshing.lock();
        let plain = !self.pids.lock().is_active()
            && self.option(TraceOption::FuncgraphIrqs)
            && self.option(TraceOption::SleepTime)
            && !self.option(TraceOption::FuncgraphRetaddr)
            && crate::tracers::function_graph::tracing_thresh_us() == 0
            && self.graph.max_depth.load(Ordering::Relaxed) == 0
            && self.graph.functions.read(|list| list.is_none())
            && self.graph.notrace.read(|list| list.is_none());
        self.graph.plain.store(plain, Ordering::Relaxed);
    }

    /// `max_graph_depth`.
    pub fn max_graph_depth(&self) -> usize {
        self.graph.max_depth.load(Ordering::Relaxed)
    }

    fn graph_list(&self, list: GraphList) -> &Published<Vec<usize>> {
        match list {
            GraphList::Functions => &self.graph.functions,
            GraphList::Notrace => &self.graph.notrace,
        }
    }

    /// Changes `set_graph_function` or `set_graph_notrace` with globs. On
    /// error nothing changes. The new list is published whole; traced calls
    /// read it without a lock.
    pub fn set_graph_list(&self, list: GraphList, text: &str, mode: FilterMode) -> Result<(), FtraceError> {
        let _writers = self.graph.lists.lock();
        let published = self.graph_list(list);
        let current = published.read(|functions| functions.cloned().unwrap_or_default());
        let updated = registry::match_functions(&current, text, mode)?;
        published.replace((!updated.is_empty()).then_some(updated));
        self.refresh_graph_plain();
        Ok(())
    }

    /// The functions in a graph list.
    pub fn graph_list_names(&self, list: GraphList) -> Vec<&'static str> {
        let _writers = self.graph.lists.lock();
        self.graph_list(list).read(|functions| {
            functions
                .map_or(Vec::new(), |functions| functions.iter().filter_map(|&ip| ftrace::symbols::kernel::name_of(ip)).collect())
        })
    }
}

/// The pids of a write to a pid file (`set_ftrace_pid`, `set_event_pid`
/// and their `notrace` twins): each word a number as C writes it (`0x`
/// hex, a leading `0` octal), as Linux's `trace_pid_write` reads it with
/// `kstrtoul(word, 0, ...)`, within a pid's range.
pub(crate) fn parse_pids(text: &str) -> Result<Vec<i32>, PidError> {
    text.split_whitespace()
        .map(|word| ftrace::number::c_ulong(word).and_then(|pid| i32::try_from(pid).ok()).ok_or_else(|| PidError(word.into())))
        .collect()
}

/// A word written to `set_ftrace_pid` that is not a pid; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidError(pub String);

impl fmt::Display for PidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' is not a pid", self.0)
    }
}

/// `tracing_thresh` changed: it is part of every array's
/// [`GraphSettings::plain`].
pub(crate) fn refresh_every_graph_plain() {
    for_each_array(TraceArray::refresh_graph_plain);
}

/// Runs `f` on the top level and every instance, under the instance
/// list's lock: no instance is removed (and freed) meanwhile.
pub(crate) fn for_each_array(mut f: impl FnMut(&'static TraceArray)) {
    let instances = INSTANCES.lock();
    for array in core::iter::once(top()).chain(instances.iter().copied()) {
        f(array);
    }
}

/// A new task: every array's pid filter decides whether it is traced; with
/// `options/function-fork`, a child joins each list its parent is in.
pub(crate) fn filter_new_task(state: &task::TaskTrace) {
    let parent = task::try_current().map(|parent| parent.pid());
    for_each_array(|array| {
        let mut pids = array.pids.lock();
        if !pids.is_active() {
            return;
        }
        if let (true, Some(parent)) = (array.option(TraceOption::FunctionFork), parent) {
            pids.add_child(parent, state.pid());
        }
        state.set_ignored(array.slot, pids.ignores(state.pid()));
    });
}

/// A task gone for good: with `options/function-fork`, its pid leaves
/// every array's lists, as Linux's fork-following does (a later task may
/// get the pid back).
pub(crate) fn forget_task(state: &task::TaskTrace) {
    for_each_array(|array| {
        if array.option(TraceOption::FunctionFork) {
            array.pids.lock().remove(state.pid());
        }
    });
}

/// Why `echo N > snapshot` was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// No memory for the snapshot buffer.
    NoMemory,
    /// A `hist` action takes snapshots (Linux's `EBUSY`).
    Busy,
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NoMemory => f.write_str("not enough memory for the snapshot buffer"),
            SnapshotError::Busy => f.write_str("busy: a hist trigger's .snapshot() action holds the snapshot buffer"),
        }
    }
}

/// A trace array's snapshot buffer as a `hist` `.snapshot()` action holds
/// it. The action's trigger releases it when it goes, while the array is
/// still there (an instance goes only once its triggers are gone); a
/// release after the first does nothing and does not touch the array.
struct CondSnapshot {
    array: &'static TraceArray,
    released: AtomicBool,
}

impl crate::events::hist::SnapshotTarget for CondSnapshot {
    fn take(&self) -> bool {
        // Allocated by the hold, and no write may free it while held; a
        // swap already under way on another CPU wins (this one is lost,
        // as a busy swap is in Linux).
        self.array.buffer().swap_snapshot().is_ok()
    }

    /// Task context (a trigger's removal, a histogram's deferred free).
    fn release(&self) {
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut held = self.array.cond_snapshot.lock();
        if let Some((_, holds)) = &mut *held {
            *holds -= 1;
            if *holds == 0 {
                *held = None;
            }
        }
    }
}
