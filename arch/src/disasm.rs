//! One instruction decoded for people: its length, its text, and where it
//! branches to. The `tour` shows patched sites with it; each architecture
//! wraps a well-kept decoder (`iced-x86`, `yaxpeax-arm`) in its
//! `disasm` module.

use alloc::string::String;

pub use crate::imp::disasm::{decode, length};

/// A decoded instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Its length in bytes.
    pub len: usize,
    /// Its text, in the architecture's usual assembler syntax.
    pub text: String,
    /// The target of a direct call or branch.
    pub target: Option<usize>,
}
