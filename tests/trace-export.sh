#!/usr/bin/env bash
# Traces leaving the machine: records sessions with ./qemu-run.sh --record,
# reads the trace.dat back with trace-cmd (installing it when missing), and
# compares its events with the kernel's own `cat trace` of the same session:
# same count, order, CPU, timestamps to the microsecond, functions, parents,
# fprobe fields. Also draws a flame graph, and checks that a session with
# nothing recorded or an unwritable file fails without leaving a file.
#
#   tests/trace-export.sh ARCH
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"

arch=$1
ensure_trace_cmd
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

check() {
    local description=$1
    shift
    if "$@"; then echo "ok: $description"; else echo "FAILED: $description"; failures=$((failures + 1)); fi
}

# record NAME COMMANDS: a session recorded to $work/NAME.dat, console in $work/NAME.out.
record() {
    printf '%b' "$2" | ./qemu-run.sh "$arch" --record "$work/$1.dat" --timeout 120 >"$work/$1.out" 2>&1
}

# The kernel's `cat trace` lines, as "cpu|time|function|parent".
kernel_functions() {
    sed -nE 's/^ *[^ ]+-[0-9]+ +\[([0-9]+)\] [^ ]+ +([0-9]+\.[0-9]{6}): (.*) <-(.*)$/\1|\2|\3|\4/p' "$1" | tr ' ' '_'
}

# trace-cmd's, the same way (kallsyms names cannot hold spaces: `_` there).
report_functions() {
    trace-cmd report -O parent=1 -O indent=0 "$1" 2>/dev/null |
        sed -nE 's/^ *[^ ]+-[0-9]+ +\[([0-9]+)\] +([0-9]+\.[0-9]{6}): function: +(.*) <-- (.*)$/\1|\2|\3|\4/p' | tr ' ' '_'
}

# "duration|indent|text" lines as "microseconds|depth|text". The duration
# is compared to the microsecond: its marker and fraction are formatting,
# and trace-cmd's differ from the kernel's (and Linux's) from 10 ms on
# ("# 13212.130 us" where the kernel prints "* 13212.13 us").
graph_fields() {
    awk -F'|' '{ us = match($1, /[0-9]+/) ? substr($1, RSTART, RLENGTH) " us" : ""; printf "%s|%d|%s\n", us, length($2), $3 }'
}

# function_graph lines from the kernel's output.
kernel_graph() {
    sed -nE 's/^ [0-9]+\) (.{14})\|  ( *)(.*)$/\1|\2|\3/p' "$1" | graph_fields
}

# ... and from trace-cmd's (its duration column can be wider).
report_graph() {
    trace-cmd report "$1" 2>/dev/null |
        sed -nE 's/^.*: funcgraph_(entry|exit): +(.{0,16})\|  ( *)(.*)$/\2|\3|\4/p' | graph_fields
}

# fprobe event lines as "cpu|time|event text", offsets without their /size.
kernel_probes() {
    sed -nE 's/^ *[^ ]+-[0-9]+ +\[([0-9]+)\] [^ ]+ +([0-9]+\.[0-9]{6}): (fib(ent|ret): .*)$/\1|\2|\3/p' "$1" |
        sed -E 's#(\+0x[0-9a-f]+)/0x[0-9a-f]+#\1#g'
}

report_probes() {
    trace-cmd report "$1" 2>/dev/null |
        sed -nE 's/^ *[^ ]+-[0-9]+ +\[([0-9]+)\] +([0-9]+\.[0-9]{6}): (fib(ent|ret)): +(.*)$/\1|\2|\3: \5/p'
}

same_events() {
    local name=$1 kernel=$2 report=$3
    if [ ! -s "$kernel" ]; then echo "  no events in the kernel's cat trace"; return 1; fi
    if ! diff -q "$kernel" "$report" >/dev/null; then
        echo "  $(wc -l <"$kernel") kernel lines, $(wc -l <"$report") trace-cmd lines; first differences:"
        diff "$kernel" "$report" | head -10
        return 1
    fi
    echo "  $name: $(wc -l <"$kernel") events identical"
}

echo "-- function tracer, every kernel function, run fs ($arch)"
record function 'echo function > current_tracer\nrun fs\necho 0 > tracing_on\ncat trace\npoweroff\n'
kernel_functions "$work/function.out" >"$work/function.kernel"
report_functions "$work/function.dat" >"$work/function.report"
check "trace-cmd report lists the same function events as cat trace" same_events function "$work/function.kernel" "$work/function.report"
check "the fs functions are among them" grep -q "|kernel::workload::fs::lookup|" "$work/function.kernel"

echo "-- the issue's own session: no pause before cat trace ($arch)"
record plain 'echo function > current_tracer\nrun fs\ncat trace\npoweroff\n'
kernel_functions "$work/plain.out" >"$work/plain.kernel"
report_functions "$work/plain.dat" >"$work/plain.report"
head -n "$(wc -l <"$work/plain.kernel")" "$work/plain.report" >"$work/plain.prefix"
check "trace-cmd report starts with exactly cat trace's events" same_events function "$work/plain.kernel" "$work/plain.prefix"
echo "  (then $(($(wc -l <"$work/plain.report") - $(wc -l <"$work/plain.kernel"))) events of the poweroff command, recorded after cat trace)"

echo "-- function_graph, run fs ($arch)"
record graph 'echo kernel::workload::* > set_ftrace_filter\necho function_graph > current_tracer\nrun fs\necho 0 > tracing_on\ncat trace\npoweroff\n'
kernel_graph "$work/graph.out" >"$work/graph.kernel"
report_graph "$work/graph.dat" >"$work/graph.report"
check "trace-cmd report draws the same call graph as cat trace" same_events graph "$work/graph.kernel" "$work/graph.report"

echo "-- fprobe events ($arch)"
record probes "echo 'f:fibent kernel::workload::fib n=\$arg1' >> dynamic_events\necho 'f:fibret kernel::workload::fib%return n=\$arg1 ret=\$retval' >> dynamic_events\necho 1 > events/fprobes/fibent/enable\necho 1 > events/fprobes/fibret/enable\nrun fib 5\necho 0 > tracing_on\ncat trace\npoweroff\n"
kernel_probes "$work/probes.out" >"$work/probes.kernel"
report_probes "$work/probes.dat" >"$work/probes.report"
check "trace-cmd report prints the same fprobe events and fields" same_events fprobe "$work/probes.kernel" "$work/probes.report"
check "30 probe events" test "$(wc -l <"$work/probes.kernel")" -eq 30

echo "-- synthetic events: Linux's wakeup-latency recipe ($arch)"
record synthetic "echo 'wakeup_latency u64 lat; pid_t pid; char comm[16]' >> synthetic_events\necho 'hist:keys=pid:ts0=common_timestamp.usecs' >> events/sched/sched_wakeup/trigger\necho 'hist:keys=next_pid:lat=common_timestamp.usecs-\$ts0:onmatch(sched.sched_wakeup).wakeup_latency(\$lat,next_pid,next_comm)' >> events/sched/sched_switch/trigger\necho 1 > events/synthetic/wakeup_latency/enable\nrun par 2 fib 18\necho 0 > tracing_on\ncat trace\npoweroff\n"
sed -nE 's/^ *[^ ]+-[0-9]+ +\[([0-9]+)\] [^ ]+ +([0-9]+\.[0-9]{6}): (wakeup_latency): (.*)$/\1|\2|\3: \4/p' "$work/synthetic.out" >"$work/synthetic.kernel"
trace-cmd report "$work/synthetic.dat" 2>/dev/null |
    sed -nE 's/^ *[^ ]+-[0-9]+ +\[([0-9]+)\] +([0-9]+\.[0-9]{6}): (wakeup_latency): +(.*)$/\1|\2|\3: \4/p' >"$work/synthetic.report"
check "trace-cmd report prints the same synthetic events and fields" same_events synthetic "$work/synthetic.kernel" "$work/synthetic.report"

echo "-- the counter clock ($arch)"
record counter 'echo counter > trace_clock\necho fib > set_ftrace_filter\necho function > current_tracer\nrun fib 3\necho 0 > tracing_on\ncat trace\npoweroff\n'
counts() { grep -oE "^ *shell-1 +\[[0-9]+\] +([^ ]+ +)?[0-9]+: " "$1" | awk '{print $NF}' | tr '\n' ' '; }
# The two resets (the clock switch, the tracer switch) each read the clock,
# as Linux's do: counts 1 and 2; fib(3)'s five calls are 3 to 7.
check "trace-cmd report shows the counts cat trace shows, not seconds" test "$(counts "$work/counter.out")" = "$(trace-cmd report "$work/counter.dat" 2>/dev/null | counts /dev/stdin)" -a "$(counts "$work/counter.out")" = "3: 4: 5: 6: 7: "

echo "-- eight tasks at once under function_graph ($arch)"
record par 'echo fib > set_ftrace_filter\necho function_graph > current_tracer\nrun par 8 fib 18\npoweroff\n'
trace-cmd report "$work/par.dat" 2>/dev/null >"$work/par.report" || true
check "sched_switch events" grep -q "sched_switch:" "$work/par.report"
tasks=$(grep -oE "^ *fib/[0-9]+-[0-9]+ " "$work/par.report" | sort -u | awk '{print $1}')
check "8 fib tasks, each its own name and pid" test "$(wc -l <<<"$tasks")" -eq 8
balanced() {
    local task open close leaves
    for task in $tasks; do
        open=$(grep -cE "^ *$task .*\(\) \{$" "$work/par.report" || true)
        close=$(grep -cE "^ *$task .*funcgraph_exit:" "$work/par.report" || true)
        leaves=$(grep -cE "^ *$task .*fib\(\);$" "$work/par.report" || true)
        if [ "$open" -ne "$close" ] || [ $((open + leaves)) -ne 8361 ]; then
            echo "  $task: $open opened, $close closed, $leaves leaves"
            return 1
        fi
    done
}
check "every task's calls balanced: fib(18)'s 8361 calls each" balanced
check "events from at least 2 CPUs" test "$(grep -oE "^ *[^ ]+-[0-9]+ +\[[0-9]+\]" "$work/par.report" | awk '{print $2}' | sort -u | wc -l)" -ge 2

echo "-- flame graph ($arch)"
printf 'echo kernel::workload::* > set_ftrace_filter\necho function_graph > current_tracer\nrun fs\npoweroff\n' |
    ./qemu-run.sh "$arch" --flamegraph "$work/fs.svg" --timeout 120 >"$work/flame.out" 2>&1 || true
check "an SVG flame graph of run fs" grep -q "<svg" "$work/fs.svg"
for function in fs::run fs::mkdir fs::create fs::write fs::read fs::lookup fs::unlink fs::walk; do
    check "it shows kernel::workload::$function" grep -q "kernel::workload::$function" "$work/fs.svg"
done

echo "-- refusals ($arch)"
printf 'run fib 3\npoweroff\n' | ./qemu-run.sh "$arch" --record "$work/empty.dat" --timeout 120 >"$work/empty.out" 2>&1 && status=0 || status=$?
check "nothing recorded: an error" test "$status" -ne 0
check "nothing recorded: a clear message" grep -q "recorded nothing" "$work/empty.out"
check "nothing recorded: no file" test ! -e "$work/empty.dat"
printf 'echo function > current_tracer\nrun fib 3\npoweroff\n' |
    ./qemu-run.sh "$arch" --record "$work/missing/dir/t.dat" --timeout 120 >"$work/unwritable.out" 2>&1 && status=0 || status=$?
check "unwritable file: an error" test "$status" -ne 0
check "unwritable file: a clear message" grep -q "cannot write" "$work/unwritable.out"

[ "$failures" -eq 0 ]
