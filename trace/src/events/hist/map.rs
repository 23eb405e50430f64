//! The table a histogram fills ([`HistMap`]).
//!
//! Design. The table is made whole when the trigger is
//! written and never grows: the event's hit path only inserts into it,
//! without a lock and without allocating, as Linux's `tracing_map` does.
//! It has twice as many slots as entries, probed linearly from the key's
//! hash. A slot goes from free to claimed (a compare-and-swap: one CPU wins
//! it) to ready (its key written, published with release ordering);
//! another CPU that finds it claimed waits for it, a few instructions (the
//! hit path runs with interrupts masked, so the claimer is never
//! interrupted), for at most `CLAIM_SPINS` rounds, and counts a drop if
//! it is still not ready. Sums are atomic adds. A full table counts the
//! hit as dropped (`Dropped:` in the output).
//!

use super::{CLAIM_SPINS, TABLES_BUDGET, TABLES_BYTES};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// The table: see the module documentation.
pub struct HistMap {
    pub(super) key_words: usize,
    /// Sums per entry: `hitcount`, then each value.
    pub(super) sums_per_entry: usize,
    /// Variables per entry.
    pub(super) vars_per_entry: usize,
    /// Entries at most (half the slots).
    pub(super) capacity: usize,
    pub(super) states: Box<[AtomicU8]>,
    pub(super) keys: Box<[AtomicU64]>,
    pub(super) sums: Box<[AtomicU64]>,
    /// Each entry's variables, and a word of bits per entry saying which
    /// are set (none for a table without variables).
    pub(super) vars: Box<[AtomicU64]>,
    pub(super) vars_set: Box<[AtomicU64]>,
    pub(super) entries: AtomicUsize,
    pub(super) hits: AtomicU64,
    pub(super) drops: AtomicU64,
}

pub(super) const FREE: u8 = 0;
pub(super) const CLAIMED: u8 = 1;
pub(super) const READY: u8 = 2;

/// Zeroed atomics, or `None` if the heap cannot hold them.
pub(super) fn zeroed<T>(len: usize, zero: impl Fn() -> T) -> Option<Box<[T]>> {
    let mut words = Vec::new();
    words.try_reserve_exact(len).ok()?;
    words.extend((0..len).map(|_| zero()));
    Some(words.into_boxed_slice())
}

impl HistMap {
    /// A table of `capacity` entries of `key_words` key words,
    /// `sums_per_entry` sums and `vars_per_entry` variables; `None` if the
    /// heap cannot hold it.
    pub fn try_new(capacity: usize, key_words: usize, sums_per_entry: usize, vars_per_entry: usize) -> Option<HistMap> {
        let bytes = Self::bytes_of(2 * capacity, key_words, sums_per_entry, vars_per_entry);
        TABLES_BYTES
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&total| total <= TABLES_BUDGET)
            })
            .ok()?;
        let map = Self::allocate(capacity, key_words, sums_per_entry, vars_per_entry);
        if map.is_none() {
            TABLES_BYTES.fetch_sub(bytes, Ordering::Relaxed);
        }
        map
    }

    /// The heap a table of `slots` slots takes (what [`TABLES_BUDGET`]
    /// counts): a state byte, then the key words, sums and variables (and
    /// their word of set bits), a slot.
    pub(super) fn bytes_of(slots: usize, key_words: usize, sums_per_entry: usize, vars_per_entry: usize) -> usize {
        let set_words = usize::from(vars_per_entry > 0);
        slots * (1 + 8 * (key_words + sums_per_entry + vars_per_entry + set_words))
    }

    pub(super) fn allocate(capacity: usize, key_words: usize, sums_per_entry: usize, vars_per_entry: usize) -> Option<HistMap> {
        let slots = 2 * capacity;
        let set_words = if vars_per_entry > 0 { slots } else { 0 };
        Some(HistMap {
            key_words,
            sums_per_entry,
            vars_per_entry,
            capacity,
            states: zeroed(slots, || AtomicU8::new(FREE))?,
            keys: zeroed(slots * key_words, || AtomicU64::new(0))?,
            sums: zeroed(slots * sums_per_entry, || AtomicU64::new(0))?,
            vars: zeroed(slots * vars_per_entry, || AtomicU64::new(0))?,
            vars_set: zeroed(set_words, || AtomicU64::new(0))?,
            entries: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            drops: AtomicU64::new(0),
        })
    }

    pub(super) fn key_of(&self, slot: usize) -> &[AtomicU64] {
        &self.keys[slot * self.key_words..(slot + 1) * self.key_words]
    }

    pub(super) fn sums_of(&self, slot: usize) -> &[AtomicU64] {
        &self.sums[slot * self.sums_per_entry..(slot + 1) * self.sums_per_entry]
    }

    pub(super) fn key_is(&self, slot: usize, key: &[u64]) -> bool {
        self.key_of(slot).iter().zip(key).all(|(word, &want)| word.load(Ordering::Relaxed) == want)
    }

    /// Adds one hit of `key` with `vals` (after `hitcount`'s 1): its
    /// entry's slot, or `None` if it was dropped (the table is full, or a
    /// slot stayed claimed).
    pub fn insert(&self, key: &[u64], vals: &[u64]) -> Option<usize> {
        let mask = self.states.len() - 1;
        let mut slot = hash(key) & mask;
        for _ in 0..self.states.len() {
            if let Some(found) = self.claim_or_match(slot, key) {
                if found {
                    self.add(slot, vals);
                    return Some(slot);
                }
            } else {
                break; // full, or a slot that never became ready
            }
            slot = (slot + 1) & mask;
        }
        self.drops.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// The slot of `key`'s entry, if it has one (ready: a key another CPU
    /// is still writing is not there yet).
    pub fn find(&self, key: &[u64]) -> Option<usize> {
        let mask = self.states.len() - 1;
        let mut slot = hash(key) & mask;
        for _ in 0..self.states.len() {
            match self.states[slot].load(Ordering::Acquire) {
                FREE => return None,
                READY if self.key_is(slot, key) => return Some(slot),
                _ => slot = (slot + 1) & mask,
            }
        }
        None
    }

    /// Sets variable `var` of the entry in `slot`.
    pub fn set_var(&self, slot: usize, var: usize, value: u64) {
        self.vars[slot * self.vars_per_entry + var].store(value, Ordering::Relaxed);
        // Release: a reader that sees the bit sees the value.
        self.vars_set[slot].fetch_or(1 << var, Ordering::Release);
    }

    /// Variable `var` of the entry in `slot`, if it is set; `once` unsets
    /// it (Linux's `read_once`).
    pub fn read_var(&self, slot: usize, var: usize, once: bool) -> Option<u64> {
        let bit = 1u64 << var;
        let set = match once {
            true => self.vars_set[slot].fetch_and(!bit, Ordering::Acquire),
            false => self.vars_set[slot].load(Ordering::Acquire),
        };
        (set & bit != 0).then(|| self.vars[slot * self.vars_per_entry + var].load(Ordering::Relaxed))
    }

    /// Whether `slot` is `key`'s (claiming it if it is free): `Some(false)`
    /// for another key's, `None` when the hit must be dropped.
    pub(super) fn claim_or_match(&self, slot: usize, key: &[u64]) -> Option<bool> {
        let state = &self.states[slot];
        for _ in 0..CLAIM_SPINS {
            match state.load(Ordering::Acquire) {
                READY => return Some(self.key_is(slot, key)),
                FREE => {
                    if self.entries.fetch_add(1, Ordering::Relaxed) >= self.capacity {
                        self.entries.fetch_sub(1, Ordering::Relaxed);
                        return None;
                    }
                    if state.compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Acquire).is_err() {
                        // Another CPU claimed it first: look again.
                        self.entries.fetch_sub(1, Ordering::Relaxed);
                        continue;
                    }
                    for (word, &value) in self.key_of(slot).iter().zip(key) {
                        word.store(value, Ordering::Relaxed);
                    }
                    state.store(READY, Ordering::Release);
                    return Some(true);
                }
                _ => core::hint::spin_loop(), // being filled in by another CPU
            }
        }
        None
    }

    pub(super) fn add(&self, slot: usize, vals: &[u64]) {
        let sums = self.sums_of(slot);
        sums[0].fetch_add(1, Ordering::Relaxed);
        for (sum, &value) in sums[1..].iter().zip(vals) {
            sum.fetch_add(value, Ordering::Relaxed);
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Every entry: its key words and its sums (`hitcount` first).
    pub fn entries(&self) -> Vec<(Vec<u64>, Vec<u64>)> {
        self.entries_with_vars().into_iter().map(|(key, sums, _)| (key, sums)).collect()
    }

    /// Every entry: its key words, its sums and its variables' words.
    pub fn entries_with_vars(&self) -> Vec<(Vec<u64>, Vec<u64>, Vec<u64>)> {
        (0..self.states.len())
            .filter(|&slot| self.states[slot].load(Ordering::Acquire) == READY)
            .map(|slot| {
                let words = |atomics: &[AtomicU64]| atomics.iter().map(|word| word.load(Ordering::Relaxed)).collect();
                let vars = &self.vars[slot * self.vars_per_entry..(slot + 1) * self.vars_per_entry];
                (words(self.key_of(slot)), words(self.sums_of(slot)), words(vars))
            })
            .collect()
    }

    /// Hits counted, and hits dropped.
    pub fn totals(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.drops.load(Ordering::Relaxed))
    }

    /// Empties the table, first step: every slot free, so a lookup (another
    /// trigger reading this one's variables) finds nothing from now on.
    /// Only while no hit inserts (see [`Histogram::clear`](super::Histogram::clear)).
    pub(super) fn free_all(&self) {
        for state in self.states.iter() {
            state.store(FREE, Ordering::Release);
        }
        self.entries.store(0, Ordering::Relaxed);
        self.hits.store(0, Ordering::Relaxed);
        self.drops.store(0, Ordering::Relaxed);
    }

    /// Empties the table, second step: the words zeroed, once no lookup
    /// that found a slot before [`free_all`](Self::free_all) can still be
    /// reading it.
    pub(super) fn zero(&self) {
        for word in self.keys.iter().chain(self.sums.iter()).chain(self.vars.iter()).chain(self.vars_set.iter()) {
            word.store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for HistMap {
    fn drop(&mut self) {
        let bytes = Self::bytes_of(self.states.len(), self.key_words, self.sums_per_entry, self.vars_per_entry);
        TABLES_BYTES.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// FNV-1a over the key's words.
pub(super) fn hash(key: &[u64]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for word in key {
        for byte in word.to_le_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash as usize
}
