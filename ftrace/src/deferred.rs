//! Freeing what tracing code may still be using: one mechanism for every
//! object a trampoline, a callback or a hooked call in flight can reach
//! (per-site ops lists, probes, rethooks, event definitions).
//!
//! # Deferred actions
//!
//! [`defer`] queues an action (usually "free this object") on an intrusive
//! [`Deferred`] node the object carries, from any context, without
//! allocating or locking. [`reclaim`], called from normal context outside
//! callbacks, takes the queue, waits for a *grace period* (every flow of
//! control that might have reached the objects before they were queued has
//! left the tracing code), then runs the actions. Linux does the same with
//! `call_rcu` and `synchronize_rcu_tasks`.
//!
//! # Counted objects
//!
//! An object that hooked calls can still return through (a rethook, an
//! fprobe with an exit handler) carries [`Refs`]: one reference for its
//! owner, one per call in flight. The last [`Refs::put`] queues the free, so
//! the object goes away only once its owner let go *and* every hooked call
//! has returned, whichever comes last, and never on the return path itself.
//! The owner lets go with [`Refs::retire`], which drops its reference only
//! after a grace period, so no entry callback that might still be taking a
//! new reference is running when the count can reach zero.
//!
//! # The grace period
//!
//! [`synchronize`] is the one place that defines it (Linux's
//! `synchronize_rcu_tasks_rude` and `synchronize_rcu_tasks` in one):
//!
//! 1. every other CPU takes an interrupt (`arch::smp::sync_all`): whatever
//!    it was doing, it has seen the writes made before the grace period
//!    began (a new ops literal, an unlinked list), and a trampoline it
//!    enters from now on reads those;
//! 2. every task that was inside tracing code entered through a trampoline
//!    (its `TrampolineCounters::active` above zero: running, preempted in a
//!    callback, or interrupted there) is waited for until it has come out
//!    (`active` back to zero, or `exits` moved on). Tasks outside then can
//!    only enter again through the updated sites.
//!
//! The caller must be in normal context, outside callbacks, with
//! interrupts enabled (it may sleep). Objects a hooked call can still
//! return through are kept alive by [`Refs`], not by the grace period.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::task;

/// A queued action: `run(node)` after the next grace period.
pub type Action = unsafe fn(node: *const Deferred);

/// The intrusive node an object carries to be queued with [`defer`].
pub struct Deferred {
    next: AtomicPtr<Deferred>,
    action: arch::cell::AtomicFn<Action>,
}

impl Deferred {
    /// A node not queued.
    pub const fn new() -> Deferred {
        Deferred { next: AtomicPtr::new(ptr::null_mut()), action: arch::cell::AtomicFn::none() }
    }
}

impl Default for Deferred {
    fn default() -> Self {
        Self::new()
    }
}

static QUEUE: AtomicPtr<Deferred> = AtomicPtr::new(ptr::null_mut());
static QUEUED: AtomicUsize = AtomicUsize::new(0);

/// Queues `action(node)` to run after the next grace period. Any context;
/// never allocates, never waits.
///
/// # Safety
/// `node` must stay valid until the action runs, must not be queued twice
/// at once, and the action must be sound to run on it then (typically: the
/// object holding `node` is unreachable by new users).
pub unsafe fn defer(node: *const Deferred, action: Action) {
    // SAFETY: the caller keeps `node` valid until the action has run.
    let node_ref = unsafe { &*node };
    node_ref.action.store(action);
    let mut head = QUEUE.load(Ordering::Relaxed);
    loop {
        node_ref.next.store(head, Ordering::Relaxed);
        match QUEUE.compare_exchange_weak(head, node as *mut Deferred, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(current) => head = current,
        }
    }
    QUEUED.fetch_add(1, Ordering::Relaxed);
}

/// Waits for a grace period. See the module documentation.
pub fn synchronize() {
    arch::smp::sync_all();
    // The tasks that were inside: their counters' address and `exits` then.
    let mut inside: Vec<(usize, u32)> = Vec::new();
    task::for_each(|state| {
        let (active, exits) = state.counters().read();
        if active != 0 {
            inside.push((state.counters() as *const _ as usize, exits));
        }
    });
    while !inside.is_empty() {
        arch::sched::yield_now();
        let mut still = Vec::with_capacity(inside.len());
        task::for_each(|state| {
            let address = state.counters() as *const _ as usize;
            if let Some(&(_, exits_then)) = inside.iter().find(|(a, _)| *a == address) {
                let (active, exits) = state.counters().read();
                if active != 0 && exits == exits_then {
                    still.push((address, exits_then));
                }
            }
        });
        // A task gone from the registry has exited: it is outside too.
        inside = still;
    }
}

/// Runs the queued actions whose grace period is over. Normal context,
/// outside callbacks (the caller's duty: registry paths and the kernel's
/// housekeeping call it). Returns how many ran.
pub fn reclaim() -> usize {
    let mut node = QUEUE.swap(ptr::null_mut(), Ordering::Acquire);
    if node.is_null() {
        return 0;
    }
    synchronize();
    let mut ran = 0;
    while !node.is_null() {
        // SAFETY: queued nodes stay valid until their action ran (`defer`'s
        // contract). Read the link first: the action may free the node or
        // queue it again.
        let (next, action) = unsafe { ((*node).next.load(Ordering::Relaxed), (*node).action.load()) };
        if let Some(action) = action {
            // SAFETY: the grace period is over: `defer`'s caller made the
            // action sound to run now.
            unsafe { action(node) };
        }
        ran += 1;
        node = next;
    }
    QUEUED.fetch_sub(ran, Ordering::Relaxed);
    ran
}

/// Actions queued and not yet run.
pub fn pending() -> usize {
    QUEUED.load(Ordering::Relaxed)
}

/// A reference count whose last reference frees its object after a grace
/// period. See the module documentation.
pub struct Refs {
    count: AtomicUsize,
    node: Deferred,
    free: Action,
}

impl Refs {
    /// One reference (the owner's); `free` receives the node inside these
    /// `Refs` (see [`Refs::of_node`]) and must free the object holding them.
    pub const fn new(free: Action) -> Refs {
        Refs { count: AtomicUsize::new(1), node: Deferred::new(), free }
    }

    /// The `Refs` whose node `free` received: a pointer into the object,
    /// for the free function to step back to the object.
    pub fn of_node(node: *const Deferred) -> *const Refs {
        crate::container_of!(node, Refs, node)
    }

    /// References held now.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Takes one more reference. Only for a caller that knows the object is
    /// alive: it holds a reference, or it runs inside a callback its owner
    /// has not retired yet.
    #[inline]
    pub fn get(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one reference; the last one queues the free.
    ///
    /// # Safety
    /// The caller holds the reference it drops, and does not touch the
    /// object after this returns.
    #[inline]
    pub unsafe fn put(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: no reference is left, so nothing but the deferred
            // free will use the object; it stays valid until then.
            unsafe { defer(&self.node, self.free) };
        }
    }

    /// The owner lets go: its reference is dropped after a grace period, so
    /// a callback still taking references (which it may do until the owner
    /// made the object unreachable) has finished first.
    ///
    /// # Safety
    /// The object is unreachable for new callbacks (unregistered, stopped),
    /// the owner's reference is not used again, and the node is not queued
    /// (it is not: the count cannot reach zero before this runs).
    pub unsafe fn retire(&self) {
        // SAFETY: the node lives in the object, which the owner's reference
        // keeps alive until `drop_owner_reference` runs.
        unsafe { defer(&self.node, drop_owner_reference) };
    }
}

/// The action `retire` queues: drops the owner's reference. If that was
/// the last one the object is freed right here (normal context, after a
/// grace period, and no call is in flight); otherwise the last return frees
/// it through `put`.
///
/// # Safety
/// `node` is the node of a `Refs` whose owner's reference it holds, queued
/// by `retire` once, run after a grace period.
unsafe fn drop_owner_reference(node: *const Deferred) {
    let refs = Refs::of_node(node);
    // SAFETY: `retire` queued the node inside a `Refs`, whose object the
    // owner's reference (dropped here) kept alive.
    let refs = unsafe { &*refs };
    if refs.count.fetch_sub(1, Ordering::AcqRel) == 1 {
        // SAFETY: the last reference; the grace period is over.
        unsafe { (refs.free)(node) };
    }
}

/// A value the traced path reads without a lock, and writers replace whole:
/// each write publishes a new immutable snapshot, and the one it replaces
/// is freed after a grace period (Linux's RCU-protected pointer). Readers
/// in tracing code are safe by the grace period; readers elsewhere, and
/// writers, serialise on a lock of their own.
pub struct Published<T> {
    current: AtomicPtr<Snapshot<T>>,
}

struct Snapshot<T> {
    node: Deferred,
    value: T,
}

impl<T: Send> Published<T> {
    /// Nothing published.
    pub const fn empty() -> Self {
        Published { current: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Calls `f` with the current snapshot (`None` if nothing is
    /// published).
    ///
    /// The reference must not outlive `f`: it stays valid inside tracing
    /// code (a callback: the grace period), or while the caller holds the
    /// writers' lock.
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let snapshot = self.current.load(Ordering::Acquire);
        // SAFETY: a published snapshot is freed only a grace period after it
        // was replaced; see the method's documentation for the callers.
        f(unsafe { snapshot.as_ref() }.map(|snapshot| &snapshot.value))
    }

    /// Whether nothing is published: the pointer alone, no reference made
    /// (a reader outside a grace period's protection may ask).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.current.load(Ordering::Acquire).is_null()
    }

    /// Publishes `value` (or nothing) and retires the old snapshot. Writers
    /// serialise among themselves.
    pub fn replace(&self, value: Option<T>) {
        let new = value.map_or(ptr::null_mut(), |value| Box::into_raw(Box::new(Snapshot { node: Deferred::new(), value })));
        let old = self.current.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: unpublished: new readers cannot find it; the node lives
            // in the snapshot, leaked until `free_snapshot` frees it after a
            // grace period.
            unsafe { defer(&(*old).node, free_snapshot::<T>) };
        }
    }
}

impl<T> Drop for Published<T> {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        if !current.is_null() {
            // SAFETY: a snapshot leaked from a box by `replace`; the owner
            // drops the `Published` only once no reader can reach it (as for
            // any object tracing code reads, after a grace period).
            drop(unsafe { Box::from_raw(current) });
        }
    }
}

/// The deferred action of [`Published::replace`].
///
/// # Safety
/// `node` is the node of a `Snapshot<T>` leaked from a box and no longer
/// published, queued by `replace`, run after a grace period.
unsafe fn free_snapshot<T>(node: *const Deferred) {
    let snapshot = crate::container_of!(node, Snapshot<T>, node) as *mut Snapshot<T>;
    // SAFETY: `replace` queued the node of a snapshot leaked from a box, no
    // longer published; the grace period is over.
    drop(unsafe { Box::from_raw(snapshot) });
}
