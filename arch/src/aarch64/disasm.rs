//! aarch64 instructions decoded with `yaxpeax-arm`.

use alloc::string::ToString;

use yaxpeax_arch::{Decoder, U8Reader};
use yaxpeax_arm::armv8::a64::InstDecoder;

use crate::disasm::Decoded;

/// Decodes the instruction at the start of `bytes`, which sit at `address`;
/// `None` if they hold no valid instruction.
pub fn decode(bytes: &[u8], address: usize) -> Option<Decoded> {
    let word = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let mut reader = U8Reader::new(&bytes[..4]);
    let instruction = InstDecoder::default().decode(&mut reader).ok()?;
    // `b` and `bl` (imm26, in words): the target, which the decoder prints
    // as an offset.
    let target = match word >> 26 {
        0b000101 | 0b100101 => {
            let offset = (((word & 0x03ff_ffff) << 6) as i32 >> 6) as isize * 4;
            Some(address.wrapping_add_signed(offset))
        }
        _ => None,
    };
    Some(Decoded { len: 4, text: instruction.to_string(), target })
}

/// The length of the instruction at the start of `bytes`: always 4 (every
/// aarch64 instruction is one word, valid or not), so walking a function
/// instruction by instruction never loses its way on data or `udf`.
pub fn length(bytes: &[u8], _address: usize) -> Option<usize> {
    (bytes.len() >= 4).then_some(4)
}
