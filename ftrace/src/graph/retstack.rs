//! The return hook: one shadow return stack per task ([`crate::graph::shadow`]),
//! shared by every user (the function-graph tracer, other graph users,
//! rethook, fprobe exit handlers), and the return trampolines' handler.
//!
//! # Hooking a return
//!
//! From a function's entry callback, [`begin_hook`] reserves a frame on the
//! current task's shadow stack (the function, its real return address, its
//! frame pointer and the stack pointer its caller will have after the
//! return) and one entry in it; [`Pending::commit`] names the user
//! ([`ReturnUser`]) and its data words and points the return address at a
//! return trampoline (x86_64: the stack slot; aarch64: the link register the
//! entry trampoline restores). A second user hooking the same call joins its
//! frame, so one call returns through the trampoline once.
//!
//! # The return
//!
//! The trampoline saves the return registers (all of them if some entry
//! asked for full registers) and calls [`ftrace_return_to_handler`], which
//!
//! 1. checks the innermost frame against the registers: the frame pointer
//!    and the stack pointer must be the ones recorded at entry, and the
//!    return address kernel text right after a call instruction
//!    (`arch::ftrace::follows_call`). A mismatch means the shadow stack no
//!    longer describes the real one (a kernel bug): the hook stops for good
//!    and the kernel panics with a report, as Linux does, rather than
//!    return anywhere;
//! 2. runs every entry's return callback, in hook order, under the return
//!    recursion bit (see [`crate::recursion`]). If that bit is already held
//!    (a return inside a return callback) the callbacks cannot run: each
//!    user's `on_skipped` runs instead ([`Skipped::Recursion`]), which
//!    counts the miss and releases what its entry reserved. Either way
//!    every hooked return reaches its user exactly once (a call that never
//!    returns, because its task exited, reaches it through [`flush`]);
//! 3. pops the frame and answers the real return address.
//!
//! The frame stays on the stack while its callbacks run: interrupts and
//! calls made by the callbacks push above it, so its words do not change
//! under them.
//!
//! Backtraces turn a trampoline address back into the real return address
//! ([`resolve_return_address`]).

use core::sync::atomic::{AtomicBool, Ordering};

use arch::ftrace_abi::{return_trampoline_address, FtraceRegs, ReturnTrampoline};
use arch::println;

use crate::graph::shadow::{CallSite, Committed, FrameHeader, PendingHook, ShadowStack};
use crate::recursion;
use crate::symbols::kernel as symbols;
use crate::task::{self, TaskTrace};

pub use crate::graph::shadow::{
    frame_words, DataWords, Depth, FrameNeeds, HookError, Recorded, ReturnPath, MAX_DATA_WORDS, MAX_ENTRIES,
};
pub use crate::task::STACK_WORDS;

/// What runs at a hooked call's return for one user.
#[repr(C)]
pub struct ReturnUser {
    /// The return callback: the user, the call, the user's data words, the
    /// return registers.
    pub on_return: ReturnFunc,
    /// Runs instead of `on_return` when the return callback will not run
    /// (see [`Skipped`]): releases what the entry reserved and, for a
    /// recursion, counts the miss.
    pub on_skipped: SkippedFunc,
    /// What it asks of the calls it hooks: every register at the return
    /// or not, and whether they count toward depth.
    pub needs: FrameNeeds,
}

/// A return callback. `user` is the pointer given to [`Pending::commit`]:
/// raw, so that a user embedded in a larger object can reach (and change)
/// the rest of it, provided that pointer was made from a pointer to the
/// whole object. `data` is the user's entry in the frame, its own until the
/// frame is popped.
pub type ReturnFunc = fn(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs);

/// A hooked call whose return callback will not run: the user, the call,
/// its data words and why.
pub type SkippedFunc = fn(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], why: Skipped);

/// Why a hooked call's return callback is skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The call returned inside another return callback, where callbacks
    /// cannot run: a miss, which the user counts (Linux's `nmissed`).
    Recursion,
    /// The call's task exited: it never returns. Not a miss (Linux's
    /// `rethook_flush_task` and fgraph's exit count nothing): the user
    /// only gives back what the entry reserved.
    TaskExited,
}

/// A call, as its return callbacks see it: its frame's header, read where
/// the entry wrote it (the frame stays on the shadow stack, unchanged,
/// until every return callback has run), so the return handler copies
/// nothing for it.
#[repr(transparent)]
#[derive(Debug)]
pub struct ReturnInfo(FrameHeader);

impl ReturnInfo {
    /// A view of a frame's header.
    fn of(header: &FrameHeader) -> &ReturnInfo {
        // SAFETY: `repr(transparent)` over `FrameHeader`.
        unsafe { &*(header as *const FrameHeader as *const ReturnInfo) }
    }

    /// The function returning.
    #[inline(always)]
    pub fn func(&self) -> usize {
        self.0.func as usize
    }

    /// How many counted hooked calls were below it on the shadow stack (see
    /// [`FrameNeeds`]).
    #[inline(always)]
    pub fn depth(&self) -> usize {
        self.0.depth()
    }

    /// Where it returns to (its real return address).
    #[inline(always)]
    pub fn ret_addr(&self) -> usize {
        self.0.ret as usize
    }
}

static STOPPED: AtomicBool = AtomicBool::new(false);

/// Starts hooking the return of the call whose entry registers are `fregs`,
/// with room for up to `max_data` data words, for a user whose
/// [`ReturnUser::needs`] are `needs`: the call's frame is on the shadow stack
/// from now on (an interrupt sees its depth), but its return is not hooked
/// until [`Pending::commit`]. Dropping the pending hook takes it
/// back. Use it to decide about a call (and set state its return will undo)
/// only once the return is sure to come.
///
/// # Safety
/// Call it from the entry callback of the call `fregs` saved, and commit or
/// drop the pending hook there, on this CPU, before the callback returns:
/// never forget it (`mem::forget`) or keep it. The return trampoline trusts
/// that every entry of a returning call's frame was committed.
#[inline(always)]
pub unsafe fn begin_hook(fregs: &FtraceRegs, func: usize, max_data: DataWords, needs: FrameNeeds) -> Result<Pending, HookError> {
    if STOPPED.load(Ordering::Relaxed) {
        return Err(HookError::Stopped);
    }
    // SAFETY: an entry callback's registers (the caller's promise).
    let (ret, sp) = unsafe { fregs.entry_return_unchecked() };
    let call = CallSite { func, ret, fp: fregs.frame_pointer(), sp };
    let stack = &task::try_current().ok_or(HookError::NoStack)?.stack;
    Ok(Pending { hook: stack.begin(&call, max_data, needs)?, _here: core::marker::PhantomData })
}

/// A return hook [`begin_hook`] started. Commit it or drop it before the
/// entry callback that began it returns.
#[must_use = "dropping a pending hook takes it back"]
pub struct Pending {
    hook: PendingHook<'static>,
    /// Not `Send`: it belongs to the CPU and task that began it.
    _here: core::marker::PhantomData<*const ()>,
}

impl Pending {
    /// The call's depth: how many counted hooked calls are below it.
    #[inline]
    pub fn depth(&self) -> usize {
        self.hook.depth()
    }

    /// Hooks the return for `user` with `data` (at most the words reserved;
    /// more is `TooLarge` and takes the hook back). Returns the call's depth.
    ///
    /// # Safety
    /// `user` must stay valid until its `on_return` or `on_skipped` has run
    /// for this call. Its callbacks get this same pointer back; if they
    /// reach an object `user` is part of, the pointer must have been made
    /// from a pointer to that whole object. `fregs` must be the save
    /// [`begin_hook`] was given, and `user`'s needs the needs it was given.
    #[inline]
    pub unsafe fn commit(mut self, fregs: &mut FtraceRegs, user: *const ReturnUser, data: &[u64]) -> Result<usize, HookError> {
        let room = self.data_mut();
        if data.len() > room.len() {
            return Err(HookError::TooLarge);
        }
        room[..data.len()].copy_from_slice(data);
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.commit_in_place(fregs, user, data.len()) }
    }

    /// The words reserved for the call's data, to fill in place (the traced
    /// path's way: nothing to copy) before
    /// [`commit_in_place`](Self::commit_in_place).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u64] {
        self.hook.data_mut()
    }

    /// [`commit`](Self::commit) with the first `len` words of
    /// [`data_mut`](Self::data_mut) as the data.
    ///
    /// # Safety
    /// As for [`commit`](Self::commit).
    #[inline]
    pub unsafe fn commit_in_place(self, fregs: &mut FtraceRegs, user: *const ReturnUser, len: usize) -> Result<usize, HookError> {
        // SAFETY: the caller vouches for `user`.
        let needs = unsafe { (*user).needs };
        let Committed { depth, redirect } = self.hook.commit_in_place(user as u64, len, needs)?;
        if let Some(path) = redirect {
            let trampoline = match path {
                ReturnPath::Sparse => ReturnTrampoline::Sparse,
                ReturnPath::Full => ReturnTrampoline::Full,
            };
            // SAFETY: the return trampolines take over from any return: they
            // find the real return address in this frame. The save is an
            // entry save: `begin_hook`'s contract (the caller passes the
            // save it gave `begin_hook`).
            unsafe { fregs.set_return_address_unchecked(return_trampoline_address(trampoline)) };
        }
        Ok(depth)
    }
}

/// Hooks the return of the call whose entry registers are `fregs` for
/// `user`, keeping `data` for its return callback. Returns the call's depth.
///
/// # Safety
/// As for [`Pending::commit`]. (What [`begin_hook`] asks of its pending
/// hook, this keeps itself. It may be given any save a callback gets, an
/// entry callback's or a return callback's: a return save has no return
/// address, and is refused with `NotAtEntry`.)
#[inline]
pub unsafe fn hook(fregs: &mut FtraceRegs, func: usize, user: *const ReturnUser, data: &[u64]) -> Result<usize, HookError> {
    if fregs.return_address().is_none() {
        return Err(HookError::NotAtEntry);
    }
    let words = DataWords::new(data.len()).ok_or(HookError::TooLarge)?;
    // SAFETY: the pending hook is committed (or dropped on error) right
    // here, for the user whose needs it began with; the caller vouches for
    // `user`.
    let pending = unsafe { begin_hook(fregs, func, words, (*user).needs) }?;
    // SAFETY: the caller's guarantees, passed on.
    unsafe { pending.commit(fregs, user, data) }
}

/// Called by the return trampolines: runs the return callbacks of the
/// innermost frame (or, under recursion, their `on_skipped`), pops it, and
/// answers the real return address. See the module documentation.
///
/// # Safety
/// Only a return trampoline may call it, with its return save (the
/// registers of a hooked call returning through it).
#[no_mangle]
pub unsafe extern "C" fn ftrace_return_to_handler(fregs: &mut FtraceRegs) -> usize {
    // SAFETY: a return through a trampoline is a call this task hooked.
    let task = unsafe { task::current_unchecked() };
    let stack = &task.stack;
    let Some(base) = stack.innermost_base() else {
        stop_and_report(task, "the shadow stack is empty", fregs);
    };
    // SAFETY: the innermost frame's base; its header is not written again
    // before the pop below (callbacks push and pop above it).
    let header = unsafe { stack.header_in_place(base) };
    if header.fp != fregs.frame_pointer() as u64 || header.sp != fregs.stack_pointer() as u64 {
        stop_and_report(task, "the frame does not match the registers", fregs);
    }
    // SAFETY: the return address this call recorded, in the frame that
    // just matched the registers.
    if !unsafe { arch::ftrace::follows_direct_call(header.ret as usize) } {
        // SAFETY: the caller's promise, and the frame checked above.
        return unsafe { return_after_other_call(task, base, header, fregs) };
    }
    // SAFETY: the caller's promise, and the frame checked above.
    unsafe { run_returns(task, base, header, ReturnInfo::of(header), fregs) }
}

/// [`ftrace_return_to_handler`] for a return address after no direct call:
/// after an indirect one; the return trampoline, for a call its caller
/// made as a tail call (`jmp`, `b`) from a hooked function; anything else
/// is a frame gone wrong, reported.
///
/// # Safety
/// As for [`run_returns`].
#[cold]
#[inline(never)]
unsafe fn return_after_other_call(task: &'static TaskTrace, base: usize, header: &FrameHeader, fregs: &mut FtraceRegs) -> usize {
    if is_return_trampoline(header.ret as usize) {
        // SAFETY: the caller's promise.
        return unsafe { return_after_tail_call(task, base, header, fregs) };
    }
    if !arch::ftrace::follows_call(header.ret as usize) {
        stop_and_report(task, "the return address is not right after a call", fregs);
    }
    // SAFETY: the caller's promise.
    unsafe { run_returns(task, base, header, ReturnInfo::of(header), fregs) }
}

/// [`ftrace_return_to_handler`] for a call that returns to a return
/// trampoline (its hooked caller tail-called it): its callbacks are told
/// where the chain of such returns really ends, as Linux's
/// `correct_ret_addr` does. (The pop still answers the trampoline: the
/// caller's own frame returns next.)
///
/// # Safety
/// As for [`run_returns`].
#[cold]
#[inline(never)]
unsafe fn return_after_tail_call(task: &'static TaskTrace, base: usize, header: &FrameHeader, fregs: &mut FtraceRegs) -> usize {
    let stack = &task.stack;
    let frame = crate::graph::shadow::Frame { base, header: *header };
    let real = core::iter::successors(stack.below(&frame), |frame| stack.below(frame))
        .map(|frame| frame.header.ret)
        .find(|&ret| !is_return_trampoline(ret as usize))
        .unwrap_or(header.ret);
    if !arch::ftrace::follows_call(real as usize) {
        stop_and_report(task, "the return address is not right after a call", fregs);
    }
    let corrected = ReturnInfo(FrameHeader { ret: real, ..*header });
    // SAFETY: the caller's promise.
    unsafe { run_returns(task, base, header, &corrected, fregs) }
}

/// The rest of [`ftrace_return_to_handler`]: tells `fregs` where the call
/// returns to (`info`'s), runs the innermost frame's return callbacks (or
/// their `on_skipped`), pops it and answers its return address.
///
/// # Safety
/// `fregs` is a return trampoline's save; `base` and `header` are the
/// innermost frame's, checked against `fregs`.
#[inline(always)]
unsafe fn run_returns(
    task: &'static TaskTrace,
    base: usize,
    header: &FrameHeader,
    info: &ReturnInfo,
    fregs: &mut FtraceRegs,
) -> usize {
    let stack = &task.stack;
    // SAFETY: a return save (the caller's promise).
    unsafe { fregs.set_returned_to_unchecked(info.ret_addr()) };
    // Each entry's user pointer is a `ReturnUser` its committer keeps valid
    // until this return; its data words are its own until the pop below.
    // Both walks may trust the frame: the innermost, checked above; its call
    // could not return while one of its entries was pending, and callbacks
    // pop whatever they push.
    match recursion::try_enter_return(task) {
        // SAFETY: as just said.
        Some(_guard) => unsafe {
            stack.for_each_entry_of_innermost(base, |user, data| {
                let user = user as *const ReturnUser;
                ((*user).on_return)(user, info, data, fregs)
            })
        },
        // SAFETY: as just said.
        None => unsafe { skip_returns(stack, base, info, Skipped::Recursion) },
    }
    // SAFETY: the innermost frame (at `base`, its header `header`) is
    // still on the stack: its callbacks popped whatever they pushed.
    unsafe { stack.pop_innermost(base, header) as usize }
}

/// A return whose callbacks will not run (`why`): each user of the
/// innermost frame (at `base`) gets `on_skipped`.
///
/// # Safety
/// As for [`ShadowStack::for_each_entry_of_innermost`].
#[cold]
#[inline(never)]
unsafe fn skip_returns(stack: &ShadowStack, base: usize, info: &ReturnInfo, why: Skipped) {
    // SAFETY: the caller's promise; the user pointers as in the handler.
    unsafe {
        stack.for_each_entry_of_innermost(base, |user, data| {
            let user = user as *const ReturnUser;
            ((*user).on_skipped)(user, info, data, why)
        })
    }
}

/// Gives back every hooked call of a task that exited: the calls on its
/// shadow stack (its entry function, `exit`, the switch away) will never
/// return, so each entry's user gets `on_skipped` with
/// [`Skipped::TaskExited`], innermost first (a rethook's node goes back to
/// its pool, a probe's reference is dropped, nothing is counted missed, as
/// Linux's `rethook_flush_task` does), and the stack is emptied.
///
/// # Safety
/// The task runs no more, nor anything on its behalf, and no other CPU
/// walks its stack (it is unregistered: `task::unregister`).
pub unsafe fn flush(state: &TaskTrace) {
    let stack = &state.stack;
    while let Some(base) = stack.innermost_base() {
        // SAFETY: the innermost frame; nothing writes the stack but this.
        let info = ReturnInfo::of(unsafe { stack.header_in_place(base) });
        // SAFETY: a stopped task's frames: every entry committed (its hooks
        // were made and finished in callbacks that returned), nothing above.
        unsafe { skip_returns(stack, base, info, Skipped::TaskExited) };
        // SAFETY: the innermost frame and its header.
        unsafe { stack.pop_innermost(base, &info.0) };
    }
}

/// A return that cannot be matched with its frame: stop hooking returns,
/// report everything known, and panic (returning anywhere would be worse).
#[cold]
fn stop_and_report(task: &TaskTrace, why: &str, fregs: &FtraceRegs) -> ! {
    STOPPED.store(true, Ordering::Relaxed);
    let name = |address: u64| symbols::name_of(address as usize).unwrap_or("?");
    match task.stack.innermost() {
        Some(frame) => println!(
            "ftrace: return hook: {why} returning from {}: recorded fp {:#x} sp {:#x}, found fp {:#x} sp {:#x}; return hook stopped",
            name(frame.header.func),
            frame.header.fp,
            frame.header.sp,
            fregs.frame_pointer(),
            fregs.stack_pointer()
        ),
        None => println!("ftrace: return hook: {why}; return hook stopped"),
    }
    for frame in task.stack.frames_iter() {
        println!(
            "  hooked: {} returning to {:#x} ({}), fp {:#x} sp {:#x}",
            name(frame.header.func),
            frame.header.ret,
            name(frame.header.ret),
            frame.header.fp,
            frame.header.sp
        );
    }
    arch::flight::print();
    task.reset_graph_marks();
    panic!("ftrace: return hook stopped: {why}")
}

/// Whether `address` is one of the return trampolines.
pub fn is_return_trampoline(address: usize) -> bool {
    address == return_trampoline_address(ReturnTrampoline::Sparse) || address == return_trampoline_address(ReturnTrampoline::Full)
}

/// For backtraces: if `address` (read from a frame record whose saved caller
/// frame pointer is `caller_fp`) is a return trampoline, the real return
/// address of the hooked call with that frame pointer; otherwise `address`.
pub fn resolve_return_address(address: usize, caller_fp: usize) -> usize {
    if !is_return_trampoline(address) {
        return address;
    }
    let through = |ret: u64| is_return_trampoline(ret as usize);
    task::try_current().and_then(|state| state.stack.return_address_for(caller_fp, through)).unwrap_or(address)
}

/// Hooked calls on the current task's shadow stack now.
pub fn frames() -> usize {
    task::current().stack.frames()
}

/// Calls the current task's shadow stack had no room for.
pub fn overruns() -> u64 {
    task::current().stack.overruns()
}

/// Whether the return hook stopped after a frame mismatch.
pub fn is_stopped() -> bool {
    STOPPED.load(Ordering::Relaxed)
}

/// Lets the return hook run again after it stopped: every shadow stack
/// and graph marker is cleared first (what the stopped hook left describes
/// calls that will never return through it).
///
/// # Safety
/// As [`TaskTrace::reset`] for every task: no hooked call of any task will
/// return through the return trampoline, and no CPU is inside a tracing
/// callback.
pub unsafe fn restart() {
    // SAFETY: the caller's promise, for every task.
    task::for_each(|state| unsafe { state.reset() });
    STOPPED.store(false, Ordering::Relaxed);
}

/// For tests: changes what the innermost hooked call recorded, so its
/// return finds a mismatch.
#[cfg(feature = "test-hooks")]
pub fn corrupt_innermost(field: Recorded) {
    task::current().stack.corrupt_innermost(field);
}
