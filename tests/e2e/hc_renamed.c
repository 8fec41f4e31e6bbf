/*
 * The driver dlopen'd under another file name (a vendor's copy, a symlink
 * of another name: its soname stays libcuda.so.1), RTLD_LOCAL, and its
 * entry points taken with dlsym on its handle: hcguard must still hand out
 * its wrapper, and refuse a bad copy record.
 *
 *   hc_renamed LIB
 * Prints "renamed driver: passed"; exit 0.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hcguard.h"
#include "testutil.h"

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*dev_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*setcur_fn)(CUcontext);
typedef CUresult (*screate_fn)(CUstream *, unsigned);
typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);
typedef CUresult (*sync_fn)(CUstream);

static unsigned char buf[256];

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hc_renamed LIB\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    launch_fn launch = (launch_fn)dlsym(h, "cuLaunchHostFunc");
    Dl_info info;
    REQUIRE(launch && dladdr((void *)launch, &info));
    const char *name = strrchr(argv[1], '/'), *in = strrchr(info.dli_fname, '/');
    CHECK_MSG(strcmp(in ? in + 1 : info.dli_fname, name ? name + 1 : argv[1]) != 0,
              "cuLaunchHostFunc from the handle is the driver's own, in %s", info.dli_fname);
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    REQUIRE_OK(((init_fn)dlsym(h, "cuInit"))(0));
    REQUIRE_OK(((dev_fn)dlsym(h, "cuDeviceGet"))(&dev, 0));
    REQUIRE_OK(((retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain"))(&ctx, dev));
    REQUIRE_OK(((setcur_fn)dlsym(h, "cuCtxSetCurrent"))(ctx));
    REQUIRE_OK(((screate_fn)dlsym(h, "cuStreamCreate"))(&s, 0));
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    REQUIRE(copy != NULL);
    hcguard_copy_record bad = {(uintptr_t)buf, (uintptr_t)buf + 8, 64}; /* overlapping */
    CUresult r = launch(s, copy, &bad);
    REQUIRE_OK(((sync_fn)dlsym(h, "cuStreamSynchronize"))(s));
    CHECK_MSG(r == CUDA_ERROR_INVALID_VALUE, "an overlapping record's launch returned %d", (int)r);
    printf("renamed driver: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
