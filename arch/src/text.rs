//! Patching kernel text: read, compare, then write, through a temporary
//! writable alias.
//!
//! Kernel text stays mapped read-only and executable. A [`TextPatcher`] maps
//! the architecture's writable alias of the text and masks interrupts for as
//! long as it lives, so a batch of patches costs one mapping, one TLB flush
//! and one instruction-stream synchronisation however many sites it touches,
//! and no interrupt handler can run code a write has only half changed.
//!
//! [`TextPatcher::replace`] never writes blindly: it reads the bytes in place,
//! compares them with what the caller believes is there, and refuses with the
//! actual bytes when they differ. Only one patcher exists at a time.
//!
//! (One CPU runs today. With several, a write would also need the other CPUs
//! to stop fetching the site first, as Linux's `text_poke_bp` arranges.)

use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::irq::IrqGuard;
use crate::{layout, patch};

/// The longest patch: an ops literal.
pub const MAX_PATCH: usize = 8;

/// Why a patch was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchError {
    /// The range is not inside kernel text.
    NotText { addr: usize },
    /// Patches are at most [`MAX_PATCH`] bytes, expected and new the same size.
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

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// An open patch batch. See the module documentation.
pub struct TextPatcher {
    _irq: IrqGuard,
    writes: usize,
}

impl TextPatcher {
    /// Opens a batch: masks interrupts and maps the text alias.
    ///
    /// # Panics
    /// If another batch is open (a kernel bug: batches do not nest).
    #[allow(clippy::new_without_default)] // opening a batch is not a default value
    pub fn new() -> TextPatcher {
        let irq = IrqGuard::new();
        assert!(!ACTIVE.swap(true, Ordering::Acquire), "text patch batches do not nest");
        patch::map_text_alias();
        TextPatcher { _irq: irq, writes: 0 }
    }

    /// How many writes this batch made so far.
    pub fn writes(&self) -> usize {
        self.writes
    }

    /// Replaces `expected` with `new` at text address `addr`, if and only if
    /// `expected` is what is there now.
    pub fn replace(&mut self, addr: usize, expected: &[u8], new: &[u8]) -> Result<(), PatchError> {
        if expected.len() != new.len() {
            return Err(PatchError::BadLength { len: new.len() });
        }
        let mut actual = [0u8; MAX_PATCH];
        read(addr, &mut actual[..expected.len()])?;
        if actual[..expected.len()] != *expected {
            return Err(PatchError::Mismatch { addr, actual, len: expected.len() });
        }
        let alias = patch::text_alias(addr);
        let offset = addr % 8;
        if offset + new.len() <= 8 {
            // Inside one naturally aligned doubleword (every site patch is:
            // an ops literal, an aarch64 instruction, the x86_64 5-byte call
            // at a 16-byte aligned function): one store of that doubleword,
            // its other bytes rewritten unchanged, so even a concurrent
            // instruction fetch sees the old bytes or the new, never a mix.
            let word = (alias - offset) as *mut u64;
            // SAFETY: the alias maps the text page writable while this batch
            // is open; `read` checked the range is inside text, and an
            // aligned doubleword never crosses a page.
            unsafe {
                let mut bytes = core::ptr::read_volatile(word).to_ne_bytes();
                bytes[offset..offset + new.len()].copy_from_slice(new);
                core::ptr::write_volatile(word, u64::from_ne_bytes(bytes));
            }
        } else {
            // Straddling two doublewords: byte by byte. Safe only because one
            // CPU runs and interrupts are masked, so nothing executes the
            // bytes half written; no site patch takes this path.
            for (i, byte) in new.iter().enumerate() {
                // SAFETY: as above, for each byte of the checked range.
                unsafe { core::ptr::write_volatile((alias + i) as *mut u8, *byte) };
            }
        }
        patch::after_write(addr, new.len());
        self.writes += 1;
        Ok(())
    }
}

impl Drop for TextPatcher {
    fn drop(&mut self) {
        close_batch();
    }
}

fn close_batch() {
    patch::unmap_text_alias();
    patch::finish_batch();
    ACTIVE.store(false, Ordering::Release);
}

/// Closes a batch whose owner was abandoned (a panic inside it, in a test
/// that expects one): removes the alias and allows new batches. Interrupts are
/// the caller's business.
pub fn abandon() {
    if ACTIVE.load(Ordering::Acquire) {
        close_batch();
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
