/* hang MS: one host function that sleeps MS ms, then 20 quick ones; sync. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static void CUDA_CB slp(void *p) { long ms = (long)p; struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L}; nanosleep(&ts, NULL); }
static void CUDA_CB fn(void *p) { (void)p; }
int main(int argc, char **argv)
{
    long ms = argc > 1 ? atol(argv[1]) : 3000;
    CUdevice d; CUcontext c; CUstream s;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 1;
    cuLaunchHostFunc(s, slp, (void *)ms);
    for (int i = 0; i < 20; i++) cuLaunchHostFunc(s, fn, NULL);
    printf("hang %ld: sync %d\n", ms, (int)cuStreamSynchronize(s));
    return 0;
}
