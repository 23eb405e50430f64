#!/usr/bin/env bash
# Runs every test: the host unit tests of the architecture-neutral crates, then
# the in-kernel tests under QEMU on x86_64, then on aarch64.
#
#   tests/run.sh [lint] [host] [x86_64] [aarch64]   (default: all four, in order)
#   tests/run.sh each-x86_64 | each-aarch64
#
# `each-ARCH` (not in the default run: about 4 minutes an architecture) runs
# every in-kernel test alone, one boot each, as `cargo test ... -- NAME` does
# for a developer: a test that passes only after another one (or that leaves
# something a later test trips on) fails there.
#
# `lint` is tests/lint.sh: rustfmt, clippy and rustdoc, warnings denied.
# Each kernel run must end with `ARCH: N passed, 0 failed`. After each one, a
# second short run injects failing tests (kernel option ktest.inject_failure)
# and must fail: proof that a failure really fails the run. Then the console
# scenarios (tests/scenarios.sh) drive the shell as a user would, a script
# waits on each answer through a fifo (tests/interactive.sh), mutated input
# must get errors and never a panic (tests/fuzz-input.sh),
# tests/trace-export.sh records sessions and reads them back with trace-cmd,
# and a short soak boots `stress` twice at each of 2, 4 and 8 CPUs
# (tests/soak.sh). Installs what is missing (Rust targets, QEMU) and says so.
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"

# Crates whose unit tests run on the host.
HOST_CRATES=(shell ftrace ring_buffer trace fprobe probe_events kprobes rethook ksyms tracedat benchchart modcycles)

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(lint host x86_64 aarch64)

ensure_rust
failures=()

run_host() {
    echo "== host unit tests"
    local args=()
    for crate in "${HOST_CRATES[@]}"; do args+=(-p "$crate"); done
    cargo test --quiet "${args[@]}" || failures+=("host")
}

# The in-kernel tests there are: every `#[ktest]` in the kernel's sources.
# Each architecture's runner must register exactly these and pass them all,
# so a test module left out of kernel/src/tests/mod.rs (its tests compiled
# out, never run) fails the run instead of passing unseen.
expected_kernel_tests() {
    grep -rhE '^\s*#\[ktest(\]|\()' kernel/src --include='*.rs' | wc -l
}

run_kernel() {
    local arch=$1 triple log status passed registered expected
    triple=$(target_triple "$arch")
    ensure_qemu "$arch"
    echo "== in-kernel tests, $arch"
    log=$(mktemp)
    set +e
    cargo test --quiet --profile "kernel-$arch" --target "$triple" -p kernel 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e
    if [ "$status" -ne 0 ] || ! grep -Eq "^$arch: [0-9]+ passed, 0 failed$" "$log"; then
        failures+=("$arch")
    fi
    # Exactly the tests the sources declare were registered and passed.
    expected=$(expected_kernel_tests)
    registered=$(sed -n 's/^running \([0-9]*\) tests$/\1/p' "$log")
    passed=$(sed -n "s/^$arch: \([0-9]*\) passed, 0 failed$/\1/p" "$log")
    if [ "${registered:-0}" -ne "$expected" ] || [ "${passed:-0}" -ne "$expected" ]; then
        echo "FAILED: $arch registered ${registered:-0} and passed ${passed:-0} in-kernel tests; the sources declare $expected"
        failures+=("$arch-test-count")
    else
        echo "ok: $arch registered and passed all $expected in-kernel tests the sources declare"
    fi

    echo "== $arch: a failing test must fail the run"
    set +e
    KTEST_CMDLINE=ktest.inject_failure cargo test --quiet --profile "kernel-$arch" --target "$triple" \
        -p kernel -- heap_round_trip >"$log" 2>&1
    status=$?
    set -e
    if [ "$status" -ne 0 ] && grep -Eq "^$arch: 1 passed, 3 failed$" "$log" \
        && [ "$(grep -c '^testing::injected_[a-z_]* \.\.\. FAILED$' "$log")" -eq 3 ]; then
        echo "ok: the injected failures (a panic, a should_panic test that returned, a wrong panic message) made the run exit with status $status"
    else
        echo "FAILED: the injected failure did not fail the run (status $status):"
        cat "$log"
        failures+=("$arch-failure-detection")
    fi
    rm -f "$log"

    echo "== $arch: console scenarios"
    tests/scenarios.sh "$arch" || failures+=("$arch-scenarios")
    tests/interactive.sh "$arch" || failures+=("$arch-interactive")
    echo "== $arch: malformed input at volume"
    tests/fuzz-input.sh "$arch" || failures+=("$arch-fuzz-input")

    echo "== $arch: traces leaving the machine (trace.dat, trace-cmd, flame graph)"
    tests/trace-export.sh "$arch" || failures+=("$arch-trace-export")
    echo "== $arch: a short soak (stress at 2, 4 and 8 CPUs; tests/soak.sh runs a long one)"
    tests/soak.sh "$arch" 2 || failures+=("$arch-soak")
}

# Every in-kernel test alone (see the header).
run_each() {
    local arch=$1 triple log names name count failed=()
    triple=$(target_triple "$arch")
    ensure_qemu "$arch"
    log=$(mktemp)
    echo "== in-kernel tests, $arch, each alone"
    # The names, from one run of them all (each prints `NAME ... ok|FAILED`).
    names=$(cargo test --quiet --profile "kernel-$arch" --target "$triple" -p kernel 2>&1 \
        | sed -n 's/^\([A-Za-z0-9_:]*\) \.\.\. \(ok\|FAILED\)$/\1/p' || true)
    count=$(wc -w <<<"$names")
    if [ "$count" -ne "$(expected_kernel_tests)" ]; then
        echo "FAILED: found $count in-kernel tests to run alone; the sources declare $(expected_kernel_tests)"
        failures+=("$arch-each")
        return
    fi
    for name in $names; do
        # The runner selects by substring: a whole `module::test` name is
        # no other test's, so exactly one runs.
        if ! cargo test --quiet --profile "kernel-$arch" --target "$triple" -p kernel -- "$name" >"$log" 2>&1 \
            || ! grep -Eq "^$arch: 1 passed, 0 failed$" "$log"; then
            echo "FAILED alone: $name"
            tail -20 "$log" | sed 's/^/    /'
            failed+=("$name")
        fi
    done
    rm -f "$log"
    echo "$arch: $count tests run alone, ${#failed[@]} failed"
    [ ${#failed[@]} -eq 0 ] || failures+=("$arch-each")
}

for stage in "${stages[@]}"; do
    case "$stage" in
        each-x86_64|each-aarch64) run_each "${stage#each-}" ;;
        lint) tests/lint.sh || failures+=("lint") ;;
        host) run_host ;;
        x86_64|aarch64) run_kernel "$stage" ;;
        *) echo "tests/run.sh: unknown stage '$stage' (lint, host, x86_64, aarch64, each-x86_64, each-aarch64)" >&2; exit 2 ;;
    esac
done

if [ ${#failures[@]} -gt 0 ]; then
    echo "tests/run.sh: FAILED: ${failures[*]}"
    exit 1
fi
echo "tests/run.sh: all passed (${stages[*]})"
