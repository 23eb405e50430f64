//! The local APIC of each CPU (xAPIC, memory-mapped): its timer, the
//! end-of-interrupt register and inter-processor interrupts.
//!
//! The register page sits at the address the ACPI MADT names (0xfee0_0000 on
//! QEMU), which the page tables map uncached. Every CPU sees its own APIC
//! there. The legacy PIC stays wired to the boot CPU's LINT0 (virtual-wire
//! mode, as the firmware left it) for the UART; the PIT is masked once the
//! APIC timers run.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

const DEFAULT_BASE: usize = 0xfee0_0000;
static BASE: AtomicUsize = AtomicUsize::new(DEFAULT_BASE);

const ID: usize = 0x20;
const TASK_PRIORITY: usize = 0x80;
const EOI: usize = 0xb0;
const SPURIOUS: usize = 0xf0;
const ICR_LOW: usize = 0x300;
const ICR_HIGH: usize = 0x310;
const LVT_TIMER: usize = 0x320;
const TIMER_INITIAL: usize = 0x380;
const TIMER_CURRENT: usize = 0x390;
const TIMER_DIVIDE: usize = 0x3e0;

const SOFTWARE_ENABLE: u32 = 1 << 8;
const TIMER_PERIODIC: u32 = 1 << 17;
const MASKED: u32 = 1 << 16;
const DIVIDE_BY_16: u32 = 0b0011;
const DELIVERY_PENDING: u32 = 1 << 12;
const LEVEL_ASSERT: u32 = 1 << 14;
const DELIVERY_INIT: u32 = 0b101 << 8;
const DELIVERY_STARTUP: u32 = 0b110 << 8;

/// The spurious-interrupt vector.
pub(crate) const SPURIOUS_VECTOR: u8 = 0xff;
/// The timer's vector.
pub(crate) const TIMER_VECTOR: u8 = 0x40;

/// APIC timer counts per tick, measured once on the boot CPU.
static COUNTS_PER_TICK: AtomicU32 = AtomicU32::new(0);

fn read(register: usize) -> u32 {
    // SAFETY: a register of this CPU's local APIC, mapped uncached.
    unsafe { core::ptr::read_volatile((BASE.load(Ordering::Relaxed) + register) as *const u32) }
}

fn write(register: usize, value: u32) {
    // SAFETY: as for `read`.
    unsafe { core::ptr::write_volatile((BASE.load(Ordering::Relaxed) + register) as *mut u32, value) }
}

/// Records where the APIC registers are (from the MADT).
pub(crate) fn set_base(address: usize) {
    BASE.store(address, Ordering::Relaxed);
}

/// This CPU's APIC ID.
pub(crate) fn id() -> u32 {
    read(ID) >> 24
}

/// Enables this CPU's APIC: software enable with the spurious vector, every
/// priority accepted.
pub(crate) fn enable() {
    write(SPURIOUS, SOFTWARE_ENABLE | u32::from(SPURIOUS_VECTOR));
    write(TASK_PRIORITY, 0);
}

/// Signals the end of the interrupt being handled.
pub(crate) fn end_of_interrupt() {
    write(EOI, 0);
}

/// Measures the timer against `wait_ticks`, which must wait for as long as
/// that many ticks take. Boot CPU, interrupts on.
pub(crate) fn calibrate(wait_ticks: impl FnOnce(u64), ticks: u64) {
    write(TIMER_DIVIDE, DIVIDE_BY_16);
    write(LVT_TIMER, MASKED);
    write(TIMER_INITIAL, u32::MAX);
    wait_ticks(ticks);
    let elapsed = u32::MAX - read(TIMER_CURRENT);
    write(TIMER_INITIAL, 0);
    COUNTS_PER_TICK.store((u64::from(elapsed) / ticks).max(1) as u32, Ordering::Relaxed);
}

/// Starts this CPU's periodic tick at `crate::time::HZ` (after
/// [`calibrate`] measured a tick of that rate).
pub(crate) fn start_timer() {
    write(TIMER_DIVIDE, DIVIDE_BY_16);
    write(LVT_TIMER, TIMER_PERIODIC | u32::from(TIMER_VECTOR));
    write(TIMER_INITIAL, COUNTS_PER_TICK.load(Ordering::Relaxed));
}

/// Sends `command` to the CPU with APIC ID `apic_id`. Interrupts are
/// masked throughout: the destination and the command are two register
/// writes, and an interrupt handler sending an IPI of its own in between
/// (the tick waking a task on another CPU) would redirect this one.
fn send(apic_id: u32, command: u32) {
    let _irq = crate::irq::IrqGuard::new();
    while read(ICR_LOW) & DELIVERY_PENDING != 0 {
        core::hint::spin_loop();
    }
    write(ICR_HIGH, apic_id << 24);
    write(ICR_LOW, command);
    while read(ICR_LOW) & DELIVERY_PENDING != 0 {
        core::hint::spin_loop();
    }
}

/// Sends interrupt `vector` to the CPU with APIC ID `apic_id`.
pub(crate) fn send_ipi(apic_id: u32, vector: u8) {
    send(apic_id, u32::from(vector));
}

/// INIT, the first step of starting an application processor.
pub(crate) fn send_init(apic_id: u32) {
    send(apic_id, DELIVERY_INIT | LEVEL_ASSERT);
}

/// STARTUP: the application processor starts in real mode at
/// `page * 4096`.
pub(crate) fn send_startup(apic_id: u32, page: u8) {
    send(apic_id, DELIVERY_STARTUP | LEVEL_ASSERT | u32::from(page));
}
