//! aarch64 page tables and fault-tolerant copies.
//!
//! 4 KiB granule, 39-bit virtual addresses (T0SZ = 25), translation starting
//! at level 1, identity mapped: the first GiB (GIC, UART and other devices)
//! as Device-nGnRnE, the second GiB (RAM from 0x4000_0000) as normal
//! write-back memory in 2 MiB blocks, except the kernel image, which gets
//! 4 KiB pages so that text is read-only and executable, rodata read-only,
//! and data/bss/stack/heap read-write and never executable.
//!
//! Text is patched through a second, writable, never-executable mapping of the
//! text pages at `ALIAS_BASE` (as Linux's `text_poke` does), whose level-1
//! entry is valid only while a patch batch runs.

use core::arch::{asm, naked_asm};

use crate::cell::BootCell;
use crate::layout::{self, PagePermission};

const VALID: u64 = 1 << 0;
const TABLE: u64 = 1 << 1; // also "page" at level 3
const ATTR_DEVICE: u64 = 0 << 2; // MAIR index 0
const ATTR_NORMAL: u64 = 1 << 2; // MAIR index 1
const READ_ONLY: u64 = 1 << 7; // AP[2]
const INNER_SHAREABLE: u64 = 3 << 8;
const ACCESSED: u64 = 1 << 10;
const PRIVILEGED_NO_EXECUTE: u64 = 1 << 53;
const USER_NO_EXECUTE: u64 = 1 << 54;

const NORMAL: u64 = VALID | ATTR_NORMAL | INNER_SHAREABLE | ACCESSED | USER_NO_EXECUTE;
const DEVICE_BLOCK: u64 = VALID | ATTR_DEVICE | ACCESSED | PRIVILEGED_NO_EXECUTE | USER_NO_EXECUTE;

/// MAIR_EL1: index 0 Device-nGnRnE, index 1 normal inner/outer write-back.
#[allow(clippy::identity_op)] // attribute 0 (Device-nGnRnE) spelled out
const MAIR: u64 = 0x00 | (0xff << 8);
/// TCR_EL1: T0SZ 25, write-back cacheable inner-shareable walks, 4 KiB
/// granule, TTBR1 walks disabled (EPD1), 40-bit physical addresses.
const TCR: u64 = 25 | (1 << 8) | (1 << 10) | (3 << 12) | (25 << 16) | (1 << 23) | (0b010 << 32);
/// SCTLR_EL1: MMU, data cache, SP alignment check, instruction cache, RES1 bits.
const SCTLR: u64 = 0x30d0_0800 | (1 << 0) | (1 << 2) | (1 << 3) | (1 << 12);

const PAGE: usize = 4096;
const BLOCK: usize = 2 << 20;
const GIB: usize = 1 << 30;
const RAM_GIB: usize = 1;
/// Level-3 tables available for the kernel image: 32 MiB of image.
const IMAGE_TABLES: usize = 16;

/// Where the writable alias of the text lives while a patch batch runs
/// (level-1 slot 3: 3 GiB).
const ALIAS_BASE: usize = 3 * GIB;
const ALIAS_L1_SLOT: usize = 3;
/// Level-3 tables for the alias: 16 MiB of text.
const ALIAS_TABLES: usize = 8;

/// Device registers: the first GiB (flash, GIC, UART...), mapped
/// Device-nGnRnE from address 0. A read there can have side effects
/// (reading the GIC's acknowledge register takes an interrupt, the UART's
/// data register a received byte), so fault-tolerant reads refuse it
/// (`crate::fault::read_nofault`), and a null pointer reads as a fault.
pub const DEVICE_MEMORY: core::ops::Range<usize> = 0..GIB;

/// An address no mapping covers (64 GiB): touching it faults.
pub const UNMAPPED_ADDRESS: usize = 0x10_0000_0000;

#[repr(C, align(4096))]
struct Table([u64; 512]);

const EMPTY: Table = Table([0; 512]);

#[repr(C)]
struct PageTables {
    /// First: the tables' address is the root table's.
    level1: Table,
    ram: Table,
    image: [Table; IMAGE_TABLES],
    alias_l2: Table,
    alias: [Table; ALIAS_TABLES],
}

static TABLES: BootCell<PageTables> = BootCell::new(PageTables {
    level1: EMPTY,
    ram: EMPTY,
    image: [EMPTY; IMAGE_TABLES],
    alias_l2: EMPTY,
    alias: [EMPTY; ALIAS_TABLES],
});

/// Leaf descriptor flags for a 4 KiB page of the image region.
fn page_flags(addr: usize) -> u64 {
    match layout::page_permission(addr) {
        PagePermission::ReadExecute => NORMAL | TABLE | READ_ONLY,
        PagePermission::ReadOnly => NORMAL | TABLE | READ_ONLY | PRIVILEGED_NO_EXECUTE,
        PagePermission::ReadWrite => NORMAL | TABLE | PRIVILEGED_NO_EXECUTE,
        PagePermission::None => 0,
    }
}

/// Builds the page tables and turns the MMU and caches on.
pub(crate) fn init() {
    let image = layout::image();
    let split = (image.start & !(BLOCK - 1))..image.end.next_multiple_of(BLOCK);
    assert!(split.len() / BLOCK <= IMAGE_TABLES, "kernel image too large for the boot page tables");
    // SAFETY: boot runs on one CPU with the MMU off; nothing uses these yet.
    let tables = unsafe { TABLES.get() };
    tables.level1.0[0] = DEVICE_BLOCK; // 0..1 GiB: devices, block at address 0
    let mut next_image_table = 0;
    for (index, entry) in tables.ram.0.iter_mut().enumerate() {
        let base = RAM_GIB * GIB + index * BLOCK;
        *entry = if split.contains(&base) {
            let table = &mut tables.image[next_image_table];
            next_image_table += 1;
            for (page, pte) in table.0.iter_mut().enumerate() {
                let addr = base + page * PAGE;
                *pte = addr as u64 | page_flags(addr);
            }
            table as *const Table as u64 | VALID | TABLE
        } else {
            base as u64 | NORMAL | PRIVILEGED_NO_EXECUTE
        };
    }
    tables.level1.0[RAM_GIB] = &tables.ram as *const Table as u64 | VALID | TABLE;
    build_text_alias(tables);
    enable();
}

/// Turns this CPU's MMU and caches on with the kernel's tables (built by
/// `init` on the boot CPU).
pub(crate) fn enable() {
    let root = TABLES.as_ptr() as u64;
    // SAFETY: the tables identity-map everything the kernel touches (image,
    // stacks, heap, devices), so turning translation on changes no address.
    // `level1` is the first field of `PageTables`, so `TABLES`' address is
    // the root table's.
    unsafe {
        asm!(
            "msr mair_el1, {mair}",
            "msr tcr_el1, {tcr}",
            "msr ttbr0_el1, {root}",
            "isb",
            "tlbi vmalle1",
            "dsb ish",
            "isb",
            "msr sctlr_el1, {sctlr}",
            "isb",
            mair = in(reg) MAIR,
            tcr = in(reg) TCR,
            root = in(reg) root,
            sctlr = in(reg) SCTLR,
            options(nostack)
        );
    }
}

/// Fills the alias tables: text page `i` at `ALIAS_BASE + i * 4 KiB`,
/// writable and never executable. The level-1 slot stays empty for now.
fn build_text_alias(tables: &mut PageTables) {
    let text = layout::text();
    let pages = text.len().div_ceil(PAGE);
    assert!(pages <= ALIAS_TABLES * 512, "kernel text too large for the patching alias");
    for (index, table) in tables.alias.iter_mut().enumerate() {
        for (slot, pte) in table.0.iter_mut().enumerate() {
            let page = index * 512 + slot;
            if page < pages {
                *pte = (text.start + page * PAGE) as u64 | NORMAL | TABLE | PRIVILEGED_NO_EXECUTE;
            }
        }
        tables.alias_l2.0[index] = table as *const Table as u64 | VALID | TABLE;
    }
}

/// Makes the writable text alias visible. Only the patch batch calls this,
/// with interrupts masked.
pub(crate) fn map_text_alias() {
    // SAFETY: one word of the live level-1 table, written by the only
    // patcher (the batch is exclusive and runs with interrupts masked); the
    // barriers make the walker see it before the first alias access.
    unsafe {
        let level1 = &mut TABLES.get().level1;
        let l2 = &TABLES.get().alias_l2 as *const Table as u64;
        core::ptr::write_volatile(&mut level1.0[ALIAS_L1_SLOT], l2 | VALID | TABLE);
        asm!("dsb ishst", "isb", options(nostack));
    }
}

/// Removes the text alias and invalidates every CPU's TLB entries for it.
pub(crate) fn unmap_text_alias() {
    // SAFETY: as for `map_text_alias`; after the TLB invalidation no
    // translation of the alias survives.
    unsafe {
        core::ptr::write_volatile(&mut TABLES.get().level1.0[ALIAS_L1_SLOT], 0);
        // Broadcast: no CPU keeps a translation of the alias.
        asm!("dsb ishst", "tlbi vmalle1is", "dsb ish", "isb", options(nostack));
    }
}

/// The alias address of text address `addr`.
pub(crate) fn text_alias(addr: usize) -> usize {
    ALIAS_BASE + (addr - layout::text().start)
}

/// Copies `len` bytes from `src` to `dst`; returns how many were *not* copied
/// (0 on success). A fault on the source stops the copy instead of crashing:
/// the faulting load has an exception-table entry that resumes at the return
/// with the remaining count still in x2.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes.
#[unsafe(naked)]
pub unsafe extern "C" fn copy_nofault(dst: *mut u8, src: *const u8, len: usize) -> usize {
    naked_asm!(
        "cbz x2, 3f",
        "2:",
        "ldrb w3, [x1], #1",
        "strb w3, [x0], #1",
        "subs x2, x2, #1",
        "b.ne 2b",
        "3:",
        "mov x0, x2",
        "ret",
        ".pushsection __ex_table, \"a\"",
        ".quad 2b, 3b",
        ".popsection",
    )
}
