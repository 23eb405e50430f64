//! The stack tracer: at the entry of every function `stack_trace_filter`
//! selects (all of them when it is empty), how much of the task's kernel
//! stack is in use; the deepest use seen is `stack_max_size`, and the call
//! chain that reached it is `stack_trace`, as Linux's stack tracer keeps
//! them. Linux switches it with `/proc/sys/kernel/stack_tracer_enabled`;
//! here that is the tracefs file `stack_tracer_enabled`.
//!
//! It is an ops with [`OpsFlags::RECURSION`]. The callback compares the
//! stack pointer with the task's stack (`TaskTrace::kernel_stack`; stacks
//! it does not know, such as an interrupt stack, are skipped); only a new
//! maximum takes the one lock, with `try_lock` (a CPU that finds it held
//! skips the sample rather than wait on the traced path), and walks the
//! frame-pointer chain with fault-tolerant reads.

use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use arch::ftrace_abi::FtraceRegs;
use arch::sync::SpinLock;

use ftrace::symbols::kernel as symbols;
use ftrace::{registry, task, FtraceError, FtraceOps, OpsFlags};

/// The most frames `stack_trace` keeps.
pub const MAX_ENTRIES: usize = 64;

static STACK_OPS: FtraceOps = FtraceOps::new(check_stack, OpsFlags::RECURSION);

/// `stack_tracer_enabled` as written (Linux's sysctl int): not 0 is on.
static ENABLED: AtomicI32 = AtomicI32::new(0);
/// Bytes of the deepest stack use seen.
static MAX_SIZE: AtomicUsize = AtomicUsize::new(0);

/// One frame of the deepest chain: a code address and how much stack was
/// in use below it (its depth).
#[derive(Clone, Copy, Default)]
struct Frame {
    address: usize,
    depth: usize,
}

/// The deepest chain, innermost first.
static TRACE: SpinLock<([Frame; MAX_ENTRIES], usize)> = SpinLock::new(([Frame { address: 0, depth: 0 }; MAX_ENTRIES], 0));

extern "C" fn check_stack(ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let Some(state) = task::try_current() else { return };
    let stack = state.kernel_stack();
    let sp = fregs.stack_pointer();
    if !stack.contains(&sp) {
        return;
    }
    let depth = stack.end - sp;
    if depth <= MAX_SIZE.load(Ordering::Relaxed) {
        return;
    }
    let Some(mut trace) = TRACE.try_lock() else { return };
    if depth <= MAX_SIZE.load(Ordering::Relaxed) {
        return;
    }
    // The traced function, then each caller (`ftrace::graph::unwind`).
    let (frames, count) = &mut *trace;
    frames[0] = Frame { address: ip, depth };
    *count = 1;
    for (ret, fp) in ftrace::graph::unwind::callers(fregs) {
        if *count == MAX_ENTRIES || !stack.contains(&fp) {
            break;
        }
        frames[*count] = Frame { address: ret, depth: stack.end - fp };
        *count += 1;
    }
    MAX_SIZE.store(depth, Ordering::Relaxed);
}

/// `echo N > stack_tracer_enabled`, as Linux's sysctl int: any value not
/// 0 turns the tracer on, and the value itself is what reads back. A
/// refused (un)registration changes nothing.
pub fn set_enabled(value: i32) -> Result<(), FtraceError> {
    // One writer at a time (Linux's `stack_sysctl_mutex`): two writers
    // between the check and the store could leave the ops registered and
    // the value 0.
    static WRITERS: arch::sync::Mutex<()> = arch::sync::Mutex::new(());
    let _writer = WRITERS.lock();
    let on = value != 0;
    if is_enabled() != on {
        if on {
            registry::register(&STACK_OPS)?;
        } else {
            registry::unregister(&STACK_OPS)?;
        }
    }
    ENABLED.store(value, Ordering::Release);
    Ok(())
}

/// `stack_tracer_enabled`: the value last written (0 is off).
pub fn enabled_value() -> i32 {
    ENABLED.load(Ordering::Acquire)
}

/// Whether the stack tracer runs.
pub fn is_enabled() -> bool {
    enabled_value() != 0
}

/// The ops whose filter is `stack_trace_filter`.
pub fn ops() -> &'static FtraceOps {
    &STACK_OPS
}

/// `stack_max_size`: bytes of the deepest stack use seen.
pub fn max_size() -> usize {
    MAX_SIZE.load(Ordering::Relaxed)
}

/// `echo N > stack_max_size`: only a deeper stack than `bytes` is kept
/// from now on; `0` forgets the chain too (start over).
pub fn set_max_size(bytes: usize) {
    let mut trace = TRACE.lock();
    if bytes == 0 {
        trace.1 = 0;
    }
    MAX_SIZE.store(bytes, Ordering::Relaxed);
}

/// Linux's note, under `stack_trace`'s header, that the tracer is off and
/// has kept nothing (its `print_disabled`, word for word).
fn write_disabled(out: &mut dyn Write) -> fmt::Result {
    out.write_str(
        "#\n\
         #  Stack tracer disabled\n\
         #\n\
         # To enable the stack tracer, either add 'stacktrace' to the\n\
         # kernel command line\n\
         # or 'echo 1 > /proc/sys/kernel/stack_tracer_enabled'\n\
         #\n",
    )
}

/// `cat stack_trace`, as Linux prints it: depth, the frame's own size and
/// its location, innermost first; the disabled note when the tracer is off
/// with no maximum.
pub fn write_trace(out: &mut dyn Write) -> fmt::Result {
    let frames: Vec<Frame> = {
        let trace = TRACE.lock();
        trace.0[..trace.1].to_vec()
    };
    writeln!(out, "        Depth    Size   Location    ({} entries)", frames.len())?;
    writeln!(out, "        -----    ----   --------")?;
    if !is_enabled() && max_size() == 0 {
        write_disabled(out)?;
    }
    for (i, frame) in frames.iter().enumerate() {
        let size = frame.depth - frames.get(i + 1).map_or(0, |outer| outer.depth);
        write!(out, "{i:>3}) {:>8}   {size:>5}   ", frame.depth)?;
        // The first is the traced function itself; the others are return
        // addresses into the callers (or an interrupted pc).
        match i.checked_sub(1) {
            None => symbols::write_address(out, frame.address)?,
            Some(inner) => symbols::write_frame_after(out, frame.address, frames[inner].address)?,
        }
        writeln!(out)?;
    }
    Ok(())
}
