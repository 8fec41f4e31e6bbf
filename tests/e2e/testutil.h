/* Checks shared by the end-to-end and GPU test programs. */
#ifndef HCG_TESTUTIL_H
#define HCG_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* A failed check is printed and counted; the program goes on. */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failures++;                                                        \
        }                                                                      \
    } while (0)

/* A driver call that must succeed, or the test cannot go on. */
#define DRV(call)                                                              \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, \
                    (int)r_);                                                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#ifdef HCGUARD_H
#include <string.h>
/* The host-copy function programs use when hcguard is not preloaded: the
 * same copy, unchecked (the baseline). */
static inline void test_local_copy(void *p)
{
    const hcguard_copy_record *r = p;
    if (r && r->nbytes)
        memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}
#endif

#ifdef CUDA_VERSION
/* The primary context of device 0 made current, and a stream of its own;
 * exit 77 (skip) where there is no device. */
static inline CUstream test_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
        fprintf(stderr, "SKIP: no CUDA device\n");
        exit(77);
    }
    DRV(cuDeviceGet(&dev, 0));
    DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
    DRV(cuCtxSetCurrent(ctx));
    DRV(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}
#endif

#ifdef HCGUARD_H
/* hcguard_get_stats, looked up at run time: the same programs run without
 * hcguard too. */
typedef int (*test_stats_fn)(hcguard_stats *, size_t);

/* hcguard's counters through get, or all zero where get is NULL. */
static inline hcguard_stats test_stats(test_stats_fn get)
{
    hcguard_stats s;
    memset(&s, 0, sizeof s);
    if (get)
        get(&s, sizeof s);
    return s;
}
#endif

/* An address no mapping can ever have: past the largest user address
 * space of the architecture (below the top byte that aarch64 may ignore). */
#if defined(__aarch64__)
#define NEVER_MAPPED ((uintptr_t)1 << 55)
#else
#define NEVER_MAPPED ((uintptr_t)1 << 56)
#endif

#endif
