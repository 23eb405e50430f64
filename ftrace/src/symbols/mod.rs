//! Names: the symbol table a host tool writes into the image, this
//! kernel's own copy of it, and the globs that select functions by name.
//!
//! - [`table`]: the table's format (Linux's kallsyms), written by
//!   `tools/ksyms` and read here, unit tested on the host;
//! - [`kernel`]: the running kernel's table, validated once at boot;
//!   addresses to names and names to addresses;
//! - [`glob`]: function-name globs and the `set_ftrace_filter` language.

pub mod glob;
#[cfg(target_os = "none")]
pub mod kernel;
pub mod table;
