/*
 * A CUDA runtime program (cudaLaunchHostFunc), built twice: against the
 * shared and the static libcudart. The runtime finds the driver through
 * cuGetProcAddress, looked up through itself, so this is the path CuPy and
 * PyTorch take. Good copies must be exact, bad records refused with
 * cudaErrorInvalidValue, and host functions captured into a graph must
 * survive every replay. "cudart_hostfn site": slow host functions made
 * through the runtime from this program's functions (see sites()).
 *
 * Exit 0: passed; 1: failed; 77: no GPU.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

#define RT(call)                                                               \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess)                                                 \
            check_require_fail(__FILE__, __LINE__, "%s returned %s, want cudaSuccess", \
                               #call, cudaGetErrorName(e_));                   \
    } while (0)

/* ---- "site": run-time findings name the program's functions ------------
 * Host functions that sleep 5 ms (slow under --slow-ms 1), made through the
 * runtime from static functions of this program: launched, added as a
 * stream callback, added as a graph node, captured. Each slow finding must
 * name the function here that made it, not the runtime's. */
#define KEEP_FRAME() __asm__ __volatile__("" ::: "memory") /* no tail call */

static void sleep_5ms(void *p)
{
    (void)p;
    usleep(5000);
}

static void CUDART_CB sleep_5ms_cb(cudaStream_t s, cudaError_t status, void *p)
{
    (void)s;
    (void)status;
    usleep(5000);
    (void)p;
}

static __attribute__((noinline)) void launch_sleeper(cudaStream_t s)
{
    RT(cudaLaunchHostFunc(s, sleep_5ms, NULL));
    KEEP_FRAME();
}

static __attribute__((noinline)) void add_sleeper_callback(cudaStream_t s)
{
    RT(cudaStreamAddCallback(s, sleep_5ms_cb, NULL, 0));
    KEEP_FRAME();
}

static __attribute__((noinline)) void add_sleeper_node(cudaGraph_t g)
{
    cudaGraphNode_t node;
    struct cudaHostNodeParams p = {sleep_5ms, NULL};
    RT(cudaGraphAddHostNode(&node, g, NULL, 0, &p));
    KEEP_FRAME();
}

static __attribute__((noinline)) void capture_sleeper(cudaStream_t s)
{
    RT(cudaLaunchHostFunc(s, sleep_5ms, NULL));
    KEEP_FRAME();
}

static int sites(void)
{
    cudaStream_t s;
    cudaGraph_t g, cap;
    cudaGraphExec_t ge, gcap;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    launch_sleeper(s);
    add_sleeper_callback(s);
    RT(cudaGraphCreate(&g, 0));
    add_sleeper_node(g);
    RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    capture_sleeper(s);
    RT(cudaStreamEndCapture(s, &cap));
    RT(cudaGraphInstantiate(&ge, g, 0));
    RT(cudaGraphInstantiate(&gcap, cap, 0));
    RT(cudaGraphLaunch(ge, s));
    RT(cudaGraphLaunch(gcap, s));
    RT(cudaStreamSynchronize(s));
    RT(cudaGraphExecDestroy(ge));
    RT(cudaGraphExecDestroy(gcap));
    RT(cudaGraphDestroy(g));
    RT(cudaGraphDestroy(cap));
    RT(cudaStreamDestroy(s));
    printf("cudart hostfn site: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "SKIP: no CUDA device\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "site") == 0)
        return sites();
    cudaHostFn_t copy = (cudaHostFn_t)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    int guarded = copy != NULL;
    if (!copy)
        copy = test_local_copy;
    cudaStream_t s;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* Good copies, pageable and pinned. */
    enum { SZ = 8 << 20 };
    unsigned char *src = malloc(SZ), *dst = calloc(1, SZ), *pinned;
    RT(cudaMallocHost((void **)&pinned, SZ));
    for (int i = 0; i < SZ; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    hcguard_copy_record r1 = {(uintptr_t)pinned, (uintptr_t)src, SZ};
    hcguard_copy_record r2 = {(uintptr_t)dst, (uintptr_t)pinned, SZ};
    RT(cudaLaunchHostFunc(s, copy, &r1));
    RT(cudaLaunchHostFunc(s, copy, &r2));
    RT(cudaStreamSynchronize(s));
    CHECK_MSG(memcmp(src, dst, SZ) == 0, "pageable -> pinned -> pageable copy differs");

    /* The same on a second stream, and on the NULL (legacy default)
     * stream: three streams, three stream tracks in the trace. */
    cudaStream_t s2;
    RT(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    memset(dst, 0, SZ);
    RT(cudaLaunchHostFunc(s2, copy, &r1));
    RT(cudaLaunchHostFunc(s2, copy, &r2));
    RT(cudaStreamSynchronize(s2));
    CHECK_MSG(memcmp(src, dst, SZ) == 0, "the copies on a second stream differ");
    memset(dst, 0, SZ);
    RT(cudaLaunchHostFunc(0, copy, &r2));
    RT(cudaStreamSynchronize(0));
    CHECK_MSG(memcmp(src, dst, SZ) == 0, "the copy on the NULL stream differs");
    RT(cudaStreamDestroy(s2));

    if (guarded) {
        long pg = sysconf(_SC_PAGESIZE);
        void *none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void *dev;
        RT(cudaMalloc(&dev, 1 << 20));
        hcguard_copy_record bad[] = {
            {0, (uintptr_t)src, 64},                  /* null-dst */
            {(uintptr_t)dst, (uintptr_t)dst + 8, 64}, /* overlap */
            {(uintptr_t)dst, (uintptr_t)none, 64},    /* src-not-readable */
            {(uintptr_t)dev, (uintptr_t)src, 64},     /* dst-device */
            {(uintptr_t)dst, (uintptr_t)dev, 64},     /* src-device */
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            cudaError_t e = cudaLaunchHostFunc(s, copy, &bad[i]);
            CHECK_MSG(e == cudaErrorInvalidValue, "bad record %zu: %s", i, cudaGetErrorName(e));
            cudaGetLastError(); /* the runtime keeps the last error */
        }
        cudaError_t e = cudaLaunchHostFunc(s, copy, NULL);
        CHECK_MSG(e == cudaErrorInvalidValue, "null record: %s", cudaGetErrorName(e));
        cudaGetLastError();
        RT(cudaFree(dev));
    }

    /* Capture: the host function becomes a node that runs on every replay. */
    memset(dst, 0, SZ);
    hcguard_copy_record r3 = {(uintptr_t)dst, (uintptr_t)src, 4096};
    cudaGraph_t g;
    cudaGraphExec_t ge;
    RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    RT(cudaLaunchHostFunc(s, copy, &r3));
    RT(cudaStreamEndCapture(s, &g));
    RT(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; i++) {
        memset(dst, 0, 4096);
        RT(cudaGraphLaunch(ge, s));
        RT(cudaStreamSynchronize(s));
        CHECK_MSG(memcmp(src, dst, 4096) == 0, "replay %d did not copy", i);
    }
    RT(cudaGraphExecDestroy(ge));
    RT(cudaGraphDestroy(g));

    RT(cudaStreamDestroy(s));
    RT(cudaFreeHost(pinned));
    free(src);
    free(dst);
    printf("cudart hostfn: %s (%s)\n", check_failures ? "FAILED" : "passed",
           guarded ? "under hcguard" : "without hcguard");
    return check_failures ? 1 : 0;
}
