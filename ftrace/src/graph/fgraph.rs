//! Function graph: entry and return callbacks for many users at once, on the
//! shared return hook ([`crate::graph::retstack`]).
//!
//! An [`FgraphOps`] is an [`FtraceOps`] (its filters choose the functions)
//! plus two callbacks. At a traced function's entry (if the shadow stack has
//! room for the call) its entry callback runs with the call's depth; it may
//! reserve up to the data words the ops declared
//! ([`with_data_words`](FgraphOps::with_data_words)) and answers whether it
//! wants the return. A user built with [`FgraphOps::of`] can also do work
//! once the return is hooked ([`GraphCallbacks::hooked`]: the graph tracer
//! records its entry event there). Only the calls its entry accepted reach
//! its return callback, with the data it reserved and the return value. Any number of
//! users can trace the same function: each hooks the call's single
//! shadow-stack frame.
//!
//! Graph entries run under the recursion guard, so a graph user only hooks
//! calls made outside callbacks, and those return outside callbacks too: the
//! return hook never has a graph user's return to skip for recursion (it
//! counts one in [`missed`](FgraphOps::missed) if it ever does). A call
//! whose task exited never returns: it is given back uncounted, as Linux's
//! fgraph counts nothing for a dead task's shadow stack.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use arch::ftrace_abi::FtraceRegs;

use crate::graph::retstack::{
    self, DataWords, Depth, FrameNeeds, HookError, ReturnFunc, ReturnInfo, ReturnPath, ReturnUser, Skipped,
};
use crate::ops::{Callback, FtraceOps, OpsFlags};
use crate::registry::{self, FtraceError};

/// What a graph user asks of the calls it hooks: the return registers, and
/// the call counts toward the depth.
const GRAPH_NEEDS: FrameNeeds = FrameNeeds::new(ReturnPath::Sparse, Depth::Counted);

/// A call at entry, as an entry callback sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FgraphEntry {
    pub func: usize,
    pub parent_ip: usize,
    /// Counted hooked calls below this one on the shadow stack (graph
    /// users' and fprobes', not kretprobes': see `retstack::Depth`).
    pub depth: usize,
}

/// A call at return, as a return callback sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FgraphReturn {
    pub func: usize,
    /// The call's depth, as its entry saw it.
    pub depth: usize,
    pub retval: u64,
    /// Calls the shadow stack had no room for so far.
    pub overrun: u64,
    /// Where the call returns to.
    pub ret_addr: usize,
}

/// Per-call data an entry callback reserves: the words the shadow stack
/// set aside for the call, written in place (as Linux's
/// `fgraph_reserve_data`), so the traced path neither clears nor copies a
/// buffer. Only reserved words are cleared.
pub struct EntryData<'a> {
    words: &'a mut [u64],
    len: usize,
}

impl<'a> EntryData<'a> {
    fn new(words: &'a mut [u64]) -> Self {
        Self { words, len: 0 }
    }

    /// Reserves `N` more words, set to `values`, or `None` past what the
    /// ops declared: [`reserve`](Self::reserve) for a callback that fills
    /// them at once.
    #[inline(always)]
    pub fn reserve_with<const N: usize>(&mut self, values: [u64; N]) -> Option<&mut [u64; N]> {
        let start = self.len;
        let reserved = self.words.get_mut(start..)?.first_chunk_mut::<N>()?;
        *reserved = values;
        self.len = start + N;
        Some(reserved)
    }

    /// Reserves `words` more words (zeroed), or `None` past what the ops
    /// declared.
    pub fn reserve(&mut self, words: usize) -> Option<&mut [u64]> {
        let start = self.len;
        let end = start.checked_add(words).filter(|&end| end <= self.words.len())?;
        self.len = end;
        let reserved = &mut self.words[start..end];
        reserved.fill(0);
        Some(reserved)
    }
}

/// An entry callback: returns whether it wants this call's return.
pub type FgraphEntryFunc = fn(gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, fregs: &mut FtraceRegs) -> bool;
/// Runs once an entry callback's call is hooked, with the data words it
/// reserved (see [`GraphCallbacks::hooked`]).
pub type FgraphHookedFunc = fn(gops: &FgraphOps, call: &FgraphEntry, data: &mut [u64]);
/// A return callback, with the data the entry reserved.
pub type FgraphReturnFunc = fn(gops: &FgraphOps, call: &FgraphReturn, data: &[u64], fregs: &mut FtraceRegs);

/// Graph callbacks known when the graph ops is built
/// ([`FgraphOps::of`]): the site's entry runs the entry callback inline,
/// and the return hook the return callback, with no call through a
/// function pointer and its stack frame on either side (the graph tracer's
/// traced path).
pub trait GraphCallbacks {
    /// What an [`FgraphEntryFunc`] would do.
    fn entry(gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, fregs: &mut FtraceRegs) -> bool;
    /// What an [`FgraphReturnFunc`] would do.
    fn ret(gops: &FgraphOps, call: &FgraphReturn, data: &[u64], fregs: &mut FtraceRegs);
    /// Runs after `entry` said yes and the return is hooked, with the data
    /// words `entry` reserved: for the entry's work that decides nothing
    /// (the graph tracer records its entry event here). Done after the
    /// commit, it keeps less alive around it than inside `entry`, where
    /// the pending hook is. Nothing by default.
    #[inline(always)]
    fn hooked(_gops: &FgraphOps, _call: &FgraphEntry, _data: &mut [u64]) {}
}

/// A function-graph user. Create it as a `static`.
#[repr(C)]
pub struct FgraphOps {
    /// The ops whose filters choose the functions; its callback reaches the
    /// graph ops through [`FtraceOps::container`].
    ops: FtraceOps,
    user: ReturnUser,
    entry: FgraphEntryFunc,
    /// [`GraphCallbacks::hooked`], for ops made with [`FgraphOps::of`].
    hooked: Option<FgraphHookedFunc>,
    ret: FgraphReturnFunc,
    data_words: DataWords,
    private: AtomicUsize,
    overruns: AtomicU64,
    missed_returns: AtomicU64,
    /// Hooked calls whose return callback (or `on_skipped`) has not run
    /// yet: counted at the commit, and given back as the last thing the
    /// return does with the ops. What frees an ops' owner (a removed
    /// instance) waits for zero. (A scan of every task's shadow stack
    /// cannot tell: the running ones change under it.)
    hooked_calls: AtomicUsize,
    /// Counts registrations and unregistrations (odd while registered): a
    /// return callback can tell a call hooked in an earlier registration,
    /// whose state may be gone (Linux gives such returns a stub, and a
    /// re-registered user a fresh slot).
    generation: AtomicU32,
}

impl FgraphOps {
    /// A graph user with the two callbacks and no per-call data; it traces
    /// every function until a filter is set on [`ops`](Self::ops).
    pub const fn new(entry: FgraphEntryFunc, ret: FgraphReturnFunc) -> Self {
        Self::build(FtraceOps::new(graph_entry, OpsFlags::RECURSION), graph_return, entry, None, ret)
    }

    /// A graph user running `G`'s callbacks inline: the same as
    /// [`new`](Self::new) with `G::entry` and `G::ret`, one call fewer on
    /// each side of a traced call.
    pub const fn of<G: GraphCallbacks>() -> Self {
        Self::build(
            FtraceOps::of::<GraphEntryOf<G>>(OpsFlags::RECURSION),
            graph_return_of::<G>,
            G::entry,
            Some(G::hooked),
            G::ret,
        )
    }

    const fn build(
        ops: FtraceOps,
        on_return: ReturnFunc,
        entry: FgraphEntryFunc,
        hooked: Option<FgraphHookedFunc>,
        ret: FgraphReturnFunc,
    ) -> Self {
        FgraphOps {
            ops,
            user: ReturnUser { on_return, on_skipped: graph_skipped, needs: GRAPH_NEEDS },
            entry,
            hooked,
            ret,
            data_words: DataWords::NONE,
            private: AtomicUsize::new(0),
            overruns: AtomicU64::new(0),
            missed_returns: AtomicU64::new(0),
            hooked_calls: AtomicUsize::new(0),
            generation: AtomicU32::new(0),
        }
    }

    /// The same, with room for `words` data words per call (at most
    /// [`MAX_DATA_WORDS`](retstack::MAX_DATA_WORDS)): what the shadow stack
    /// reserves for each call.
    pub const fn with_data_words(mut self, words: usize) -> Self {
        self.data_words = match DataWords::new(words) {
            Some(words) => words,
            None => panic!("more data words than MAX_DATA_WORDS"),
        };
        self
    }

    /// The underlying ops, for filters.
    pub fn ops(&self) -> &FtraceOps {
        &self.ops
    }

    /// Starts tracing.
    pub fn register(&'static self) -> Result<(), FtraceError> {
        if self.generation() % 2 == 1 {
            return Err(FtraceError::AlreadyRegistered);
        }
        self.ops.set_container(self);
        // First, so that the first calls hooked already carry it.
        self.generation.fetch_add(1, Ordering::Relaxed);
        registry::register(&self.ops).inspect_err(|_| {
            self.generation.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// Stops tracing. Calls already hooked still get their return callback
    /// (their state to undo); [`generation`](Self::generation) tells them
    /// they come late.
    pub fn unregister(&'static self) -> Result<(), FtraceError> {
        // After: a call hooked meanwhile keeps the old generation, and its
        // return finds the new one; one that returns meanwhile records into
        // the buffer a tracer switch empties next. A refusal changes nothing.
        registry::unregister(&self.ops)?;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Which registration this is (odd while registered, even after): an
    /// entry callback can keep it in its data, and the return compare.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The private data word.
    pub fn private(&self) -> usize {
        self.private.load(Ordering::Relaxed)
    }

    /// Sets the private data word.
    pub fn set_private(&self, value: usize) {
        self.private.store(value, Ordering::Relaxed);
    }

    /// Whether a call this user hooked has not returned yet (on any task).
    pub fn in_flight(&self) -> bool {
        self.hooked_calls.load(Ordering::Acquire) != 0
    }

    /// Calls this user could not trace: the shadow stack had no room.
    pub fn overruns(&self) -> u64 {
        self.overruns.load(Ordering::Relaxed)
    }

    /// Calls missed: entries skipped because they ran inside another
    /// callback, and returns whose callback could not run.
    pub fn missed(&self) -> u64 {
        self.ops.missed() + self.missed_returns.load(Ordering::Relaxed)
    }
}

extern "C" fn graph_entry(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    graph_entry_with::<ThroughPointers>(ip, parent_ip, ops, fregs);
}

/// [`FgraphOps::new`]'s callbacks: the function pointers it was given.
struct ThroughPointers;

impl GraphCallbacks for ThroughPointers {
    #[inline(always)]
    fn entry(gops: &FgraphOps, call: &FgraphEntry, data: &mut EntryData, fregs: &mut FtraceRegs) -> bool {
        (gops.entry)(gops, call, data, fregs)
    }

    #[inline(always)]
    fn ret(gops: &FgraphOps, call: &FgraphReturn, data: &[u64], fregs: &mut FtraceRegs) {
        (gops.ret)(gops, call, data, fregs)
    }

    #[inline(always)]
    fn hooked(gops: &FgraphOps, call: &FgraphEntry, data: &mut [u64]) {
        if let Some(hooked) = gops.hooked {
            hooked(gops, call, data);
        }
    }
}

/// [`FgraphOps::of`]'s entry: [`graph_entry`] with `G::entry` inline.
struct GraphEntryOf<G>(PhantomData<G>);

impl<G: GraphCallbacks> Callback for GraphEntryOf<G> {
    #[inline(always)]
    fn call(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
        graph_entry_with::<G>(ip, parent_ip, ops, fregs);
    }
}

/// Hooks the call's return, then runs `G`'s entry callback; commits the
/// hook if it wants the return.
#[inline(always)]
fn graph_entry_with<G: GraphCallbacks>(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: this callback is only installed in `FgraphOps::ops`, and
    // `register` recorded the (static) graph ops that holds it.
    let gops = unsafe { &*ops.container::<FgraphOps>() };
    // The frame comes first (as in Linux): an entry callback may set state
    // that only the return clears, so it runs only when the return will come.
    // SAFETY: in the entry callback of the call `fregs` saved; the pending
    // hook is committed or dropped below, before it returns.
    let mut pending = match unsafe { retstack::begin_hook(fregs, ip, gops.data_words, GRAPH_NEEDS) } {
        Ok(pending) => pending,
        Err(HookError::Overrun) => {
            gops.overruns.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(_) => return,
    };
    let call = FgraphEntry { func: ip, parent_ip, depth: pending.depth() };
    let mut data = EntryData::new(pending.data_mut());
    if !G::entry(gops, &call, &mut data, fregs) {
        return;
    }
    let len = data.len;
    let words = data.words.as_mut_ptr();
    // The user pointer is made from a pointer to the whole graph ops, so
    // the return callback (`graph_return`, `graph_return_of`) can step back
    // from it to the ops.
    let user: *const ReturnUser = crate::field_of!(gops, FgraphOps, user);
    gops.hooked_calls.fetch_add(1, Ordering::Relaxed);
    // SAFETY: graph ops are statics (`register` takes `&'static self`): the
    // user outlives every call; `user` was made as `commit` asks. The data
    // fits: the pending hook has room for `data_words`, `EntryData`'s limit.
    let committed = unsafe { pending.commit_in_place(fregs, user, len) };
    debug_assert!(committed.is_ok());
    // SAFETY: the first `len` of the words the pending hook reserved, now
    // the committed entry's data: this user's alone until the call returns
    // (after this callback), where interrupts nesting here do not reach.
    let data = unsafe { core::slice::from_raw_parts_mut(words, len) };
    G::hooked(gops, &call, data);
}

/// The graph ops a return user belongs to.
fn gops_of(user: *const ReturnUser) -> &'static FgraphOps {
    // SAFETY: only `graph_entry_with` (behind `graph_entry` and
    // `GraphEntryOf`) hooks with these callbacks, with a pointer
    // to the `user` field made from a pointer to the whole (static)
    // `FgraphOps`; stepping back by the field's offset gives that ops.
    unsafe { &*crate::container_of!(user, FgraphOps, user) }
}

fn graph_return(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs) {
    graph_return_with::<ThroughPointers>(user, call, data, fregs);
}

/// [`FgraphOps::of`]'s return: [`graph_return`] with `G::ret` inline.
fn graph_return_of<G: GraphCallbacks>(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs) {
    graph_return_with::<G>(user, call, data, fregs);
}

#[inline(always)]
fn graph_return_with<G: GraphCallbacks>(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs) {
    let gops = gops_of(user);
    let info = FgraphReturn {
        func: call.func(),
        depth: call.depth(),
        retval: fregs.return_value(),
        // SAFETY: a return callback runs on the task that hooked the call.
        overrun: unsafe { crate::task::current_unchecked() }.stack.overruns(),
        ret_addr: call.ret_addr(),
    };
    G::ret(gops, &info, data, fregs);
    gops.hooked_calls.fetch_sub(1, Ordering::Release);
}

fn graph_skipped(user: *const ReturnUser, _call: &ReturnInfo, _data: &mut [u64], why: Skipped) {
    let gops = gops_of(user);
    if why == Skipped::Recursion {
        gops.missed_returns.fetch_add(1, Ordering::Relaxed);
    }
    gops.hooked_calls.fetch_sub(1, Ordering::Release);
}
