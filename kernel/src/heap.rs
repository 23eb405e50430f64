//! The kernel heap: a linked-list allocator over the region the linker script
//! reserves after the image.
//!
//! The allocator's lock is not interrupt-safe, so interrupt handlers (and
//! tracing callbacks, which may run in them) never allocate.

use linked_list_allocator::LockedHeap;

#[global_allocator]
static ALLOCATOR: LockedHeap = LockedHeap::empty();

/// Hands the heap region to the allocator. Called once at boot.
pub fn init() {
    let range = arch::layout::heap();
    // SAFETY: the linker script reserves this range for the heap, the page
    // tables map it read-write, and nothing else uses it; called once.
    unsafe { ALLOCATOR.lock().init(range.start as *mut u8, range.len()) };
}

/// Heap usage in bytes.
pub struct HeapStats {
    pub used: usize,
    pub free: usize,
    pub total: usize,
}

/// Current heap usage.
pub fn stats() -> HeapStats {
    let heap = ALLOCATOR.lock();
    HeapStats { used: heap.used(), free: heap.free(), total: heap.size() }
}
