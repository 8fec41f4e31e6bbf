/*
 * A copy function's library unloaded, and another library's ordinary
 * host function loaded at the same address: hcguard must not take the
 * new function for the copy function it once found there (it would refuse
 * its launches as bad records, call it with hcguard's snapshot, or copy
 * memory in its place).
 *
 *   hc_dlreuse copy-fn LIBCOPY LIBMINE    (HCGUARD_COPY_FN=hc_fn_copy)
 *   hc_dlreuse register LIBCOPY LIBMINE   hc_fn_copy registered
 *   hc_dlreuse closure LIBCOPY LIBMINE    a copy function in anonymous
 *              memory (a closure, JIT code) registered, then a library
 *              unloaded: the closure, in no object, stays registered
 * LIBCOPY and LIBMINE: reuse_lib.c built with and without REUSE_COPY.
 * Prints "dlreuse MODE: passed"; exit 0; 77 (skip) if the second library
 * is not loaded where the first was.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hcguard.h"
#include "testutil.h"

typedef struct reuse_data {
    uintptr_t a, b;
    size_t n;
} reuse_data;

static CUstream stream;
static const char *lib_copy, *lib_mine;

static void *must_dlopen(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    return h;
}

/* The copy function run as one, then its library unloaded: its address. */
static void *copy_then_unload(int do_register)
{
    void *h = must_dlopen(lib_copy);
    void *fn = dlsym(h, "hc_fn_copy");
    REQUIRE(fn != NULL);
    if (do_register) {
        int (*reg)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "hcguard_register_copy_fn");
        REQUIRE(reg != NULL);
        CHECK(reg(fn) == 0);
    }
    char src[32] = "copied", dst[32] = {0};
    reuse_data rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    CHECK(cuLaunchHostFunc(stream, (CUhostFn)fn, &rec) == CUDA_SUCCESS);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(strcmp(dst, "copied") == 0, "the copy function did not copy");
    CHECK(dlclose(h) == 0);
    return fn;
}

/* The ordinary function now at that address: called with the program's
 * own pointer each time, whatever its data looks like. */
static void ordinary_there(void *old)
{
    void *h = must_dlopen(lib_mine);
    void *fn = dlsym(h, "hc_fn_mine");
    int *calls = dlsym(h, "hc_reuse_calls");
    void **seen = dlsym(h, "hc_reuse_seen");
    REQUIRE(fn != NULL && calls != NULL && seen != NULL);
    if (fn != old) {
        printf("SKIP: %s loaded at %p, not where %s was (%p)\n", lib_mine, fn, lib_copy, old);
        exit(77);
    }
    reuse_data mine = {1, 2, 3}; /* no record: 1 and 2 are no addresses */
    CUresult r = cuLaunchHostFunc(stream, (CUhostFn)fn, &mine);
    CHECK_MSG(r == CUDA_SUCCESS, "its own data refused (%d)", (int)r);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(*calls == 1 && *seen == (void *)&mine && mine.n == 4,
              "not called with the program's pointer: %d calls, seen %p (want %p), n %zu",
              *calls, *seen, (void *)&mine, mine.n);
    char x[16] = "xxxx", y[16] = "yyyy";
    reuse_data like = {(uintptr_t)x, (uintptr_t)y, 8}; /* a good record's look */
    r = cuLaunchHostFunc(stream, (CUhostFn)fn, &like);
    CHECK(r == CUDA_SUCCESS);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(*calls == 2 && *seen == (void *)&like && like.n == 9,
              "record-like data: %d calls, seen %p (want %p), n %zu", *calls, *seen,
              (void *)&like, like.n);
    CHECK_MSG(strcmp(x, "xxxx") == 0, "something copied in the function's place: x is %s", x);
    dlclose(h);
}

static void scenario(int do_register)
{
    stream = test_context();
    ordinary_there(copy_then_unload(do_register));
}

/* A registered copy, launched: copied by hcguard (the closure itself only
 * returns); a bad record refused. */
static void registered_copies(CUhostFn fn, const char *when)
{
    char src[32] = "copied", dst[32] = {0};
    reuse_data rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    CHECK_MSG(cuLaunchHostFunc(stream, fn, &rec) == CUDA_SUCCESS, "%s: refused", when);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(strcmp(dst, "copied") == 0, "%s: not copied by hcguard (the closure ran)", when);
    rec.b = 0x10; /* a bad source */
    CHECK_MSG(cuLaunchHostFunc(stream, fn, &rec) == CUDA_ERROR_INVALID_VALUE,
              "%s: a bad record not refused", when);
}

static void scenario_closure(void)
{
    stream = test_context();
    CUhostFn fn = (CUhostFn)(void *)test_closures(1);
    int (*reg)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "hcguard_register_copy_fn");
    REQUIRE(reg != NULL);
    CHECK(reg((void *)fn) == 0);
    registered_copies(fn, "registered");
    void *h = must_dlopen(lib_copy);
    CHECK(dlclose(h) == 0);
    registered_copies(fn, "after a library was unloaded");
}

static void scenario_copy_fn(void)
{
    scenario(0);
}

static void scenario_register(void)
{
    scenario(1);
}

int main(int argc, char **argv)
{
    static const check_scenario scenarios[] = {
        CHECK_SCENARIO("copy-fn", scenario_copy_fn),
        CHECK_SCENARIO("register", scenario_register),
        CHECK_SCENARIO("closure", scenario_closure),
    };
    if (argc != 4) {
        fprintf(stderr, "usage: hc_dlreuse copy-fn|register|closure LIBCOPY LIBMINE\n");
        return 2;
    }
    lib_copy = argv[2];
    lib_mine = argv[3];
    return check_scenario_main("hc_dlreuse", "dlreuse %s", scenarios,
                               sizeof scenarios / sizeof scenarios[0], 2, argv, NULL, NULL);
}
