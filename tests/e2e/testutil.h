/* What the end-to-end and GPU test programs share. */
#ifndef HCG_TESTUTIL_H
#define HCG_TESTUTIL_H

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Checks: CHECK_MSG, REQUIRE_OK (a driver call that must succeed, or the
 * test cannot go on) and the rest of tests/common/check.h. */
#include "../common/check.h"

#ifdef HCGUARD_H
#include <string.h>
/* The host-copy function programs use when hcguard is not preloaded: the
 * same copy, unchecked (the baseline). */
static inline void test_local_copy(void *p)
{
    const hcguard_copy_record *r = p;
    if (r && r->nbytes)
        memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}
#endif

#ifdef CUDA_VERSION
/* The primary context of device 0 made current, and a stream of its own;
 * exit 77 (skip) where there is no device. */
static inline CUstream test_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
        fprintf(stderr, "SKIP: no CUDA device\n");
        exit(77);
    }
    REQUIRE_OK(cuDeviceGet(&dev, 0));
    REQUIRE_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

/* A gate: test_gate_close launches on stream s, through launch
 * (cuLaunchHostFunc, or the entry point the test goes through), a host
 * function that holds the stream until test_gate_open, so that what the
 * test queues behind it waits, for the test to change it first. It gives
 * up after 10 s, so that a test that fails before opening it ends. */
static inline atomic_int *test_gate_state(void)
{
    static atomic_int open_;
    return &open_;
}

static inline void test_gate_wait(void *p)
{
    (void)p;
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < 10000 && !atomic_load(test_gate_state()); i++)
        nanosleep(&ts, NULL);
}

static inline CUresult test_gate_close(CUstream s, CUresult (*launch)(CUstream, CUhostFn, void *))
{
    atomic_store(test_gate_state(), 0);
    return launch(s, test_gate_wait, NULL);
}

static inline void test_gate_open(void)
{
    atomic_store(test_gate_state(), 1);
}
#endif

#ifdef HCGUARD_H
/* hcguard_get_stats, looked up at run time: the same programs run without
 * hcguard too. */
typedef int (*test_stats_fn)(hcguard_stats *, size_t);

/* hcguard's counters through get, or all zero where get is NULL. */
static inline hcguard_stats test_stats(test_stats_fn get)
{
    hcguard_stats s;
    memset(&s, 0, sizeof s);
    if (get)
        get(&s, sizeof s);
    return s;
}

/* Between two readings of the counters: host functions launched and run
 * are `all` each, copies launched and run `copies` each. */
static inline void test_check_counted(const hcguard_stats *before, const hcguard_stats *after,
                                      unsigned long long all, unsigned long long copies)
{
    CHECK_MSG(after->host_fns_launched - before->host_fns_launched == all &&
                  after->host_fns_ran - before->host_fns_ran == all,
              "launched %llu ran %llu, want %llu",
              (unsigned long long)(after->host_fns_launched - before->host_fns_launched),
              (unsigned long long)(after->host_fns_ran - before->host_fns_ran), all);
    CHECK_MSG(after->copies_launched - before->copies_launched == copies &&
                  after->copies_ran - before->copies_ran == copies,
              "copies launched %llu ran %llu, want %llu",
              (unsigned long long)(after->copies_launched - before->copies_launched),
              (unsigned long long)(after->copies_ran - before->copies_ran), copies);
}

#ifdef CUDA_VERSION
/* The host-copy function a program launches: hcguard's where it is
 * preloaded, else test_local_copy; and hcguard's hcguard_get_stats in *get
 * (NULL without hcguard): the same programs run without hcguard too. */
static inline CUhostFn test_copy_fn(test_stats_fn *get)
{
    CUhostFn fn = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (get)
        *get = (test_stats_fn)dlsym(RTLD_DEFAULT, "hcguard_get_stats");
    return fn ? fn : test_local_copy;
}

/* For a program that must run under hcguard: its hcguard_get_stats, and
 * its hcguard_host_copy in *copy where copy is not NULL; exits 1, said,
 * where hcguard is not preloaded. */
static inline test_stats_fn test_require_hcguard(CUhostFn *copy)
{
    test_stats_fn get = (test_stats_fn)dlsym(RTLD_DEFAULT, "hcguard_get_stats");
    void *fn = dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (!get || !fn) {
        fprintf(stderr, "FAIL: hcguard is not preloaded\n");
        exit(1);
    }
    if (copy)
        *copy = (CUhostFn)fn;
    return get;
}
#endif
#endif

/* Sleeps ms milliseconds, the whole of them: a signal does not cut it short. */
static inline void test_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Whether hcguard runs in mode (HCGUARD_MODE, guard where unset): what a
 * program expects of it depends on it. */
static inline int test_mode_is(const char *mode)
{
    const char *m = getenv("HCGUARD_MODE");
    return strcmp(m ? m : "guard", mode) == 0;
}

/* n bytes of fresh anonymous memory with protection prot; exits if there
 * is none (the test cannot go on). */
static inline void *test_map(size_t n, int prot)
{
    void *p = mmap(NULL, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

/* n functions that only return, 16 bytes apart, in anonymous memory made
 * executable: what a ctypes or cffi closure looks like to hcguard (code in
 * no file). Exits 77 (skip) on an architecture it has no code for, 1 if
 * the memory cannot be had. */
static inline unsigned char *test_closures(size_t n)
{
    size_t len = n * 16 + 4096;
    unsigned char *code = test_map(len, PROT_READ | PROT_WRITE);
    for (size_t i = 0; i < n; i++) {
#if defined(__x86_64__)
        code[i * 16] = 0xc3; /* ret */
#elif defined(__aarch64__)
        const uint32_t ret = 0xd65f03c0; /* ret */
        memcpy(code + i * 16, &ret, sizeof ret);
#else
        fprintf(stderr, "SKIP: no closure stand-in for this architecture\n");
        exit(77);
#endif
    }
    if (mprotect(code, len, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        exit(1);
    }
    __builtin___clear_cache((char *)code, (char *)code + len);
    return code;
}

/* An address no mapping can ever have: past the largest user address
 * space of the architecture (below the top byte that aarch64 may ignore). */
#if defined(__aarch64__)
#define NEVER_MAPPED ((uintptr_t)1 << 55)
#else
#define NEVER_MAPPED ((uintptr_t)1 << 56)
#endif

/* A watchdog for programs that fork: if the program is still running after
 * seconds, it says so and dumps, for itself and every process below it,
 * each thread's state, kernel wait channel, system call (a futex's address
 * is its first argument) and kernel stack where readable, and every
 * thread's backtrace where gdb is installed (15 s at most a process: gdb
 * can take minutes on a sanitizer's build; HC_WATCHDOG_GDB=0: none); then
 * it kills them, says how many, and exits 124. A hang is then never
 * silent, nor left to the test's timeout. Only for a deadline far beyond
 * the program's normal time: a hang detector, not a timing check. (SIGALRM: the program must not use it; a fork child
 * does not inherit the alarm.) */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static const char test_watchdog_script[] =
    "dump() {\n"
    "  echo \"== process $1 ($(tr '\\0' ' ' < /proc/$1/cmdline 2>/dev/null))\"\n"
    "  for t in /proc/$1/task/*; do\n"
    "    echo \"  thread ${t##*/} $(cat $t/comm 2>/dev/null): state $(cut -d' ' -f3 $t/stat 2>/dev/null),"
    " wchan $(cat $t/wchan 2>/dev/null), syscall $(cat $t/syscall 2>/dev/null)\"\n"
    "    sed 's/^/      /' $t/stack 2>/dev/null\n"
    "  done\n"
    "  if [ \"$HC_WATCHDOG_GDB\" != 0 ] && command -v gdb >/dev/null 2>&1; then\n"
    "    timeout -s KILL 15 gdb -p $1 -batch -ex 'thread apply all bt' 2>&1 |\n"
    "      grep -E '^(Thread|#)' | sed 's/^/    /'\n"
    "  fi\n"
    "  for s in /proc/[0-9]*/stat; do\n"
    "    set -- $(cat $s 2>/dev/null) x x x x\n"
    "    [ \"$4\" = \"$me\" ] && [ \"$1\" != \"$$\" ] && kids=\"$kids $1\"\n"
    "  done\n"
    "}\n"
    "root=$1; todo=$1; seen=''\n"
    "while set -- $todo; [ $# -gt 0 ]; do\n"
    "  me=$1; shift; todo=\"$*\"; kids=''\n"
    "  dump $me; todo=\"$todo $kids\"; seen=\"$seen $me\"\n"
    "done\n"
    "n=0; for p in $seen; do [ \"$p\" != \"$root\" ] && kill -9 $p 2>/dev/null && n=$((n + 1)); done\n"
    "echo \"watchdog: processes below it killed: $n\"\n"
    "exit 0\n";

static void test_watchdog_fire(int sig)
{
    (void)sig;
    static const char msg[] = "watchdog: the program has not finished: it hangs; what each "
                              "thread waits on:\n";
    char pid[24];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid()); /* snprintf of an int: no lock */
    if (write(2, msg, sizeof msg - 1) < 0 || n <= 0)
        _exit(124);
    pid_t c = fork();
    if (c == 0) {
        execl("/bin/sh", "sh", "-c", test_watchdog_script, "self", pid, (char *)NULL);
        _exit(127);
    }
    if (c > 0)
        waitpid(c, NULL, 0);
    _exit(124);
}

static inline void test_watchdog(unsigned seconds)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = test_watchdog_fire;
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
}

#endif
