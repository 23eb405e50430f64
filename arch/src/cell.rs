//! A cell for boot-time statics.

use core::cell::UnsafeCell;

/// An `UnsafeCell` that may live in a `static`, for data that is written only
/// during single-threaded boot (page tables, descriptor tables) or whose every
/// access is otherwise serialised by the caller (documented at each use).
#[repr(transparent)]
pub struct BootCell<T>(UnsafeCell<T>);

// SAFETY: every user of `BootCell` serialises access itself (boot runs on one
// CPU with interrupts off); `get` is unsafe and states that obligation.
unsafe impl<T> Sync for BootCell<T> {}

impl<T> BootCell<T> {
    /// Wraps `value`.
    pub const fn new(value: T) -> Self {
        Self(UnsafeCell::new(value))
    }

    /// A raw pointer to the contents; never dangling.
    pub const fn as_ptr(&self) -> *mut T {
        self.0.get()
    }

    /// A mutable reference to the contents.
    ///
    /// # Safety
    /// The caller guarantees no other reference to the contents exists while
    /// the returned one is used (for example: single-CPU boot, interrupts off).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut T {
        // SAFETY: exclusivity is the caller's obligation, stated above.
        unsafe { &mut *self.0.get() }
    }
}

/// A function pointer kept in an atomic, so it can be installed and called
/// from any context without a lock (hooks, printers, deferred actions).
///
/// `F` must be a function pointer type: the type checks it is pointer
/// sized, and the one value it never holds, 0 (function pointers are never
/// null), stands for "none". Every value it loads was stored as an `F`.
pub struct AtomicFn<F> {
    raw: core::sync::atomic::AtomicUsize,
    _type: core::marker::PhantomData<F>,
}

impl<F: Copy + 'static> AtomicFn<F> {
    const POINTER_SIZED: () = assert!(core::mem::size_of::<F>() == core::mem::size_of::<usize>());

    /// Holding nothing.
    pub const fn none() -> Self {
        let () = Self::POINTER_SIZED;
        AtomicFn { raw: core::sync::atomic::AtomicUsize::new(0), _type: core::marker::PhantomData }
    }

    /// Installs `f` (release: what the installer wrote before is visible to
    /// whoever loads it).
    pub fn store(&self, f: F) {
        // SAFETY: `F` is pointer sized (`POINTER_SIZED`) and a function
        // pointer, whose bits are an address.
        let raw = unsafe { core::mem::transmute_copy::<F, usize>(&f) };
        self.raw.store(raw, core::sync::atomic::Ordering::Release);
    }

    /// Removes what was installed.
    pub fn clear(&self) {
        self.raw.store(0, core::sync::atomic::Ordering::Release);
    }

    /// What is installed, if anything.
    #[inline]
    pub fn load(&self) -> Option<F> {
        match self.raw.load(core::sync::atomic::Ordering::Acquire) {
            0 => None,
            // SAFETY: every non-zero value was stored by `store` from an `F`
            // of the same size: the bits are a valid `F` again.
            raw => Some(unsafe { core::mem::transmute_copy::<usize, F>(&raw) }),
        }
    }
}
