//! Kernel command-line options (QEMU's `-append`), as `key=value` words.

/// The value of `key=value` on the command line, or `Some("")` for a bare `key`.
pub fn option(key: &str) -> Option<&'static str> {
    arch::boot::cmdline().split_whitespace().find_map(|word| match word.split_once('=') {
        Some((k, value)) if k == key => Some(value),
        None if word == key => Some(""),
        _ => None,
    })
}
