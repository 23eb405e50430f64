//! The kernel heap: a linked-list allocator over the region the linker script
//! reserves after the image.
//!
//! The allocator sits behind an interrupt-masking spin lock: a task holding
//! it cannot be preempted (another task on the CPU would spin for its whole
//! time slice), and an interrupt handler that allocates (the scheduler's
//! tick may grow a queue) cannot deadlock on the task it interrupted.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;

use arch::sync::SpinLock;
use linked_list_allocator::Heap;

struct KernelHeap(SpinLock<Heap>);

#[global_allocator]
static ALLOCATOR: KernelHeap = KernelHeap(SpinLock::new(Heap::empty()));

// SAFETY: every allocation and free goes through the locked heap, which
// hands out disjoint, suitably aligned blocks of the heap region.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.0.lock().allocate_first_fit(layout).map_or(core::ptr::null_mut(), |block| block.as_ptr())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(block) = NonNull::new(ptr) {
            // SAFETY: `ptr` came from `alloc` with this `layout` (the
            // caller's contract).
            unsafe { self.0.lock().deallocate(block, layout) };
        }
    }
}

/// Hands the heap region to the allocator. Called once at boot.
pub fn init() {
    let range = arch::layout::heap();
    // SAFETY: the linker script reserves this range for the heap, the page
    // tables map it read-write, and nothing else uses it; called once.
    unsafe { ALLOCATOR.0.lock().init(range.start as *mut u8, range.len()) };
}

/// Heap usage in bytes.
pub struct HeapStats {
    pub used: usize,
    pub free: usize,
    pub total: usize,
}

/// Current heap usage.
pub fn stats() -> HeapStats {
    let heap = ALLOCATOR.0.lock();
    HeapStats { used: heap.used(), free: heap.free(), total: heap.size() }
}
