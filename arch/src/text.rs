//! Patching kernel text while every CPU may be running it: read, compare,
//! then write, through a temporary writable alias, with the architecture's
//! cross-modifying-code protocol.
//!
//! Kernel text stays mapped read-only and executable. A [`TextPatcher`] is
//! one *batch*: [`replace`](TextPatcher::replace) (an instruction) and
//! [`replace_data`](TextPatcher::replace_data) (data kept in text, such as
//! an ops literal, which is read but never executed) check the bytes in
//! place against what the caller believes is there, refuse with the actual
//! bytes when they differ, and queue the change. Dropping the batch applies
//! it all at once:
//!
//! 1. the data, as single aligned stores (a reader sees old or new);
//! 2. the instructions, with the architecture's protocol
//!    (`patch::apply_instructions`): x86_64 goes through an `int3` on each
//!    site's first byte, so no CPU ever executes a half-written
//!    instruction; aarch64 changes one whole instruction between two that
//!    the architecture lets other CPUs execute while it changes (NOP and
//!    BL), then makes every CPU synchronise.
//!
//! So a batch costs one alias mapping and a handful of cross-CPU
//! synchronisations however many sites it touches, never one per site.
//! Data goes first: an ops literal is in place before a call that reads it
//! (and a literal being emptied is only ever replaced by the empty call,
//! valid while the call still runs). Batches are exclusive (a sleeping
//! mutex) and run in task context with interrupts enabled (the protocol
//! waits for the other CPUs).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use crate::sync::{Mutex, MutexGuard};
use crate::{layout, patch};

/// The longest patch: an ops literal.
pub const MAX_PATCH: usize = 8;

/// Why a patch was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchError {
    /// The range is not inside kernel text.
    NotText { addr: usize },
    /// Patches are at most [`MAX_PATCH`] bytes, expected and new the same
    /// size, and a batch patches an address with one length.
    BadLength { len: usize },
    /// The bytes in place are not the expected ones; nothing was written.
    Mismatch { addr: usize, actual: [u8; MAX_PATCH], len: usize },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::NotText { addr } => write!(f, "{addr:#x} is not kernel text"),
            PatchError::BadLength { len } => write!(f, "bad patch length {len}"),
            PatchError::Mismatch { actual, len, .. } => {
                write!(f, "found")?;
                write_bytes(f, &actual[..*len])
            }
        }
    }
}

/// Writes ` xx xx xx` for `bytes`.
pub fn write_bytes(f: &mut dyn fmt::Write, bytes: &[u8]) -> fmt::Result {
    for byte in bytes {
        write!(f, " {byte:02x}")?;
    }
    Ok(())
}

/// One queued change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patch {
    pub addr: usize,
    pub len: usize,
    /// What was there when the batch first touched `addr`.
    pub old: [u8; MAX_PATCH],
    pub new: [u8; MAX_PATCH],
}

impl Patch {
    /// The new bytes.
    pub fn new_bytes(&self) -> &[u8] {
        &self.new[..self.len]
    }

    /// The bytes it replaces.
    pub fn old_bytes(&self) -> &[u8] {
        &self.old[..self.len]
    }
}

/// Where a batch of instruction changes can be frozen for a test
/// (`set_pause_hook`, in test builds): the steps of the architecture's protocol between
/// which other CPUs may run the sites it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePoint {
    /// x86_64: every site's first byte is an `int3`, and every CPU has
    /// seen it.
    BreakpointsIn,
    /// x86_64: the rest of each new instruction is written, not yet seen
    /// by every CPU.
    TailsWritten,
    /// x86_64: every CPU has seen the tails; the first bytes are still
    /// `int3`.
    BeforeFirstBytes,
    /// x86_64: the first bytes are final, not yet seen by every CPU.
    FirstBytesWritten,
    /// aarch64: each new instruction is stored (one store), not yet
    /// synchronised on the other CPUs.
    Stored,
}

/// A test's hook at a [`PausePoint`]: the batch's instruction changes. It
/// runs in the patching task, preemption disabled, the batch held: it may
/// call the sites being changed and wait for other CPUs to, never patch.
pub type PauseHook = fn(point: PausePoint, patches: &[Patch]);

#[cfg(feature = "test-hooks")]
static PAUSE_HOOK: crate::cell::AtomicFn<PauseHook> = crate::cell::AtomicFn::none();

/// Installs (or removes) the hook every batch runs at each pause point
/// (tests only: the shipped kernel has no pause points).
#[cfg(feature = "test-hooks")]
pub fn set_pause_hook(hook: Option<PauseHook>) {
    match hook {
        Some(hook) => PAUSE_HOOK.store(hook),
        None => PAUSE_HOOK.clear(),
    }
}

/// A pause point of the protocol: runs the test's hook, if any.
#[inline(always)]
pub(crate) fn pause(point: PausePoint, patches: &[Patch]) {
    #[cfg(feature = "test-hooks")]
    if let Some(hook) = PAUSE_HOOK.load() {
        hook(point, patches);
    }
    let _ = (point, patches);
}

/// Only one batch at a time, in task context.
static BATCH: Mutex<()> = Mutex::new(());

/// An open patch batch. See the module documentation.
pub struct TextPatcher {
    data: Queue,
    instructions: Queue,
    writes: usize,
    _exclusive: MutexGuard<'static, ()>,
}

/// A batch's patches of one kind, in the order queued, with an index by
/// address: a batch that enables every site queues some 20,000, and
/// finding an earlier patch of the same address must not cost a scan each.
#[derive(Default)]
struct Queue {
    patches: Vec<Patch>,
    by_addr: BTreeMap<usize, usize>,
}

impl TextPatcher {
    /// Opens a batch (waiting for any other to finish).
    #[allow(clippy::new_without_default)] // opening a batch is not a default value
    pub fn new() -> TextPatcher {
        TextPatcher { data: Queue::default(), instructions: Queue::default(), writes: 0, _exclusive: BATCH.lock() }
    }

    /// How many changes this batch holds.
    pub fn writes(&self) -> usize {
        self.writes
    }

    /// Queues replacing the instruction `expected` with `new` at text
    /// address `addr`, if and only if `expected` is what is there now (as
    /// this batch will have left it).
    pub fn replace(&mut self, addr: usize, expected: &[u8], new: &[u8]) -> Result<(), PatchError> {
        Self::queue(&mut self.instructions, &mut self.writes, addr, expected, new)
    }

    /// Queues replacing data kept in text (read, never executed: an ops
    /// literal) with `new`, if `expected` is there now. Written as one
    /// aligned store, before the batch's instructions.
    pub fn replace_data(&mut self, addr: usize, expected: &[u8], new: &[u8]) -> Result<(), PatchError> {
        Self::queue(&mut self.data, &mut self.writes, addr, expected, new)
    }

    fn queue(queue: &mut Queue, writes: &mut usize, addr: usize, expected: &[u8], new: &[u8]) -> Result<(), PatchError> {
        let len = new.len();
        if expected.len() != len || len > MAX_PATCH {
            return Err(PatchError::BadLength { len });
        }
        let queued = queue.by_addr.get(&addr).copied();
        if queued.is_some_and(|index| queue.patches[index].len != len) {
            // Two writes of different widths at one place: their order
            // would decide the bytes.
            return Err(PatchError::BadLength { len });
        }
        let mut actual = [0u8; MAX_PATCH];
        read(addr, &mut actual[..len])?;
        if let Some(index) = queued {
            actual = queue.patches[index].new;
        }
        if actual[..len] != *expected {
            return Err(PatchError::Mismatch { addr, actual, len });
        }
        let mut bytes = [0u8; MAX_PATCH];
        bytes[..len].copy_from_slice(new);
        match queued {
            Some(index) => queue.patches[index].new = bytes,
            None => {
                queue.by_addr.insert(addr, queue.patches.len());
                queue.patches.push(Patch { addr, len, old: actual, new: bytes });
            }
        }
        *writes += 1;
        Ok(())
    }

    fn apply(&mut self) {
        let data = &mut self.data.patches;
        let instructions = &mut self.instructions.patches;
        data.retain(|patch| patch.old != patch.new);
        instructions.retain(|patch| patch.old != patch.new);
        if data.is_empty() && instructions.is_empty() {
            return;
        }
        // On one CPU from mapping the alias to unmapping it.
        let _pinned = crate::preempt::Guard::new();
        patch::map_text_alias();
        for patch in data.iter() {
            write_in_place(patch.addr, patch.new_bytes());
            patch::after_write(patch.addr, patch.len);
        }
        instructions.sort_unstable_by_key(|patch| patch.addr);
        patch::apply_instructions(instructions);
        store_again_for_emulators(instructions);
        patch::unmap_text_alias();
        patch::finish_batch();
    }
}

impl Drop for TextPatcher {
    fn drop(&mut self) {
        self.apply();
    }
}

/// Stores every changed instruction's final bytes once more, after the
/// protocol has synchronised every CPU, and synchronises them again.
///
/// Real CPUs need nothing of the kind; QEMU's translator does. It notices
/// self-modifying code when a store hits a page it already holds
/// translations of; a block translated from a site's old bytes at the very
/// moment of the first store (before the page was known as code to the
/// storing CPU) is never noticed, and that CPU runs the old instruction for
/// ever: a site patched to call, never calling. Seen under host load about
/// once in a hundred registrations. The identical second store comes after
/// every CPU finished any translation it had started (the synchronisation
/// round), so it lands on a page known as code and throws such a block
/// away. Storing the bytes already there changes nothing a CPU can see.
fn store_again_for_emulators(patches: &[Patch]) {
    if patches.is_empty() {
        return;
    }
    for patch in patches {
        write_in_place(patch.addr, patch.new_bytes());
        patch::after_write(patch.addr, patch.len);
    }
    patch::finish_batch();
    crate::smp::sync_all();
}

/// Writes `bytes` at text address `addr` through the alias (mapped by the
/// batch), as stores of the naturally aligned doublewords holding them,
/// their other bytes rewritten unchanged. Bytes within one doubleword (an
/// ops literal, an aarch64 instruction, one byte) therefore change in one
/// store: a concurrent reader sees the old bytes or the new, never a mix.
/// Longer ranges (the tail of an x86_64 call, which no CPU executes while
/// an `int3` guards its first byte) may take two.
pub(crate) fn write_in_place(addr: usize, bytes: &[u8]) {
    let mut done = 0;
    while done < bytes.len() {
        let at = addr + done;
        let offset = at % 8;
        let part = (8 - offset).min(bytes.len() - done);
        let word = (patch::text_alias(at) - offset) as *mut u64;
        // SAFETY: the alias maps the text page writable while a batch is
        // open; `read` checked the range is inside text when the patch was
        // queued, and an aligned doubleword never crosses a page.
        unsafe {
            let mut current = core::ptr::read_volatile(word).to_ne_bytes();
            current[offset..offset + part].copy_from_slice(&bytes[done..done + part]);
            core::ptr::write_volatile(word, u64::from_ne_bytes(current));
        }
        done += part;
    }
}

/// Lets a new batch open after one whose owner was abandoned (a panic
/// inside it, in a test that expects one): removes the alias and releases
/// the batch lock.
pub fn abandon() {
    if BATCH.try_lock().is_none() {
        patch::abandon();
        patch::unmap_text_alias();
        // SAFETY: the owner's stack is gone for good (the caller's
        // contract); nobody else holds the lock.
        unsafe { BATCH.force_unlock() };
    }
}

fn check(addr: usize, len: usize) -> Result<(), PatchError> {
    if len == 0 || len > MAX_PATCH {
        return Err(PatchError::BadLength { len });
    }
    let text = layout::text();
    if addr < text.start || addr.checked_add(len).is_none_or(|end| end > text.end) {
        return Err(PatchError::NotText { addr });
    }
    Ok(())
}

/// Reads `out.len()` (at most [`MAX_PATCH`]) bytes of kernel text at `addr`,
/// through the normal read-only mapping. Needs no batch.
pub fn read(addr: usize, out: &mut [u8]) -> Result<(), PatchError> {
    check(addr, out.len())?;
    for (i, byte) in out.iter_mut().enumerate() {
        // SAFETY: `check` confirmed the range is kernel text, which is always
        // mapped readable.
        *byte = unsafe { core::ptr::read_volatile((addr + i) as *const u8) };
    }
    Ok(())
}
