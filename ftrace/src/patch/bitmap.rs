//! A fixed-size set of small integers (record indices), one bit each.

use alloc::vec::Vec;

/// A set over `0..len`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    len: usize,
}

impl Bitmap {
    /// The empty set over nothing (a placeholder before the universe is known).
    pub const EMPTY: Bitmap = Bitmap { words: Vec::new(), len: 0 };

    /// The empty set over `0..len`.
    pub fn new(len: usize) -> Self {
        Self { words: alloc::vec![0; len.div_ceil(64)], len }
    }

    /// The full set over `0..len`.
    pub fn full(len: usize) -> Self {
        let mut set = Self { words: alloc::vec![u64::MAX; len.div_ceil(64)], len };
        if !len.is_multiple_of(64) {
            if let Some(last) = set.words.last_mut() {
                *last = (1 << (len % 64)) - 1;
            }
        }
        set
    }

    /// The size of the universe.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no member is set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The number of members.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether `index` is a member.
    #[inline]
    pub fn get(&self, index: usize) -> bool {
        self.words.get(index / 64).is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// Adds `index`.
    pub fn set(&mut self, index: usize) {
        if index < self.len {
            self.words[index / 64] |= 1 << (index % 64);
        }
    }

    /// Removes `index`.
    pub fn clear(&mut self, index: usize) {
        if index < self.len {
            self.words[index / 64] &= !(1 << (index % 64));
        }
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &Bitmap) {
        for (word, theirs) in self.words.iter_mut().zip(&other.words) {
            *word |= theirs;
        }
    }

    /// Removes every member of `other`.
    pub fn subtract(&mut self, other: &Bitmap) {
        for (word, theirs) in self.words.iter_mut().zip(&other.words) {
            *word &= !theirs;
        }
    }

    /// The members in increasing order; skips empty words quickly.
    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(index, &word)| {
            let mut bits = word;
            core::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(index * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_ops() {
        let mut a = Bitmap::new(130);
        a.set(0);
        a.set(64);
        a.set(129);
        a.set(500); // out of range: ignored
        assert_eq!(a.iter_ones().collect::<Vec<_>>(), [0, 64, 129]);
        assert_eq!(a.count(), 3);
        let full = Bitmap::full(130);
        assert_eq!(full.count(), 130);
        let mut rest = full.clone();
        rest.subtract(&a);
        assert_eq!(rest.count(), 127);
        assert!(!rest.get(64) && rest.get(65));
        rest.union_with(&a);
        assert_eq!(rest, full);
        a.clear(64);
        assert!(!a.get(64));
        assert!(Bitmap::new(10).is_empty());
    }
}
