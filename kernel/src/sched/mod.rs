//! Kernel threads and a preemptive scheduler for every CPU.
//!
//! # Design
//!
//! - A [`Task`] is a kernel thread: its own stack (a slot the image
//!   reserves, with a guard page), its saved registers while switched out,
//!   its tracing state (`ftrace::task::TaskTrace`) and its life cycle.
//! - One global run queue of runnable tasks, under one lock: a CPU that
//!   needs work takes the first task allowed to run on it (its affinity),
//!   so tasks migrate freely between CPUs. Each CPU has an idle task
//!   (pid 0, as Linux's `swapper/N`) that halts until an interrupt.
//! - Preemption: every CPU's timer tick counts down the running task's time
//!   slice; at zero (with someone waiting) it asks for a reschedule, which
//!   happens on the way out of the interrupt, if the interrupt came from a
//!   task with interrupts enabled and preemption enabled (`arch::irq::exit`).
//!   Tasks also give the CPU up themselves: [`yield_now`], [`sleep_ms`],
//!   blocking on a [`WaitQueue`](wait::WaitQueue) or a mutex, exiting.
//! - The run-queue lock is held across the switch itself (as Linux's rq
//!   lock): the CPU that switches away from a task still owns the lock, so
//!   no other CPU can pick that task up before its registers are saved; the
//!   task switched to releases it ([`finish_switch`]).
//!
//! # Invariants
//!
//! - The lock is only taken with interrupts masked; a switch happens only
//!   with it held; at most one CPU runs a task, and a running task is never
//!   in the run queue.
//! - Wake-ups are never lost: a task about to block checks its pending
//!   wake-up under the lock, and a wake-up of a task that is not blocked
//!   leaves one pending.
//! - A sleeping task is listed as a sleeper under the same lock hold that
//!   switches it out, so the tick that wakes sleepers never queues a task
//!   that still runs (two CPUs would then run it on one stack).
//! - A dead task's stack is freed by the next task on its CPU, after the
//!   switch away from it.

mod stacks;
mod task;
mod wait;

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use arch::irq::IrqGuard;
use arch::{cpu, percpu, smp, MAX_CPUS};

pub use task::{JoinHandle, State, Task, TaskInfo};

use crate::println;

/// Timer ticks a task runs before others waiting get the CPU.
const TIME_SLICE: u32 = 10;

/// The scheduler's shared state, behind [`LOCK`].
struct Scheduler {
    run_queue: VecDeque<Arc<Task>>,
    /// Tasks in `sleep_ms`, with the tick they wake at.
    sleepers: Vec<(u64, Arc<Task>)>,
    /// Every live task (for `ps`), idle tasks included.
    tasks: Vec<Arc<Task>>,
    cpus: [CpuState; MAX_CPUS],
}

#[derive(Default)]
struct CpuState {
    current: Option<Arc<Task>>,
    idle: Option<Arc<Task>>,
    /// The task this CPU switched away from for the last time (it exited):
    /// freed after the switch, by the next task.
    dead: Option<Arc<Task>>,
}

/// The run-queue lock: a plain spin lock taken with interrupts masked and
/// held across a switch (released by the task switched to).
static LOCK: AtomicBool = AtomicBool::new(false);

struct Shared(UnsafeCell<Option<Scheduler>>);
// SAFETY: reached only with `LOCK` held (see `with`).
unsafe impl Sync for Shared {}
static SCHEDULER: Shared = Shared(UnsafeCell::new(None));

static RUNNING: AtomicBool = AtomicBool::new(false);

fn lock() {
    debug_assert!(!cpu::interrupts_enabled());
    while LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        core::hint::spin_loop();
    }
}

fn unlock() {
    LOCK.store(false, Ordering::Release);
}

/// The scheduler's state. The caller holds `LOCK`.
#[allow(clippy::mut_from_ref)]
fn state() -> &'static mut Scheduler {
    // SAFETY: `LOCK` is held (the caller's duty), so this is the only
    // reference; `init` set it before `RUNNING`.
    unsafe { (*SCHEDULER.0.get()).as_mut().expect("scheduler initialised") }
}

/// Runs `f` on the scheduler's state, with interrupts masked and the lock
/// held.
fn with<R>(f: impl FnOnce(&mut Scheduler) -> R) -> R {
    let _irq = IrqGuard::new();
    lock();
    let result = f(state());
    unlock();
    result
}

/// Whether the scheduler runs (after [`init`]).
pub fn running() -> bool {
    RUNNING.load(Ordering::Acquire)
}

/// The running task.
pub fn current() -> Option<&'static Task> {
    let task = percpu::task() as *const Task;
    // SAFETY: the scheduler names the running task (`set_current`), which
    // lives at least while it runs.
    unsafe { task.as_ref() }
}

/// Makes `task` this CPU's running task for the per-CPU register and the
/// tracer. Always inlined: a traced call of its own would be hooked on one
/// task's shadow stack and return on the other's.
#[inline(always)]
fn set_current(task: &Task) {
    percpu::set_task(task as *const Task as usize, task.stack_bottom());
    // SAFETY: the task's own tracing state, which lives as long as the
    // task, and so while this CPU runs it.
    unsafe { percpu::set_task_trace(task.trace_ptr()) };
}

/// Names the running task, and its own stack, as this CPU's again: after a
/// test's stack overflow, whose report moved the CPU's stack bottom to the
/// overflow stack, the test runner goes on on the task's stack.
#[cfg(test)]
pub fn renew_current() {
    let _irq = IrqGuard::new();
    if let Some(task) = current() {
        set_current(task);
    }
}

/// Turns the boot flow into the first task (`shell`, pid 1; `ktest` when it
/// runs the in-kernel tests) and gives the
/// boot CPU its idle task. Once, on the boot CPU, before tracing starts.
pub fn init() {
    let main = Task::for_boot_flow(if cfg!(test) { "ktest" } else { "shell" }, 1);
    let idle = Task::idle(0);
    set_current(&main);
    // SAFETY: nothing else runs yet; `LOCK` is not needed before `RUNNING`.
    unsafe {
        *SCHEDULER.0.get() = Some(Scheduler {
            run_queue: VecDeque::new(),
            sleepers: Vec::new(),
            tasks: alloc::vec![main.clone(), idle.clone()],
            cpus: Default::default(),
        })
    };
    with(|s| {
        s.cpus[0].current = Some(main);
        s.cpus[0].idle = Some(idle);
    });
    RUNNING.store(true, Ordering::Release);
}

/// Starts every other CPU (up to `wanted` in all), each on its idle task.
/// Returns how many CPUs are online.
pub fn start_cpus(wanted: usize) -> usize {
    let possible = smp::possible_cpus().min(wanted).min(MAX_CPUS);
    for cpu in 1..possible {
        let idle = Task::idle(cpu);
        let top = idle.stack_top();
        // The CPU starts running its idle task's code at once.
        idle.set_state(State::Running);
        with(|s| {
            s.cpus[cpu].idle = Some(idle.clone());
            s.cpus[cpu].current = Some(idle.clone());
            s.tasks.push(idle);
        });
        if !smp::start_cpu(cpu, top) {
            println!("smp: CPU {cpu} did not come up");
            break;
        }
        // Until it names its idle task, the CPU runs traced code (the
        // scheduler's) with no tracing state: nothing may enable a site
        // before then, and only this boot flow could.
        while !has_task(cpu) {
            core::hint::spin_loop();
        }
    }
    smp::online()
}

/// Per CPU: it runs a task (its idle task) the tracer knows.
static HAS_TASK: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];

fn has_task(cpu: usize) -> bool {
    HAS_TASK[cpu].load(Ordering::Acquire)
}

/// Where each secondary CPU enters the kernel, on its idle task's stack,
/// interrupts masked. Not traced: it runs before the CPU has a task.
#[no_mangle]
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn kernel_secondary_main(cpu: usize) -> ! {
    let idle = with(|s| s.cpus[cpu].idle.clone().expect("an idle task for every started CPU"));
    set_current(&idle);
    HAS_TASK[cpu].store(true, Ordering::Release);
    drop(idle);
    cpu::enable_interrupts();
    idle_loop()
}

/// What an idle task does: halt until an interrupt, switch when there is
/// work. Not traced, as its callers (`idle_start`, `kernel_secondary_main`)
/// are not: it never returns, so a hooked return would hold what hooked it
/// for ever (a graph instance could never be freed). What it calls, it
/// calls with interrupts masked, so an idle task is never preempted inside
/// a tracing callback, where a grace period would wait for it (it runs only
/// when its CPU has nothing else to run).
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn idle_loop() -> ! {
    loop {
        cpu::disable_interrupts();
        if percpu::take_need_resched() || with_locked_queue_has_work() {
            schedule(None);
            // Back in the idle task: what it did on the way (a task that
            // ended here wakes its joiner, and may have asked this CPU to
            // reschedule, with no interrupt to say so) is looked at again
            // before halting.
            continue;
        }
        cpu::wait_for_interrupt();
    }
}

fn with_locked_queue_has_work() -> bool {
    lock();
    let me = cpu::id();
    let work = state().run_queue.iter().any(|task| task.may_run_on(me));
    unlock();
    work
}

/// Runs the scheduler with interrupts masked: puts the current task back in
/// the queue if it is still runnable (or in `park` state), picks the next
/// one and switches. Returns when this task runs again.
fn schedule(park: Option<State>) {
    switch_away(park, None);
}

/// [`schedule`], for a task that sleeps until tick `until`.
fn schedule_to_sleep(until: u64) {
    switch_away(Some(State::Sleeping), Some(until));
}

/// [`schedule`]'s work; `sleep_until`: list the task as a sleeper.
fn switch_away(park: Option<State>, sleep_until: Option<u64>) {
    debug_assert!(!cpu::interrupts_enabled());
    lock();
    let s = state();
    let me = cpu::id();
    let prev = s.cpus[me].current.clone().expect("a running task");
    match park {
        // A wake-up came between deciding to block and getting here: it
        // is taken under the same lock a waker uses, so it cannot be lost.
        Some(State::Blocked) if prev.take_wake_pending() => {}
        Some(state) => prev.set_state(state),
        None => {}
    }
    if let Some(until) = sleep_until {
        // Listed under the lock hold that also switches the task out: the
        // tick that wakes sleepers (on the boot CPU) cannot queue it while
        // it still runs here, however late this CPU gets to the switch.
        s.sleepers.push((until, prev.clone()));
    }
    if prev.state() == State::Running {
        prev.set_state(State::Runnable);
    }
    if prev.state() == State::Runnable && !prev.is_idle() {
        s.run_queue.push_back(prev.clone());
    }
    let next = match s.run_queue.iter().position(|task| task.may_run_on(me)) {
        Some(index) => s.run_queue.remove(index).expect("in the queue"),
        None => s.cpus[me].idle.clone().expect("an idle task"),
    };
    next.set_state(State::Running);
    next.set_cpu(me);
    next.refill_slice(TIME_SLICE);
    percpu::take_need_resched();
    if Arc::ptr_eq(&prev, &next) {
        unlock();
        return;
    }
    if prev.state() == State::Dead {
        s.cpus[me].dead = Some(prev.clone());
    }
    s.cpus[me].current = Some(next.clone());
    // An idle task leaves the CPU to work that came, as Linux's
    // `schedule_idle`: runnable, not preempted (`R`, not `R+`).
    let prev_state = if prev.is_idle() { trace::events::sched::STATE_RUNNING } else { prev.state().report() };
    trace::events::sched::trace_switch(prev.trace(), prev_state, next.trace());
    let (prev_context, next_context) = (prev.context_ptr(), next.context_ptr());
    let next_task = Arc::as_ptr(&next);
    // The Arcs live on in the scheduler's tables (`current`, the queue, or
    // `dead`) while this task is switched out.
    drop((prev, next));
    // Last before the switch: until it, this code runs on `prev`'s stack,
    // and what it runs (or traces, or faults in) is still `prev`'s.
    // SAFETY: `next` lives on in `current` (above).
    set_current(unsafe { &*next_task });
    // SAFETY: interrupts masked, the lock held; `next` is switched out (or
    // new) and only this CPU resumes it (it left the queue under the lock);
    // `prev`'s context lives as long as the task.
    unsafe { arch::switch::switch(prev_context, next_context) };
    finish_switch();
}

/// The first thing after a switch, in the task switched to: releases the
/// lock the switching CPU held, and frees the task it switched away from
/// if that one exited.
fn finish_switch() {
    let dead = state().cpus[cpu::id()].dead.take();
    unlock();
    if let Some(task) = dead {
        task.release_resources();
    }
}

/// Lets other runnable tasks run first.
pub fn yield_now() {
    let _irq = IrqGuard::new();
    schedule(None);
}

/// Sleeps at least `ms` milliseconds: until `ms + 1` ticks have passed
/// (the current tick is already partly over, as Linux's `msleep` counts).
pub fn sleep_ms(ms: u64) {
    if current_arc().is_none() {
        let end = arch::time::ticks() + ms + 1;
        while arch::time::ticks() < end {
            core::hint::spin_loop();
        }
        return;
    }
    // A wakeup meant for an earlier wait of this task (a `wake_all` that
    // took it off a wait list before that wait returned, and reached it
    // only now) may end a sleep early: sleep again until the time is up.
    let end = arch::time::ticks() + ms + 1;
    while arch::time::ticks() < end {
        let _irq = IrqGuard::new();
        schedule_to_sleep(end);
    }
}

/// The running task, as a shared handle.
fn current_arc() -> Option<Arc<Task>> {
    if !running() {
        return None;
    }
    with(|s| s.cpus[cpu::id()].current.clone())
}

/// Blocks the running task until [`wake`] (or returns at once if a wake-up
/// is pending: `schedule` checks under the lock).
fn block() {
    let _irq = IrqGuard::new();
    schedule(Some(State::Blocked));
}

/// Wakes `task` if it sleeps or is blocked; otherwise leaves a wake-up
/// pending for its next block.
pub fn wake(task: &Arc<Task>) {
    let target = with(|s| match task.state() {
        State::Blocked | State::Sleeping => {
            s.sleepers.retain(|(_, sleeper)| !Arc::ptr_eq(sleeper, task));
            task.set_state(State::Runnable);
            enqueue(s, task.clone(), Wakeup::Woken)
        }
        _ => {
            task.set_wake_pending();
            None
        }
    });
    if let Some(cpu) = target {
        smp::kick(cpu);
    }
}

/// Which wake-up [`enqueue`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wakeup {
    /// A task that slept or blocked (`sched_wakeup`).
    Woken,
    /// A new task, queued for the first time (`sched_wakeup_new`).
    New,
}

/// Queues `task` (runnable now) under the lock, recording its wake-up
/// first, as Linux does before a woken task can run, and answers an idle
/// CPU to kick once the lock is released. The CPU the event names is that
/// one, or else the task's last CPU (a new task's: the waker's, or the
/// first it may run on).
fn enqueue(s: &mut Scheduler, task: Arc<Task>, wakeup: Wakeup) -> Option<usize> {
    let idle = idle_cpu_for(s, &task);
    match wakeup {
        Wakeup::Woken => trace::events::sched::trace_wakeup(task.trace(), idle.unwrap_or(task.cpu())),
        Wakeup::New => {
            let allowed = |cpu: usize| task.may_run_on(cpu) && percpu::is_online(cpu);
            let target =
                idle.or_else(|| Some(cpu::id()).filter(|&me| allowed(me))).or_else(|| (0..MAX_CPUS).find(|&cpu| allowed(cpu)));
            trace::events::sched::trace_wakeup_new(task.trace(), target.unwrap_or(cpu::id()));
        }
    }
    s.run_queue.push_back(task);
    idle
}

/// An idle CPU `task` may run on, to kick (after the lock is released):
/// one not kicked already, marked kicked now, so that tasks woken together
/// spread over the idle CPUs.
fn idle_cpu_for(s: &Scheduler, task: &Task) -> Option<usize> {
    let cpu = (0..MAX_CPUS).find(|&cpu| {
        task.may_run_on(cpu)
            && percpu::is_online(cpu)
            && !percpu::need_resched_of(cpu)
            && s.cpus[cpu].current.as_ref().is_some_and(|current| current.is_idle())
    })?;
    percpu::set_need_resched(cpu);
    Some(cpu)
}

/// Spawns a kernel thread called `name` running `f`; its result comes back
/// through the handle's [`JoinHandle::join`].
pub fn spawn(name: &str, f: impl FnOnce() -> u64 + Send + 'static) -> Result<JoinHandle, SpawnError> {
    spawn_on(name, task::ALL_CPUS, f)
}

/// [`spawn`], restricted to the CPUs in `affinity` (a bit per CPU).
pub fn spawn_on(name: &str, affinity: u64, f: impl FnOnce() -> u64 + Send + 'static) -> Result<JoinHandle, SpawnError> {
    let task = Task::new(name, affinity, alloc::boxed::Box::new(f)).ok_or(SpawnError::NoStack)?;
    let target = with(|s| {
        s.tasks.push(task.clone());
        enqueue(s, task.clone(), Wakeup::New)
    });
    if let Some(cpu) = target {
        smp::kick(cpu);
    }
    Ok(JoinHandle::new(task))
}

/// Why a task could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// Every task stack is in use.
    NoStack,
}

impl core::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SpawnError::NoStack => write!(f, "no free task stack (too many tasks)"),
        }
    }
}

/// Restricts the running task to the CPUs in `affinity` (a bit per CPU),
/// moving it now if it runs elsewhere. (Tests move tasks with it.)
#[cfg(test)]
pub fn set_affinity(affinity: u64) {
    let Some(task) = current() else { return };
    task.set_affinity(affinity);
    if !task.may_run_on(cpu::id()) {
        yield_now();
    }
}

/// Restricts the running task to the CPUs in `affinity` without moving it
/// now: it leaves this CPU at its next switch. Lock-free, for a test's step
/// hook, which then asks the step handler to switch (`arch::step`).
#[cfg(test)]
pub fn restrict_current(affinity: u64) {
    if let Some(task) = current() {
        task.set_affinity(affinity);
    }
}

/// Parks the running task: no CPU may run it (an empty affinity) until
/// [`unpark`]; it leaves this CPU at its next switch (a step hook's
/// reschedule). Answers the task, for `unpark`. Lock-free.
#[cfg(test)]
pub fn park_current() -> usize {
    restrict_current(0);
    percpu::task()
}

/// Lets a task [`park_current`] parked run anywhere again.
#[cfg(test)]
pub fn unpark(task: usize) {
    let found = with(|s| {
        let found = s.tasks.iter().find(|t| Arc::as_ptr(t) as usize == task);
        found.inspect(|t| t.set_affinity(task::ALL_CPUS)).is_some()
    });
    if found {
        for cpu in (0..MAX_CPUS).filter(|&cpu| percpu::is_online(cpu)) {
            smp::kick(cpu);
        }
    }
}

/// Ends the running task now, from wherever it is (tests: a task that ends
/// inside hooked calls, as Linux's `do_exit` may).
#[cfg(test)]
pub fn exit_now(result: u64) -> ! {
    exit(result)
}

/// The end of every task: records its result, wakes its joiners, and leaves
/// the CPU for good.
fn exit(result: u64) -> ! {
    let task = current_arc().expect("a running task");
    trace::events::sched::process_exit(task.trace());
    task.finish(result);
    with(|s| s.tasks.retain(|t| !Arc::ptr_eq(t, &task)));
    drop(task);
    cpu::disable_interrupts();
    schedule(Some(State::Dead));
    unreachable!("a dead task ran again");
}

/// Where every new task starts (see `arch::switch::TaskContext::new`). Not
/// traced: it never returns (Linux's task entry is not traceable either).
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
extern "C" fn task_start(_arg: usize) -> ! {
    finish_switch();
    cpu::enable_interrupts();
    let task = current().expect("a running task");
    let body = task.take_body().expect("a task's body runs once");
    let result = body();
    exit(result)
}

/// Every task, for `ps`.
pub fn tasks() -> Vec<TaskInfo> {
    with(|s| s.tasks.iter().map(|task| task.info()).collect())
}

/// Each online CPU and the name and pid of the task on it, for `cpus`.
pub fn cpus() -> Vec<(usize, TaskInfo)> {
    with(|s| {
        (0..MAX_CPUS)
            .filter(|&cpu| percpu::is_online(cpu))
            .filter_map(|cpu| s.cpus[cpu].current.as_ref().map(|task| (cpu, task.info())))
            .collect()
    })
}

/// The scheduler's share of every CPU's timer tick (interrupt context):
/// wakes sleepers whose time came (boot CPU), and asks for a reschedule
/// when the running task's slice is used up and something waits.
#[no_mangle]
fn kernel_sched_tick() {
    if !running() {
        return;
    }
    let me = cpu::id();
    let now = arch::time::ticks();
    let mut kick = 0u64;
    lock();
    let s = state();
    if me == 0 && !s.sleepers.is_empty() {
        let mut index = 0;
        while index < s.sleepers.len() {
            if s.sleepers[index].0 <= now {
                let (_, task) = s.sleepers.swap_remove(index);
                task.set_state(State::Runnable);
                if let Some(cpu) = enqueue(s, task, Wakeup::Woken) {
                    kick |= 1 << cpu;
                }
            } else {
                index += 1;
            }
        }
    }
    let waiting = s.run_queue.iter().any(|task| task.may_run_on(me));
    if let Some(current) = &s.cpus[me].current {
        if waiting && (current.is_idle() || current.use_tick()) {
            percpu::set_need_resched(me);
        }
    }
    unlock();
    for cpu in (0..MAX_CPUS).filter(|cpu| kick & (1 << cpu) != 0) {
        smp::kick(cpu);
    }
}

/// Interrupt exit asks for a switch (`arch::irq::exit`).
#[no_mangle]
fn kernel_sched_preempt() {
    if running() {
        schedule(None);
    }
}

#[no_mangle]
fn kernel_sched_current() -> usize {
    if running() {
        percpu::task()
    } else {
        0
    }
}

#[no_mangle]
fn kernel_sched_block() {
    block();
}

#[no_mangle]
fn kernel_sched_wake(task: usize) {
    // SAFETY: `task` came from `kernel_sched_current` for a task that is
    // blocked on (or about to block on) the caller's lock, so it lives; an
    // `Arc` of it is made from a new strong count.
    let task = unsafe {
        Arc::increment_strong_count(task as *const Task);
        Arc::from_raw(task as *const Task)
    };
    wake(&task);
}

#[no_mangle]
fn kernel_sched_yield() {
    yield_now();
}
