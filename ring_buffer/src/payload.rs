//! A record's payload as a tracer writes it: bytes that start 4-byte
//! aligned, with stores of whole words.
//!
//! # Why
//!
//! Records are packed (Linux's layouts) and records sit at 4-byte multiples
//! in a ring page, so a `u64` field is only 4-byte aligned. Written through
//! a `&mut [u8]` the compiler knows no alignment at all, and on a target
//! that forbids unaligned stores (the kernel's aarch64 target is built with
//! `strict-align`) every such field became eight byte stores and seven
//! shifts: about 100 instructions for one graph return record. A `Payload`
//! promises 4-byte alignment, so a `u32` at a 4-byte offset is one store
//! and a `u64` two (one on x86_64, which merges them).
//!
//! # Invariant
//!
//! `bytes` starts at a 4-byte aligned address. [`Payload::new`] checks it;
//! the ring buffer's writer makes payloads that are (`Payload::in_ring`).
//! Offsets that are not 4-byte multiples (fields after a `u8` or `u16` in
//! a probe event's record) fall back to byte copies.

use alloc::vec::Vec;
use core::mem::{align_of, size_of};

/// Whether stores may be unaligned (then a field is one store wherever it
/// is). Host builds (tests, tools) say yes: their speed does not matter.
#[cfg(target_os = "none")]
pub const UNALIGNED_STORES: bool = arch::UNALIGNED_STORES;
#[cfg(not(target_os = "none"))]
pub const UNALIGNED_STORES: bool = true;

/// A record payload, 4-byte aligned. See the module documentation.
pub struct Payload<'a> {
    bytes: &'a mut [u8],
}

impl<'a> Payload<'a> {
    /// `bytes` as a payload, or `None` if it does not start 4-byte aligned.
    pub fn new(bytes: &'a mut [u8]) -> Option<Payload<'a>> {
        (bytes.as_ptr() as usize).is_multiple_of(4).then_some(Payload { bytes })
    }

    /// A payload the ring buffer handed out.
    ///
    /// # Safety
    /// `bytes` must start 4-byte aligned (a ring page's records start at
    /// 4-byte multiples of a page-aligned page, and so do their payloads).
    #[cfg(target_os = "none")]
    #[inline(always)]
    pub(crate) unsafe fn in_ring(bytes: &'a mut [u8]) -> Payload<'a> {
        debug_assert!((bytes.as_ptr() as usize).is_multiple_of(4));
        Payload { bytes }
    }

    /// Its length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes, for writers of variable-length data (strings).
    #[inline(always)]
    pub fn bytes(&mut self) -> &mut [u8] {
        self.bytes
    }

    /// Writes `value` at `at`.
    #[inline(always)]
    pub fn put_u8(&mut self, at: usize, value: u8) {
        self.bytes[at] = value;
    }

    /// Writes `value` at `at` (native byte order, as every put).
    #[inline(always)]
    pub fn put_u16(&mut self, at: usize, value: u16) {
        self.put(at, value);
    }

    /// Writes `value` at `at`: one store at a 4-byte offset.
    #[inline(always)]
    pub fn put_u32(&mut self, at: usize, value: u32) {
        self.put(at, value);
    }

    /// Writes `value` at `at`: one store where stores may be unaligned,
    /// two 4-byte stores at a 4-byte offset where they may not.
    #[inline(always)]
    pub fn put_u64(&mut self, at: usize, value: u64) {
        if UNALIGNED_STORES {
            self.put(at, value);
        } else {
            // The same bytes as `value.to_ne_bytes()`, as two words: a
            // 4-byte alignment suffices for them.
            self.put(at, native_words(value));
        }
    }

    /// Writes `word` at `at`: one store where stores may be unaligned or
    /// `at` is aligned for `W`, a byte copy otherwise.
    #[inline(always)]
    fn put<W: Word>(&mut self, at: usize, word: W) {
        let field = &mut self.bytes[at..at + size_of::<W>()];
        let to = field.as_mut_ptr() as *mut W;
        if UNALIGNED_STORES {
            // SAFETY: in bounds (the slice above); unaligned stores are fine.
            unsafe { to.write_unaligned(word) }
        } else if at.is_multiple_of(align_of::<W>()) {
            // SAFETY: in bounds; aligned: the payload starts 4-byte aligned
            // (the type's invariant), no `Word` needs more, and `at` is a
            // multiple of `W`'s alignment.
            unsafe { to.write(word) }
        } else {
            // SAFETY: a `Word` is plain bytes with no padding (the trait's
            // promise): its `size_of` bytes may be read.
            let bytes = unsafe { core::slice::from_raw_parts(&word as *const W as *const u8, size_of::<W>()) };
            field.copy_from_slice(bytes);
        }
    }

    /// Writes `bytes` at `at`.
    #[inline(always)]
    pub fn put_slice(&mut self, at: usize, bytes: &[u8]) {
        self.bytes[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Zeroes `at..end`.
    #[inline(always)]
    pub fn zero(&mut self, at: usize, end: usize) {
        self.bytes[at..end].fill(0);
    }
}

/// A value [`Payload::put`] stores whole.
///
/// # Safety
/// Implementors are integers or arrays of them: no padding, any bit
/// pattern, alignment at most 4 (the payload's).
unsafe trait Word: Copy {}

// SAFETY: integers, and an array of them, as the trait asks.
unsafe impl Word for u16 {}
// SAFETY: as above.
unsafe impl Word for u32 {}
// SAFETY: as above (a `u64` is only stored whole where unaligned stores are
// allowed, so its alignment is never relied on).
unsafe impl Word for u64 {}
// SAFETY: as above.
unsafe impl Word for [u32; 2] {}

/// `value`'s bytes in memory order, as two native words.
#[inline(always)]
fn native_words(value: u64) -> [u32; 2] {
    let b = value.to_ne_bytes();
    [u32::from_ne_bytes([b[0], b[1], b[2], b[3]]), u32::from_ne_bytes([b[4], b[5], b[6], b[7]])]
}

/// An aligned scratch payload of `len` bytes, for encoders run outside the
/// ring (tests, host tools): `fill` writes it, the bytes come back.
pub fn encode_to_vec(len: usize, fill: impl FnOnce(&mut Payload)) -> Vec<u8> {
    let mut words = alloc::vec![0u32; len.div_ceil(4)];
    // SAFETY: `u32` words viewed as their bytes: `u8` has no alignment
    // need, and `len` is within `4 * words.len()`.
    let bytes = unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, len) };
    let mut payload = Payload::new(bytes).expect("a u32 buffer is 4-byte aligned");
    fill(&mut payload);
    payload.bytes.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_land_where_bytes_would() {
        let bytes = encode_to_vec(16, |p| {
            p.put_u16(0, 0x0102);
            p.put_u8(2, 3);
            p.put_u8(3, 4);
            p.put_u32(4, 0x0506_0708);
            p.put_u64(8, 0x090a_0b0c_0d0e_0f10);
        });
        let mut expected = alloc::vec::Vec::new();
        expected.extend_from_slice(&0x0102u16.to_ne_bytes());
        expected.extend_from_slice(&[3, 4]);
        expected.extend_from_slice(&0x0506_0708u32.to_ne_bytes());
        expected.extend_from_slice(&0x090a_0b0c_0d0e_0f10u64.to_ne_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn unaligned_offsets_fall_back_to_bytes() {
        let bytes = encode_to_vec(16, |p| {
            p.put_u32(1, 0x1122_3344);
            p.put_u64(6, 0x5566_7788_99aa_bbcc);
        });
        assert_eq!(bytes[1..5], 0x1122_3344u32.to_ne_bytes());
        assert_eq!(bytes[6..14], 0x5566_7788_99aa_bbccu64.to_ne_bytes());
    }

    #[test]
    fn only_aligned_bytes_make_a_payload() {
        let mut words = [0u32; 4];
        // SAFETY: the words' bytes, as in `encode_to_vec`.
        let bytes = unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, 16) };
        assert!(Payload::new(&mut bytes[4..]).is_some());
        assert!(Payload::new(&mut bytes[1..]).is_none());
    }
}
