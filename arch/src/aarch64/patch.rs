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
//! Any other instruction is replaced while every other CPU waits (see
//! `apply_instructions`).

use core::arch::asm;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

pub(crate) use super::mm::{map_text_alias, text_alias, unmap_text_alias};
use crate::text::{pause, write_in_place, Patch, PausePoint};

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
/// synchronisation of every CPU for the batch. A batch that changes an
/// instruction the architecture does not let other CPUs run while it
/// changes (a kprobe's `brk` going in or out over an arbitrary
/// instruction) writes while every other CPU waits (`smp::stop_others`),
/// as Linux's arm64 text patching does.
pub(crate) fn apply_instructions(patches: &[Patch]) {
    if patches.is_empty() {
        return;
    }
    if patches.iter().all(|patch| concurrent_safe(patch.old_bytes()) && concurrent_safe(patch.new_bytes())) {
        write_all(patches);
        pause(PausePoint::Stored, patches);
        crate::smp::sync_all();
    } else {
        STOPPED.store(patches.as_ptr() as *mut Patch, Ordering::Release);
        STOPPED_LEN.store(patches.len(), Ordering::Release);
        crate::smp::stop_others(write_stopped);
        STOPPED.store(core::ptr::null_mut(), Ordering::Release);
    }
}

/// The batch `stop_others` writes, on whichever CPU it runs `write_stopped`.
static STOPPED: AtomicPtr<Patch> = AtomicPtr::new(core::ptr::null_mut());
static STOPPED_LEN: AtomicUsize = AtomicUsize::new(0);

fn write_stopped() {
    let batch = STOPPED.load(Ordering::Acquire);
    if batch.is_null() {
        return;
    }
    // SAFETY: `apply_instructions` publishes its live slice for the length
    // of `stop_others`, which returns only after this ran.
    write_all(unsafe { core::slice::from_raw_parts(batch, STOPPED_LEN.load(Ordering::Acquire)) });
}

/// One store and its cache maintenance per patch, then the barriers. Any
/// CPU may run it: the text alias is in the shared kernel tables.
fn write_all(patches: &[Patch]) {
    for patch in patches {
        write_in_place(patch.addr, patch.new_bytes());
        after_write(patch.addr, patch.len);
    }
    // SAFETY: barriers only: the invalidations are complete before the
    // other CPUs synchronise.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}

/// Whether `insn` is one the architecture lets other CPUs execute while it
/// is replaced by another such (ARMv8 "concurrent modification and
/// execution of instructions"): B, BL, BRK, HVC, ISB, NOP, SMC, SVC.
fn concurrent_safe(insn: &[u8]) -> bool {
    let Ok(word) = <[u8; 4]>::try_from(insn).map(u32::from_le_bytes) else { return false };
    word & 0x7c00_0000 == 0x1400_0000 // b, bl
        || word & 0xffe0_001f == 0xd420_0000 // brk
        || word & 0xffe0_001c == 0xd400_0000 && word & 3 != 0 // svc, hvc, smc
        || word == 0xd503_3fdf // isb
        || word == 0xd503_201f // nop
}

/// Ends a batch: waits for the invalidations and resynchronises fetch.
pub(crate) fn finish_batch() {
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}

/// Nothing to forget: aarch64 publishes a batch (`STOPPED`) only for the
/// length of `stop_others`, which is not abandoned mid-way.
pub(crate) fn abandon() {}
