/*
 * linux-init.c: the whole userland of the Linux side of bench/vs-linux.sh.
 *
 * Runs as PID 1 from an initramfs under QEMU with `-icount shift=0`, where
 * guest time advances one nanosecond per emulated instruction: every "ns"
 * below is an exact count of guest instructions.
 *
 * For each tracing mode it times a tight loop of getppid system calls
 * (best of RUNS runs of CALLS calls) untraced, traced, then untraced again,
 * prints one line
 *
 *   vsl MODE UNTRACED_NS TRACED_NS UNTRACED_AGAIN_NS PER_CALL_ADDED_NS VARIANT events=N
 *
 * where the first three are the best totals for CALLS calls, PER_CALL_ADDED
 * is traced/CALLS - mean(untraced, untraced_again)/CALLS, VARIANT says what
 * was traced and how, and events=N is how many events the ring buffers took
 * while traced (a check that tracing really happened). Lines starting with
 * "vsl-" are information; "vsl-done" ends a complete run. Then it powers the
 * machine off.
 *
 * Built static (gcc -static / aarch64-linux-gnu-gcc -static): the initramfs
 * holds nothing else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CALLS 100000
#define RUNS 5
#define WARMUP_LOOPS 20

static const char *T = "/sys/kernel/tracing";
static char func[128];  /* the traced syscall handler */
static char other[128]; /* the function the "busy" instance traces */

static void info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vsl-info ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    va_end(ap);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vsl-error ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    va_end(ap);
    sync();
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}

/* Prints the tracefs error log: why a probe definition was refused. */
static void show_error_log(void)
{
    char path[256], buf[2048];
    snprintf(path, sizeof path, "%s/error_log", T);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
        buf[n] = 0;
        printf("vsl-info error_log: %s", buf);
        fflush(stdout);
    }
    /* Clear it so the next failure shows alone. */
    fd = open(path, O_WRONLY | O_TRUNC);
    if (fd >= 0)
        close(fd);
}

/*
 * Writes S to tracefs file REL (relative to T). FLAGS is O_TRUNC to replace
 * (which also clears filters, the buffer or all probes) or O_APPEND to add.
 * Returns 0 or -errno; never dies, the caller decides.
 */
static int twrite(const char *rel, const char *s, int flags)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", T, rel);
    int fd = open(path, O_WRONLY | flags);
    if (fd < 0)
        return -errno;
    int ret = 0;
    size_t len = strlen(s);
    if (len && write(fd, s, len) != (ssize_t)len)
        ret = -errno;
    if (close(fd) < 0 && !ret)
        ret = -errno;
    return ret;
}

/* twrite that must work: the benchmark is meaningless otherwise. */
static void must(const char *rel, const char *s, int flags)
{
    int r = twrite(rel, s, flags);
    if (r) {
        show_error_log();
        die("writing '%s' to %s: %s", s, rel, strerror(-r));
    }
}

static int exists(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", T, rel);
    return access(path, F_OK) == 0;
}

/*
 * Looks up each candidate in available_filter_functions (one function a
 * line, maybe followed by " [module]") and copies the first one present to
 * OUT. Returns 0 when none is.
 */
static int pick_function(const char *const *cands, char *out, size_t outlen)
{
    char path[256], line[512];
    snprintf(path, sizeof path, "%s/available_filter_functions", T);
    int best = -1;
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot open %s: %s", path, strerror(errno));
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, " \t\n")] = 0;
        for (int i = 0; cands[i] && (best < 0 || i < best); i++)
            if (!strcmp(line, cands[i]))
                best = i;
        if (best == 0)
            break;
    }
    fclose(f);
    if (best < 0)
        return 0;
    snprintf(out, outlen, "%s", cands[best]);
    return 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * One loop of CALLS getppid calls, in ns. syscall(SYS_getppid), not
 * getppid(): a libc may cache or inline the answer, and the system call is
 * what is measured.
 */
static uint64_t loop_ns(void)
{
    uint64_t t0 = now_ns();
    for (int i = 0; i < CALLS; i++)
        syscall(SYS_getppid);
    return now_ns() - t0;
}

/* The best (least disturbed by interrupts) of RUNS loops. */
static uint64_t best_ns(void)
{
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < RUNS; r++) {
        uint64_t t = loop_ns();
        if (t < best)
            best = t;
    }
    return best;
}

/*
 * Events the ring buffer of tracefs directory DIR ("." or "instances/b")
 * has taken since it was last cleared: per-CPU "entries" plus "overrun"
 * (events overwritten once the buffer was full).
 */
static uint64_t buffer_events(const char *dir)
{
    uint64_t total = 0;
    for (int cpu = 0; cpu < 64; cpu++) {
        char path[256], line[256];
        snprintf(path, sizeof path, "%s/%s/per_cpu/cpu%d/stats", T, dir, cpu);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        while (fgets(line, sizeof line, f)) {
            unsigned long long v;
            if (sscanf(line, "entries: %llu", &v) == 1 || sscanf(line, "overrun: %llu", &v) == 1)
                total += v;
        }
        fclose(f);
    }
    return total;
}

/* Back to nothing traced: every mode starts from the same state. */
static void reset(void)
{
    twrite("events/enable", "0", O_TRUNC);
    if (exists("instances/b")) {
        twrite("instances/b/current_tracer", "nop", O_TRUNC);
        twrite("instances/b/set_ftrace_filter", "", O_TRUNC);
        if (rmdir("/sys/kernel/tracing/instances/b") < 0)
            die("rmdir instances/b: %s", strerror(errno));
    }
    must("current_tracer", "nop", O_TRUNC);
    must("set_ftrace_filter", "", O_TRUNC);
    /* Truncating a probe file removes every probe it defined. */
    if (exists("dynamic_events"))
        must("dynamic_events", "", O_TRUNC);
    if (exists("kprobe_events"))
        must("kprobe_events", "", O_TRUNC);
    must("trace", "", O_TRUNC);
}

/* Whether this kernel takes fprobe events ("f:" in dynamic_events). */
static int have_fprobe_events(void)
{
    char path[256], line[512];
    int found = 0;
    snprintf(path, sizeof path, "%s/README", T);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "f[:[<group>/][<event>]]") != NULL;
    fclose(f);
    return found;
}

/*
 * Defines and enables probe event bench/NAME on func: an fprobe event in
 * dynamic_events where the kernel has them, else a kprobe event in
 * kprobe_events. EXIT: on return rather than entry. Copies the kind used
 * ("fprobe"/"kprobe") to KIND.
 */
static void add_event(const char *name, int exit, char *kind, size_t kindlen)
{
    char def[256], en[128];
    if (have_fprobe_events()) {
        if (exit)
            snprintf(def, sizeof def, "f:bench/%s %s%%return r=$retval\n", name, func);
        else
            snprintf(def, sizeof def, "f:bench/%s %s a=$arg1\n", name, func);
        snprintf(kind, kindlen, "fprobe");
        must("dynamic_events", def, O_APPEND);
    } else {
#if defined(__aarch64__)
        const char *arg1 = "%x0";
#else
        const char *arg1 = "%di";
#endif
        if (exit)
            snprintf(def, sizeof def, "r:bench/%s %s r=$retval\n", name, func);
        else
            snprintf(def, sizeof def, "p:bench/%s %s a=%s\n", name, func, arg1);
        snprintf(kind, kindlen, "kprobe");
        must("kprobe_events", def, O_APPEND);
    }
    def[strcspn(def, "\n")] = 0;
    info("%s event: %s", kind, def);
    snprintf(en, sizeof en, "events/bench/%s/enable", name);
    must(en, "1", O_TRUNC);
}

/*
 * Defines and enables kprobe event bench/mid inside func: at the first
 * offset past the function's ftrace call site that the kernel takes (it
 * refuses offsets that are not instruction boundaries, and those of the
 * call site itself). Copies the probed place to VARIANT.
 */
static void add_mid_probe(char *variant, size_t len)
{
#if defined(__aarch64__)
    const int first = 16, step = 4; /* past bti/paciasp and the two patchable NOPs */
#else
    const int first = 9, step = 1; /* past endbr64 and the 5-byte fentry call */
#endif
    char def[256];
    for (int off = first; off < 128; off += step) {
        snprintf(def, sizeof def, "p:bench/mid %s+%d\n", func, off);
        if (twrite("kprobe_events", def, O_APPEND) == 0) {
            must("events/bench/mid/enable", "1", O_TRUNC);
            snprintf(variant, len, "kprobe:%s+%d", func, off);
            return;
        }
    }
    show_error_log();
    die("no offset of %s took a kprobe", func);
}

enum mode { FUNCTION, TWO_INSTANCES, BUSY, FUNCTION_GRAPH, ENTRY_EVENT, EXIT_EVENT, KPROBE_MID, NMODES };
static const char *const mode_names[NMODES] = {
    "function", "two_instances", "busy", "function_graph", "entry_event", "exit_event", "kprobe_mid",
};

/* Sets up mode M; copies a one-word description of what it did to VARIANT. */
static void setup(enum mode m, char *variant, size_t len)
{
    char kind[16];
    switch (m) {
    case FUNCTION:
        /* The filter first: the function tracer with no filter traces all. */
        must("set_ftrace_filter", func, O_TRUNC);
        must("current_tracer", "function", O_TRUNC);
        snprintf(variant, len, "function:%s", func);
        break;
    case TWO_INSTANCES:
        must("set_ftrace_filter", func, O_TRUNC);
        must("current_tracer", "function", O_TRUNC);
        if (mkdir("/sys/kernel/tracing/instances/b", 0755) < 0)
            die("mkdir instances/b: %s", strerror(errno));
        must("instances/b/set_ftrace_filter", func, O_TRUNC);
        must("instances/b/current_tracer", "function", O_TRUNC);
        snprintf(variant, len, "function+instance:%s", func);
        break;
    case BUSY:
        must("set_ftrace_filter", func, O_TRUNC);
        must("current_tracer", "function", O_TRUNC);
        if (mkdir("/sys/kernel/tracing/instances/b", 0755) < 0)
            die("mkdir instances/b: %s", strerror(errno));
        must("instances/b/set_ftrace_filter", other, O_TRUNC);
        must("instances/b/current_tracer", "function", O_TRUNC);
        snprintf(variant, len, "function:%s,instance:%s", func, other);
        break;
    case FUNCTION_GRAPH:
        must("set_ftrace_filter", func, O_TRUNC);
        must("current_tracer", "function_graph", O_TRUNC);
        snprintf(variant, len, "function_graph:%s", func);
        break;
    case ENTRY_EVENT:
        add_event("ent", 0, kind, sizeof kind);
        snprintf(variant, len, "%s-entry:%s", kind, func);
        break;
    case EXIT_EVENT:
        add_event("ret", 1, kind, sizeof kind);
        snprintf(variant, len, "%s-exit:%s", kind, func);
        break;
    case KPROBE_MID:
        add_mid_probe(variant, len);
        break;
    default:
        die("bad mode %d", (int)m);
    }
}

static void mount_or_die(const char *src, const char *dst, const char *type)
{
    mkdir(dst, 0755);
    if (mount(src, dst, type, 0, NULL) < 0 && errno != EBUSY)
        die("mount %s on %s: %s", type, dst, strerror(errno));
}

int main(void)
{
    /*
     * The initramfs has a /dev/console node, so the kernel gave us one as
     * stdin/out/err. Should it not have, open it once devtmpfs is up.
     */
    int had_console = fcntl(1, F_GETFD) >= 0;
    mkdir("/dev", 0755);
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    if (!had_console) {
        int fd = open("/dev/console", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
            if (fd > 2)
                close(fd);
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /*
     * Kernel messages to the console only when they are emergencies: one
     * printed in the middle of a vsl line would garble it (`dmesg -n 1`).
     */
    klogctl(8 /* SYSLOG_ACTION_CONSOLE_LEVEL */, NULL, 1);
    mount_or_die("proc", "/proc", "proc");
    mount_or_die("sysfs", "/sys", "sysfs");
    mount_or_die("tracefs", "/sys/kernel/tracing", "tracefs");
    if (!exists("current_tracer"))
        die("no tracefs at %s (kernel without CONFIG_FTRACE?)", T);

    char release[128] = "?";
    FILE *f = fopen("/proc/sys/kernel/osrelease", "r");
    if (f) {
        if (fgets(release, sizeof release, f))
            release[strcspn(release, "\n")] = 0;
        fclose(f);
    }

    /*
     * The getppid handler, by the name ftrace knows it. __do_sys_* is the
     * body behind x86's __x64_sys_* stub; arm64's __arm64_sys_* has the body
     * itself.
     */
#if defined(__aarch64__)
    static const char *const fcands[] = {"__arm64_sys_getppid", "__do_sys_getppid", "sys_getppid", NULL};
    static const char *const ocands[] = {"__arm64_sys_getpgrp", "__do_sys_getpgrp", "__arm64_sys_sync", "sys_getpgrp", NULL};
#else
    static const char *const fcands[] = {"__do_sys_getppid", "__x64_sys_getppid", "sys_getppid", NULL};
    static const char *const ocands[] = {"__do_sys_getpgrp", "__x64_sys_getpgrp", "__x64_sys_sync", "sys_getpgrp", NULL};
#endif
    if (!pick_function(fcands, func, sizeof func))
        die("none of %s, %s, %s is in available_filter_functions", fcands[0], fcands[1], fcands[2]);
    if (!pick_function(ocands, other, sizeof other))
        die("no other function for the busy mode (%s, ...) in available_filter_functions", ocands[0]);
    info("kernel %s func %s other %s calls %d runs %d", release, func, other, CALLS, RUNS);
    if (strcmp(func, fcands[0]))
        info("fallback: %s is not traceable, tracing %s", fcands[0], func);

    reset();
    /* Boot leaves deferred work behind (it inflates the first loops): drain it. */
    for (int i = 0; i < WARMUP_LOOPS; i++)
        loop_ns();

    for (int m = 0; m < NMODES; m++) {
        char variant[300];
        uint64_t before = best_ns();
        must("trace", "", O_TRUNC);
        if (exists("instances/b"))
            must("instances/b/trace", "", O_TRUNC);
        setup((enum mode)m, variant, sizeof variant);
        uint64_t traced = best_ns();
        uint64_t events = buffer_events(".");
        if (exists("instances/b"))
            events += buffer_events("instances/b");
        reset();
        uint64_t after = best_ns();
        double added = ((double)traced - ((double)before + (double)after) / 2.0) / CALLS;
        printf("vsl %s %llu %llu %llu %.1f %s events=%llu\n", mode_names[m], (unsigned long long)before,
               (unsigned long long)traced, (unsigned long long)after, added, variant,
               (unsigned long long)events);
        fflush(stdout);
    }
    printf("vsl-done %s\n", release);
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}
