/*
 * bench_hostfn: the costs hcguard's budget speaks of, measured by one
 * program that runs the same way with and without hcguard preloaded
 * (bench/run.sh runs both, interleaved, and prints the ratios).
 *
 *   enqueue_plain   ns per cuLaunchHostFunc of an ordinary host function,
 *                   while the driver's thread runs the earlier ones
 *   enqueue_copy    the same for a 64-byte host copy (validated at enqueue
 *                   under hcguard)
 *   gated_plain     ns per launch while the stream is held by a host
 *                   function waiting on a flag: the enqueue path alone
 *   gated_copy      the same for the 64-byte copy
 *   clock_ns        ns per clock_gettime(CLOCK_MONOTONIC) on this machine
 *   dispatch_min    min ns from just before the launch to the function's
 *                   start, idle stream, one at a time
 *   dispatch_med    the median of the same
 *   copy_gbps       GB/s of a 64 MiB pinned-to-pageable copy run as a
 *                   host function, timed inside the stream (events between
 *                   two host functions); median of the repetitions
 *
 * Prints one "name value" line per figure. Without hcguard the copy is a
 * local function with the same body as hcguard_host_copy.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcguard.h"

#define DRV(call)                                                              \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "bench: %s failed: %d\n", #call, (int)r_);         \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return v[n / 2];
}

static void local_copy(void *p)
{
    const hcguard_copy_record *r = p;
    if (r && r->nbytes)
        memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}

static void noop(void *p)
{
    (void)p;
}

static _Atomic uint64_t started_at;
static void stamp(void *p)
{
    (void)p;
    atomic_store(&started_at, now_ns());
}

static uint64_t stamp_a, stamp_b;
static void mark_a(void *p)
{
    (void)p;
    stamp_a = now_ns();
}
static void mark_b(void *p)
{
    (void)p;
    stamp_b = now_ns();
}

static atomic_int gate;
static void wait_gate(void *p)
{
    (void)p;
    struct timespec ts = {0, 20000};
    while (!atomic_load(&gate))
        nanosleep(&ts, NULL);
}

/* ns per launch of `batch` launches queued behind a held stream; median. */
static uint64_t gated_cost(CUstream s, CUhostFn fn, void *user, int batches, int batch)
{
    uint64_t *t = malloc(sizeof *t * (size_t)batches);
    for (int b = 0; b < batches; b++) {
        atomic_store(&gate, 0);
        DRV(cuLaunchHostFunc(s, wait_gate, NULL));
        uint64_t t0 = now_ns();
        for (int i = 0; i < batch; i++)
            DRV(cuLaunchHostFunc(s, fn, user));
        t[b] = (now_ns() - t0) / (uint64_t)batch;
        atomic_store(&gate, 1);
        DRV(cuStreamSynchronize(s));
    }
    uint64_t m = median(t, (size_t)batches);
    free(t);
    return m;
}

/* ns per launch: batches of `batch` launches, each followed by an untimed
 * synchronize; the median batch. */
static uint64_t enqueue_cost(CUstream s, CUhostFn fn, void *user, int batches, int batch)
{
    uint64_t *t = malloc(sizeof *t * (size_t)batches);
    for (int b = 0; b < batches; b++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < batch; i++)
            DRV(cuLaunchHostFunc(s, fn, user));
        t[b] = (now_ns() - t0) / (uint64_t)batch;
        DRV(cuStreamSynchronize(s));
    }
    uint64_t m = median(t, (size_t)batches);
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    if (scale < 1)
        scale = 1;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    DRV(cuInit(0));
    DRV(cuDeviceGet(&dev, 0));
    DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
    DRV(cuCtxSetCurrent(ctx));
    DRV(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    printf("hcguard %s\n", copy ? "yes" : "no");
    if (!copy)
        copy = local_copy;

    /* Warm up: module load, thread start, first-call paths. */
    enqueue_cost(s, noop, NULL, 5, 200);

    printf("enqueue_plain %llu\n",
           (unsigned long long)enqueue_cost(s, noop, NULL, 40 * scale, 500));
    static unsigned char a[64], b[64];
    hcguard_copy_record small = {(uintptr_t)a, (uintptr_t)b, sizeof a};
    printf("enqueue_copy %llu\n",
           (unsigned long long)enqueue_cost(s, copy, &small, 40 * scale, 500));

    printf("gated_plain %llu\n",
           (unsigned long long)gated_cost(s, noop, NULL, 40 * scale, 500));
    printf("gated_copy %llu\n",
           (unsigned long long)gated_cost(s, copy, &small, 40 * scale, 500));
    {
        enum { NC = 200000 };
        uint64_t t0 = now_ns();
        for (int i = 0; i < NC; i++)
            now_ns();
        printf("clock_ns %.1f\n", (double)(now_ns() - t0) / NC);
    }

    enum { ND = 2000 };
    uint64_t *d = malloc(sizeof *d * ND);
    for (int i = 0; i < ND; i++) {
        uint64_t t0 = now_ns();
        DRV(cuLaunchHostFunc(s, stamp, NULL));
        DRV(cuStreamSynchronize(s));
        d[i] = atomic_load(&started_at) - t0;
    }
    qsort(d, ND, sizeof *d, cmp_u64);
    printf("dispatch_min %llu\ndispatch_med %llu\n", (unsigned long long)d[0],
           (unsigned long long)d[ND / 2]);
    free(d);

    enum { SZ = 64 << 20, REPS = 9 };
    unsigned char *pinned, *pageable = malloc(SZ);
    DRV(cuMemAllocHost((void **)&pinned, SZ));
    memset(pinned, 1, SZ);
    memset(pageable, 2, SZ);
    hcguard_copy_record big = {(uintptr_t)pageable, (uintptr_t)pinned, SZ};
    uint64_t bw[REPS];
    for (int i = 0; i < REPS; i++) {
        DRV(cuLaunchHostFunc(s, mark_a, NULL));
        DRV(cuLaunchHostFunc(s, copy, &big));
        DRV(cuLaunchHostFunc(s, mark_b, NULL));
        DRV(cuStreamSynchronize(s));
        bw[i] = (uint64_t)((double)SZ * 1000.0 / (double)(stamp_b - stamp_a)); /* MB/s */
    }
    printf("copy_gbps %.3f\n", (double)median(bw, REPS) / 1000.0);
    if (memcmp(pageable, pinned, 4096) != 0) {
        fprintf(stderr, "bench: the copy did not copy\n");
        return 1;
    }
    cuMemFreeHost(pinned);
    free(pageable);
    cuStreamDestroy(s);
    return 0;
}
