//! Walking the call chain from a traced function's entry, for the stack
//! tracer and the `stacktrace` command.
//!
//! At a function's entry the frame pointer is its caller's, whose frame
//! record is `[the caller's caller's frame pointer, the return address into
//! it]` on both architectures. Records are read fault-tolerantly, and the
//! walk stops at a null return address or a frame pointer that does not
//! climb the stack (the end of the chain, or a corrupt one). A return
//! address the return hook replaced with its trampoline is given as the
//! real one, from the task's shadow stack (Linux's `ftrace_graph_ret_addr`).

use arch::ftrace_abi::FtraceRegs;

/// The callers of the function whose entry registers are `fregs`,
/// innermost first: (a return address into the caller, the caller's frame
/// pointer). Nothing for a save without a return address.
pub fn callers(fregs: &FtraceRegs) -> impl Iterator<Item = (usize, usize)> {
    let fp = fregs.frame_pointer();
    let first = fregs.return_address().map(|ret| (crate::graph::retstack::resolve_return_address(ret, fp), fp));
    core::iter::successors(first, |&(_, fp)| frame_record(fp)).filter(|&(ret, _)| ret != 0)
}

/// The return addresses the frame records from `fp` up hold, innermost
/// first: for a function's own frame pointer, its caller first.
pub fn return_addresses(fp: usize) -> impl Iterator<Item = usize> {
    let first = (fp != 0).then_some((0, fp));
    core::iter::successors(first, |&(_, fp)| frame_record(fp)).skip(1).map(|(ret, _)| ret)
}

/// The frame record at `fp`: (its return address, the next frame pointer),
/// if it can be read, climbs the stack and has a return address.
fn frame_record(fp: usize) -> Option<(usize, usize)> {
    let next = arch::fault::read_u64_nofault(fp)? as usize;
    let ret = arch::fault::read_u64_nofault(fp + core::mem::size_of::<usize>())? as usize;
    (next > fp && ret != 0).then_some((crate::graph::retstack::resolve_return_address(ret, next), next))
}
