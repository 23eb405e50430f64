use alloc::boxed::Box;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arch::ftrace_abi::FtraceRegs;
use arch::irq::IrqGuard;
use arch::{cpu, MAX_CPUS};
use ftrace::deferred::{Deferred, Refs};
use ftrace::graph::retstack::{self, Depth, FrameNeeds, HookError, ReturnInfo, ReturnPath, ReturnUser, Skipped};

use crate::pool::ObjPool;

/// A handler: the node, the rethook's private data, where the call returns
/// to, and the registers at the return.
pub type RethookHandler = fn(node: &RethookNode, data: usize, ret_addr: usize, fregs: &mut FtraceRegs);

/// Which registers the handler gets at the return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RethookMode {
    /// The sparse return save: return-value registers, frame and stack
    /// pointers.
    Sparse,
    /// Every register (`fregs.regs()` is `Some`).
    FullRegs,
}

/// What `Rethook` owns; first field the `ReturnUser` the shadow stack points at.
#[repr(C)]
struct Inner {
    user: ReturnUser,
    handler: RethookHandler,
    data: usize,
    words_per_node: usize,
    /// `words_per_node` words per node.
    storage: Box<[UnsafeCell<u64>]>,
    /// The free nodes.
    pool: ObjPool,
    active: AtomicBool,
    /// One reference for the handle, one per node out of the pool.
    refs: Refs,
    missed: AtomicU64,
}

// SAFETY: node storage is owned by whoever holds the node (taken from the
// pool); everything else is atomic or immutable.
unsafe impl Sync for Inner {}
// SAFETY: as above; the raw pointers inside point into this same allocation.
unsafe impl Send for Inner {}

/// A return hook with its node pool. See the crate documentation.
pub struct Rethook {
    inner: NonNull<Inner>,
}

// SAFETY: the handle only reaches `Inner` through methods that are safe to
// call from any context and CPU.
unsafe impl Sync for Rethook {}
// SAFETY: as above.
unsafe impl Send for Rethook {}

/// One hooked call's node: its data words. It belongs to the rethook it
/// came from ([`Rethook::try_get`]) and holds a reference to it; dropping a
/// node that was not hooked gives it back.
pub struct RethookNode {
    inner: NonNull<Inner>,
    index: usize,
}

impl Drop for RethookNode {
    /// Gives back a node taken and never hooked ([`RethookNode::hook`]
    /// keeps it from dropping: the hooked call, then its return, own it).
    fn drop(&mut self) {
        // SAFETY: the node holds the reference `try_get` took, given back
        // here once: nothing uses the node after its drop.
        unsafe { release(self.inner.as_ref(), self.index) };
    }
}

impl RethookNode {
    /// Hooks the return of the call whose entry registers are `fregs` (call
    /// from an ftrace entry callback) for the rethook this node came from,
    /// as Linux's `rethook_hook` does. On error the node goes back to its
    /// pool.
    pub fn hook(self, fregs: &mut FtraceRegs) -> Result<(), HookError> {
        // Hooked, the call holds the node and its reference; not hooked, the
        // node goes back below. Either way it is not dropped here.
        let node = core::mem::ManuallyDrop::new(self);
        // SAFETY: the node's reference keeps its `Inner` alive.
        let inner = unsafe { node.inner.as_ref() };
        let func = fregs.instruction_pointer();
        let index = [node.index as u64];
        // The `user` field, made from the pointer to the whole `Inner`, so
        // the return callback can step back to the rest of it.
        let user: *const ReturnUser = ftrace::field_of!(node.inner.as_ptr(), Inner, user);
        // SAFETY: the node's reference keeps its `Inner` alive until the
        // return callback (or `on_skipped`) releases it; `user` points at the
        // whole `Inner`.
        let result = unsafe { retstack::hook(fregs, func, user, &index) };
        result.map(|_| ()).inspect_err(|error| {
            if *error == HookError::Overrun {
                inner.missed.fetch_add(1, Ordering::Relaxed);
            }
            // SAFETY: the node was taken and not hooked: its reference is ours.
            unsafe { release(inner, node.index) };
        })
    }

    fn words(&self) -> *mut u64 {
        // SAFETY: `inner` lives while the node is out of the pool (the node
        // holds a reference); the index is in range.
        unsafe {
            let inner = self.inner.as_ref();
            inner.storage[self.index * inner.words_per_node].get()
        }
    }

    fn len(&self) -> usize {
        // SAFETY: as in `words`.
        unsafe { self.inner.as_ref().words_per_node }
    }

    /// The node's data words.
    pub fn data(&self) -> &[u64] {
        // SAFETY: the node's words belong to whoever holds the node.
        unsafe { core::slice::from_raw_parts(self.words(), self.len()) }
    }

    /// The node's data words, to fill at entry.
    pub fn data_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `data`, and `&mut self` makes the access exclusive.
        unsafe { core::slice::from_raw_parts_mut(self.words(), self.len()) }
    }
}

impl Rethook {
    /// A rethook calling `handler` with private `data`, with `nodes` nodes of
    /// `words_per_node` data words each, all allocated now.
    pub fn new(handler: RethookHandler, data: usize, nodes: usize, words_per_node: usize, mode: RethookMode) -> Rethook {
        let words_per_node = words_per_node.max(1);
        let inner = Box::new(Inner {
            user: ReturnUser {
                on_return: rethook_return,
                on_skipped: rethook_skipped,
                // Kretprobes run on rethooks: their calls do not count
                // toward the function-graph depth.
                needs: FrameNeeds::new(
                    match mode {
                        RethookMode::Sparse => ReturnPath::Sparse,
                        RethookMode::FullRegs => ReturnPath::Full,
                    },
                    Depth::Uncounted,
                ),
            },
            handler,
            data,
            words_per_node,
            storage: (0..nodes * words_per_node).map(|_| UnsafeCell::new(0)).collect(),
            pool: ObjPool::new(nodes, MAX_CPUS),
            active: AtomicBool::new(true),
            refs: Refs::new(free_inner),
            missed: AtomicU64::new(0),
        });
        Rethook { inner: NonNull::from(Box::leak(inner)) }
    }

    fn inner(&self) -> &Inner {
        // SAFETY: the handle's reference keeps `Inner` alive until dropped.
        unsafe { self.inner.as_ref() }
    }

    /// Takes a free node, or `None` if the rethook is stopped or its pool is
    /// empty (counted as a miss). Never allocates, never locks.
    pub fn try_get(&self) -> Option<RethookNode> {
        let inner = self.inner();
        if !inner.active.load(Ordering::Acquire) {
            return None;
        }
        match inner.pool.pop(cpu::id()) {
            Some(index) => {
                inner.refs.get();
                Some(RethookNode { inner: self.inner, index: index as usize })
            }
            None => {
                inner.missed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Stops the rethook: no new hooks, and in-flight calls return without
    /// their handler.
    pub fn stop(&self) {
        self.inner().active.store(false, Ordering::Release);
    }

    /// Whether the rethook is running.
    pub fn is_active(&self) -> bool {
        self.inner().active.load(Ordering::Acquire)
    }

    /// Calls not hooked or not handled: the pool was empty, the stack full,
    /// or the return ran inside another return callback.
    pub fn missed(&self) -> u64 {
        self.inner().missed.load(Ordering::Relaxed)
    }

    /// Nodes out of the pool: calls hooked and not returned yet.
    pub fn in_flight(&self) -> usize {
        self.inner().refs.count() - 1
    }

    /// Nodes free in the pool.
    pub fn free_nodes(&self) -> usize {
        self.inner().pool.free()
    }
}

/// Puts a node back (into this CPU's ring) and drops its reference.
///
/// # Safety
/// The caller held the node, and does not use `inner` afterwards.
unsafe fn release(inner: &Inner, index: usize) {
    {
        let _irq = IrqGuard::new();
        // SAFETY: interrupts are masked, so this CPU does not push
        // concurrently with itself; the node is given back once.
        unsafe { inner.pool.push(cpu::id(), index as u32) };
    }
    // SAFETY: the node's reference, dropped last.
    unsafe { inner.refs.put() };
}

impl Drop for Rethook {
    /// Stops the rethook and lets go of it: it is freed once every hooked
    /// call has returned (the last return queues the free) and a grace
    /// period has passed.
    fn drop(&mut self) {
        let inner = self.inner();
        inner.active.store(false, Ordering::Release);
        // SAFETY: stopped, so no new node will be handed out once callbacks
        // that already passed the check are done (the grace period `retire`
        // waits for); the handle is gone after this.
        unsafe { inner.refs.retire() };
    }
}

/// The deferred free, once no reference is left.
///
/// # Safety
/// `node` is the `Deferred` of an `Inner`'s `Refs`, queued by its last
/// reference.
unsafe fn free_inner(node: *const Deferred) {
    let inner = ftrace::container_of!(Refs::of_node(node), Inner, refs) as *mut Inner;
    // SAFETY: `Refs::new(free_inner)` is only used inside `Inner`, leaked
    // from a box; no reference is left and a grace period has passed.
    drop(unsafe { Box::from_raw(inner) });
}

fn inner_of(user: *const ReturnUser) -> &'static Inner {
    // SAFETY: `RethookNode::hook` hooks with a pointer to the `user` field made
    // from a pointer to the whole `Inner`, kept alive by the node's
    // reference until `release` below.
    unsafe { &*ftrace::container_of!(user, Inner, user) }
}

/// The return-hook callback of every rethook.
fn rethook_return(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs) {
    let inner = inner_of(user);
    let index = data.first().copied().unwrap_or(0) as usize;
    // The hooked call's node, for the handler; given back below.
    let node = core::mem::ManuallyDrop::new(RethookNode { inner: NonNull::from(inner), index });
    {
        // The check and the handler in one stretch with interrupts masked:
        // a grace period (its cross-CPU round) after `stop` then waits for
        // a handler that passed the check, so the rethook's private data
        // may be freed after it.
        let _irqs = IrqGuard::new();
        if inner.active.load(Ordering::Acquire) {
            (inner.handler)(&node, inner.data, call.ret_addr(), fregs);
        }
    }
    // SAFETY: the hooked call held this node; nothing uses it after.
    unsafe { release(inner, index) };
}

/// A return whose handler will not run: the node released, and counted
/// missed if it returned inside another return callback (a node of a task
/// that exited is only recycled, as Linux's `rethook_flush_task` does).
fn rethook_skipped(user: *const ReturnUser, _call: &ReturnInfo, data: &mut [u64], why: Skipped) {
    let inner = inner_of(user);
    if why == Skipped::Recursion {
        inner.missed.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: as in `rethook_return`.
    unsafe { release(inner, data.first().copied().unwrap_or(0) as usize) };
}
