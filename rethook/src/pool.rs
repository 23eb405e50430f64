//! A fixed set of objects handed out without a lock: one ring per CPU, in
//! the manner of Linux's `objpool`.
//!
//! Objects are numbers `0..objects` (indices into storage the owner keeps).
//! Each CPU has a ring big enough for every object, so a push never finds
//! its ring full.
//!
//! - [`ObjPool::push`] puts an object in the *calling CPU's* ring. Only that
//!   CPU pushes there, and never concurrently with itself (the caller masks
//!   interrupts), so a push is a store and a release of the new tail.
//! - [`ObjPool::pop`] tries the calling CPU's ring first, then the others:
//!   any CPU may pop from any ring, with a compare-and-swap on its head.
//!
//! Invariants: a ring's `tail - head` never exceeds the number of objects,
//! which is at most its capacity, so a push never overwrites a slot a
//! popper may still take. A popper that lost a race to another popper fails
//! its compare-and-swap and retries. Counters are 32-bit and wrap; only
//! their difference matters.
//!
//! Failure mode: an empty pool answers `None`, which the caller counts as
//! a miss. Nothing here allocates after [`ObjPool::new`].

use alloc::boxed::Box;
use core::sync::atomic::{AtomicU32, Ordering};

/// One CPU's ring.
struct Ring {
    /// The next entry to pop (any CPU).
    head: AtomicU32,
    /// The next free slot (the owning CPU only).
    tail: AtomicU32,
    entries: Box<[AtomicU32]>,
}

impl Ring {
    fn new(capacity: usize) -> Ring {
        Ring { head: AtomicU32::new(0), tail: AtomicU32::new(0), entries: (0..capacity).map(|_| AtomicU32::new(0)).collect() }
    }

    fn mask(&self) -> u32 {
        self.entries.len() as u32 - 1
    }

    fn len(&self) -> usize {
        self.tail.load(Ordering::Acquire).wrapping_sub(self.head.load(Ordering::Acquire)) as usize
    }

    fn pop(&self) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if head == self.tail.load(Ordering::Acquire) {
                return None;
            }
            let object = self.entries[(head & self.mask()) as usize].load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, head.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(object),
                Err(current) => head = current,
            }
        }
    }

    /// # Safety
    /// Only this ring's CPU pushes, never concurrently with itself, and the
    /// object is in no ring.
    unsafe fn push(&self, object: u32) {
        let tail = self.tail.load(Ordering::Relaxed);
        self.entries[(tail & self.mask()) as usize].store(object, Ordering::Relaxed);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
    }
}

/// The pool. See the module documentation.
pub struct ObjPool {
    rings: Box<[Ring]>,
    objects: usize,
}

impl ObjPool {
    /// A pool of `objects` objects spread over `cpus` rings.
    pub fn new(objects: usize, cpus: usize) -> ObjPool {
        let cpus = cpus.max(1);
        let capacity = objects.max(1).next_power_of_two();
        let rings: Box<[Ring]> = (0..cpus).map(|_| Ring::new(capacity)).collect();
        for object in 0..objects {
            // SAFETY: nothing else can see the pool yet; each object is
            // pushed once.
            unsafe { rings[object % cpus].push(object as u32) };
        }
        ObjPool { rings, objects }
    }

    /// How many objects the pool was made with.
    pub fn objects(&self) -> usize {
        self.objects
    }

    /// Takes a free object, `cpu`'s ring first; `None` if every ring is empty.
    pub fn pop(&self, cpu: usize) -> Option<u32> {
        let count = self.rings.len();
        (0..count).find_map(|i| self.rings[(cpu + i) % count].pop())
    }

    /// Gives `object` back, into `cpu`'s ring.
    ///
    /// # Safety
    /// `cpu` is the calling CPU, which does not push concurrently with
    /// itself (interrupts masked); `object` came from [`pop`](Self::pop) and
    /// is given back once.
    pub unsafe fn push(&self, cpu: usize, object: u32) {
        let ring = &self.rings[cpu % self.rings.len()];
        // SAFETY: the caller's guarantees are the ring's.
        unsafe { ring.push(object) };
    }

    /// Objects in the pool now (a snapshot while others pop and push).
    pub fn free(&self) -> usize {
        self.rings.iter().map(Ring::len).sum()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::vec::Vec;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Barrier};

    #[test]
    fn exhaustion_and_recycling() {
        let pool = ObjPool::new(3, 2);
        assert_eq!(pool.free(), 3);
        let mut taken: Vec<u32> = (0..3).map(|_| pool.pop(1).expect("an object")).collect();
        assert_eq!(pool.pop(0), None, "exhausted");
        taken.sort();
        assert_eq!(taken, [0, 1, 2], "each object once");
        // SAFETY: single-threaded test; each object pushed back once.
        unsafe { pool.push(0, 2) };
        assert_eq!(pool.pop(1), Some(2), "found in another CPU's ring");
        for object in [0, 1, 2] {
            // SAFETY: as above.
            unsafe { pool.push(1, object) };
        }
        assert_eq!(pool.free(), 3);
    }

    #[test]
    fn rings_wrap_around() {
        let pool = ObjPool::new(2, 1);
        for round in 0..1000 {
            let a = pool.pop(0).unwrap();
            let b = pool.pop(0).unwrap();
            assert_ne!(a, b, "round {round}");
            assert_eq!(pool.pop(0), None);
            // SAFETY: single-threaded test.
            unsafe {
                pool.push(0, b);
                pool.push(0, a);
            }
        }
        assert_eq!(pool.free(), 2);
    }

    /// Four "CPUs", each popping from anywhere and pushing into its own
    /// ring: no object is ever held twice, none is lost.
    #[test]
    fn concurrent_cpus_never_share_or_lose_an_object() {
        const OBJECTS: usize = 8;
        const CPUS: usize = 4;
        let pool = Arc::new(ObjPool::new(OBJECTS, CPUS));
        let held: Arc<Vec<AtomicBool>> = Arc::new((0..OBJECTS).map(|_| AtomicBool::new(false)).collect());
        let start = Arc::new(Barrier::new(CPUS));
        let threads: Vec<_> = (0..CPUS)
            .map(|cpu| {
                let (pool, held, start) = (pool.clone(), held.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut got = 0u64;
                    for _ in 0..20_000 {
                        if let Some(object) = pool.pop(cpu) {
                            assert!(!held[object as usize].swap(true, Ordering::AcqRel), "object {object} handed out twice");
                            got += 1;
                            held[object as usize].store(false, Ordering::Release);
                            // SAFETY: only this thread pushes into ring `cpu`.
                            unsafe { pool.push(cpu, object) };
                        }
                    }
                    got
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(total > 0);
        assert_eq!(pool.free(), OBJECTS, "every object came back");
        let mut all: Vec<u32> = (0..OBJECTS).map(|_| pool.pop(0).unwrap()).collect();
        all.sort();
        assert_eq!(all, (0..OBJECTS as u32).collect::<Vec<_>>());
    }
}
