//! The running kernel's own symbol table (`.kernel_symbols`), validated once.

use spin::Once;

use crate::symbols::table::{Kallsyms, KallsymsError};

static TABLE: Once<Result<Kallsyms<'static>, KallsymsError>> = Once::new();

/// The validated table, or why there is none.
pub fn table() -> Result<&'static Kallsyms<'static>, KallsymsError> {
    TABLE.call_once(|| Kallsyms::parse(arch::layout::kernel_symbols())).as_ref().map_err(|e| *e)
}

/// The name of the function containing `address`.
pub fn name_of(address: usize) -> Option<&'static str> {
    table().ok()?.lookup(address).map(|symbol| symbol.name)
}

/// Writes `function+0xOFF/0xSIZE` (or the bare address) for `address`.
pub fn write_address(out: &mut dyn core::fmt::Write, address: usize) -> core::fmt::Result {
    crate::symbols::table::write_address(out, table().ok(), address)
}

/// Writes a return address (a caller) as `function+0xOFF/0xSIZE`: see
/// [`crate::symbols::table::write_return_address`].
pub fn write_return_address(out: &mut dyn core::fmt::Write, address: usize) -> core::fmt::Result {
    crate::symbols::table::write_return_address(out, table().ok(), address)
}

/// Whether the backtrace frame after `inner` (the frame it called) is a
/// return address. Not after the exception entry's call into its handler:
/// the entry links the interrupted code's own pc there, exact (an
/// interrupt can land on a function's first instruction, which a byte back
/// would name as the function before it).
pub fn is_return_address_after(inner: usize) -> bool {
    inner != arch::exceptions::handler_return()
}

/// Writes the backtrace frame `address` that comes after `inner`: as a
/// return address, or exactly where it is none
/// ([`is_return_address_after`]).
pub fn write_frame_after(out: &mut dyn core::fmt::Write, address: usize, inner: usize) -> core::fmt::Result {
    match is_return_address_after(inner) {
        true => write_return_address(out, address),
        false => write_address(out, address),
    }
}
