/*
 * bench_hostfn: the costs hcguard's budget speaks of, measured side by side
 * in one process. Run under hcguard (bench/run.sh does), it times each
 * figure two ways, interleaved batch by batch: through the driver's own
 * cuLaunchHostFunc, found in libcuda's dynamic symbol table (what the
 * program would call without hcguard), and through the cuLaunchHostFunc
 * the program links to (hcguard's, when preloaded).
 *
 *   enqueue_plain   ns per cuLaunchHostFunc of an ordinary host function,
 *                   while the driver's thread runs the earlier ones
 *   enqueue_copy    the same for a 64-byte host copy (validated at enqueue
 *                   under hcguard; without it, a local function with the
 *                   body of hcguard_host_copy)
 *   gated_plain     ns per launch while the stream is held by a host
 *                   function waiting on a flag: the enqueue path alone
 *   gated_copy      the same for the 64-byte copy
 *   dispatch_min    min ns from just before a launch to the function's
 *                   start, idle stream, one at a time
 *   dispatch_med    the median of the same
 *   copy_mbps       MB/s of a 64 MiB pinned-to-pageable copy run as a host
 *                   function, timed inside the stream (between two host
 *                   functions); median of the repetitions
 *   ctx_get_ns      ns per cuCtxGetCurrent, a driver call hcguard does not
 *                   wrap: under hcguard the linked one is its exported
 *                   thunk, which only checks that no host function is
 *                   running on the thread
 *   cb_gap_plain    ns from the start of one host function to the start of
 *                   the next, BATCH of them queued behind a held stream and
 *                   run back to back: the callback thread's cost per host
 *                   function (the driver's dispatch, and under hcguard the
 *                   trampoline and its event); hcguard's cost there is the
 *                   difference of the two columns
 *   cb_gap_copy     the same for 64-byte host copies (the re-check of the
 *                   record and hcguard's fault-contained copy)
 *   wait_event      ns per cuStreamWaitEvent on an event already complete,
 *                   from the thread that launches (under hcguard it marks
 *                   its launch count, as a launch does, while no capture
 *                   is open)
 *   wait_fresh      the same from a thread that never launched a host
 *                   function (under hcguard it holds the captures' lock
 *                   to read instead)
 *   mt1_plain       ns per launch, free-running, one thread on one stream,
 *                   500 launches made before one synchronize
 *   mt8_plain       the same with 8 threads, each on a stream of its own,
 *                   launching at once: wall time / launches of one thread
 *                   (the enqueue's scaling: mt8 / mt1 of each column)
 *
 * Prints "name without with ratio" per figure (ratio = with / without, of
 * the medians over batches). Without hcguard preloaded both columns time
 * the same function, which shows the noise of the method itself.
 *   bench_hostfn [SCALE]
 * With BENCH_CAPTURE_FIRST=1 the process first captures one host function
 * on a stream of its own: under hcguard every launch after a process's
 * first capture asks whether its stream captures, under a read lock.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcguard.h"

#define BENCH_NAME "bench_hostfn"
#include "bench_driver.h"
#include "bench_time.h"

/* The two ways a launch goes: [0] the driver's own, [1] the program's. */
typedef struct variant {
    launch_fn launch;
    CUhostFn copy; /* the host-copy function this way uses */
} variant;

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

enum { BATCH = 500 };

/* ns per launch of one batch; gated: queued behind a held stream, so the
 * callback thread is idle while the batch is timed. */
static uint64_t batch_cost(CUstream s, launch_fn launch, CUhostFn fn, void *user, int gated)
{
    if (gated) {
        atomic_store(&gate, 0);
        DRV(launch(s, wait_gate, NULL));
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < BATCH; i++)
        DRV(launch(s, fn, user));
    uint64_t t = (now_ns() - t0) / BATCH;
    atomic_store(&gate, 1);
    DRV(cuStreamSynchronize(s));
    return t;
}

typedef struct figure {
    const char *name;
    uint64_t *v[2]; /* per batch, per variant */
    size_t n;
} figure;

static void figure_init(figure *f, const char *name, size_t cap)
{
    f->name = name;
    f->v[0] = malloc(sizeof(uint64_t) * cap);
    f->v[1] = malloc(sizeof(uint64_t) * cap);
    f->n = 0;
}

static void figure_print(figure *f, int use_min)
{
    uint64_t a = use_min ? (qsort(f->v[0], f->n, 8, cmp_u64), f->v[0][0]) : median(f->v[0], f->n);
    uint64_t b = use_min ? (qsort(f->v[1], f->n, 8, cmp_u64), f->v[1][0]) : median(f->v[1], f->n);
    printf("%s %llu %llu %.3f\n", f->name, (unsigned long long)a, (unsigned long long)b,
           a ? (double)b / (double)a : 0.0);
    free(f->v[0]);
    free(f->v[1]);
}

/* Batches alternate between the two ways, the order flipped every round,
 * so drift over the run falls on both alike. */
static void enqueue_figures(CUstream s, const variant *w, int rounds)
{
    static unsigned char a[64], b[64];
    hcguard_copy_record small = {(uintptr_t)a, (uintptr_t)b, sizeof a};
    figure f[4];
    figure_init(&f[0], "enqueue_plain", (size_t)rounds);
    figure_init(&f[1], "enqueue_copy", (size_t)rounds);
    figure_init(&f[2], "gated_plain", (size_t)rounds);
    figure_init(&f[3], "gated_copy", (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int v = (r & 1) ^ k;
            for (int g = 0; g < 2; g++) {
                f[2 * g].v[v][r] = batch_cost(s, w[v].launch, noop, NULL, g);
                f[2 * g + 1].v[v][r] = batch_cost(s, w[v].launch, w[v].copy, &small, g);
            }
        }
    }
    for (int i = 0; i < 4; i++) {
        f[i].n = (size_t)rounds;
        figure_print(&f[i], 0);
    }
}

static void dispatch_figures(CUstream s, const variant *w, int n)
{
    figure lo, med;
    figure_init(&lo, "dispatch_min", (size_t)n);
    figure_init(&med, "dispatch_med", (size_t)n);
    for (int i = 0; i < 2 * n; i++) {
        int v = (i & 1) ^ ((i >> 1) & 1);
        uint64_t t0 = now_ns();
        DRV(w[v].launch(s, stamp, NULL));
        DRV(cuStreamSynchronize(s));
        lo.v[v][i / 2] = med.v[v][i / 2] = atomic_load(&started_at) - t0;
    }
    lo.n = med.n = (size_t)n;
    figure_print(&lo, 1);
    figure_print(&med, 0);
}

typedef CUresult (*ctx_get_fn)(CUcontext *);

/* Batches of calls of a driver function that does next to nothing. */
static void thunk_figure(ctx_get_fn real, ctx_get_fn linked, int rounds)
{
    enum { CALLS = 20000 };
    ctx_get_fn w[2] = {real, linked};
    figure f;
    figure_init(&f, "ctx_get_ns10", (size_t)rounds);
    for (int i = 0; i < 2 * rounds; i++) {
        int v = (i & 1) ^ ((i >> 1) & 1);
        CUcontext c;
        uint64_t t0 = now_ns();
        for (int k = 0; k < CALLS; k++)
            DRV(w[v](&c));
        f.v[v][i / 2] = (now_ns() - t0) * 10 / CALLS; /* tenths of a ns */
    }
    f.n = (size_t)rounds;
    figure_print(&f, 0);
}

static void copy_figure(CUstream s, const variant *w, int reps)
{
    enum { SZ = 64 << 20 };
    unsigned char *pinned, *pageable = malloc(SZ);
    DRV(cuMemAllocHost((void **)&pinned, SZ));
    memset(pinned, 1, SZ);
    memset(pageable, 2, SZ);
    hcguard_copy_record big = {(uintptr_t)pageable, (uintptr_t)pinned, SZ};
    figure f;
    figure_init(&f, "copy_mbps", (size_t)reps);
    for (int i = 0; i < 2 * reps; i++) {
        int v = (i & 1) ^ ((i >> 1) & 1);
        DRV(w[v].launch(s, mark_a, NULL));
        DRV(w[v].launch(s, w[v].copy, &big));
        DRV(w[v].launch(s, mark_b, NULL));
        DRV(cuStreamSynchronize(s));
        f.v[v][i / 2] = (uint64_t)((double)SZ * 1000.0 / (double)(stamp_b - stamp_a));
        pageable[0] = 2;
    }
    f.n = (size_t)reps;
    figure_print(&f, 0);
    if (memcmp(pageable + 1, pinned + 1, 4095) != 0) {
        fprintf(stderr, "bench: the copy did not copy\n");
        exit(1);
    }
    cuMemFreeHost(pinned);
    free(pageable);
}

/* ---- the callback thread: host functions run back to back --------------- */
static uint64_t *gap_at;
static _Atomic unsigned gap_n;
static void gap_stamp(void *p)
{
    (void)p;
    gap_at[atomic_fetch_add_explicit(&gap_n, 1, memory_order_relaxed)] = now_ns();
}

/* A 64-byte copy, then the stamp: the copy's cost falls in the gap. */
static void gap_copy_figure_batch(CUstream s, const variant *w, hcguard_copy_record *small,
                                  int copy, uint64_t *out)
{
    atomic_store(&gate, 0);
    atomic_store(&gap_n, 0);
    DRV(w->launch(s, wait_gate, NULL));
    for (int i = 0; i < BATCH; i++) {
        if (copy)
            DRV(w->launch(s, w->copy, small));
        DRV(w->launch(s, gap_stamp, NULL));
    }
    atomic_store(&gate, 1);
    DRV(cuStreamSynchronize(s));
    /* The first stamp follows the gate's own return: left out. */
    *out = (gap_at[BATCH - 1] - gap_at[1]) / (BATCH - 2) / (copy ? 2 : 1);
}

static void gap_figures(CUstream s, const variant *w, int rounds)
{
    static unsigned char a[64], b[64];
    hcguard_copy_record small = {(uintptr_t)a, (uintptr_t)b, sizeof a};
    gap_at = calloc(BATCH, sizeof *gap_at);
    figure f[2];
    figure_init(&f[0], "cb_gap_plain", (size_t)rounds);
    figure_init(&f[1], "cb_gap_copy", (size_t)rounds);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            int v = (r & 1) ^ k;
            gap_copy_figure_batch(s, &w[v], &small, 0, &f[0].v[v][r]);
            gap_copy_figure_batch(s, &w[v], &small, 1, &f[1].v[v][r]);
        }
    for (int i = 0; i < 2; i++) {
        f[i].n = (size_t)rounds;
        figure_print(&f[i], 0);
    }
    free(gap_at);
}

/* ---- enqueue scaling: threads launching at once, a stream each ---------- */
/* 8 x 500 launches in flight stay below the point where hcguard's flow
 * control makes launches wait for its collector at the default
 * HCGUARD_BUFFER (three quarters of half a ring: 6144 events): the figure
 * is the enqueue's, not the collector's. */
typedef CUresult (*wait_fn)(CUstream, CUevent, unsigned);

typedef struct wait_arg {
    CUcontext ctx;
    CUstream s;
    CUevent ev;
    wait_fn w[2];
    figure *f;
    int rounds;
} wait_arg;

/* Batches of waits on a complete event, the two ways alternating. */
static void *wait_batches(void *p)
{
    enum { WAITS = 1000 };
    wait_arg *a = p;
    DRV(cuCtxSetCurrent(a->ctx));
    for (int i = 0; i < 2 * a->rounds; i++) {
        int v = (i & 1) ^ ((i >> 1) & 1);
        uint64_t t0 = now_ns();
        for (int k = 0; k < WAITS; k++)
            DRV(a->w[v](a->s, a->ev, 0));
        a->f->v[v][i / 2] = (now_ns() - t0) / WAITS;
        DRV(cuStreamSynchronize(a->s));
    }
    a->f->n = (size_t)a->rounds;
    return NULL;
}

static void wait_figures(CUcontext ctx, CUstream s, int rounds)
{
    CUevent ev;
    DRV(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    DRV(cuEventRecord(ev, s));
    DRV(cuStreamSynchronize(s));
    figure f[2];
    figure_init(&f[0], "wait_event", (size_t)rounds);
    figure_init(&f[1], "wait_fresh", (size_t)rounds);
    wait_arg a = {ctx, s, ev, {(wait_fn)bench_driver_fn("cuStreamWaitEvent"), cuStreamWaitEvent},
                  &f[0], rounds};
    wait_batches(&a);
    pthread_t th;
    a.f = &f[1];
    if (pthread_create(&th, NULL, wait_batches, &a) != 0) {
        fprintf(stderr, "bench: pthread_create failed\n");
        exit(1);
    }
    pthread_join(th, NULL);
    figure_print(&f[0], 0);
    figure_print(&f[1], 0);
    DRV(cuEventDestroy(ev));
}

enum { MT_MAX = 8, MT_LAUNCHES = 500 };

typedef struct mt_arg {
    CUcontext ctx;
    CUstream s;
    launch_fn launch;
    pthread_barrier_t *start;
    uint64_t done_at;
} mt_arg;

static void *mt_thread(void *p)
{
    mt_arg *a = p;
    DRV(cuCtxSetCurrent(a->ctx));
    pthread_barrier_wait(a->start);
    for (int i = 0; i < MT_LAUNCHES; i++)
        DRV(a->launch(a->s, noop, NULL));
    a->done_at = now_ns(); /* enqueued: the host functions may still run */
    DRV(cuStreamSynchronize(a->s));
    return NULL;
}

/* ns per launch of one thread: from the start to the last thread's last
 * enqueue, over the launches each made. */
static uint64_t mt_batch(CUcontext ctx, CUstream *streams, int n, launch_fn launch)
{
    pthread_t th[MT_MAX];
    mt_arg arg[MT_MAX];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        arg[i] = (mt_arg){ctx, streams[i], launch, &start, 0};
        if (pthread_create(&th[i], NULL, mt_thread, &arg[i]) != 0) {
            fprintf(stderr, "bench: pthread_create failed\n");
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = now_ns(), last = t0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (arg[i].done_at > last)
            last = arg[i].done_at;
    }
    pthread_barrier_destroy(&start);
    return (last - t0) / MT_LAUNCHES;
}

static void scaling_figures(CUcontext ctx, const variant *w, int rounds)
{
    CUstream streams[MT_MAX];
    for (int i = 0; i < MT_MAX; i++)
        DRV(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    figure f[2];
    figure_init(&f[0], "mt1_plain", (size_t)rounds);
    figure_init(&f[1], "mt8_plain", (size_t)rounds);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            int v = (r & 1) ^ k;
            f[0].v[v][r] = mt_batch(ctx, streams, 1, w[v].launch);
            f[1].v[v][r] = mt_batch(ctx, streams, MT_MAX, w[v].launch);
        }
    for (int i = 0; i < 2; i++) {
        f[i].n = (size_t)rounds;
        figure_print(&f[i], 0);
    }
    for (int i = 0; i < MT_MAX; i++)
        cuStreamDestroy(streams[i]);
}

/* One capture of a host function on a stream of its own, its graph
 * destroyed unlaunched. */
static void capture_once(void)
{
    CUstream c;
    CUgraph g = NULL;
    DRV(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    DRV(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    DRV(cuLaunchHostFunc(c, noop, NULL));
    DRV(cuStreamEndCapture(c, &g));
    DRV(cuGraphDestroy(g));
    DRV(cuStreamDestroy(c));
}

int main(int argc, char **argv)
{
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    if (scale < 1)
        scale = 1;
    CUcontext ctx = bench_context();
    CUstream s = bench_stream();

    CUhostFn hcg_copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    launch_fn real = (launch_fn)bench_driver_fn("cuLaunchHostFunc");
    variant w[2] = {{real, local_copy},
                    {cuLaunchHostFunc, hcg_copy ? hcg_copy : local_copy}};
    printf("hcguard %s\n", hcg_copy ? "yes" : "no");

    if (getenv("BENCH_CAPTURE_FIRST") && atoi(getenv("BENCH_CAPTURE_FIRST")) == 1)
        capture_once();
    /* Warm up both ways: module load, thread start, first-call paths. */
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 5; i++)
            batch_cost(s, w[v].launch, noop, NULL, 0);

    ctx_get_fn ctx_real = (ctx_get_fn)bench_driver_fn("cuCtxGetCurrent");
    enqueue_figures(s, w, 100 * scale);
    thunk_figure(ctx_real, cuCtxGetCurrent, 50 * scale);
    dispatch_figures(s, w, 2000 * scale);
    copy_figure(s, w, 9 * scale);
    gap_figures(s, w, 20 * scale);
    wait_figures(ctx, s, 50 * scale);
    scaling_figures(ctx, w, 10 * scale);
    cuStreamDestroy(s);
    return 0;
}
