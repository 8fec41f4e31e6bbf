/*
 * hcdemo: a small CUDA driver program to run under `hcguard run`. It
 * enqueues good host copies and ordinary host functions on two streams,
 * then three bad records that would crash the driver's callback thread,
 * and reports what each launch returned.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hcguard.h"

#define DRV(call)                                                              \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "hcdemo: %s failed: %d\n", #call, (int)r_);        \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static void plain_copy(void *p)
{
    const hcguard_copy_record *r = p;
    if (r && r->nbytes)
        memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}

static void tick(void *p)
{
    ++*(int *)p;
}

static const char *result(CUresult r)
{
    const char *s = NULL;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s[2];
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with hcguard's stderr */
    DRV(cuInit(0));
    DRV(cuDeviceGet(&dev, 0));
    DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
    DRV(cuCtxSetCurrent(ctx));
    for (int i = 0; i < 2; i++)
        DRV(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    printf("hcdemo: %s\n", copy ? "hcguard is preloaded: copies use hcguard_host_copy"
                                : "no hcguard: copies use a plain function, unchecked");
    if (!copy)
        copy = plain_copy;

    enum { N = 64, SZ = 1 << 20 };
    unsigned char *src = malloc(SZ), *dst = malloc((size_t)N * SZ);
    for (int i = 0; i < SZ; i++)
        src[i] = (unsigned char)i;
    hcguard_copy_record rec[N];
    int ticks = 0;
    for (int i = 0; i < N; i++) {
        rec[i] = (hcguard_copy_record){(uintptr_t)(dst + (size_t)i * SZ), (uintptr_t)src, SZ};
        DRV(cuLaunchHostFunc(s[i & 1], copy, &rec[i]));
        DRV(cuLaunchHostFunc(s[i & 1], tick, &ticks));
    }
    for (int i = 0; i < 2; i++)
        DRV(cuStreamSynchronize(s[i]));
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= memcmp(dst + (size_t)i * SZ, src, SZ) == 0;
    printf("hcdemo: %d good copies of 1 MiB: %s; %d ordinary host functions ran\n", N,
           same ? "all correct" : "WRONG", ticks);

    if (copy != plain_copy) {
        void *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(gone, 4096);
        hcguard_copy_record bad[3] = {
            {(uintptr_t)dst, (uintptr_t)dst + 16, 4096}, /* overlapping ranges */
            {0, (uintptr_t)src, 4096},                   /* null destination */
            {(uintptr_t)gone, (uintptr_t)src, 4096},     /* unmapped destination */
        };
        for (int i = 0; i < 3; i++)
            printf("hcdemo: bad record %d: cuLaunchHostFunc returned %s\n", i,
                   result(cuLaunchHostFunc(s[0], copy, &bad[i])));
        DRV(cuStreamSynchronize(s[0]));
        printf("hcdemo: still running after the bad records\n");
    }
    for (int i = 0; i < 2; i++)
        cuStreamDestroy(s[i]);
    free(src);
    free(dst);
    return same ? 0 : 1;
}
