/*
 * Call sites, merged findings and the message prefix under hcguard, on the
 * test driver. Run by tests/e2e/check_callsite.py, which checks stderr.
 *
 *   hc_callsite sites     3 bad records from 3 call sites of one static
 *                         function (named from the executable's .symtab)
 *   hc_callsite flood N   N identical bad records from one call site, then
 *                         the 3 of "sites"
 *   hc_callsite dlopen LIB  a bad record launched by a static function of
 *                         LIB, loaded with dlopen
 *   hc_callsite fork [quiet]  a bad record in the parent, three in a fork
 *                         child (none: quiet), one more in the parent
 *   hc_callsite spawn     a bad record, then "hc_callsite sites" started
 *                         with posix_spawn, then a bad record again
 *   hc_callsite idle      no host function at all
 *
 * Exit 0 passed, 1 failed, 77 not applicable.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

static CUstream stream;
static CUhostFn copy;
static unsigned char buf[64];
static hcguard_copy_record bad = {(uintptr_t)buf, (uintptr_t)(buf + 8), 32}; /* overlap */

static inline __attribute__((always_inline)) void launch_bad(void)
{
    CHECK_MSG(cuLaunchHostFunc(stream, copy, &bad) == CUDA_ERROR_INVALID_VALUE,
              "a bad record was not refused");
}

/* Three call sites in one function: three groups. Not inlined, so that
 * the caller is this function, known only from the .symtab. */
static __attribute__((noinline)) void three_sites(void)
{
    CHECK(cuLaunchHostFunc(stream, copy, &bad) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuLaunchHostFunc(stream, copy, &bad) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuLaunchHostFunc(stream, copy, &bad) == CUDA_ERROR_INVALID_VALUE);
}

static __attribute__((noinline)) void flood_site(long n)
{
    for (long i = 0; i < n; i++)
        launch_bad();
}

static int from_library(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    int (*fn)(CUstream, CUhostFn, void *) =
        (int (*)(CUstream, CUhostFn, void *))dlsym(h, "hc_site_lib_launch");
    CHECK_MSG(fn != NULL, "hc_site_lib_launch not found");
    if (fn)
        CHECK(fn(stream, copy, &bad) == CUDA_ERROR_INVALID_VALUE);
    return 0;
}

/* quiet: the child launches nothing (ThreadSanitizer cannot follow the
 * collector thread a busy child starts after a multi-threaded fork). */
static void fork_child(int quiet)
{
    launch_bad();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!quiet)
            three_sites();
        exit(check_failures ? 1 : 0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    launch_bad();
}

extern char **environ;

static void spawn_sites(const char *self)
{
    launch_bad();
    fflush(NULL);
    pid_t pid;
    char *argv[] = {(char *)self, (char *)"sites", NULL};
    CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    launch_bad();
}

static const char *self; /* argv[0]: spawn runs this program again */

/* Every scenario but idle: the driver's context and hcguard's copy. */
static void begin(void)
{
    stream = test_context();
    copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (!copy) {
        fprintf(stderr, "SKIP: hcguard is not preloaded\n");
        exit(77);
    }
}

/* Not inlined, and not a tail call: the frame under three_sites is this
 * one (e2e_callsite_backtrace expects it). */
static __attribute__((noinline)) void s_sites(void)
{
    begin();
    three_sites();
    __asm__ volatile("" ::: "memory");
}

static void s_flood(int argc, char **argv)
{
    (void)argc;
    begin();
    flood_site(atol(argv[0]));
    three_sites();
}

static void s_dlopen(int argc, char **argv)
{
    (void)argc;
    begin();
    if (from_library(argv[0]))
        exit(1);
}

static void s_fork(int argc, char **argv)
{
    begin();
    fork_child(argc == 1 && strcmp(argv[0], "quiet") == 0);
}

static void s_spawn(void)
{
    begin();
    spawn_sites(self);
}

static void s_idle(void)
{
}

static void teardown(void)
{
    if (stream)
        REQUIRE_OK(cuStreamSynchronize(stream));
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("sites", s_sites),
    CHECK_SCENARIO_ARGS("flood", s_flood, 1, 1, "N"),
    CHECK_SCENARIO_ARGS("dlopen", s_dlopen, 1, 1, "LIB"),
    CHECK_SCENARIO_ARGS("fork", s_fork, 0, 1, "[quiet]"),
    CHECK_SCENARIO("spawn", s_spawn),
    CHECK_SCENARIO("idle", s_idle),
};

int main(int argc, char **argv)
{
    self = argv[0];
    return check_scenario_main("hc_callsite", "callsite %s", CHECK_CASES(scenarios), argc, argv,
                               NULL, teardown);
}
