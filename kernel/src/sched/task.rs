//! A kernel thread: identity, life cycle, stack, saved registers, tracing
//! state.

use alloc::boxed::Box;
use alloc::string::String;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use alloc::sync::Arc;
use arch::switch::TaskContext;
use arch::sync::SpinLock;
use ftrace::task::TaskTrace;

use super::stacks::StackSlot;
use super::wait::WaitQueue;

/// Every CPU (an affinity).
pub const ALL_CPUS: u64 = u64::MAX;

/// Pids of new tasks: 0 is the idle tasks', 1 the boot flow's.
static NEXT_PID: AtomicU32 = AtomicU32::new(2);

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// On a CPU now.
    Running,
    /// Waiting for a CPU (in the run queue).
    Runnable,
    /// In `sleep_ms`.
    Sleeping,
    /// Waiting for a wake-up (a wait queue, a mutex).
    Blocked,
    /// Finished; its stack is freed once a CPU switched away from it.
    Dead,
}

impl State {
    fn from_u8(value: u8) -> State {
        match value {
            0 => State::Running,
            1 => State::Runnable,
            2 => State::Sleeping,
            3 => State::Blocked,
            _ => State::Dead,
        }
    }

    /// The name `ps` shows.
    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Runnable => "runnable",
            State::Sleeping => "sleeping",
            State::Blocked => "blocked",
            State::Dead => "dead",
        }
    }

    /// The `prev_state` a `sched_switch` event records when a task in this
    /// state is switched out, as Linux reports it: preempted `R+`, `S`
    /// asleep, `D` blocked, `X` dead.
    pub fn report(self) -> u64 {
        match self {
            State::Running | State::Runnable => trace::events::sched::STATE_PREEMPTED,
            State::Sleeping => trace::events::sched::STATE_SLEEPING,
            State::Blocked => trace::events::sched::STATE_BLOCKED,
            State::Dead => trace::events::sched::STATE_DEAD,
        }
    }
}

/// A task's body.
pub type Body = Box<dyn FnOnce() -> u64 + Send>;

/// A kernel thread. See the module documentation.
pub struct Task {
    pid: u32,
    name: String,
    state: AtomicU8,
    wake_pending: AtomicBool,
    /// The CPU it last ran on.
    cpu: AtomicUsize,
    /// The CPUs it may run on, a bit each.
    affinity: AtomicU64,
    /// Ticks left in its time slice.
    slice: AtomicU32,
    idle: bool,
    /// Its registers while switched out. Only the CPU switching it touches
    /// this, with the scheduler's lock held.
    context: UnsafeCell<TaskContext>,
    stack_bottom: usize,
    stack_top: usize,
    slot: SpinLock<Option<StackSlot>>,
    trace: Box<TaskTrace>,
    body: SpinLock<Option<Body>>,
    result: AtomicU64,
    /// Its stack and tracing state are given back (after the switch away).
    released: AtomicBool,
    exited: WaitQueue,
}

// SAFETY: `context` is only touched under the scheduler's lock by the CPU
// switching the task; everything else is atomic, locked or immutable.
unsafe impl Sync for Task {}
// SAFETY: as above.
unsafe impl Send for Task {}

/// A task as `ps` shows it.
#[derive(Clone, Debug)]
pub struct TaskInfo {
    pub pid: u32,
    pub name: String,
    pub state: State,
    pub cpu: usize,
}

impl Task {
    fn build(pid: u32, name: &str, idle: bool, stack: (usize, usize, Option<StackSlot>), context: TaskContext) -> Arc<Task> {
        let trace = ftrace::task::boxed(pid as i32, name, stack.0..stack.1);
        let task = Arc::new(Task {
            pid,
            name: String::from(name),
            state: AtomicU8::new(State::Runnable as u8),
            wake_pending: AtomicBool::new(false),
            cpu: AtomicUsize::new(0),
            affinity: AtomicU64::new(super::task::ALL_CPUS),
            slice: AtomicU32::new(0),
            idle,
            context: UnsafeCell::new(context),
            stack_bottom: stack.0,
            stack_top: stack.1,
            slot: SpinLock::new(stack.2),
            trace,
            body: SpinLock::new(None),
            result: AtomicU64::new(0),
            released: AtomicBool::new(false),
            exited: WaitQueue::new(),
        });
        // SAFETY: the state is boxed inside the task, at a fixed address,
        // and unregistered (`release_resources`) before it is dropped.
        unsafe { ftrace::task::register(&task.trace) };
        trace::events::sched::process_fork(&task.trace);
        task
    }

    /// The boot flow, running on the boot stack, as a task.
    pub fn for_boot_flow(name: &str, pid: u32) -> Arc<Task> {
        let stack = arch::layout::boot_stack();
        let task = Self::build(pid, name, false, (stack.start, stack.end, None), TaskContext::default());
        task.set_state(State::Running);
        task
    }

    /// CPU `cpu`'s idle task.
    pub fn idle(cpu: usize) -> Arc<Task> {
        let slot = StackSlot::allocate().expect("a stack for every idle task");
        // SAFETY: the slot's stack is the new task's alone.
        let context = unsafe { TaskContext::new(slot.top(), idle_start, cpu) };
        let name = alloc::format!("swapper/{cpu}");
        let task = Self::build(0, &name, true, (slot.bottom(), slot.top(), Some(slot)), context);
        task.affinity.store(1 << cpu, Ordering::Relaxed);
        task.set_cpu(cpu);
        task
    }

    /// A new task running `body`, on the CPUs in `affinity`; `None` if no
    /// stack is free.
    pub fn new(name: &str, affinity: u64, body: Body) -> Option<Arc<Task>> {
        let slot = StackSlot::allocate()?;
        // SAFETY: the slot's stack is the new task's alone.
        let context = unsafe { TaskContext::new(slot.top(), super::task_start, 0) };
        let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
        let task = Self::build(pid, name, false, (slot.bottom(), slot.top(), Some(slot)), context);
        task.affinity.store(affinity, Ordering::Relaxed);
        *task.body.lock() = Some(body);
        Some(task)
    }

    #[cfg_attr(not(test), allow(dead_code))] // the test framework's
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Acquire))
    }

    pub(super) fn set_state(&self, state: State) {
        self.state.store(state as u8, Ordering::Release);
    }

    pub(super) fn set_wake_pending(&self) {
        self.wake_pending.store(true, Ordering::Release);
    }

    pub(super) fn take_wake_pending(&self) -> bool {
        self.wake_pending.swap(false, Ordering::AcqRel)
    }

    pub fn cpu(&self) -> usize {
        self.cpu.load(Ordering::Relaxed)
    }

    pub(super) fn set_cpu(&self, cpu: usize) {
        self.cpu.store(cpu, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(super) fn set_affinity(&self, affinity: u64) {
        self.affinity.store(affinity, Ordering::Relaxed);
    }

    /// Whether the task may run on CPU `cpu`.
    pub fn may_run_on(&self, cpu: usize) -> bool {
        self.affinity.load(Ordering::Relaxed) & (1 << cpu) != 0
    }

    pub fn is_idle(&self) -> bool {
        self.idle
    }

    pub(super) fn refill_slice(&self, ticks: u32) {
        self.slice.store(ticks, Ordering::Relaxed);
    }

    /// Counts one tick of its slice; whether the slice is used up.
    pub(super) fn use_tick(&self) -> bool {
        let left = self.slice.load(Ordering::Relaxed).saturating_sub(1);
        self.slice.store(left, Ordering::Relaxed);
        left == 0
    }

    pub(super) fn context_ptr(&self) -> *mut TaskContext {
        self.context.get()
    }

    pub(super) fn stack_bottom(&self) -> usize {
        self.stack_bottom
    }

    pub(super) fn stack_top(&self) -> usize {
        self.stack_top
    }

    /// Its tracing state.
    pub fn trace(&self) -> &TaskTrace {
        &self.trace
    }

    pub(super) fn trace_ptr(&self) -> *mut () {
        &*self.trace as *const TaskTrace as *mut ()
    }

    pub(super) fn take_body(&self) -> Option<Body> {
        self.body.lock().take()
    }

    /// Records the result (its joiners wait until the task is gone too).
    pub(super) fn finish(&self, result: u64) {
        self.result.store(result, Ordering::Release);
    }

    /// Frees what a dead task no longer needs: its stack and its place in
    /// the tracer's registry (after the switch away from it); then wakes
    /// its joiners.
    pub(super) fn release_resources(&self) {
        ftrace::task::unregister(&self.trace);
        // SAFETY: the task exited and no longer runs (it is released once
        // switched away from), and no walk across tasks reaches it now.
        unsafe { ftrace::graph::retstack::flush(&self.trace) };
        drop(self.slot.lock().take());
        self.released.store(true, Ordering::Release);
        self.exited.wake_all();
    }

    pub(super) fn info(&self) -> TaskInfo {
        TaskInfo { pid: self.pid, name: self.name.clone(), state: self.state(), cpu: self.cpu() }
    }
}

/// Where an idle task starts when it is first switched to. Not traced, as
/// `idle_loop`.
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
extern "C" fn idle_start(_cpu: usize) -> ! {
    super::finish_switch();
    arch::cpu::enable_interrupts();
    super::idle_loop()
}

/// A spawned task, to wait for its result.
pub struct JoinHandle {
    task: Arc<Task>,
}

impl JoinHandle {
    pub(super) fn new(task: Arc<Task>) -> JoinHandle {
        JoinHandle { task }
    }

    /// The task's pid.
    pub fn pid(&self) -> u32 {
        self.task.pid
    }

    /// Waits for the task to finish and be gone (its stack given back);
    /// its result.
    pub fn join(self) -> u64 {
        let task = &self.task;
        task.exited.wait_until(|| task.released.load(Ordering::Acquire));
        task.result.load(Ordering::Acquire)
    }
}
