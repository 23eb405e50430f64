//! Per-CPU data: one [`CpuLocal`] per CPU, found through a register that
//! belongs to the CPU (x86_64: the `gs` segment base; aarch64: `tpidr_el1`),
//! so reaching this CPU's data is one or two instructions and needs no CPU
//! number first.
//!
//! The fields the trampolines read from assembly (the current task's tracing
//! state) have their offsets taken with `offset_of!` next to that assembly.
//! Everything here is written only by its own CPU, except where a field says
//! otherwise; fields are atomics so they can be shared, accessed with plain
//! (relaxed) loads and stores.
//!
//! # Reading it from code that can be preempted
//!
//! A task can be preempted and moved to another CPU between any two of its
//! instructions. Reading a field as "load the base, then the field" can
//! therefore read the CPU the task just left: for the current task's
//! words, another task's. So what such code reads goes through the
//! architecture's `cpu` accessors, each one preemption-safe: one
//! instruction (x86_64: a `gs`-relative load; aarch64 keeps the context and
//! the task's tracing state in registers of their own), or a read with
//! interrupts masked. `this` is for code that cannot be moved (interrupts
//! masked, or preemption disabled) and for what may be stale anyway.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering};

use crate::MAX_CPUS;

/// One CPU's data. See the module documentation.
#[repr(C)]
pub struct CpuLocal {
    /// The address of this very struct, so that one load through the
    /// per-CPU register yields it (x86_64 reads `%gs:0`).
    pub(crate) self_ptr: AtomicUsize,
    /// This CPU's number, 0 for the boot CPU.
    pub(crate) cpu: usize,
    /// The [`Context`](crate::context::Context) running now (x86_64; aarch64
    /// keeps it in `contextidr_el1`): see `cpu::context_byte`.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))]
    pub(crate) context: AtomicU8,
    /// Set by the scheduler (any CPU): switch tasks at the next chance.
    pub(crate) need_resched: AtomicBool,
    /// Preemption disabled this many times (`crate::preempt`).
    pub(crate) preempt_count: AtomicU32,
    /// The current task's tracing state (an `ftrace::task::TaskTrace`), for
    /// the trampolines and tracing code; set at every task switch (x86_64;
    /// aarch64 keeps it in `tpidr_el0`): see `cpu::task_trace_word`.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))]
    pub(crate) task_trace: AtomicPtr<()>,
    /// The current task, as the kernel's scheduler names it (opaque here).
    pub(crate) task: AtomicUsize,
    /// The lowest usable address of the stack the current task runs on: an
    /// exception taken below it (plus a frame) is a stack overflow.
    pub(crate) stack_bottom: AtomicUsize,
    /// Whether this CPU has finished coming up.
    pub(crate) online: AtomicBool,
    /// The timer left softirq-like work for interrupt exit.
    pub(crate) softirq_pending: AtomicBool,
}

impl CpuLocal {
    const fn new(cpu: usize) -> CpuLocal {
        CpuLocal {
            self_ptr: AtomicUsize::new(0),
            cpu,
            context: AtomicU8::new(0),
            need_resched: AtomicBool::new(false),
            preempt_count: AtomicU32::new(0),
            task_trace: AtomicPtr::new(core::ptr::null_mut()),
            task: AtomicUsize::new(0),
            stack_bottom: AtomicUsize::new(0),
            online: AtomicBool::new(false),
            softirq_pending: AtomicBool::new(false),
        }
    }
}

static CPUS: [CpuLocal; MAX_CPUS] = {
    let mut cpus = [const { CpuLocal::new(0) }; MAX_CPUS];
    let mut i = 0;
    while i < MAX_CPUS {
        cpus[i] = CpuLocal::new(i);
        i += 1;
    }
    cpus
};

/// This CPU's data.
#[inline(always)]
pub(crate) fn this() -> &'static CpuLocal {
    // SAFETY: the per-CPU register is set, before any code that reaches
    // here runs on the CPU, to this CPU's entry of `CPUS` (`install`), which
    // lives for ever.
    unsafe { &*(crate::cpu::percpu_base() as *const CpuLocal) }
}

/// Points this CPU's per-CPU register at its data. The first thing each CPU
/// does.
pub(crate) fn install(cpu: usize) {
    let local = &CPUS[cpu];
    let address = local as *const CpuLocal as usize;
    local.self_ptr.store(address, Ordering::Relaxed);
    crate::cpu::set_percpu_base(address);
}

/// The current task's tracing state (null until the tracer gives one).
/// One instruction, safe where the task can be preempted.
#[inline(always)]
pub fn task_trace() -> *mut () {
    crate::cpu::task_trace_word() as *mut ()
}

/// What an event header records about the CPU and the running task.
#[derive(Clone, Copy, Debug)]
pub struct EventState {
    pub context: crate::context::Context,
    pub need_resched: bool,
    pub preempt_count: u32,
    /// As [`task_trace`].
    pub task_trace: *mut (),
}

/// This CPU's [`EventState`], each part read preemption-safely (see the
/// module documentation).
#[inline(always)]
pub fn event_state() -> EventState {
    let (need_resched, preempt_count) = crate::cpu::sched_state();
    EventState { context: crate::context::current(), need_resched, preempt_count, task_trace: task_trace() }
}

/// Sets the current task's tracing state (the scheduler, at a switch; the
/// tracer, for the boot flow of each CPU).
///
/// # Safety
/// `state` is the running task's `ftrace::task::TaskTrace` (the trampolines
/// write its counters through it), and lives while this CPU runs the task.
#[inline(always)]
pub unsafe fn set_task_trace(state: *mut ()) {
    crate::cpu::set_task_trace_word(state as usize);
}

/// The current task, as the scheduler named it with [`set_task`]
/// (preemption-safe).
#[inline(always)]
pub fn task() -> usize {
    crate::cpu::task_word()
}

/// Names the current task (the scheduler, at a switch), and the bottom of
/// the stack it runs on.
#[inline(always)]
pub fn set_task(task: usize, stack_bottom: usize) {
    let cpu = this();
    cpu.task.store(task, Ordering::Relaxed);
    cpu.stack_bottom.store(stack_bottom, Ordering::Relaxed);
}

/// Names the bottom of the stack this CPU runs on now, without a switch
/// (the stack-overflow handler, moving to the overflow stack).
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) fn set_stack_bottom(stack_bottom: usize) {
    this().stack_bottom.store(stack_bottom, Ordering::Relaxed);
}

/// Asks CPU `cpu` to switch tasks at its next chance (the caller then
/// sends it a reschedule IPI if it is another CPU).
pub fn set_need_resched(cpu: usize) {
    CPUS[cpu].need_resched.store(true, Ordering::Release);
}

/// Takes this CPU's reschedule request.
pub fn take_need_resched() -> bool {
    this().need_resched.swap(false, Ordering::Acquire)
}

/// Whether this CPU has a reschedule request pending.
#[inline]
pub fn need_resched() -> bool {
    this().need_resched.load(Ordering::Relaxed)
}

/// Whether CPU `cpu` has a reschedule request pending (a wake-up already
/// kicked it).
pub fn need_resched_of(cpu: usize) -> bool {
    CPUS[cpu].need_resched.load(Ordering::Relaxed)
}

/// How many CPUs have come up.
pub fn online_count() -> usize {
    CPUS.iter().filter(|cpu| cpu.online.load(Ordering::Acquire)).count()
}

/// Whether CPU `cpu` is up.
pub fn is_online(cpu: usize) -> bool {
    cpu < MAX_CPUS && CPUS[cpu].online.load(Ordering::Acquire)
}

/// Marks this CPU up.
pub(crate) fn set_online() {
    this().online.store(true, Ordering::Release);
}

/// The per-CPU offsets assembly needs.
pub(crate) mod offsets {
    use super::CpuLocal;
    use core::mem::offset_of;

    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // x86_64 reads %gs:SELF
    pub const SELF: usize = offset_of!(CpuLocal, self_ptr);
    pub const CPU: usize = offset_of!(CpuLocal, cpu);
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // x86_64 reads %gs:CONTEXT
    pub const CONTEXT: usize = offset_of!(CpuLocal, context);
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // x86_64 reads %gs:TASK_TRACE
    pub const TASK_TRACE: usize = offset_of!(CpuLocal, task_trace);
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // x86_64 reads %gs:TASK
    pub const TASK: usize = offset_of!(CpuLocal, task);
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // x86_64 reads %gs:NEED_RESCHED
    pub const NEED_RESCHED: usize = offset_of!(CpuLocal, need_resched);
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // x86_64 reads %gs:PREEMPT_COUNT
    pub const PREEMPT_COUNT: usize = offset_of!(CpuLocal, preempt_count);
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))] // the aarch64 vectors' overflow check
    pub const STACK_BOTTOM: usize = offset_of!(CpuLocal, stack_bottom);
}
