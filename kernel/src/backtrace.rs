//! Frame-pointer backtraces.
//!
//! Every kernel function keeps a frame record (`-C force-frame-pointers=yes`):
//! at the frame pointer, the caller's frame pointer, then the return address.
//! The layout is the same on both architectures. The boot stub starts the
//! chain with a null frame pointer, and exception entry links the interrupted
//! code into it. Records are read with fault-tolerant loads, so a corrupt
//! chain ends the walk instead of faulting. Return addresses replaced by the
//! return hook are shown as the real ones.

/// The most frames a walk collects.
pub const MAX_FRAMES: usize = 64;

/// Return addresses found by walking the frame chain starting at the frame
/// record `fp`, innermost first, into `frames`, with no allocation (the
/// panic path's: a panic may come while the heap's lock is held); answers
/// how many it found.
fn walk_into(mut fp: usize, frames: &mut [usize; MAX_FRAMES]) -> usize {
    let mut found = 0;
    while fp != 0 && fp.is_multiple_of(8) && found < MAX_FRAMES {
        let (Some(caller_fp), Some(return_address)) = (arch::fault::read_u64_nofault(fp), arch::fault::read_u64_nofault(fp + 8))
        else {
            break;
        };
        if return_address == 0 {
            break;
        }
        // A call whose return is hooked has the return trampoline in its
        // frame record; the shadow stack knows where it really returns.
        frames[found] = ftrace::graph::retstack::resolve_return_address(return_address as usize, caller_fp as usize);
        found += 1;
        // Stacks grow down: each caller's record sits above its callee's.
        if (caller_fp as usize) <= fp {
            break;
        }
        fp = caller_fp as usize;
    }
    found
}

/// The return addresses of the current call chain, innermost first (the
/// first is the return address into this function's caller), for tests.
#[cfg(test)]
#[inline(never)]
pub fn capture() -> alloc::vec::Vec<usize> {
    let mut frames = [0; MAX_FRAMES];
    let found = walk_into(arch::cpu::frame_pointer(), &mut frames);
    frames[..found].to_vec()
}

/// Prints a backtrace of the current call chain, one frame a line. It
/// allocates nothing: the panic path calls it.
#[inline(never)]
pub fn print_current() {
    let mut frames = [0; MAX_FRAMES];
    let found = walk_into(arch::cpu::frame_pointer(), &mut frames);
    let mut console = arch::print::lock();
    write_frames(&mut console, &frames[..found]);
}

/// Formats `frames` as `  #N 0xADDRESS function+0xOFF/0xSIZE` lines. Return
/// addresses point after the call, so the symbol is looked up one byte back
/// (a call at a function's very end still names that function); an
/// interrupted pc, the frame after the exception entry's, is looked up as
/// it is.
pub fn write_frames(out: &mut dyn core::fmt::Write, frames: &[usize]) {
    let _ = writeln!(out, "backtrace:");
    for (index, &address) in frames.iter().enumerate() {
        let _ = write!(out, "  #{index:<2} {address:#018x} ");
        // The first frame is a return address too (into the walk's caller).
        let _ = match index.checked_sub(1) {
            None => ftrace::symbols::kernel::write_return_address(out, address),
            Some(inner) => ftrace::symbols::kernel::write_frame_after(out, address, frames[inner]),
        };
        let _ = writeln!(out);
    }
}
