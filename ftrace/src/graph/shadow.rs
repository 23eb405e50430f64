//! The shadow return stack as a data structure: frames of hooked calls, each
//! holding the entries of the users that want that call's return.
//!
//! This module is the bookkeeping only, with no knowledge of registers,
//! trampolines or CPUs, so it builds and is unit tested on the host; the
//! return hook ([`crate::graph::retstack`]) drives it from the trampolines.
//!
//! # Layout
//!
//! A stack is an array of words. A *frame* is a [`FrameHeader`] followed by
//! the *entries* of the users that hooked the call, each an [`EntryHeader`]
//! (its data length and user word) followed by its data words:
//!
//! ```text
//!   base ->  FrameHeader { ret, func, fp, sp, info, prev_base }
//!            EntryHeader { len: 2, user: A }  data data
//!            EntryHeader { len: 0, user: B }
//!   top  ->  (free)
//! ```
//!
//! `prev_base` links each frame to the one below it, so walks start from
//! the innermost frame. A second user hooking the same call (same function,
//! same caller stack pointer) joins the innermost frame instead of pushing
//! another, so the call returns through the trampoline once.
//!
//! # Two-step hooks
//!
//! `ShadowStack::begin` reserves a frame (or joins one) and one entry with
//! room for `max_data` words and no user yet; [`PendingHook::commit`] fills
//! the entry in, and dropping the pending hook takes the reservation back.
//! So a user can decide about a call (and set state its return will undo)
//! only once the return is sure to come. Until then the pending hook's frame
//! stays the innermost (the nesting argument below), which is why the
//! pending hook keeps only its entry and reads the frame from the stack.
//!
//! The return handler walks the innermost frame with
//! [`ShadowStack::for_each_entry_of_innermost`], which trusts it: a call
//! cannot return while one of its entries is pending, so every entry there
//! is committed and the last one ends at the top.
//!
//! # Concurrency and invariants
//!
//! A stack belongs to one flow of control (a task) and the interrupts that
//! nest on it: no other CPU touches it. Interrupts nest strictly, so every
//! interrupt's frames sit above the frames of the code it interrupted and are
//! gone before that code resumes. No interrupt masking is needed:
//!
//! - a push first *reserves* its words by raising `top`, then writes them,
//!   then links the frame as the innermost (`base`); an interrupt arriving in
//!   between pushes above the reservation and pops again before the push
//!   resumes;
//! - a pop first unlinks the frame, then lowers `top`: until then an
//!   interrupt pushes above the dead frame and never overwrites words the pop
//!   still reads;
//! - an entry's words are its user's from commit until its frame is popped;
//! - a frame's `info` word (its depth, and whether it wants every register
//!   and counts toward depth) changes only while an entry of its own is
//!   pending, so by the hook of that entry: a new frame is written with its
//!   first user's needs, a joining user that counts the call sets
//!   `INFO_COUNTED` at once (and its drop clears it again), and one that
//!   wants every register sets `INFO_FULL` at commit. A frame's depth is
//!   read from the frame below when it is pushed: one more than that one's
//!   if that one counts. A returning call still counts while its return
//!   callbacks run (an interrupt then is deeper), as in Linux since 6.9,
//!   whose `curr_ret_depth` drops after them.
//!
//! Compiler fences keep those steps in program order; the counters are
//! atomics only to be shareable, and are read and written with plain
//! (relaxed) loads and stores (`overruns` with a relaxed `fetch_add`).
//!
//! A full stack counts an *overrun* and refuses the hook; the call then
//! runs unhooked.

use alloc::boxed::Box;
use core::cell::UnsafeCell;
use core::mem::size_of;
use core::sync::atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering};

/// The most data words one user may keep per call.
pub const MAX_DATA_WORDS: usize = 32;
/// The most users (entries) one frame can hold.
pub const MAX_ENTRIES: usize = 32;

const WORD: usize = size_of::<u64>();
const NO_FRAME: usize = usize::MAX;
/// `FrameHeader::info`: the frame wants the full-registers return trampoline.
const INFO_FULL: u64 = 1 << 32;
/// `FrameHeader::info`: the call counts toward the depth of the calls it
/// makes (a user that counts it hooked it, or is hooking it).
const INFO_COUNTED: u64 = 1 << 33;
/// `FrameHeader::info`: the call's depth, how many counted hooked calls
/// are below it.
const INFO_DEPTH: u64 = 0xffff_ffff;
/// A pending entry's user word when its hook joined a frame and set the
/// frame's `INFO_COUNTED` (for a drop to take back); 0 otherwise. Never a
/// user: users are pointers.
const PENDING_SET_COUNTED: u64 = 1;

/// Whether a hooked call counts toward the depth of the hooked calls it
/// makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// It counts: function-graph users (the depth `function_graph` prints
    /// and `max_graph_depth` limits, Linux's `curr_ret_depth`).
    Counted,
    /// It does not: a kretprobe's return hook, as in Linux, where
    /// kretprobes keep a return stack of their own.
    Uncounted,
}

/// What a user asks of the frames it hooks: the `info` bits it sets,
/// worked out once when the user is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameNeeds(u64);

impl FrameNeeds {
    /// A user that wants the return registers `path` gives, and whose calls
    /// count toward depth or not.
    pub const fn new(path: ReturnPath, depth: Depth) -> FrameNeeds {
        let full = match path {
            ReturnPath::Sparse => 0,
            ReturnPath::Full => INFO_FULL,
        };
        let counted = match depth {
            Depth::Counted => INFO_COUNTED,
            Depth::Uncounted => 0,
        };
        FrameNeeds(full | counted)
    }

    /// Whether every register is wanted at the return.
    pub const fn full_regs(self) -> bool {
        self.0 & INFO_FULL != 0
    }
}

/// The words that start every frame.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Where the call really returns to.
    pub ret: u64,
    /// The function called.
    pub func: u64,
    /// The frame pointer at entry (the caller's frame), checked at return.
    pub fp: u64,
    /// The stack pointer the caller has once the call returns, checked at
    /// return and used to recognise the same call.
    pub sp: u64,
    /// The call's depth, `INFO_FULL` and `INFO_COUNTED`.
    pub info: u64,
    /// The base of the frame below, or `NO_FRAME`.
    pub prev_base: u64,
}

/// The words that start every entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    /// Data words that follow.
    pub len: u64,
    /// The user's word (a pointer to its `ReturnUser`); 0 while pending.
    pub user: u64,
}

const HEADER: usize = size_of::<FrameHeader>() / WORD;
const ENTRY_HEADER: usize = size_of::<EntryHeader>() / WORD;
/// Where a header field is, in words from the frame's base.
const fn header_word(offset: usize) -> usize {
    offset / WORD
}
const FUNC_WORD: usize = header_word(core::mem::offset_of!(FrameHeader, func));
const SP_WORD: usize = header_word(core::mem::offset_of!(FrameHeader, sp));
const INFO_WORD: usize = header_word(core::mem::offset_of!(FrameHeader, info));

/// How many data words a hook reserves: at most [`MAX_DATA_WORDS`],
/// checked when the number is made (when its user is built or registered),
/// not on every traced call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataWords(usize);

impl DataWords {
    /// No data.
    pub const NONE: DataWords = DataWords(0);

    /// `words` data words, if that is at most [`MAX_DATA_WORDS`].
    pub const fn new(words: usize) -> Option<DataWords> {
        if words <= MAX_DATA_WORDS {
            Some(DataWords(words))
        } else {
            None
        }
    }

    /// The number of words.
    #[inline(always)]
    pub const fn get(self) -> usize {
        self.0
    }
}

/// Words a frame with one user keeping `data` words takes.
pub const fn frame_words(data: usize) -> usize {
    HEADER + ENTRY_HEADER + data
}

/// Why a return could not be hooked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookError {
    /// The shadow stack is full; counted as an overrun.
    Overrun,
    /// The return hook was stopped after a frame mismatch.
    Stopped,
    /// The registers are not a function-entry save.
    NotAtEntry,
    /// More than [`MAX_DATA_WORDS`] of data, or a frame with too many users.
    TooLarge,
    /// This CPU runs no task with tracing state (and so no shadow stack).
    NoStack,
    /// A hook of the same call is still pending: this one was asked from
    /// inside the entry callback making it, which would join a frame
    /// whose entry may yet be taken back or shortened under it.
    Pending,
}

/// A call to hook: what its frame records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    pub func: usize,
    pub ret: usize,
    pub fp: usize,
    /// The caller's stack pointer after the return.
    pub sp: usize,
}

/// A frame as walkers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Where it starts in the stack.
    pub base: usize,
    pub header: FrameHeader,
}

impl FrameHeader {
    /// The call's depth: how many counted hooked calls are below it.
    #[inline(always)]
    pub fn depth(&self) -> usize {
        (self.info & INFO_DEPTH) as usize
    }
}

impl Frame {
    /// The call's depth: how many counted hooked calls are below it.
    pub fn depth(&self) -> usize {
        self.header.depth()
    }

    /// Whether a user asked for the full-registers return trampoline.
    #[cfg(test)]
    pub fn wants_full(&self) -> bool {
        self.header.info & INFO_FULL != 0
    }
}

/// One entry of a frame: where its data starts, its length and user word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub data: usize,
    pub len: usize,
    pub user: u64,
}

/// One shadow stack. See the module documentation.
pub struct ShadowStack {
    words: Box<[UnsafeCell<u64>]>,
    /// The first free word.
    top: AtomicUsize,
    /// The base of the innermost frame, or `NO_FRAME`.
    base: AtomicUsize,
    overruns: AtomicU64,
}

// SAFETY: a stack is used by one flow of control and the interrupts nesting
// on it, under the reserve-write-link discipline of the module
// documentation; nothing else touches its words.
unsafe impl Sync for ShadowStack {}
// SAFETY: as above: moving it between threads moves that flow's stack.
unsafe impl Send for ShadowStack {}

impl ShadowStack {
    /// An empty stack of `words` words.
    pub fn new(words: usize) -> ShadowStack {
        ShadowStack {
            words: (0..words).map(|_| UnsafeCell::new(0)).collect(),
            top: AtomicUsize::new(0),
            base: AtomicUsize::new(NO_FRAME),
            overruns: AtomicU64::new(0),
        }
    }

    /// Its size in words.
    pub fn capacity(&self) -> usize {
        self.words.len()
    }

    /// The first word. Every index used below is under `top`, and `top` is
    /// never above the capacity (checked where it is raised), so the hot
    /// paths index through this pointer without a check each, and without
    /// reloading the slice after each compiler fence.
    #[inline(always)]
    fn words_ptr(&self) -> *mut u64 {
        UnsafeCell::raw_get(self.words.as_ptr())
    }

    /// Word `index`.
    ///
    /// # Safety
    /// `index` must be inside the stack (checked in debug builds): under
    /// the top, where the words of frames and entries are.
    #[inline(always)]
    unsafe fn word(&self, index: usize) -> u64 {
        debug_assert!(index < self.capacity());
        // SAFETY: inside the stack (the caller's promise); a plain read of
        // one word.
        unsafe { *self.words_ptr().add(index) }
    }

    /// Writes word `index`.
    ///
    /// # Safety
    /// As for [`word`](Self::word), and the word must be the caller's: one
    /// it reserved (interrupts nesting on this stack push above it).
    #[inline(always)]
    unsafe fn set_word(&self, index: usize, value: u64) {
        debug_assert!(index < self.capacity());
        // SAFETY: as for `word`; the caller's word.
        unsafe { *self.words_ptr().add(index) = value }
    }

    /// The header of the frame at `base`.
    ///
    /// # Safety
    /// `base..base + HEADER` must be inside the stack (checked in debug
    /// builds).
    #[inline(always)]
    unsafe fn header_at(&self, base: usize) -> FrameHeader {
        debug_assert!(base + HEADER <= self.capacity());
        // SAFETY: inside the stack (the caller's promise); `FrameHeader` is
        // six `u64`s, `repr(C)`.
        unsafe { (self.words_ptr().add(base) as *const FrameHeader).read() }
    }

    /// The header of the frame at `base`, in place.
    ///
    /// # Safety
    /// `base` is a frame's, under the top, and nothing may write its header
    /// while the reference lives (the return handler's frame: its header is
    /// not written again before the pop).
    #[inline(always)]
    pub unsafe fn header_in_place(&self, base: usize) -> &FrameHeader {
        debug_assert!(base + HEADER <= self.capacity());
        // SAFETY: inside the stack, unwritten while borrowed (the caller's
        // promise); `FrameHeader` is six `u64`s, `repr(C)`, word aligned.
        unsafe { &*(self.words_ptr().add(base) as *const FrameHeader) }
    }

    /// Raises `top` by `len` words and answers where they start; the fence
    /// keeps the writes into them after the reservation.
    #[inline(always)]
    fn reserve(&self, len: usize) -> usize {
        let at = self.top.load(Ordering::Relaxed);
        self.top.store(at + len, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        at
    }

    /// Hooked calls on the stack now. It walks the frames with plain
    /// loads: from another CPU, read it only while the task pushes and pops
    /// nothing (its tracing has settled, as the stress run's final count
    /// does).
    pub fn frames(&self) -> usize {
        self.frames_iter().count()
    }

    /// Calls the stack had no room for so far.
    #[inline]
    pub fn overruns(&self) -> u64 {
        self.overruns.load(Ordering::Relaxed)
    }

    /// Words in use.
    #[inline]
    pub fn used(&self) -> usize {
        self.top.load(Ordering::Relaxed)
    }

    /// The innermost frame.
    #[inline]
    pub fn innermost(&self) -> Option<Frame> {
        // SAFETY: `base` is the innermost frame's, linked only once its header
        // was written below the top.
        self.innermost_base().map(|base| Frame { base, header: unsafe { self.header_at(base) } })
    }

    /// Where the innermost frame starts, if there is one.
    #[inline(always)]
    pub fn innermost_base(&self) -> Option<usize> {
        let base = self.base.load(Ordering::Relaxed);
        (base != NO_FRAME).then_some(base)
    }

    /// The frame below `frame`.
    pub fn below(&self, frame: &Frame) -> Option<Frame> {
        let base = frame.header.prev_base as usize;
        // `frame` is the caller's: a base outside the stack, or not below
        // the frame (frames grow upwards), ends the walk, which therefore
        // always ends.
        let inside = base < frame.base && base + HEADER <= self.capacity();
        // SAFETY: inside the stack, just checked.
        (base != NO_FRAME && inside).then(|| Frame { base, header: unsafe { self.header_at(base) } })
    }

    /// Every frame, innermost first.
    pub fn frames_iter(&self) -> impl Iterator<Item = Frame> + '_ {
        core::iter::successors(self.innermost(), |frame| self.below(frame))
    }

    /// The entries of the innermost frame `frame` (up to `end`, the top when
    /// it was read), in the order their users hooked the call.
    #[inline]
    pub fn entries(&self, frame: &Frame, end: usize) -> impl Iterator<Item = Entry> + '_ {
        // `end` and `frame` are the caller's: the walk stays inside the stack.
        let end = end.min(self.capacity());
        let mut at = frame.base.min(end) + HEADER;
        core::iter::from_fn(move || {
            if at + ENTRY_HEADER > end {
                return None;
            }
            // SAFETY: `at + ENTRY_HEADER <= end`, inside the stack.
            let (len, user) = unsafe { (self.word(at) as usize, self.word(at + 1)) };
            let next = at + ENTRY_HEADER + len;
            // An entry reaching past `end` is one being shortened right now
            // (see `commit_in_place`): the walk stops at the top. (A length
            // near `usize::MAX` wraps `next` below `at`: stop too.)
            if next > end || next < at {
                return None;
            }
            let entry = Entry { data: at + ENTRY_HEADER, len, user };
            at = next;
            Some(entry)
        })
    }

    /// Calls `f` with the user and the data words of every entry of the
    /// innermost frame, the one at `base`, in hook order: the return
    /// handler's walk. It trusts the frame, so it is tighter than
    /// [`entries`](Self::entries): a frame has at least one entry, and its
    /// last one ends at the top. Most frames have one entry: that is told
    /// before the call, from the first entry's length and the top, so
    /// nothing is read again after it; frames with several go through a
    /// loop out of line.
    ///
    /// # Safety
    /// `base` is the innermost frame's, all its entries are committed and
    /// nothing lies above it. `f` leaves the stack's top as it found it
    /// (whatever it hooks returns before it does).
    #[inline(always)]
    pub unsafe fn for_each_entry_of_innermost(&self, base: usize, mut f: impl FnMut(u64, &mut [u64])) {
        let first = base + HEADER;
        // SAFETY: a committed entry under the top (the caller's promise).
        let end = first + ENTRY_HEADER + unsafe { self.word(first) } as usize;
        if end == self.top() {
            // SAFETY: the caller's promise, passed on.
            unsafe { self.call_entry(first, &mut f) };
        } else {
            // SAFETY: the caller's promise, passed on.
            unsafe { self.for_each_entry_from(first, f) };
        }
    }

    /// [`for_each_entry_of_innermost`](Self::for_each_entry_of_innermost)'s walk for frames with
    /// several users (the function-graph tracer and a probe on one call).
    ///
    /// # Safety
    /// As for that walk; `at` starts a committed entry of the innermost
    /// frame.
    #[inline(never)]
    unsafe fn for_each_entry_from(&self, mut at: usize, mut f: impl FnMut(u64, &mut [u64])) {
        let end = self.top();
        while at < end {
            // SAFETY: the caller's promise, passed on.
            let len = unsafe { self.call_entry(at, &mut f) };
            at += ENTRY_HEADER + len;
        }
    }

    /// Calls `f` with the user and the data of the committed entry at `at`,
    /// and answers its length.
    ///
    /// # Safety
    /// `at` starts a committed entry under the top, whose words nothing
    /// else uses until its frame is popped.
    #[inline(always)]
    unsafe fn call_entry(&self, at: usize, f: &mut impl FnMut(u64, &mut [u64])) -> usize {
        debug_assert!(at + ENTRY_HEADER <= self.top() && self.top() <= self.capacity());
        // SAFETY: a committed entry under the top (the caller's promise).
        let (len, user) = unsafe { (self.word(at) as usize, self.word(at + 1)) };
        // SAFETY: the entry's words, under the top; nothing else uses them
        // until the frame is popped.
        f(user, unsafe { core::slice::from_raw_parts_mut(self.words_ptr().add(at + ENTRY_HEADER), len) });
        len
    }

    /// The current top: where the innermost frame's entries end.
    #[inline]
    pub fn top(&self) -> usize {
        self.top.load(Ordering::Relaxed)
    }

    /// An entry's data words.
    ///
    /// # Safety
    /// The entry must be one [`entries`](Self::entries) gave for a frame
    /// still on the stack, and nothing else may use its words while the
    /// slice lives (they are its user's).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn data(&self, entry: &Entry) -> &mut [u64] {
        debug_assert!(entry.data + entry.len <= self.capacity());
        // SAFETY: `entries` gave only entries under the top, inside the
        // stack; the caller guarantees exclusive use of these words.
        unsafe { core::slice::from_raw_parts_mut(self.words_ptr().add(entry.data), entry.len) }
    }

    /// Reserves a frame for `call` (or joins the innermost frame when it is
    /// the same call) and one entry with room for `max_data` words, for a
    /// user whose needs are `needs`: a new frame has their bits from the
    /// start (a joined one gets them at the commit).
    ///
    /// The traced path: one capacity check, then the header and the
    /// placeholder entry go in as one block of words.
    ///
    /// Crate-private, as are [`pop_innermost`](Self::pop_innermost) and [`reset`](Self::reset):
    /// a task's stack is walked by the return trampoline, which trusts its
    /// structure, so only the return hook (`crate::graph::retstack`) and
    /// `TaskTrace::reset` (an abandoned flow) change it; `corrupt_innermost`
    /// exists for tests.
    #[inline]
    pub(crate) fn begin(&self, call: &CallSite, max_data: DataWords, needs: FrameNeeds) -> Result<PendingHook<'_>, HookError> {
        let max_data = max_data.get();
        let top = self.top();
        let below = self.base.load(Ordering::Relaxed);
        // Another user hooked this call first: join its frame.
        // SAFETY: `below` is the innermost frame's base, under the top.
        if below != NO_FRAME && unsafe { self.is_frame_of(below, call) } {
            // SAFETY: as just said.
            return self.join(Frame { base: below, header: unsafe { self.header_at(below) } }, top, max_data, needs);
        }
        let len = HEADER + ENTRY_HEADER + max_data;
        if len > self.capacity() - top {
            self.overruns.fetch_add(1, Ordering::Relaxed);
            return Err(HookError::Overrun);
        }
        let depth = if below == NO_FRAME {
            0
        } else {
            // SAFETY: `below` is the innermost frame's base, under the top.
            let info = unsafe { self.word(below + INFO_WORD) };
            // One deeper than the call below if that one counts.
            (info & INFO_DEPTH) + (info & INFO_COUNTED) / INFO_COUNTED
        };
        let base = self.reserve(len);
        let words = [
            call.ret as u64,
            call.func as u64,
            call.fp as u64,
            call.sp as u64,
            depth | needs.0,
            below as u64,
            // The entry: room for `max_data` words, no user yet, so walkers
            // can step over it before it is committed.
            max_data as u64,
            0,
        ];
        // SAFETY: `base + len` is within the stack (checked above), and the
        // words were reserved for this frame; `HEADER + ENTRY_HEADER` words.
        unsafe { (self.words_ptr().add(base) as *mut [u64; HEADER + ENTRY_HEADER]).write(words) };
        compiler_fence(Ordering::SeqCst);
        self.base.store(base, Ordering::Relaxed);
        Ok(PendingHook { stack: self, entry: base + HEADER })
    }

    /// Whether the frame at `base` is `call`'s (the same function, the same
    /// stack).
    ///
    /// # Safety
    /// `base` is a frame's, under the top.
    #[inline(always)]
    unsafe fn is_frame_of(&self, base: usize, call: &CallSite) -> bool {
        // SAFETY: the caller's promise.
        unsafe { self.word(base + FUNC_WORD) == call.func as u64 && self.word(base + SP_WORD) == call.sp as u64 }
    }

    /// [`begin`](Self::begin) for a second user of the innermost frame. A
    /// user that counts the call makes it count from now on, as a new frame
    /// does (until it is committed, an interrupt's calls are deeper); its
    /// pending entry remembers that, for a drop to take back.
    #[inline(never)]
    fn join(&self, frame: Frame, top: usize, max_data: usize, needs: FrameNeeds) -> Result<PendingHook<'_>, HookError> {
        let needed = ENTRY_HEADER + max_data;
        if needed > self.capacity() - top {
            self.overruns.fetch_add(1, Ordering::Relaxed);
            return Err(HookError::Overrun);
        }
        let mut entries = 0;
        for entry in self.entries(&frame, top) {
            if entry.user == 0 || entry.user == PENDING_SET_COUNTED {
                return Err(HookError::Pending);
            }
            entries += 1;
        }
        if entries >= MAX_ENTRIES {
            return Err(HookError::TooLarge);
        }
        let entry = self.reserve(needed);
        let sets_counted = needs.0 & !frame.header.info & INFO_COUNTED != 0;
        // SAFETY: the two words were just reserved (room checked above);
        // the frame's header is under them.
        unsafe {
            self.set_word(entry, max_data as u64);
            self.set_word(entry + 1, if sets_counted { PENDING_SET_COUNTED } else { 0 });
            if sets_counted {
                self.set_word(frame.base + INFO_WORD, frame.header.info | INFO_COUNTED);
            }
        }
        Ok(PendingHook { stack: self, entry })
    }

    /// Pops the innermost frame, the one at `base` whose header is
    /// `header`, after its return callbacks ran, and answers its return
    /// address: unlinks it first, lowers the top last. (The return handler
    /// passes the header in place: its callbacks get only their data words,
    /// so it is as the entry wrote it.)
    ///
    /// # Safety
    /// `base` is the innermost frame's, and `header` its header (in place,
    /// [`header_in_place`](Self::header_in_place), or a copy).
    #[inline(always)]
    pub(crate) unsafe fn pop_innermost(&self, base: usize, header: &FrameHeader) -> u64 {
        debug_assert_eq!(self.base.load(Ordering::Relaxed), base);
        let (ret, below) = (header.ret, header.prev_base);
        self.base.store(below as usize, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        self.top.store(base, Ordering::Relaxed);
        ret
    }

    /// The real return address of the hooked call whose frame recorded
    /// `caller_fp`, for backtraces that find a return trampoline.
    /// Frames whose return address `through` says is not a real one (a
    /// return trampoline's: a call its hooked caller made as a tail call,
    /// which shares that caller's frame pointer) are stepped over.
    pub fn return_address_for(&self, caller_fp: usize, through: impl Fn(u64) -> bool) -> Option<usize> {
        self.frames_iter()
            .find(|frame| frame.header.fp == caller_fp as u64 && !through(frame.header.ret))
            .map(|frame| frame.header.ret as usize)
    }

    /// Empties the stack (its calls were abandoned).
    pub(crate) fn reset(&self) {
        self.top.store(0, Ordering::Relaxed);
        self.base.store(NO_FRAME, Ordering::Relaxed);
    }

    /// For tests: changes what the innermost frame recorded, so its return
    /// finds a mismatch.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn corrupt_innermost(&self, field: Recorded) {
        if let Some(frame) = self.innermost() {
            // SAFETY: the innermost frame's header, under the top; a test
            // corrupts it on purpose, as if the stack had been overwritten.
            unsafe {
                match field {
                    Recorded::FramePointer => {
                        self.set_word(frame.base + header_word(core::mem::offset_of!(FrameHeader, fp)), frame.header.fp ^ 0x10)
                    }
                    Recorded::StackPointer => self.set_word(frame.base + SP_WORD, frame.header.sp ^ 0x10),
                    // The function's own first instruction: text, but after
                    // no call (its ops literal is in front of it).
                    Recorded::ReturnAddress => {
                        self.set_word(frame.base + header_word(core::mem::offset_of!(FrameHeader, ret)), frame.header.func)
                    }
                }
            }
        }
    }
}

/// What a frame recorded at entry that its return checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    FramePointer,
    StackPointer,
    ReturnAddress,
}

/// What committing a pending hook asks of the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The call's depth.
    pub depth: usize,
    /// Whether the return address must now lead to a return trampoline,
    /// and to which one: a new frame's, or the full-registers one when a
    /// joining user is the first to want every register.
    pub redirect: Option<ReturnPath>,
}

/// Which return trampoline a frame returns through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnPath {
    /// The return registers only.
    Sparse,
    /// Every register.
    Full,
}

/// A hook `ShadowStack::begin` started: the frame (new or joined) and one
/// reserved entry with no user yet. Commit it or drop it before the entry
/// callback that began it returns.
///
/// It keeps only its stack and its entry: until it is committed or
/// dropped, its frame is the innermost (interrupts push and pop frames of
/// their own above it) and only this hook changes the frame's `info` word
/// and the entry's length word, which holds the room reserved. The rest is
/// read from the stack when needed, which keeps little alive across the
/// entry callback (two words, returned in registers).
#[must_use = "dropping a pending hook takes it back"]
pub struct PendingHook<'a> {
    stack: &'a ShadowStack,
    entry: usize,
}

impl PendingHook<'_> {
    /// The call's depth: how many counted hooked calls are below it.
    #[inline]
    pub fn depth(&self) -> usize {
        (self.info() & INFO_DEPTH) as usize
    }

    /// The frame's base: the innermost frame's.
    #[inline(always)]
    fn base(&self) -> usize {
        self.stack.base.load(Ordering::Relaxed)
    }

    /// The words reserved for the entry's data: until the commit, its
    /// length word.
    #[inline(always)]
    fn capacity(&self) -> usize {
        // SAFETY: the entry's header, reserved by this hook, under the top.
        unsafe { self.stack.word(self.entry) as usize }
    }

    /// Whether the hook pushed its frame (rather than joined one): its
    /// entry is then the frame's first.
    #[inline(always)]
    fn is_new_frame(&self) -> bool {
        self.entry == self.base() + HEADER
    }

    /// The frame's `info` word.
    #[inline(always)]
    fn info(&self) -> u64 {
        // SAFETY: the innermost frame's header, under the top.
        unsafe { self.stack.word(self.base() + INFO_WORD) }
    }

    /// Sets `bits` in the frame's `info` word.
    #[inline(always)]
    fn set_info_bits(&self, bits: u64) {
        let base = self.base();
        // SAFETY: the frame's header (new, or the innermost one this hook
        // joined): below the entry, under the top.
        unsafe { self.stack.set_word(base + INFO_WORD, self.info() | bits) };
    }

    /// Clears `bits` in the frame's `info` word.
    #[inline(always)]
    fn clear_info_bits(&self, bits: u64) {
        let base = self.base();
        // SAFETY: as in `set_info_bits`.
        unsafe { self.stack.set_word(base + INFO_WORD, self.info() & !bits) };
    }

    /// The words reserved for the entry's data, to fill in place before
    /// [`commit_in_place`](Self::commit_in_place). Until the commit no
    /// walker reads them (the entry has no user).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u64] {
        // SAFETY: the words were reserved for this hook (inside the stack:
        // `begin` checked), and `&mut self` keeps the slice unique.
        unsafe { core::slice::from_raw_parts_mut(self.stack.words_ptr().add(self.entry + ENTRY_HEADER), self.capacity()) }
    }

    /// Fills the entry in for `user` with `data` (at most the words
    /// reserved; more is `TooLarge` and takes the hook back). `needs`: what
    /// this user asks of the frame, as given to `begin`.
    #[inline]
    pub fn commit(mut self, user: u64, data: &[u64], needs: FrameNeeds) -> Result<Committed, HookError> {
        if data.len() > self.capacity() {
            return Err(HookError::TooLarge);
        }
        self.data_mut()[..data.len()].copy_from_slice(data);
        self.commit_in_place(user, data.len(), needs)
    }

    /// [`commit`](Self::commit) for data already written through
    /// [`data_mut`](Self::data_mut): its first `len` words.
    #[inline]
    pub fn commit_in_place(self, user: u64, len: usize, needs: FrameNeeds) -> Result<Committed, HookError> {
        let capacity = self.capacity();
        if len > capacity {
            return Err(HookError::TooLarge);
        }
        let new_frame = self.is_new_frame();
        let this = core::mem::ManuallyDrop::new(self);
        let stack = this.stack;
        // SAFETY: the entry's words were reserved for this hook.
        unsafe { stack.set_word(this.entry + 1, user) };
        // Give back the words not used, then shorten the entry: a walker
        // that reads the old length in between stops at the top. (All
        // used: the top and the length are already right, since whatever
        // interrupted since the reservation popped what it pushed.)
        if len < capacity {
            compiler_fence(Ordering::SeqCst);
            stack.top.store(this.entry + ENTRY_HEADER + len, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            // SAFETY: as above.
            unsafe { stack.set_word(this.entry, len as u64) };
        }

        let redirect = if new_frame {
            // The first user of the call: its return is redirected now, to
            // the trampoline its needs ask for (in the frame since `begin`:
            // the same needs, the caller's promise).
            debug_assert_eq!(this.info() & INFO_FULL, needs.0 & INFO_FULL, "the needs given to begin");
            Some(if needs.full_regs() { ReturnPath::Full } else { ReturnPath::Sparse })
        } else if needs.full_regs() && this.info() & INFO_FULL == 0 {
            // A later user is the first to want every register: to the
            // full trampoline instead. (Counting was settled at `begin`.)
            this.set_info_bits(INFO_FULL);
            Some(ReturnPath::Full)
        } else {
            None
        };
        let depth = this.depth();
        Ok(Committed { depth, redirect })
    }
}

impl Drop for PendingHook<'_> {
    /// Takes the hook back: the reserved entry, and the frame if it was new.
    #[inline]
    fn drop(&mut self) {
        let stack = self.stack;
        if self.is_new_frame() {
            let base = self.base();
            // SAFETY: the frame this hook pushed, still under the top.
            let below = unsafe { stack.header_at(base) }.prev_base;
            stack.base.store(below as usize, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            stack.top.store(base, Ordering::Relaxed);
        } else {
            // SAFETY: the entry's user word, reserved by this hook.
            if unsafe { stack.word(self.entry + 1) } == PENDING_SET_COUNTED {
                self.clear_info_bits(INFO_COUNTED);
            }
            compiler_fence(Ordering::SeqCst);
            stack.top.store(self.entry, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// A function-graph user: sparse registers, counts toward depth.
    const GRAPH: FrameNeeds = FrameNeeds::new(ReturnPath::Sparse, Depth::Counted);
    const FULL: FrameNeeds = FrameNeeds::new(ReturnPath::Full, Depth::Counted);
    /// A kretprobe's: does not count toward depth.
    const KRETPROBE: FrameNeeds = FrameNeeds::new(ReturnPath::Sparse, Depth::Uncounted);

    fn words(n: usize) -> DataWords {
        DataWords::new(n).unwrap()
    }

    fn call(func: usize, sp: usize) -> CallSite {
        CallSite { func, ret: func + 0x100, fp: sp + 0x40, sp }
    }

    fn users(stack: &ShadowStack, frame: &Frame) -> Vec<(u64, Vec<u64>)> {
        stack
            .entries(frame, stack.top())
            // SAFETY: the test owns the stack; nothing else uses the words.
            .map(|entry| (entry.user, unsafe { stack.data(&entry) }.to_vec()))
            .collect()
    }

    #[test]
    fn push_commit_and_pop_round_trip() {
        let stack = ShadowStack::new(256);
        let pending = stack.begin(&call(0x1000, 0x8000), words(4), GRAPH).unwrap();
        assert_eq!(pending.depth(), 0);
        let committed = pending.commit(0xa, &[1, 2], GRAPH).unwrap();
        assert_eq!(committed, Committed { depth: 0, redirect: Some(ReturnPath::Sparse) });
        let frame = stack.innermost().unwrap();
        assert_eq!(frame.header.ret, 0x1100);
        assert_eq!(users(&stack, &frame), alloc::vec![(0xa, alloc::vec![1, 2])]);
        assert_eq!(stack.used(), HEADER + ENTRY_HEADER + 2, "unused reserved words given back");
        // SAFETY: the innermost frame, nothing above.
        unsafe { stack.pop_innermost(frame.base, &frame.header) };
        assert_eq!((stack.frames(), stack.used()), (0, 0));
        assert!(stack.innermost().is_none());
    }

    #[test]
    fn a_second_user_of_the_same_call_joins_its_frame() {
        let stack = ShadowStack::new(256);
        stack.begin(&call(0x1000, 0x8000), words(1), GRAPH).unwrap().commit(0xa, &[7], GRAPH).unwrap();
        let joined = stack.begin(&call(0x1000, 0x8000), words(0), FULL).unwrap().commit(0xb, &[], FULL).unwrap();
        assert_eq!(joined, Committed { depth: 0, redirect: Some(ReturnPath::Full) }, "upgrade to full registers");
        let again = stack.begin(&call(0x1000, 0x8000), words(0), GRAPH).unwrap().commit(0xc, &[], GRAPH).unwrap();
        assert_eq!(again.redirect, None, "already redirected to the full trampoline");
        assert_eq!(stack.frames(), 1);
        let frame = stack.innermost().unwrap();
        assert!(frame.wants_full());
        let users: Vec<u64> = users(&stack, &frame).into_iter().map(|(user, _)| user).collect();
        assert_eq!(users, [0xa, 0xb, 0xc], "hook order");
        // A different call (another function, or the same one at another
        // stack depth) gets a frame of its own, one deeper.
        let nested = stack.begin(&call(0x1000, 0x7000), words(0), GRAPH).unwrap().commit(0xa, &[], GRAPH).unwrap();
        assert_eq!(nested.depth, 1);
        assert_eq!(stack.frames(), 2);
    }

    #[test]
    fn a_call_whose_hook_is_pending_cannot_be_joined() {
        let stack = ShadowStack::new(256);
        for first_needs in [GRAPH, KRETPROBE] {
            // From inside the entry callback of a pending hook (its frame new,
            // or joined by a user that made the call count).
            let outer = stack.begin(&call(0x1000, 0x8000), words(2), KRETPROBE).unwrap().commit(0xa, &[], KRETPROBE).unwrap();
            let pending = stack.begin(&call(0x2000, 0x7000), words(2), first_needs).unwrap();
            let joining = stack.begin(&call(0x2000, 0x7000), words(0), FULL).map(|_| ());
            assert_eq!(joining, Err(HookError::Pending));
            pending.commit(0xb, &[1], first_needs).unwrap();
            let joined = stack.begin(&call(0x2000, 0x7000), words(0), FULL).unwrap().commit(0xc, &[], FULL).unwrap();
            assert_eq!(joined.redirect, Some(ReturnPath::Full), "once committed, it can");
            let users: Vec<u64> = users(&stack, &stack.innermost().unwrap()).into_iter().map(|(user, _)| user).collect();
            assert_eq!(users, [0xb, 0xc]);
            assert_eq!(outer.depth, 0);
            stack.reset();
        }
        let joined_pending = {
            stack.begin(&call(0x1000, 0x8000), words(0), KRETPROBE).unwrap().commit(0xa, &[], KRETPROBE).unwrap();
            stack.begin(&call(0x1000, 0x8000), words(0), GRAPH).unwrap()
        };
        assert_eq!(
            stack.begin(&call(0x1000, 0x8000), words(0), GRAPH).map(|_| ()),
            Err(HookError::Pending),
            "a joined entry pending"
        );
        drop(joined_pending);
    }

    #[test]
    fn only_counted_calls_count_toward_depth() {
        let stack = ShadowStack::new(256);
        let outer = stack.begin(&call(0x1000, 0x8000), words(0), KRETPROBE).unwrap().commit(0xa, &[], KRETPROBE).unwrap();
        assert_eq!(outer.depth, 0);
        let middle = stack.begin(&call(0x2000, 0x7000), words(0), KRETPROBE).unwrap().commit(0xb, &[], KRETPROBE).unwrap();
        assert_eq!(middle.depth, 0, "a kretprobe's call below does not count");
        // A graph user joining the middle call makes it count for the calls
        // it makes; a graph user that takes its hook back does not.
        let joining = stack.begin(&call(0x2000, 0x7000), words(0), GRAPH).unwrap();
        let irq = stack.begin(&call(0x3000, 0x6000), words(0), GRAPH).unwrap();
        assert_eq!(irq.depth(), 1, "an interrupt during the join sees the call counted");
        drop(irq);
        drop(joining);
        let inner = stack.begin(&call(0x3000, 0x6000), words(0), GRAPH).unwrap();
        assert_eq!(inner.depth(), 0, "taken back: not counted again");
        drop(inner);
        let joined = stack.begin(&call(0x2000, 0x7000), words(0), GRAPH).unwrap().commit(0xc, &[], GRAPH).unwrap();
        assert_eq!(joined.depth, 0);
        let inner = stack.begin(&call(0x3000, 0x6000), words(0), GRAPH).unwrap().commit(0xd, &[], GRAPH).unwrap();
        assert_eq!(inner.depth, 1, "the joined call counts");
        let innermost = stack.begin(&call(0x4000, 0x5000), words(0), GRAPH).unwrap();
        assert_eq!(innermost.depth(), 2);
        drop(innermost);
        assert_eq!(stack.frames(), 3, "every hooked call, counted or not");
    }

    #[test]
    fn the_return_walk_sees_every_entry_of_the_innermost_frame() {
        let stack = ShadowStack::new(256);
        stack.begin(&call(0x1000, 0x8000), words(1), GRAPH).unwrap().commit(0xa, &[1], GRAPH).unwrap();
        stack.begin(&call(0x2000, 0x7000), words(2), GRAPH).unwrap().commit(0xb, &[2, 3], GRAPH).unwrap();
        stack.begin(&call(0x2000, 0x7000), words(0), GRAPH).unwrap().commit(0xc, &[], GRAPH).unwrap();
        stack.begin(&call(0x2000, 0x7000), words(1), GRAPH).unwrap().commit(0xd, &[4], GRAPH).unwrap();
        let mut seen = Vec::new();
        let base = stack.innermost().unwrap().base;
        // SAFETY: the innermost frame, all committed, nothing above it.
        unsafe { stack.for_each_entry_of_innermost(base, |user, data| seen.push((user, data.to_vec()))) };
        assert_eq!(
            seen,
            [(0xb, alloc::vec![2, 3]), (0xc, alloc::vec![]), (0xd, alloc::vec![4])],
            "hook order, the outer frame's left alone"
        );
    }

    #[test]
    fn pop_innermost_answers_the_return_address() {
        let stack = ShadowStack::new(256);
        stack.begin(&call(0x1000, 0x8000), words(1), GRAPH).unwrap().commit(0xa, &[7], GRAPH).unwrap();
        stack.begin(&call(0x2000, 0x7000), words(0), GRAPH).unwrap().commit(0xb, &[], GRAPH).unwrap();
        let pop = |stack: &ShadowStack| {
            let base = stack.innermost_base().unwrap();
            // SAFETY: the innermost frame and its header, nothing above.
            unsafe { stack.pop_innermost(base, stack.header_in_place(base)) }
        };
        assert_eq!(pop(&stack), 0x2100, "the inner call's");
        assert_eq!((stack.frames(), stack.used()), (1, HEADER + ENTRY_HEADER + 1));
        assert_eq!(pop(&stack), 0x1100);
        assert_eq!((stack.frames(), stack.used()), (0, 0));
        assert!(stack.innermost().is_none());
    }

    #[test]
    fn dropping_a_pending_hook_takes_it_back() {
        let stack = ShadowStack::new(256);
        stack.begin(&call(0x1000, 0x8000), words(2), GRAPH).unwrap().commit(0xa, &[5, 6], GRAPH).unwrap();
        let used = stack.used();
        drop(stack.begin(&call(0x1000, 0x8000), words(3), GRAPH).unwrap());
        assert_eq!(stack.used(), used, "joined entry taken back");
        drop(stack.begin(&call(0x2000, 0x7000), words(3), GRAPH).unwrap());
        assert_eq!((stack.used(), stack.frames()), (used, 1), "new frame taken back");
        let frame = stack.innermost().unwrap();
        assert_eq!(frame.header.func, 0x1000);
        assert_eq!(users(&stack, &frame), alloc::vec![(0xa, alloc::vec![5, 6])]);
    }

    #[test]
    fn too_much_data_is_refused_and_taken_back() {
        let stack = ShadowStack::new(256);
        assert_eq!(DataWords::new(MAX_DATA_WORDS + 1), None, "more than a hook may reserve");
        assert_eq!(DataWords::new(MAX_DATA_WORDS).map(DataWords::get), Some(MAX_DATA_WORDS));
        let pending = stack.begin(&call(1, 2), words(1), GRAPH).unwrap();
        assert_eq!(pending.commit(0xa, &[1, 2], GRAPH), Err(HookError::TooLarge));
        assert_eq!((stack.used(), stack.frames()), (0, 0));
    }

    #[test]
    fn a_full_stack_counts_overruns() {
        let stack = ShadowStack::new(HEADER + ENTRY_HEADER + 1);
        stack.begin(&call(1, 100), words(1), GRAPH).unwrap().commit(0xa, &[9], GRAPH).unwrap();
        assert_eq!(stack.begin(&call(2, 90), words(0), GRAPH).err(), Some(HookError::Overrun));
        assert_eq!(stack.begin(&call(1, 100), words(0), GRAPH).err(), Some(HookError::Overrun), "no room to join either");
        assert_eq!(stack.overruns(), 2);
        assert_eq!(stack.frames(), 1);
    }

    #[test]
    fn an_interrupt_between_reservation_and_commit_nests_cleanly() {
        // The task reserves; an "interrupt" hooks and returns a call of its
        // own above the reservation; the task then commits. Both frames come
        // out intact.
        let stack = ShadowStack::new(256);
        let pending = stack.begin(&call(0x1000, 0x8000), words(4), GRAPH).unwrap();
        {
            let irq = stack.begin(&call(0x3000, 0x7000), words(1), GRAPH).unwrap();
            assert_eq!(irq.depth(), 1, "the interrupt sees the task's call below it");
            irq.commit(0xb, &[42], GRAPH).unwrap();
            assert_eq!(stack.frames(), 2, "the interrupt's call is above the task's");
            let frame = stack.innermost().unwrap();
            assert_eq!(users(&stack, &frame), alloc::vec![(0xb, alloc::vec![42])]);
            // SAFETY: the innermost frame, nothing above.
            unsafe { stack.pop_innermost(frame.base, &frame.header) };
        }
        pending.commit(0xa, &[1], GRAPH).unwrap();
        let frame = stack.innermost().unwrap();
        assert_eq!(frame.header.func, 0x1000);
        assert_eq!(users(&stack, &frame), alloc::vec![(0xa, alloc::vec![1])]);
        assert_eq!(stack.frames(), 1);
    }

    #[test]
    fn walks_find_return_addresses() {
        let stack = ShadowStack::new(256);
        stack.begin(&call(0x1000, 0x8000), words(0), GRAPH).unwrap().commit(0xa, &[], GRAPH).unwrap();
        stack.begin(&call(0x2000, 0x7000), words(0), GRAPH).unwrap().commit(0xb, &[], GRAPH).unwrap();
        let none = |_: u64| false;
        assert_eq!(stack.return_address_for(0x8040, none), Some(0x1100));
        assert_eq!(stack.return_address_for(0x7040, none), Some(0x2100));
        assert_eq!(stack.return_address_for(0x1234, none), None);
        // 0x2000 tail-calls 0x3000: the same frame pointer and stack, and
        // the trampoline (0xdead) as its return address; a walk steps over it.
        let tail = CallSite { func: 0x3000, ret: 0xdead, fp: 0x7040, sp: 0x7000 };
        stack.begin(&tail, words(0), GRAPH).unwrap().commit(0xc, &[], GRAPH).unwrap();
        assert_eq!(stack.return_address_for(0x7040, none), Some(0xdead));
        assert_eq!(stack.return_address_for(0x7040, |ret| ret == 0xdead), Some(0x2100));
        let funcs: Vec<u64> = stack.frames_iter().map(|f| f.header.func).collect();
        assert_eq!(funcs, [0x3000, 0x2000, 0x1000], "innermost first");
        stack.corrupt_innermost(Recorded::FramePointer);
        assert_eq!(stack.innermost().unwrap().header.fp, 0x7040 ^ 0x10);
        stack.corrupt_innermost(Recorded::StackPointer);
        assert_eq!(stack.innermost().unwrap().header.sp, 0x7000 ^ 0x10);
        stack.reset();
        assert!(stack.innermost().is_none());
        assert_eq!(stack.frames(), 0);
    }
}
