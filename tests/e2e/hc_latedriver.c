/*
 * The driver arrives late: looking up a driver function, one hcguard wraps
 * (cuLaunchHostFunc) or one it only exports (cuInit, cuStreamQuery), finds
 * nothing before any libcuda is loaded, as without hcguard, and a working
 * entry point of hcguard's after; once the program loads the driver,
 * hcguard serves it as usual.
 *   hc_latedriver PATH_TO_LIBCUDA
 * Not linked with libcuda. Exit 0 passed, 1 failed.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

#include "hcguard.h"
#include "testutil.h"

typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);
typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*dev_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*setctx_fn)(CUcontext);
typedef CUresult (*sync_fn)(CUstream);
typedef CUresult (*query_fn)(CUstream);

static atomic_int ran;
static void noop(void *p)
{
    (void)p;
    atomic_fetch_add(&ran, 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hc_latedriver PATH_TO_LIBCUDA\n");
        return 2;
    }
    test_stats_fn stats = (test_stats_fn)dlsym(RTLD_DEFAULT, "hcguard_get_stats");
    CHECK_MSG(stats != NULL, "hcguard is not preloaded");
    if (!stats)
        return 1;
    CHECK_MSG(dlsym(RTLD_DEFAULT, "cuInit") == NULL, "a driver is loaded already");
    CHECK_MSG(dlsym(RTLD_DEFAULT, "cuLaunchHostFunc") == NULL,
              "hcguard's wrapper cuLaunchHostFunc found with no driver");
    CHECK_MSG(dlsym(RTLD_DEFAULT, "cuStreamQuery") == NULL, "cuStreamQuery found with no driver");
    CHECK_MSG(dlerror() != NULL, "a failed look-up left no dlerror message");
    CHECK_MSG(dlvsym(RTLD_DEFAULT, "cuStreamQuery", "libcuda.so.1") == NULL,
          "cuStreamQuery found by dlvsym with no driver");

    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    CHECK_MSG(h != NULL, "dlopen %s: %s", argv[1], dlerror());
    if (!h)
        return 1;
    CUdevice dev;
    CUcontext ctx;
    REQUIRE_OK(((init_fn)dlsym(h, "cuInit"))(0));
    REQUIRE_OK(((dev_fn)dlsym(h, "cuDeviceGet"))(&dev, 0));
    REQUIRE_OK(((retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain"))(&ctx, dev));
    REQUIRE_OK(((setctx_fn)dlsym(h, "cuCtxSetCurrent"))(ctx));
    /* Now the wrapper is the answer, by name as through the handle. */
    launch_fn launch = (launch_fn)dlsym(RTLD_DEFAULT, "cuLaunchHostFunc");
    CHECK_MSG(launch && launch == (launch_fn)dlsym(h, "cuLaunchHostFunc"),
              "cuLaunchHostFunc once the driver is loaded: %p", (void *)launch);
    if (!launch)
        return 1;
    CHECK_MSG(launch(NULL, noop, NULL) == CUDA_SUCCESS, "launch once the driver is loaded");
    REQUIRE_OK(((sync_fn)dlsym(h, "cuStreamSynchronize"))(NULL));
    /* Now hcguard's export is the answer: a thunk of the driver's. */
    query_fn query = (query_fn)dlsym(RTLD_DEFAULT, "cuStreamQuery");
    Dl_info info;
    CHECK_MSG(query && dladdr((void *)query, &info) && strstr(info.dli_fname, "libhcguard"),
          "cuStreamQuery once the driver is loaded: %p", (void *)query);
    CHECK_MSG(query && query(NULL) == CUDA_SUCCESS, "cuStreamQuery through the export");
    hcguard_stats s;
    stats(&s, sizeof s);
    CHECK_MSG(atomic_load(&ran) == 1 && s.host_fns_ran == 1, "ran %d, hcguard saw %llu",
          atomic_load(&ran), (unsigned long long)s.host_fns_ran);
    printf("late driver: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
