//! The other CPUs: found in the device tree QEMU passes (at the start of
//! RAM for an ELF kernel), started with PSCI `CPU_ON` through the conduit
//! the tree names (`hvc` or `smc`), and reached with GIC software-generated
//! interrupts.
//!
//! A secondary CPU starts at `_start_secondary` (boot stub) with the MMU
//! off and its number in x0; the stub loads the stack the boot CPU left in
//! [`secondary_stack_tops`] (cleaned to memory first: the secondary reads it
//! with caches off) and calls [`arch_secondary_entry`].

use core::sync::atomic::{AtomicUsize, Ordering};

use alloc::vec::Vec;
use spin::Once;

use crate::smp::Ipi;
use crate::MAX_CPUS;

/// Where QEMU puts the device tree for an ELF kernel: the start of RAM.
const DEVICE_TREE: usize = 0x4000_0000;
const FDT_MAGIC: u32 = 0xd00d_feed;

const PSCI_CPU_ON: u64 = 0xc400_0003;

/// How PSCI calls reach the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conduit {
    Hvc,
    Smc,
}

struct Platform {
    conduit: Conduit,
    /// MPIDR affinity of each CPU, boot CPU first.
    mpidrs: Vec<u64>,
}

static PLATFORM: Once<Platform> = Once::new();

/// The stack each secondary CPU starts on, read by the boot stub.
#[no_mangle]
static secondary_stack_tops: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];

fn this_mpidr() -> u64 {
    let mpidr: u64;
    // SAFETY: reads a system register.
    unsafe { core::arch::asm!("mrs {}, mpidr_el1", out(reg) mpidr, options(nomem, nostack)) };
    mpidr & 0xff_00ff_ffff
}

fn discover() -> Platform {
    let me = this_mpidr();
    let alone = Platform { conduit: Conduit::Hvc, mpidrs: alloc::vec![me] };
    // SAFETY: the start of RAM is mapped; reading the magic word is harmless.
    let magic = u32::from_be(unsafe { core::ptr::read_volatile(DEVICE_TREE as *const u32) });
    if magic != FDT_MAGIC {
        crate::println!("smp: no device tree at {DEVICE_TREE:#x}; running on the boot CPU only");
        return alone;
    }
    // SAFETY: a device tree header is there (magic checked); QEMU wrote a
    // whole tree, which nothing overwrites.
    let Ok(tree) = (unsafe { fdt::Fdt::from_ptr(DEVICE_TREE as *const u8) }) else { return alone };
    let conduit = match tree.find_node("/psci").and_then(|node| node.property("method")).and_then(|p| p.as_str()) {
        Some("smc") => Conduit::Smc,
        Some("hvc") => Conduit::Hvc,
        _ => {
            crate::println!("smp: no PSCI in the device tree; running on the boot CPU only");
            return alone;
        }
    };
    let mut mpidrs = alloc::vec![me];
    mpidrs.extend(tree.cpus().map(|cpu| cpu.ids().first() as u64).filter(|&id| id != me));
    Platform { conduit, mpidrs }
}

/// How many CPUs there are (at most [`MAX_CPUS`]).
pub fn possible_cpus() -> usize {
    PLATFORM.call_once(discover).mpidrs.len().min(MAX_CPUS)
}

fn psci(conduit: Conduit, function: u64, a: u64, b: u64, c: u64) -> i64 {
    let result: i64;
    // SAFETY: a PSCI call into the firmware (QEMU), following the SMC
    // calling convention: x0-x3 in, x0 out, x4-x17 may be clobbered.
    unsafe {
        match conduit {
            Conduit::Hvc => core::arch::asm!("hvc #0", inout("x0") function as i64 => result, inout("x1") a => _,
                inout("x2") b => _, inout("x3") c => _, out("x4") _, out("x5") _, out("x6") _, out("x7") _,
                out("x8") _, out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _,
                out("x15") _, out("x16") _, out("x17") _, options(nostack)),
            Conduit::Smc => core::arch::asm!("smc #0", inout("x0") function as i64 => result, inout("x1") a => _,
                inout("x2") b => _, inout("x3") c => _, out("x4") _, out("x5") _, out("x6") _, out("x7") _,
                out("x8") _, out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _,
                out("x15") _, out("x16") _, out("x17") _, options(nostack)),
        }
    }
    result
}

extern "C" {
    fn _start_secondary();
}

/// Starts CPU `cpu` on a stack whose top is `stack_top`; returns whether it
/// came up. Boot CPU, normal context.
pub fn start_cpu(cpu: usize, stack_top: usize) -> bool {
    let platform = PLATFORM.call_once(discover);
    let Some(&mpidr) = platform.mpidrs.get(cpu) else { return false };
    let slot = &secondary_stack_tops[cpu];
    slot.store(stack_top, Ordering::Release);
    // SAFETY: cleans the slot's cache line to memory, where the secondary
    // (caches off) reads it; no memory contents change.
    unsafe { core::arch::asm!("dc civac, {}", "dsb sy", in(reg) slot.as_ptr(), options(nostack)) };
    let entry = _start_secondary as *const () as u64;
    let status = psci(platform.conduit, PSCI_CPU_ON, mpidr, entry, cpu as u64);
    if status != 0 {
        crate::println!("smp: PSCI CPU_ON for CPU {cpu} (MPIDR {mpidr:#x}) failed with {status}");
        return false;
    }
    // Up to a second: under emulation, on a busy host, a CPU may take long.
    let deadline = super::timer::cycles() + super::timer::cycles_per_second();
    while super::timer::cycles() < deadline {
        if crate::percpu::is_online(cpu) {
            return true;
        }
        core::hint::spin_loop();
    }
    crate::percpu::is_online(cpu)
}

/// A secondary CPU's first Rust code, from the boot stub (MMU still off).
#[no_mangle]
extern "C" fn arch_secondary_entry(cpu: usize) -> ! {
    crate::percpu::install(cpu);
    super::exceptions::init();
    super::mm::enable();
    super::timer::init_cpu();
    crate::smp::secondary_started(cpu)
}

/// Sends `ipi` to CPU `cpu`.
pub fn send_ipi(cpu: usize, ipi: Ipi) {
    super::gic::send_sgi(cpu, super::interrupts::sgi(ipi));
}
