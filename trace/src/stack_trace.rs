//! Recording a kernel stack trace into a trace array: a `<stack trace>`
//! event (`TRACE_STACK`) with the chain of return addresses, innermost
//! first. The `stacktrace` function command, the `stacktrace` event
//! trigger and `options/func_stack_trace` all record through here.

use arch::ftrace_abi::FtraceRegs;

use crate::array::trace_array::TraceArray;
use crate::events::record::{encode_stack, stack_event_size, TRACE_STACK};

/// The deepest call chain a `stacktrace` event keeps.
pub const STACK_DEPTH: usize = 16;

/// Records the chain of return addresses that led to `ip`: the traced
/// function's caller first, then theirs, through the frame records.
pub fn record_stack(array: &TraceArray, ip: usize, fregs: &FtraceRegs) {
    record_frames(array, core::iter::once(ip).chain(ftrace::graph::unwind::callers(fregs).map(|(ret, _)| ret)));
}

/// Records `frames` (innermost first, the first [`STACK_DEPTH`]) as a
/// `<stack trace>` event in `array`.
pub fn record_frames(array: &TraceArray, frames: impl Iterator<Item = usize>) {
    let mut chain = [0u64; STACK_DEPTH];
    let mut count = 0;
    for (slot, address) in chain.iter_mut().zip(frames) {
        *slot = address as u64;
        count += 1;
    }
    let common = crate::events::record::event_common(TRACE_STACK);
    let chain = &chain[..count];
    array.buffer().write_with(stack_event_size(chain), |_, out| encode_stack(common, chain, out));
}
