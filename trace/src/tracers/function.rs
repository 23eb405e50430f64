//! The `function` tracer: one event per traced call (the function and its
//! caller), recorded inline by the trace array's `function_ops` under the
//! recursion guard, with Linux's `func-repeats` folding of a call repeated
//! back to back; a pid filter or a stack trace after each call takes the
//! checking path (`function_trace_call_checking`).

use crate::events::record::event_common;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use arch::ftrace_abi::FtraceRegs;
use arch::irq::IrqGuard;

use crate::array::options::TraceOption;
use crate::array::trace_array::TraceArray;
use crate::events::record::{Common, FixedEvent, FuncRepeatsEvent, FunctionEvent, TRACE_FN};
use ftrace::ops::{Callback, FtraceOps};
use ftrace::task::{self};

/// The function tracer: a trace array's `function_ops` runs it inline.
pub(crate) struct FunctionTrace;

impl Callback for FunctionTrace {
    #[inline(always)]
    fn call(ip: usize, parent_ip: usize, ops: &FtraceOps, _fregs: &mut FtraceRegs) {
        // SAFETY: this callback is only installed in a trace array's
        // `function_ops` (`TraceArray::new`).
        let array = unsafe { array_of_function_ops(ops) };
        record_function(array, ip, parent_ip);
    }
}

/// The function tracer while a pid filter is set or a stack trace asked for
/// (`TraceArray::checking_ops`): leaves out the tasks the filter marks, and
/// follows each function with its stack trace under
/// `options/func_stack_trace`.
pub(crate) extern "C" fn function_trace_call_checking(ip: usize, parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: this callback is only installed in a trace array's `checking_ops`
    // (`TraceArray::new`); stepping back from the field gives the array.
    let array = unsafe { &*ftrace::container_of!(ops, TraceArray, checking_ops) };
    if task::try_current().is_some_and(|state| state.is_ignored(array.slot())) {
        return;
    }
    if array.option(TraceOption::FuncNoRepeats) {
        if !record_function_unless_repeated(array, ip, parent_ip) {
            return;
        }
    } else {
        record_function(array, ip, parent_ip);
    }
    if array.option(TraceOption::FuncStackTrace) {
        crate::stack_trace::record_stack(array, ip, fregs);
    }
}

/// One CPU's last call the function tracer recorded under
/// `options/func-no-repeats`, and how many times it was repeated since
/// (Linux's `trace_func_repeats`). Its CPU counts in it, with interrupts
/// masked; [`forget`](Self::forget) empties it from anywhere before a
/// count starts (the option turned on, the tracer started), which at worst
/// loses one repeat.
pub(crate) struct LastCall {
    ip: AtomicUsize,
    parent_ip: AtomicUsize,
    /// Repeats not recorded yet.
    count: AtomicU32,
    /// When the last of them came, in the buffer's clock.
    last_time: AtomicU64,
}

impl LastCall {
    pub(crate) const fn new() -> LastCall {
        LastCall {
            ip: AtomicUsize::new(0),
            parent_ip: AtomicUsize::new(0),
            count: AtomicU32::new(0),
            last_time: AtomicU64::new(0),
        }
    }

    /// No call to repeat.
    pub(crate) fn forget(&self) {
        self.ip.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }
}

/// The function tracer under `options/func-no-repeats`: a call of the
/// function this CPU last recorded, from the same place, is counted (and
/// its time kept), not recorded; another call first records the count so
/// far as a `func_repeats` event, then itself. Answers whether it recorded
/// the call. (A count reaching `u16::MAX` records the call, as Linux's.)
fn record_function_unless_repeated(array: &TraceArray, ip: usize, parent_ip: usize) -> bool {
    // The call's context (interrupts on or off) is taken before they are
    // masked, so that the CPU's state stays its own until the records are
    // written.
    let common = event_common(TRACE_FN);
    let _irq = IrqGuard::new();
    let Some(last) = array.last_calls.get(arch::cpu::id()) else { return false };
    // SAFETY: the function tracer's callbacks run from its array's ops.
    let buffer = unsafe { array.buffer_made() };
    if !buffer.is_on() {
        // Nothing is recorded, so nothing repeats what was: the count
        // goes on from the last recorded call once recording does.
        return false;
    }
    let count = last.count.load(Ordering::Relaxed);
    let same = last.ip.load(Ordering::Relaxed) == ip && last.parent_ip.load(Ordering::Relaxed) == parent_ip;
    if same && count < u32::from(u16::MAX) {
        last.count.store(count + 1, Ordering::Relaxed);
        last.last_time.store(buffer.now(), Ordering::Relaxed);
        return false;
    }
    if count > 0 {
        let (repeated, repeated_parent) = (last.ip.load(Ordering::Relaxed), last.parent_ip.load(Ordering::Relaxed));
        let last_time = last.last_time.load(Ordering::Relaxed);
        buffer.write_with(FuncRepeatsEvent::SIZE, |time, out| {
            let event = FuncRepeatsEvent {
                common: Common { kind: crate::events::record::TRACE_FUNC_REPEATS, ..common },
                ip: repeated as u64,
                parent_ip: repeated_parent as u64,
                count: count as u16,
                delta: time.saturating_sub(last_time),
            };
            event.encode_into(out);
        });
        last.count.store(0, Ordering::Relaxed);
    }
    last.ip.store(ip, Ordering::Relaxed);
    last.parent_ip.store(parent_ip, Ordering::Relaxed);
    record_function_as(array, common, ip, parent_ip);
    true
}

#[inline(always)]
fn record_function(array: &TraceArray, ip: usize, parent_ip: usize) {
    record_function_as(array, event_common(TRACE_FN), ip, parent_ip);
}

/// [`record_function`] with the header taken already.
#[inline(always)]
fn record_function_as(array: &TraceArray, common: Common, ip: usize, parent_ip: usize) {
    let event = FunctionEvent { common, ip: ip as u64, parent_ip: parent_ip as u64 };
    // SAFETY: the function tracer's callbacks run from its array's ops.
    unsafe { array.buffer_made() }.write_with(FunctionEvent::SIZE, |_, bytes| event.encode_into(bytes));
}

/// The trace array an ops of a tracer belongs to.
///
/// # Safety
/// `ops` must be the `function_ops` of a trace array.
#[inline(always)]
unsafe fn array_of_function_ops(ops: &FtraceOps) -> &TraceArray {
    // SAFETY: the caller's guarantee: stepping back from the field gives
    // the array, alive while its ops is called (see `crate::array::trace_array`).
    unsafe { &*ftrace::container_of!(ops, TraceArray, function_ops) }
}
