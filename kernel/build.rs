//! Links the kernel with its architecture's linker script from `boot/`, and
//! generates the benchmark's many small traceable functions.

use std::env;
use std::fmt::Write;
use std::path::PathBuf;

/// How many functions `workload::generated` holds: enough that patch time and
/// scale are measured on real numbers of sites.
const GENERATED_FUNCTIONS: usize = 10_000;

/// Writes `generated.rs`: `GENERATED_FUNCTIONS` small, distinct, never-inlined
/// functions and a table of them (which also keeps the linker from dropping
/// them).
fn generate_functions() {
    let mut source = String::new();
    for i in 0..GENERATED_FUNCTIONS {
        let _ = writeln!(
            source,
            "#[inline(never)]\npub fn gen_{i:05}(x: u64) -> u64 {{\n    x.rotate_left({}) ^ {:#x}\n}}",
            i % 63 + 1,
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        );
    }
    let _ = writeln!(source, "/// Every generated function, in order.");
    let _ = writeln!(source, "pub static FUNCTIONS: [fn(u64) -> u64; {GENERATED_FUNCTIONS}] = [");
    for i in 0..GENERATED_FUNCTIONS {
        let _ = writeln!(source, "    gen_{i:05},");
    }
    let _ = writeln!(source, "];");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("generated.rs");
    std::fs::write(out, source).expect("write generated.rs");
}

fn main() {
    generate_functions();
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("kernel/ sits in the workspace root");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "none" {
        // Not a kernel target (for example `cargo check` on the host): no script.
        return;
    }
    let script = root.join("boot").join(format!("{arch}.ld"));
    println!("cargo:rustc-link-arg=-T{}", script.display());
    // INCLUDEs inside the scripts are relative to the workspace root.
    println!("cargo:rustc-link-arg=-L{}", root.display());
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-changed={}", root.join("boot/tables.ld").display());
}
