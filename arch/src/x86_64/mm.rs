//! x86_64 page tables and fault-tolerant copies.
//!
//! The final page tables identity-map the first 4 GiB. 2 MiB pages cover
//! everything except the kernel image, which gets 4 KiB pages so that each
//! range has its own permissions: text read-only and executable, rodata
//! read-only, data/bss/stack/heap read-write and non-executable. No page is
//! ever writable and executable; CR0.WP makes read-only binding for the kernel
//! itself. The 3-4 GiB hole (local APIC, I/O APIC) is mapped uncached.
//!
//! Text is patched through a second, writable, non-executable mapping of the
//! text pages at `ALIAS_BASE` (as Linux's `text_poke` does). Its tables are
//! built at boot but hang off a PML4 slot that is present only while a patch
//! batch runs (`map_text_alias` / `unmap_text_alias`).

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

/// Where the writable alias of the text lives while a patch batch runs
/// (PML4 slot 2: 1 TiB).
const ALIAS_BASE: usize = 0x100_0000_0000;
const ALIAS_PML4_SLOT: usize = 2;
/// 4 KiB tables for the alias: 16 MiB of text.
const ALIAS_TABLES: usize = 8;

/// Device registers: the 3-4 GiB hole (local APIC, I/O APIC), mapped
/// uncached. A read there can have side effects, so fault-tolerant reads
/// refuse it (`crate::fault::read_nofault`).
pub const DEVICE_MEMORY: core::ops::Range<usize> = MMIO_HOLE..MAPPED_GIB << 30;

/// An address no mapping covers (64 GiB): touching it page-faults.
pub const UNMAPPED_ADDRESS: usize = 0x10_0000_0000;

#[repr(C, align(4096))]
struct Table([u64; 512]);

const EMPTY: Table = Table([0; 512]);

#[repr(C)]
struct PageTables {
    /// First: the tables' address is the PML4's.
    pml4: Table,
    pdpt: Table,
    pd: [Table; MAPPED_GIB],
    image: [Table; IMAGE_TABLES],
    alias_pdpt: Table,
    alias_pd: Table,
    alias: [Table; ALIAS_TABLES],
}

static TABLES: BootCell<PageTables> = BootCell::new(PageTables {
    pml4: EMPTY,
    pdpt: EMPTY,
    pd: [EMPTY; MAPPED_GIB],
    image: [EMPTY; IMAGE_TABLES],
    alias_pdpt: EMPTY,
    alias_pd: EMPTY,
    alias: [EMPTY; ALIAS_TABLES],
});

/// Leaf flags for a 4 KiB page of the image region.
fn page_flags(addr: usize) -> u64 {
    match layout::page_permission(addr) {
        PagePermission::ReadExecute => PRESENT,
        PagePermission::ReadOnly => PRESENT | NO_EXECUTE,
        PagePermission::ReadWrite => PRESENT | WRITABLE | NO_EXECUTE,
        PagePermission::None => 0,
    }
}

/// Makes sure RAM is write-back cacheable. The PVH entry leaves memory types
/// to the kernel: firmware normally enables the MTRRs (QEMU's SeaBIOS does),
/// but if nothing did, every access would be uncached, which TCG hides (it
/// models no caches) and hardware virtualization does not. So if the MTRRs
/// are off, turn them on with write-back as the default type (the device hole
/// stays uncached through its page-table bits). The boot stub already cleared
/// CR0.CD and CR0.NW.
fn enable_write_back_caching() {
    use x86_64::registers::model_specific::Msr;
    const IA32_MTRR_DEF_TYPE: u32 = 0x2ff;
    const MTRR_ENABLE: u64 = 1 << 11;
    const WRITE_BACK: u64 = 6;
    if core::arch::x86_64::__cpuid(1).edx & (1 << 12) == 0 {
        return; // no MTRRs
    }
    let mut def_type = Msr::new(IA32_MTRR_DEF_TYPE);
    // SAFETY: MTRRs exist (CPUID). Only a disabled set is changed, to the
    // write-back default the kernel assumes for all of RAM.
    unsafe {
        if def_type.read() & MTRR_ENABLE == 0 {
            def_type.write(MTRR_ENABLE | WRITE_BACK);
        }
    }
}

/// Builds and loads the final page tables.
pub(crate) fn init() {
    let image = layout::image();
    let split = (image.start & !(LARGE_PAGE - 1))..image.end.next_multiple_of(LARGE_PAGE);
    assert!(split.len() / LARGE_PAGE <= IMAGE_TABLES, "kernel image too large for the boot page tables");
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
    build_text_alias(tables);
    load();
}

/// Switches this CPU to the kernel's page tables (built by `init` on the
/// boot CPU), with write-back caching enabled.
pub(crate) fn load() {
    enable_write_back_caching();
    let frame = PhysFrame::containing_address(PhysAddr::new(TABLES.as_ptr() as u64));
    // SAFETY: the tables identity-map everything the kernel uses (image,
    // stacks, heap, devices) at the same addresses as the boot tables, so
    // execution continues seamlessly after the switch. `pml4` is the first
    // field of `PageTables`, so `TABLES`' address is the PML4's.
    unsafe { Cr3::write(frame, Cr3Flags::empty()) };
}

/// Fills the alias tables: text page `i` at `ALIAS_BASE + i * 4 KiB`,
/// writable and never executable. The PML4 slot stays empty for now.
fn build_text_alias(tables: &mut PageTables) {
    let text = layout::text();
    let pages = text.len().div_ceil(PAGE);
    assert!(pages <= ALIAS_TABLES * 512, "kernel text too large for the patching alias");
    for (index, table) in tables.alias.iter_mut().enumerate() {
        for (slot, pte) in table.0.iter_mut().enumerate() {
            let page = index * 512 + slot;
            if page < pages {
                *pte = (text.start + page * PAGE) as u64 | PRESENT | WRITABLE | NO_EXECUTE;
            }
        }
        tables.alias_pd.0[index] = table as *const Table as u64 | PRESENT | WRITABLE;
    }
    tables.alias_pdpt.0[0] = &tables.alias_pd as *const Table as u64 | PRESENT | WRITABLE;
}

/// Makes the writable text alias visible. Only the patch batch calls this,
/// with interrupts masked.
pub(crate) fn map_text_alias() {
    // SAFETY: one word of the live PML4, written by the only patcher (the
    // batch is exclusive and runs with interrupts masked). A not-present
    // entry is never cached, so no flush is needed to make it present.
    unsafe {
        let pml4 = &mut TABLES.get().pml4;
        let pdpt = &TABLES.get().alias_pdpt as *const Table as u64;
        core::ptr::write_volatile(&mut pml4.0[ALIAS_PML4_SLOT], pdpt | PRESENT | WRITABLE);
    }
}

/// Removes the text alias and flushes the TLB. Reloading CR3 also
/// serializes the CPU, so it fetches the patched instructions afresh.
pub(crate) fn unmap_text_alias() {
    // SAFETY: as for `map_text_alias`; the CR3 reload reinstalls the same
    // tables, dropping every cached translation of the alias.
    unsafe {
        core::ptr::write_volatile(&mut TABLES.get().pml4.0[ALIAS_PML4_SLOT], 0);
        let (frame, flags) = Cr3::read();
        Cr3::write(frame, flags);
    }
}

/// The alias address of text address `addr`.
pub(crate) fn text_alias(addr: usize) -> usize {
    ALIAS_BASE + (addr - layout::text().start)
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
