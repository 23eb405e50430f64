//! Several CPUs: starting them, interrupting them, and running a function
//! on all the others at once.
//!
//! The architecture finds the CPUs (x86_64: the ACPI MADT; aarch64: the
//! device tree) and starts them; each comes up on a stack the kernel gave
//! it, sets up its own per-CPU state and enters the kernel at
//! `kernel_secondary_main`. Inter-processor interrupts ([`Ipi`]) ask a CPU
//! to reschedule or to run the function of a cross-CPU call.
//!
//! [`call_on_others`] runs a function on every other online CPU, in
//! interrupt context, and returns once all have run it. The caller spins
//! for its lock with interrupts enabled, so two CPUs calling at once never
//! deadlock: the one waiting still answers the other's interrupt.
//! [`sync_all`] makes every CPU refetch changed code: its call serialises
//! each CPU in the handler itself (x86_64: `cpuid`; aarch64: `isb`), as
//! Linux's `text_poke_sync` does. The return from the interrupt cannot be
//! relied on for that: it may switch to a task that gave up its CPU by a
//! plain call, which resumes with a `ret`, no `iret` on the way.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::{cpu, percpu, preempt, MAX_CPUS};

/// An inter-processor interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipi {
    /// Switch tasks if the scheduler says so.
    Reschedule,
    /// Run the pending cross-CPU call.
    Call,
    /// Nothing: wakes a CPU halted waiting for the others (see
    /// [`call_on_others`]).
    Wake,
}

/// How many CPUs the machine has (at most [`MAX_CPUS`]). Needs the heap.
pub fn possible_cpus() -> usize {
    crate::imp::smp::possible_cpus()
}

/// Starts CPU `cpu` (1 up to [`possible_cpus`]) on the stack whose top is
/// `stack_top`; returns whether it came up.
pub fn start_cpu(cpu: usize, stack_top: usize) -> bool {
    cpu < MAX_CPUS && crate::imp::smp::start_cpu(cpu, stack_top)
}

/// How many CPUs are up.
pub fn online() -> usize {
    percpu::online_count()
}

/// The common end of every secondary CPU's bring-up: marks it online and
/// enters the kernel (interrupts still masked).
pub(crate) fn secondary_started(cpu: usize) -> ! {
    percpu::set_online();
    extern "Rust" {
        fn kernel_secondary_main(cpu: usize) -> !;
    }
    // SAFETY: the kernel defines `kernel_secondary_main` with this exact
    // signature; each secondary CPU calls it once, set up.
    unsafe { kernel_secondary_main(cpu) }
}

/// Sends `ipi` to CPU `cpu`.
pub fn send_ipi(cpu: usize, ipi: Ipi) {
    if percpu::is_online(cpu) {
        crate::imp::smp::send_ipi(cpu, ipi);
    }
}

/// Asks CPU `cpu` to reschedule soon (at once if it is another CPU).
pub fn kick(cpu: usize) {
    // Masked: a task moved to `cpu` between the two lines would take it
    // for itself and send no IPI.
    let _irq = crate::irq::IrqGuard::new();
    percpu::set_need_resched(cpu);
    if cpu != cpu::id() {
        send_ipi(cpu, Ipi::Reschedule);
    }
}

static CALL_LOCK: AtomicBool = AtomicBool::new(false);
static CALL_FUNCTION: crate::cell::AtomicFn<fn()> = crate::cell::AtomicFn::none();
static CALL_PENDING: AtomicUsize = AtomicUsize::new(0);
/// The CPU waiting in `call_on_others`, which the last CPU to answer wakes.
static CALL_WAITER: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` on every other online CPU, in interrupt context, and returns
/// once each has. Normal context, interrupts enabled. The caller halts
/// while it waits, and the last CPU to answer wakes it: under emulation, a
/// spinning caller would take host time the others need to answer.
pub fn call_on_others(f: fn()) {
    // Pinned before the lock: a holder preempted on this CPU would leave a
    // pinned spinner here waiting for it for ever.
    let _pinned = preempt::Guard::new();
    start_call(f);
    finish_call();
}

/// Takes the call lock and sends `f` to every other online CPU; answers
/// how many. The caller is pinned and must call [`finish_call`].
fn start_call(f: fn()) -> usize {
    lock_calls();
    send_call(f, others())
}

/// Takes the call lock, spinning with interrupts enabled: two CPUs calling
/// at once never deadlock, the one waiting still answers the other's call.
fn lock_calls() {
    assert!(cpu::interrupts_enabled(), "call_on_others with interrupts masked could deadlock");
    while CALL_LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        core::hint::spin_loop();
    }
}

/// The CPUs other than this one that are online now, as a mask: read once
/// per call, so the CPUs counted are exactly the CPUs sent to (a CPU
/// coming online meanwhile is in neither).
fn others() -> CpuMask {
    let me = cpu::id();
    CpuMask((0..MAX_CPUS).filter(|&c| c != me && percpu::is_online(c)).fold(0, |mask, c| mask | 1 << c))
}

/// A set of CPUs.
#[derive(Clone, Copy)]
struct CpuMask(u32);

const _: () = assert!(MAX_CPUS <= u32::BITS as usize);

impl CpuMask {
    fn count(self) -> usize {
        self.0.count_ones() as usize
    }

    fn iter(self) -> impl Iterator<Item = usize> {
        (0..MAX_CPUS).filter(move |&c| self.0 & 1 << c != 0)
    }
}

/// Sends `f` to the CPUs `targets` (the call lock held); answers how many.
fn send_call(f: fn(), targets: CpuMask) -> usize {
    CALL_FUNCTION.store(f);
    CALL_WAITER.store(cpu::id(), Ordering::Relaxed);
    CALL_PENDING.store(targets.count(), Ordering::Release);
    for target in targets.iter() {
        crate::imp::smp::send_ipi(target, Ipi::Call);
    }
    targets.count()
}

/// Waits for every CPU [`start_call`] asked, and drops the call lock.
fn finish_call() {
    loop {
        // Masked for the check, so the wake-up cannot slip in between it
        // and the halt (which unmasks).
        cpu::disable_interrupts();
        if CALL_PENDING.load(Ordering::Acquire) == 0 {
            cpu::enable_interrupts();
            break;
        }
        cpu::wait_for_interrupt();
    }
    CALL_LOCK.store(false, Ordering::Release);
}

/// CPUs held by [`stop_others`] so far.
static STOP_ARRIVED: AtomicUsize = AtomicUsize::new(0);
/// How many CPUs [`stop_others`] holds.
static STOP_TARGETS: AtomicUsize = AtomicUsize::new(0);
/// Set once [`stop_others`]'s function has run.
static STOP_RELEASED: AtomicBool = AtomicBool::new(false);
/// What [`stop_others`] runs.
static STOP_FUNCTION: crate::cell::AtomicFn<fn()> = crate::cell::AtomicFn::none();

/// Runs `f` while no other CPU runs anything else (Linux's `stop_machine`,
/// as arm64's text patching uses it): for changes no CPU may execute
/// concurrently with, such as replacing an arbitrary aarch64 instruction.
/// Normal context, interrupts enabled.
///
/// Every other online CPU takes a cross-CPU call; each waits there,
/// interrupts masked, until the last one to arrive has run `f` (as Linux
/// does). The caller, interrupts masked too, only waits for the call to
/// finish: it never waits for the others to arrive, which under QEMU
/// `-icount` (one host thread runs the CPUs in turn) was seen to hang.
/// Then each synchronises its instruction stream. With no other CPU
/// online, `f` runs here.
pub fn stop_others(f: fn()) {
    let _pinned = preempt::Guard::new();
    lock_calls();
    let targets = others();
    if targets.count() == 0 {
        f();
        CALL_LOCK.store(false, Ordering::Release);
        return;
    }
    STOP_FUNCTION.store(f);
    STOP_ARRIVED.store(0, Ordering::SeqCst);
    STOP_RELEASED.store(false, Ordering::SeqCst);
    STOP_TARGETS.store(targets.count(), Ordering::SeqCst);
    // Masked from here to the end of the call (the lock is taken, so no
    // other CPU waits for this one): no interrupt handler runs here while
    // another CPU rewrites code it might run.
    let irqs = crate::irq::IrqGuard::new();
    send_call(
        || {
            if STOP_ARRIVED.fetch_add(1, Ordering::SeqCst) + 1 == STOP_TARGETS.load(Ordering::SeqCst) {
                if let Some(f) = STOP_FUNCTION.load() {
                    f();
                }
                STOP_RELEASED.store(true, Ordering::Release);
            } else {
                while !STOP_RELEASED.load(Ordering::Acquire) {
                    core::hint::spin_loop();
                }
            }
            cpu::serialize();
        },
        targets,
    );
    // Spin, masked: a halt would wake to run interrupt handlers.
    while CALL_PENDING.load(Ordering::Acquire) != 0 {
        core::hint::spin_loop();
    }
    CALL_LOCK.store(false, Ordering::Release);
    cpu::serialize();
    drop(irqs);
}

/// Makes every CPU synchronise its instruction stream and memory view: an
/// empty cross-CPU call (see the module documentation), then this CPU's own
/// barrier.
pub fn sync_all() {
    call_on_others(cpu::serialize);
    cpu::serialize();
}

/// Called by the architecture's interrupt handler for an IPI.
pub(crate) fn handle_ipi(ipi: Ipi) {
    match ipi {
        Ipi::Reschedule => percpu::set_need_resched(cpu::id()),
        Ipi::Call => {
            if let Some(f) = CALL_FUNCTION.load() {
                f();
            }
            if CALL_PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
                crate::imp::smp::send_ipi(CALL_WAITER.load(Ordering::Relaxed), Ipi::Wake);
            }
        }
        Ipi::Wake => {}
    }
}
