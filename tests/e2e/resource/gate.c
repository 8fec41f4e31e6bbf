/* gate N: one host function that waits until this thread has launched N
 * more behind it (the gate opens after the last launch); then sync. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile int open_;
static void CUDA_CB gatefn(void *p) { (void)p; while (!__atomic_load_n(&open_, __ATOMIC_ACQUIRE)) { struct timespec t = {0, 100000}; nanosleep(&t, NULL); } }
static void CUDA_CB fn(void *p) { (void)p; }
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    CUdevice d; CUcontext c; CUstream s;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 1;
    cuLaunchHostFunc(s, gatefn, NULL);
    for (long i = 0; i < n; i++) cuLaunchHostFunc(s, fn, NULL);
    __atomic_store_n(&open_, 1, __ATOMIC_RELEASE);
    printf("gate %ld: sync %d\n", n, (int)cuStreamSynchronize(s));
    return 0;
}
