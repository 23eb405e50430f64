//! The other CPUs: found in the ACPI MADT (the PVH start info names the
//! RSDP), started with INIT-SIPI-SIPI through the real-mode trampoline, and
//! reached with inter-processor interrupts through the local APICs.
//!
//! Each application processor leaves the trampoline in long mode on the
//! boot stub's identity tables, calls [`ap_entry`] on the stack the boot
//! CPU gave it, and there sets up what every CPU has of its own (per-CPU
//! register, GDT and TSS, page tables, local APIC and timer) before it
//! enters the kernel.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use alloc::vec::Vec;
use spin::Once;

use super::{gdt, lapic, mm};
use crate::smp::Ipi;
use crate::MAX_CPUS;

/// Where the trampoline runs (its STARTUP page, 8).
const TRAMPOLINE: usize = 0x8000;

/// The local APIC ID of each CPU, by CPU number.
static APIC_IDS: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// The CPUs the MADT describes (enabled or startable), boot CPU first.
static CPUS: Once<Vec<u32>> = Once::new();

/// Maps ACPI tables: physical memory is identity mapped.
#[derive(Clone, Copy)]
struct IdentityMapped;

impl acpi::AcpiHandler for IdentityMapped {
    unsafe fn map_physical_region<T>(&self, physical_address: usize, size: usize) -> acpi::PhysicalMapping<Self, T> {
        let virtual_address = NonNull::new(physical_address as *mut T).expect("ACPI tables are not at address 0");
        // SAFETY: the first 4 GiB are identity mapped, ACPI tables included;
        // the caller vouches that a `T` lives there.
        unsafe { acpi::PhysicalMapping::new(physical_address, virtual_address, size, size, *self) }
    }

    fn unmap_physical_region<T>(_region: &acpi::PhysicalMapping<Self, T>) {}
}

/// The local APIC IDs of the CPUs, boot CPU first, from the MADT.
fn discover() -> Vec<u32> {
    let boot_id = lapic::id();
    let tables = match rsdp() {
        // SAFETY: the PVH start info names a valid RSDP.
        Some(rsdp) => unsafe { acpi::AcpiTables::from_rsdp(IdentityMapped, rsdp) },
        // SAFETY: PVH under QEMU is a BIOS platform.
        None => unsafe { acpi::AcpiTables::search_for_rsdp_bios(IdentityMapped) },
    };
    let Ok(tables) = tables else {
        crate::println!("smp: no ACPI tables; running on the boot CPU only");
        return alloc::vec![boot_id];
    };
    let Ok(platform) = tables.platform_info() else {
        crate::println!("smp: no ACPI MADT; running on the boot CPU only");
        return alloc::vec![boot_id];
    };
    if let acpi::InterruptModel::Apic(apic) = &platform.interrupt_model {
        lapic::set_base(apic.local_apic_address as usize);
    }
    let mut ids = alloc::vec![boot_id];
    if let Some(processors) = platform.processor_info {
        for processor in processors.application_processors.iter() {
            if processor.state != acpi::platform::ProcessorState::Disabled && processor.local_apic_id != boot_id {
                ids.push(processor.local_apic_id);
            }
        }
    }
    ids
}

/// How many CPUs there are (at most [`MAX_CPUS`]).
pub fn possible_cpus() -> usize {
    CPUS.call_once(discover).len().min(MAX_CPUS)
}

/// The parameter block at the end of the trampoline.
#[repr(C)]
struct TrampolineParams {
    cr3: u64,
    stack: u64,
    entry: u64,
    cpu: u64,
}

extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
    static ap_trampoline_params: u8;
    static boot_pml4: u8;
}

/// Starts CPU `cpu` on a stack whose top is `stack_top`; returns whether it
/// came up. Boot CPU, normal context, one CPU at a time.
pub fn start_cpu(cpu: usize, stack_top: usize) -> bool {
    let Some(&apic_id) = CPUS.call_once(discover).get(cpu) else { return false };
    APIC_IDS[cpu].store(apic_id, Ordering::Relaxed);
    let start = core::ptr::addr_of!(ap_trampoline_start) as usize;
    let end = core::ptr::addr_of!(ap_trampoline_end) as usize;
    let params = core::ptr::addr_of!(ap_trampoline_params) as usize - start + TRAMPOLINE;
    // SAFETY: the trampoline page below 1 MiB is free RAM the page tables
    // map writable (layout); the blob is `end - start` bytes of rodata.
    unsafe {
        core::ptr::copy_nonoverlapping(start as *const u8, TRAMPOLINE as *mut u8, end - start);
        core::ptr::write_volatile(
            params as *mut TrampolineParams,
            TrampolineParams {
                cr3: core::ptr::addr_of!(boot_pml4) as u64,
                stack: stack_top as u64,
                entry: ap_entry as *const () as u64,
                cpu: cpu as u64,
            },
        );
    }
    lapic::send_init(apic_id);
    super::timer::delay_us(10_000);
    for _ in 0..2 {
        lapic::send_startup(apic_id, (TRAMPOLINE / 4096) as u8);
        super::timer::delay_us(200);
    }
    // Up to a second: under emulation, on a busy host, a CPU may take long.
    for _ in 0..10_000 {
        if crate::percpu::is_online(cpu) {
            return true;
        }
        super::timer::delay_us(100);
    }
    false
}

/// An application processor's first Rust code, from the trampoline.
extern "C" fn ap_entry(cpu: u32) -> ! {
    let cpu = cpu as usize;
    crate::percpu::install(cpu);
    gdt::init(cpu);
    super::exceptions::load();
    mm::load();
    lapic::enable();
    lapic::start_timer();
    crate::smp::secondary_started(cpu)
}

/// Sends `ipi` to CPU `cpu`.
pub fn send_ipi(cpu: usize, ipi: Ipi) {
    lapic::send_ipi(APIC_IDS[cpu].load(Ordering::Relaxed), super::interrupts::ipi_vector(ipi));
}

/// The ACPI RSDP's address the boot information gave, where SMP discovery
/// finds the MADT (0: none given; the BIOS area is searched).
static RSDP: AtomicUsize = AtomicUsize::new(0);

/// Records where the ACPI RSDP is (the boot code, from the PVH start info).
pub(crate) fn set_rsdp(address: usize) {
    RSDP.store(address, Ordering::Relaxed);
}

fn rsdp() -> Option<usize> {
    Some(RSDP.load(Ordering::Relaxed)).filter(|&address| address != 0)
}

/// Records the boot CPU's APIC ID (CPU 0).
pub(crate) fn init_boot_cpu() {
    APIC_IDS[0].store(lapic::id(), Ordering::Relaxed);
}
