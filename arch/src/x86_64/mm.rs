//! x86_64 page tables and fault-tolerant copies.
//!
//! The final page tables identity-map the first 4 GiB. 2 MiB pages cover
//! everything except the kernel image, which gets 4 KiB pages so that each
//! range has its own permissions: text read-only and executable, rodata
//! read-only, data/bss/stack/heap read-write and non-executable. No page is
//! ever writable and executable; CR0.WP makes read-only binding for the kernel
//! itself. The 3-4 GiB hole (local APIC, I/O APIC) is mapped uncached.

use core::arch::naked_asm;

use crate::cell::BootCell;
use crate::layout::{self, PagePermission};
use x86_64::registers::control::{Cr3, Cr3Flags};
use x86_64::structures::paging::PhysFrame;
use x86_64::PhysAddr;

const PRESENT: u64 = 1 << 0;
const WRITABLE: u64 = 1 << 1;
const WRITE_THROUGH: u64 = 1 << 3;
const NO_CACHE: u64 = 1 << 4;
const HUGE: u64 = 1 << 7;
const NO_EXECUTE: u64 = 1 << 63;

const PAGE: usize = 4096;
const LARGE_PAGE: usize = 2 << 20;
const MAPPED_GIB: usize = 4;
const MMIO_HOLE: usize = 0xc000_0000;
/// 4 KiB tables available for the kernel image: 32 MiB of image.
const IMAGE_TABLES: usize = 16;

/// An address no mapping covers (64 GiB): touching it page-faults.
pub const UNMAPPED_ADDRESS: usize = 0x10_0000_0000;

#[repr(C, align(4096))]
struct Table([u64; 512]);

const EMPTY: Table = Table([0; 512]);

struct PageTables {
    pml4: Table,
    pdpt: Table,
    pd: [Table; MAPPED_GIB],
    image: [Table; IMAGE_TABLES],
}

static TABLES: BootCell<PageTables> = BootCell::new(PageTables {
    pml4: EMPTY,
    pdpt: EMPTY,
    pd: [EMPTY; MAPPED_GIB],
    image: [EMPTY; IMAGE_TABLES],
});

/// Leaf flags for a 4 KiB page of the image region.
fn page_flags(addr: usize) -> u64 {
    match layout::page_permission(addr) {
        PagePermission::ReadExecute => PRESENT,
        PagePermission::ReadOnly => PRESENT | NO_EXECUTE,
        PagePermission::ReadWrite => PRESENT | WRITABLE | NO_EXECUTE,
    }
}

/// Builds and loads the final page tables.
pub(crate) fn init() {
    let image = layout::image();
    let split = (image.start & !(LARGE_PAGE - 1))..image.end.next_multiple_of(LARGE_PAGE);
    assert!(
        split.len() / LARGE_PAGE <= IMAGE_TABLES,
        "kernel image too large for the boot page tables"
    );
    // SAFETY: boot runs on one CPU with interrupts off, and these tables are
    // not live yet (CR3 still points at the boot stub's tables).
    let tables = unsafe { TABLES.get() };
    let mut next_image_table = 0;
    for (gib, pd) in tables.pd.iter_mut().enumerate() {
        for (index, entry) in pd.0.iter_mut().enumerate() {
            let base = (gib << 30) | (index * LARGE_PAGE);
            *entry = if split.contains(&base) {
                let table = &mut tables.image[next_image_table];
                next_image_table += 1;
                for (page, pte) in table.0.iter_mut().enumerate() {
                    let addr = base + page * PAGE;
                    *pte = addr as u64 | page_flags(addr);
                }
                table as *const Table as u64 | PRESENT | WRITABLE
            } else if base >= MMIO_HOLE {
                base as u64 | PRESENT | WRITABLE | HUGE | NO_EXECUTE | NO_CACHE | WRITE_THROUGH
            } else {
                base as u64 | PRESENT | WRITABLE | HUGE | NO_EXECUTE
            };
        }
        tables.pdpt.0[gib] = pd as *const Table as u64 | PRESENT | WRITABLE;
    }
    tables.pml4.0[0] = &tables.pdpt as *const Table as u64 | PRESENT | WRITABLE;
    let frame = PhysFrame::containing_address(PhysAddr::new(&tables.pml4 as *const Table as u64));
    // SAFETY: the new tables identity-map everything the kernel uses (image,
    // stacks, heap, devices) at the same addresses as the boot tables, so
    // execution continues seamlessly after the switch.
    unsafe { Cr3::write(frame, Cr3Flags::empty()) };
}

/// Copies `len` bytes from `src` to `dst`; returns how many were *not* copied
/// (0 on success). A fault on the source stops the copy instead of crashing:
/// `rep movsb` leaves the remaining count in RCX, and the exception table
/// resumes at the return with that count.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes.
#[unsafe(naked)]
pub unsafe extern "C" fn copy_nofault(dst: *mut u8, src: *const u8, len: usize) -> usize {
    naked_asm!(
        "mov rcx, rdx",
        "2:",
        "rep movsb",
        "3:",
        "mov rax, rcx",
        "ret",
        ".pushsection __ex_table, \"a\"",
        ".quad 2b, 3b",
        ".popsection",
    )
}
