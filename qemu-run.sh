#!/usr/bin/env bash
# Builds the kernel and boots it under QEMU with the serial console on
# standard input and output; exits with the kernel's status.
#
#   ./qemu-run.sh [x86_64|aarch64] [--kvm] [--bench] [--icount] [--timeout SECONDS] [-- QEMU_ARGS...]
#
# x86_64 is the default. --kvm uses KVM where /dev/kvm exists (x86_64).
# --bench runs the tracing benchmark and powers off. --icount (TCG) makes
# guest time count executed instructions: the benchmark's figures become
# deterministic instruction counts.
# Arguments after -- go to QEMU (for example -s for a gdb stub on :1234).
# Unattended: printf 'help\nuptime\npoweroff\n' | ./qemu-run.sh aarch64
# On first use it installs what is missing (Rust targets, QEMU) and says so.
set -euo pipefail
source "$(dirname "$0")/tools/env.sh"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

arch=x86_64
qemu_opts=()
while [ $# -gt 0 ]; do
    case "$1" in
        x86_64|aarch64) arch=$1 ;;
        --kvm) qemu_opts+=(--kvm) ;;
        --bench) qemu_opts+=(--append bench) ;;
        --icount) qemu_opts+=(--icount) ;;
        --timeout) [ $# -ge 2 ] || usage; qemu_opts+=(--timeout "$2"); shift ;;
        --) qemu_opts+=("$@"); break ;;
        -h|--help) usage ;;
        *) echo "qemu-run.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done

ensure_rust
ensure_qemu "$arch"
elf=$(build_kernel "$arch")
exec "$KTRACE_ROOT/tools/qemu.sh" "$arch" "$elf" "${qemu_opts[@]}"
