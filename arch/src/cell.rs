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
