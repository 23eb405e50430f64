//! The top level and the instances (`instances/NAME`): making one
//! (`mkdir`), finding one, removing one (`rmdir`), and the graph-marker
//! slot each owns.
//!
//! # Lifetimes
//!
//! The top level is a static. An instance lives on the heap from `mkdir`
//! to some time after `rmdir`: while anyone holds an [`InstanceRef`]
//! (a tracefs access in progress, a benchmark) `rmdir` is refused as busy;
//! otherwise it stops the instance's tracer and hands the array to
//! `ftrace::deferred`, which frees it after a grace period, and not before
//! every call its graph tracer hooked has returned.
//!

use crate::array::options::TraceOption;
use crate::array::trace_array::TraceArray;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use arch::sync::Mutex;

use crate::tracers::Tracer;
use ftrace::deferred::{self, Deferred};
use ftrace::registry::FtraceError;
use ftrace::task::{self, GRAPH_SLOTS};
use ring_buffer::trace_buffer::{TraceBuffer, INSTANCE_PAGES_PER_CPU, PAGES_PER_CPU};

/// The most instances at once: one graph-marker slot is the top level's.
pub const MAX_INSTANCES: usize = GRAPH_SLOTS - 1;
static TOP: TraceArray = TraceArray::new(String::new(), 0);

/// The instances, in creation order.
pub(super) static INSTANCES: Mutex<Vec<&'static TraceArray>> = Mutex::new(Vec::new());

/// Graph-marker slots in use, a bit each (the top level's is slot 0).
static SLOTS: AtomicU32 = AtomicU32::new(1);

/// The instance in each slot, for tracing code that knows an array by its
/// slot (an event enabled in instances, `crate::events::arrays`): set once
/// the instance is made, emptied by `rmdir` before its grace period.
static IN_SLOT: [AtomicPtr<TraceArray>; GRAPH_SLOTS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; GRAPH_SLOTS];

/// The instance in `slot`, if there is one. Tracing code reads it with
/// interrupts masked: the grace period before the instance is freed waits
/// for that (see `crate::events::arrays`).
pub(crate) fn in_slot(slot: usize) -> Option<&'static TraceArray> {
    let array = IN_SLOT.get(slot)?.load(Ordering::Acquire);
    // SAFETY: a non-null pointer here is a live instance leaked by
    // `create`; `remove` empties the slot before the grace period after
    // which the instance is freed, and the caller masked interrupts, which
    // that grace period waits for.
    unsafe { array.as_ref() }
}

/// The top level.
#[inline]
pub fn top() -> &'static TraceArray {
    &TOP
}

/// Makes the top level's buffer. Called once at boot.
pub(crate) fn init() {
    TOP.buffer.call_once(|| TraceBuffer::try_new(PAGES_PER_CPU).expect("the top-level trace buffer"));
}

/// A held instance: `rmdir` is refused while it is held.
pub struct InstanceRef(&'static TraceArray);

impl core::ops::Deref for InstanceRef {
    type Target = TraceArray;

    fn deref(&self) -> &TraceArray {
        self.0
    }
}

impl InstanceRef {
    /// The array, for the length of the hold.
    pub fn array(&self) -> &'static TraceArray {
        self.0
    }
}

impl Drop for InstanceRef {
    fn drop(&mut self) {
        self.0.users.fetch_sub(1, Ordering::Release);
    }
}

/// Empties the buffers, live and snapshot, of the arrays in `slots` (a
/// bit per slot; the top level's is bit 0): the arrays an event that went
/// may have recorded into.
pub fn reset_buffers_of_slots(slots: u32) {
    let reset = |array: &TraceArray| {
        array.buffer().reset();
        array.buffer().reset_snapshot();
    };
    if slots & 1 != 0 {
        reset(top());
    }
    INSTANCES.lock().iter().filter(|array| slots & (1 << array.slot) != 0).for_each(|array| reset(array));
}

/// Holds instance `name`, if there is one.
pub fn find(name: &str) -> Option<InstanceRef> {
    let list = INSTANCES.lock();
    let array = *list.iter().find(|array| array.name == name)?;
    array.users.fetch_add(1, Ordering::Acquire);
    Some(InstanceRef(array))
}

/// The instances' names, in creation order.
pub fn names() -> Vec<String> {
    INSTANCES.lock().iter().map(|array| array.name.clone()).collect()
}

/// Why `mkdir` or `rmdir` failed. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceError {
    /// `mkdir` of a name that exists.
    Exists(String),
    /// `rmdir` of a name that does not.
    NoSuchInstance(String),
    /// A name that is empty, too long, or has a `/` or a space.
    BadName(String),
    /// Every slot is taken.
    TooMany,
    /// The heap cannot hold another buffer.
    NoMemory,
    /// `rmdir` while something holds the instance.
    Busy(String),
    /// Stopping its tracer failed.
    Tracing(FtraceError),
    /// `rmdir`: a function command of the instance could not be detached
    /// (the instance stays, with the commands not detached yet).
    Commands(String),
}

impl fmt::Display for InstanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceError::Exists(name) => write!(f, "instance '{name}' exists"),
            InstanceError::NoSuchInstance(name) => write!(f, "no instance '{name}'"),
            InstanceError::BadName(name) => write!(f, "bad instance name '{name}'"),
            InstanceError::TooMany => write!(f, "too many instances (at most {MAX_INSTANCES})"),
            InstanceError::NoMemory => write!(f, "not enough memory for another trace buffer"),
            InstanceError::Busy(name) => write!(f, "instance '{name}' is busy"),
            InstanceError::Tracing(error) => write!(f, "{error}"),
            InstanceError::Commands(error) => write!(f, "its function commands could not all be detached: {error}"),
        }
    }
}

/// The longest instance name.
pub const MAX_NAME: usize = 64;

/// `mkdir instances/NAME`: a new instance, with the `nop` tracer, empty
/// filters and a buffer of its own.
pub fn create(name: &str) -> Result<(), InstanceError> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains(['/', ' ', '\t']) || name == "." || name == ".." {
        return Err(InstanceError::BadName(name.into()));
    }
    let mut list = INSTANCES.lock();
    if list.iter().any(|array| array.name == name) {
        return Err(InstanceError::Exists(name.into()));
    }
    let slot = take_slot().ok_or(InstanceError::TooMany)?;
    let Some(buffer) = TraceBuffer::try_new(INSTANCE_PAGES_PER_CPU) else {
        release_slot(slot);
        return Err(InstanceError::NoMemory);
    };
    let array = Box::leak(Box::new(TraceArray::new(name.into(), slot)));
    array.buffer.call_once(|| buffer);
    // A global setting may already make it check (`tracing_thresh`).
    array.refresh_graph_plain();
    crate::task_names::set_record_cmd(slot, array.option(TraceOption::RecordCmd));
    IN_SLOT[slot].store(array as *const TraceArray as *mut TraceArray, Ordering::Release);
    list.push(array);
    Ok(())
}

/// `rmdir instances/NAME`: stops its tracer and removes it; refused while
/// it is held. Once the removal is sure, `forget` runs with the array, so
/// what names it by its slot lets go first (the events it enabled:
/// `crate::events::arrays`).
pub fn remove(name: &str, forget: impl FnOnce(&'static TraceArray)) -> Result<(), InstanceError> {
    let mut list = INSTANCES.lock();
    let index = list.iter().position(|array| array.name == name).ok_or_else(|| InstanceError::NoSuchInstance(name.into()))?;
    let array = list[index];
    if array.users.load(Ordering::Acquire) != 0 {
        return Err(InstanceError::Busy(name.into()));
    }
    array.set_current_tracer(Tracer::Nop).map_err(InstanceError::Tracing)?;
    crate::tracers::function_commands::remove_all(array).map_err(|error| InstanceError::Commands(alloc::format!("{error}")))?;
    forget(array);
    crate::task_names::set_record_tgid(array.slot, false);
    crate::task_names::set_record_cmd(array.slot, false);
    IN_SLOT[array.slot].store(core::ptr::null_mut(), Ordering::Release);
    list.remove(index);
    // SAFETY: the array was leaked from a box by `create` and is unlisted:
    // nothing new can reach it; `free_instance` waits for what still can.
    unsafe { deferred::defer(&array.node, free_instance) };
    Ok(())
}

/// Frees a removed instance once no hooked call can return into it.
///
/// # Safety
/// `node` is the node of a `TraceArray` leaked from a box by `create` and
/// unlisted by `remove`, which queued it; run after a grace period.
unsafe fn free_instance(node: *const Deferred) {
    let array = ftrace::container_of!(node, TraceArray, node);
    // SAFETY: queued by `remove` with the node of a leaked, unlisted array.
    let in_flight = unsafe { (*array).graph_ops.in_flight() };
    if in_flight {
        // A task still sleeps inside a call the graph tracer hooked: look
        // again after the next grace period.
        // SAFETY: the same node, still valid.
        unsafe { deferred::defer(node, free_instance) };
        return;
    }
    // SAFETY: as above; the grace period is over and no call is in flight.
    let slot = unsafe { (*array).slot };
    task::for_each(|state| {
        state.reset_graph_slot(slot);
        state.set_ignored(slot, false);
        state.set_event_ignored(slot, false);
    });
    release_slot(slot);
    // SAFETY: leaked from a box by `create`; nothing refers to it any more.
    drop(unsafe { Box::from_raw(array as *mut TraceArray) });
}

fn take_slot() -> Option<usize> {
    let mut slots = SLOTS.load(Ordering::Relaxed);
    loop {
        let slot = (!slots).trailing_zeros() as usize;
        if slot >= GRAPH_SLOTS {
            return None;
        }
        match SLOTS.compare_exchange(slots, slots | 1 << slot, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Some(slot),
            Err(now) => slots = now,
        }
    }
}

fn release_slot(slot: usize) {
    SLOTS.fetch_and(!(1 << slot), Ordering::AcqRel);
}
