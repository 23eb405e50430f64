//! The first Rust code on aarch64: bring the machine up, then enter the kernel.

use super::semihosting::{self, Operation};
use crate::cell::BootCell;

const CMDLINE_MAX: usize = 256;

static CMDLINE: BootCell<([u8; CMDLINE_MAX], usize)> = BootCell::new(([0; CMDLINE_MAX], 0));

/// Called by the boot stub at EL1 with the MMU off.
#[no_mangle]
extern "C" fn arch_entry() -> ! {
    crate::percpu::install(0);
    crate::percpu::set_task(0, crate::layout::boot_stack().start);
    super::exceptions::init();
    super::mm::init();
    save_cmdline();
    super::timer::init();
    crate::percpu::set_online();
    super::cpu::enable_interrupts();
    crate::enter_kernel()
}

/// Asks QEMU for the command line (`-append`) through semihosting.
fn save_cmdline() {
    // SAFETY: boot is single-threaded; nothing reads the buffer yet.
    let saved = unsafe { CMDLINE.get() };
    let mut block = [saved.0.as_mut_ptr() as u64, CMDLINE_MAX as u64];
    // SAFETY: SYS_GET_CMDLINE takes (buffer, length) and writes at most
    // `length` bytes into the buffer, then the used length into the block.
    let status = unsafe { semihosting::call(Operation::GetCommandLine, block.as_mut_ptr()) };
    if status == 0 {
        // QEMU hands over the kernel file name, then the `-append` text:
        // `key=value` lookups skip the first word naturally.
        saved.1 = (block[1] as usize).min(CMDLINE_MAX);
    }
}

/// The kernel command line (QEMU's `-append`), or "" if there is none or it
/// is not UTF-8.
pub fn cmdline() -> &'static str {
    // SAFETY: written once during boot before any reader runs.
    let (bytes, len) = unsafe { &*CMDLINE.as_ptr() };
    let text = core::str::from_utf8(&bytes[..*len]).unwrap_or("");
    text.trim_end_matches('\0')
}
