#!/usr/bin/env bash
# Malformed input, at volume: "bad input gets a clear error and changes
# nothing; the kernel never panics on input", checked on inputs nobody wrote
# by hand.
#
#   tests/fuzz-input.sh ARCH [SEED...]   (default seeds: 1 2 3)
#
# For each seed, one boot is fed a few hundred `echo ... > FILE` lines: a
# valid line for a tracefs file (a probe definition, a filter, a trigger, a
# hist spec, a glob, a number), usually mutated (characters inserted, cut,
# replaced or repeated, from an alphabet of separators, UTF-8, huge numbers
# and fetch-argument pieces), with now and then a command that uses what
# was set (run a workload, read trace, hist, stack_trace, remove the
# instance). The session must answer every line (the console echoes each
# one), never print a panic, still run a workload at the end, and power off;
# and every write refused with an error must leave the file it wrote to
# reading exactly as before (each write is read back on both sides).
# A failing seed's input is kept, to replay with
# `./qemu-run.sh ARCH < FILE`. A generator of the script's own (not bash's
# RANDOM, which changed in bash 5.1) and a fixed locale (string offsets
# count characters) make each seed the same input everywhere.
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"
export LC_ALL=C.UTF-8

arch=$1
shift
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
LINES_PER_SEED=300

F=kernel::workload::fib
# FILE|VALID LINE, one template per line.
TEMPLATES=$(
    cat <<EOF
dynamic_events|f:fx $F a=\$arg1
dynamic_events|f:fy $F%return r=\$retval a=\$arg1:x32
dynamic_events|f:grp/fz $F s=+0(\$arg1):string
dynamic_events|-:fx
dynamic_events|-:fprobes/fy
dynamic_events|f:fx $F a=\$arg1:u8 b=\$arg2:s64 c=\$comm
dynamic_events|r:kr $F r=\$retval
dynamic_events|f:fa $F bf=\$arg1:b4@2/64
dynamic_events|f:fx kernel::workload::* a=\$arg1
kprobe_events|p:kx $F a=\$arg1 b=+8(\$stack):u64
kprobe_events|r:ky $F \$retval
kprobe_events|-:kx
kprobe_events|p:kz $F+0x10
kprobe_events|r10:kx $F
events/sched/sched_switch/filter|next_pid > 0
events/sched/sched_switch/filter|prev_comm == "shell" && next_pid != 1
events/sched/sched_switch/filter|(next_pid & 1) || prev_prio < 100
events/sched/sched_switch/filter|prev_comm ~ "sh*"
events/sched/sched_switch/filter|CPU & CPUS{0-1,3} && prev_pid != 0
events/sched/sched_switch/trigger|traceoff:3
events/sched/sched_switch/trigger|stacktrace if next_pid > 1
events/sched/sched_switch/trigger|hist:keys=next_pid:vals=hitcount:sort=hitcount.descending:size=256
events/sched/sched_switch/trigger|hist:keys=prev_comm,next_pid:sort=next_pid
events/sched/sched_switch/trigger|!traceoff:3
events/sched/sched_switch/trigger|enable_event:kprobes:kx
events/sched/sched_switch/trigger|disable_event:sched:sched_wakeup:2
events/sched/sched_switch/trigger|hist:keys=common_pid.execname:pause
events/kprobes/kx/trigger|hist:keys=a:vals=b
synthetic_events|lat u64 lat; pid_t pid; char comm[16]
synthetic_events|!lat
dynamic_events|s:synthetic/sx u32 a; s8 b
events/sched/sched_wakeup/trigger|hist:keys=pid:ts0=common_timestamp.usecs
events/sched/sched_switch/trigger|hist:keys=next_pid:l=common_timestamp.usecs-\$ts0:onmatch(sched.sched_wakeup).lat(\$l,next_pid,next_comm)
events/sched/sched_switch/trigger|hist:keys=next_pid:l=\$ts0+1-common_cpu:onmatch(sched.sched_wakeup).trace(sx,\$l,next_pid)
events/synthetic/sx/trigger|hist:keys=a,b:sort=b
events/sched/sched_switch/trigger|hist:keys=next_pid:m=common_timestamp-\$ts0:onmax(\$m).snapshot()
events/sched/sched_switch/trigger|hist:keys=common_stacktrace,prev_pid
events/sched/sched_switch/trigger|hist:keys=next_pid:m=next_pid*2/3:onchange(\$m).trace(sx,\$m,next_pid)
events/sched/sched_switch/trigger|enable_event:synthetic:sx:2
events/sched/sched_switch/trigger|hist:keys=next_pid:vals=next_prio*2-1,\$ts0
events/sched/sched_switch/trigger|hist:keys=next_prio/2,prev_pid*2.log2:vals=prev_prio-1
synthetic_events|!sx
snapshot|1
trace_options|fields
trace_options|hex
events/synthetic/lat/enable|1
events/synthetic/sx/filter|a > 3
events/kprobes/kx/trigger|stacktrace:2 if a > 1
events/kprobes/kx/trigger|hist:keys=a.log2
events/kprobes/kx/trigger|hist:keys=a.buckets=16:vals=b
events/kprobes/kx/filter|b == 0x10 || a < 1
events/fprobes/fx/filter|c ~ "sh*"
events/fprobes/fx/trigger|hist:keys=a:sort=a
events/fprobes/fx/trigger|traceoff if a == 2
set_ftrace_filter|*fib*
set_ftrace_filter|$F:traceon:2
set_ftrace_filter|!$F
set_ftrace_filter|$F:enable_event:sched:sched_switch:1
set_ftrace_filter|*:mod:kernel
set_ftrace_notrace|kernel::*
set_graph_function|$F
set_event|sched:sched_switch
set_event|!sched:*
set_event|fprobes:*
set_event_pid|0 1 2
set_ftrace_pid|1
trace_options|noprint-parent
trace_options|funcgraph-retval
trace_options|latency-format
options/verbose|1
options/printk-msg-only|1
trace_options|notrace_printk
instances/a/options/trace_printk|1
instances/a/options/record-tgid|1
buffer_size_kb|64
instances/a/buffer_size_kb|16
tracing_cpumask|3
max_graph_depth|3
current_tracer|function_graph
instances/a/current_tracer|function
instances/a/set_ftrace_filter|*fib*
instances/a/set_ftrace_filter|kernel::workload::run:enable_event:sched:sched_switch:2
instances/a/set_event|sched:sched_switch fprobes:fx
instances/a/events/fprobes/fx/filter|a < 3 && c ~ "sh*"
instances/a/events/sched/filter|prev_pid != 0
instances/a/events/kprobes/kx/enable|1
trace_clock|global
saved_cmdlines_size|128
tracing_thresh|100
stack_trace_filter|$F
trace_marker|hello
EOF
)
mapfile -t templates <<<"$TEMPLATES"
NASTY=('' ' ' 'é' '日' '\' ':' '::' '(' ')' '$' '%' '+' '-' '@' '[' ']' '/' '*' '!' '=' '==' '~' '&' '|' ','
    '.' '0' '9' '99999999999999999999' '-1' '0x' '4294967296' '18446744073709551616' '$arg0' '$arg9'
    '$stack999' 'string' 'u128' 'b99@99/8' '[99999]' 'if' '&&' '"')
USES=('run fib 4' 'cat trace | tail -2' 'echo 1 > events/enable' 'echo 1 > events/kprobes/kx/enable'
    'cat events/sched/sched_switch/hist | tail -3' 'cat events/kprobes/kx/hist | tail -3' 'cat snapshot | tail -1'
    'rmdir instances/a' 'mkdir instances/a' 'cat stack_trace | tail -1' 'cat kprobe_profile' 'echo 0 > tracing_on'
    'echo 1 > tracing_on' 'cat dynamic_events' 'cat set_ftrace_filter' 'cat events/sched/sched_switch/trigger'
    'echo nop > current_tracer' 'run fs' 'echo 0 > events/enable' 'cat error_log | tail -3' 'run par 2 fib 6'
    'cat instances/a/trace | tail -2' 'echo 1 > instances/a/events/enable' 'cat instances/a/error_log | tail -3'
    'echo > instances/a/error_log' 'cat saved_tgids | tail -2' 'cat trace_pipe | head -2')

# pick N: a number below N, into $REPLY (a linear congruential generator,
# its state in $STATE).
pick() {
    STATE=$(((STATE * 1103515245 + 12345) % 2147483648))
    REPLY=$(((STATE / 65536) % $1))
}

# mutate TEXT: one to three edits, into $MUTATED.
mutate() {
    local s=$1 edits at end nasty
    pick 3
    edits=$((REPLY + 1))
    while [ "$edits" -gt 0 ]; do
        edits=$((edits - 1))
        pick $((${#s} + 1))
        at=$REPLY
        pick ${#NASTY[@]}
        nasty=${NASTY[$REPLY]}
        pick 10
        case $REPLY in
            0 | 1 | 2) s=${s:0:at}$nasty${s:at} ;;
            3 | 4 | 5) pick 6; end=$((at + REPLY + 1)); s=${s:0:at}${s:end} ;;
            6 | 7) s=${s:0:at}$nasty${s:at+1} ;;
            *) pick 8; end=$((REPLY + 1)); s=${s:0:at}${s:at:end}${s:at:end}${s:at:end}${s:at+end} ;;
        esac
    done
    MUTATED=$s
}

# session SEED: the input lines of one boot.
session() {
    local i file line op
    STATE=$1
    printf '%s\n' "mkdir instances/a" \
        "echo 'f:fx $F a=\$arg1 b=\$arg2 c=\$comm' >> dynamic_events" \
        "echo 'p:kx $F a=\$arg1 b=+0(\$stack):u64' >> kprobe_events"
    for ((i = 0; i < LINES_PER_SEED; i++)); do
        pick ${#templates[@]}
        file=${templates[$REPLY]%%|*}
        line=${templates[$REPLY]#*|}
        pick 10
        if [ "$REPLY" -lt 7 ]; then
            mutate "$line"
            line=$MUTATED
        fi
        line=${line//\'/}
        pick 10
        op='>>'
        [ "$REPLY" -lt 6 ] || op='>'
        # Read back around the write: a refused one must leave the file
        # reading as before (`unchanged_by_refusals`).
        printf '%s\n' "cat $file" "echo '$line' $op $file" "cat $file"
        pick 100
        if [ "$REPLY" -lt 12 ]; then
            pick ${#USES[@]}
            printf '%s\n' "${USES[$REPLY]}"
        fi
    done
    printf '%s\n' "echo nop > current_tracer" "echo 0 > events/enable" "run fib 5" "poweroff"
}

# unchanged_by_refusals: reads the session's output on stdin (each command
# echoed as `> COMMAND`, its answer after it) and checks that every write
# refused with an error left its file reading exactly as the `cat` just
# before it showed. A trigger's remaining count may run down meanwhile
# (the sched_switch triggers fire as the shell sleeps between lines): counts
# are compared as `count=N`. Prints what changed; fails if anything did.
unchanged_by_refusals() {
    awk '
        function normal(text) { gsub(/:count=[0-9]+/, ":count=N", text); return text }
        /^> / { n++; command[n] = substr($0, 3); answer[n] = ""; next }
        n > 0 { answer[n] = answer[n] $0 "\n" }
        END {
            for (i = 2; i < n; i++) {
                if (command[i] !~ /^echo / || command[i - 1] !~ /^cat / || command[i + 1] != command[i - 1]) continue
                if (answer[i] !~ /(^|\n)error: /) continue
                refused++
                if (normal(answer[i - 1]) != normal(answer[i + 1])) {
                    changed++
                    printf "CHANGED by a refused write: %s\n%s  before:\n%s  after:\n%s", command[i], answer[i], answer[i - 1], answer[i + 1]
                }
            }
            printf "%d refused writes left their file as it was, %d did not\n", refused - changed, changed
            exit changed > 0
        }'
}

failures=0
input=$(mktemp)
trap 'rm -f "$input"' EXIT
for seed in "${seeds[@]}"; do
    session "$seed" >"$input"
    sent=$(wc -l <"$input")
    status=0
    out=$(./qemu-run.sh "$arch" --timeout 300 <"$input" 2>&1) || status=$?
    answered=$(grep -c '^> ' <<<"$out" || true)
    if [ "$status" -ne 0 ] || grep -q '^panic:' <<<"$out" || [ "$answered" -ne "$sent" ] \
        || ! grep -q '^fib(5) = 5$' <<<"$out"; then
        kept="${TMPDIR:-/tmp}/fuzz-input-$arch-$seed.txt"
        cp "$input" "$kept"
        echo "FAILED: fuzz seed $seed ($arch): status $status, $answered of $sent lines answered; input kept in $kept"
        grep -m1 -B20 -A10 '^panic:' <<<"$out" || tail -30 <<<"$out"
        failures=$((failures + 1))
    elif ! state=$(unchanged_by_refusals <<<"$out"); then
        kept="${TMPDIR:-/tmp}/fuzz-input-$arch-$seed.txt"
        cp "$input" "$kept"
        echo "FAILED: fuzz seed $seed ($arch): a refused write changed its file; input kept in $kept"
        echo "$state"
        failures=$((failures + 1))
    else
        errors=$(grep -c '^error: ' <<<"$out" || true)
        echo "ok: fuzz seed $seed ($arch): $sent lines answered ($errors refused with an error), no panic, the kernel still works; ${state}"
    fi
done
[ "$failures" -eq 0 ]
