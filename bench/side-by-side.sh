#!/usr/bin/env bash
# The side-by-side benchmark: the guest instructions tracing adds to one
# traced call, in Linux 7.2, Linux 6.12 and this kernel, on the same QEMU
# machine under -icount shift=0, the same job on both sides (one function
# traced, events recorded in the ring buffer).
#
#   bench/side-by-side.sh [ARCH...] [--svg FILE] [--rerun-linux] [-- VS_LINUX_OPTIONS...]
#
# ARCH          x86_64 and/or aarch64 (default: both).
# --svg FILE    the bar chart (default target/vs-linux/side-by-side.svg).
# --rerun-linux measure Linux again even when its figures are saved.
# Options after -- go to bench/vs-linux.sh (--runs N, --nokaslr, ...).
#
# Linux's figures come from bench/vs-linux.sh, which boots Debian's kernels
# (run once and saved: see bench/linux-figures.sh). This kernel's come from
# booting it with `./qemu-run.sh ARCH --icount --bench-vs-linux`
# (kernel/src/bench/vs_linux.rs). For each architecture it prints a table
# (mode, Linux 7.2, Linux 6.12, ours, ours over the cheaper Linux) and one
#   vs_linux MODE RATIO
# line per mode; the goal is every ratio at most 0.4.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
source "$root/tools/env.sh"

usage() {
    sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
die() {
    echo "side-by-side: error: $*" >&2
    exit 1
}

arches=()
svg=$root/target/vs-linux/side-by-side.svg
rerun=()
while [ $# -gt 0 ]; do
    case "$1" in
        x86_64|aarch64) arches+=("$1") ;;
        --svg) [ $# -ge 2 ] || usage; svg=$2; shift ;;
        --rerun-linux) rerun=(--rerun) ;;
        --) shift; break ;;
        -h|--help) usage ;;
        *) echo "side-by-side: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
[ ${#arches[@]} -gt 0 ] || arches=(x86_64 aarch64)
modes=(function two_instances busy function_graph entry_event exit_event kprobe_mid)
chart_data=$(mktemp)
trap 'rm -f "$chart_data"' EXIT

for arch in "${arches[@]}"; do
    linux=$("$here/linux-figures.sh" "$arch" "${rerun[@]}" -- "$@") ||
        die "no Linux figures for $arch (bench/vs-linux.sh $arch)"
    echo "side-by-side: booting this kernel on $arch under QEMU -icount shift=0" >&2
    ours=$("$root/qemu-run.sh" "$arch" --icount --bench-vs-linux </dev/null 2>&1 | tr -d '\r') ||
        die "$arch: the kernel's benchmark failed: $(grep '^vso-error' <<<"$ours" || echo "no output")"
    grep -q '^vso-done' <<<"$ours" || die "$arch: the kernel's benchmark did not finish"

    echo
    echo "$arch, QEMU -icount shift=0: guest instructions tracing adds to one call"
    printf '%-16s %10s %10s %10s %8s\n' mode "Linux 7.2" "Linux 6.12" ours ratio
    for mode in "${modes[@]}"; do
        l72=$(awk -v m="$mode" '$1 == m && $2 ~ /^7\.2\./ { print $3; exit }' <<<"$linux")
        l612=$(awk -v m="$mode" '$1 == m && $2 ~ /^6\.12\./ { print $3; exit }' <<<"$linux")
        me=$(awk -v m="$mode" '$1 == "vso" && $2 == m { print $6; exit }' <<<"$ours")
        [ -n "$me" ] || die "$arch: no '$mode' figure from the kernel"
        [ -n "$l72$l612" ] || die "$arch: no Linux figure for '$mode'"
        ratio=$(awk -v me="$me" -v a="${l72:-0}" -v b="${l612:-0}" 'BEGIN {
            low = (a > 0 && (b == 0 || a < b)) ? a : b; printf "%.2f", me / low }')
        printf '%-16s %10s %10s %10s %8s\n' "$mode" "${l72:--}" "${l612:--}" "$me" "$ratio"
        echo "vs_linux $mode $ratio"
        [ -z "$l72" ] || echo "$arch $mode linux-7.2 $l72" >>"$chart_data"
        [ -z "$l612" ] || echo "$arch $mode linux-6.12 $l612" >>"$chart_data"
        echo "$arch $mode ours $me" >>"$chart_data"
    done
done

build_host_tool benchchart
mkdir -p "$(dirname "$svg")"
"$root/target/release/benchchart" "$svg" <"$chart_data"
echo "side-by-side: chart in $svg" >&2
