#!/usr/bin/env bash
# The cargo test runner for the kernel targets (.cargo/config.toml): runs the
# post-link step on the test kernel cargo built, boots it and exits with its
# status.
#
#   tests/qemu-runner.sh ARCH TEST_KERNEL.elf [FILTER]
#
# FILTER (what `cargo test -- FILTER` passes) selects tests by name. Extra
# kernel command-line words come from $KTEST_CMDLINE; the time limit from
# $KTEST_TIMEOUT (seconds, default 600).
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"

arch=$1
elf=$2
shift 2
cmdline=${KTEST_CMDLINE:-}
for arg in "$@"; do
    case "$arg" in
        -*) ;; # libtest flags (--nocapture, ...) mean nothing here
        *) cmdline="$cmdline ktest.filter=$arg" ;;
    esac
done
post_link "$elf"
exec "$KTRACE_ROOT/tools/qemu.sh" "$arch" "$elf" --timeout "${KTEST_TIMEOUT:-600}" \
    --append "${cmdline# }" </dev/null
