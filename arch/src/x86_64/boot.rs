//! The first Rust code on x86_64: bring the machine up, then enter the kernel.

use crate::cell::BootCell;

/// `hvm_start_info`, the PVH boot protocol's hand-over block (the fields we use).
#[repr(C)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    /// Version 1 on: the ACPI RSDP's physical address.
    rsdp_paddr: u64,
}

const START_INFO_MAGIC: u32 = 0x336e_c578;
const CMDLINE_MAX: usize = 256;

static CMDLINE: BootCell<([u8; CMDLINE_MAX], usize)> = BootCell::new(([0; CMDLINE_MAX], 0));

/// Called by the boot stub in long mode with the identity-mapped boot tables.
#[no_mangle]
extern "C" fn arch_entry(start_info: u32) -> ! {
    crate::percpu::install(0);
    super::console::init();
    save_start_info(start_info as usize);
    super::gdt::init(0);
    super::exceptions::init();
    super::mm::init();
    super::timer::init();
    super::cpu::enable_interrupts();
    super::timer::calibrate();
    super::timer::start_apic_timer();
    super::smp::init_boot_cpu();
    crate::percpu::set_online();
    crate::enter_kernel()
}

fn save_start_info(start_info: usize) {
    if start_info == 0 {
        return;
    }
    // SAFETY: QEMU passes the physical address of a valid `hvm_start_info`,
    // identity mapped by the boot tables; boot is single-threaded.
    let (info, saved) = unsafe { (&*(start_info as *const StartInfo), CMDLINE.get()) };
    if info.magic != START_INFO_MAGIC {
        return;
    }
    if info.version >= 1 {
        super::smp::set_rsdp(info.rsdp_paddr as usize);
    }
    if info.cmdline_paddr == 0 {
        return;
    }
    let mut len = 0;
    while len < CMDLINE_MAX {
        // SAFETY: the command line is a NUL-terminated string QEMU placed in
        // identity-mapped RAM; we stop at the NUL or at our buffer's end.
        let byte = unsafe { *((info.cmdline_paddr as usize + len) as *const u8) };
        if byte == 0 {
            break;
        }
        saved.0[len] = byte;
        len += 1;
    }
    saved.1 = len;
}

/// The kernel command line (QEMU's `-append`), or "" if there is none or it
/// is not UTF-8.
pub fn cmdline() -> &'static str {
    // SAFETY: written once during boot before any reader runs.
    let (bytes, len) = unsafe { &*CMDLINE.as_ptr() };
    core::str::from_utf8(&bytes[..*len]).unwrap_or("")
}
