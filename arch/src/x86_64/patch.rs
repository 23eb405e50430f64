//! x86_64 text patching: Linux's `int3` protocol for code other CPUs may be
//! running (`smp_text_poke_batch_finish`), for a whole batch at once.
//!
//! A store of several instruction bytes is not atomic for a CPU fetching
//! them, and the SDM asks every executing CPU to serialise after code it
//! runs was modified. So, for every site of the batch together:
//!
//! 1. write `int3` (0xcc) over the first byte; synchronise every CPU;
//! 2. write the other bytes of the new instruction; synchronise;
//! 3. write the new first byte; synchronise.
//!
//! "Synchronise" is one round of IPIs to every other CPU (returning from
//! the interrupt serialises it) and a serialising instruction here: one
//! round per step for the whole batch, never per site. A CPU reaching a site
//! between steps 1 and 3 traps on the `int3`; `emulate_int3`, called first
//! by the `#BP` handler, finds the site in the published batch (a binary
//! search: the batch is sorted) and emulates the *new* instruction: a call
//! pushes its return address and goes to its target, a NOP goes past
//! itself. The `#BP` entry leaves a gap below the interrupted stack pointer
//! (see `exceptions`), so the emulated push never lands on the interrupt
//! frame. Once step 3's round is over no CPU can be inside the handler any
//! more (an IPI waits for it), and the batch is unpublished.
//!
//! Writes go through the text alias (`mm::text_alias`); x86 keeps
//! instruction fetch coherent with those stores, so nothing else is needed
//! per write. The batch ends with a CR3 reload (dropping the alias).

use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

pub(crate) use super::mm::{map_text_alias, text_alias, unmap_text_alias};
use super::regs::PtRegs;
use crate::text::{pause, write_in_place, Patch, PausePoint};

const INT3: u8 = 0xcc;
const CALL: u8 = 0xe8;

/// The batch being applied, for the `#BP` handler.
static BATCH: AtomicPtr<Patch> = AtomicPtr::new(core::ptr::null_mut());
static BATCH_LEN: AtomicUsize = AtomicUsize::new(0);

/// Makes a write of `len` bytes at text address `addr` visible to
/// instruction fetch: nothing to do on x86_64.
pub(crate) fn after_write(_addr: usize, _len: usize) {}

/// Ends a batch (after `unmap_text_alias`'s serialising CR3 reload).
pub(crate) fn finish_batch() {}

/// Every CPU serialised: one cross-CPU round and this CPU's own.
fn sync_all_cpus() {
    crate::smp::sync_all();
}

/// Applies `patches` (sorted by address, each one instruction) with the
/// `int3` protocol. See the module documentation.
pub(crate) fn apply_instructions(patches: &[Patch]) {
    if patches.is_empty() {
        return;
    }
    BATCH_LEN.store(patches.len(), Ordering::Relaxed);
    BATCH.store(patches.as_ptr() as *mut Patch, Ordering::Release);
    for patch in patches {
        write_in_place(patch.addr, &[INT3]);
    }
    sync_all_cpus();
    pause(PausePoint::BreakpointsIn, patches);
    for patch in patches.iter().filter(|patch| patch.len > 1) {
        write_in_place(patch.addr + 1, &patch.new_bytes()[1..]);
    }
    pause(PausePoint::TailsWritten, patches);
    sync_all_cpus();
    pause(PausePoint::BeforeFirstBytes, patches);
    for patch in patches {
        write_in_place(patch.addr, &patch.new_bytes()[..1]);
    }
    pause(PausePoint::FirstBytesWritten, patches);
    sync_all_cpus();
    BATCH.store(core::ptr::null_mut(), Ordering::Release);
    BATCH_LEN.store(0, Ordering::Relaxed);
}

/// Forgets a batch whose owner was abandoned mid-way (tests).
pub(crate) fn abandon() {
    BATCH.store(core::ptr::null_mut(), Ordering::Release);
}

/// Called first by the `#BP` handler: if the `int3` at `regs.rip - 1` is a
/// site the batch being applied is changing, emulates the site's new
/// instruction and answers true.
///
/// If no `int3` is there any more, the CPU ran a stale copy of one: real
/// CPUs cannot (the batch's last synchronisation round serialised them),
/// but QEMU's translator can keep a block translated while the `int3` was
/// in place after the byte changed back. Then the instruction now in place
/// is emulated when it is a site's call or NOP (resuming at the site would
/// run the stale copy again, for ever), and anything else resumes at the
/// site.
pub(crate) fn emulate_int3(regs: &mut PtRegs) -> bool {
    let site = regs.rip as usize - 1;
    let mut now = [0u8; 5];
    if crate::text::read(site, &mut now[..1]).is_ok() && now[0] != INT3 {
        let whole = crate::text::read(site, &mut now).is_ok();
        if whole && (now[0] == CALL || now == super::ftrace::NOP) {
            emulate(regs, site, &now);
        } else {
            regs.rip = site as u64;
        }
        return true;
    }
    let batch = BATCH.load(Ordering::Acquire);
    if batch.is_null() {
        return false;
    }
    // SAFETY: the patcher publishes a live, sorted slice and unpublishes it
    // only after a synchronisation round that this handler (interrupts
    // masked) holds up until it returns.
    let patches = unsafe { core::slice::from_raw_parts(batch, BATCH_LEN.load(Ordering::Relaxed)) };
    let Ok(index) = patches.binary_search_by_key(&site, |patch| patch.addr) else { return false };
    let patch = &patches[index];
    if patch.old[0] == INT3 || patch.new[0] == INT3 {
        // A kprobe's breakpoint going in or out: the probe stays
        // registered until the batch is over, and its handler runs the
        // instruction (which this emulation could not).
        return false;
    }
    emulate(regs, site, patch.new_bytes());
    true
}

/// Emulates `insn`, a site's instruction, at `site`: a call (push the
/// return address, go to the target) or a NOP of any length (go past it).
fn emulate(regs: &mut PtRegs, site: usize, insn: &[u8]) {
    let next = site + insn.len();
    if insn.len() == 5 && insn[0] == CALL {
        let displacement = i32::from_le_bytes([insn[1], insn[2], insn[3], insn[4]]);
        regs.rsp -= 8;
        // SAFETY: the `#BP` entry left a gap under the interrupted stack
        // pointer, so this slot is free stack (see `exceptions`).
        unsafe { *(regs.rsp as *mut u64) = next as u64 };
        regs.rip = (next as i64 + i64::from(displacement)) as u64;
    } else {
        regs.rip = next as u64;
    }
    crate::flight::record(crate::flight::Kind::Int3Emulated, site, regs.sp(), regs.ip());
}
