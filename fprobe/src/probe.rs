//! The fprobe API: entry and exit handlers on any number of functions.
//!
//! An [`Fprobe`] owns an `FtraceOps` whose filter is the probed functions, so
//! a traced call reaches it through the site's literal (one ops) or the
//! site's list (several): the cost of finding the probes of an address does
//! not depend on how many functions are probed. It never asks for
//! `SAVE_REGS`: its sites stay on the sparse ARGS trampoline. A handler that
//! needs a `PtRegs` builds one with `FtraceRegs::partial_regs`.
//!
//! Exit handlers ride on the shared return hook (`ftrace::graph::retstack`): the
//! per-call data of a hooked call holds the probe's `entry_data` words and,
//! when the probe asks, the entry arguments, so an exit handler sees the
//! arguments the function was called with as well as its return value (on
//! aarch64 x0 is both argument 0 and the return value).
//!
//! Recursion and a full return stack are counted in [`RegisteredFprobe::nmissed`].
//!
//! Lifetime: a registered probe lives on the heap and counts references
//! (`ftrace::deferred::Refs`): one for the registration, one per hooked call
//! in flight. Unregistering stops new calls at once and lets go of the
//! registration's reference after a grace period. If that is the last
//! reference, the probe is freed right there (normal context, the grace
//! period over); otherwise the last hooked call's return queues the free,
//! which runs in normal context after another grace period. The free also
//! frees the private data if the probe owns it
//! ([`FprobeConfig::free_private`]). The traced path never frees.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arch::ftrace_abi::FtraceRegs;
use ftrace::deferred::{Deferred, Refs};
use ftrace::graph::retstack::{self, DataWords, Depth, FrameNeeds, ReturnInfo, ReturnPath, ReturnUser, Skipped, MAX_DATA_WORDS};
use ftrace::{Callback, FilterKind, FilterMode, FtraceError, FtraceOps, OpsFlags};

/// The most `entry_data` words a probe may ask for.
pub const MAX_ENTRY_DATA_WORDS: usize = 15;

/// How many entry arguments a probe that saves them keeps (what `$arg1` to
/// `$arg8` in an exit event can fetch): the argument registers, and on
/// architectures with fewer, the first stack arguments too.
pub const SAVED_ARGS: usize = 8;

const _: () = assert!(MAX_ENTRY_DATA_WORDS + SAVED_ARGS <= MAX_DATA_WORDS);

/// What a probe's exit asks of the calls it hooks: the return registers, and
/// the call counts toward the function-graph depth, as in Linux 6.14 and
/// later, where fprobes run on the function-graph return stack.
const FPROBE_NEEDS: FrameNeeds = FrameNeeds::new(ReturnPath::Sparse, Depth::Counted);

/// A call's per-call data, as handlers see it: the probe's own words, and the
/// entry arguments if the probe saves them.
pub struct EntryData<'a> {
    words: &'a mut [u64],
    args: Option<&'a [u64]>,
}

impl<'a> EntryData<'a> {
    /// Per-call data that is only saved arguments (no words of its own).
    pub fn of_arguments(args: &'a [u64]) -> EntryData<'a> {
        EntryData { words: &mut [], args: Some(args) }
    }

    /// No per-call data: what a probe that keeps none hands its handlers.
    fn empty() -> EntryData<'a> {
        EntryData { words: &mut [], args: None }
    }

    /// A call's `words`, as `probe` lays them out: its own, then the saved
    /// arguments if it saves them.
    fn of_words(probe: &Fprobe, words: &'a mut [u64]) -> EntryData<'a> {
        let (own, rest) = words.split_at_mut(probe.config.entry_data_words.min(words.len()));
        EntryData { words: own, args: probe.config.save_args.then_some(&*rest) }
    }

    /// The probe's `entry_data` words (written at entry, read at exit);
    /// empty for a probe without an exit handler.
    pub fn words(&mut self) -> &mut [u64] {
        self.words
    }

    /// Argument `n` (0-based) as the function received it at entry, if the
    /// probe saves arguments (`save_args`) for its exit handler. (An entry
    /// handler has the registers themselves.)
    pub fn argument(&self, n: usize) -> Option<u64> {
        self.args?.get(n).copied()
    }
}

/// An entry handler: the probe, the function, its caller's return address,
/// the entry registers and the per-call data. Returns `true` to skip this
/// call's exit handler.
pub type EntryHandler = fn(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool;

/// An exit handler: the probe, the function, the address it returns to, the
/// return registers and the per-call data.
pub type ExitHandler = fn(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData);

/// How a probe's handlers are called: through [`FprobeConfig`]'s function
/// pointers ([`Pointers`], what [`register`] uses), or inline, by a type
/// known when the probe is built ([`register_of`]): the probe's entry and
/// its return then run the handler in their own stack frame, one call and
/// one frame fewer (the traced path of fprobe events).
pub trait Handlers: 'static {
    /// What `config.entry` does; called only when it is `Some`.
    fn entry(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool;
    /// What `config.exit` does; called only when it is `Some`.
    fn exit(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData);
}

/// The handlers in the probe's [`FprobeConfig`], called through their
/// pointers.
pub struct Pointers;

impl Handlers for Pointers {
    #[inline(always)]
    fn entry(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool {
        fp.config.entry.is_some_and(|entry| entry(fp, entry_ip, ret_ip, fregs, data))
    }

    #[inline(always)]
    fn exit(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
        if let Some(exit) = fp.config.exit {
            exit(fp, entry_ip, ret_ip, fregs, data);
        }
    }
}

/// What a probe does, before it is registered.
#[derive(Clone, Copy)]
pub struct FprobeConfig {
    pub entry: Option<EntryHandler>,
    pub exit: Option<ExitHandler>,
    /// Per-call words the entry handler hands to the exit handler of the
    /// same call (at most [`MAX_ENTRY_DATA_WORDS`]). A probe without an exit
    /// handler gets none, as in Linux (where its entry data is `NULL`).
    pub entry_data_words: usize,
    /// Keep the first [`SAVED_ARGS`] entry arguments for the exit handler
    /// (nothing to keep without one).
    pub save_args: bool,
    /// Private data for the handlers.
    pub private: usize,
    /// Frees `private` when the probe itself is freed (the probe owns it);
    /// `None` if the caller keeps it alive itself.
    pub free_private: Option<fn(usize)>,
}

/// Why a probe could not be registered. Nothing was registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FprobeError {
    /// More than [`MAX_ENTRY_DATA_WORDS`] of entry data.
    EntryDataTooLarge(usize),
    /// Neither an entry nor an exit handler.
    NoHandler,
    /// No function to probe.
    NothingToProbe,
    /// A name that is no one function (unknown, or a bare name of several).
    Name(ftrace::symbols::table::NameError),
    /// Tracing refused the filter or the registration.
    Ftrace(FtraceError),
}

impl fmt::Display for FprobeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FprobeError::EntryDataTooLarge(words) => {
                write!(f, "entry data of {words} words is more than {MAX_ENTRY_DATA_WORDS}")
            }
            FprobeError::NoHandler => write!(f, "an fprobe needs an entry or an exit handler"),
            FprobeError::NothingToProbe => write!(f, "no function to probe"),
            FprobeError::Name(error) => write!(f, "{error}"),
            FprobeError::Ftrace(error) => write!(f, "{error}"),
        }
    }
}

impl From<FtraceError> for FprobeError {
    fn from(error: FtraceError) -> Self {
        FprobeError::Ftrace(error)
    }
}

/// A probe. Handlers get `&Fprobe` for its private data.
#[repr(C)]
pub struct Fprobe {
    /// The ops whose filters choose the functions; its callback reaches the
    /// probe through [`FtraceOps::container`].
    ops: FtraceOps,
    user: ReturnUser,
    config: FprobeConfig,
    /// The words a call keeps: the probe's own and the saved arguments
    /// (worked out once, at registration; none without an exit handler).
    data_words: DataWords,
    disabled: AtomicBool,
    /// Calls whose exit could not be hooked or handled (see `nmissed`).
    missed: AtomicU64,
    /// One reference for the registration, one per hooked call in flight.
    refs: Refs,
}

impl Fprobe {
    /// The private data given at creation.
    pub fn private(&self) -> usize {
        self.config.private
    }

    /// The return-hook user, made from a pointer to the whole probe so that
    /// `fprobe_exit` can step back from it to the probe.
    fn return_user(&self) -> *const ReturnUser {
        ftrace::field_of!(self, Fprobe, user)
    }
}

/// The deferred free, once no reference is left.
///
/// # Safety
/// `node` is the `Deferred` of a `Fprobe`'s `Refs`, queued by its last
/// reference.
unsafe fn free_probe(node: *const Deferred) {
    let probe = ftrace::container_of!(Refs::of_node(node), Fprobe, refs) as *mut Fprobe;
    // SAFETY: `Refs::new(free_probe)` is only used inside a `Fprobe` leaked
    // from a box; no reference is left and a grace period has passed.
    let probe = unsafe { Box::from_raw(probe) };
    if let Some(free) = probe.config.free_private {
        free(probe.config.private);
    }
}

/// A registered probe. Dropping it unregisters it (an error there, from a
/// context that may not change tracing, leaves it registered for good: use
/// [`unregister`](Self::unregister) to get the handle back instead).
#[derive(Debug)]
pub struct RegisteredFprobe {
    probe: NonNull<Fprobe>,
}

// SAFETY: the handle reaches the probe only through atomics and the ftrace
// registry, which serialises itself.
unsafe impl Send for RegisteredFprobe {}
// SAFETY: as above.
unsafe impl Sync for RegisteredFprobe {}

/// Which functions a registration probes.
pub enum Target<'a> {
    /// Globs (see `set_ftrace_filter`), minus an optional exclusion glob.
    Glob { filter: &'a str, exclude: Option<&'a str> },
    /// Function addresses.
    Addresses(&'a [usize]),
    /// Exact symbol names.
    Symbols(&'a [&'a str]),
}

/// Registers a probe on `target`. Either everything is registered or nothing.
pub fn register(config: FprobeConfig, target: Target) -> Result<RegisteredFprobe, FprobeError> {
    register_of::<Pointers>(config, target)
}

/// [`register`], with `H` calling the handlers: `H` must do what
/// `config.entry` and `config.exit` do (which of them exist is still
/// `config`'s to say).
pub fn register_of<H: Handlers>(config: FprobeConfig, target: Target) -> Result<RegisteredFprobe, FprobeError> {
    if config.entry.is_none() && config.exit.is_none() {
        return Err(FprobeError::NoHandler);
    }
    if config.entry_data_words > MAX_ENTRY_DATA_WORDS {
        return Err(FprobeError::EntryDataTooLarge(config.entry_data_words));
    }
    // Only a call whose exit is hooked keeps words. At most
    // MAX_ENTRY_DATA_WORDS + SAVED_ARGS: always room.
    let kept = match config.exit {
        Some(_) => config.entry_data_words + if config.save_args { SAVED_ARGS } else { 0 },
        None => 0,
    };
    let data_words = DataWords::new(kept).ok_or(FprobeError::EntryDataTooLarge(config.entry_data_words))?;
    // The traced path is chosen here, once: a probe without an exit handler
    // gets the one that never hooks returns, and one that keeps no words
    // per call the one that never looks at them.
    let (ops, on_return) = match (config.exit.is_some(), kept > 0) {
        (false, _) => {
            (FtraceOps::of::<FprobeEntry<H, false, false>>(OpsFlags::RECURSION), fprobe_exit::<H, false> as retstack::ReturnFunc)
        }
        (true, false) => {
            (FtraceOps::of::<FprobeEntry<H, true, false>>(OpsFlags::RECURSION), fprobe_exit::<H, false> as retstack::ReturnFunc)
        }
        (true, true) => {
            (FtraceOps::of::<FprobeEntry<H, true, true>>(OpsFlags::RECURSION), fprobe_exit::<H, true> as retstack::ReturnFunc)
        }
    };
    let probe = Box::new(Fprobe {
        ops,
        user: ReturnUser { on_return, on_skipped: fprobe_skipped, needs: FPROBE_NEEDS },
        config,
        data_words,
        disabled: AtomicBool::new(false),
        missed: AtomicU64::new(0),
        refs: Refs::new(free_probe),
    });
    let probe: &'static Fprobe = Box::leak(probe);
    probe.ops.set_container(probe);
    let result = select(probe, target).and_then(|()| ftrace::register(&probe.ops).map_err(FprobeError::from));
    match result {
        Ok(()) => Ok(RegisteredFprobe { probe: NonNull::from(probe) }),
        Err(error) => {
            // SAFETY: never registered: nothing else points at it. It came
            // from `Box::leak`. Its private data stays the caller's.
            drop(unsafe { Box::from_raw(probe as *const Fprobe as *mut Fprobe) });
            Err(error)
        }
    }
}

fn select(probe: &Fprobe, target: Target) -> Result<(), FprobeError> {
    let ops = &probe.ops;
    match target {
        Target::Glob { filter, exclude } => {
            if filter.split_whitespace().next().is_none() {
                return Err(FprobeError::NothingToProbe);
            }
            ftrace::set_filter(ops, FilterKind::Filter, filter, FilterMode::Replace)?;
            // A pattern that removes all it adds ("f !f") leaves the filter
            // empty, which for ftrace means every function.
            if ftrace::filter_names(ops, FilterKind::Filter).is_empty() {
                return Err(FprobeError::NothingToProbe);
            }
            if let Some(exclude) = exclude {
                ftrace::set_filter(ops, FilterKind::Notrace, exclude, FilterMode::Replace)?;
            }
        }
        Target::Addresses(ips) => {
            if ips.is_empty() {
                return Err(FprobeError::NothingToProbe);
            }
            ftrace::set_filter_ips(ops, FilterKind::Filter, ips, FilterMode::Replace)?;
        }
        Target::Symbols(names) => {
            let table = ftrace::symbols::kernel::table().map_err(|_| FtraceError::Unavailable("no symbol table"))?;
            let ips = names
                .iter()
                .map(|name| table.resolve(name).map(|s| s.address).map_err(FprobeError::Name))
                .collect::<Result<Vec<usize>, FprobeError>>()?;
            return select(probe, Target::Addresses(&ips));
        }
    }
    Ok(())
}

impl RegisteredFprobe {
    fn probe(&self) -> &Fprobe {
        // SAFETY: the handle keeps the probe alive until it is dropped.
        unsafe { self.probe.as_ref() }
    }

    /// Stops calling the handlers without unregistering (cheap to flip).
    pub fn disable(&self) {
        self.probe().disabled.store(true, Ordering::Release);
    }

    /// Calls the handlers again.
    pub fn enable(&self) {
        self.probe().disabled.store(false, Ordering::Release);
    }

    /// Whether the probe is disabled.
    pub fn is_disabled(&self) -> bool {
        self.probe().disabled.load(Ordering::Acquire)
    }

    /// Calls the probe missed: recursion (a handler calling probed code),
    /// calls whose exit could not be hooked (return stack full, or the
    /// return hook stopped), and exits that ran inside another return
    /// callback.
    pub fn nmissed(&self) -> u64 {
        self.probe().missed.load(Ordering::Relaxed) + self.probe().ops.missed()
    }

    /// The underlying ops (to inspect its sites).
    pub fn ops(&self) -> &FtraceOps {
        &self.probe().ops
    }

    /// Whether a hooked call's exit handler has not run yet.
    pub fn in_flight(&self) -> bool {
        self.probe().refs.count() > 1
    }

    /// Unregisters. On error the probe is still registered, and its handle
    /// comes back with the error.
    pub fn unregister(self) -> Result<(), (RegisteredFprobe, FprobeError)> {
        match self.unregister_inner() {
            Ok(()) => {
                core::mem::forget(self);
                Ok(())
            }
            Err(error) => Err((self, error)),
        }
    }

    fn unregister_inner(&self) -> Result<(), FprobeError> {
        let probe = self.probe();
        // SAFETY: the probe is a leaked box: it lives until freed below.
        let ops: &'static FtraceOps = unsafe { &*(&probe.ops as *const FtraceOps) };
        ftrace::unregister(ops)?;
        // No site leads to it any more; calls hooked before may still return
        // through it, so it is freed once the last of them has returned.
        // SAFETY: unregistered: no new callback reaches it after the grace
        // period `retire` waits for; the handle is gone after this.
        unsafe { probe.refs.retire() };
        Ok(())
    }
}

impl Drop for RegisteredFprobe {
    fn drop(&mut self) {
        let _ = self.unregister_inner();
    }
}

/// A probe's ops callback, run inline in the site's entry. `EXIT`: whether
/// the probe has an exit handler (and so hooks returns). `DATA`: whether it
/// keeps words per call (its `data_words` are not zero); without them, the
/// traced path has no words to count, split or fill.
struct FprobeEntry<H, const EXIT: bool, const DATA: bool>(core::marker::PhantomData<H>);

impl<H: Handlers, const EXIT: bool, const DATA: bool> Callback for FprobeEntry<H, EXIT, DATA> {
    #[inline(always)]
    fn call(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
        fprobe_entry::<H, EXIT, DATA>(ip, parent_ip, ops, fregs);
    }
}

#[inline(always)]
fn fprobe_entry<H: Handlers, const EXIT: bool, const DATA: bool>(
    ip: usize,
    parent_ip: usize,
    ops: &FtraceOps,
    fregs: &mut FtraceRegs,
) {
    // SAFETY: this callback is only installed in `Fprobe::ops`, and
    // `register` recorded the probe that holds it, which is freed only once
    // no site leads to the ops.
    let probe = unsafe { &*ops.container::<Fprobe>() };
    if probe.disabled.load(Ordering::Relaxed) {
        return;
    }
    // Without an exit handler there is nothing to hook and no data to keep.
    if !EXIT {
        enter::<H, false>(probe, ip, parent_ip, fregs, &mut []);
        return;
    }
    // The return hook's room comes first (as in Linux): a call the exit
    // cannot be hooked for is missed whole, so every entry the handler sees
    // gets its exit.
    let data_words = if DATA { probe.data_words } else { DataWords::NONE };
    let used = data_words.get();
    // SAFETY: in the entry callback of the call `fregs` saved; the pending
    // hook is committed or dropped below, before it returns.
    let mut pending = match unsafe { retstack::begin_hook(fregs, ip, data_words, FPROBE_NEEDS) } {
        Ok(pending) => pending,
        Err(_) => {
            probe.missed.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    // The data lives where the exit will find it: the words the shadow
    // stack reserved for the call, filled in place.
    if enter::<H, DATA>(probe, ip, parent_ip, fregs, &mut pending.data_mut()[..used]) {
        return; // skip the exit: dropping the pending hook takes it back
    }
    // The hooked call holds a reference until its exit runs. Taking it here
    // is safe: this callback runs before the registration is retired.
    probe.refs.get();
    // SAFETY: the reference keeps the probe alive until `fprobe_exit` or
    // `fprobe_skipped`, and the user pointer is made from the whole probe.
    // The pending hook has room for exactly `used` words, all written.
    let committed = unsafe { pending.commit_in_place(fregs, probe.return_user(), used) };
    debug_assert!(committed.is_ok());
}

/// Fills a call's data words if the probe keeps some (`DATA`: its own,
/// zeroed, then the saved arguments) and runs the entry handler; answers
/// whether it asked to skip the exit.
#[inline(always)]
fn enter<H: Handlers, const DATA: bool>(
    probe: &Fprobe,
    ip: usize,
    parent_ip: usize,
    fregs: &mut FtraceRegs,
    words: &mut [u64],
) -> bool {
    let mut data = if DATA {
        let (own, rest) = words.split_at_mut(probe.config.entry_data_words.min(words.len()));
        if !own.is_empty() {
            own.fill(0);
        }
        if probe.config.save_args {
            for (n, slot) in rest.iter_mut().enumerate() {
                *slot = fregs.argument(n).unwrap_or(0);
            }
        }
        EntryData::of_words(probe, words)
    } else {
        EntryData::empty()
    };
    probe.config.entry.is_some() && H::entry(probe, ip, parent_ip, fregs, &mut data)
}

fn probe_of(user: *const ReturnUser) -> &'static Fprobe {
    // SAFETY: `fprobe_entry` hooks with `return_user()`, made from a pointer
    // to the whole probe, which the call's reference keeps alive.
    unsafe { &*ftrace::container_of!(user, Fprobe, user) }
}

/// A hooked call's return. `DATA` as for [`FprobeEntry`]: without it,
/// `data` is empty.
fn fprobe_exit<H: Handlers, const DATA: bool>(
    user: *const ReturnUser,
    call: &ReturnInfo,
    data: &mut [u64],
    fregs: &mut FtraceRegs,
) {
    let probe = probe_of(user);
    // Only a probe with an exit handler hooks returns (see `fprobe_entry`).
    if !probe.disabled.load(Ordering::Relaxed) {
        let mut data = if DATA { EntryData::of_words(probe, data) } else { EntryData::empty() };
        H::exit(probe, call.func(), call.ret_addr(), fregs, &mut data);
    }
    // SAFETY: the call's reference, dropped last.
    unsafe { probe.refs.put() };
}

/// An exit whose handler will not run: the call's reference released, and
/// counted missed if it returned inside another return callback (not if its
/// task exited: see [`Skipped`]).
fn fprobe_skipped(user: *const ReturnUser, _call: &ReturnInfo, _data: &mut [u64], why: Skipped) {
    let probe = probe_of(user);
    if why == Skipped::Recursion {
        probe.missed.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: as in `fprobe_exit`.
    unsafe { probe.refs.put() };
}
