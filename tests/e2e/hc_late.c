/*
 * libhcguard loaded late, by dlopen, after the program started the driver
 * (a Python program loading it with ctypes, say), not preloaded: its
 * thread-local storage must fit glibc's surplus static TLS, and what is
 * launched through it is guarded and counted.
 *
 *   hc_late LIBHCGUARD
 * Prints "late dlopen: passed"; exit 0.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#include "hcguard.h"
#include "testutil.h"

typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);

static void count(void *p)
{
    (*(int *)p)++;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hc_late LIBHCGUARD\n");
        return 2;
    }
    CUstream s = test_context();
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    launch_fn launch = (launch_fn)dlsym(h, "cuLaunchHostFunc");
    test_stats_fn get = (test_stats_fn)dlsym(h, "hcguard_get_stats");
    CUhostFn copy = (CUhostFn)dlsym(h, "hcguard_host_copy");
    REQUIRE(launch && get && copy);
    int ran = 0;
    for (int i = 0; i < 10; i++)
        CHECK(launch(s, count, &ran) == CUDA_SUCCESS);
    CHECK(launch(s, copy, NULL) == CUDA_ERROR_INVALID_VALUE); /* guarded */
    REQUIRE_OK(cuStreamSynchronize(s));
    hcguard_stats st = test_stats(get);
    CHECK_MSG(ran == 10 && st.host_fns_launched == 10 && st.host_fns_ran == 10 &&
                  st.rejected == 1,
              "ran %d; hcguard: %llu launched, %llu ran, %llu rejected", ran,
              (unsigned long long)st.host_fns_launched, (unsigned long long)st.host_fns_ran,
              (unsigned long long)st.rejected);
    printf("late dlopen: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
