#!/usr/bin/env bash
# A soak anyone can run: `stress` (tracing switched on and off under every
# CPU's traced calls; see kernel/src/stress.rs) booted many times, at 2, 4
# and 8 CPUs, on a host with fewer cores than that. A rare crash is a real
# one: each failing run's whole console output is kept, to read its report
# (exception, registers, backtrace, the flight recorder's last int3
# emulations and kprobe traps).
#
#   tests/soak.sh [ARCH] [RUNS] [TOGGLES]   (defaults: x86_64, 20, 300)
#
# RUNS boots per CPU count. A run fails if the kernel does not power off
# cleanly, prints a panic or an exception, or its stress line says
# anything was lost, unbalanced, wrong, left patched or leaked (the checks
# of the stress scenario). Prints one line per CPU count and the failures'
# files; exits non-zero if any run failed. Environment: SOAK_SMP (the CPU
# counts, default "2 4 8"), SOAK_KEEP (where failures go, default
# target/soak).
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"

arch=${1:-x86_64}
runs=${2:-20}
toggles=${3:-300}
keep=${SOAK_KEEP:-target/soak}
target_triple "$arch" >/dev/null
ensure_rust
ensure_qemu "$arch"
mkdir -p "$keep"

# Built once; each run boots the same image (a copy: a build meanwhile
# must not change what later runs boot).
elf="$keep/kernel-$arch.elf"
cp "$(build_kernel "$arch")" "$elf"

# verdict OUTPUT STATUS: empty if the run passed, else why not.
verdict() {
    local out=$1 status=$2 line restored
    [ "$status" -eq 0 ] || { echo "exit status $status"; return; }
    if grep -qE '^(panic|exception):' <<<"$out"; then
        grep -m1 -E '^(panic|exception):' <<<"$out"
        return
    fi
    line=$(grep -E '^stress: cpus=' <<<"$out" || true)
    [ -n "$line" ] || { echo "no stress line"; return; }
    field() { sed -n "s/.* $1=\([0-9/-]*\).*/\1/p" <<<"$line"; }
    [ "$(field lost) $(field unbalanced) $(field bad_args) $(field bad_retvals)" = "0 0 0 0" ] || { echo "$line"; return; }
    restored=$(field sites_restored)
    [ "${restored%/*}" = "${restored#*/}" ] || { echo "$line"; return; }
    [ "$(field heap_delta)" -lt 16384 ] || { echo "$line"; return; }
}

failed=0
started=$(date +%s)
for smp in ${SOAK_SMP:-2 4 8}; do
    passed=0
    seconds=$(date +%s)
    for ((run = 1; run <= runs; run++)); do
        status=0
        out=$(printf 'stress --toggles %s\npoweroff\n' "$toggles" \
            | tools/qemu.sh "$arch" "$elf" --smp "$smp" --timeout 600 2>&1) || status=$?
        why=$(verdict "$out" "$status")
        if [ -z "$why" ]; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            file="$keep/$arch-smp$smp-run$run.log"
            printf '%s\n' "$out" >"$file"
            echo "FAILED: $arch --smp $smp run $run: $why (console in $file)"
        fi
    done
    echo "soak: $arch --smp $smp: $passed of $runs runs passed ($(($(date +%s) - seconds)) s)"
done
echo "soak: $arch: $failed failed in $(($(date +%s) - started)) s"
[ "$failed" -eq 0 ]
