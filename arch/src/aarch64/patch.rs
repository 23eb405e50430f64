//! aarch64 text patching primitives (the batch logic is `crate::text`).
//!
//! Writes go through the text alias (`mm::text_alias`). After every write the
//! data cache line is cleaned to the point of unification and the matching
//! instruction cache line invalidated (`dc cvau`, `dsb ish`, `ic ivau`); the
//! batch ends with one `dsb ish; isb`, so the CPU refetches patched code.

use core::arch::asm;

pub(crate) use super::mm::{map_text_alias, text_alias, unmap_text_alias};

/// Cache maintenance for a write of `len` bytes at text address `addr`
/// (written through its alias). Patches never cross a cache line.
pub(crate) fn after_write(addr: usize, _len: usize) {
    // SAFETY: cache maintenance by virtual address on mapped text; it changes
    // no memory contents.
    unsafe {
        asm!(
            "dc cvau, {data}",
            "dsb ish",
            "ic ivau, {text}",
            data = in(reg) text_alias(addr),
            text = in(reg) addr,
            options(nostack)
        );
    }
}

/// Ends a batch: waits for the invalidations and resynchronises fetch.
pub(crate) fn finish_batch() {
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}
