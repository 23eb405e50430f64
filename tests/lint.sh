#!/usr/bin/env bash
# The code checks CI runs before the tests: formatting (rustfmt.toml),
# clippy with warnings denied (host crates, and the kernel for both
# architectures), rustdoc with warnings denied (the kernel crates for
# both architectures, private items included: the internals are what this
# project teaches; the host tools), and no import cycle inside the layers
# under the tracers (tools/modcycles).
#
#   tests/lint.sh
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"
ensure_rust

failures=()
step() {
    local name=$1
    shift
    echo "== lint: $name"
    "$@" || failures+=("$name")
}

KERNEL_CRATES=(-p kernel -p arch -p ftrace -p ring_buffer -p trace -p fprobe -p probe_events -p rethook -p kprobes)
HOST_TOOLS=(-p shell -p ksyms -p tracedat -p benchchart -p modcycles)

step fmt cargo fmt --all --check
step clippy-host cargo clippy --quiet --all-targets -- -D warnings
for arch in x86_64 aarch64; do
    triple=$(target_triple "$arch")
    step "clippy-$arch" cargo clippy --quiet --profile "kernel-$arch" --target "$triple" -p kernel -- -D warnings
    step "doc-$arch" env RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --document-private-items \
        --profile "kernel-$arch" --target "$triple" "${KERNEL_CRATES[@]}"
done
step doc-host env RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --document-private-items "${HOST_TOOLS[@]}"
# The layers under the tracers import nothing in a cycle (tools/modcycles);
# the layers above are reported (a trace array and its events are one
# knot, as Linux's trace.h is).
step module-cycles cargo run --quiet -p modcycles -- --deny arch/src ftrace/src ring_buffer/src rethook/src fprobe/src kprobes/src
cargo run --quiet -p modcycles -- trace/src probe_events/src kernel/src || true
# The crates depend on each other as docs/architecture.md draws them.
step crate-layers tests/layers.sh

if [ ${#failures[@]} -gt 0 ]; then
    echo "tests/lint.sh: FAILED: ${failures[*]}"
    exit 1
fi
echo "tests/lint.sh: all passed"
