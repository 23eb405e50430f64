//! The architecture layer.
//!
//! Generic code (the kernel, `ftrace`, `rethook`, `fprobe`) never names an
//! architecture: it uses the modules re-exported here, which every
//! architecture provides under the same names with the same items:
//!
//! | module       | what it provides |
//! |--------------|------------------|
//! | `boot`       | the kernel command line handed over by the boot protocol |
//! | `channel`    | the trace channel: a byte stream to a host file, apart from the console |
//! | `console`    | the serial port: `write_byte`, `poll_byte`, its receive interrupt |
//! | `cpu`        | interrupt flag, wait for interrupt, breakpoint, frame pointer, stack reset |
//! | `exceptions` | the exception vectors and their dispatcher |
//! | `exit`       | powering QEMU off with an [`ExitCode`] |
//! | `ftrace`     | tracing sites: geometry, call encoding, the two entry and two return trampolines |
//! | `mm`         | page tables (and the text alias), fault-tolerant copies |
//! | `patch`      | writing text through the alias, cache/pipeline synchronisation |
//! | `regs`       | [`regs::PtRegs`] and which registers each trampoline saves |
//! | `flight`     | the last int3 emulations per CPU and the kprobes armed, for reports |
//! | `selftest`   | register-marking harness and fixtures for the in-kernel tests |
//! | `step`       | single-step debug exceptions, for the tests that step traced calls (test builds) |
//! | `switch`     | the context switch between kernel threads |
//! | `timer`      | the periodic tick and the cycle counter |
//!
//! Next to them live the few architecture-neutral pieces the arch code shares:
//! formatted console output with its lock ([`print!`], [`println!`]), console
//! input ([`input`]), the exception table ([`fault`]), interrupt guards
//! ([`irq`]), what an interrupt does on its way out ([`irq_exit`]) and
//! interrupt-safe locks ([`sync`]), tick counting
//! ([`time`]), the image layout from the linker script ([`layout`]), the
//! execution context ([`context`]), the trampoline contract ([`ftrace_abi`])
//! and batched, verified text patching ([`text`]).
//!
//! Nothing in this crate is compiled with patchable function entries: like
//! Linux's entry code and text patching, the layer under the tracer is never
//! traced itself.
#![no_std]

extern crate alloc;

#[cfg(target_arch = "x86_64")]
#[path = "x86_64/mod.rs"]
mod imp;

#[cfg(target_arch = "aarch64")]
#[path = "aarch64/mod.rs"]
mod imp;

pub mod cell;
pub mod context;
pub mod disasm;
pub mod fault;
pub mod flight;
pub mod ftrace_abi;
pub mod input;
pub mod irq;
pub mod irq_exit;
pub mod kprobes;
pub mod layout;
pub mod percpu;
pub mod preempt;
pub mod print;
pub mod sched;
pub mod selftest;
pub mod smp;
#[cfg(feature = "test-hooks")]
pub mod step;
pub mod sync;
pub mod text;
pub mod time;

pub use imp::{boot, channel, console, cpu, exceptions, exit, ftrace, mm, patch, regs, switch, timer};

/// The most CPUs per-CPU arrays are sized for.
pub const MAX_CPUS: usize = 8;

/// The architecture's name as the test summary and the banner print it.
pub const NAME: &str = imp::NAME;

/// Whether the kernel's code may store a word at any address (true), or
/// only at one aligned to its size: record encoders pick their stores by it.
pub const UNALIGNED_STORES: bool = imp::UNALIGNED_STORES;

/// Why the trace channel failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelError {
    /// No channel to the host (not configured by QEMU's command line).
    Unavailable,
    /// A write did not go through.
    Broken,
}

/// What runs the virtual CPU, as far as the guest can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accelerator {
    /// Hardware virtualization (KVM): cycle counts mean something.
    Kvm,
    /// QEMU's software emulation (TCG): only ratios mean anything.
    Tcg,
    /// Something else, or nothing said.
    Unknown,
}

impl Accelerator {
    /// The name benchmarks print.
    pub fn name(self) -> &'static str {
        match self {
            Accelerator::Kvm => "KVM",
            Accelerator::Tcg => "TCG",
            Accelerator::Unknown => "unknown accelerator",
        }
    }
}

/// How the kernel leaves QEMU. `qemu-run.sh` turns each into its own exit
/// status: `Success` into 0, `Failure` into 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// `poweroff`, or every in-kernel test passed.
    Success = 0,
    /// A panic, or at least one in-kernel test failed.
    Failure = 1,
}

/// Powers the machine off: QEMU exits with a status derived from `code`.
pub fn exit(code: ExitCode) -> ! {
    exit::exit(code)
}

extern "Rust" {
    /// The kernel's generic entry point, called once the architecture is up:
    /// console, exceptions, page tables and timer ready, interrupts enabled.
    fn kernel_main() -> !;
}

/// Hands control to the generic kernel. Called by each architecture's boot code.
fn enter_kernel() -> ! {
    // SAFETY: `kernel_main` is defined by the kernel crate with exactly this
    // signature; it is called once, after the architecture is initialised.
    unsafe { kernel_main() }
}
