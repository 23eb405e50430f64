//! x86_64 instructions decoded with `iced-x86`, in GNU (AT&T) syntax as
//! `objdump -d` prints them.

use alloc::string::String;

use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, OpKind};

use crate::disasm::Decoded;

/// Decodes the instruction at the start of `bytes`, which sit at `address`;
/// `None` if they hold no valid instruction.
pub fn decode(bytes: &[u8], address: usize) -> Option<Decoded> {
    let mut decoder = Decoder::with_ip(64, bytes, address as u64, DecoderOptions::NONE);
    let instruction = decoder.decode();
    if instruction.is_invalid() {
        return None;
    }
    let mut text = String::new();
    let mut formatter = GasFormatter::new();
    formatter.options_mut().set_uppercase_hex(false);
    formatter.options_mut().set_branch_leading_zeros(false);
    formatter.format(&instruction, &mut text);
    let near_branch = instruction.op_count() > 0
        && matches!(instruction.op0_kind(), OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64);
    let target = near_branch.then(|| instruction.near_branch_target() as usize);
    Some(Decoded { len: instruction.len(), text, target })
}

/// The length of the instruction at the start of `bytes` (at `address`);
/// `None` if they hold no valid instruction.
pub fn length(bytes: &[u8], address: usize) -> Option<usize> {
    let instruction = Decoder::with_ip(64, bytes, address as u64, DecoderOptions::NONE).decode();
    (!instruction.is_invalid()).then(|| instruction.len())
}
