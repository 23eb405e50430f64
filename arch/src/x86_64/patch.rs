//! x86_64 text patching primitives (the batch logic is `crate::text`).
//!
//! Writes go through the text alias (`mm::text_alias`). x86 keeps
//! instruction fetch coherent with stores to the same physical memory, so
//! nothing is needed per write; the batch ends with a CR3 reload (dropping the
//! alias), which also serializes the CPU before it runs patched code.

pub(crate) use super::mm::{map_text_alias, text_alias, unmap_text_alias};

/// Makes a write of `len` bytes at text address `addr` visible to
/// instruction fetch: nothing to do on x86_64.
pub(crate) fn after_write(_addr: usize, _len: usize) {}

/// Ends a batch (after `unmap_text_alias`'s serializing CR3 reload).
pub(crate) fn finish_batch() {}
