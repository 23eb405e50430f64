//! `FtraceOps`: a tracing callback, its flags and its filters.
//!
//! An ops is what a site calls. Its first field is the [`SiteCall`] a site's
//! literal points at, and that `SiteCall` leads, with one indirect call from
//! the trampoline, to:
//!
//! - the user callback itself, for an ops without [`OpsFlags::RECURSION`]
//!   (the fastest path: the callback promises not to call traced code), or
//! - `guarded_entry`, which takes the recursion guard first and counts a
//!   miss instead of recursing.
//!
//! A site traced by several ops points at a `SiteList` instead, built when
//! the filters change (never on the traced path): its entry takes the guard
//! once and calls exactly the ops that trace that site, with no filter checks.

use alloc::boxed::Box;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use arch::ftrace_abi::{FtraceRegs, SiteCall, SiteFunc};
use bitflags::bitflags;

use crate::deferred::{self, Deferred};
use crate::patch::bitmap::Bitmap;
use crate::recursion;

bitflags! {
    /// What an ops asks of the framework.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct OpsFlags: u32 {
        /// Needs every register: its sites use the REGS trampoline, and
        /// `FtraceRegs::regs()` is `Some`.
        const SAVE_REGS = 1 << 0;
        /// Full registers if the architecture can (both can here).
        const SAVE_REGS_IF_SUPPORTED = 1 << 1;
        /// The framework guards the callback against recursion per context
        /// (normal, interrupt, exception) and counts the misses.
        const RECURSION = 1 << 2;
        /// The callback may change the instruction pointer (redirect the
        /// function); at most one such ops per function.
        const IPMODIFY = 1 << 3;
        /// Cannot be switched off with `ftrace_enabled`, and cannot be
        /// registered while that is off.
        const PERMANENT = 1 << 4;
    }
}

/// A tracing callback: the traced function's address, the address it was
/// called from, the ops, and the registers the trampoline saved. Called from
/// assembly, hence `extern "C"`.
pub type FtraceFunc = extern "C" fn(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs);

/// An ops's filters, over record indices. An empty `filter` means every
/// function; `notrace` always wins.
#[derive(Default)]
pub(crate) struct Filters {
    pub filter: Bitmap,
    pub notrace: Bitmap,
}

impl Filters {
    /// The records this ops traces, out of `count`.
    pub fn effective(&self, count: usize) -> Bitmap {
        let mut set = if self.filter.is_empty() { Bitmap::full(count) } else { self.filter.clone() };
        set.subtract(&self.notrace);
        set
    }
}

/// A tracing client. Create it as a `static` (or leak it): sites hold its
/// address while it is registered.
///
/// Without [`OpsFlags::RECURSION`] the callback is called directly and must
/// never reach traced code, itself included: build it (and what it calls)
/// without a patchable entry, `#[patchable_function_entry(prefix_nops = 0,
/// entry_nops = 0)]`, Linux's `notrace`.
#[repr(C)]
pub struct FtraceOps {
    /// Must stay first: a pointer to it is a pointer to the ops.
    call: SiteCall,
    func: FtraceFunc,
    flags: OpsFlags,
    /// The object this ops is part of (a graph ops, a probe), as a pointer
    /// to that whole object: see [`container`](Self::container).
    container: AtomicPtr<()>,
    missed: AtomicU64,
    pub(crate) filters: spin::Mutex<Filters>,
}

/// Whether `flags` ask for every register.
const fn wants_regs(flags: OpsFlags) -> bool {
    flags.bits() & (OpsFlags::SAVE_REGS.bits() | OpsFlags::SAVE_REGS_IF_SUPPORTED.bits()) != 0
}

/// The [`SiteCall`] of an ops whose sites call `entry`: the sparse
/// trampoline calls it too, unless the ops wants every register.
const fn site_call_of(entry: SiteFunc, flags: OpsFlags) -> SiteCall {
    SiteCall { func: entry, sparse_func: if wants_regs(flags) { without_registers } else { entry } }
}

impl FtraceOps {
    /// An ops calling `func` with `flags`; it traces every function until a
    /// filter is set.
    pub const fn new(func: FtraceFunc, flags: OpsFlags) -> Self {
        let entry: SiteFunc = if flags.contains(OpsFlags::RECURSION) {
            guarded_entry
        } else {
            // SAFETY: both are `extern "C"` functions of four pointer-sized
            // arguments; the third is `*const SiteCall` in one and
            // `&FtraceOps` in the other, and the literal a site passes is made
            // from a pointer to this whole `repr(C)` ops (`site_call`), whose
            // first field is the SiteCall: it *is* a valid `&FtraceOps`.
            unsafe { core::mem::transmute::<FtraceFunc, SiteFunc>(func) }
        };
        FtraceOps {
            call: site_call_of(entry, flags),
            func,
            flags,
            container: AtomicPtr::new(core::ptr::null_mut()),
            missed: AtomicU64::new(0),
            filters: spin::Mutex::new(Filters { filter: Bitmap::EMPTY, notrace: Bitmap::EMPTY }),
        }
    }

    /// An ops running `C`'s callback with `flags`: the same as
    /// [`new`](Self::new) with `C::call`, but a site traced by this ops
    /// alone runs the callback inline in its entry.
    pub const fn of<C: Callback>(flags: OpsFlags) -> Self {
        let mut ops = Self::new(call_of::<C>, flags);
        if flags.contains(OpsFlags::RECURSION) {
            ops.call = site_call_of(guarded_entry_of::<C>, flags);
        }
        ops
    }

    /// The flags given at creation.
    pub fn flags(&self) -> OpsFlags {
        self.flags
    }

    /// Whether sites traced by this ops need the REGS trampoline.
    pub fn wants_regs(&self) -> bool {
        wants_regs(self.flags)
    }

    /// Records the object this ops is a field of, for its callback to reach
    /// through [`container`](Self::container). Set it before registering.
    /// The pointer must be made from a reference to the whole object: the
    /// `&FtraceOps` a callback gets is only good for the ops itself, so
    /// casting *it* to the container would reach past what it may.
    pub fn set_container<T>(&self, container: *const T) {
        self.container.store(container as *mut (), Ordering::Release);
    }

    /// The object recorded with [`set_container`](Self::set_container) (null
    /// if none). Dereferencing it is the caller's business: it is valid as
    /// long as the container keeps itself alive while registered.
    pub fn container<T>(&self) -> *const T {
        self.container.load(Ordering::Acquire) as *const T
    }

    /// Calls the framework skipped because of recursion.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    pub(crate) fn note_missed(&self) {
        self.missed.fetch_add(1, Ordering::Relaxed);
    }

    /// What a site literal points at for this ops alone: the whole ops, seen
    /// as its first field.
    pub(crate) fn site_call(&'static self) -> *const SiteCall {
        self as *const FtraceOps as *const SiteCall
    }

    #[inline(always)]
    fn invoke(&self, ip: usize, parent_ip: usize, fregs: &mut FtraceRegs) {
        (self.func)(ip, parent_ip, self, fregs)
    }
}

/// What the sparse trampoline calls for an ops that wants every register
/// (see [`SiteCall`]): counts a miss, never runs it without them.
extern "C" fn without_registers(_ip: usize, _parent_ip: usize, call: *const SiteCall, _fregs: &mut FtraceRegs) {
    // SAFETY: as in `guarded_entry`.
    unsafe { &*(call as *const FtraceOps) }.note_missed();
}

/// The entry of an ops with [`OpsFlags::RECURSION`].
extern "C" fn guarded_entry(ip: usize, parent_ip: usize, call: *const SiteCall, fregs: &mut FtraceRegs) {
    guarded(ip, parent_ip, call, fregs, |ops, fregs| ops.invoke(ip, parent_ip, fregs));
}

/// Takes the recursion guard and runs `callback`, or counts a miss.
#[inline(always)]
fn guarded(
    ip: usize,
    parent_ip: usize,
    call: *const SiteCall,
    fregs: &mut FtraceRegs,
    callback: impl FnOnce(&FtraceOps, &mut FtraceRegs),
) {
    // SAFETY: the literal was made from a pointer to a whole `FtraceOps`
    // (`site_call`), which registration keeps alive.
    let ops = unsafe { &*(call as *const FtraceOps) };
    match recursion::try_enter() {
        Some(_guard) => callback(ops, fregs),
        None => {
            ops.note_missed();
            recursion::note_recursion(ip, parent_ip);
        }
    }
}

/// A callback known when the ops is built ([`FtraceOps::of`]): the site's
/// entry takes the recursion guard and runs it inline, one call and one
/// stack frame fewer than through [`FtraceOps::new`]'s function pointer
/// (the traced path of the tracers themselves).
pub trait Callback {
    /// What [`FtraceFunc`] would do.
    fn call(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs);
}

extern "C" fn call_of<C: Callback>(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    C::call(ip, parent_ip, ops, fregs);
}

extern "C" fn guarded_entry_of<C: Callback>(ip: usize, parent_ip: usize, call: *const SiteCall, fregs: &mut FtraceRegs) {
    guarded(ip, parent_ip, call, fregs, |ops, fregs| C::call(ip, parent_ip, ops, fregs));
}

/// The ops of one site traced by several, newest first (the order they run
/// in, as in Linux).
#[repr(C)]
pub(crate) struct SiteList {
    /// Must stay first (see [`FtraceOps`]).
    call: SiteCall,
    pub ops: Box<[&'static FtraceOps]>,
    /// For the deferred free once no site leads here.
    retired: Deferred,
}

impl SiteList {
    pub fn new(ops: Box<[&'static FtraceOps]>) -> Box<SiteList> {
        let sparse_func = if ops.iter().any(|ops| ops.wants_regs()) { list_entry::<true> } else { list_entry::<false> };
        Box::new(SiteList { call: SiteCall { func: list_entry::<false>, sparse_func }, ops, retired: Deferred::new() })
    }

    /// What a site literal points at: the whole list, seen as its first field.
    pub fn site_call(&self) -> *const SiteCall {
        self as *const SiteList as *const SiteCall
    }

    /// Frees a list no site points at any more, once every trampoline that
    /// may have loaded it has left (after a grace period).
    pub fn retire(list: Box<SiteList>) {
        let list = Box::into_raw(list);
        // SAFETY: the list is leaked until the action frees it; no site
        // points at it any more, so after the grace period nothing uses it.
        unsafe { deferred::defer(&(*list).retired, free_site_list) };
    }
}

/// The deferred action of [`SiteList::retire`].
///
/// # Safety
/// `node` is the `retired` node of a `SiteList` leaked from a box, queued
/// by `retire` once no site pointed at the list, run after a grace period.
unsafe fn free_site_list(node: *const Deferred) {
    let list = crate::container_of!(node, SiteList, retired) as *mut SiteList;
    // SAFETY: `retire` queued the node of a list it leaked from a box.
    drop(unsafe { Box::from_raw(list) });
}

/// The entry of a site traced by several ops. `SPARSE`: the sparse
/// trampoline's entry of a list holding an ops that wants every register,
/// which it skips and counts as missed (see [`SiteCall`]).
extern "C" fn list_entry<const SPARSE: bool>(ip: usize, parent_ip: usize, call: *const SiteCall, fregs: &mut FtraceRegs) {
    // SAFETY: as in `guarded_entry`: the literal points at a whole `SiteList`,
    // which the registry keeps until no site points at it.
    let list = unsafe { &*(call as *const SiteList) };
    match recursion::try_enter() {
        Some(_guard) => {
            for ops in list.ops.iter() {
                if SPARSE && ops.wants_regs() {
                    ops.note_missed();
                } else {
                    ops.invoke(ip, parent_ip, fregs);
                }
            }
        }
        None => {
            for ops in list.ops.iter() {
                ops.note_missed();
            }
            recursion::note_recursion(ip, parent_ip);
        }
    }
}

extern "C" fn nop_entry(_ip: usize, _parent_ip: usize, _call: *const SiteCall, _fregs: &mut FtraceRegs) {}

/// What a disabled site's literal points at: a site whose call is being
/// removed on another CPU may still reach it, and must find something valid.
pub(crate) static NOP_CALL: SiteCall = SiteCall { func: nop_entry, sparse_func: nop_entry };

/// What a disabled site's literal holds ([`NOP_CALL`]'s address), for tests
/// that read literals.
#[cfg(feature = "test-hooks")]
pub fn empty_literal() -> u64 {
    &NOP_CALL as *const SiteCall as u64
}
