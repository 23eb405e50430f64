#!/usr/bin/env bash
# Builds the kernel and boots it under QEMU with the serial console on
# standard input and output; exits with the kernel's status.
#
#   ./qemu-run.sh [x86_64|aarch64] [--smp N] [--kvm] [--bench] [--bench-vs-linux] [--icount]
#                 [--record FILE.dat] [--flamegraph FILE.svg]
#                 [--timeout SECONDS] [-- QEMU_ARGS...]
#
# x86_64 is the default. --smp N: N CPUs (1 to 8; 4 by default).
# --kvm uses KVM where /dev/kvm exists (x86_64).
# --bench runs the tracing benchmark and powers off; --bench-vs-linux runs
# the job bench/side-by-side.sh compares with Linux, and powers off. --icount (TCG) makes
# guest time count executed instructions: the benchmark's figures become
# deterministic instruction counts.
# --record FILE: when the kernel powers off, its trace buffers go to the host
# through the trace channel and FILE becomes a trace.dat (trace-cmd report
# FILE). --flamegraph FILE.svg: the session's function_graph data as a flame
# graph. Either fails, leaving no file, if nothing was recorded.
# Arguments after -- go to QEMU (for example -s for a gdb stub on :1234).
# Unattended: printf 'help\nuptime\npoweroff\n' | ./qemu-run.sh aarch64
# On first use it installs what is missing (Rust targets, QEMU) and says so.
set -euo pipefail
source "$(dirname "$0")/tools/env.sh"

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

arch=x86_64
qemu_opts=()
cmdline=()
record=""
flamegraph=""
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        x86_64|aarch64) arch=$1 ;;
        --kvm) qemu_opts+=(--kvm) ;;
        --bench) cmdline+=(bench) ;;
        --bench-vs-linux) cmdline+=(bench=vs-linux) ;;
        --icount) qemu_opts+=(--icount) ;;
        --smp) [ $# -ge 2 ] || usage; qemu_opts+=(--smp "$2"); shift ;;
        --record) [ $# -ge 2 ] || usage; record=$2; shift ;;
        --flamegraph) [ $# -ge 2 ] || usage; flamegraph=$2; shift ;;
        --timeout) [ $# -ge 2 ] || usage; qemu_opts+=(--timeout "$2"); shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) usage ;;
        *) echo "qemu-run.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done

ensure_rust
ensure_qemu "$arch"
elf=$(build_kernel "$arch")

if [ -z "$record$flamegraph" ]; then
    [ ${#cmdline[@]} -gt 0 ] && qemu_opts+=(--append "${cmdline[*]}")
    exec "$KTRACE_ROOT/tools/qemu.sh" "$arch" "$elf" "${qemu_opts[@]}" -- "${extra[@]}"
fi

# Recording: the kernel writes its trace stream to $stream at power-off.
build_host_tool tracedat
workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
stream="$workdir/trace.stream"
cmdline+=("record=$stream")
[ "$arch" = x86_64 ] && extra=(-debugcon "file:$stream" "${extra[@]}")
set +e
"$KTRACE_ROOT/tools/qemu.sh" "$arch" "$elf" "${qemu_opts[@]}" --append "${cmdline[*]}" -- "${extra[@]}"
status=$?
set -e
for output in "dat:$record" "flamegraph:$flamegraph"; do
    kind=${output%%:*}
    file=${output#*:}
    [ -n "$file" ] || continue
    if ! "$KTRACE_ROOT/target/release/tracedat" "$kind" "$stream" "$elf" "$file"; then
        [ "$status" -ne 0 ] || status=1
    fi
done
exit "$status"
