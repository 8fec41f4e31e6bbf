/* fdcopy: a program at its descriptor limit (every descriptor taken, as a
 * server with many sockets) launches 4 good copies with hcguard_host_copy
 * (looked up with dlsym: present only under hcguard) and checks them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <hcguard.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void)
{
    CUdevice d; CUcontext c; CUstream s;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 1;
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (!copy) { fprintf(stderr, "fdcopy: needs hcguard preloaded\n"); return 77; }
    int k = 0;
    while (open("/dev/null", O_RDONLY) >= 0) k++;
    static char src[4][4096], dst[4][4096];
    static hcguard_copy_record rec[4];
    int refused = 0;
    for (int i = 0; i < 4; i++) {
        memset(src[i], 'a' + i, sizeof src[i]);
        rec[i].dst = (uintptr_t)dst[i]; rec[i].src = (uintptr_t)src[i]; rec[i].nbytes = sizeof src[i];
        if (cuLaunchHostFunc(s, copy, &rec[i]) != CUDA_SUCCESS) refused++;
    }
    cuStreamSynchronize(s);
    int wrong = 0;
    for (int i = 0; i < 4; i++) wrong += memcmp(src[i], dst[i], sizeof src[i]) != 0;
    printf("fdcopy (%d descriptors taken): %d of 4 good copies refused, %d not made: %s\n", k, refused, wrong, refused || wrong ? "FAILED" : "passed");
    return refused || wrong;
}
