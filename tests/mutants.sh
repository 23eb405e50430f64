#!/usr/bin/env bash
# Mutation testing by hand: each file in tests/mutants/ is a small deliberate
# bug in the mechanism (a unified diff after a header), and the test that
# must catch it. For each one and each architecture it names, the script
# applies the diff, runs the fastest stage that should fail, takes the diff
# back, and says whether the mutant was killed (the stage failed, and the
# named test failed or never finished: the kernel died under it) or
# survived. Not part of CI: a mutant costs
# a kernel build and a boot. docs/mutants.md lists them and their results.
#
#   tests/mutants.sh [--all-tests] [NAME...]   (default: every mutant)
#
# --all-tests runs the whole stage, not just the named test, and lists every
# test the mutant failed (to find out which tests catch a new mutant).
#
# A mutant's header, before the diff:
#   # What the bug is.
#   # arches: x86_64 aarch64      (or: host)
#   # stage: kernel | host CRATE | fuzz
#   # killed-by: TEST NAME        (module::test, as the run prints it)
set -euo pipefail
source "$(dirname "$0")/../tools/env.sh"
cd "$KTRACE_ROOT"

all_tests=false
names=()
for arg in "$@"; do
    case "$arg" in
        --all-tests) all_tests=true ;;
        *) names+=("$arg") ;;
    esac
done
if [ ${#names[@]} -eq 0 ]; then
    for file in tests/mutants/*.diff; do names+=("$(basename "$file" .diff)"); done
fi

header() { sed -n "s/^# $2: //p" "tests/mutants/$1.diff"; }

applied=""
revert() {
    if [ -n "$applied" ]; then
        git apply -R "tests/mutants/$applied.diff"
        applied=""
    fi
}
trap revert EXIT

# run_stage NAME ARCH LOG: runs the mutant's stage; its status is the stage's.
run_stage() {
    local name=$1 arch=$2 log=$3 stage killer filter triple
    stage=$(header "$name" stage)
    killer=$(header "$name" killed-by)
    filter=$killer
    $all_tests && filter=""
    case "$stage" in
        kernel)
            triple=$(target_triple "$arch")
            cargo test --quiet --profile "kernel-$arch" --target "$triple" -p kernel -- $filter >"$log" 2>&1 ;;
        host\ *)
            cargo test -p "${stage#host }" -- $filter >"$log" 2>&1 ;;
        fuzz)
            tests/fuzz-input.sh "$arch" >"$log" 2>&1 ;;
        *)
            echo "tests/mutants.sh: $name: unknown stage '$stage'" >&2
            return 2 ;;
    esac
}

# The tests a stage's log says failed, one per line.
failed_tests() {
    sed -n -e 's/^test \(.*\) \.\.\. FAILED$/\1/p' -e 's/^\([A-Za-z0-9_:]*\) \.\.\. FAILED$/\1/p' \
        -e 's/^\(FAILED: fuzz seed .*\)$/\1/p' "$1"
}

# named_test_passed TEST LOG: the log says TEST passed (kernel or host).
named_test_passed() {
    grep -qxF "$1 ... ok" "$2" || grep -qxF "test $1 ... ok" "$2"
}

survivors=0
results=()
log=$(mktemp)
for name in "${names[@]}"; do
    if [ ! -f "tests/mutants/$name.diff" ]; then
        echo "tests/mutants.sh: no mutant '$name' in tests/mutants/" >&2
        exit 2
    fi
    killer=$(header "$name" killed-by)
    arches=$(header "$name" arches)
    [ "$arches" != host ] || arches=$(uname -m)
    for arch in $arches; do
        git apply "tests/mutants/$name.diff"
        applied=$name
        status=0
        run_stage "$name" "$arch" "$log" || status=$?
        revert
        failed=$(failed_tests "$log")
        # Killed: the stage failed, and the named test did not pass (it
        # failed, or the kernel died under it before it could say).
        if [ "$status" -ne 0 ] && { [ "$(header "$name" stage)" = fuzz ] || ! named_test_passed "$killer" "$log"; }; then
            verdict="killed"
        else
            verdict="SURVIVED"
            survivors=$((survivors + 1))
        fi
        results+=("$verdict $name ($arch) by: $(tr '\n' ' ' <<<"${failed:-nothing failed}")")
        echo "${results[-1]}"
        if [ "$verdict" = SURVIVED ]; then
            tail -15 "$log" | sed 's/^/    /'
        fi
    done
done
rm -f "$log"
echo "== mutants: ${#results[@]} runs, $survivors survived"
printf '%s\n' "${results[@]}"
[ "$survivors" -eq 0 ]
