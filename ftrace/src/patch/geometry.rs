//! The patchable-site geometry, stated once: the site table
//! (`crate::patch::sites`) and the post-link tool (`tools/ksyms`) rely on it, and
//! `tools/ksyms` checks the kernel profiles in `Cargo.toml` ask the
//! compiler for it.
//!
//! Every traced function `F` has an 8-byte ops literal just before it (the
//! patchable entry's prefix NOPs) and its call slot at the entry; the
//! patchable-entry table records `F - LITERAL_BYTES`.

/// Bytes of the ops literal before every traced function, on both
/// architectures.
pub const LITERAL_BYTES: usize = 8;

// The trampolines' view of it.
#[cfg(target_os = "none")]
const _: () = assert!(LITERAL_BYTES == arch::ftrace_abi::LITERAL_BYTES);
