//! Entry stubs: the first instructions each architecture runs.
//!
//! QEMU loads the kernel ELF at its link addresses (see `x86_64.ld` and
//! `aarch64.ld` beside this crate) and jumps to the entry point with the MMU
//! off. The stub's only jobs are to reach the mode Rust code needs (64-bit long
//! mode with paging on x86_64; EL1 on aarch64), zero `.bss`, install the boot
//! stack with a null frame pointer (so backtraces end cleanly) and call
//! `arch_entry` in the `arch` crate. Everything after that is Rust.
//!
//! The stubs are position-dependent: the kernel is linked at, and identity
//! mapped at, its physical load address.
#![no_std]

#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
mod aarch64;

/// Referenced by the kernel so the linker keeps this crate's object (and so the
/// entry stub) even though nothing calls into it by name.
pub fn linked() {}
