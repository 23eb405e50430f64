//! aarch64 single-step (see `crate::step`): the software step state
//! machine. MDSCR_EL1.SS and KDE are set on every CPU when it comes up
//! ([`init_cpu`]), so a context steps exactly when its debug exceptions are
//! unmasked (PSTATE.D clear); the kernel otherwise always runs with D set
//! (every exception entry sets it). After each instruction the CPU takes a
//! software step exception with SPSR_EL1.SS clear; the handler sets it
//! again ([`rearm`]) to step the next one. Exclusive loads and stores are
//! carried out by the handler ([`emulate_exclusive`]): see below.

use core::arch::asm;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use super::regs::PtRegs;
use crate::MAX_CPUS;

/// SPSR_EL1.SS: step the next instruction.
const SPSR_SS: u64 = 1 << 21;
/// MDSCR_EL1.SS (software step enable) and KDE (debug exceptions at EL1).
const MDSCR_SS: u64 = 1 << 0;
const MDSCR_KDE: u64 = 1 << 13;

/// Turns stepping on in the calling code: unmasks debug exceptions, which
/// takes a step exception at once (active-pending), then one after every
/// instruction.
#[inline(always)]
pub fn begin() {
    // SAFETY: unmasks debug exceptions; the step handler takes each one.
    unsafe { asm!("msr daifclr, #8", options(nomem, nostack, preserves_flags)) };
}

/// Turns stepping off: masks debug exceptions again.
#[inline(always)]
pub fn end() {
    // SAFETY: masks debug exceptions, as the kernel runs otherwise.
    unsafe { asm!("msr daifset, #8", options(nomem, nostack, preserves_flags)) };
}

/// Enables software step on this CPU for contexts with debug exceptions
/// unmasked (none but [`begin`]'s): clears the OS lock, which holds debug
/// exceptions off after reset, and sets MDSCR_EL1.KDE and SS.
pub(crate) fn init_cpu() {
    // SAFETY: debug configuration of this CPU; with PSTATE.D set, as the
    // kernel runs, it changes nothing until a context unmasks D.
    unsafe {
        asm!(
            "msr oslar_el1, xzr",
            "mrs {t}, mdscr_el1",
            "orr {t}, {t}, {bits}",
            "msr mdscr_el1, {t}",
            "isb",
            t = out(reg) _,
            bits = in(reg) MDSCR_SS | MDSCR_KDE,
            options(nomem, nostack, preserves_flags)
        )
    };
}

/// Whether ESR_EL1's exception class is a software step from EL1.
pub(crate) fn is_step(esr: u64) -> bool {
    (esr >> 26) & 0x3f == 0x33
}

/// Steps the next instruction of the context returned to.
pub(crate) fn rearm(regs: &mut PtRegs) {
    regs.pstate |= SPSR_SS;
}

// ---- exclusive loads and stores ----
//
// A load-exclusive and its store-exclusive (the LL/SC loops every atomic
// read-modify-write compiles to on ARMv8.0) never succeed when stepped: the
// exception return between them clears the exclusive monitor, the store
// fails, and the loop retries for ever. So the step handler carries them
// out itself, as emulators do: it notes where a stepped exclusive load read
// and what it got (the reservation), and performs the store-exclusive as a
// compare-and-swap against that value, writing its status register and
// stepping over it. The swap is atomic, so the loop's atomicity holds (a
// value changed and changed back in between goes unnoticed, which only
// matters to code that uses LL/SC to detect that, and the kernel's does
// not). A reservation belongs to one CPU and one stack (the sequence's
// stack pointer): a sequence moved to another CPU in between, or a store
// without a matching load, fails, and its loop retries, as on hardware.

/// An exclusive access: its target register, base register, size in bytes,
/// and for a store its status register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exclusive {
    load: bool,
    rt: usize,
    rn: usize,
    rs: usize,
    size: usize,
}

/// Decodes `insn` as a single-register load- or store-exclusive (LDXR,
/// LDAXR, STXR, STLXR and their byte and halfword forms; not the pairs,
/// which the kernel does not use: they are stepped as they are).
fn exclusive(insn: u32) -> Option<Exclusive> {
    // size 001000 o2=0 L o1=0 Rs o0 Rt2 Rn Rt
    if insn & 0x3fa0_0000 != 0x0800_0000 {
        return None;
    }
    Some(Exclusive {
        load: insn & (1 << 22) != 0,
        rt: (insn & 0x1f) as usize,
        rn: ((insn >> 5) & 0x1f) as usize,
        rs: ((insn >> 16) & 0x1f) as usize,
        size: 1 << (insn >> 30),
    })
}

/// Per CPU: a stepped exclusive load waiting for its result (the target
/// register + 1, 0: none), and the reservation it made (address, size,
/// value, the sequence's stack pointer; size 0: none).
static PENDING_RT: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];
static PENDING: [[AtomicUsize; 3]; MAX_CPUS] = [const { [const { AtomicUsize::new(0) }; 3] }; MAX_CPUS];
static RESERVED: [[AtomicUsize; 4]; MAX_CPUS] = [const { [const { AtomicUsize::new(0) }; 4] }; MAX_CPUS];

fn base(regs: &PtRegs, rn: usize) -> usize {
    if rn == 31 {
        regs.sp()
    } else {
        regs.regs[rn] as usize
    }
}

fn width_mask(size: usize) -> u64 {
    if size == 8 {
        u64::MAX
    } else {
        (1 << (8 * size)) - 1
    }
}

/// Compares `expected` with the `size` bytes at `address` and stores `new`
/// there if they are equal, atomically.
///
/// # Safety
/// `address` is where a stepped store-exclusive of that size was about to
/// store: aligned, mapped and writable, as that store requires.
unsafe fn compare_and_swap(address: usize, size: usize, expected: u64, new: u64) -> bool {
    let (o, f) = (Ordering::SeqCst, Ordering::SeqCst);
    // SAFETY: the caller's promise.
    unsafe {
        match size {
            1 => AtomicU8::from_ptr(address as *mut u8).compare_exchange(expected as u8, new as u8, o, f).is_ok(),
            2 => AtomicU16::from_ptr(address as *mut u16).compare_exchange(expected as u16, new as u16, o, f).is_ok(),
            4 => AtomicU32::from_ptr(address as *mut u32).compare_exchange(expected as u32, new as u32, o, f).is_ok(),
            _ => AtomicU64::from_ptr(address as *mut u64).compare_exchange(expected, new, o, f).is_ok(),
        }
    }
}

/// After a step's hook, before the context resumes: completes the
/// reservation of an exclusive load stepped just before, notes one about to
/// be stepped, or carries out a store-exclusive about to run (see above).
pub(crate) fn emulate_exclusive(regs: &mut PtRegs) {
    let cpu = crate::percpu::this().cpu;
    let pending = PENDING_RT[cpu].swap(0, Ordering::Relaxed);
    if pending != 0 {
        let [address, size, sp] = PENDING[cpu].each_ref().map(|word| word.load(Ordering::Relaxed));
        let value = regs.regs[pending - 1] & width_mask(size);
        for (word, v) in RESERVED[cpu].iter().zip([address, size, value as usize, sp]) {
            word.store(v, Ordering::Relaxed);
        }
    }
    let mut insn = [0u8; 4];
    if crate::text::read(regs.ip(), &mut insn).is_err() {
        return;
    }
    let Some(access) = exclusive(u32::from_le_bytes(insn)) else { return };
    let address = base(regs, access.rn);
    if access.load {
        for (word, v) in PENDING[cpu].iter().zip([address, access.size, regs.sp()]) {
            word.store(v, Ordering::Relaxed);
        }
        PENDING_RT[cpu].store(access.rt + 1, Ordering::Relaxed);
        return;
    }
    let [reserved, size, value, sp] = RESERVED[cpu].each_ref().map(|word| word.swap(0, Ordering::Relaxed));
    let new = if access.rt == 31 { 0 } else { regs.regs[access.rt] & width_mask(access.size) };
    // SAFETY: the stepped code was about to store there itself.
    let stored = (reserved, size, sp) == (address, access.size, regs.sp())
        && unsafe { compare_and_swap(address, access.size, value as u64, new) };
    if access.rs != 31 {
        // The status is a W register: 0 stored, 1 failed.
        regs.regs[access.rs] = u64::from(!stored);
    }
    regs.set_ip(regs.ip() + 4);
}
