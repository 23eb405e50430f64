# Sourced by qemu-run.sh and tests/*.sh: the build environment, and installing
# what is missing on a fresh machine (rustup targets and components, QEMU).
# Every install says what it installs.

# The unstable flags the kernel build needs (-Zpatchable-function-entry,
# custom_test_frameworks, per-package profile rustflags) on the stable
# toolchain, as the Linux kernel's Rust build does.
export RUSTC_BOOTSTRAP=1

KTRACE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The Rust target triple for an architecture name.
target_triple() {
    case "$1" in
        x86_64) echo x86_64-unknown-none ;;
        aarch64) echo aarch64-unknown-none-softfloat ;;
        *) echo "unknown architecture '$1' (expected x86_64 or aarch64)" >&2; return 2 ;;
    esac
}

# The toolchain rust-toolchain.toml pins, with its targets and components.
# `rustup toolchain install` with no arguments reads that file (in rustup
# 1.28 and later), so a machine with rustup and nothing else gets the exact
# release, every target and every component in one step; the checks after it
# only repair a toolchain that was installed without some of them.
ensure_rust() {
    local channel installed
    if ! command -v rustup >/dev/null; then
        echo "setup: rustup is needed (https://rustup.rs); it is not on PATH" >&2
        return 1
    fi
    channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$KTRACE_ROOT/rust-toolchain.toml")
    if ! rustup toolchain list 2>/dev/null | grep -q "^$channel-"; then
        echo "setup: installing Rust $channel from rust-toolchain.toml (rustup toolchain install)" >&2
        (cd "$KTRACE_ROOT" && rustup toolchain install --no-self-update >&2)
    fi
    installed=$(cd "$KTRACE_ROOT" && rustup target list --installed)
    for target in x86_64-unknown-none aarch64-unknown-none aarch64-unknown-none-softfloat; do
        if ! grep -qx "$target" <<<"$installed"; then
            echo "setup: installing Rust target $target (rustup target add)" >&2
            (cd "$KTRACE_ROOT" && rustup target add "$target" >&2)
        fi
    done
    installed=$(cd "$KTRACE_ROOT" && rustup component list --installed)
    for component in rust-src llvm-tools rustfmt clippy; do
        if ! grep -q "^$component" <<<"$installed"; then
            echo "setup: installing Rust component $component (rustup component add)" >&2
            (cd "$KTRACE_ROOT" && rustup component add "$component" >&2)
        fi
    done
}

# apt-get install, refreshing the package lists once if the first try fails.
apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing Debian package $1 (apt-get install $1)" >&2
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$1" >&2; then
        DEBIAN_FRONTEND=noninteractive $sudo apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$1" >&2
    fi
}

# QEMU for one architecture. The two packages need separate apt-get calls on
# this machine image (one combined call fails).
ensure_qemu() {
    case "$1" in
        x86_64) command -v qemu-system-x86_64 >/dev/null || apt_install qemu-system-x86 ;;
        aarch64) command -v qemu-system-aarch64 >/dev/null || apt_install qemu-system-arm ;;
    esac
}

# trace-cmd, to read the trace.dat files the kernel records.
ensure_trace_cmd() {
    command -v trace-cmd >/dev/null || apt_install trace-cmd
}

# Builds one of the host tools under tools/ (target/release/NAME).
build_host_tool() {
    (cd "$KTRACE_ROOT" && cargo build --quiet --release -p "$1" >&2)
}

# The post-link step every kernel image needs (tools/ksyms): sorts the
# patchable-entry table and writes the symbol table into the image.
post_link() {
    build_host_tool ksyms
    "$KTRACE_ROOT/target/release/ksyms" "$1"
}

# Builds the kernel for an architecture and prints the ELF's path.
build_kernel() {
    local arch=$1 triple elf
    triple=$(target_triple "$arch")
    (cd "$KTRACE_ROOT" && cargo build --quiet --profile "kernel-$arch" --target "$triple" -p kernel >&2)
    elf="$KTRACE_ROOT/target/$triple/kernel-$arch/kernel"
    post_link "$elf"
    echo "$elf"
}
