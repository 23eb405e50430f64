//! aarch64 text patching (the batch logic is `crate::text`).
//!
//! A site changes one whole instruction between NOP and BL, which the
//! architecture allows other CPUs to execute while it changes (ARMv8
//! "concurrent modification and execution of instructions"): every write
//! is one aligned 32-bit store through the text alias. After each write the
//! data cache line is cleaned to the point of unification and the
//! instruction cache line invalidated (`dc cvau`, `dsb ish`, `ic ivau`,
//! which the inner-shareable domain sees); the batch then waits for that
//! (`dsb ish`) and makes every CPU execute a context synchronisation event
//! (an IPI: the exception return), so none keeps running a stale copy.

use core::arch::asm;

pub(crate) use super::mm::{map_text_alias, text_alias, unmap_text_alias};
use crate::text::{write_in_place, Patch};

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

/// Applies `patches` (each one instruction): one store each, then one
/// synchronisation of every CPU for the batch.
pub(crate) fn apply_instructions(patches: &[Patch]) {
    if patches.is_empty() {
        return;
    }
    for patch in patches {
        write_in_place(patch.addr, patch.new_bytes());
        after_write(patch.addr, patch.len);
    }
    // SAFETY: barriers only: the invalidations are complete before the
    // other CPUs synchronise.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
    crate::smp::sync_all();
}

/// Ends a batch: waits for the invalidations and resynchronises fetch.
pub(crate) fn finish_batch() {
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}

/// Nothing to forget: aarch64 publishes no batch.
pub(crate) fn abandon() {}
