//! The full aarch64 register save, `PtRegs`.
//!
//! Exception entry fills it, and so do the full-registers tracing
//! trampolines (`ftrace_regs_caller`, `return_to_handler_regs`). Every offset the assembly uses comes from `offset_of!`.

use core::fmt;
use core::mem::{offset_of, size_of};

/// `PtRegs`' layout, for the documentation's diagram.
pub const PT_REGS_LAYOUT: crate::ftrace_abi::StructLayout = crate::ftrace_abi::StructLayout {
    name: "PtRegs",
    size: size_of::<PtRegs>(),
    fields: &[
        crate::field_layout!(PtRegs, regs, "regs[0..31]: x0..x30"),
        crate::field_layout!(PtRegs, sp),
        crate::field_layout!(PtRegs, pc),
        crate::field_layout!(PtRegs, pstate),
        crate::field_layout!(PtRegs, stackframe, "stackframe: (x29, pc)"),
    ],
};

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
    assert!(size_of::<PtRegs>().is_multiple_of(16));
    // stp/ldp offsets are signed 7-bit multiples of 8: at most 504.
    assert!(size_of::<PtRegs>() <= 504);
    assert!(offset_of!(PtRegs, regs).is_multiple_of(16));
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

    /// Whether the saved context ran with IRQs unmasked (PSTATE.I clear).
    pub fn interrupts_were_enabled(&self) -> bool {
        self.pstate & (1 << 7) == 0
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

// ---- What the tracing trampolines save (see `crate::ftrace_abi`) ----

use crate::ftrace_abi::{RegisterInfo, ReturnAddress, Saved};

/// Arguments passed in registers (AAPCS64: x0-x7).
pub const ARGUMENT_REGISTERS: usize = 8;
/// The argument registers' names as `%REG` takes them, in argument order.
pub const ARGUMENT_NAMES: [&str; ARGUMENT_REGISTERS] = ["x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"];

/// aarch64 functions find their return address in the link register.
pub const RETURN_ADDRESS: ReturnAddress = ReturnAddress::LinkRegister;

const FULL: u8 = Saved::EntryFull.bit() | Saved::ReturnFull.bit();
const ENTRY: u8 = Saved::EntryArgs.bit() | FULL;
const RETURN: u8 = Saved::Return.bit() | FULL;

macro_rules! x {
    ($n:literal, $saved_by:expr) => {
        RegisterInfo { names: &[concat!("x", stringify!($n))], offset: offset_of!(PtRegs, regs) + 8 * $n, saved_by: $saved_by }
    };
}

/// Every register, and which saves record it: the entry save keeps x0-x7
/// (arguments), x8 (indirect result), fp, lr (the traced function's return
/// address), sp and pc; the return save keeps x0-x7, fp, sp, and pc and lr,
/// both the address returned to, as a `ret` leaves lr (the return hook
/// writes them into every return save). The trampolines restore every register they
/// save (a callback's write lands), except sp (each resumes on its own
/// frame), pc and lr in a return save (the return goes where the return
/// hook recorded), of pstate all but the condition flags, and x9 in a full entry
/// save: by then the site's `mov x9, x30` has made it a copy of the return
/// address, and the trampoline resumes through it.
pub const REGISTERS: &[RegisterInfo] = &[
    x!(0, ENTRY | RETURN),
    x!(1, ENTRY | RETURN),
    x!(2, ENTRY | RETURN),
    x!(3, ENTRY | RETURN),
    x!(4, ENTRY | RETURN),
    x!(5, ENTRY | RETURN),
    x!(6, ENTRY | RETURN),
    x!(7, ENTRY | RETURN),
    x!(8, ENTRY),
    x!(9, FULL),
    x!(10, FULL),
    x!(11, FULL),
    x!(12, FULL),
    x!(13, FULL),
    x!(14, FULL),
    x!(15, FULL),
    x!(16, FULL),
    x!(17, FULL),
    x!(18, FULL),
    x!(19, FULL),
    x!(20, FULL),
    x!(21, FULL),
    x!(22, FULL),
    x!(23, FULL),
    x!(24, FULL),
    x!(25, FULL),
    x!(26, FULL),
    x!(27, FULL),
    x!(28, FULL),
    RegisterInfo { names: &["x29", "fp"], offset: offset_of!(PtRegs, regs) + 8 * 29, saved_by: ENTRY | RETURN },
    RegisterInfo { names: &["x30", "lr"], offset: offset_of!(PtRegs, regs) + 8 * 30, saved_by: ENTRY | RETURN },
    RegisterInfo { names: &["sp"], offset: offset_of!(PtRegs, sp), saved_by: ENTRY | RETURN },
    RegisterInfo { names: &["pc"], offset: offset_of!(PtRegs, pc), saved_by: ENTRY | RETURN },
    RegisterInfo { names: &["pstate"], offset: offset_of!(PtRegs, pstate), saved_by: FULL },
];

/// AAPCS64 passes arguments past x7 on the stack; the tracer exposes only the
/// register arguments (as Linux's arm64 `ftrace_regs` does).
pub(crate) fn stack_argument_slot(_sp: usize, _n: usize) -> Option<usize> {
    None
}

impl PtRegs {
    /// Argument register `n` (< [`ARGUMENT_REGISTERS`]).
    #[inline]
    pub(crate) fn argument_register(&self, n: usize) -> u64 {
        self.regs[n]
    }

    /// The return-value register (x0).
    pub fn return_value(&self) -> u64 {
        self.regs[0]
    }

    /// Sets the return-value register (x0).
    pub fn set_return_value(&mut self, value: u64) {
        self.regs[0] = value;
    }

    /// The link register (x30).
    pub(crate) fn link_register(&self) -> Option<usize> {
        Some(self.regs[30] as usize)
    }

    /// Sets the link register (x30).
    pub(crate) fn set_link_register(&mut self, address: usize) {
        self.regs[30] = address as u64;
    }
}
