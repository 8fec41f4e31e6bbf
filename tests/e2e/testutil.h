/* What the end-to-end and GPU test programs share. */
#ifndef HCG_TESTUTIL_H
#define HCG_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Checks: CHECK_MSG, REQUIRE_OK (a driver call that must succeed, or the
 * test cannot go on) and the rest of tests/common/check.h. */
#include "../common/check.h"

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
    REQUIRE_OK(cuDeviceGet(&dev, 0));
    REQUIRE_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
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

/* n bytes of fresh anonymous memory with protection prot; exits if there
 * is none (the test cannot go on). */
static inline void *test_map(size_t n, int prot)
{
    void *p = mmap(NULL, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

/* An address no mapping can ever have: past the largest user address
 * space of the architecture (below the top byte that aarch64 may ignore). */
#if defined(__aarch64__)
#define NEVER_MAPPED ((uintptr_t)1 << 55)
#else
#define NEVER_MAPPED ((uintptr_t)1 << 56)
#endif

#endif
