//! Trace arrays: the top level of tracefs and its instances (Linux's
//! `struct trace_array`).
//!
//! Each has its own buffer, `tracing_on`, tracer, tracer filters, graph
//! settings and `error_log`: `mkdir instances/NAME` makes one,
//! `rmdir instances/NAME` removes it. A tracer is an ops embedded in its
//! trace array, so a traced call finds the array (and its buffer) from the
//! ops it was called with: two arrays tracing one function are two ops on
//! the site, as in Linux.
//!
//! # Lifetimes
//!
//! The top level is a static. An instance lives on the heap from `mkdir`
//! to some time after `rmdir`: while anyone holds an [`InstanceRef`]
//! (a tracefs access in progress, a benchmark) `rmdir` is refused as busy;
//! otherwise it stops the instance's tracer and hands the array to
//! `ftrace::deferred`, which frees it after a grace period, and not before
//! every call its graph tracer hooked has returned.
//!
//! The graph tracer keeps per-task markers (`set_graph_function`,
//! `set_graph_notrace`) in a slot of each task's state; every array owns
//! one of [`GRAPH_SLOTS`] slots, which bounds the instances to
//! [`MAX_INSTANCES`] (Linux bounds function-graph users the same way).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use arch::sync::Mutex;
use arch::MAX_CPUS;
use spin::Once;

use crate::array::error_log::ErrorLog;
use crate::array::pid_list::PidLists;
use crate::events::record::PrintWriter;
use crate::tracers::Tracer;
use ftrace::deferred::{self, Deferred, Published};
use ftrace::graph::fgraph::FgraphOps;
use ftrace::ops::{FtraceOps, OpsFlags};
use ftrace::registry::{self, FilterKind, FtraceError};
use ftrace::symbols::glob::FilterMode;
use ftrace::task::{self, GRAPH_SLOTS};
use ring_buffer::per_cpu::Stats;
use ring_buffer::trace_buffer::{SwapRefused, TraceBuffer, INSTANCE_PAGES_PER_CPU, PAGES_PER_CPU};

/// The most instances at once: one graph-marker slot is the top level's.
pub const MAX_INSTANCES: usize = GRAPH_SLOTS - 1;

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
    name: String,
    /// This array's slot of every task's graph markers.
    slot: usize,
    buffer: Once<TraceBuffer>,
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
    users: AtomicUsize,
    /// The `hist` trigger whose `.snapshot()` action holds the snapshot
    /// buffer (Linux's conditional snapshot, one per trace array), by its
    /// line, and how many holds it has (a `pause`, `cont` or `clear` line
    /// of the same trigger holds it too while it is applied). While it is
    /// held the `snapshot` file refuses writes, as Linux's does.
    cond_snapshot: Mutex<Option<(String, usize)>>,
    /// Queues the free after `rmdir`.
    node: Deferred,
}

static TOP: TraceArray = TraceArray::new(String::new(), 0);

/// The instances, in creation order.
static INSTANCES: Mutex<Vec<&'static TraceArray>> = Mutex::new(Vec::new());

/// Graph-marker slots in use, a bit each (the top level's is slot 0).
static SLOTS: AtomicU32 = AtomicU32::new(1);

/// The instance in each slot, for tracing code that knows an array by its
/// slot (an event enabled in instances, `crate::events::arrays`): set once
/// the instance is made, emptied by `rmdir` before its grace period.
static IN_SLOT: [AtomicPtr<TraceArray>; GRAPH_SLOTS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; GRAPH_SLOTS];

/// The instance in `slot`, if there is one. Tracing code reads it with
/// interrupts masked: the grace period before the instance is freed waits
/// for that (see `crate::events::arrays`).
pub(crate) fn in_slot(slot: usize) -> Option<&'static TraceArray> {
    let array = IN_SLOT.get(slot)?.load(Ordering::Acquire);
    // SAFETY: a non-null pointer here is a live instance leaked by
    // `create`; `remove` empties the slot before the grace period after
    // which the instance is freed, and the caller masked interrupts, which
    // that grace period waits for.
    unsafe { array.as_ref() }
}

impl TraceArray {
    const fn new(name: String, slot: usize) -> TraceArray {
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
            Ok(()) if option == TraceOption::RecordTgid => crate::events::sched::set_record_tgid(self.slot, on),
            Ok(()) if option == TraceOption::RecordCmd => crate::events::sched::set_record_cmd(self.slot, on),
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
            tgids: self.option(TraceOption::RecordTgid).then_some(crate::events::sched::tgid_of as crate::output::Tgids),
        }
    }

    /// How `trace` prints the graph tracer's lines.
    pub fn graph_options(&self) -> crate::output::GraphOptions {
        crate::output::GraphOptions {
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
    fn refresh_graph_plain(&self) {
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

/// A trace option (`options/NAME`, `trace_options`): how `trace` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOption {
    /// Addresses as `function+0xOFF/0xSIZE` (function tracer).
    SymOffset,
    /// Each function's address after its name (function tracer).
    SymAddr,
    /// The task, CPU, flags and time at the start of each line, and the
    /// column header (on by default).
    ContextInfo,
    /// The latency flags column (`d.h..`; on by default).
    IrqInfo,
    /// `trace_marker` takes writes (on by default).
    Markers,
    /// A full buffer overwrites its oldest events (on by default); off, it
    /// drops new ones until a reader makes room.
    Overwrite,
    /// Every closing brace names its function (function_graph).
    FuncgraphTail,
    /// ` <-caller` after each function (function tracer; on by default).
    PrintParent,
    /// Each call's return value (function_graph).
    FuncgraphRetval,
    /// The task on every line (function_graph).
    FuncgraphProc,
    /// The timestamp on every line (function_graph).
    FuncgraphAbstime,
    /// The duration column (function_graph; on by default).
    FuncgraphDuration,
    /// A task a pid-filtered task creates is traced too.
    FunctionFork,
    /// A task an event-pid-filtered task creates has its events recorded
    /// too (`set_event_pid`).
    EventFork,
    /// A stack trace after every function the function tracer records.
    FuncStackTrace,
    /// A call of the same function from the same place as the CPU's last
    /// is counted, not recorded; the count goes in as one `func_repeats`
    /// record before the next other call (function tracer).
    FuncNoRepeats,
    /// A stack trace after every event recorded (the scheduler's, probe
    /// events).
    StackTrace,
    /// The CPU column (function_graph; on by default).
    FuncgraphCpu,
    /// Return values in hex, error codes too (function_graph; off: an
    /// error code prints as a negative decimal).
    FuncgraphRetvalHex,
    /// Each call's return address, ` /* <-caller+0x1c/0x80 */` after its
    /// entry (function_graph).
    FuncgraphRetaddr,
    /// Functions run by interrupt handlers are traced too (function_graph;
    /// on by default). Off, calls in a hardware interrupt handler are left
    /// out (Linux's `in_hardirq()` test), unless `set_graph_function`
    /// names them or a function they run inside; the softirq-like bottom
    /// half and exception handlers are still traced.
    FuncgraphIrqs,
    /// A long call's duration gets its overhead mark (`+`, `!`, `#`...;
    /// function_graph; on by default).
    FuncgraphOverhead,
    /// After each closing brace, ` (Overruns: N)`: the calls the task's
    /// shadow stack had no room for (function_graph).
    FuncgraphOverrun,
    /// A call's duration counts the time its task spent switched out
    /// (function_graph, and the function profiler through the top level's;
    /// on by default). Off, it is taken out, as Linux's `sleep-time` does.
    SleepTime,
    /// The function profiler's time for a function counts the profiled
    /// calls it makes (on by default); off, not, as Linux's `graph-time`.
    /// Only the top level's counts: the profiler is the top level's.
    GraphTime,
    /// Linux's latency format: a banner over the trace and, on each line,
    /// the task cut to 8 characters, the CPU, the flags and the time since
    /// the buffer was emptied, marked when the next line is far
    /// (`trace`, `trace_pipe`).
    LatencyFormat,
    /// The latency format's long form: the task's whole name, the raw
    /// flags (in decimal), preempt count and index (in hex), times in
    /// milliseconds; and no column header over the trace.
    Verbose,
    /// Task names are saved for traces to show (`saved_cmdlines`): a
    /// task's when it starts, and again at a switch once newer names
    /// pushed it out (on by default). As in Linux, where the option turns
    /// the kernel's one name cache on or off, names are saved while any
    /// trace array has it on; with it off everywhere, a task that started
    /// meanwhile prints as `<...>-PID` (until it switches in with the
    /// option on again).
    RecordCmd,
    /// Each task's thread-group id is recorded (`saved_tgids`): every
    /// task's when the option goes on, then each task's that switches in;
    /// and printed in a TGID column.
    RecordTgid,
    /// A write to `free_buffer` also stops recording (`tracing_on` 0), as
    /// Linux's close of that file does with the option on.
    DisableOnFree,
    /// In a `trace` whose buffer overwrote events, each CPU's first event
    /// comes after `##### CPU N buffer started ####` (on by default).
    Annotate,
    /// `trace` prints numbers: `PID CPU TIMESTAMP` and each event's raw
    /// form (see `print_modes`).
    Raw,
    /// `trace` prints hex words (before `raw`; see `print_modes`).
    Hex,
    /// `trace` prints each event field by field, `name=value`, as its
    /// `format` describes it (see `print_modes`).
    Fields,
    /// `trace_printk!` writes into the buffer (on by default; the top
    /// level's, which is where it writes).
    TracePrintk,
    /// With `trace_printk` on, a print event's line (`trace_printk!`,
    /// `trace_marker`) is its text alone: no task, CPU, time nor writer.
    PrintkMsgOnly,
}

impl TraceOption {
    /// Every option, in `trace_options` order: Linux's generic ones in its
    /// order, then the function tracer's, then function_graph's.
    pub const ALL: [TraceOption; 36] = [
        TraceOption::PrintParent,
        TraceOption::SymOffset,
        TraceOption::SymAddr,
        TraceOption::Verbose,
        TraceOption::Raw,
        TraceOption::Hex,
        TraceOption::Fields,
        TraceOption::TracePrintk,
        TraceOption::Annotate,
        TraceOption::PrintkMsgOnly,
        TraceOption::ContextInfo,
        TraceOption::LatencyFormat,
        TraceOption::RecordCmd,
        TraceOption::RecordTgid,
        TraceOption::Overwrite,
        TraceOption::DisableOnFree,
        TraceOption::IrqInfo,
        TraceOption::Markers,
        TraceOption::EventFork,
        TraceOption::FunctionFork,
        TraceOption::StackTrace,
        TraceOption::FuncStackTrace,
        TraceOption::FuncNoRepeats,
        TraceOption::FuncgraphOverrun,
        TraceOption::FuncgraphCpu,
        TraceOption::FuncgraphOverhead,
        TraceOption::FuncgraphProc,
        TraceOption::FuncgraphDuration,
        TraceOption::FuncgraphAbstime,
        TraceOption::FuncgraphIrqs,
        TraceOption::FuncgraphTail,
        TraceOption::FuncgraphRetval,
        TraceOption::FuncgraphRetvalHex,
        TraceOption::FuncgraphRetaddr,
        TraceOption::SleepTime,
        TraceOption::GraphTime,
    ];
    /// The options a new trace array starts with.
    const DEFAULTS: u64 = TraceOption::PrintParent.bit()
        | TraceOption::TracePrintk.bit()
        | TraceOption::Annotate.bit()
        | TraceOption::ContextInfo.bit()
        | TraceOption::RecordCmd.bit()
        | TraceOption::IrqInfo.bit()
        | TraceOption::Markers.bit()
        | TraceOption::Overwrite.bit()
        | TraceOption::FuncgraphDuration.bit()
        | TraceOption::FuncgraphCpu.bit()
        | TraceOption::FuncgraphIrqs.bit()
        | TraceOption::FuncgraphOverhead.bit()
        | TraceOption::SleepTime.bit()
        | TraceOption::GraphTime.bit();

    /// Its file name under `options/`.
    pub fn name(self) -> &'static str {
        match self {
            TraceOption::SymOffset => "sym-offset",
            TraceOption::SymAddr => "sym-addr",
            TraceOption::ContextInfo => "context-info",
            TraceOption::LatencyFormat => "latency-format",
            TraceOption::Verbose => "verbose",
            TraceOption::Raw => "raw",
            TraceOption::Hex => "hex",
            TraceOption::Fields => "fields",
            TraceOption::RecordCmd => "record-cmd",
            TraceOption::RecordTgid => "record-tgid",
            TraceOption::DisableOnFree => "disable_on_free",
            TraceOption::Annotate => "annotate",
            TraceOption::TracePrintk => "trace_printk",
            TraceOption::PrintkMsgOnly => "printk-msg-only",
            TraceOption::IrqInfo => "irq-info",
            TraceOption::Markers => "markers",
            TraceOption::Overwrite => "overwrite",
            TraceOption::FuncgraphTail => "funcgraph-tail",
            TraceOption::PrintParent => "print-parent",
            TraceOption::FuncgraphRetval => "funcgraph-retval",
            TraceOption::FuncgraphProc => "funcgraph-proc",
            TraceOption::FuncgraphAbstime => "funcgraph-abstime",
            TraceOption::FuncgraphDuration => "funcgraph-duration",
            TraceOption::FunctionFork => "function-fork",
            TraceOption::EventFork => "event-fork",
            TraceOption::FuncStackTrace => "func_stack_trace",
            TraceOption::FuncNoRepeats => "func-no-repeats",
            TraceOption::StackTrace => "stacktrace",
            TraceOption::FuncgraphCpu => "funcgraph-cpu",
            TraceOption::FuncgraphRetvalHex => "funcgraph-retval-hex",
            TraceOption::FuncgraphRetaddr => "funcgraph-retaddr",
            TraceOption::FuncgraphIrqs => "funcgraph-irqs",
            TraceOption::FuncgraphOverhead => "funcgraph-overhead",
            TraceOption::FuncgraphOverrun => "funcgraph-overrun",
            TraceOption::SleepTime => "sleep-time",
            TraceOption::GraphTime => "graph-time",
        }
    }

    /// The tracer whose option it is (Linux's tracer flags: `trace_options`
    /// lists them, and takes them, only while that tracer is current), or
    /// `None` for a generic one.
    pub fn tracer(self) -> Option<Tracer> {
        match self {
            TraceOption::FuncStackTrace | TraceOption::FuncNoRepeats => Some(Tracer::Function),
            TraceOption::FuncgraphTail
            | TraceOption::FuncgraphRetval
            | TraceOption::FuncgraphProc
            | TraceOption::FuncgraphAbstime
            | TraceOption::FuncgraphDuration
            | TraceOption::FuncgraphCpu
            | TraceOption::FuncgraphRetvalHex
            | TraceOption::FuncgraphRetaddr
            | TraceOption::FuncgraphIrqs
            | TraceOption::FuncgraphOverhead
            | TraceOption::FuncgraphOverrun
            | TraceOption::SleepTime
            | TraceOption::GraphTime => Some(Tracer::FunctionGraph),
            _ => None,
        }
    }

    /// Whether only the top level has the option's file (Linux's
    /// `TOP_LEVEL_TRACE_FLAGS`): `trace_printk!` writes there alone. An
    /// instance's `trace_options` still lists it, and takes it.
    pub fn top_level_only(self) -> bool {
        matches!(self, TraceOption::TracePrintk | TraceOption::PrintkMsgOnly)
    }

    /// The option called `name`.
    pub fn from_name(name: &str) -> Option<TraceOption> {
        TraceOption::ALL.into_iter().find(|option| option.name() == name)
    }

    const fn bit(self) -> u64 {
        1 << self as u64
    }
}

/// The top level.
#[inline]
pub fn top() -> &'static TraceArray {
    &TOP
}

/// Makes the top level's buffer. Called once at boot.
pub(crate) fn init() {
    TOP.buffer.call_once(|| TraceBuffer::try_new(PAGES_PER_CPU).expect("the top-level trace buffer"));
}

/// A held instance: `rmdir` is refused while it is held.
pub struct InstanceRef(&'static TraceArray);

impl core::ops::Deref for InstanceRef {
    type Target = TraceArray;

    fn deref(&self) -> &TraceArray {
        self.0
    }
}

impl InstanceRef {
    /// The array, for the length of the hold.
    pub fn array(&self) -> &'static TraceArray {
        self.0
    }
}

impl Drop for InstanceRef {
    fn drop(&mut self) {
        self.0.users.fetch_sub(1, Ordering::Release);
    }
}

/// Empties the buffers, live and snapshot, of the arrays in `slots` (a
/// bit per slot; the top level's is bit 0): the arrays an event that went
/// may have recorded into.
pub fn reset_buffers_of_slots(slots: u32) {
    let reset = |array: &TraceArray| {
        array.buffer().reset();
        array.buffer().reset_snapshot();
    };
    if slots & 1 != 0 {
        reset(top());
    }
    INSTANCES.lock().iter().filter(|array| slots & (1 << array.slot) != 0).for_each(|array| reset(array));
}

/// Holds instance `name`, if there is one.
pub fn find(name: &str) -> Option<InstanceRef> {
    let list = INSTANCES.lock();
    let array = *list.iter().find(|array| array.name == name)?;
    array.users.fetch_add(1, Ordering::Acquire);
    Some(InstanceRef(array))
}

/// The instances' names, in creation order.
pub fn names() -> Vec<String> {
    INSTANCES.lock().iter().map(|array| array.name.clone()).collect()
}

/// Why `mkdir` or `rmdir` failed. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceError {
    /// `mkdir` of a name that exists.
    Exists(String),
    /// `rmdir` of a name that does not.
    NoSuchInstance(String),
    /// A name that is empty, too long, or has a `/` or a space.
    BadName(String),
    /// Every slot is taken.
    TooMany,
    /// The heap cannot hold another buffer.
    NoMemory,
    /// `rmdir` while something holds the instance.
    Busy(String),
    /// Stopping its tracer failed.
    Tracing(FtraceError),
    /// `rmdir`: a function command of the instance could not be detached
    /// (the instance stays, with the commands not detached yet).
    Commands(String),
}

impl fmt::Display for InstanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceError::Exists(name) => write!(f, "instance '{name}' exists"),
            InstanceError::NoSuchInstance(name) => write!(f, "no instance '{name}'"),
            InstanceError::BadName(name) => write!(f, "bad instance name '{name}'"),
            InstanceError::TooMany => write!(f, "too many instances (at most {MAX_INSTANCES})"),
            InstanceError::NoMemory => write!(f, "not enough memory for another trace buffer"),
            InstanceError::Busy(name) => write!(f, "instance '{name}' is busy"),
            InstanceError::Tracing(error) => write!(f, "{error}"),
            InstanceError::Commands(error) => write!(f, "its function commands could not all be detached: {error}"),
        }
    }
}

/// The longest instance name.
pub const MAX_NAME: usize = 64;

/// `mkdir instances/NAME`: a new instance, with the `nop` tracer, empty
/// filters and a buffer of its own.
pub fn create(name: &str) -> Result<(), InstanceError> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains(['/', ' ', '\t']) || name == "." || name == ".." {
        return Err(InstanceError::BadName(name.into()));
    }
    let mut list = INSTANCES.lock();
    if list.iter().any(|array| array.name == name) {
        return Err(InstanceError::Exists(name.into()));
    }
    let slot = take_slot().ok_or(InstanceError::TooMany)?;
    let Some(buffer) = TraceBuffer::try_new(INSTANCE_PAGES_PER_CPU) else {
        release_slot(slot);
        return Err(InstanceError::NoMemory);
    };
    let array = Box::leak(Box::new(TraceArray::new(name.into(), slot)));
    array.buffer.call_once(|| buffer);
    // A global setting may already make it check (`tracing_thresh`).
    array.refresh_graph_plain();
    crate::events::sched::set_record_cmd(slot, array.option(TraceOption::RecordCmd));
    IN_SLOT[slot].store(array as *const TraceArray as *mut TraceArray, Ordering::Release);
    list.push(array);
    Ok(())
}

/// `rmdir instances/NAME`: stops its tracer and removes it; refused while
/// it is held. Once the removal is sure, `forget` runs with the array, so
/// what names it by its slot lets go first (the events it enabled:
/// `crate::events::arrays`).
pub fn remove(name: &str, forget: impl FnOnce(&'static TraceArray)) -> Result<(), InstanceError> {
    let mut list = INSTANCES.lock();
    let index = list.iter().position(|array| array.name == name).ok_or_else(|| InstanceError::NoSuchInstance(name.into()))?;
    let array = list[index];
    if array.users.load(Ordering::Acquire) != 0 {
        return Err(InstanceError::Busy(name.into()));
    }
    array.set_current_tracer(Tracer::Nop).map_err(InstanceError::Tracing)?;
    crate::tracers::function_commands::remove_all(array).map_err(|error| InstanceError::Commands(alloc::format!("{error}")))?;
    forget(array);
    crate::events::sched::set_record_tgid(array.slot, false);
    crate::events::sched::set_record_cmd(array.slot, false);
    IN_SLOT[array.slot].store(core::ptr::null_mut(), Ordering::Release);
    list.remove(index);
    // SAFETY: the array was leaked from a box by `create` and is unlisted:
    // nothing new can reach it; `free_instance` waits for what still can.
    unsafe { deferred::defer(&array.node, free_instance) };
    Ok(())
}

/// Frees a removed instance once no hooked call can return into it.
///
/// # Safety
/// `node` is the node of a `TraceArray` leaked from a box by `create` and
/// unlisted by `remove`, which queued it; run after a grace period.
unsafe fn free_instance(node: *const Deferred) {
    let array = ftrace::container_of!(node, TraceArray, node);
    // SAFETY: queued by `remove` with the node of a leaked, unlisted array.
    let in_flight = unsafe { (*array).graph_ops.in_flight() };
    if in_flight {
        // A task still sleeps inside a call the graph tracer hooked: look
        // again after the next grace period.
        // SAFETY: the same node, still valid.
        unsafe { deferred::defer(node, free_instance) };
        return;
    }
    // SAFETY: as above; the grace period is over and no call is in flight.
    let slot = unsafe { (*array).slot };
    task::for_each(|state| {
        state.reset_graph_slot(slot);
        state.set_ignored(slot, false);
        state.set_event_ignored(slot, false);
    });
    release_slot(slot);
    // SAFETY: leaked from a box by `create`; nothing refers to it any more.
    drop(unsafe { Box::from_raw(array as *mut TraceArray) });
}

fn take_slot() -> Option<usize> {
    let mut slots = SLOTS.load(Ordering::Relaxed);
    loop {
        let slot = (!slots).trailing_zeros() as usize;
        if slot >= GRAPH_SLOTS {
            return None;
        }
        match SLOTS.compare_exchange(slots, slots | 1 << slot, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Some(slot),
            Err(now) => slots = now,
        }
    }
}

fn release_slot(slot: usize) {
    SLOTS.fetch_and(!(1 << slot), Ordering::AcqRel);
}
