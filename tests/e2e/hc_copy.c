/*
 * Copies split across hcguard's copy threads (HCGUARD_COPY_THREADS), end to
 * end through cuLaunchHostFunc(hcguard_host_copy, record):
 *
 *   hc_copy split WORKERS  copies of 0 bytes, 1 byte and 4095 bytes to
 *                          16 MiB, odd alignments, on two streams at once
 *                          (one finds the pool busy and copies whole),
 *                          exact contents and untouched guard bytes, each
 *                          copy counted once; then WORKERS copy threads
 *                          exist (0 when copies are not split)
 *   hc_copy fault          a PROT_NONE page in every part of an 8 MiB
 *                          source, made after enqueue: skipped once,
 *                          copy-faulted once, the process goes on, and the
 *                          next copy is made
 *   hc_copy fork W [quiet] fork while split copies run on another thread:
 *                          each child makes its own copy threads and copies
 *                          (quiet: the children start no thread, for
 *                          ThreadSanitizer, which cannot follow a thread
 *                          started after a multi-threaded fork)
 *   hc_copy exec           an exec that fails stops the copy threads (made
 *                          again at the next copy); one that succeeds runs
 *                          this program again ("exec-child"), which copies
 *
 * Exit 0: passed.
 */
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

static CUstream stream;
static CUhostFn copy_fn;
static test_stats_fn get_stats;
static size_t pg;

static hcguard_stats stats(void)
{
    return test_stats(get_stats);
}

/* hcguard's copy threads in this process, by name. */
static int copy_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], comm[32] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f) && strncmp(comm, "hcguard-copy", 12) == 0)
            n++;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 13) + 7);
}

/* One copy of n bytes, its record, source and destination (with guard
 * bytes before and after), misaligned by mis. */
#define GUARD 256
typedef struct one_copy {
    hcguard_copy_record rec;
    unsigned char *src, *dst;
    size_t n, mis;
} one_copy;

static void prepare(one_copy *c, size_t n, size_t mis)
{
    c->n = n;
    c->mis = mis;
    c->src = malloc(n + mis + 1);
    c->dst = malloc(n + mis + 2 * GUARD);
    REQUIRE(c->src && c->dst);
    for (size_t i = 0; i < n; i++)
        c->src[mis + i] = pattern(i);
    memset(c->dst, 0xee, n + mis + 2 * GUARD);
    c->rec = (hcguard_copy_record){(uintptr_t)(c->dst + GUARD + mis), (uintptr_t)(c->src + mis), n};
}

/* Exact contents, guard bytes untouched; frees c. */
static int verify(one_copy *c)
{
    const unsigned char *d = c->dst + GUARD + c->mis;
    int ok = 1;
    for (size_t i = 0; ok && i < c->n; i++)
        ok = d[i] == pattern(i);
    for (size_t i = 0; ok && i < GUARD + c->mis; i++)
        ok = c->dst[i] == 0xee;
    for (size_t i = 0; ok && i < GUARD; i++)
        ok = d[c->n + i] == 0xee;
    free(c->src);
    free(c->dst);
    return ok;
}

/* A copy launched on s, waited for, verified. */
static int copy_on(CUstream s, size_t n, size_t mis)
{
    one_copy c;
    prepare(&c, n, mis);
    REQUIRE_OK(cuLaunchHostFunc(s, copy_fn, &c.rec));
    REQUIRE_OK(cuStreamSynchronize(s));
    return verify(&c);
}

static void setup(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    stream = test_context();
    copy_fn = test_copy_fn(&get_stats);
}

/* ---- split --------------------------------------------------------------- */
static const size_t sizes[] = {0, 1, 4095, 2 * MIB - 1, 2 * MIB + 1, 5 * MIB + 13, 16 * MIB};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

static void split(int want_workers)
{
    CUstream other;
    REQUIRE_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    one_copy a[N_SIZES], b[N_SIZES];
    hcguard_stats before = stats();
    uint64_t bytes = 0;
    for (size_t i = 0; i < N_SIZES; i++) {
        prepare(&a[i], sizes[i], i % 3);
        prepare(&b[i], sizes[N_SIZES - 1 - i], (i * 5) % 7);
        REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn, &a[i].rec));
        REQUIRE_OK(cuLaunchHostFunc(other, copy_fn, &b[i].rec));
        bytes += 2 * sizes[i];
    }
    REQUIRE_OK(cuStreamSynchronize(stream));
    REQUIRE_OK(cuStreamSynchronize(other));
    for (size_t i = 0; i < N_SIZES; i++) {
        CHECK_MSG(verify(&a[i]), "stream 1: copy of %zu bytes", sizes[i]);
        CHECK_MSG(verify(&b[i]), "stream 2: copy of %zu bytes", sizes[N_SIZES - 1 - i]);
    }
    /* One more, alone: the pool is free, so it is split if splitting is on. */
    CHECK_MSG(copy_on(stream, 16 * MIB, 0), "copy of 16 MiB alone");
    bytes += 16 * MIB;
    if (get_stats) {
        hcguard_stats s = stats();
        CHECK_EQ(s.copies_ran - before.copies_ran, 2 * N_SIZES + 1);
        CHECK_EQ(s.copies_launched - before.copies_launched, 2 * N_SIZES + 1);
        CHECK_EQ(s.skipped - before.skipped, 0);
        CHECK_EQ(s.bytes_copied - before.bytes_copied, bytes);
        CHECK_EQ(copy_threads(), want_workers);
    }
    printf("split: %d copy threads\n", copy_threads());
    cuStreamDestroy(other);
}

/* ---- fault ----------------------------------------------------------------- */
static void fault(void)
{
    size_t n = 8 * MIB;
    unsigned char *src = test_map(n, PROT_READ | PROT_WRITE);
    unsigned char *dst = test_map(n, PROT_READ | PROT_WRITE);
    memset(src, 4, n);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, n};
    hcguard_stats before = stats();
    REQUIRE_OK(test_gate_close(stream, cuLaunchHostFunc));
    REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn, &rec));
    /* A hole in every 2 MiB, whichever thread takes which part; past libc,
     * as glibc's free would unmap, so that only the copy can notice. */
    for (size_t at = MIB; at < n; at += 2 * MIB)
        CHECK(syscall(SYS_mprotect, src + at, pg, PROT_NONE) == 0);
    test_gate_open();
    REQUIRE_OK(cuStreamSynchronize(stream));
    if (get_stats) {
        hcguard_stats s = stats();
        CHECK_EQ(s.skipped - before.skipped, 1);
        CHECK_EQ(s.copies_ran - before.copies_ran, 0);
    }
    for (size_t at = MIB; at < n; at += 2 * MIB)
        CHECK(syscall(SYS_mprotect, src + at, pg, PROT_READ | PROT_WRITE) == 0);
    CHECK_MSG(copy_on(stream, 8 * MIB + 3, 1), "the copy after the fault");
    printf("survived: a fault in every part of a split copy\n");
    munmap(src, n);
    munmap(dst, n);
}

/* ---- fork ---------------------------------------------------------------- */
static atomic_int stop_copying;
static CUcontext ctx;

static void *copying(void *v)
{
    CUstream s;
    int *ok = v;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    while (!atomic_load(&stop_copying))
        *ok &= copy_on(s, 6 * MIB, 3);
    cuStreamDestroy(s);
    return NULL;
}

static int quiet_children;

static void fork_child(int want_workers)
{
    int ok = copy_threads() == 0;
    if (quiet_children)
        _exit(ok ? 0 : 1);
    ok = ok && copy_on(stream, 5 * MIB, 1) && copy_on(stream, 3 * MIB + 1, 2);
    ok = ok && copy_threads() == want_workers;
    fflush(stdout);
    _exit(ok ? 0 : 1);
}

static void do_fork(int want_workers)
{
    int ok = 1;
    pthread_t t;
    CHECK(copy_on(stream, 4 * MIB, 0)); /* the pool made */
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    REQUIRE(pthread_create(&t, NULL, copying, &ok) == 0);
    for (int i = 0; i < 5; i++) {
        struct timespec ts = {0, 3000000};
        nanosleep(&ts, NULL);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            fork_child(want_workers);
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", i, st);
    }
    atomic_store(&stop_copying, 1);
    pthread_join(t, NULL);
    CHECK(ok);
    printf("fork: 5 children copied with their own copy threads\n");
}

/* ---- exec ----------------------------------------------------------------- */
static void do_exec(const char *self, int want_workers)
{
    CHECK(copy_on(stream, 4 * MIB, 2));
    CHECK_EQ(copy_threads(), want_workers);
    char *const bad_argv[] = {"nonexistent", NULL};
    CHECK(execv("/nonexistent/hcguard-test", bad_argv) == -1);
    CHECK_EQ(copy_threads(), 0); /* stopped before the exec */
    CHECK(copy_on(stream, 4 * MIB, 1));
    CHECK_EQ(copy_threads(), want_workers); /* made again */
    char want[16];
    snprintf(want, sizeof want, "%d", want_workers);
    char *const argv[] = {(char *)self, "exec-child", want, NULL};
    fflush(NULL);
    execv(self, argv);
    CHECK_MSG(0, "exec of %s failed", self);
}

static const char *self; /* argv[0]: exec runs this program again */

static void s_split(int argc, char **argv)
{
    (void)argc;
    split(atoi(argv[0]));
}

static void s_fork(int argc, char **argv)
{
    quiet_children = argc > 1 && strcmp(argv[1], "quiet") == 0;
    do_fork(atoi(argv[0]));
}

static void s_exec(int argc, char **argv)
{
    (void)argc;
    do_exec(self, atoi(argv[0]));
}

static void s_exec_child(int argc, char **argv)
{
    (void)argc;
    CHECK(copy_on(stream, 6 * MIB, 0) && copy_threads() == atoi(argv[0]));
}

static void teardown(void)
{
    cuStreamDestroy(stream);
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO_ARGS("split", s_split, 1, 1, "WORKERS"),
    CHECK_SCENARIO("fault", fault),
    CHECK_SCENARIO_ARGS("fork", s_fork, 1, 2, "WORKERS [quiet]"),
    CHECK_SCENARIO_ARGS("exec", s_exec, 1, 1, "WORKERS"),
    CHECK_SCENARIO_ARGS("exec-child", s_exec_child, 1, 1, "WORKERS"),
};

int main(int argc, char **argv)
{
    self = argv[0];
    return check_scenario_main("hc_copy", "copy %s", CHECK_CASES(scenarios), argc, argv, setup,
                               teardown);
}
