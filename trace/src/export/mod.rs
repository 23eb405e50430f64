//! Sending the trace to the host: the stream format ([`stream`], shared
//! with the host tool `tracedat`) and the kernel side that writes it
//! through the architecture's trace channel at power-off (`send`).

pub mod stream;

#[cfg(target_os = "none")]
pub mod send;
