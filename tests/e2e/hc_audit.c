/*
 * Host-callback misuse under hcguard, against the test driver (CI) or the
 * real driver (GPU machines).
 *
 *   hc_audit graph-record-changes  audit mode: a graph copy node reported at
 *                       its set, replayed with the record fixed, then bad
 *                       in a new way (each such replay a new error)
 *   hc_audit cuda-call  host functions (and a stream callback) that call
 *                       cuStreamQuery and cuMemcpyHtoD through pointers
 *                       from cuGetProcAddress and dlsym, and cuLaunchHostFunc
 *   hc_audit libc       memcpy as a CUhostFn (refused in guard mode); free
 *                       with a malloc'd pointer in audit mode (reported)
 *   hc_audit closure    a host function in anonymous executable memory
 *   hc_audit slow       a 50 ms host function on one stream delaying a host
 *                       copy on another
 *   hc_audit hang       a host function running past HCGUARD_HANG_S
 *
 * Exit 0 passed, 1 failed, 77 not applicable.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"


typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*query_fn)(CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);

static CUstream s1, s2;
static int guard;
static query_fn query;
static htod_fn htod;
static launch_fn launch_ptr;
static CUdeviceptr dev;

static void setup(void)
{
    s1 = test_context();
    REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuMemAlloc(&dev, 4096));
    guard = test_mode_is("guard");
    /* Entry points as the CUDA runtime and cuda.bindings get them. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    gpa_v2_fn gpa = h ? (gpa_v2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    CUdriverProcAddressQueryResult st;
    if (!gpa || gpa("cuStreamQuery", (void **)&query, 2000, 0, &st) != CUDA_SUCCESS || !query) {
        fprintf(stderr, "FAIL: no cuStreamQuery through cuGetProcAddress_v2\n");
        exit(1);
    }
    htod = (htod_fn)dlsym(h, "cuMemcpyHtoD_v2");
    launch_ptr = (launch_fn)dlsym(h, "cuLaunchHostFunc");
    if (!htod || !launch_ptr) {
        fprintf(stderr, "FAIL: dlsym of cuMemcpyHtoD_v2 / cuLaunchHostFunc\n");
        exit(1);
    }
}

/* ---- CUDA calls inside host functions ------------------------------------ */
static CUresult got_query[3], got_htod, got_launch, got_cb_query;

static void noop(void *p)
{
    (void)p;
}

static void calls_query(void *p)
{
    (void)p;
    for (int i = 0; i < 3; i++)
        got_query[i] = query(s2);
}

static void calls_htod(void *p)
{
    static unsigned char buf[64];
    (void)p;
    got_htod = htod(dev, buf, sizeof buf);
    got_launch = launch_ptr(s2, noop, NULL);
}

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *p)
{
    (void)s;
    (void)status;
    (void)p;
    got_cb_query = query(s2);
}

static void cuda_call(void)
{
    REQUIRE_OK(cuLaunchHostFunc(s1, calls_query, NULL));
    REQUIRE_OK(cuLaunchHostFunc(s1, calls_htod, NULL));
    REQUIRE_OK(cuStreamAddCallback(s1, stream_cb, NULL, 0));
    REQUIRE_OK(cuStreamSynchronize(s1));
    REQUIRE_OK(cuStreamSynchronize(s2));
    /* In guard mode hcguard refuses them before they reach the driver. In
     * audit mode they reach it, and what it answers is its own business
     * (the real driver lets cuStreamQuery through, for one). */
    if (!guard) {
        CHECK_MSG(query(s1) == CUDA_SUCCESS, "cuStreamQuery outside: not success");
        return;
    }
    for (int i = 0; i < 3; i++)
        CHECK_MSG(got_query[i] == CUDA_ERROR_NOT_PERMITTED, "cuStreamQuery in a host function: %d",
              (int)got_query[i]);
    CHECK_MSG(got_htod == CUDA_ERROR_NOT_PERMITTED, "cuMemcpyHtoD in a host function: %d",
          (int)got_htod);
    CHECK_MSG(got_launch == CUDA_ERROR_NOT_PERMITTED, "cuLaunchHostFunc in a host function: %d",
          (int)got_launch);
    CHECK_MSG(got_cb_query == CUDA_ERROR_NOT_PERMITTED, "cuStreamQuery in a stream callback: %d",
          (int)got_cb_query);
    /* Outside host functions the same pointers just work. */
    CHECK_MSG(query(s1) == CUDA_SUCCESS, "cuStreamQuery outside: not success");
}

/* ---- wrong functions ----------------------------------------------------- */
static void libc(void)
{
    if (guard) {
        CUresult r = cuLaunchHostFunc(s1, (CUhostFn)(void *)memcpy, NULL);
        CHECK_MSG(r == CUDA_ERROR_INVALID_VALUE, "memcpy as a host function: %d", (int)r);
        r = cuLaunchHostFunc(s1, (CUhostFn)(void *)memset, NULL);
        CHECK_MSG(r == CUDA_ERROR_INVALID_VALUE, "memset as a host function: %d", (int)r);
    } else {
        /* free has CUhostFn's shape, so it may run: reported, passed. */
        void *p = malloc(64);
        CUresult r = cuLaunchHostFunc(s1, (CUhostFn)(void *)free, p);
        CHECK_MSG(r == CUDA_SUCCESS, "free as a host function in audit mode: %d", (int)r);
    }
    REQUIRE_OK(cuStreamSynchronize(s1));
}

static void closure(void)
{
    unsigned char *code = test_closures(1);
    for (int i = 0; i < 3; i++)
        REQUIRE_OK(cuLaunchHostFunc(s1, (CUhostFn)(void *)code, NULL));
    REQUIRE_OK(cuStreamSynchronize(s1));
}

/* ---- slow and hung host functions ------------------------------------------ */
static void sleep_50ms(void *p)
{
    (void)p;
    test_sleep_ms(50);
}

static void sleep_500ms(void *p)
{
    (void)p;
    test_sleep_ms(500);
}

static void slow(void)
{
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    static unsigned char a[4096], b[4096];
    hcguard_copy_record rec = {(uintptr_t)a, (uintptr_t)b, sizeof a};
    memset(b, 7, sizeof b);
    REQUIRE_OK(cuLaunchHostFunc(s1, sleep_50ms, NULL));
    test_sleep_ms(1);
    REQUIRE_OK(cuLaunchHostFunc(s2, copy, &rec));
    REQUIRE_OK(cuStreamSynchronize(s1));
    REQUIRE_OK(cuStreamSynchronize(s2));
    CHECK_MSG(a[0] == 7, "the copy on the other stream did not run");
}

static void hang(void)
{
    REQUIRE_OK(cuLaunchHostFunc(s1, sleep_500ms, NULL));
    REQUIRE_OK(cuStreamSynchronize(s1));
    /* The program goes on. */
    REQUIRE_OK(cuLaunchHostFunc(s1, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(s1));
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

/* Audit mode: a graph copy node set with a bad record (reported once, at
 * the set) is replayed with the record fixed (copies), then bad in a new
 * way: each of those replays is an error of its own, counted and said. */
static void graph_record_changes(void)
{
    static char buf[8192], dst[4096];
    static hcguard_copy_record rec;
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    rec = (hcguard_copy_record){(uintptr_t)buf, (uintptr_t)buf + 8, 4096}; /* overlap */
    CUDA_HOST_NODE_PARAMS p = {test_copy_fn(NULL), &rec};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p)); /* audit: reported, taken */
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    REQUIRE_OK(cuGraphLaunch(e, s1)); /* skipped: the overlap reported */
    REQUIRE_OK(cuStreamSynchronize(s1));
    memset(buf, 7, 64);
    rec = (hcguard_copy_record){(uintptr_t)dst, (uintptr_t)buf, 4096};
    REQUIRE_OK(cuGraphLaunch(e, s1)); /* copies */
    REQUIRE_OK(cuStreamSynchronize(s1));
    CHECK_EQ(dst[63], 7);
    rec.dst = 0x10; /* never mapped */
    for (int i = 0; i < 5; i++) {
        REQUIRE_OK(cuGraphLaunch(e, s1));
        REQUIRE_OK(cuStreamSynchronize(s1));
    }
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("graph-record-changes", graph_record_changes),
    CHECK_SCENARIO("cuda-call", cuda_call),
    CHECK_SCENARIO("libc", libc),
    CHECK_SCENARIO("closure", closure),
    CHECK_SCENARIO("slow", slow),
    CHECK_SCENARIO("hang", hang),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_audit", "audit %s", CHECK_CASES(scenarios), argc, argv,
                               preloaded, teardown);
}
