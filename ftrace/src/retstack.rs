//! The return hook: one shadow return stack per CPU, shared by every user
//! (the function-graph tracer, other graph users, rethook).
//!
//! # Hooking a return
//!
//! From a function's entry callback, [`hook_raw`] pushes a *frame* on the
//! current CPU's shadow stack (the function, its real return address, its
//! frame pointer and stack pointer at entry, and its depth) and replaces
//! the return address with a return trampoline (x86_64: the stack slot;
//! aarch64: the link register the entry trampoline restores). Each user that
//! wants the return appends an *entry* to the frame: a pointer to its
//! [`ReturnUser`] and a few words of its own data. A second user hooking the
//! same call (same function and entry stack pointer) joins the frame rather
//! than pushing another, so one call returns through the trampoline once.
//!
//! A user that must decide in its entry callback (the graph tracer, fprobe)
//! hooks in two steps, as Linux's fgraph does: [`begin_hook`] reserves the
//! frame and an entry first (so the call is traced only if its return is
//! sure to come, and an interrupt meanwhile sees the call's depth), then the
//! callback runs, then [`PendingHook::commit`] fills the entry in, or
//! dropping the pending hook takes it back.
//!
//! # The return
//!
//! The trampoline saves the return registers (a sparse `FtraceRegs`, or all
//! of them if some entry asked for full registers) and calls
//! [`ftrace_return_to_handler`], which checks the frame pointer against the
//! one recorded at entry, runs every entry's return callback (in the order
//! the users hooked the call), pops the frame and answers the real return address.
//!
//! # Invariants and failure modes
//!
//! - Interrupts nest strictly, so an interrupt's frames sit above the frames
//!   of the code it interrupted and are gone before that code resumes: one
//!   stack per CPU serves the boot context and every nested context. (With
//!   tasks, the stack becomes per task; `this_stack` is the only place that
//!   chooses it.)
//! - No interrupt masking is needed: a push first *reserves* its words by
//!   raising the top, then writes them, then links the frame; an interrupt
//!   that arrives in between pushes above the reservation and has popped
//!   again (restoring top and base) before the push resumes. A pop reads the
//!   frame's header, relinks the base, and only then lowers the top: until
//!   then an interrupt pushes above the dead frame, so it never overwrites
//!   words the pop still reads. Reads need nothing at all: whatever an
//!   interrupt changes it has undone before the interrupted code reads again.
//! - A full stack counts an overrun and the call runs untraced.
//! - A frame pointer that does not match stops the return hook (no new hooks
//!   anywhere, reported once) and still returns to the recorded address. The
//!   suspect frame's return callbacks do not run, so whatever they would have
//!   released (a rethook node) stays allocated: a stopped hook is a kernel
//!   bug to report, not a state to recover from.
//! - Backtraces turn a trampoline address back into the real return address
//!   ([`resolve_return_address`]).

use core::cell::UnsafeCell;
use core::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arch::ftrace_abi::{return_trampoline_address, FtraceRegs, ReturnTrampoline};
use arch::{cpu, println, MAX_CPUS};

use crate::{recursion, symbols};

/// Words in each CPU's shadow stack (32 KiB).
pub const STACK_WORDS: usize = 4096;
/// The most data words one user may keep per call.
pub const MAX_DATA_WORDS: usize = 32;
/// The most users (entries) one frame can hold.
pub const MAX_ENTRIES: usize = 32;

// Frame header, in words from the frame's base.
const RET: usize = 0;
const FUNC: usize = 1;
const FP: usize = 2;
const SP: usize = 3;
const INFO: usize = 4;
const PREV_BASE: usize = 5;
const HEADER: usize = 6;
// An entry: [data length][user pointer][data...].
const ENTRY_HEADER: usize = 2;
const INFO_FULL: u64 = 1 << 32;
const NO_FRAME: usize = usize::MAX;

/// What runs at a hooked call's return for one user.
#[repr(C)]
pub struct ReturnUser {
    /// The callback: the user, the call, the user's data words, the return
    /// registers.
    pub on_return: ReturnFunc,
    /// Whether this user wants every register at return (the full-registers
    /// return trampoline).
    pub full_regs: bool,
}

/// A return callback. `user` is the pointer given to [`hook_raw`]: raw, so
/// that a user embedded in a larger object can reach (and change) the rest of
/// it, provided that pointer was made from a pointer to the whole object.
/// `data` is the user's entry in the frame, its own until the frame is popped.
pub type ReturnFunc = fn(user: *const ReturnUser, call: &ReturnInfo, data: &mut [u64], fregs: &mut FtraceRegs);

/// A call, as its return callbacks see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReturnInfo {
    /// The function returning.
    pub func: usize,
    /// How many hooked calls were below it on the shadow stack.
    pub depth: usize,
    /// Where it returns to (its real return address).
    pub ret_addr: usize,
    /// Calls this CPU's stack had no room for so far.
    pub overrun: u64,
}

/// Why a return could not be hooked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookError {
    /// The shadow stack is full; counted as an overrun.
    Overrun,
    /// The return hook was stopped after a frame-pointer mismatch.
    Stopped,
    /// The registers are not a function-entry save.
    NotAtEntry,
    /// More than [`MAX_DATA_WORDS`] of data, or a frame with too many users.
    TooLarge,
}

/// One CPU's shadow stack. The words are only ever reached through raw
/// element pointers (never a reference to the whole array), so a return
/// callback can use its own entry's data while an interrupt pushes and pops
/// frames above it.
struct Stack {
    words: UnsafeCell<[u64; STACK_WORDS]>,
    /// The first free word.
    top: AtomicUsize,
    /// The base of the innermost frame, or `NO_FRAME`.
    base: AtomicUsize,
    /// Frames on the stack. Only this CPU changes it (an interrupt restores
    /// what it changed before returning), so plain loads and stores do: no
    /// locked read-modify-write on the traced path.
    frames: AtomicUsize,
    overruns: AtomicU64,
}

// SAFETY: each CPU touches only its own stack, and interrupt handlers only
// touch words above the interrupted code's reservation (see the module
// documentation).
unsafe impl Sync for Stack {}

static STACKS: [Stack; MAX_CPUS] = [const {
    Stack {
        words: UnsafeCell::new([0; STACK_WORDS]),
        top: AtomicUsize::new(0),
        base: AtomicUsize::new(NO_FRAME),
        frames: AtomicUsize::new(0),
        overruns: AtomicU64::new(0),
    }
}; MAX_CPUS];

static STOPPED: AtomicBool = AtomicBool::new(false);

/// The shadow stack of what runs on this CPU now. The one place that picks
/// it: with tasks, it becomes the current task's.
fn this_stack() -> &'static Stack {
    &STACKS[cpu::id()]
}

impl Stack {
    #[inline]
    fn word(&self, index: usize) -> u64 {
        debug_assert!(index < STACK_WORDS);
        // SAFETY: in bounds (indices come from `top`, which never exceeds
        // STACK_WORDS); a plain read of one element through the cell.
        unsafe { *(self.words.get() as *const u64).add(index) }
    }

    #[inline]
    fn set_word(&self, index: usize, value: u64) {
        debug_assert!(index < STACK_WORDS);
        // SAFETY: as for `word`; callers write only words they reserved.
        unsafe { *(self.words.get() as *mut u64).add(index) = value }
    }

    /// Words `at..at + len` as a slice.
    ///
    /// # Safety
    /// The words must belong to the caller's frame, and nothing else may use
    /// them while the slice lives.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    unsafe fn slice(&self, at: usize, len: usize) -> &mut [u64] {
        assert!(at + len <= STACK_WORDS);
        // SAFETY: in bounds; the caller guarantees exclusive use.
        unsafe { core::slice::from_raw_parts_mut((self.words.get() as *mut u64).add(at), len) }
    }

    /// Reserves `len` words at the top; returns where they start. The
    /// compiler fence keeps the words' writes after the reservation.
    #[inline]
    fn reserve(&self, len: usize) -> usize {
        let at = self.top();
        self.top.store(at + len, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        at
    }

    #[inline]
    fn top(&self) -> usize {
        self.top.load(Ordering::Relaxed)
    }

    #[inline]
    fn base(&self) -> usize {
        self.base.load(Ordering::Relaxed)
    }

    #[inline]
    fn depth_at(&self, base: usize) -> usize {
        (self.word(base + INFO) & 0xffff_ffff) as usize
    }

    /// The innermost frame, if it is this call's.
    #[inline]
    fn joinable(&self, func: usize, sp: usize) -> Option<usize> {
        let base = self.base();
        (base != NO_FRAME && self.word(base + FUNC) == func as u64 && self.word(base + SP) == sp as u64)
            .then_some(base)
    }

    /// Writes the header of an entry with room for `len` words and no user
    /// yet at `at` (reserved by the caller), so walkers can step over it.
    #[inline]
    fn write_placeholder(&self, at: usize, len: usize) {
        self.set_word(at, len as u64);
        self.set_word(at + 1, 0);
    }

    /// The innermost frame's entries: (offset, data length), in hook order.
    #[inline]
    fn entries(&self, base: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let end = self.top();
        let mut at = base + HEADER;
        core::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let len = self.word(at) as usize;
            let entry = (at, len);
            at += ENTRY_HEADER + len;
            Some(entry)
        })
    }
}

/// Hooks the return of the call whose entry registers are `fregs` for
/// `user`, keeping `data` for its return callback. Returns the call's depth.
///
/// # Safety
/// As for [`PendingHook::commit`].
#[inline]
pub unsafe fn hook_raw(fregs: &mut FtraceRegs, func: usize, user: *const ReturnUser, data: &[u64]) -> Result<usize, HookError> {
    let pending = begin_hook(fregs, func, data.len())?;
    // SAFETY: the caller's guarantees, passed on.
    unsafe { pending.commit(fregs, user, data) }
}

/// Starts hooking the return of the call whose entry registers are `fregs`,
/// with room for up to `max_data` data words: the call's frame is on the
/// shadow stack from now on (an interrupt sees its depth), but its return is
/// not hooked until [`PendingHook::commit`]. Dropping the pending hook takes
/// it back. Use it to decide about a call (and set state its return will
/// undo) only once the return is sure to come.
#[inline]
pub fn begin_hook(fregs: &FtraceRegs, func: usize, max_data: usize) -> Result<PendingHook, HookError> {
    if !fregs.has_args() {
        return Err(HookError::NotAtEntry);
    }
    if max_data > MAX_DATA_WORDS {
        return Err(HookError::TooLarge);
    }
    if STOPPED.load(Ordering::Relaxed) {
        return Err(HookError::Stopped);
    }
    let return_address = fregs.return_address().ok_or(HookError::NotAtEntry)?;
    let sp = fregs.stack_pointer();
    let needed = ENTRY_HEADER + max_data;
    let stack = this_stack();

    if let Some(base) = stack.joinable(func, sp) {
        if stack.top() + needed > STACK_WORDS {
            stack.overruns.fetch_add(1, Ordering::Relaxed);
            return Err(HookError::Overrun);
        }
        if stack.entries(base).count() >= MAX_ENTRIES {
            return Err(HookError::TooLarge);
        }
        let entry = stack.reserve(needed);
        stack.write_placeholder(entry, max_data);
        return Ok(PendingHook { base, entry, capacity: max_data, new_frame: false });
    }

    if stack.top() + HEADER + needed > STACK_WORDS {
        stack.overruns.fetch_add(1, Ordering::Relaxed);
        return Err(HookError::Overrun);
    }
    let depth = stack.frames.load(Ordering::Relaxed);
    let base = stack.reserve(HEADER + needed);
    stack.set_word(base + RET, return_address as u64);
    stack.set_word(base + FUNC, func as u64);
    stack.set_word(base + FP, fregs.frame_pointer() as u64);
    stack.set_word(base + SP, sp as u64);
    stack.set_word(base + INFO, depth as u64);
    stack.set_word(base + PREV_BASE, stack.base() as u64);
    stack.write_placeholder(base + HEADER, max_data);
    compiler_fence(Ordering::SeqCst);
    stack.base.store(base, Ordering::Relaxed);
    stack.frames.store(depth + 1, Ordering::Relaxed);
    Ok(PendingHook { base, entry: base + HEADER, capacity: max_data, new_frame: true })
}

/// A return hook [`begin_hook`] started: the call's frame (new or joined) and
/// one reserved entry, holding no user yet. It must be committed or dropped
/// before the entry callback that began it returns, on the same CPU.
#[must_use = "dropping a pending hook takes it back"]
pub struct PendingHook {
    base: usize,
    entry: usize,
    capacity: usize,
    new_frame: bool,
}

impl PendingHook {
    /// The call's depth: how many hooked calls are below it.
    #[inline]
    pub fn depth(&self) -> usize {
        this_stack().depth_at(self.base)
    }

    /// Hooks the return for `user` with `data` (at most the words reserved;
    /// more is `TooLarge` and takes the hook back). Returns the call's depth.
    ///
    /// # Safety
    /// `user` must stay valid until the hooked call returns. Its callback gets
    /// this same pointer back; if it reaches an object `user` is part of, the
    /// pointer must have been made from a pointer to that whole object.
    #[inline]
    pub unsafe fn commit(self, fregs: &mut FtraceRegs, user: *const ReturnUser, data: &[u64]) -> Result<usize, HookError> {
        if data.len() > self.capacity {
            return Err(HookError::TooLarge);
        }
        let this = core::mem::ManuallyDrop::new(self);
        let stack = this_stack();
        for (i, &word) in data.iter().enumerate() {
            stack.set_word(this.entry + ENTRY_HEADER + i, word);
        }
        stack.set_word(this.entry + 1, user as u64);
        // Give back the words not used, then shorten the entry: a walker that
        // reads the old length in between stops at the top.
        compiler_fence(Ordering::SeqCst);
        stack.top.store(this.entry + ENTRY_HEADER + data.len(), Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        stack.set_word(this.entry, data.len() as u64);

        // SAFETY: the caller vouches for `user`.
        let wants_full = unsafe { (*user).full_regs };
        let info = stack.word(this.base + INFO);
        let trampoline = if wants_full || info & INFO_FULL != 0 {
            stack.set_word(this.base + INFO, info | INFO_FULL);
            ReturnTrampoline::Full
        } else {
            ReturnTrampoline::Sparse
        };
        if this.new_frame || (wants_full && info & INFO_FULL == 0) {
            // SAFETY: the return trampolines take over from any return: they
            // find the real return address in this frame.
            unsafe { fregs.set_return_address(return_trampoline_address(trampoline)) };
        }
        Ok(stack.depth_at(this.base))
    }
}

impl Drop for PendingHook {
    /// Takes the hook back: the reserved entry, and the frame if it was new.
    #[inline]
    fn drop(&mut self) {
        let stack = this_stack();
        if self.new_frame {
            stack.base.store(stack.word(self.base + PREV_BASE) as usize, Ordering::Relaxed);
            stack.frames.store(stack.frames.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            stack.top.store(self.base, Ordering::Relaxed);
        } else {
            compiler_fence(Ordering::SeqCst);
            stack.top.store(self.entry, Ordering::Relaxed);
        }
    }
}

/// Called by the return trampolines: runs the return callbacks of the
/// innermost frame, pops it, and answers the real return address.
///
/// The frame stays on the stack while its callbacks run: interrupts push
/// above it, and the callbacks cannot hook calls of their own (they run under
/// the recursion guard), so its words do not change under them. Callbacks run
/// in the order their users hooked the call.
#[no_mangle]
pub extern "C" fn ftrace_return_to_handler(fregs: &mut FtraceRegs) -> usize {
    let stack = this_stack();
    let (base, end) = (stack.base(), stack.top());
    if base == NO_FRAME {
        panic!("ftrace: return trampoline reached with an empty shadow stack");
    }
    let ret_addr = stack.word(base + RET) as usize;
    let func = stack.word(base + FUNC) as usize;
    let expected_fp = stack.word(base + FP) as usize;

    if fregs.frame_pointer() != expected_fp {
        if !STOPPED.swap(true, Ordering::Relaxed) {
            println!(
                "ftrace: return hook: frame pointer mismatch returning from {}: expected {expected_fp:#x}, found {:#x}; return hook stopped",
                symbols::name_of(func).unwrap_or("?"),
                fregs.frame_pointer()
            );
        }
    } else if let Some(_guard) = recursion::try_enter() {
        fregs.set_returned_to(ret_addr);
        let info = ReturnInfo {
            func,
            depth: stack.depth_at(base),
            ret_addr,
            overrun: stack.overruns.load(Ordering::Relaxed),
        };
        let mut at = base + HEADER;
        while at < end {
            let len = stack.word(at) as usize;
            let user = stack.word(at + 1) as *const ReturnUser;
            // SAFETY: this frame's entries are all committed (its call could
            // not return while one was pending), and hold `ReturnUser`
            // pointers their committers keep valid until this return.
            let on_return = unsafe { (*user).on_return };
            // SAFETY: the entry's words belong to this frame, and nothing
            // else uses them until it is popped below.
            let data = unsafe { stack.slice(at + ENTRY_HEADER, len) };
            on_return(user, &info, data, fregs);
            at += ENTRY_HEADER + len;
        }
    }

    // Unlink first, release the words last: until the top comes down, an
    // interrupt pushes above this dead frame and never reads it, so the
    // header words read here cannot change under us.
    let prev_base = stack.word(base + PREV_BASE) as usize;
    stack.base.store(prev_base, Ordering::Relaxed);
    stack.frames.store(stack.frames.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    stack.top.store(base, Ordering::Relaxed);
    ret_addr
}

/// Whether `address` is one of the return trampolines.
pub fn is_return_trampoline(address: usize) -> bool {
    address == return_trampoline_address(ReturnTrampoline::Sparse)
        || address == return_trampoline_address(ReturnTrampoline::Full)
}

/// For backtraces: if `address` (read from a frame record whose saved caller
/// frame pointer is `caller_fp`) is a return trampoline, the real return
/// address of the hooked call with that frame pointer; otherwise `address`.
pub fn resolve_return_address(address: usize, caller_fp: usize) -> usize {
    if !is_return_trampoline(address) {
        return address;
    }
    let stack = this_stack();
    let mut base = stack.base();
    while base != NO_FRAME {
        if stack.word(base + FP) as usize == caller_fp {
            return stack.word(base + RET) as usize;
        }
        base = stack.word(base + PREV_BASE) as usize;
    }
    address
}

/// Whether any shadow stack holds an entry of `user`: a hooked call whose
/// return callback has not run yet. For freeing a user safely, at the cost of
/// a scan when it is unregistered rather than a counter on every call.
pub fn user_in_flight(user: *const ReturnUser) -> bool {
    STACKS.iter().any(|stack| {
        let mut base = stack.base();
        let mut end = stack.top();
        while base != NO_FRAME {
            let mut at = base + HEADER;
            while at < end {
                if stack.word(at + 1) as *const ReturnUser == user {
                    return true;
                }
                at += ENTRY_HEADER + stack.word(at) as usize;
            }
            end = base;
            base = stack.word(base + PREV_BASE) as usize;
        }
        false
    })
}

/// Hooked calls on this CPU's shadow stack now.
pub fn frames() -> usize {
    this_stack().frames.load(Ordering::Relaxed)
}

/// Calls this CPU's shadow stack had no room for.
pub fn overruns() -> u64 {
    this_stack().overruns.load(Ordering::Relaxed)
}

/// Whether the return hook stopped after a frame-pointer mismatch.
pub fn is_stopped() -> bool {
    STOPPED.load(Ordering::Relaxed)
}

/// Lets the return hook run again after it stopped.
pub fn restart() {
    STOPPED.store(false, Ordering::Relaxed);
}

/// Empties this CPU's shadow stack: its calls were abandoned (the test
/// framework resumed on a fresh stack after an expected panic).
pub fn reset() {
    let stack = this_stack();
    stack.top.store(0, Ordering::Relaxed);
    stack.base.store(NO_FRAME, Ordering::Relaxed);
    stack.frames.store(0, Ordering::Relaxed);
}

/// For tests: overwrites the frame pointer recorded for the innermost hooked
/// call, so its return finds a mismatch.
pub fn corrupt_innermost_frame_pointer() {
    let stack = this_stack();
    let base = stack.base();
    if base != NO_FRAME {
        stack.set_word(base + FP, stack.word(base + FP) ^ 0x10);
    }
}
