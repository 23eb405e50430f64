//! The trace channel: QEMU's `isa-debugcon` at I/O port 0xe9.
//!
//! Why this device: it is write-only, needs no driver or set-up, has no flow
//! control to get wrong, and QEMU sends every byte written to it to a host
//! file (`-debugcon file:PATH`), so a binary stream leaves the machine
//! untouched and can never mix with the console on COM1. `rep outsb` moves a
//! whole buffer per instruction. Without the device the bytes go nowhere,
//! and the host finds no stream: "the session recorded nothing".

use core::arch::asm;

use crate::ChannelError;

const DEBUGCON_PORT: u16 = 0xe9;

/// An open channel.
pub struct TraceChannel(());

/// Opens the channel. `host_path` is where the host wants the stream; on
/// x86_64 QEMU's command line already chose the file, so it is unused.
pub fn open(_host_path: &str) -> Result<TraceChannel, ChannelError> {
    Ok(TraceChannel(()))
}

impl TraceChannel {
    /// Sends `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), ChannelError> {
        // SAFETY: `rep outsb` reads `bytes.len()` bytes from `bytes` (valid)
        // and writes them to the debug port; it changes no memory.
        unsafe {
            asm!(
                "rep outsb",
                inout("rsi") bytes.as_ptr() => _,
                inout("rcx") bytes.len() => _,
                in("dx") DEBUGCON_PORT,
                options(nostack, readonly, preserves_flags)
            );
        }
        Ok(())
    }

    /// Finishes the stream.
    pub fn close(self) -> Result<(), ChannelError> {
        Ok(())
    }
}
