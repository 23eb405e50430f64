//! The patchable-site geometry, stated once: the kernel profiles in
//! `Cargo.toml` ask the compiler for it, the site table (`crate::sites`)
//! and the post-link tool (`tools/ksyms`) rely on it, and a test checks the
//! three agree.
//!
//! Every traced function `F` has an 8-byte ops literal just before it (the
//! patchable entry's prefix NOPs) and its call slot at the entry; the
//! patchable-entry table records `F - LITERAL_BYTES`.

/// Bytes of the ops literal before every traced function, on both
/// architectures.
pub const LITERAL_BYTES: usize = 8;

/// The flag each architecture's kernel profile passes to the traced crate:
/// `-Zpatchable-function-entry=TOTAL,PREFIX`, x86_64 counting bytes (an
/// 8-byte prefix and a 5-byte call slot), aarch64 counting 4-byte
/// instructions (a 2-instruction prefix, `mov x9, x30` and the call slot).
pub const PATCHABLE_ENTRY_FLAGS: [(&str, &str); 2] =
    [("x86_64", "-Zpatchable-function-entry=13,8"), ("aarch64", "-Zpatchable-function-entry=4,2")];

#[cfg(test)]
mod tests {
    use super::*;

    const CARGO_TOML: &str = include_str!("../../Cargo.toml");

    #[test]
    fn the_kernel_profiles_ask_for_this_geometry() {
        for (arch, flag) in PATCHABLE_ENTRY_FLAGS {
            let section = alloc::format!("[profile.kernel-{arch}.package.kernel]\nrustflags = [\"{flag}\"");
            assert!(CARGO_TOML.contains(&section), "Cargo.toml's kernel-{arch} profile must pass {flag}");
            let prefix: usize = flag.rsplit(',').next().unwrap().parse().unwrap();
            let unit = if arch == "x86_64" { 1 } else { 4 };
            assert_eq!(prefix * unit, LITERAL_BYTES, "{arch}: the prefix is the ops literal");
        }
    }
}
