/* many N [threads]: N host functions launched on one stream, then synced. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
static void CUDA_CB fn(void *p) { (void)p; }
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    CUdevice d; CUcontext c; CUstream s;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) {
        fprintf(stderr, "init failed\n"); return 1;
    }
    long bad = 0;
    for (long i = 0; i < n; i++)
        if (cuLaunchHostFunc(s, fn, NULL) != CUDA_SUCCESS) bad++;
    int rc = cuStreamSynchronize(s);
    printf("many %ld: %ld failed, sync %d\n", n, bad, rc);
    return 0;
}
