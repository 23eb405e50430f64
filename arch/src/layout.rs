//! The kernel image's layout, as the linker script (`boot/*.ld`) lays it out.
//! Both architectures use the same symbols: page-aligned ranges for text,
//! rodata and everything writable, then the heap.

use core::ops::Range;

extern "C" {
    static __kernel_start: u8;
    static __text_start: u8;
    static __text_end: u8;
    static __rodata_end: u8;
    static __kernel_end: u8;
    static __boot_stack_guard: u8;
    static __heap_start: u8;
    static __heap_end: u8;
}

macro_rules! address_of {
    // Taking the address of an extern static is safe; it is never read.
    ($symbol:ident) => {
        core::ptr::addr_of!($symbol) as usize
    };
}

/// The whole image, from its first section to the end of the boot stack.
pub fn image() -> Range<usize> {
    address_of!(__kernel_start)..address_of!(__kernel_end)
}

/// Executable code: mapped read-only and executable.
pub fn text() -> Range<usize> {
    address_of!(__text_start)..address_of!(__text_end)
}

/// The end of read-only data (which starts at `text().end`).
pub fn rodata_end() -> usize {
    address_of!(__rodata_end)
}

/// The heap, right after the image: mapped read-write, never executable.
pub fn heap() -> Range<usize> {
    address_of!(__heap_start)..address_of!(__heap_end)
}

/// What a 4 KiB page of the image may be used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagePermission {
    ReadExecute,
    ReadOnly,
    ReadWrite,
    /// Not mapped: the first page (null), the guard pages below stacks.
    None,
}

/// The guard page under the boot stack.
pub fn stack_guard() -> usize {
    address_of!(__boot_stack_guard)
}

/// Whether `address` is in a stack guard page (the boot stack's or a task
/// stack's): a fault there is a kernel stack overflow.
pub fn in_stack_guard(address: usize) -> bool {
    (stack_guard()..stack_guard() + GUARD).contains(&address)
        || task_stacks().contains(&address) && (address - task_stacks().start) % TASK_SLOT < GUARD
}

extern "C" {
    static __task_stacks_start: u8;
    static __task_stacks_end: u8;
    static __boot_stack_bottom: u8;
    static __boot_stack_top: u8;
}

const GUARD: usize = 4096;
/// Bytes of each task stack (a guard page sits under each).
pub const TASK_STACK_SIZE: usize = 64 * 1024;
const TASK_SLOT: usize = GUARD + TASK_STACK_SIZE;

fn task_stacks() -> Range<usize> {
    address_of!(__task_stacks_start)..address_of!(__task_stacks_end)
}

/// How many task stacks the image reserves.
pub fn task_stack_count() -> usize {
    task_stacks().len() / TASK_SLOT
}

/// Task stack `slot` (below [`task_stack_count`]): its usable bytes, above
/// its guard page.
pub fn task_stack(slot: usize) -> Range<usize> {
    assert!(slot < task_stack_count(), "no task stack {slot}");
    let bottom = task_stacks().start + slot * TASK_SLOT + GUARD;
    bottom..bottom + TASK_STACK_SIZE
}

/// The boot stack (the boot CPU's first task runs on it).
pub fn boot_stack() -> Range<usize> {
    address_of!(__boot_stack_bottom)..address_of!(__boot_stack_top)
}

/// The permission for the page at `addr` in the image's 4 KiB-mapped
/// region: the null page and stack guards unmapped, memory before the image
/// writable (x86_64 starts its other CPUs there), text, rodata, or writable.
pub fn page_permission(addr: usize) -> PagePermission {
    if addr < 4096 || in_stack_guard(addr) {
        PagePermission::None
    } else if addr < image().start {
        PagePermission::ReadWrite
    } else if text().contains(&addr) {
        PagePermission::ReadExecute
    } else if addr < rodata_end() {
        PagePermission::ReadOnly
    } else {
        PagePermission::ReadWrite
    }
}

extern "C" {
    static __patchable_sites_start: u64;
    static __patchable_sites_end: u64;
    static __kernel_symbols_start: u64;
    static __kernel_symbols_end: u64;
}

/// The `__patchable_function_entries` table: one address per patchable
/// function entry (the start of its prefix), sorted by the post-link tool,
/// zero-padded at the end.
pub fn patchable_sites() -> &'static [u64] {
    let start = address_of!(__patchable_sites_start);
    let end = address_of!(__patchable_sites_end);
    // SAFETY: the linker script brackets the section with these symbols; it
    // holds u64 entries, is 8-byte aligned, and is never written at run time.
    unsafe { core::slice::from_raw_parts(start as *const u64, (end - start) / 8) }
}

/// The `.kernel_symbols` section the post-link tool fills.
pub fn kernel_symbols() -> &'static [u8] {
    let start = address_of!(__kernel_symbols_start);
    let end = address_of!(__kernel_symbols_end);
    // SAFETY: as for `patchable_sites`: a read-only, 8-byte-aligned section.
    unsafe { core::slice::from_raw_parts(start as *const u8, end - start) }
}
