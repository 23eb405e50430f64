//! The contract between the tracing trampolines and generic tracing code:
//! [`FtraceRegs`], the registers a trampoline saved, and [`SiteCall`], what a
//! patched site calls.
//!
//! # FtraceRegs: sparse or full
//!
//! `FtraceRegs` wraps the architecture's [`PtRegs`], but a trampoline fills
//! only part of it, and says which part in [`Saved`]:
//!
//! - [`Saved::EntryArgs`] (the `ftrace_caller` fast path): what the calling
//!   convention makes meaningful at a function's entry: argument registers,
//!   the return-value register, frame pointer, stack pointer, return address
//!   and instruction pointer. Nothing else is stored, so reading anything else
//!   would read stale stack memory: every accessor refuses to.
//! - [`Saved::EntryFull`] (`ftrace_regs_caller`, for `SAVE_REGS` ops): the
//!   whole `PtRegs`, as exception entry saves it; [`FtraceRegs::regs`] hands it
//!   out.
//! - [`Saved::Return`] (the return trampoline): only the return-value
//!   registers, frame pointer, stack pointer and instruction pointer (the
//!   address returned to, filled in by the return hook).
//! - [`Saved::ReturnFull`] (the full-registers return trampoline): the whole
//!   `PtRegs` at a function's return.
//!
//! Which `PtRegs` fields each save records is the architecture's
//! `regs::REGISTERS` table; [`FtraceRegs::query_register_offset`] answers from
//! it and never returns an offset into unsaved memory.
//!
//! # SiteCall
//!
//! Eight bytes in front of every traced function hold a pointer (the "ops
//! literal"). An enabled site's trampoline loads it and calls
//! `(*literal).func(ip, parent_ip, literal, fregs)` (the sparse trampoline
//! `sparse_func`: see [`SiteCall`]). Generic code puts a
//! `SiteCall` first in every object a site can point at (an ops, a per-site
//! list of ops), so one indirect call reaches the right handler whatever the
//! number of ops or traced functions.

use core::fmt;
use core::mem::offset_of;
use core::sync::atomic::{AtomicU32, Ordering};

pub use crate::regs::PtRegs;
pub use crate::regs::ARGUMENT_NAMES;
use crate::regs::{self, ARGUMENT_REGISTERS, RETURN_ADDRESS};

/// Where a function finds its return address at entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnAddress {
    /// In the stack slot the stack pointer points at (x86_64).
    Stack,
    /// In the link register (aarch64).
    LinkRegister,
}

/// Where a function's return address is while the function has no frame
/// record of its own yet (at its entry, and in its prologue until its
/// frame pointer points at its record): see [`crate::kprobes::PrologueWalk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnSlot {
    /// In the link register.
    LinkRegister,
    /// In the stack, this many bytes above the stack pointer.
    Stack { offset: usize },
}

impl ReturnSlot {
    /// At the function's first instruction.
    pub const AT_ENTRY: ReturnSlot = match RETURN_ADDRESS {
        ReturnAddress::LinkRegister => ReturnSlot::LinkRegister,
        ReturnAddress::Stack => ReturnSlot::Stack { offset: 0 },
    };
}

/// What a trampoline stored in an [`FtraceRegs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Saved {
    /// Entry registers only (`ftrace_caller`).
    EntryArgs = 1,
    /// Every register (`ftrace_regs_caller`).
    EntryFull = 2,
    /// Return registers only (the return trampoline).
    Return = 3,
    /// Every register, at a function's return (the full-registers return
    /// trampoline, for kretprobe-style users).
    ReturnFull = 4,
}

impl Saved {
    /// This save's bit in [`RegisterInfo::saved_by`].
    pub const fn bit(self) -> u8 {
        1 << (self as u64)
    }
}

/// One register the trampolines may save.
pub struct RegisterInfo {
    /// The names `%REG` accepts (Linux's and the architecture's own).
    pub names: &'static [&'static str],
    /// Its offset in `PtRegs`.
    pub offset: usize,
    /// Which saves record it: a mask of [`Saved::bit`]s.
    pub saved_by: u8,
}

/// Why a register cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// No register has that name on this architecture.
    Unknown,
    /// The register exists but the sparse entry save does not record it.
    NotSaved,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Unknown => write!(f, "no such register"),
            RegisterError::NotSaved => write!(f, "register not saved by the function-entry trampoline"),
        }
    }
}

/// One field of a structure the trampolines lay out: its name and offset
/// (from `offset_of!`). `docs/architecture.md` draws its diagrams from
/// these, and a test keeps the two the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    pub name: &'static str,
    pub offset: usize,
}

/// A structure's layout: its name, size and fields in address order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructLayout {
    pub name: &'static str,
    pub size: usize,
    pub fields: &'static [FieldLayout],
}

/// `FieldLayout` of `$field` in `$type` (as `$name`, if given).
#[macro_export]
macro_rules! field_layout {
    ($type:ty, $field:ident) => {
        $crate::ftrace_abi::FieldLayout { name: stringify!($field), offset: core::mem::offset_of!($type, $field) }
    };
    ($type:ty, $field:ident, $name:expr) => {
        $crate::ftrace_abi::FieldLayout { name: $name, offset: core::mem::offset_of!($type, $field) }
    };
}

/// The layouts the tracing path relies on: `PtRegs`, `FtraceRegs`, and the
/// entry and return trampolines' stack frames.
pub const LAYOUTS: [&StructLayout; 4] = [&regs::PT_REGS_LAYOUT, &FTRACE_REGS_LAYOUT, &CALLER_FRAME_LAYOUT, &RETURN_FRAME_LAYOUT];

/// The entry trampolines' frame (each architecture's `CallerFrame`, the
/// same fields on both), for the documentation's diagram.
const CALLER_FRAME_LAYOUT: StructLayout = {
    use crate::ftrace::CallerFrame;
    StructLayout {
        name: "CallerFrame (ftrace_caller, ftrace_regs_caller)",
        size: core::mem::size_of::<CallerFrame>(),
        fields: &[
            crate::field_layout!(CallerFrame, fregs, "fregs: FtraceRegs"),
            crate::field_layout!(CallerFrame, function_record),
            crate::field_layout!(CallerFrame, callsite_record),
        ],
    }
};

/// The return trampolines' frame (each architecture's `ReturnFrame`).
const RETURN_FRAME_LAYOUT: StructLayout = {
    use crate::ftrace::ReturnFrame;
    StructLayout {
        name: "ReturnFrame (return_to_handler, return_to_handler_regs)",
        size: core::mem::size_of::<ReturnFrame>(),
        fields: &[crate::field_layout!(ReturnFrame, fregs, "fregs: FtraceRegs"), crate::field_layout!(ReturnFrame, record)],
    }
};

const FTRACE_REGS_LAYOUT: StructLayout = StructLayout {
    name: "FtraceRegs",
    size: core::mem::size_of::<FtraceRegs>(),
    fields: &[
        field_layout!(FtraceRegs, regs, "regs: PtRegs"),
        field_layout!(FtraceRegs, saved, "saved: Saved"),
        field_layout!(FtraceRegs, entry_sp),
    ],
};

/// The registers a tracing trampoline saved. See the module documentation.
///
/// Only the trampolines make one, in their frame, and it describes one call
/// in progress (its return address is read and replaced where the call keeps
/// it): it is not `Copy`, and no safe code can build one to put in a
/// callback's place. [`snapshot`](Self::snapshot) makes a copy to keep, of
/// another type.
///
/// # Writing registers
///
/// Reading a save is safe. Writing one is not: the trampoline restores what
/// a callback wrote (the return value, the arguments, the instruction
/// pointer, in a full save the others it restores: the architecture's
/// `regs` module says which; never the stack pointer), so a
/// write changes what the traced code computes and where it goes, as in
/// Linux. Every writing accessor is an `unsafe fn` whose caller vouches that
/// the traced code stays sound with the new values: a valid value of the
/// argument's or return's type, a replacement ip that can take over the
/// call, callee-saved and frame registers as the code expects them. The
/// return hook changes the return address itself, through its own unsafe
/// accessors.
#[repr(C)]
pub struct FtraceRegs {
    regs: PtRegs,
    saved: Saved,
    /// In an entry save: the stack pointer the function was entered with,
    /// as the trampoline found it (a return save leaves it unwritten, and
    /// nothing reads it there). Kept apart from `regs`, which callbacks may
    /// change (unsafely): the return address is read and replaced through
    /// it, and the trampolines resume on their own frame, so a callback that
    /// writes `sp` moves neither (as in Linux, where a changed `regs->sp` is
    /// ignored).
    entry_sp: usize,
}

/// The offset of `PtRegs` inside `FtraceRegs` (for the trampolines).
pub const FTRACE_REGS_PT: usize = offset_of!(FtraceRegs, regs);
/// The offset of the [`Saved`] tag (for the trampolines).
pub const FTRACE_REGS_SAVED: usize = offset_of!(FtraceRegs, saved);
/// The offset of the entry stack pointer (for the entry trampolines), just
/// after the tag, so one paired store can write both.
pub const FTRACE_REGS_ENTRY_SP: usize = offset_of!(FtraceRegs, entry_sp);
const _: () = assert!(FTRACE_REGS_ENTRY_SP == FTRACE_REGS_SAVED + 8);

/// The number of an argument passed in a register (0-based), checked once:
/// below the architecture's count of argument registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterArgument(usize);

impl RegisterArgument {
    /// Argument `n`, if it is passed in a register.
    pub fn new(n: usize) -> Option<RegisterArgument> {
        (n < ARGUMENT_REGISTERS).then_some(RegisterArgument(n))
    }
}

impl FtraceRegs {
    /// This save, to read in place: the reading accessors below that a
    /// breakpoint's save shares ([`SavedRegs`]) go through it.
    #[inline(always)]
    pub fn view(&self) -> SavedRegs<'_> {
        SavedRegs { regs: &self.regs, saved: self.saved }
    }

    /// What this save holds.
    pub fn saved(&self) -> Saved {
        self.saved
    }

    /// The traced function's address (on entry) or where it returns to (on
    /// return).
    pub fn instruction_pointer(&self) -> usize {
        self.regs.ip()
    }

    /// Makes the entry trampoline resume at `ip` instead: the function's
    /// entry state (arguments, stack, return address) is kept, so `ip` may be
    /// a replacement function with the same signature (needs `IPMODIFY`).
    /// Entry saves only: at a return the trampoline returns to the address
    /// the return hook recorded, and this does nothing.
    ///
    /// # Safety
    /// See [Writing registers](Self#writing-registers): `ip` must be code
    /// that can take over the call, with its arguments, stack and return.
    pub unsafe fn set_instruction_pointer(&mut self, ip: usize) {
        if self.has_args() {
            self.regs.set_ip(ip);
        }
    }

    /// In a return save: records where the call returns to, as the caller
    /// will see it after the return: the instruction pointer and, on an
    /// architecture with a link register, that register too (a `ret` leaves
    /// the return address in it), in a sparse save as in a full one (the
    /// register table says both record them). The trampolines set the
    /// register from the handler's answer, not from here. The return hook
    /// calls its unchecked variant before any return callback runs; it does
    /// not change where the return goes. Does nothing in an entry save.
    pub fn set_returned_to(&mut self, address: usize) {
        if self.has_args() {
            return;
        }
        // SAFETY: a return save, just checked.
        unsafe { self.set_returned_to_unchecked(address) }
    }

    /// [`set_returned_to`](Self::set_returned_to) for the return hook,
    /// which only ever gets return saves (a return trampoline's).
    ///
    /// # Safety
    /// `self` must be a return save: in an entry save the instruction
    /// pointer is the traced function's, which would be overwritten.
    #[inline(always)]
    pub unsafe fn set_returned_to_unchecked(&mut self, address: usize) {
        debug_assert!(!self.has_args());
        self.regs.set_ip(address);
        if RETURN_ADDRESS == ReturnAddress::LinkRegister {
            self.regs.set_link_register(address);
        }
    }

    /// Whether the function-entry arguments are available.
    pub fn has_args(&self) -> bool {
        self.view().has_args()
    }

    /// Whether every register was saved.
    pub fn is_full(&self) -> bool {
        self.view().is_full()
    }

    /// See [`SavedRegs::argument`].
    #[inline]
    pub fn argument(&self, n: usize) -> Option<u64> {
        self.view().argument(n)
    }

    /// See [`SavedRegs::register_argument`].
    #[inline]
    pub fn register_argument(&self, n: RegisterArgument) -> Option<u64> {
        self.view().register_argument(n)
    }

    /// The stack pointer at the traced function's entry (or at its return).
    pub fn stack_pointer(&self) -> usize {
        self.view().stack_pointer()
    }

    /// At entry: the stack pointer the caller will have once the function
    /// returns (x86_64: above the return address the call pushed; aarch64:
    /// the entry stack pointer). At a return: the stack pointer now, the
    /// same value, which is how the return hook matches the two.
    pub fn caller_stack_pointer(&self) -> usize {
        match (RETURN_ADDRESS, self.has_args()) {
            (ReturnAddress::Stack, true) => self.entry_sp + core::mem::size_of::<usize>(),
            (ReturnAddress::LinkRegister, true) => self.entry_sp,
            (_, false) => self.regs.sp(),
        }
    }

    /// The frame pointer: at entry, the caller's frame.
    pub fn frame_pointer(&self) -> usize {
        self.regs.fp()
    }

    /// [`return_address`](Self::return_address) and
    /// [`caller_stack_pointer`](Self::caller_stack_pointer) of a save
    /// known to be an entry save, without testing it: what the return hook
    /// records for a call, on the traced path.
    ///
    /// # Safety
    /// `self` must be an entry save: the registers an ftrace callback gets
    /// (in a return save `entry_sp` is not written).
    #[inline(always)]
    pub unsafe fn entry_return_unchecked(&self) -> (usize, usize) {
        debug_assert!(self.has_args());
        match RETURN_ADDRESS {
            ReturnAddress::LinkRegister => (self.regs.link_register().unwrap_or(0), self.entry_sp),
            ReturnAddress::Stack => {
                // SAFETY: an entry save (the caller's promise): `entry_sp`
                // points at the return-address slot the call pushed, mapped.
                let ret = unsafe { (self.entry_sp as *const usize).read_unaligned() };
                (ret, self.entry_sp + core::mem::size_of::<usize>())
            }
        }
    }

    /// Where the traced function will return to (entry saves only).
    pub fn return_address(&self) -> Option<usize> {
        if !self.has_args() {
            return None;
        }
        match RETURN_ADDRESS {
            ReturnAddress::LinkRegister => self.regs.link_register(),
            // SAFETY: an entry trampoline's save: `entry_sp`, which only the
            // trampoline writes, points at the return-address slot the call
            // pushed, mapped (read unaligned: no alignment is assumed).
            ReturnAddress::Stack => Some(unsafe { (self.entry_sp as *const usize).read_unaligned() }),
        }
    }

    /// Replaces the address the traced function returns to (the return hook
    /// uses this). On architectures that keep it on the stack this writes the
    /// stack slot directly. Only where [`return_address`](Self::return_address)
    /// answers (a trampoline's entry save); does nothing otherwise.
    ///
    /// # Safety
    /// `address` must be code that can take over from the traced function's
    /// return (its caller's continuation, or a return trampoline).
    pub unsafe fn set_return_address(&mut self, address: usize) {
        if self.return_address().is_none() {
            return;
        }
        match RETURN_ADDRESS {
            ReturnAddress::LinkRegister => self.regs.set_link_register(address),
            // SAFETY: at entry `entry_sp` points at the return address slot
            // the call pushed; the caller vouches for the new target.
            ReturnAddress::Stack => unsafe { (self.entry_sp as *mut usize).write_unaligned(address) },
        }
    }

    /// [`set_return_address`](Self::set_return_address) without its
    /// checks, for the return hook, which has just read the return address
    /// of this same save.
    ///
    /// # Safety
    /// As for `set_return_address`, and `self` must be an entry save (one
    /// for which [`return_address`](Self::return_address) answers `Some`).
    #[inline(always)]
    pub unsafe fn set_return_address_unchecked(&mut self, address: usize) {
        debug_assert!(self.return_address().is_some());
        match RETURN_ADDRESS {
            ReturnAddress::LinkRegister => self.regs.set_link_register(address),
            // SAFETY: an entry save with a stack (the caller's promise):
            // `entry_sp` points at the return address slot the call pushed.
            ReturnAddress::Stack => unsafe { (self.entry_sp as *mut usize).write_unaligned(address) },
        }
    }

    /// The value in the return-value register.
    pub fn return_value(&self) -> u64 {
        self.view().return_value()
    }

    /// Sets the return-value register.
    ///
    /// # Safety
    /// See [Writing registers](Self#writing-registers): `value` must be a
    /// valid value of the type the function returns, one its callers may
    /// get (at entry: with the function skipped, see
    /// [`override_function_with_return`](Self::override_function_with_return)).
    /// At an entry whose function still runs, the register is also an
    /// argument's (aarch64 x0) or the variadic vector count (x86_64 rax):
    /// the value must be valid there too.
    pub unsafe fn set_return_value(&mut self, value: u64) {
        self.regs.set_return_value(value);
    }

    /// Skips the traced function: the trampoline resumes at a lone `ret`, so
    /// the function returns at once (with whatever
    /// [`set_return_value`](Self::set_return_value) put in the return
    /// register) through its return address as it stands. The stack and the
    /// return address are left alone, so a callback that runs after this one
    /// may still hook the return, and overriding twice is overriding once.
    /// Entry saves only; does nothing otherwise.
    ///
    /// # Safety
    /// See [Writing registers](Self#writing-registers): the function's
    /// callers must not rely on anything it does (Linux allows this only on
    /// functions marked for error injection), and the return register must
    /// hold a value they may get.
    pub unsafe fn override_function_with_return(&mut self) {
        // SAFETY: a lone `ret` takes over any call at its entry; the caller
        // vouches for skipping the function.
        unsafe { self.set_instruction_pointer(just_return_address()) };
    }

    /// The full register set, only if the trampoline saved all of it.
    pub fn regs(&self) -> Option<&PtRegs> {
        self.is_full().then_some(&self.regs)
    }

    /// The full register set to change, only if the trampoline saved all
    /// of it: what is written there lands, as the trampoline restores it.
    ///
    /// # Safety
    /// See [Writing registers](Self#writing-registers).
    pub unsafe fn regs_mut(&mut self) -> Option<&mut PtRegs> {
        self.is_full().then_some(&mut self.regs)
    }

    /// The saved registers as a `PtRegs`, every register the save did not
    /// record set to zero: for consumers that insist on a `PtRegs` without
    /// paying for a full save. It is this save's own `PtRegs` (the unsaved
    /// fields, stale stack memory until now, are cleared in place), which
    /// [`partial_regs_mut`](Self::partial_regs_mut) hands out to change.
    pub fn partial_regs(&mut self) -> &PtRegs {
        if !self.is_full() {
            self.regs = self.saved_registers();
        }
        &self.regs
    }

    /// [`partial_regs`](Self::partial_regs), to change: a write to a
    /// register the trampoline restores lands, exactly as it would through
    /// [`set_return_value`](Self::set_return_value) and the other writing
    /// accessors; writes to unsaved registers are ignored, and so is a
    /// write to the stack pointer (the trampolines resume on their own
    /// frame).
    ///
    /// # Safety
    /// See [Writing registers](Self#writing-registers).
    pub unsafe fn partial_regs_mut(&mut self) -> &mut PtRegs {
        self.partial_regs();
        &mut self.regs
    }

    /// The registers this save recorded, every other one zero: never a
    /// read of a field the trampoline did not write.
    fn saved_registers(&self) -> PtRegs {
        if self.is_full() {
            return self.regs;
        }
        let mut regs = PtRegs::default();
        let bit = self.saved.bit();
        for info in regs::REGISTERS.iter().filter(|info| info.saved_by & bit != 0) {
            let value = self.view().read_field(info.offset);
            // SAFETY: `offset` comes from the register table, built with
            // `offset_of!` of u64 fields of `PtRegs`.
            unsafe { *((&mut regs as *mut PtRegs as *mut u8).add(info.offset) as *mut u64) = value };
        }
        regs
    }

    /// A copy of this save to keep after the call: the registers it
    /// recorded (the others zero), to read.
    pub fn snapshot(&self) -> RegsSnapshot {
        RegsSnapshot { regs: self.saved_registers(), saved: self.saved }
    }

    /// The offset in `FtraceRegs` of the register called `name`, if the
    /// function-entry save ([`Saved::EntryArgs`], what every entry save holds
    /// at least) records it; an error otherwise, never an offset into memory
    /// the save did not write.
    pub fn query_register_offset(name: &str) -> Result<usize, RegisterError> {
        Self::query_register_offset_in(Saved::EntryArgs, name)
    }

    /// [`query_register_offset`](Self::query_register_offset) for another
    /// save: Ok only if `saved` records the register.
    pub fn query_register_offset_in(saved: Saved, name: &str) -> Result<usize, RegisterError> {
        let info = regs::REGISTERS.iter().find(|info| info.names.contains(&name)).ok_or(RegisterError::Unknown)?;
        if info.saved_by & saved.bit() == 0 {
            return Err(RegisterError::NotSaved);
        }
        Ok(FTRACE_REGS_PT + info.offset)
    }

    /// See [`SavedRegs::register_at`].
    pub fn register_at(&self, offset: usize) -> Option<u64> {
        self.view().register_at(offset)
    }

    /// See [`SavedRegs::registers`].
    pub fn registers(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> + '_ {
        self.view().registers()
    }
}

/// A save kept after its call ([`FtraceRegs::snapshot`]): the registers it
/// recorded, read through [`view`](Self::view).
#[derive(Clone, Copy)]
pub struct RegsSnapshot {
    regs: PtRegs,
    saved: Saved,
}

impl RegsSnapshot {
    /// The kept save, to read.
    pub fn view(&self) -> SavedRegs<'_> {
        SavedRegs { regs: &self.regs, saved: self.saved }
    }

    /// The full register set, if the save held all of it.
    pub fn regs(&self) -> Option<&PtRegs> {
        self.view().is_full().then_some(&self.regs)
    }
}

/// A save read in place: a `PtRegs` and what it holds. [`FtraceRegs::view`]
/// gives one for a trampoline's save; [`SavedRegs::full`] for registers
/// saved some other way (a kprobe's breakpoint), which are then read where
/// they are, never copied into an `FtraceRegs` first. The reading accessors
/// live here, once, for both.
#[derive(Clone, Copy)]
pub struct SavedRegs<'a> {
    regs: &'a PtRegs,
    saved: Saved,
}

impl<'a> SavedRegs<'a> {
    /// `regs`, every register saved: [`Saved::EntryFull`] at a function's
    /// entry or a probed instruction, [`Saved::ReturnFull`] at a return.
    pub fn full(regs: &'a PtRegs, saved: Saved) -> SavedRegs<'a> {
        debug_assert!(matches!(saved, Saved::EntryFull | Saved::ReturnFull));
        SavedRegs { regs, saved }
    }

    /// `regs` read as a save of kind `saved` holds them: only the registers
    /// that save records answer (for tests, and registers kept elsewhere).
    pub fn of(regs: &'a PtRegs, saved: Saved) -> SavedRegs<'a> {
        SavedRegs { regs, saved }
    }

    /// What the save holds.
    pub fn saved(self) -> Saved {
        self.saved
    }

    /// Whether the function-entry arguments are available.
    #[inline(always)]
    pub fn has_args(self) -> bool {
        matches!(self.saved, Saved::EntryArgs | Saved::EntryFull)
    }

    /// Whether every register was saved.
    #[inline(always)]
    pub fn is_full(self) -> bool {
        matches!(self.saved, Saved::EntryFull | Saved::ReturnFull)
    }

    fn records(self, offset: usize) -> bool {
        regs::REGISTERS.iter().any(|info| info.offset == offset && info.saved_by & self.saved.bit() != 0)
    }

    fn read_field(self, offset: usize) -> u64 {
        // SAFETY: callers pass offsets from the register table (`offset_of!`
        // of u64 fields of `PtRegs`).
        unsafe { *((self.regs as *const PtRegs as *const u8).add(offset) as *const u64) }
    }

    /// Argument `n` of the traced function (0-based), at entry. Arguments past
    /// the registers are read from the caller's stack where the architecture
    /// passes them there (x86_64: n >= 6), fault-tolerantly.
    #[inline]
    pub fn argument(self, n: usize) -> Option<u64> {
        if !self.has_args() {
            return None;
        }
        if n < ARGUMENT_REGISTERS {
            return Some(self.regs.argument_register(n));
        }
        let slot = regs::stack_argument_slot(self.regs.sp(), n)?;
        crate::fault::read_u64_nofault(slot)
    }

    /// [`argument`](Self::argument) for a register argument, its number
    /// checked when it was made: the traced path tests only the save.
    #[inline]
    pub fn register_argument(self, n: RegisterArgument) -> Option<u64> {
        self.has_args().then(|| self.regs.argument_register(n.0))
    }

    /// The stack pointer at the save.
    #[inline]
    pub fn stack_pointer(self) -> usize {
        self.regs.sp()
    }

    /// The value in the return-value register.
    #[inline]
    pub fn return_value(self) -> u64 {
        self.regs.return_value()
    }

    /// The frame pointer (every save records it): at a function's entry
    /// its caller's, at a return the caller's again.
    #[inline]
    pub fn frame_pointer(self) -> usize {
        self.regs.fp()
    }

    /// Where the function returns to, for a save taken where its return
    /// address is in `slot` (read fault-tolerantly from the stack): at its
    /// first instruction, [`ReturnSlot::AT_ENTRY`]; in its prologue, what
    /// [`crate::kprobes::PrologueWalk`] says. Meaningless anywhere else.
    pub fn return_address_in(self, slot: ReturnSlot) -> Option<usize> {
        match slot {
            ReturnSlot::LinkRegister => self.regs.link_register(),
            ReturnSlot::Stack { offset } => {
                crate::fault::read_u64_nofault(self.regs.sp().wrapping_add(offset)).map(|address| address as usize)
            }
        }
    }

    /// Reads the register at `offset` (from
    /// [`FtraceRegs::query_register_offset`]), if this save recorded it.
    pub fn register_at(self, offset: usize) -> Option<u64> {
        let field = offset.checked_sub(FTRACE_REGS_PT)?;
        if !self.records(field) {
            return None;
        }
        Some(self.read_field(field))
    }

    /// Every register of the architecture by its first name, with its value
    /// if this save recorded it (`None`: not saved, so not known).
    pub fn registers(self) -> impl Iterator<Item = (&'static str, Option<u64>)> + 'a {
        regs::REGISTERS.iter().map(move |info| (info.names[0], self.records(info.offset).then(|| self.read_field(info.offset))))
    }
}

/// A call instruction cannot reach its target from where it would sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange {
    pub from: usize,
    pub to: usize,
}

impl PtRegs {
    /// The register called `name` (any name `%REG` accepts).
    pub fn register(&self, name: &str) -> Option<u64> {
        let info = regs::REGISTERS.iter().find(|info| info.names.contains(&name))?;
        // SAFETY: the table's offsets are `offset_of!` of u64 fields.
        Some(unsafe { *((self as *const PtRegs as *const u8).add(info.offset) as *const u64) })
    }

    /// Sets the register called `name`; false if there is no such register.
    pub fn set_register(&mut self, name: &str, value: u64) -> bool {
        let Some(info) = regs::REGISTERS.iter().find(|info| info.names.contains(&name)) else { return false };
        // SAFETY: the table's offsets are `offset_of!` of u64 fields.
        unsafe { *((self as *mut PtRegs as *mut u8).add(info.offset) as *mut u64) = value };
        true
    }
}

/// Which trampoline a site calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trampoline {
    /// `ftrace_caller`: sparse entry registers.
    Args,
    /// `ftrace_regs_caller`: every register.
    Regs,
}

/// The handler a site's literal leads to. Called by the trampolines with the
/// traced function's address, its caller's return address, the literal
/// itself (so the handler can find the object it is embedded in) and the
/// saved registers. The literal is a raw pointer, not a reference: it stands
/// for the whole object, and the handler reaches (and may change) the rest of
/// that object through it.
pub type SiteFunc = extern "C" fn(ip: usize, parent_ip: usize, call: *const SiteCall, fregs: &mut FtraceRegs);

/// What a site's ops literal points at. Embedded first in a `#[repr(C)]`
/// object, and the literal is made from a pointer to that whole object, so it
/// is a pointer to that object.
///
/// Each entry trampoline calls the handler made for its save. A task can
/// enter the sparse trampoline and load the literal only later (preempted
/// in between), after its site switched to the full trampoline and its
/// literal came to name an ops that wants every register: `sparse_func`
/// then runs the others and counts a miss for that one, which never sees a
/// sparse save (Linux skips such an ops in `ftrace_ops_test`). For a call
/// whose ops all take a sparse save, both are the same handler.
#[repr(C)]
pub struct SiteCall {
    /// What the full-registers trampoline calls.
    pub func: SiteFunc,
    /// What the sparse trampoline calls.
    pub sparse_func: SiteFunc,
}

/// The offset of the full trampoline's handler in [`SiteCall`] (for the
/// trampolines).
pub const SITE_CALL_FUNC: usize = offset_of!(SiteCall, func);
/// The offset of the sparse trampoline's handler in [`SiteCall`].
pub const SITE_CALL_SPARSE_FUNC: usize = offset_of!(SiteCall, sparse_func);

/// Bytes of the ops literal in front of every traced function: a pointer
/// to a [`SiteCall`] (the trampolines load it from there).
pub const LITERAL_BYTES: usize = core::mem::size_of::<*const SiteCall>();

/// Which return trampoline a hooked call returns through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnTrampoline {
    /// `return_to_handler`: the return registers only ([`Saved::Return`]).
    Sparse,
    /// `return_to_handler_regs`: every register ([`Saved::ReturnFull`]).
    Full,
}

// Every architecture's `ftrace` module defines these symbols: the two entry
// trampolines, the two return trampolines, and a lone `ret` that skips a
// function (`override_function_with_return`).
extern "C" {
    fn ftrace_caller();
    fn ftrace_regs_caller();
    fn return_to_handler();
    fn return_to_handler_regs();
    fn ftrace_just_return();
}

/// The address a site calls for `trampoline`.
pub fn trampoline_address(trampoline: Trampoline) -> usize {
    match trampoline {
        Trampoline::Args => ftrace_caller as *const () as usize,
        Trampoline::Regs => ftrace_regs_caller as *const () as usize,
    }
}

/// The address a hooked call returns through for `trampoline`.
pub fn return_trampoline_address(trampoline: ReturnTrampoline) -> usize {
    match trampoline {
        ReturnTrampoline::Sparse => return_to_handler as *const () as usize,
        ReturnTrampoline::Full => return_to_handler_regs as *const () as usize,
    }
}

/// A lone return: where an entry trampoline resumes to skip the function.
pub fn just_return_address() -> usize {
    ftrace_just_return as *const () as usize
}

// The return trampolines call this, which generic tracing code defines:
// given the registers at the hooked function's return, it runs the return
// callbacks and answers the address the function really returns to.
extern "C" {
    pub fn ftrace_return_to_handler(fregs: &mut FtraceRegs) -> usize;
}

/// Per task: how deep it is in tracing code entered through an entry
/// trampoline, and how many times that depth came back to zero. The entry
/// trampolines keep both, reaching the running task's through the per-CPU
/// pointer (`percpu::task_trace`, whose first field these are): `active`
/// goes up before the trampoline reads the site's ops literal and down once
/// the callbacks returned, and `exits` counts the returns to zero. A grace
/// period (`ftrace::deferred`) waits until every task that was inside has
/// been seen outside.
#[repr(C)]
#[derive(Debug, Default)]
pub struct TrampolineCounters {
    pub active: AtomicU32,
    pub exits: AtomicU32,
}

impl TrampolineCounters {
    /// Outside, never left.
    pub const fn new() -> Self {
        TrampolineCounters { active: AtomicU32::new(0), exits: AtomicU32::new(0) }
    }

    /// A snapshot: (active, exits).
    pub fn read(&self) -> (u32, u32) {
        (self.active.load(Ordering::Acquire), self.exits.load(Ordering::Acquire))
    }
}

/// Offsets of the counters, for the trampolines.
pub const COUNTERS_ACTIVE: usize = offset_of!(TrampolineCounters, active);
pub const COUNTERS_EXITS: usize = offset_of!(TrampolineCounters, exits);
