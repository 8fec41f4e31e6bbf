/* A library whose constructor (run inside dlopen, under the loader's lock)
 * makes HC_CTOR_REJECTS launches that hcguard refuses, then launches an
 * ordinary host function and waits for it: hc_lost dlopen. hcguard's
 * collector may need the loader's lock to name functions; what this
 * thread waits for must not wait for it in turn. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "hcguard.h"

/* Read by hc_lost after dlopen returns. */
unsigned long hc_ctor_rejected, hc_ctor_ran;
double hc_ctor_seconds;

static atomic_ulong ran;

static void ordinary(void *p)
{
    (void)p;
    atomic_fetch_add(&ran, 1);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((constructor)) static void ctor(void)
{
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    const char *n_env = getenv("HC_CTOR_REJECTS");
    unsigned long n = n_env ? strtoul(n_env, NULL, 10) : 0;
    CUstream s;
    if (!copy || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return;
    static unsigned char a[64];
    hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), 32}; /* overlap */
    double t0 = now();
    for (unsigned long i = 0; i < n; i++)
        if (cuLaunchHostFunc(s, copy, &bad) == CUDA_ERROR_INVALID_VALUE)
            hc_ctor_rejected++;
    if (cuLaunchHostFunc(s, ordinary, NULL) == CUDA_SUCCESS &&
        cuStreamSynchronize(s) == CUDA_SUCCESS)
        hc_ctor_ran = atomic_load(&ran);
    hc_ctor_seconds = now() - t0;
}
