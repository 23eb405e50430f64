#!/usr/bin/env bash
# End-to-end scenarios: console commands piped into ./qemu-run.sh, as a user
# would type them, with checks on what the kernel prints.
#
#   tests/scenarios.sh ARCH [SCENARIO]   (SCENARIO: run only that one)
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"

arch=$1
only=${2:-}
failures=0

# run_session NAME COMMANDS [TIMEOUT]: boots, feeds COMMANDS, keeps the
# output in $out; the session may take TIMEOUT seconds (120 by default).
run_session() {
    local name=$1 commands=$2 timeout=${3:-120}
    if [ -n "$only" ] && [ "$only" != "$name" ]; then
        return 1
    fi
    echo "-- scenario $name ($arch)"
    if ! out=$(printf '%b' "$commands" | ./qemu-run.sh "$arch" --timeout "$timeout" 2>&1); then
        echo "FAILED: $name: the session did not power off cleanly"
        echo "$out" | tail -20
        failures=$((failures + 1))
        return 1
    fi
}

# expect DESCRIPTION COMMAND...: a check on $out.
expect() {
    local description=$1
    shift
    if "$@"; then
        echo "ok: $description"
    else
        echo "FAILED: $description"
        echo "$out" | tail -40
        failures=$((failures + 1))
    fi
}

count_lines() { grep -cE "$1" <<<"$out" || true; }

if run_session boot 'help\nuptime\nbogus\nps\ncpus\npoweroff\n'; then
    expect "boot banner" grep -q "^ktrace kernel .* on $arch" <<<"$out"
    expect "four CPUs online" grep -q "^smp: 4 CPUs online$" <<<"$out"
    expect "ps lists the shell" grep -qE "^ +1 +[0-3] running +shell$" <<<"$out"
    expect "ps lists four idle tasks" test "$(count_lines '^ +0 +[0-3] [a-z]+ +swapper/[0-3]$')" -eq 4
    expect "cpus lists four CPUs" test "$(count_lines '^ +[0-3]  [^ ]+ \(pid [0-9]+\)$')" -eq 4
    expect "command list" grep -q "^  poweroff" <<<"$out"
    expect "uptime" grep -qE "^up [0-9]+ ticks" <<<"$out"
    expect "unknown command error" grep -q "^error: unknown command 'bogus'" <<<"$out"
fi

# Pipes, typed as on Linux: each filter's output checked against the
# unfiltered listing the same session printed.
if run_session pipes 'cat available_filter_functions | grep fib\ngrep -c fib available_filter_functions\ngrep ^kernel::workload::fib$ available_filter_functions > set_ftrace_filter\necho function > current_tracer\nrun fib 4\ncat trace | grep -v "^#" | wc -l\ncat trace | tail -1\ncat trace_pipe | head -n 2\ncat trace | sort\nbench | head\npoweroff\n'; then
    expect "grep finds both fib functions" test "$(count_lines '^kernel::workload::(napping_)?fib$')" -eq 2
    expect "grep -c counts them" grep -qx "2" <<<"$out"
    expect "grep > set_ftrace_filter traced fib: 9 calls" grep -qx "9" <<<"$out"
    expect "tail's 1 line and head's 2 (head closes trace_pipe)" test "$(count_lines ': kernel::workload::fib <-kernel::workload::(fib|run)$')" -eq 3
    expect "sort is refused" grep -q "^error: 'sort' cannot read a pipe" <<<"$out"
    expect "bench is refused" grep -q "^error: 'bench' prints to the console as it goes" <<<"$out"
fi

if run_session function-fib 'echo *fib* > set_ftrace_filter\necho function > current_tracer\nrun fib 5\ncat trace\ncat enabled_functions\necho nop > current_tracer\ncat enabled_functions\necho nosuch > current_tracer\necho nosuch_fn_* > set_ftrace_filter\necho kernel::workload::fi[a-a] > set_ftrace_filter\necho kernel::workload::fi[c-z] > set_ftrace_filter\necho kernel::workload::fi[a-b] > set_ftrace_filter\ncat set_ftrace_filter\necho kernel::workload::fi[!a-b] > set_ftrace_filter\necho f?b > set_ftrace_filter\ncat set_ftrace_filter\npoweroff\n'; then
    expect "15 fib trace lines" test "$(count_lines '\] \.\.\.\.\. +[0-9]+\.[0-9]{6}: kernel::workload::fib <-kernel::workload::(fib|run)$')" -eq 15
    expect "outermost call from run" grep -q ": kernel::workload::fib <-kernel::workload::run$" <<<"$out"
    expect "enabled_functions lists fib while enabled" grep -qx "kernel::workload::fib (1)" <<<"$out"
    expect "nothing enabled after nop" test "$(count_lines '^kernel::workload::fib \(1\)$')" -eq 1
    expect "unknown tracer refused" grep -q "^error: no such tracer 'nosuch'" <<<"$out"
    expect "glob matching nothing refused" grep -q "^error: 'nosuch_fn_\*' matches no traceable function" <<<"$out"
    expect "a range holds nothing past its end: fi[a-a] and fi[c-z] select nothing" \
        test "$(count_lines "^error: 'kernel::workload::fi\[(a-a|c-z)\]' matches no traceable function$")" -eq 2
    expect "fi[a-b] selects fib alone" \
        test "$(sed -n '/^> echo kernel::workload::fi\[a-b\]/,/^> echo kernel::workload::fi\[!/p' <<<"$out" | grep -v '^> ')" = "kernel::workload::fib"
    expect "a negated range refuses both its ends" grep -q "^error: 'kernel::workload::fi\[!a-b\]' matches no traceable function$" <<<"$out"
    expect "? is one character: f?b selects fib alone" \
        test "$(sed -n '/^> echo f?b/,/^> poweroff/p' <<<"$out" | grep -v '^> ')" = "kernel::workload::fib"
fi

if run_session function-graph-fib 'echo *fib* > set_ftrace_filter\necho function_graph > current_tracer\necho 1 > options/funcgraph-retval\nrun fib 4\ncat trace\necho nop > current_tracer\npoweroff\n'; then
    expect "graph header" grep -q "^# tracer: function_graph$" <<<"$out"
    expect "4 calls with children open a brace" test "$(count_lines '^ 0\)               \|  ( *)kernel::workload::fib\(\) \{$')" -eq 4
    expect "5 leaf calls with duration and return value" test "$(count_lines '^ 0\) .[ 0-9]+\.[0-9]+ us +\|  +kernel::workload::fib\(\); /\* ret=0x[01] \*/$')" -eq 5
    expect "4 closing braces with return values" test "$(count_lines '\|  +\} /\* kernel::workload::fib ret=0x[0-9a-f]+ \*/$')" -eq 4
    expect "the outermost call returns fib(4) = 3" grep -qE '^ 0\) .[ 0-9.]+ us +\|  \} /\* kernel::workload::fib ret=0x3 \*/$' <<<"$out"
fi

fib_events='echo '"'"'f:fibent kernel::workload::fib n=$arg1'"'"' >> dynamic_events\necho '"'"'f:fibret kernel::workload::fib%return n=$arg1 ret=$retval'"'"' >> dynamic_events\n'
bad_events='echo '"'"'f:bad1 no::such::symbol'"'"' >> dynamic_events\necho '"'"'f:bad2 kernel::workload::fib $retval'"'"' >> dynamic_events\necho '"'"'f:bad3 kernel::workload::fib $arg1:u7'"'"' >> dynamic_events\necho '"'"'f:fibent kernel::workload::fib'"'"' >> dynamic_events\n'
if run_session fprobe-events "${fib_events}${bad_events}echo 1 > events/fprobes/fibent/enable\necho 1 > events/fprobes/fibret/enable\nrun fib 5\ncat trace\ncat dynamic_events\npoweroff\n"; then
    expect "15 fibent lines, interrupts on" test "$(count_lines '\] \.\.\.\.\. +[0-9]+\.[0-9]{6}: fibent: \(kernel::workload::fib\+0x0/0x[0-9a-f]+\) n=0x[0-9a-f]+$')" -eq 15
    expect "15 fibret lines" test "$(count_lines ': fibret: \([^ ]+ <- kernel::workload::fib\) n=0x[0-9a-f]+ ret=0x[0-9a-f]+$')" -eq 15
    expect "outermost entry n=0x5" grep -q ": fibent: (kernel::workload::fib+0x0/0x[0-9a-f]*) n=0x5$" <<<"$out"
    expect "outermost exit n=0x5 ret=0x5" grep -qE ": fibret: \(kernel::workload::run\+0x[0-9a-f]+/0x[0-9a-f]+ <- kernel::workload::fib\) n=0x5 ret=0x5$" <<<"$out"
    expect "unknown symbol refused" grep -q "^error: unknown symbol 'no::such::symbol'" <<<"$out"
    expect "\$retval at entry refused" grep -q "^error: .*\$retval is only available in %return events" <<<"$out"
    expect "bad type refused" grep -q "^error: unknown type 'u7'" <<<"$out"
    expect "duplicate refused" grep -q "^error: event 'fprobes/fibent' already exists" <<<"$out"
    expect "only the two good events exist" test "$(count_lines '^f:fprobes/')" -eq 2
fi

# An instance: its own tracer, filter and buffer; ls, mkdir and rmdir as on
# Linux, and the refusals.
if run_session instances 'mkdir instances/foo\nls instances\nls instances/foo\nls instances/foo/options\necho *fib* > instances/foo/set_ftrace_filter\necho function > instances/foo/current_tracer\nrun fib 3\ncat instances/foo/trace\ncat trace\nmkdir instances/foo\nmkdir instances/a/b\nrmdir instances/foo\nrmdir instances/foo\nls instances\ncat enabled_functions\npoweroff\n'; then
    expect "ls instances lists it" grep -qx "foo/" <<<"$out"
    expect "its files" test "$(sed -n '/^> ls instances\/foo$/,/^> /p' <<<"$out" | grep -c '^\(current_tracer\|trace\|set_ftrace_filter\)$')" -eq 3
    expect "ls of it lists its options directory, not what is in it" test "$(sed -n '/^> ls instances\/foo$/,/^> /p' <<<"$out" | grep -c '^options/$')" -eq 1
    expect "ls of a directory in it: its 34 options" test "$(sed -n '/^> ls instances\/foo\/options$/,/^> /p' <<<"$out" | grep -c '^[a-z_-]*$')" -eq 34
    # Each file's own output: what `cat FILE` printed, up to the next prompt.
    output_of() { awk -v cmd="> cat $1" '$0 == cmd {on = 1; next} on && /^> / {exit} on' <<<"$out"; }
    expect "5 fib lines in its trace" test "$(output_of instances/foo/trace | grep -cE ': kernel::workload::fib <-kernel::workload::(fib|run)$')" -eq 5
    expect "none in the top level's, whose header says 0/0" test "$(output_of trace | grep -cE ': kernel::workload::fib <-')" -eq 0 -a "$(output_of trace | grep -c '^# entries-in-buffer/entries-written: 0/0 ')" -eq 1
    expect "mkdir of an existing instance refused" grep -q "^error: instance 'foo' exists" <<<"$out"
    expect "a bad name refused" grep -q "^error: bad instance name 'a/b'" <<<"$out"
    expect "rmdir of a missing instance refused" grep -q "^error: no instance 'foo'" <<<"$out"
    expect "rmdir stopped its tracer" test "$(sed -n '/^> cat enabled_functions$/,/^> poweroff$/p' <<<"$out" | wc -l)" -eq 2
fi

# Events in an instance, typed from inside it as a Linux user would.
if run_session instance-events 'mkdir instances/foo\necho '"'"'f:myprobe fib n=$arg1'"'"' >> dynamic_events\ncd instances/foo\nls events/fprobes/myprobe\necho myprobe >> set_event\necho '"'"'n < 3'"'"' > events/fprobes/myprobe/filter\ncat set_event\ncat events/enable\nrun fib 5\ncat trace | grep -c myprobe\ncat events/fprobes/myprobe/trigger\necho '"'"'n <'"'"' > events/fprobes/myprobe/filter\ncat error_log\ncd /sys/kernel/tracing\ncat set_event\ncat /sys/kernel/tracing/error_log | wc -l\ncat trace | grep -c myprobe\necho -:myprobe >> dynamic_events\nrmdir instances/foo\necho -:myprobe >> dynamic_events\ncat dynamic_events\npoweroff\n'; then
    after() { awk -v cmd="> $1" '$0 == cmd {on = 1; next} on && /^> / {exit} on' <<<"$out"; }
    expect "an instance's event has the top level's files" test "$(after 'ls events/fprobes/myprobe' | tr '\n' ' ')" = "enable filter format hist id trigger "
    expect "its set_event lists it" test "$(after 'cat set_event' | head -1)" = "fprobes:myprobe"
    expect "some of its events are on" test "$(after 'cat events/enable')" = "X"
    expect "fib(5)'s 11 calls with n < 3 in its trace" test "$(sed -n '/^> cat trace | grep -c myprobe$/{n;p}' <<<"$out" | tr '\n' ' ')" = "11 0 "
    expect "its triggers are its own" test "$(after 'cat events/fprobes/myprobe/trigger' | head -1)" = "# Available triggers:"
    expect "its error_log has its refused filter" grep -qE "^\[ *[0-9]+\.[0-9]{6}\] event filter parse error: error: " <<<"$(after 'cat error_log')"
    expect "the top level's error_log has none of it" test "$(after 'cat /sys/kernel/tracing/error_log | wc -l')" = "0"
    expect "an event enabled in an instance cannot be removed" grep -q "^error: event 'fprobes/myprobe' is enabled; disable it first" <<<"$out"
    expect "rmdir lets it go" test -z "$(after 'cat dynamic_events')"
fi

# Files a Linux tracing user types: per-CPU stats and trace, the buffer
# size, bare function names in filters and probe definitions.
if run_session tracefs-files 'echo fib > set_ftrace_filter\ncat set_ftrace_filter\necho function > current_tracer\nrun fib 5\ncat per_cpu/cpu0/stats\ncat buffer_size_kb\necho 8 > buffer_size_kb\ncat buffer_size_kb\ncat buffer_total_size_kb\necho bogus > buffer_size_kb\necho nop > current_tracer\necho 4080 > buffer_size_kb\necho '"'"'f:fibent fib n=$arg1'"'"' >> dynamic_events\necho '"'"'f:runent run'"'"' >> dynamic_events\ncat dynamic_events\necho 1 > function_profile_enabled\nrun fib 10\necho 0 > function_profile_enabled\ncat trace_stat/function0 trace_stat/function1 trace_stat/function2 trace_stat/function3\necho fib > stack_trace_filter\necho 1 > stack_tracer_enabled\nrun fib 12\necho 0 > stack_tracer_enabled\ncat stack_max_size\ncat stack_trace\necho function > current_tracer\necho mark it > trace_marker\necho 1 > options/sym-offset\necho noprint-parent > trace_options\nrun fib 1\ncat trace\ncat trace_options\necho nosuch > trace_options\necho 1 > snapshot\ncat snapshot\necho 0 > snapshot\ncat snapshot\necho nop > current_tracer\necho 100000000 > tracing_thresh\ncat tracing_thresh\necho 0 > tracing_thresh\necho fib > set_ftrace_filter\necho function > current_tracer\necho fib:traceoff:1 >> set_ftrace_filter\ncat set_ftrace_filter\nrun fib 4\ncat tracing_on\necho fib:nosuch >> set_ftrace_filter\necho !fib:traceoff:1 >> set_ftrace_filter\necho 1 > tracing_on\necho nop > current_tracer\ncat available_events\necho sched:sched_switch > set_event\ncat set_event\ncat events/sched/enable\necho nosuch:event >> set_event\necho > set_event\necho fib > set_ftrace_filter\necho function > current_tracer\necho 1 > set_ftrace_pid\ncat set_ftrace_pid\nrun par 2 fib 3\necho notapid > set_ftrace_pid\necho > set_ftrace_pid\necho nop > current_tracer\ncat set_ftrace_pid\npoweroff\n'; then
    expect "a bare name selects kernel::workload::fib" grep -qx "kernel::workload::fib" <<<"$out"
    expect "per-CPU stats in Linux's shape" test "$(sed -n '/^> cat per_cpu\/cpu0\/stats$/,/^> /p' <<<"$out" | grep -cE '^(entries|overrun|commit overrun|bytes|dropped events|read events): [0-9]+$|^(oldest event|now) ts: +[0-9]+\.[0-9]{6}$')" -eq 8
    expect "cpu0 (the shell's) holds fib(5)'s 15 events" test "$(sed -n '/^> cat per_cpu\/cpu0\/stats$/,/^> /p' <<<"$out" | sed -n 's/^entries: //p')" = "15"
    expect "buffer_size_kb 4080, then 11 (whole pages of 4080 bytes, as Linux counts)" test "$(sed -n '/^> cat buffer_size_kb$/{n;p}' <<<"$out" | tr '\n' ' ')" = "4080 11 "
    expect "buffer_total_size_kb is 11 a CPU" test "$(sed -n '/^> cat buffer_total_size_kb$/{n;p}' <<<"$out")" = "44"
    expect "a bad size refused" grep -q "^error: expected a size in KiB" <<<"$out"
    expect "a probe on a bare name" grep -qx "f:fprobes/fibent fib n=\$arg1" <<<"$out"
    expect "an ambiguous bare name refused, listing the functions" grep -qE "^error: 'run' matches [0-9]+ functions, give the whole path:.* kernel::workload::run" <<<"$out"
    expect "the profiler's header" grep -q "^  Function                               Hit    Time            Avg             s^2$" <<<"$out"
    expect "the stack trace starts at the deepest fib call" grep -qE "^  0\) +[0-9]+ +[0-9]+   kernel::workload::fib\+0x0/0x[0-9a-f]+$" <<<"$out"
    expect "twelve fib frames on it" test "$(count_lines '^ +[0-9]+\) +[0-9]+ +[0-9]+   kernel::workload::fib\+')" -eq 12
    expect "a trace_marker line" grep -qE "\] \.\.\.\.\. +[0-9]+\.[0-9]{6}: tracing_mark_write: mark it$" <<<"$out"
    expect "sym-offset and noprint-parent" grep -qE ": kernel::workload::fib\+0x0/0x[0-9a-f]+$" <<<"$out"
    expect "trace_options lists them" grep -qx "noprint-parent" <<<"$out"
    expect "an unknown option refused" grep -q "^error: no such option 'nosuch'" <<<"$out"
    expect "the snapshot holds the trace" test "$(sed -n '/^> cat snapshot$/,/^> /p' <<<"$out" | grep -c 'tracing_mark_write: mark it$')" -eq 1
    expect "a freed snapshot says so" grep -q "^# \* Snapshot is freed \*$" <<<"$out"
    expect "tracing_thresh reads back" grep -qx "100000000" <<<"$out"
    expect "a function command listed" grep -qx "kernel::workload::fib:traceoff:count=1" <<<"$out"
    expect "fib:traceoff switched tracing off" test "$(sed -n '/^> cat tracing_on$/{n;p}' <<<"$out" | tail -1)" = "0"
    expect "an unknown command refused" grep -q "^error: unknown command 'nosuch'" <<<"$out"
    expect "available_events lists the scheduler's" grep -qx "sched:sched_wakeup" <<<"$out"
    expect "set_event enables one" test "$(sed -n '/^> cat set_event$/{n;p}' <<<"$out")" = "sched:sched_switch"
    expect "its group is partly on" test "$(sed -n '/^> cat events\/sched\/enable$/{n;p}' <<<"$out")" = "X"
    expect "an unknown event refused" grep -q "^error: 'nosuch:event' matches no event" <<<"$out"
    expect "set_ftrace_pid lists the pid, then no pid" test "$(sed -n '/^> cat set_ftrace_pid$/{n;p}' <<<"$out" | tr '\n' ' ')" = "1 no pid "
    expect "a word that is no pid refused" grep -q "^error: 'notapid' is not a pid" <<<"$out"
    expect "the profiler counts fib(10)'s 177 calls" grep -qE "^  kernel::workload::fib +177 +[0-9]+\.[0-9]+ us +[0-9]+\.[0-9]+ us +[0-9]+(\.[0-9]+)? us +$" <<<"$out"
fi

# The bench's clients attached to fib one by one (what bench/profile-call.py
# profiles): each enables fib's site with its ops, leaves fib's result
# alone, and comes off again; bad requests change nothing.
bench_modes=(args two_ops args_busy regs graph rethook rethook_regs fprobe_entry fprobe_exit)
bench_session=""
for mode in "${bench_modes[@]}"; do
    bench_session+="bench attach $mode\ngrep ^kernel::workload::fib enabled_functions\nrun fib 10\nbench detach\n"
done
bench_session+="bench attach fprobe_exit\nbench attach graph\nbench\nbench detach\nbench detach\nbench attach nop\nbench attach\ncat enabled_functions | wc -l\npoweroff\n"
if run_session bench-attach "$bench_session"; then
    for mode in "${bench_modes[@]}"; do
        expect "$mode attaches" grep -q "^bench: $mode attached to kernel::workload::fib$" <<<"$out"
        expect "$mode detaches" grep -q "^bench: $mode detached$" <<<"$out"
    done
    expect "every client enables fib's site" test "$(count_lines '^kernel::workload::fib \([12]\)')" -eq 9
    expect "two_ops puts two ops on it" test "$(count_lines '^kernel::workload::fib \(2\)')" -eq 1
    expect "fib's result under every client" test "$(count_lines '^fib\(10\) = 55$')" -eq 9
    expect "one client at a time" grep -q "^error: bench: 'fprobe_exit' is attached to fib; 'bench detach' first" <<<"$out"
    expect "the benchmark waits for the detach" test "$(count_lines "^error: bench: 'fprobe_exit' is attached")" -eq 2
    expect "and prints nothing before" test "$(count_lines '^benchmark:')" -eq 0
    expect "nothing to detach" grep -q "^error: bench: nothing is attached$" <<<"$out"
    listed=$(printf '%s, ' "${bench_modes[@]}")
    expect "a mode without a client; every mode checked here" grep -qx "error: bench: no mode 'nop' to attach (${listed%, })" <<<"$out"
    expect "attach needs a mode" grep -q "^error: usage: bench \[vs-linux" <<<"$out"
    expect "nothing left enabled" test "$(grep -A1 -F '> cat enabled_functions | wc -l' <<<"$out" | tail -1)" = "0"
fi

# The tour: six steps with disassembly, ending with the site restored.
if run_session tour 'tour\ntour nosuch\ncat enabled_functions\npoweroff\n'; then
    for n in 1 2 3 4 5 6; do
        expect "step $n shown" grep -q "^== $n\. " <<<"$out"
    done
    expect "the call slot disassembled, then calling each trampoline" test "$(count_lines '   <- call slot$')" -ge 4 -a "$(count_lines '<ftrace_caller>   <- call slot$')" -eq 1 -a "$(count_lines '<ftrace_regs_caller>   <- call slot$')" -eq 1
    expect "an unsaved register refused" grep -qE '^  query_register_offset\("[a-z0-9]+"\) = Err\(NotSaved\)' <<<"$out"
    expect "the return hijacked and the value seen" grep -q '^  at exit: returned 2 (0x2) after ' <<<"$out"
    expect "the site restored" grep -q '^  restored: the [0-9] bytes of the call slot are byte for byte those of step 1$' <<<"$out"
    expect "an unknown function refused" grep -q "^error: tour: unknown symbol 'nosuch'" <<<"$out"
    expect "nothing left enabled" test "$(sed -n '/^> cat enabled_functions$/,/^> poweroff$/p' <<<"$out" | wc -l)" -eq 2
fi

# The rest of the tracefs a Linux user types: trace_clock, event filters,
# set_event_pid, func_stack_trace, FUNC:snapshot, ls of a directory.
events_session=(
    "cat trace_clock"
    "echo counter > trace_clock"
    "echo fib > set_ftrace_filter"
    "echo function > current_tracer"
    "run fib 2"
    "cat trace"
    "echo bogus > trace_clock"
    "echo local > trace_clock"
    "echo 1 > options/func_stack_trace"
    "run fib 1"
    "cat trace"
    "echo 0 > options/func_stack_trace"
    "echo > trace"
    "run fib 2"
    "echo kernel::workload::run:snapshot:1 >> set_ftrace_filter"
    "cat set_ftrace_filter"
    "run fib 3"
    "cat snapshot"
    "echo !kernel::workload::run:snapshot >> set_ftrace_filter"
    "echo 0 > snapshot"
    "echo nop > current_tracer"
    "echo 'f:big fib n=\$arg1' >> dynamic_events"
    "echo 'n >= 8 && n != 9' > events/fprobes/big/filter"
    "cat events/fprobes/big/filter"
    "echo 'n ~ 3' > events/fprobes/big/filter"
    "echo 'nosuch == 1' > events/fprobes/big/filter"
    "echo 1 > events/fprobes/big/enable"
    "echo > trace"
    "run fib 10"
    "cat trace"
    "echo 0 > events/fprobes/big/enable"
    "echo 'next_comm ~ \"fib*\"' > events/sched/sched_switch/filter"
    "cat events/sched/sched_switch/filter"
    "echo 99 > set_event_pid"
    "cat set_event_pid"
    "echo x > set_event_pid"
    "echo > set_event_pid"
    "ls events/sched/sched_switch"
    "poweroff"
)
if run_session tracefs-events "$(printf '%s\n' "${events_session[@]}")\n"; then
    clocks="[local] global counter uptime perf mono mono_raw boot tai"
    [ "$arch" = x86_64 ] && clocks="$clocks x86-tsc"
    expect "trace_clock lists the clocks, local in use" grep -qxF "$clocks" <<<"$out"
    expect "counter timestamps print raw" test "$(count_lines '\] \.\.\.\.\. +[0-9]+: kernel::workload::fib <-')" -eq 3
    expect "an unknown clock refused" grep -q "^error: no clock 'bogus'" <<<"$out"
    expect "func_stack_trace follows the function" grep -qx " => kernel::workload::fib" <<<"$out"
    expect "a snapshot command listed" grep -qx "kernel::workload::run:snapshot:count=1" <<<"$out"
    expect "the snapshot holds fib(2)'s calls, taken as fib(3) began" test "$(sed -n '/^> cat snapshot$/,/^> /p' <<<"$out" | grep -c ': kernel::workload::fib <-')" -eq 3
    expect "the filter reads back" grep -qx "n >= 8 && n != 9" <<<"$out"
    expect "a glob on a number refused" grep -q "^error: Illegal operation for field type: '3'" <<<"$out"
    expect "an unknown field refused" grep -q "^error: Field not found: 'nosuch'" <<<"$out"
    # fib(10) calls fib(10) once, fib(9) once, fib(8) twice: with n >= 8 && n != 9, three events.
    expect "only matching events recorded" test "$(count_lines ': big: \(kernel::workload::fib\+0x0/0x[0-9a-f]+\) n=0x(a|8)$')" -eq 3 -a "$(count_lines ': big: \(')" -eq 3
    expect "a string glob filter reads back" grep -qx 'next_comm ~ "fib\*"' <<<"$out"
    expect "set_event_pid lists the pid" test "$(sed -n '/^> cat set_event_pid$/{n;p}' <<<"$out")" = "99"
    expect "a word that is no pid refused" grep -q "^error: 'x' is not a pid" <<<"$out"
    expect "ls shows an event's files" test "$(sed -n '/^> ls events\/sched\/sched_switch$/,/^> /p' <<<"$out" | grep -c '^\(enable\|filter\|format\)$')" -eq 3
fi

# kprobe events as a Linux user writes them: a probe inside fib (fib+8 is
# an instruction boundary on both architectures), a kretprobe, a probe at
# fib's entry (on its ftrace site), kprobe_profile, and refusals.
kprobe_session=(
    "echo 'p:kprobes/mid kernel::workload::fib+8 sp=%sp' > kprobe_events"
    "echo 'r:kprobes/ret kernel::workload::fib ret=\$retval' >> kprobe_events"
    "echo 'p:kprobes/ent kernel::workload::fib n=\$arg1' >> kprobe_events"
    "echo 'p:kprobes/mid2 kernel::workload::fib+8' >> kprobe_events"
    "cat kprobe_events"
    "echo 1 > events/kprobes/enable"
    "cat enabled_functions"
    "run fib 5"
    "cat trace"
    "cat kprobe_profile"
    "echo 0 > events/kprobes/enable"
    "echo 'p:bad kernel::workload::fib+1' >> kprobe_events"
    "echo 'r:bad kernel::workload::fib+8' >> kprobe_events"
    "echo 'p:bad kernel::workload::fib+8 n=\$arg1' >> kprobe_events"
    "echo 'p:bad nosuch_function' >> kprobe_events"
    "echo 'f:bad kernel::workload::fib' >> kprobe_events"
    "echo > kprobe_events"
    "cat kprobe_events"
    "poweroff"
)
if run_session kprobes "$(printf '%s\n' "${kprobe_session[@]}")\n"; then
    expect "kprobe_events lists the four" test "$(count_lines '^(p|r):kprobes/(mid|ret|ent|mid2) kernel::workload::fib')" -eq 4
    expect "the entry probe rides on fib's ftrace site" grep -q "^kernel::workload::fib (" <<<"$out"
    expect "15 mid-function events with registers" test "$(count_lines ': mid: \(kernel::workload::fib\+0x8/0x[0-9a-f]+\) sp=0x[0-9a-f]+$')" -eq 15
    expect "15 return events" test "$(count_lines ': ret: \(kernel::workload::(fib|run)\+0x[0-9a-f]+/0x[0-9a-f]+ <- kernel::workload::fib\) ret=0x[0-9a-f]+$')" -eq 15
    expect "fib(5)'s return value recorded" grep -qE ': ret: \(kernel::workload::run\+0x[0-9a-f]+/0x[0-9a-f]+ <- kernel::workload::fib\) ret=0x5$' <<<"$out"
    expect "15 entry events with the argument" test "$(count_lines ': ent: \(kernel::workload::fib\+0x0/0x[0-9a-f]+\) n=0x[0-9a-f]+$')" -eq 15
    expect "the workload's result unchanged" grep -qx "fib(5) = 5" <<<"$out"
    expect "a second event at mid's instruction shares its breakpoint" test "$(count_lines ': mid2: \(kernel::workload::fib\+0x8/0x[0-9a-f]+\)$')" -eq 15
    expect "kprobe_profile: 15 hits, none missed, each" test "$(count_lines '^  (mid|ret|ent|mid2) +15 +0$')" -eq 4
    expect "inside the ftrace site refused" grep -q "^error: kernel::workload::fib+0x1 is inside the function's ftrace site" <<<"$out"
    expect "a return probe off the entry refused" grep -q "^error: a return probe must be at a function's entry" <<<"$out"
    expect "\$arg off the entry refused, as Linux does" grep -q '^error: \$arg\* can be used only on function entry or exit' <<<"$out"
    expect "an unknown symbol refused" grep -qx "error: unknown symbol 'nosuch_function'" <<<"$out"
    expect "kprobe_events takes no fprobe event" grep -q "^error: unknown probe type 'f:bad'" <<<"$out"
    expect "kprobe_events empty at the end" test "$(sed -n '/^> echo > kprobe_events$/,/^> poweroff$/p' <<<"$out" | wc -l)" -eq 3
fi

# 300 rounds of defining, enabling, disabling and removing an fprobe event,
# with the function and function_graph tracers switched in between (on the
# workload's functions: switching them on every kernel function 600 times
# would only make the run slow).
round='echo '"'"'f:leak kernel::workload::fib%return n=$arg1 r=$retval'"'"' >> dynamic_events\necho 1 > events/fprobes/leak/enable\nrun fib 3\necho 0 > events/fprobes/leak/enable\necho function > current_tracer\nrun fib 2\necho function_graph > current_tracer\nrun fib 2\necho nop > current_tracer\necho -:leak >> dynamic_events\n'
rounds=""
for _ in $(seq 300); do rounds="$rounds$round"; done
if run_session event-rounds "echo *fib* > set_ftrace_filter\n${round}meminfo\n${rounds}meminfo\ncat enabled_functions\ncat dynamic_events\npoweroff\n" 300; then
    used=($(sed -n 's/^heap: \([0-9]*\) KiB used.*/\1/p' <<<"$out"))
    expect "meminfo before and after" test "${#used[@]}" -eq 2
    expect "heap within 8 KiB after 300 rounds (${used[0]:-?} -> ${used[1]:-?} KiB)" test "$(( ${used[1]:-999999} - ${used[0]:-0} ))" -le 8
    expect "no site left enabled, no event left" test "$(sed -n '/^> cat enabled_functions$/,/^> poweroff$/p' <<<"$out" | wc -l)" -eq 3
fi

# Tracing switched on and off 300 times while every CPU runs traced code
# (the full run, `stress --toggles 10000`, is the issue's acceptance check).
# Bad arguments, and a stress with a tracer already on, are refused.
trigger_session=(
    "echo 'f:fibt fib n=\$arg1' >> dynamic_events"
    "echo '# a comment defines nothing, as in Linux' >> dynamic_events"
    "cat events/fprobes/fibt/trigger"
    "echo 'traceoff if n == 2' > events/fprobes/fibt/trigger"
    "echo traceon >> events/fprobes/fibt/trigger"
    "cat events/fprobes/fibt/trigger"
    "echo 1 > events/fprobes/fibt/enable"
    "run fib 4"
    "cat tracing_on"
    "cat trace"
    "echo 'stacktrace:1 if next_pid > 0' > events/sched/sched_switch/trigger"
    "echo 1 > tracing_on"
    "echo > trace"
    "run par 2 fib 10"
    "cat trace"
    "cat events/sched/sched_switch/trigger"
    "echo 0 > events/fprobes/fibt/enable"
    "echo '-:fibt' >> dynamic_events"
    "echo '!traceoff' > events/fprobes/fibt/trigger"
    "echo 'hist:keys=n.log2:vals=n:sort=n' > events/fprobes/fibt/trigger"
    "run fib 5"
    "cat events/fprobes/fibt/hist"
    "echo '!hist:keys=n.log2:vals=n:sort=n' > events/fprobes/fibt/trigger"
    "echo '-:fibt' >> dynamic_events"
    "cat dynamic_events"
    "poweroff"
)
if run_session event-triggers "$(printf '%s\n' "${trigger_session[@]}")\n"; then
    expect "a comment line is no error: two refusals only" test "$(count_lines '^error: ')" -eq 2
    expect "no trigger: the commands available" grep -qx "# traceon traceoff snapshot stacktrace enable_event disable_event hist" <<<"$out"
    expect "the trigger reads back as Linux prints it" grep -qx "traceoff:unlimited if n == 2" <<<"$out"
    expect "traceon and traceoff are one kind" grep -q "^error: the event has a 'traceoff' trigger already" <<<"$out"
    expect "fib(2) switched tracing off" test "$(sed -n '/^> cat tracing_on$/{n;p}' <<<"$out")" = "0"
    expect "events up to and with fib(2), none after" test "$(awk '/^> cat trace$/ {on = 1; next} on && /^> / {exit} on' <<<"$out" | grep -oE ': fibt: \(kernel::workload::fib\+0x0/0x[0-9a-f]+\) n=0x[0-9a-f]+$' | sed 's/.*n=//' | tr '\n' ' ')" = "0x4 0x3 0x2 "
    expect "one sched_switch stack trace, from the scheduler" test "$(grep -A1 ': <stack trace>$' <<<"$out" | grep -c '^ => kernel::sched::')" -eq 1
    expect "its count spent" grep -qx "stacktrace:count=0 if next_pid > 0" <<<"$out"
    expect "an event with triggers is not removed" grep -q "^error: event 'fprobes/fibt' has triggers; remove them first" <<<"$out"
    expect "removed once its trigger went" test -z "$(sed -n '/^> cat dynamic_events$/{n;/^> /d;p}' <<<"$out")"
    # fib(5)'s 15 calls by n: 0 (3), 1 (5), 2 (3), 3 (2), 4 and 5 (1 each);
    # log2 buckets 2^0 (n 0, 1), 2^1 (2), 2^2 (3, 4), 2^3 (5).
    expect "a hist trigger's table, bucketed by log2" test "$(grep -c '^{ n: ~ 2^' <<<"$out")" -eq 4
    expect "its first bucket: n = 0 and 1" grep -qx "{ n: ~ 2^0  } hitcount:          8  n:          5" <<<"$out"
    expect "its totals" grep -qx "    Hits: 15" <<<"$out"
fi

# Linux's wakeup-latency recipe, typed as its documentation writes it.
synthetic_session=(
    "echo 'wakeup_latency u64 lat; pid_t pid; char comm[16]' >> synthetic_events"
    "cat synthetic_events"
    "echo 'hist:keys=pid:ts0=common_timestamp.usecs' >> events/sched/sched_wakeup/trigger"
    "echo 'hist:keys=next_pid:lat=common_timestamp.usecs-\$ts0:onmatch(sched.sched_wakeup).wakeup_latency(\$lat,next_pid,next_comm)' >> events/sched/sched_switch/trigger"
    "echo 'hist:keys=pid,lat:sort=lat' >> events/synthetic/wakeup_latency/trigger"
    "cat events/sched/sched_switch/trigger"
    "echo 1 > events/synthetic/wakeup_latency/enable"
    "run par 2 fib 22"
    "echo 0 > events/synthetic/wakeup_latency/enable"
    "cat trace"
    "cat events/synthetic/wakeup_latency/hist"
    "echo '!hist:keys=pid:ts0=common_timestamp.usecs' >> events/sched/sched_wakeup/trigger"
    "echo '!wakeup_latency' >> synthetic_events"
    "poweroff"
)
if run_session synthetic "$(printf '%s\n' "${synthetic_session[@]}")\n"; then
    expect "the definition reads back as Linux lists it" grep -qP "^wakeup_latency\tu64 lat; pid_t pid; char\[16\] comm$" <<<"$out"
    expect "the trigger reads back as Linux prints it" grep -qxF 'hist:keys=next_pid:vals=hitcount:lat=common_timestamp.usecs-$ts0:sort=hitcount:size=2048:clock=global:onmatch(sched.sched_wakeup).wakeup_latency($lat,next_pid,next_comm) [active]' <<<"$out"
    expect "the shell's wake-up from the join is recorded" test "$(count_lines ': wakeup_latency: lat=[0-9]+ pid=1 comm=shell$')" -ge 1
    expect "the synthetic event's own hist counts them" test "$(count_lines '^\{ pid: +[0-9]+, lat: +[0-9]+ \} hitcount: +[0-9]+$')" -ge 1
    expect "a trigger whose variable is read is not removed" grep -q "^error: hist: another trigger reads this one's variables; remove it first" <<<"$out"
    expect "nor an event an action records" grep -q "^error: synthetic: event 'wakeup_latency' is enabled, has triggers, is named by another event's trigger or is recorded by a hist action" <<<"$out"
fi

# The worst wakeup latency's trace kept by a conditional snapshot, where
# the switches come from, and the records field by field.
hist_extras_session=(
    "echo 1 > events/sched/sched_switch/enable"
    "echo 'hist:keys=pid:ts0=common_timestamp.usecs' >> events/sched/sched_wakeup/trigger"
    "echo 'hist:keys=next_pid:lat=common_timestamp.usecs-\$ts0:onmax(\$lat).save(next_comm):onmax(\$lat).snapshot()' >> events/sched/sched_switch/trigger"
    "echo 'hist:keys=common_stacktrace' >> events/sched/sched_switch/trigger"
    "run par 2 fib 20"
    "cat events/sched/sched_switch/hist"
    "cat snapshot | tail -2"
    "echo 1 > snapshot"
    "echo fields > trace_options"
    "cat trace | tail -2"
    "poweroff"
)
if run_session hist-extras "$(printf '%s\n' "${hist_extras_session[@]}")\n"; then
    expect "the snapshot's details" grep -qx "Snapshot taken (see tracing/snapshot).  Details:" <<<"$out"
    expect "the snapshot holds the trace up to it" grep -q ": sched_switch: prev_comm=" <<<"$(sed -n '/^> cat snapshot | tail -2$/,/^> /p' <<<"$out")"
    expect "a chain, a frame a line" test -n "$(grep -A1 -x "{ common_stacktrace:" <<<"$out" | grep -E "^         kernel::sched::")"
    expect "the snapshot file is held" grep -qx "error: busy: a hist trigger's .snapshot() action holds the snapshot buffer" <<<"$out"
    expect "fields: each field by name" grep -qE ": sched_switch: prev_comm=[^ ]+ prev_pid=0x[0-9a-f]+ \([0-9]+\) " <<<"$out"
fi

more_files_session=(
    "echo kernel::workload::fib > set_ftrace_notrace"
    "cat set_ftrace_notrace"
    "echo kernel::workload::fib > set_ftrace_filter"
    "echo function > current_tracer"
    "cat enabled_functions"
    "echo > set_ftrace_notrace"
    "cat set_ftrace_notrace"
    "cat enabled_functions"
    "echo 0 > ftrace_enabled"
    "cat ftrace_enabled"
    "cat enabled_functions"
    "run fib 3"
    "echo 1 > ftrace_enabled"
    "cat trace"
    "echo nop > current_tracer"
    "echo > trace"
    "echo 'p:kprobes/ent kernel::workload::fib n=\$arg1' > kprobe_events"
    "echo 'r:kprobes/ret kernel::workload::fib' >> kprobe_events"
    "echo 1 > events/kprobes/enable"
    "cat enabled_functions"
    "run fib 3"
    "cat per_cpu/cpu0/trace_pipe"
    "echo 0 > events/kprobes/enable"
    "echo > kprobe_events"
    "echo > recursed_functions"
    "tour kernel::workload::fib"
    "poweroff"
)
if run_session more-files "$(printf '%s\n' "${more_files_session[@]}")\n"; then
    expect "no refusals" test "$(count_lines '^error: ')" -eq 0
    expect "set_ftrace_notrace lists fib, then nothing disabled" test "$(sed -n '/^> cat set_ftrace_notrace$/{n;p}' <<<"$out" | tr '\n' '|')" = "kernel::workload::fib|#### no functions disabled ####|"
    expect "notrace wins over the filter, then fib is traced" test "$(sed -n '/^> cat enabled_functions$/{n;p}' <<<"$out" | tr '\n' '|')" = "> echo > set_ftrace_notrace|kernel::workload::fib (1)|> run fib 3|kernel::workload::fib (2) R|"
    expect "ftrace_enabled 0: nothing patched, nothing traced" test "$(sed -n '/^> cat ftrace_enabled$/{n;p}' <<<"$out")" = "0" -a "$(count_lines ': kernel::workload::fib <-')" -eq 0
    expect "cpu0's trace_pipe: fib(3)'s 5 entries and 5 returns" test "$(count_lines '^ +shell-1 +\[000\] .{5} +[0-9.]+: ent: ') $(count_lines '^ +shell-1 +\[000\] .{5} +[0-9.]+: ret: ')" = "5 5"
    expect "a tour of fib restores its slot" grep -qE "^  restored: the [0-9]+ bytes of the call slot are byte for byte those of step 1$" <<<"$out"
fi

if run_session stress 'stress --toggles 300\nstress --toggles\nstress --bogus 3\necho function > current_tracer\nstress\necho nop > current_tracer\npoweroff\n' 300; then
    line=$(grep -E '^stress: cpus=' <<<"$out" || true)
    field() { sed -n "s/.* $1=\([0-9/-]*\).*/\1/p" <<<"$line"; }
    expect "one report line ($line)" test -n "$line"
    expect "four CPUs, 300 toggles" test "$(field cpus) $(field toggles)" = "4 300"
    expect "calls made and events written" test "$(field calls)" -gt 0 -a "$(field events)" -gt 0
    expect "nothing lost, unbalanced or wrong" test "$(field lost) $(field unbalanced) $(field bad_args) $(field bad_retvals)" = "0 0 0 0"
    restored=$(field sites_restored)
    expect "every site restored ($restored)" test "${restored%/*}" = "${restored#*/}" -a "${restored%/*}" -gt 1000
    expect "heap within 16 KiB ($(field heap_delta) bytes)" test "$(field heap_delta)" -lt 16384
    expect "missing count refused" grep -q "^error: usage: stress \[--seconds S\] \[--toggles N\]" <<<"$out"
    expect "a tracer already on refused" grep -q "^error: stress: set current_tracer to nop first" <<<"$out"
fi

[ "$failures" -eq 0 ]
