//! The trace channel: a host file written through Arm semihosting.
//!
//! Why: QEMU's `virt` machine gives the normal world a single PL011 (the
//! console), and semihosting, already used to leave QEMU, can open and write
//! a host file directly (`SYS_OPEN`, `SYS_WRITE`), with a status for every
//! write, so a broken channel is noticed. No driver, no second device.

use super::semihosting::{self, Operation};
use crate::ChannelError;

/// `SYS_OPEN` mode 5: "wb".
const MODE_WRITE_BINARY: u64 = 5;

/// An open host file.
pub struct TraceChannel {
    handle: u64,
}

/// Opens (creates, truncates) the host file `host_path`.
pub fn open(host_path: &str) -> Result<TraceChannel, ChannelError> {
    if host_path.is_empty() {
        return Err(ChannelError::Unavailable);
    }
    let mut path = [0u8; 256];
    let bytes = host_path.as_bytes();
    if bytes.len() >= path.len() {
        return Err(ChannelError::Unavailable);
    }
    path[..bytes.len()].copy_from_slice(bytes);
    let mut block = [path.as_ptr() as u64, MODE_WRITE_BINARY, bytes.len() as u64];
    // SAFETY: SYS_OPEN takes (NUL-terminated path, mode, path length); the
    // path buffer outlives the call.
    let handle = unsafe { semihosting::call(Operation::Open, block.as_mut_ptr()) };
    if handle as i64 == -1 {
        return Err(ChannelError::Unavailable);
    }
    Ok(TraceChannel { handle })
}

impl TraceChannel {
    /// Appends `bytes` to the file.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), ChannelError> {
        let mut block = [self.handle, bytes.as_ptr() as u64, bytes.len() as u64];
        // SAFETY: SYS_WRITE takes (handle, buffer, length) and only reads the
        // buffer; it answers how many bytes were *not* written.
        let left = unsafe { semihosting::call(Operation::Write, block.as_mut_ptr()) };
        if left == 0 {
            Ok(())
        } else {
            Err(ChannelError::Broken)
        }
    }

    /// Closes the file.
    pub fn close(self) -> Result<(), ChannelError> {
        let mut block = [self.handle];
        // SAFETY: SYS_CLOSE takes (handle).
        match unsafe { semihosting::call(Operation::Close, block.as_mut_ptr()) } {
            0 => Ok(()),
            _ => Err(ChannelError::Broken),
        }
    }
}
