#!/usr/bin/env bash
# A program driving the console as a script does: it writes one command into
# a fifo, waits until that command's whole output and the next prompt have
# arrived, and only then writes the next. Output held back anywhere between
# the kernel and standard output (a buffering filter) shows as a timeout.
#
#   tests/interactive.sh ARCH
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"

arch=$1
work=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null || true; kill "$qemu" 2>/dev/null || true; rm -rf "$work"' EXIT
mkfifo "$work/in"
out="$work/out"

echo "-- interactive session through a fifo ($arch)"
./qemu-run.sh "$arch" --timeout 180 <"$work/in" >"$out" 2>&1 &
qemu=$!
exec 3>"$work/in"

# wait_for DESCRIPTION SECONDS COMMAND...: polls until COMMAND succeeds.
wait_for() {
    local description=$1 seconds=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "FAILED: $description: not there after ${seconds}s; the output ends with:"
            tail -c 400 "$out" | cat -A | tail -8
            exit 1
        fi
        sleep 0.2
    done
    echo "ok: $description"
}

# The prompt is the last thing printed, with nothing after it.
prompts() { grep -c '^> ' "$out" || true; }
at_prompt() { [ "$(tail -c 2 "$out")" = "> " ] && [ "$(prompts)" -ge "$1" ]; }

wait_for "boot and first prompt" 120 at_prompt 1
functions=$(sed -n 's/^ftrace: \([0-9]*\) patchable functions.*/\1/p' "$out")
[ -n "$functions" ] || { echo "FAILED: no ftrace banner"; exit 1; }

echo 'cat available_filter_functions_addrs' >&3
listing() { [ "$(grep -cE '^[0-9a-f]{16} ' "$out" || true)" -eq "$functions" ]; }
wait_for "all $functions lines of available_filter_functions_addrs" 60 listing
wait_for "the prompt after the listing" 10 at_prompt 2

echo 'run fib 10' >&3
wait_for "the workload's answer" 30 grep -q '^fib(10) = 55$' "$out"
wait_for "the prompt after it" 10 at_prompt 3

# trace_pipe streams until a key: tick events keep coming from every CPU
# while it runs; Enter stops it and gives the prompt back.
echo 'echo on_tick > set_ftrace_filter' >&3
wait_for "the filter set" 10 at_prompt 4
echo 'echo function > current_tracer' >&3
wait_for "the function tracer on" 30 at_prompt 5
echo 'cat trace_pipe' >&3
ticks() { [ "$(grep -c ': kernel::tick::on_tick <-' "$out" || true)" -ge "$1" ]; }
wait_for "tick events streaming" 30 ticks 50
wait_for "more of them, still streaming" 30 ticks 500
printf '\n' >&3
wait_for "Enter stops the pipe: the prompt is back" 10 at_prompt 6
echo 'echo nop > current_tracer' >&3
wait_for "the tracer off" 30 at_prompt 7

echo 'poweroff' >&3
exec 3>&-
if wait "$qemu"; then
    echo "ok: powered off"
else
    echo "FAILED: the session did not power off cleanly"
    exit 1
fi
