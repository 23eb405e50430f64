//! Links the kernel with its architecture's linker script from `boot/`.

use std::env;
use std::path::PathBuf;

fn main() {
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
