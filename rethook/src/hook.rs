use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use arch::ftrace_abi::FtraceRegs;
use arch::irq::IrqGuard;
use ftrace::retstack::{self, HookError, ReturnInfo, ReturnUser};


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
    /// Free node indices; a preallocated stack, changed with interrupts masked.
    free: UnsafeCell<Vec<u32>>,
    active: AtomicBool,
    dropped: AtomicBool,
    in_flight: AtomicUsize,
    missed: AtomicU64,
    /// Link in the queue of rethooks waiting to be freed.
    next_dead: AtomicPtr<Inner>,
}

// SAFETY: `free` is touched only with interrupts masked on the one CPU; node
// storage is owned by whoever holds the node (taken from `free`); everything
// else is atomic or immutable.
unsafe impl Sync for Inner {}
// SAFETY: as above; the raw pointers inside point into this same allocation.
unsafe impl Send for Inner {}

/// Rethooks whose last in-flight call returned after they were dropped.
static DEAD: AtomicPtr<Inner> = AtomicPtr::new(core::ptr::null_mut());

/// A return hook with its node pool. See the crate documentation.
pub struct Rethook {
    inner: NonNull<Inner>,
}

// SAFETY: the handle only reaches `Inner` through methods that are safe to
// call from any context of the one CPU.
unsafe impl Sync for Rethook {}
// SAFETY: as above.
unsafe impl Send for Rethook {}

/// One hooked call's node: its data words.
pub struct RethookNode {
    inner: NonNull<Inner>,
    index: usize,
}

impl RethookNode {
    fn words(&self) -> *mut u64 {
        // SAFETY: `inner` lives while the node is taken or in flight (see
        // the crate documentation); the index is in range.
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

/// Frees the rethooks queued by returns.
fn reap() {
    let mut dead = DEAD.swap(core::ptr::null_mut(), Ordering::Acquire);
    while !dead.is_null() {
        // SAFETY: only fully finished rethooks (dropped, nothing in flight)
        // are queued, each once; they came from `Box::into_raw`.
        let inner = unsafe { Box::from_raw(dead) };
        dead = inner.next_dead.load(Ordering::Relaxed);
    }
}

impl Rethook {
    /// A rethook calling `handler` with private `data`, with `nodes` nodes of
    /// `words_per_node` data words each, all allocated now.
    pub fn new(handler: RethookHandler, data: usize, nodes: usize, words_per_node: usize, mode: RethookMode) -> Rethook {
        reap();
        let words_per_node = words_per_node.max(1);
        let inner = Box::new(Inner {
            user: ReturnUser { on_return: rethook_return, full_regs: mode == RethookMode::FullRegs },
            handler,
            data,
            words_per_node,
            storage: (0..nodes * words_per_node).map(|_| UnsafeCell::new(0)).collect(),
            free: UnsafeCell::new((0..nodes as u32).rev().collect()),
            active: AtomicBool::new(true),
            dropped: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            missed: AtomicU64::new(0),
            next_dead: AtomicPtr::new(core::ptr::null_mut()),
        });
        Rethook { inner: NonNull::from(Box::leak(inner)) }
    }

    fn inner(&self) -> &Inner {
        // SAFETY: the handle keeps `Inner` alive until it is dropped.
        unsafe { self.inner.as_ref() }
    }

    /// Takes a free node, or `None` (and a counted miss) if the pool is empty
    /// or the rethook is stopped. Never allocates.
    pub fn try_get(&self) -> Option<RethookNode> {
        let inner = self.inner();
        if !inner.active.load(Ordering::Acquire) {
            return None;
        }
        let _irq = IrqGuard::new();
        // SAFETY: interrupts masked: the only access to the free list now.
        let free = unsafe { &mut *inner.free.get() };
        match free.pop() {
            Some(index) => {
                inner.in_flight.fetch_add(1, Ordering::Relaxed);
                Some(RethookNode { inner: self.inner, index: index as usize })
            }
            None => {
                inner.missed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Hooks the return of the call whose entry registers are `fregs` (call
    /// from an ftrace entry callback). On error the node goes back to the pool.
    pub fn hook(&self, node: RethookNode, fregs: &mut FtraceRegs) -> Result<(), HookError> {
        let func = fregs.instruction_pointer();
        let inner = self.inner();
        let index = [node.index as u64];
        // The whole `Inner`, seen as its first field, so the return callback
        // can reach the rest of it.
        let user = self.inner.as_ptr() as *const ReturnUser;
        // SAFETY: `Inner` stays alive while a node is in flight (it is freed
        // only when `in_flight` is zero after the handle is dropped), and
        // `user` points at the whole `Inner`.
        let result = unsafe { retstack::hook_raw(fregs, func, user, &index) };
        match result {
            Ok(_) => Ok(()),
            Err(error) => {
                if error == HookError::Overrun {
                    inner.missed.fetch_add(1, Ordering::Relaxed);
                }
                release(inner, node.index);
                Err(error)
            }
        }
    }

    /// Gives back a node taken with `try_get` but not hooked.
    pub fn recycle(&self, node: RethookNode) {
        release(self.inner(), node.index);
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

    /// Calls not hooked because the pool was empty or the stack full.
    pub fn missed(&self) -> u64 {
        self.inner().missed.load(Ordering::Relaxed)
    }

    /// Hooked calls that have not returned yet.
    pub fn in_flight(&self) -> usize {
        self.inner().in_flight.load(Ordering::Acquire)
    }

    /// Nodes free in the pool.
    pub fn free_nodes(&self) -> usize {
        let _irq = IrqGuard::new();
        // SAFETY: interrupts masked: the only access to the free list now.
        unsafe { (*self.inner().free.get()).len() }
    }
}

/// Puts a node back and, for a dropped rethook, queues it for freeing once
/// nothing is in flight.
fn release(inner: &Inner, index: usize) {
    {
        let _irq = IrqGuard::new();
        // SAFETY: interrupts masked: the only access to the free list now.
        // The list was allocated with room for every node: no allocation.
        unsafe { (*inner.free.get()).push(index as u32) };
    }
    if inner.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 && inner.dropped.load(Ordering::Acquire) {
        queue_dead(inner);
    }
}

fn queue_dead(inner: &Inner) {
    let ptr = inner as *const Inner as *mut Inner;
    let mut head = DEAD.load(Ordering::Relaxed);
    loop {
        inner.next_dead.store(head, Ordering::Relaxed);
        match DEAD.compare_exchange_weak(head, ptr, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(current) => head = current,
        }
    }
}

impl Drop for Rethook {
    fn drop(&mut self) {
        let inner = self.inner();
        inner.active.store(false, Ordering::Release);
        let free_now = {
            let _irq = IrqGuard::new();
            inner.dropped.store(true, Ordering::Release);
            inner.in_flight.load(Ordering::Acquire) == 0
        };
        if free_now {
            // SAFETY: nothing is in flight and the handle is gone: nobody else
            // can reach `Inner`. It came from `Box::leak`.
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
        }
        reap();
    }
}

/// The return-hook callback of every rethook.
fn rethook_return(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs) {
    // SAFETY: `Rethook::hook` hooks with a pointer to a whole `Inner` (whose
    // first field is the `ReturnUser`), alive while the node is in flight.
    let inner = unsafe { &*(user as *const Inner) };
    let index = data.first().copied().unwrap_or(0) as usize;
    let node = RethookNode { inner: NonNull::from(inner), index };
    if inner.active.load(Ordering::Acquire) {
        (inner.handler)(&node, inner.data, call.ret_addr, fregs);
    }
    release(inner, index);
}
