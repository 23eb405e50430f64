#!/usr/bin/env bash
# The Linux figures of bench/vs-linux.sh, for other scripts: one line
#
#   MODE VERSION INSTRUCTIONS
#
# per kernel and mode (e.g. "function 7.2.13 574"): guest instructions that
# Linux's tracing adds to one getppid call under QEMU -icount shift=0.
#
#   bench/linux-figures.sh ARCH [--rerun] [-- VS_LINUX_OPTIONS...]
#
# Prints the figures of the last complete `bench/vs-linux.sh ARCH` run, and
# runs it first when there are none (or with --rerun), its output going to
# standard error. Options after -- go to vs-linux.sh (e.g. --runs 3).
#
# Sourced instead (`. bench/linux-figures.sh`), it only defines the function
# linux_figures ARCH, which prints the saved figures or fails.
#
# The saved file, target/vs-linux/results/ARCH.figures, has more columns:
#   MODE VERSION INSTRUCTIONS VARIANT UNTRACED_CALL PACKAGE PACKAGE_VERSION BOOT_OPTIONS
# VARIANT says what was traced and how (fprobe-entry:..., kprobe-exit:...),
# UNTRACED_CALL is what one untraced getppid call costs, BOOT_OPTIONS is "-"
# or "nokaslr" (vs-linux.sh --nokaslr).

_vsl_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_vsl_cache=${VS_LINUX_CACHE:-$(dirname "$_vsl_here")/target/vs-linux}

# Prints the saved figures of ARCH as "MODE VERSION INSTRUCTIONS"; fails
# when there are none.
linux_figures() {
    local f=$_vsl_cache/results/$1.figures
    [ -s "$f" ] || return 1
    awk 'NF >= 3 { print $1, $2, $3 }' "$f"
}

# Run, not sourced (a sourced file must leave the caller's shell options be).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    if [ $# -lt 1 ]; then
        sed -n '9,13p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
    fi
    arch=$1
    shift
    rerun=0
    if [ "${1:-}" = --rerun ]; then
        rerun=1
        shift
    fi
    if [ "${1:-}" = -- ]; then
        shift
    elif [ $# -gt 0 ]; then
        echo "linux-figures: unknown option '$1'" >&2
        exit 2
    fi
    if [ "$rerun" = 1 ] || ! linux_figures "$arch" >/dev/null; then
        "$_vsl_here/vs-linux.sh" "$arch" "$@" >&2
    fi
    linux_figures "$arch" || {
        echo "linux-figures: no figures for $arch in $_vsl_cache/results" >&2
        exit 1
    }
fi
