//! The full x86_64 register save, `PtRegs`.
//!
//! Exception entry fills it (the tail, from `rip` on, is the frame the CPU
//! pushes itself), and so do the full-registers tracing trampolines
//! (`ftrace_regs_caller`, `return_to_handler_regs`). Its
//! field order is what the entry assembly relies on: every offset the assembly
//! uses comes from `offset_of!`, and the layout facts the hardware imposes are
//! checked at compile time below.

use core::fmt;
use core::mem::{offset_of, size_of};

/// `PtRegs`' layout, for the documentation's diagram.
pub const PT_REGS_LAYOUT: crate::ftrace_abi::StructLayout = crate::ftrace_abi::StructLayout {
    name: "PtRegs",
    size: size_of::<PtRegs>(),
    fields: &[
        crate::field_layout!(PtRegs, r15),
        crate::field_layout!(PtRegs, r14),
        crate::field_layout!(PtRegs, r13),
        crate::field_layout!(PtRegs, r12),
        crate::field_layout!(PtRegs, rbp),
        crate::field_layout!(PtRegs, rbx),
        crate::field_layout!(PtRegs, r11),
        crate::field_layout!(PtRegs, r10),
        crate::field_layout!(PtRegs, r9),
        crate::field_layout!(PtRegs, r8),
        crate::field_layout!(PtRegs, rax),
        crate::field_layout!(PtRegs, rcx),
        crate::field_layout!(PtRegs, rdx),
        crate::field_layout!(PtRegs, rsi),
        crate::field_layout!(PtRegs, rdi),
        crate::field_layout!(PtRegs, vector),
        crate::field_layout!(PtRegs, error_code),
        crate::field_layout!(PtRegs, rip),
        crate::field_layout!(PtRegs, cs),
        crate::field_layout!(PtRegs, rflags),
        crate::field_layout!(PtRegs, rsp),
        crate::field_layout!(PtRegs, ss),
    ],
};

/// Every general register, plus the interrupt frame.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct PtRegs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    /// The exception vector; `u64::MAX` when a tracing trampoline filled this.
    pub vector: u64,
    /// The CPU's error code (0 for vectors without one).
    pub error_code: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

// The CPU pushes ss, rsp, rflags, cs, rip, then (maybe) the error code; the
// entry stubs push the vector below it. The struct must mirror that order.
const _: () = {
    assert!(offset_of!(PtRegs, error_code) == offset_of!(PtRegs, vector) + 8);
    assert!(offset_of!(PtRegs, rip) == offset_of!(PtRegs, error_code) + 8);
    assert!(offset_of!(PtRegs, cs) == offset_of!(PtRegs, rip) + 8);
    assert!(offset_of!(PtRegs, rflags) == offset_of!(PtRegs, cs) + 8);
    assert!(offset_of!(PtRegs, rsp) == offset_of!(PtRegs, rflags) + 8);
    assert!(offset_of!(PtRegs, ss) == offset_of!(PtRegs, rsp) + 8);
    assert!(offset_of!(PtRegs, ss) + 8 == size_of::<PtRegs>());
    assert!(size_of::<PtRegs>().is_multiple_of(16));
};

impl PtRegs {
    /// The instruction pointer.
    pub fn ip(&self) -> usize {
        self.rip as usize
    }

    /// Sets the instruction pointer the saved context resumes at.
    pub fn set_ip(&mut self, ip: usize) {
        self.rip = ip as u64;
    }

    /// The stack pointer.
    pub fn sp(&self) -> usize {
        self.rsp as usize
    }

    /// The frame pointer (RBP).
    pub fn fp(&self) -> usize {
        self.rbp as usize
    }

    /// Whether the saved context ran with interrupts enabled (RFLAGS.IF).
    pub fn interrupts_were_enabled(&self) -> bool {
        self.rflags & (1 << 9) != 0
    }

    /// Named registers in dump order, for the exception report.
    fn named(&self) -> [(&'static str, u64); 18] {
        [
            ("rax", self.rax),
            ("rbx", self.rbx),
            ("rcx", self.rcx),
            ("rdx", self.rdx),
            ("rsi", self.rsi),
            ("rdi", self.rdi),
            ("rbp", self.rbp),
            ("rsp", self.rsp),
            ("r8", self.r8),
            ("r9", self.r9),
            ("r10", self.r10),
            ("r11", self.r11),
            ("r12", self.r12),
            ("r13", self.r13),
            ("r14", self.r14),
            ("r15", self.r15),
            ("rip", self.rip),
            ("rflags", self.rflags),
        ]
    }
}

/// The register dump printed by exception reports: three registers a line.
impl fmt::Display for PtRegs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.named().chunks(3) {
            for (name, value) in line {
                write!(f, "  {name:>6}: {value:#018x}")?;
            }
            writeln!(f)?;
        }
        writeln!(f, "      cs: {:#06x}      ss: {:#06x}", self.cs, self.ss)
    }
}

// ---- What the tracing trampolines save (see `crate::ftrace_abi`) ----

use crate::ftrace_abi::{RegisterInfo, ReturnAddress, Saved};

/// Arguments passed in registers (System V: rdi, rsi, rdx, rcx, r8, r9).
pub const ARGUMENT_REGISTERS: usize = 6;
/// The argument registers' names as `%REG` takes them, in argument order.
pub const ARGUMENT_NAMES: [&str; ARGUMENT_REGISTERS] = ["di", "si", "dx", "cx", "r8", "r9"];

/// x86_64 functions find their return address on the stack.
pub const RETURN_ADDRESS: ReturnAddress = ReturnAddress::Stack;

const FULL: u8 = Saved::EntryFull.bit() | Saved::ReturnFull.bit();
const ENTRY: u8 = Saved::EntryArgs.bit() | FULL;
const RETURN: u8 = Saved::Return.bit() | FULL;

macro_rules! register {
    ([$($name:literal),+], $field:ident, $saved_by:expr) => {
        RegisterInfo { names: &[$($name),+], offset: offset_of!(PtRegs, $field), saved_by: $saved_by }
    };
}

/// Every register, and which saves record it: the entry save keeps the six
/// argument registers, rax (return value; also the vector count of variadic
/// calls), rbp, rsp and rip; the return save keeps rax, rdx, rbp, rsp (and
/// rip, the address returned to). The trampolines restore every register
/// they save (a callback's write lands) and RFLAGS, except rsp (each resumes
/// on its own frame), rip in a return save (the return goes where the
/// return hook recorded), cs and ss.
pub const REGISTERS: &[RegisterInfo] = &[
    register!(["rdi", "di"], rdi, ENTRY),
    register!(["rsi", "si"], rsi, ENTRY),
    register!(["rdx", "dx"], rdx, ENTRY | RETURN),
    register!(["rcx", "cx"], rcx, ENTRY),
    register!(["r8"], r8, ENTRY),
    register!(["r9"], r9, ENTRY),
    register!(["rax", "ax"], rax, ENTRY | RETURN),
    register!(["rbp", "bp"], rbp, ENTRY | RETURN),
    register!(["rsp", "sp"], rsp, ENTRY | RETURN),
    register!(["rip", "ip"], rip, ENTRY | RETURN),
    register!(["rbx", "bx"], rbx, FULL),
    register!(["r10"], r10, FULL),
    register!(["r11"], r11, FULL),
    register!(["r12"], r12, FULL),
    register!(["r13"], r13, FULL),
    register!(["r14"], r14, FULL),
    register!(["r15"], r15, FULL),
    register!(["rflags", "flags"], rflags, FULL),
    register!(["cs"], cs, FULL),
    register!(["ss"], ss, FULL),
];

/// Where argument `n` (>= [`ARGUMENT_REGISTERS`]) lives at entry: above the
/// return address, one slot each.
pub(crate) fn stack_argument_slot(sp: usize, n: usize) -> Option<usize> {
    Some(sp + 8 + 8 * (n - ARGUMENT_REGISTERS))
}

impl PtRegs {
    /// Argument register `n` (< [`ARGUMENT_REGISTERS`]).
    #[inline]
    pub(crate) fn argument_register(&self, n: usize) -> u64 {
        match n {
            0 => self.rdi,
            1 => self.rsi,
            2 => self.rdx,
            3 => self.rcx,
            4 => self.r8,
            _ => self.r9,
        }
    }

    /// The return-value register (rax).
    pub fn return_value(&self) -> u64 {
        self.rax
    }

    /// Sets the return-value register (rax).
    pub fn set_return_value(&mut self, value: u64) {
        self.rax = value;
    }

    /// x86_64 has no link register.
    pub(crate) fn link_register(&self) -> Option<usize> {
        None
    }

    /// x86_64 has no link register: never called (RETURN_ADDRESS is Stack).
    pub(crate) fn set_link_register(&mut self, _address: usize) {}
}
