/*
 * What the benchmarks that launch host functions share: every driver call
 * checked, the context and stream they launch on, and the driver's own
 * entry points, found in libcuda's dynamic symbol table (what the program
 * would call without hcguard) beside the ones it links (hcguard's, when
 * preloaded). Define BENCH_NAME, the benchmark's name in its messages,
 * before including it.
 */
#ifndef HCG_BENCH_DRIVER_H
#define HCG_BENCH_DRIVER_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME (the benchmark's name in its messages) before bench_driver.h"
#endif

/* src/base/dynsym.c, built into the benchmark or from the core archive
 * (hcg.h would rename the driver's entry points to their legacy versions). */
void *hcg_dynsym(const char *object, const char *name, const char *version);

#define DRV(call)                                                              \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, BENCH_NAME ": %s failed: %d\n", #call, (int)r_);   \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);

/* The driver's own entry point NAME; exits 1 where libcuda's symbol table
 * has none (the comparison would be hcguard against itself). */
static inline void *bench_driver_fn(const char *name)
{
    void *fn = hcg_dynsym("libcuda.so", name, NULL);
    if (!fn) {
        fprintf(stderr, BENCH_NAME ": %s not found in libcuda's symbol table\n", name);
        exit(1);
    }
    return fn;
}

/* cuInit, and device 0's primary context made current on this thread. */
static inline CUcontext bench_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    DRV(cuInit(0));
    DRV(cuDeviceGet(&dev, 0));
    DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
    DRV(cuCtxSetCurrent(ctx));
    return ctx;
}

/* A stream of its own, not synchronised with the legacy NULL stream. */
static inline CUstream bench_stream(void)
{
    CUstream s;
    DRV(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

#endif
