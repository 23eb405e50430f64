#!/usr/bin/env python3
"""Instruction-by-instruction profile of one traced call.

    bench/profile-call.py [--listing] ARCH 'SETUP' ['RUN']

Boots the kernel (built by ./qemu-run.sh ARCH, one CPU), types the console
commands in SETUP (';'-separated, for example
"echo kernel::workload::fib > set_ftrace_filter; echo function_graph > current_tracer; run fib 3",
or "bench attach fprobe_exit" for one of the benchmark's modes), then switches QEMU's execution log on (one instruction per translation
block: -singlestep, 'log exec,nochain' from the monitor), types RUN
(default 'run fib 1'), and switches it off. The log is cut from the first
instruction of kernel::workload::fib to the return into its caller, and
printed as runs of instructions per function, then totals per function.
--listing prints every executed instruction too, disassembled (objdump).

Counts are guest instructions, as -icount counts them. A timer tick or a
page change in the ring buffer can fall inside the window: they show as
functions of their own. Needs python3, nm and QEMU; no gdb.
"""
import bisect
import collections
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACED = "kernel::workload::fib"
CALLER = "kernel::workload::run"


def kernel_elf(arch):
    triple, profile = {
        "x86_64": ("x86_64-unknown-none", "kernel-x86_64"),
        "aarch64": ("aarch64-unknown-none-softfloat", "kernel-aarch64"),
    }[arch]
    return os.path.join(ROOT, "target", triple, profile, "kernel")


def qemu_command(arch, elf, log, monitor):
    common = ["-m", "512M", "-smp", "1", "-kernel", elf, "-display", "none", "-serial", "stdio",
              "-monitor", "unix:%s,server,nowait" % monitor, "-no-reboot", "-singlestep", "-D", log]
    if arch == "x86_64":
        return ["qemu-system-x86_64", "-M", "pc", "-cpu", "max"] + common + [
            "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]
    return ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a72"] + common + ["-semihosting"]


class Console:
    """The serial console: type a line, wait for the next prompt."""

    def __init__(self, proc):
        self.proc = proc
        os.set_blocking(proc.stdout.fileno(), False)
        self.seen = b""

    def wait_prompt(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            chunk = self.proc.stdout.read()
            if chunk:
                self.seen += chunk
            # The prompt starts a line; a typed command echoed back may
            # itself hold "> " (a redirection).
            tail = self.seen.replace(b"\r", b"")
            if tail == b"> " or tail.endswith(b"\n> "):
                self.seen = b""
                return
            time.sleep(0.05)
        sys.exit("profile-call: no prompt from the kernel")

    def type(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        self.wait_prompt()


def monitor(path, command):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.sendall(command.encode() + b"\n")
        time.sleep(0.3)


def symbols(elf):
    out = subprocess.run(["nm", "-C", "--defined-only", elf], capture_output=True, text=True, check=True).stdout
    table = sorted((int(f[0], 16), f[2]) for f in (line.split(" ", 2) for line in out.splitlines())
                   if len(f) == 3 and f[1] in "tTwW")
    return [a for a, _ in table], [n for _, n in table]


def disassembly(arch, elf):
    """Every instruction of the kernel: address -> text."""
    native = "objdump" if arch == "x86_64" else "aarch64-linux-gnu-objdump"
    objdump = shutil.which(native) or shutil.which("llvm-objdump")
    if objdump is None:
        sys.exit("profile-call: --listing needs %s or llvm-objdump" % native)
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", elf], capture_output=True, text=True).stdout
    lines = (re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line) for line in out.splitlines())
    return {int(m.group(1), 16): m.group(2) for m in lines if m}


def main():
    args = sys.argv[1:]
    listing = bool(args) and args[0] == "--listing"
    if listing:
        args = args[1:]
    if len(args) not in (2, 3) or args[0] not in ("x86_64", "aarch64"):
        sys.exit(__doc__)
    arch, setup = args[0], args[1]
    run = args[2] if len(args) == 3 else "run fib 1"
    elf = kernel_elf(arch)
    if not os.path.exists(elf):
        sys.exit("profile-call: build the kernel first (./qemu-run.sh %s)" % arch)
    work = tempfile.mkdtemp(prefix="profile-call.")
    log, mon = os.path.join(work, "exec.log"), os.path.join(work, "monitor")
    proc = subprocess.Popen(qemu_command(arch, elf, log, mon), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    console = Console(proc)
    console.wait_prompt(timeout=120)
    for command in filter(None, (c.strip() for c in setup.split(";"))):
        console.type(command)
    monitor(mon, "log exec,nochain")
    console.type(run)
    monitor(mon, "log none")
    proc.stdin.write(b"poweroff\n")
    proc.stdin.flush()
    proc.wait(timeout=60)

    addresses, names = symbols(elf)

    def name(pc):
        i = bisect.bisect_right(addresses, pc) - 1
        return names[i] if i >= 0 else "?"

    traced = next(a for a, n in zip(addresses, names) if n == TRACED)
    pcs = [int(m.group(1), 16) for m in (re.search(r"\[[0-9a-f]+/([0-9a-f]+)/", line) for line in open(log)) if m]
    if traced not in pcs:
        sys.exit("profile-call: %s did not run inside the window" % TRACED)
    window = []
    for pc in pcs[pcs.index(traced):]:
        if window and name(pc) == CALLER:
            break
        window.append(pc)

    print("%d instructions from %s's entry to its return" % (len(window), TRACED))
    if all(name(pc) == TRACED for pc in window):
        print("profile-call: %s ran untraced: the setup did not turn tracing on for it "
              "(or a command was lost: run again)" % TRACED, file=sys.stderr)
    if listing:
        text = disassembly(arch, elf)
        for pc in window:
            print("%x  %-40.40s  %s" % (pc, name(pc), text.get(pc, "?")))
    runs = []
    for pc in window:
        n = name(pc)
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    for n, count in runs:
        print("%6d  %s" % (count, n))
    print("-- by function")
    for n, count in collections.Counter(name(pc) for pc in window).most_common():
        print("%6d  %s" % (count, n))


if __name__ == "__main__":
    main()
