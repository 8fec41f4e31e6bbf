/* tinystack KIB [bad]: a thread with a KIB KiB stack launches 100 host
 * functions (with "bad": one bad host-copy record first, which hcguard
 * rejects and reports), syncs; main joins it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <hcguard.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static CUstream s;
static int bad;
static int rejected;
static void CUDA_CB fn(void *p) { (void)p; }
static void *work(void *arg)
{
    (void)arg;
    if (bad) {
        static hcguard_copy_record rec; /* dst 0: rejected (null-dst) */
        rec.dst = 0; rec.src = (uintptr_t)&rejected; rec.nbytes = 4;
        CUhostFn hc = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
        if (hc)
            rejected = cuLaunchHostFunc(s, hc, &rec) != CUDA_SUCCESS;
    }
    for (int i = 0; i < 100; i++)
        cuLaunchHostFunc(s, fn, NULL);
    cuStreamSynchronize(s);
    return NULL;
}
int main(int argc, char **argv)
{
    size_t kib = argc > 1 ? strtoul(argv[1], 0, 0) : 16;
    bad = argc > 2 && !strcmp(argv[2], "bad");
    CUdevice d; CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 1;
    pthread_attr_t a; pthread_attr_init(&a); pthread_attr_setstacksize(&a, kib << 10);
    pthread_t t;
    if (pthread_create(&t, &a, work, NULL)) { perror("pthread_create"); return 1; }
    pthread_join(t, NULL);
    printf("tinystack %zu KiB%s: passed (rejected %d)\n", kib, bad ? " bad" : "", rejected);
    return 0;
}
