#!/usr/bin/env bash
# The Linux side of the side-by-side tracing benchmark: what Linux's own
# tracers add to one system call, in guest instructions, on the same QEMU
# machine and CPU model as the project's benchmark.
#
#   bench/vs-linux.sh ARCH [--runs N] [--kernel 7.2|6.12]... [--offline] [--refresh]
#                          [--stable-suite SUITE] [--timeout SECONDS] [--nokaslr]
#
# ARCH      x86_64 or aarch64.
# --runs N  boot each kernel N times (default 1) and report the median: under
#           -icount the figures barely move from boot to boot.
# --kernel  measure only this series (repeatable; default both).
# --offline never refresh the package lists: use the newest kernel already
#           in the cache.
# --refresh refresh the package lists even when they are less than a day old.
# --stable-suite SUITE
#           the Debian suite Linux 6.12 comes from (default: stable, which
#           ships linux-image-6.12.N+deb13-*; bookworm-backports ships the
#           +deb12 builds).
# --timeout SECONDS   for one QEMU boot (default 1200).
# --nokaslr adds "nokaslr" to the kernel command line. On aarch64 this turns
#           KPTI off (KASLR forces it on a Cortex-A72), and with it the two
#           TLB flushes QEMU does on every system call: a run takes ~30 s a
#           kernel instead of ~200 s. The figures added by tracing come out
#           the same (within 2); the untraced call is ~33 instructions cheaper.
#
# For each architecture it measures two Debian cloud kernels:
#   Linux 7.2   linux-binary-7.2.N+debX-cloud-ARCH        Debian unstable
#   Linux 6.12  linux-image-6.12.N+debX-cloud-ARCH-unsigned  Debian stable
# the newest of each series at run time. Both come through a private apt
# configuration (its own sources, lists and cache under the cache directory)
# that points at the mirror the machine's own apt sources name: nothing is
# installed, and the host's apt state is not touched. The one exception: the
# aarch64 cross compiler, installed with apt-get when missing (said so).
#
# A small static init (bench/linux-init.c) in an initramfs does the
# measuring; see that file. Under QEMU's -icount shift=0 one guest
# instruction is one nanosecond of guest time, so its "ns" are exact
# instruction counts.
#
# Prints one line per kernel and mode:
#   linux VERSION ARCH MODE INSTRUCTIONS_ADDED_PER_CALL
# and a table. bench/linux-figures.sh reads the saved figures back as
# "MODE VERSION INSTRUCTIONS" lines for other scripts.
#
# Cache (git-ignored): target/vs-linux/, or $VS_LINUX_CACHE.
#   apt/SUITE-DEBARCH/  private apt configuration, lists and cache
#   debs/               downloaded .deb files
#   kernels/PKG_VER/    each .deb unpacked with dpkg -x
#   initramfs/ARCH/     the init binary and initramfs.cpio.gz
#   results/ARCH/       QEMU logs; results/ARCH.figures, results/ARCH.lines
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
cache=${VS_LINUX_CACHE:-$root/target/vs-linux}
init_src=$here/linux-init.c
modes=(function two_instances busy function_graph entry_event exit_event kprobe_mid)

usage() {
    # The comment at the top, from the synopsis to the option list's end.
    awk '/^#   bench\/vs-linux.sh/ { on = 1 } /^# For each/ { exit } on' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
die() {
    echo "vs-linux: error: $*" >&2
    exit 1
}
say() {
    echo "vs-linux: $*" >&2
}

# --- arguments ---------------------------------------------------------------
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
arch=$1
shift
runs=1
offline=0
refresh=0
stable_suite=stable
timeout_s=1200
extra_append=""
series=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) [ $# -ge 2 ] || usage; runs=$2; shift ;;
        --kernel) [ $# -ge 2 ] || usage; series+=("$2"); shift ;;
        --offline) offline=1 ;;
        --refresh) refresh=1 ;;
        --stable-suite) [ $# -ge 2 ] || usage; stable_suite=$2; shift ;;
        --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift ;;
        --nokaslr) extra_append=" nokaslr" ;;
        -h|--help) usage ;;
        *) echo "vs-linux: unknown option '$1'" >&2; usage ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs takes a positive number, not '$runs'"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout takes seconds, not '$timeout_s'"
[ ${#series[@]} -gt 0 ] || series=(7.2 6.12)
for s in "${series[@]}"; do
    case "$s" in 7.2|6.12) ;; *) die "--kernel takes 7.2 or 6.12, not '$s'" ;; esac
done

case "$arch" in
    x86_64)
        debarch=amd64
        cc=gcc
        qemu=(qemu-system-x86_64 -M pc -cpu max)
        console=ttyS0
        ;;
    aarch64)
        debarch=arm64
        cc=aarch64-linux-gnu-gcc
        qemu=(qemu-system-aarch64 -M virt -cpu cortex-a72)
        console=ttyAMA0
        ;;
    *) die "ARCH is x86_64 or aarch64, not '$arch'" ;;
esac

for tool in apt-get apt-cache dpkg dpkg-deb gzip timeout flock "${qemu[0]}"; do
    command -v "$tool" >/dev/null || die "'$tool' is missing"
done
mkdir -p "$cache"/{apt,debs,kernels,initramfs,results}

# One run at a time: two QEMUs would share the machine's two cores (with the
# developer's work) and two runs the same cache.
exec 9>"$cache/.lock"
if ! flock -n 9; then
    say "another vs-linux.sh is running; waiting for it"
    flock 9
fi

# --- the mirror ----------------------------------------------------------------
# The first Debian archive the machine's own apt sources name for its own
# release (not -security, -updates...): one-line .list files and deb822
# .sources files alike. Prints "URI KEYRING" (KEYRING may be "-").
host_mirror() {
    local codename
    # shellcheck source=/dev/null
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    local files=()
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    local f
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 1
    # Every "deb" entry as "URI SUITE KEYRING", in file order.
    awk '
        function flush() {
            if (types ~ /(^| )deb( |$)/ && enabled != "no")
                for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                    print u[i], s[j], (key == "" ? "-" : key)
            types = ""; nu = 0; ns = 0; key = ""; enabled = ""
        }
        FNR == 1 { flush() }
        /^[ \t]*#/ { next }
        FILENAME ~ /\.sources$/ {
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            f = tolower($1)
            if (f == "types:") { types = $0; sub(/^[^:]*:[ \t]*/, "", types) }
            else if (f == "uris:") for (i = 2; i <= NF; i++) u[++nu] = $i
            else if (f == "suites:") for (i = 2; i <= NF; i++) s[++ns] = $i
            else if (f == "signed-by:" && $2 ~ /^\//) key = $2
            else if (f == "enabled:") enabled = tolower($2)
            next
        }
        $1 == "deb" {
            i = 2; k = "-"
            if ($2 ~ /^\[/) {
                for (; i <= NF; i++) {
                    if ($i ~ /signed-by=/) { k = $i; sub(/.*signed-by=/, "", k); sub(/\]$/, "", k) }
                    if ($i ~ /\]$/) { i++; break }
                }
            }
            print $i, $(i + 1), k
        }
        END { flush() }
    ' "${files[@]}" |
        awk -v c="$codename" '$2 == c { print $1, $3; found = 1; exit }
                              END { if (!found) exit 1 }'
}

# --- private apt -----------------------------------------------------------------
# Writes the private apt configuration for SUITE and prints its file's path.
# Reading it through APT_CONFIG keeps the host's apt.conf.d (proxies and the
# like) but replaces sources, lists, cache and status, and clears the hooks
# apt.conf.d adds to "update" (appstream and PackageKit refreshing the host's
# own caches).
apt_config() {
    local suite=$1 dir=$cache/apt/$1-$debarch
    # Empty parts directories: the host's sources.list.d and preferences.d
    # (pins) must not apply.
    mkdir -p "$dir"/lists/partial "$dir"/cache/archives/partial "$dir"/sources.list.d "$dir"/preferences.d
    local mirror keyring
    read -r mirror keyring < <(host_mirror) ||
        die "no Debian mirror for this release in /etc/apt/sources.list or /etc/apt/sources.list.d/"
    if [ "$keyring" = - ]; then
        keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    fi
    echo "deb [signed-by=$keyring] $mirror $suite main" >"$dir/sources.list.new"
    cat >"$dir/apt.conf.new" <<EOF
// Private apt configuration of bench/vs-linux.sh: Debian $suite for $debarch.
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Pre-Invoke;
#clear DPkg::Post-Invoke;
#clear APT::Architectures;
APT::Architecture "$debarch";
APT::Architectures { "$debarch"; };
Dir::Etc::sourcelist "$dir/sources.list";
Dir::Etc::sourceparts "$dir/sources.list.d";
Dir::Etc::preferences "$dir/preferences";
Dir::Etc::preferencesparts "$dir/preferences.d";
Dir::State::Lists "$dir/lists";
Dir::State::status "/dev/null";
Dir::State::extended_states "$dir/extended_states";
Dir::Cache "$dir/cache";
// Only package lists: no translations, AppStream data or Contents.
Acquire::Languages "none";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled "false";
Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
// The cache belongs to root: downloading as _apt could not write there.
APT::Sandbox::User "root";
EOF
    # A changed mirror means the old lists describe another archive.
    if ! cmp -s "$dir/sources.list.new" "$dir/sources.list" 2>/dev/null; then
        rm -rf "$dir/lists"
        mkdir -p "$dir/lists/partial"
    fi
    mv "$dir/sources.list.new" "$dir/sources.list"
    mv "$dir/apt.conf.new" "$dir/apt.conf"
    echo "$dir/apt.conf"
}

papt_get() { APT_CONFIG=$conf apt-get -q "$@"; }
papt_cache() { APT_CONFIG=$conf apt-cache "$@"; }

# Refreshes SUITE's lists when older than a day (or --refresh), never with
# --offline. Returns non-zero when no lists are there to use.
refresh_lists() {
    local suite=$1 lists
    lists=$(dirname "$conf")/lists
    local have
    have=$(find "$lists" -maxdepth 1 -name '*InRelease' -print -quit)
    if [ "$offline" = 1 ]; then
        [ -n "$have" ]
        return
    fi
    # Our own stamp: apt may date a list file by the server's Last-Modified.
    local stamp=$lists/.vs-linux-updated
    if [ -z "$have" ] || [ "$refresh" = 1 ] || [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440)" ]; then
        say "updating the package lists of Debian $suite ($debarch)"
        if papt_get update >"$cache/apt/$suite-$debarch.update.log" 2>&1; then
            touch "$stamp"
        else
            say "warning: apt-get update for $suite failed (see $cache/apt/$suite-$debarch.update.log)"
            have=$(find "$lists" -maxdepth 1 -name '*InRelease' -print -quit)
            [ -n "$have" ]
            return
        fi
    fi
}

# --- kernels -----------------------------------------------------------------------
# Package name patterns, tried in order, for a series. The first is the name
# the Debian kernels have; the others catch a renaming.
name_patterns() {
    case "$1" in
        7.2) printf '%s\n' \
            "^linux-binary-7\.2\.[0-9]+\+deb[0-9.]+-cloud-$debarch\$" \
            "^linux-image-7\.2\.[0-9]+\+deb[0-9.]+-cloud-$debarch-unsigned\$" \
            "^linux-image-7\.2\.[0-9.]+-[0-9]+-cloud-$debarch-unsigned\$" ;;
        6.12) printf '%s\n' \
            "^linux-image-6\.12\.[0-9]+\+deb[0-9.]+-cloud-$debarch-unsigned\$" \
            "^linux-image-6\.12\.[0-9.]+-[0-9]+-cloud-$debarch-unsigned\$" \
            "^linux-binary-6\.12\.[0-9]+\+deb[0-9.]+-cloud-$debarch\$" ;;
    esac
}

suite_of() {
    case "$1" in
        7.2) echo unstable ;;
        6.12) echo "$stable_suite" ;;
    esac
}

# Prints "PACKAGE VERSION" for the newest package of SERIES in the lists.
newest_in_lists() {
    local s=$1 pat names best="" bestv="" n v
    while read -r pat; do
        names=$(papt_cache search --names-only "$pat" | awk '{ print $1 }')
        [ -n "$names" ] && break
    done < <(name_patterns "$s")
    [ -n "$names" ] || return 1
    # apt-cache madison: "NAME | VERSION | SOURCE"; the highest version wins.
    # shellcheck disable=SC2086 # $names: one argument a package
    while read -r n v; do
        if [ -z "$bestv" ] || dpkg --compare-versions "$v" gt "$bestv"; then
            best=$n
            bestv=$v
        fi
    done < <(papt_cache madison $names | awk -F' *[|] *' '{ gsub(/ /, "", $1); print $1, $2 }')
    [ -n "$best" ] && echo "$best $bestv"
}

# Prints "PACKAGE VERSION" for the newest kernel of SERIES already unpacked.
newest_in_cache() {
    local s=$1 pat d best="" bestv="" n v
    while read -r pat; do
        for d in "$cache"/kernels/*/; do
            [ -f "$d/.unpacked" ] || continue
            d=$(basename "$d")
            n=${d%%_*}
            v=${d#*_}
            [[ $n =~ $pat ]] || continue
            if [ -z "$bestv" ] || dpkg --compare-versions "$v" gt "$bestv"; then
                best=$n
                bestv=$v
            fi
        done
        [ -n "$best" ] && break
    done < <(name_patterns "$s")
    [ -n "$best" ] && echo "$best $bestv"
}

# Prints the cached .deb of PACKAGE at VERSION, if there is one. (apt names
# it PACKAGE_VERSION_ARCH.deb with any epoch's colon escaped: ask the file.)
cached_deb() {
    local f
    for f in "$cache/debs/$1"_*_"$debarch".deb; do
        [ -f "$f" ] || continue
        if [ "$(dpkg-deb -f "$f" Version)" = "$2" ]; then
            echo "$f"
            return
        fi
    done
}

# Makes sure SERIES's newest kernel is downloaded and unpacked; prints
# "VERSION VMLINUZ PACKAGE PKGVERSION". Progress goes to standard error.
fetch_kernel() {
    local s=$1 suite pkg ver
    suite=$(suite_of "$s")
    conf=$(apt_config "$suite")
    if refresh_lists "$suite" && read -r pkg ver < <(newest_in_lists "$s"); then
        :
    elif read -r pkg ver < <(newest_in_cache "$s"); then
        say "Linux $s: no package in the lists of Debian $suite; using the cached $pkg $ver"
    else
        say "Linux $s: nothing in Debian $suite for $debarch matches:"
        name_patterns "$s" | sed 's/^/    /' >&2
        say "cloud kernels there:"
        papt_cache search --names-only "^linux-(image|binary)-.*cloud-$debarch" 2>/dev/null | sed 's/^/    /' >&2 || true
        die "no Linux $s kernel package for $debarch"
    fi
    local dir=$cache/kernels/${pkg}_$ver
    if [ ! -f "$dir/.unpacked" ]; then
        local deb
        deb=$(cached_deb "$pkg" "$ver")
        if [ -z "$deb" ]; then
            say "downloading $pkg $ver from Debian $suite"
            (cd "$cache/debs" && papt_get download "$pkg=$ver") >&2 ||
                die "apt-get download $pkg=$ver failed"
            deb=$(cached_deb "$pkg" "$ver")
            [ -n "$deb" ] || die "apt-get download left no ${pkg}_*_$debarch.deb in $cache/debs"
        else
            say "$pkg $ver: using the cached $(basename "$deb")"
        fi
        rm -rf "$dir"
        dpkg -x "$deb" "$dir"
        touch "$dir/.unpacked"
    else
        say "$pkg $ver: cached in $dir"
    fi
    # linux-binary-* keeps vmlinuz with the modules; linux-image-* in /boot.
    local vmlinuz="" d
    for d in "$dir"/usr/lib/modules/*/vmlinuz "$dir"/boot/vmlinuz-*; do
        [ -f "$d" ] && vmlinuz=$d && break
    done
    [ -n "$vmlinuz" ] || die "no vmlinuz in $dir (usr/lib/modules/*/vmlinuz or boot/vmlinuz-*)"
    local version=${pkg#linux-binary-}
    version=${version#linux-image-}
    version=${version%%[+-]*}
    echo "$version $vmlinuz $pkg $ver"
}

# --- init and initramfs ---------------------------------------------------------------
ensure_compiler() {
    command -v "$cc" >/dev/null && return
    [ "$arch" = aarch64 ] || die "'$cc' is missing"
    # libc6-dev-arm64-cross is only a Recommends of the compiler, and -static
    # needs its libc.a.
    say "installing the aarch64 cross compiler: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross >&2 ||
        die "could not install gcc-aarch64-linux-gnu (an 'apt-get update' may be needed first)"
}

# cpio "newc" by hand (no cpio binary needed, and no root-only mknod for
# /dev/console). Writes one entry header and the name: NAME MODE SIZE
# [RDEVMAJOR RDEVMINOR]. The caller appends SIZE bytes of data, then pad4.
cpio_ino=0
pad4() {
    head -c $(((4 - $1 % 4) % 4)) /dev/zero
}
cpio_header() {
    local name=$1 mode=$2 size=$3 rmaj=${4:-0} rmin=${5:-0}
    local namesize=$((${#name} + 1)) nlink=1
    [ $((mode & 8#170000)) = $((8#040000)) ] && nlink=2
    cpio_ino=$((cpio_ino + 1))
    # magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
    # rdevmajor, rdevminor, namesize, check
    printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
        "$cpio_ino" "$mode" 0 0 "$nlink" 0 "$size" 0 0 "$rmaj" "$rmin" "$namesize" 0
    printf '%s\0' "$name"
    pad4 $((110 + namesize))
}

# Builds (or reuses) the init and initramfs; prints the initramfs's path.
build_initramfs() {
    local dir=$cache/initramfs/$arch
    mkdir -p "$dir"
    ensure_compiler
    # Rebuild when the source, the compiler or this recipe changes.
    local stamp
    stamp="$(sha256sum <"$init_src" | cut -d' ' -f1) $("$cc" -dumpmachine) $("$cc" -dumpfullversion) cpio-v1"
    if [ -f "$dir/initramfs.cpio.gz" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
        say "initramfs for $arch: cached in $dir"
        echo "$dir/initramfs.cpio.gz"
        return
    fi
    say "building the init ($cc -static) and the initramfs for $arch"
    "$cc" -static -O2 -Wall -Wextra -o "$dir/init" "$init_src" >&2
    local size
    size=$(stat -c %s "$dir/init")
    {
        cpio_header dev $((8#040755)) 0
        cpio_header dev/console $((8#020600)) 0 5 1
        cpio_header proc $((8#040755)) 0
        cpio_header sys $((8#040755)) 0
        cpio_header init $((8#100755)) "$size"
        cat "$dir/init"
        pad4 "$size"
        cpio_header TRAILER!!! 0 0
    } | gzip -9 -n >"$dir/initramfs.cpio.gz.new"
    mv "$dir/initramfs.cpio.gz.new" "$dir/initramfs.cpio.gz"
    echo "$stamp" >"$dir/stamp"
    echo "$dir/initramfs.cpio.gz"
}

# --- measuring ----------------------------------------------------------------------------
# Boots VMLINUZ with the initramfs; the init's output goes to LOG. One QEMU
# at a time: -icount runs one emulated CPU at a time on one host thread.
boot() {
    local vmlinuz=$1 initrd=$2 log=$3
    # -icount shift=0: one instruction, one nanosecond of guest time.
    # panic=-1 and -no-reboot: a panicking kernel ends QEMU at once.
    local cmd=("${qemu[@]}" -m 512M -smp 4 -icount shift=0 -display none
        -serial stdio -monitor none -no-reboot
        -kernel "$vmlinuz" -initrd "$initrd"
        -append "console=$console quiet panic=-1$extra_append")
    local status=0
    timeout -k 10 "$timeout_s" "${cmd[@]}" </dev/null 2>&1 | tr -d '\r' >"$log" || status=$?
    if [ "$status" = 124 ]; then
        say "warning: QEMU timed out after ${timeout_s}s (log: $log)"
    elif [ "$status" != 0 ]; then
        say "warning: QEMU exited with status $status (log: $log)"
    fi
    if grep -q '^vsl-error' "$log"; then
        grep '^vsl-error' "$log" >&2
    fi
    grep -q '^vsl-done' "$log"
}

median() {
    sort -n | awk '{ v[NR] = $1 } END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# --- main ---------------------------------------------------------------------------------------
t_start=$SECONDS
initrd=$(build_initramfs)
resdir=$cache/results/$arch
mkdir -p "$resdir"
lines=$cache/results/$arch.lines.new
figures=$cache/results/$arch.figures.new
: >"$lines"
: >"$figures"
versions=()
for s in "${series[@]}"; do
    read -r version vmlinuz pkg pkgver < <(fetch_kernel "$s") || die "no kernel for Linux $s"
    versions+=("$version")
    for run in $(seq 1 "$runs"); do
        log=$resdir/$version.run$run.log
        t0=$SECONDS
        say "booting Linux $version ($pkg $pkgver) on $arch under QEMU -icount shift=0${extra_append:+, with$extra_append}, run $run/$runs"
        boot "$vmlinuz" "$initrd" "$log" ||
            die "Linux $version on $arch: the measurement did not finish (log: $log)"
        say "Linux $version run $run: $((SECONDS - t0)) s"
        grep '^vsl-info' "$log" | sed 's/^/    /' >&2
    done
    for m in "${modes[@]}"; do
        vals=()
        for run in $(seq 1 "$runs"); do
            v=$(awk -v m="$m" '$1 == "vsl" && $2 == m { printf "%.0f\n", $6 }' "$resdir/$version.run$run.log")
            [ -n "$v" ] || die "Linux $version on $arch: no '$m' figure in $resdir/$version.run$run.log"
            vals+=("$v")
        done
        fig=$(printf '%s\n' "${vals[@]}" | median)
        variant=$(awk -v m="$m" '$1 == "vsl" && $2 == m { print $7; exit }' "$resdir/$version.run1.log")
        base=$(awk -v m="$m" '$1 == "vsl" && $2 == m { printf "%.0f\n", ($3 + $5) / 2 / 100000; exit }' "$resdir/$version.run1.log")
        echo "linux $version $arch $m $fig" | tee -a "$lines"
        echo "$m $version $fig $variant $base $pkg $pkgver ${extra_append:- -}" >>"$figures"
        if [ "$runs" -gt 1 ]; then
            say "    $m over $runs runs: ${vals[*]}"
        fi
    done
done
# Keep the saved figures of a series this run left out (--kernel). The
# version is the second field of both files.
for old in lines figures; do
    [ -f "$cache/results/$arch.$old" ] || continue
    awk -v series="${series[*]}" '
        BEGIN { n = split(series, S, " ") }
        { for (i = 1; i <= n; i++) if (index($2, S[i] ".") == 1) next; print }
    ' "$cache/results/$arch.$old" >>"$cache/results/$arch.$old.new"
done
mv "$lines" "$cache/results/$arch.lines"
mv "$figures" "$cache/results/$arch.figures"

# The table: one column per kernel. An event mode that had to use a kprobe
# (no fprobe events in that kernel) is marked (p:) or (r:).
echo
echo "Linux on $arch, QEMU -icount shift=0: guest instructions added to one getppid call"
awk -v order="${modes[*]}" -v vers="${versions[*]}" '
    { fig[$1, $2] = $3; var[$1, $2] = $4; base[$2] = $5 }
    END {
        nm = split(order, M, " "); nv = split(vers, V, " ")
        printf "%-16s", "mode"; for (j = 1; j <= nv; j++) printf " %14s", V[j]; printf "\n"
        for (i = 1; i <= nm; i++) {
            printf "%-16s", M[i]
            for (j = 1; j <= nv; j++) {
                mark = ""
                if (var[M[i], V[j]] ~ /^kprobe-entry/) mark = " (p:)"
                if (var[M[i], V[j]] ~ /^kprobe-exit/) mark = " (r:)"
                printf " %14s", fig[M[i], V[j]] mark
            }
            printf "\n"
        }
        printf "%-16s", "(untraced call)"; for (j = 1; j <= nv; j++) printf " %14s", base[V[j]]; printf "\n"
    }' "$cache/results/$arch.figures"
say "done in $((SECONDS - t_start)) s; figures in $cache/results/$arch.figures"
