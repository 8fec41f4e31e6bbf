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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hc_callsite sites|flood N|dlopen LIB|fork|idle\n");
        return 2;
    }
    if (strcmp(argv[1], "idle") == 0) {
        printf("callsite idle: passed\n");
        return 0;
    }
    stream = test_context();
    copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (!copy) {
        fprintf(stderr, "SKIP: hcguard is not preloaded\n");
        return 77;
    }
    if (strcmp(argv[1], "sites") == 0)
        three_sites();
    else if (strcmp(argv[1], "flood") == 0 && argc == 3) {
        flood_site(atol(argv[2]));
        three_sites();
    } else if (strcmp(argv[1], "dlopen") == 0 && argc == 3) {
        if (from_library(argv[2]))
            return 1;
    } else if (strcmp(argv[1], "fork") == 0)
        fork_child(argc == 3 && strcmp(argv[2], "quiet") == 0);
    else if (strcmp(argv[1], "spawn") == 0)
        spawn_sites(argv[0]);
    else
        return 2;
    REQUIRE_OK(cuStreamSynchronize(stream));
    printf("callsite %s: %s\n", argv[1], check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
