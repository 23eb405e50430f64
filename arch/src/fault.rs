//! Faults the kernel expects, and the exception table that recovers from them.
//!
//! A few routines touch memory that may not be mapped on purpose (the
//! fault-tolerant copy used by backtraces and probe argument fetches). Each
//! instruction in them that may fault has an entry in the `__ex_table` section:
//! the address of that instruction and the address to resume at. When a page
//! fault (or, on x86_64, a general protection fault) hits one of those
//! instructions, the exception handler resumes at the fixup instead of
//! reporting a crash, and records what happened here so callers and tests can
//! see the real faulting address.
//!
//! Breakpoints are counted here too: the handler reports them and resumes.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One `__ex_table` entry, as the assembly emits it.
#[repr(C)]
struct ExTableEntry {
    insn: usize,
    fixup: usize,
}

extern "C" {
    static __ex_table_start: ExTableEntry;
    static __ex_table_end: ExTableEntry;
}

/// The fixup address for a faulting instruction at `ip`, if it has one.
pub fn search_exception_table(ip: usize) -> Option<usize> {
    // SAFETY: the linker script brackets the `__ex_table` section with these
    // symbols; the section holds only `ExTableEntry` records (two addresses).
    let table = unsafe {
        let start = core::ptr::addr_of!(__ex_table_start);
        let end = core::ptr::addr_of!(__ex_table_end);
        let len = (end as usize - start as usize) / core::mem::size_of::<ExTableEntry>();
        core::slice::from_raw_parts(start, len)
    };
    table.iter().find(|entry| entry.insn == ip).map(|entry| entry.fixup)
}

/// A fault that an exception-table fixup recovered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveredFault {
    /// The instruction that faulted.
    pub ip: usize,
    /// The data address the CPU reported (CR2 / FAR_EL1); `None` when the
    /// fault carries none (an x86_64 general protection fault).
    pub address: Option<usize>,
}

static RECOVERED: AtomicU64 = AtomicU64::new(0);
static LAST_IP: AtomicUsize = AtomicUsize::new(0);
static LAST_ADDRESS: AtomicUsize = AtomicUsize::new(usize::MAX);
static BREAKPOINTS: AtomicU64 = AtomicU64::new(0);
static LAST_BREAKPOINT: AtomicUsize = AtomicUsize::new(0);

/// Called by the exception handler after redirecting to a fixup.
pub(crate) fn note_recovered(fault: RecoveredFault) {
    LAST_IP.store(fault.ip, Ordering::Relaxed);
    LAST_ADDRESS.store(fault.address.unwrap_or(usize::MAX), Ordering::Relaxed);
    RECOVERED.fetch_add(1, Ordering::Release);
}

/// How many faults fixups have recovered from since boot.
pub fn recovered_count() -> u64 {
    RECOVERED.load(Ordering::Acquire)
}

/// The most recent recovered fault, if any.
pub fn last_recovered() -> Option<RecoveredFault> {
    if recovered_count() == 0 {
        return None;
    }
    let address = LAST_ADDRESS.load(Ordering::Relaxed);
    Some(RecoveredFault { ip: LAST_IP.load(Ordering::Relaxed), address: (address != usize::MAX).then_some(address) })
}

/// Called by the exception handler for a breakpoint instruction at `ip`.
pub(crate) fn note_breakpoint(ip: usize) {
    LAST_BREAKPOINT.store(ip, Ordering::Relaxed);
    BREAKPOINTS.fetch_add(1, Ordering::Release);
}

/// Breakpoints taken since boot.
pub fn breakpoint_count() -> u64 {
    BREAKPOINTS.load(Ordering::Acquire)
}

/// The address of the most recent breakpoint instruction.
pub fn last_breakpoint() -> usize {
    LAST_BREAKPOINT.load(Ordering::Relaxed)
}

/// Copies `dst.len()` bytes from kernel address `src` into `dst` without
/// crashing on an unmapped source: `Err` carries the number of bytes that were
/// not copied. The copy runs through an exception-table-protected loop.
///
/// A source reaching into device registers ([`crate::mm::DEVICE_MEMORY`])
/// is refused whole, before any read: reading a device register can change
/// the device (acknowledge an interrupt, consume input), and a probe's
/// fetch or a backtrace must not. (Linux's `copy_from_kernel_nofault`
/// refuses what is not kernel memory the same way.)
pub fn read_nofault(src: usize, dst: &mut [u8]) -> Result<(), usize> {
    let device = crate::mm::DEVICE_MEMORY;
    let touches_device = match src.checked_add(dst.len()) {
        Some(end) => src < device.end && end > device.start,
        None => true,
    };
    if touches_device && !dst.is_empty() {
        return Err(dst.len());
    }
    // SAFETY: `dst` is a valid writable buffer of `dst.len()` bytes; the source
    // is only read, by instructions whose faults the exception table recovers.
    let left = unsafe { crate::mm::copy_nofault(dst.as_mut_ptr(), src as *const u8, dst.len()) };
    if left == 0 {
        Ok(())
    } else {
        Err(left)
    }
}

/// Reads one native-endian `u64` at `addr`, or `None` if it is not mapped.
pub fn read_u64_nofault(addr: usize) -> Option<u64> {
    let mut bytes = [0u8; 8];
    read_nofault(addr, &mut bytes).ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// Words printed around the stack pointer of an unhandled exception.
const STACK_WORDS_BELOW: usize = 8;
const STACK_WORDS_ABOVE: usize = 24;

/// Prints the stack around `sp` for an exception report: the words a bad
/// `ret` or a corrupt frame left there, each code address with its
/// function. Reads are fault tolerant; it stops at the first unreadable
/// word.
pub fn report_stack(sp: usize) {
    use core::fmt::Write;
    let mut console = crate::print::lock();
    let _ = writeln!(console, "stack around sp {sp:#x}:");
    let start = sp.saturating_sub(8 * STACK_WORDS_BELOW);
    for at in (0..STACK_WORDS_BELOW + STACK_WORDS_ABOVE).map(|i| start + 8 * i) {
        let Some(word) = read_u64_nofault(at) else { break };
        let mark = if at == sp { "sp->" } else { "    " };
        let _ = write!(console, "  {mark} {at:#x}: {word:#018x}");
        if crate::layout::text().contains(&(word as usize)) {
            let _ = write!(console, " ");
            let _ = crate::print::write_code_address(&mut console, word as usize);
        }
        let _ = writeln!(console);
    }
}
