/* What the end-to-end and GPU test programs share. */
#ifndef HCG_TESTUTIL_H
#define HCG_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
#endif

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
 * it kills them and exits
 * 124. A hang is then never silent, nor left to the test's timeout. Only
 * for a deadline far beyond the program's normal time: a hang detector,
 * not a timing check. (SIGALRM: the program must not use it; a fork child
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
    "while [ -n \"$todo\" ]; do\n"
    "  set -- $todo; me=$1; shift; todo=\"$*\"; kids=''\n"
    "  dump $me; todo=\"$todo $kids\"; seen=\"$seen $me\"\n"
    "done\n"
    "for p in $seen; do [ \"$p\" != \"$root\" ] && kill -9 $p 2>/dev/null; done\n"
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
