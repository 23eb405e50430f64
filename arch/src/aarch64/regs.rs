//! The full aarch64 register save, `PtRegs`.
//!
//! Exception entry fills it, and so will the full-registers tracing
//! trampoline. Every offset the assembly uses comes from `offset_of!`.

use core::fmt;
use core::mem::{offset_of, size_of};

/// Every general register, sp, pc, pstate, and a frame record.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct PtRegs {
    /// x0 to x30 (x29 is the frame pointer, x30 the link register).
    pub regs: [u64; 31],
    pub sp: u64,
    pub pc: u64,
    pub pstate: u64,
    /// A frame record (the interrupted x29, pc) so that backtraces taken in a
    /// handler continue into the interrupted code.
    pub stackframe: [u64; 2],
}

const _: () = {
    assert!(size_of::<PtRegs>() % 16 == 0);
    // stp/ldp offsets are signed 7-bit multiples of 8: at most 504.
    assert!(size_of::<PtRegs>() <= 504);
    assert!(offset_of!(PtRegs, regs) % 16 == 0);
};

impl PtRegs {
    /// The instruction pointer.
    pub fn ip(&self) -> usize {
        self.pc as usize
    }

    /// Sets the instruction pointer the saved context resumes at.
    pub fn set_ip(&mut self, ip: usize) {
        self.pc = ip as u64;
    }

    /// The stack pointer.
    pub fn sp(&self) -> usize {
        self.sp as usize
    }

    /// The frame pointer (x29).
    pub fn fp(&self) -> usize {
        self.regs[29] as usize
    }
}

/// The register dump printed by exception reports: four registers a line.
impl fmt::Display for PtRegs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (row, chunk) in self.regs.chunks(4).enumerate() {
            for (column, value) in chunk.iter().enumerate() {
                write!(f, "  x{:<2}: {value:#018x}", row * 4 + column)?;
            }
            if row == 7 {
                write!(f, "   sp: {:#018x}", self.sp)?;
            }
            writeln!(f)?;
        }
        writeln!(f, "   pc: {:#018x}  pstate: {:#010x}", self.pc, self.pstate)
    }
}
