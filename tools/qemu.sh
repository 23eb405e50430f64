#!/usr/bin/env bash
# Boots a kernel ELF under QEMU with the serial console on standard input and
# output, and exits with the kernel's status (0 after `poweroff` or a passing
# test run, 1 after a panic or a failing one, 124 on timeout).
#
#   tools/qemu.sh ARCH KERNEL.elf [--kvm] [--icount] [--smp N] [--timeout SECONDS] [--append CMDLINE] [-- QEMU_ARGS...]
#
# --smp N: N CPUs (1 to 8, default 4).
#
# Shared by qemu-run.sh and the cargo test runner (tests/qemu-runner.sh).
set -euo pipefail

arch=$1
elf=$2
shift 2
kvm=0
icount=0
timeout_s=0
smp=4
append=""
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --kvm) kvm=1 ;;
        --icount) icount=1 ;;
        --timeout) timeout_s=$2; shift ;;
        --smp) smp=$2; shift ;;
        --append) append=$2; shift ;;
        --) shift; extra=("$@"); break ;;
        *) echo "tools/qemu.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

case "$smp" in
    [1-8]) ;;
    *) echo "tools/qemu.sh: --smp takes 1 to 8 CPUs, not '$smp'" >&2; exit 2 ;;
esac
common=(-m 512M -smp "$smp" -kernel "$elf" -display none -serial stdio -monitor none -no-reboot)
# One emulated instruction is one nanosecond of guest time: deterministic.
[ "$icount" = 1 ] && common+=(-icount shift=0)
[ -n "$append" ] && common+=(-append "$append")

case "$arch" in
    x86_64)
        accel=(-cpu max)
        if [ "$kvm" = 1 ]; then
            if [ ! -w /dev/kvm ]; then
                echo "qemu: /dev/kvm is not available, using TCG" >&2
            elif [ -d /sys/module/kvm_pvm ]; then
                # PVM is KVM without hardware virtualization (the CPU has no
                # VMX/SVM): it runs this ring-0, identity-mapped kernel some
                # 500 times slower than TCG, so measuring there is pointless.
                echo "qemu: /dev/kvm is PVM (software virtualization, no VMX/SVM): using TCG" >&2
            else
                # host minus arch-capabilities: KVM inside another hypervisor
                # may refuse to set that MSR.
                accel=(-enable-kvm -cpu host,-arch-capabilities)
            fi
        fi
        cmd=(qemu-system-x86_64 -M pc "${accel[@]}" "${common[@]}"
             -device isa-debug-exit,iobase=0xf4,iosize=0x04)
        ;;
    aarch64)
        [ "$kvm" = 1 ] && echo "qemu: --kvm is for x86_64; aarch64 runs under TCG" >&2
        cmd=(qemu-system-aarch64 -M virt -cpu cortex-a72 "${common[@]}" -semihosting)
        ;;
    *) echo "tools/qemu.sh: unknown architecture '$arch'" >&2; exit 2 ;;
esac

[ "$timeout_s" != 0 ] && cmd=(timeout -k 5 "$timeout_s" "${cmd[@]}")

# The kernel writes CR LF as a terminal wants; strip the CR when the output
# goes to a file or a pipe. Unbuffered (stdbuf -o0): tr would otherwise keep
# up to 4 KiB back whenever its output is not a terminal, and a program that
# waits for a command's output and the next prompt would wait for ever.
set +e
if [ -t 1 ]; then
    "${cmd[@]}" "${extra[@]}"
    status=$?
else
    "${cmd[@]}" "${extra[@]}" | stdbuf -o0 tr -d '\r'
    status=${PIPESTATUS[0]}
fi
set -e

if [ "$arch" = x86_64 ]; then
    # isa-debug-exit: QEMU exits with (value << 1) | 1; the kernel writes
    # 0x10 + ExitCode, so 33 is success and 35 failure.
    case "$status" in
        33) status=0 ;;
        35) status=1 ;;
    esac
fi
case "$status" in
    124) echo "qemu: timed out after ${timeout_s}s" >&2 ;;
esac
exit "$status"
