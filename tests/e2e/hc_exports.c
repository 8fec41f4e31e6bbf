/*
 * Driver functions hcguard does not wrap, called by their names from a
 * program linked with -lcuda: they reach hcguard's exports, so a call made
 * inside a host function is caught like any other.
 *
 *   hc_exports cuda-call  host functions (and a stream callback) that call
 *                         cuStreamQuery, cuCtxGetCurrent, cuMemcpyHtoD and
 *                         cuDriverGetVersion directly; then the same calls
 *                         outside host functions
 *   hc_exports not-found  cuModuleLoad, which hcguard exports and the test
 *                         driver lacks: CUDA_ERROR_NOT_FOUND, not a crash
 *
 * HCGUARD_MODE says what to expect (guard: refused; audit and off: passed
 * to the driver). Exit 0 passed, 1 failed, 77 not applicable.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcguard.h"
#include "testutil.h"

/* The test driver lacks it: the link must not need it. */
#pragma weak cuModuleLoad

static CUstream s1, s2;
static int guard;
static CUdeviceptr dev;

static void setup(void)
{
    s1 = test_context();
    REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuMemAlloc(&dev, 4096));
    guard = test_mode_is("guard");
}

/* ---- calls inside host functions ----------------------------------------- */
static CUresult got_query[3], got_ctx, got_htod, got_version, got_cb_query;
static CUcontext seen_ctx = (CUcontext)1;
static int version;

static void calls_query(void *p)
{
    (void)p;
    for (int i = 0; i < 3; i++)
        got_query[i] = cuStreamQuery(s2);
}

/* The first calls of cuCtxGetCurrent and cuDriverGetVersion of the process
 * are made here: an export resolved from inside a host function. */
static void calls_misc(void *p)
{
    static unsigned char buf[64];
    (void)p;
    got_version = cuDriverGetVersion(&version);
    got_ctx = cuCtxGetCurrent(&seen_ctx);
    got_htod = cuMemcpyHtoD(dev, buf, sizeof buf);
}

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *p)
{
    (void)s;
    (void)status;
    (void)p;
    got_cb_query = cuStreamQuery(s2);
}

static void check_inside(void)
{
    if (!guard) {
        /* The driver answered. Whether it lets the others through is its
         * own business; the version it always gives. */
        CHECK_MSG(got_version == CUDA_SUCCESS && version > 0,
              "cuDriverGetVersion in a host function: %d, version %d", (int)got_version, version);
        return;
    }
    for (int i = 0; i < 3; i++)
        CHECK_MSG(got_query[i] == CUDA_ERROR_NOT_PERMITTED, "cuStreamQuery in a host function: %d",
              (int)got_query[i]);
    CHECK_MSG(got_version == CUDA_ERROR_NOT_PERMITTED && version == 0,
          "cuDriverGetVersion in a host function: %d, version %d", (int)got_version, version);
    CHECK_MSG(got_ctx == CUDA_ERROR_NOT_PERMITTED && seen_ctx == (CUcontext)1,
          "cuCtxGetCurrent in a host function: %d", (int)got_ctx);
    CHECK_MSG(got_htod == CUDA_ERROR_NOT_PERMITTED, "cuMemcpyHtoD in a host function: %d",
          (int)got_htod);
    CHECK_MSG(got_cb_query == CUDA_ERROR_NOT_PERMITTED, "cuStreamQuery in a stream callback: %d",
          (int)got_cb_query);
}

/* Outside host functions the same calls just work. */
static void check_outside(void)
{
    unsigned char in[64], out[64];
    CUcontext c = NULL;
    int v = 0;
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    CHECK_MSG(cuStreamQuery(s1) == CUDA_SUCCESS, "cuStreamQuery outside: not success");
    CHECK_MSG(cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL, "cuCtxGetCurrent outside");
    CHECK_MSG(cuDriverGetVersion(&v) == CUDA_SUCCESS && v > 0, "cuDriverGetVersion outside");
    CHECK_MSG(cuMemcpyHtoD(dev, in, sizeof in) == CUDA_SUCCESS, "cuMemcpyHtoD outside");
    CHECK_MSG(cuMemcpyDtoH(out, dev, sizeof out) == CUDA_SUCCESS, "cuMemcpyDtoH outside");
    CHECK_MSG(memcmp(in, out, sizeof in) == 0, "the copies outside lost the data");
}

static void cuda_call(void)
{
    REQUIRE_OK(cuLaunchHostFunc(s1, calls_query, NULL));
    REQUIRE_OK(cuLaunchHostFunc(s1, calls_misc, NULL));
    REQUIRE_OK(cuStreamAddCallback(s1, stream_cb, NULL, 0));
    REQUIRE_OK(cuStreamSynchronize(s1));
    REQUIRE_OK(cuStreamSynchronize(s2));
    check_inside();
    check_outside();
}

/* ---- an entry point the driver lacks --------------------------------------- */
static CUresult got_load_inside;

static void loads_module(void *p)
{
    CUmodule m;
    (void)p;
    got_load_inside = cuModuleLoad(&m, "/nonexistent.cubin");
}

static void not_found(void)
{
    if (!cuModuleLoad) {
        fprintf(stderr, "SKIP: cuModuleLoad is not exported here\n");
        exit(77);
    }
    /* The first call is made inside a host function. */
    REQUIRE_OK(cuLaunchHostFunc(s1, loads_module, NULL));
    REQUIRE_OK(cuStreamSynchronize(s1));
    CUresult want = guard ? CUDA_ERROR_NOT_PERMITTED : CUDA_ERROR_NOT_FOUND;
    CHECK_MSG(got_load_inside == want, "cuModuleLoad in a host function: %d, want %d",
          (int)got_load_inside, (int)want);
    for (int i = 0; i < 2; i++) {
        CUmodule m;
        CUresult r = cuModuleLoad(&m, "/nonexistent.cubin");
        CHECK_MSG(r == CUDA_ERROR_NOT_FOUND, "cuModuleLoad outside (call %d): %d", i + 1, (int)r);
    }
    /* The driver still works. */
    CHECK_MSG(cuStreamQuery(s1) == CUDA_SUCCESS, "cuStreamQuery after a missing entry point");
}

static void preloaded(void)
{
    test_require_hcguard(NULL);
    setup();
}

static void teardown(void)
{
    cuMemFree(dev);
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("cuda-call", cuda_call),
    CHECK_SCENARIO("not-found", not_found),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_exports", "exports %s", CHECK_CASES(scenarios), argc, argv,
                               preloaded, teardown);
}
