/*
 * bench_cupti: hcguard against what a user would use instead to watch host
 * functions, a CUPTI subscriber, measured side by side in one process on
 * the real driver. Four ways to launch the same host function, batch by
 * batch in rotating order, so that drift over the run falls on all alike:
 *
 *   drv   the driver's own cuLaunchHostFunc (libcuda's dynamic symbol),
 *         nothing watching
 *   hcg   the cuLaunchHostFunc the program links: hcguard's when it is
 *         preloaded (else the driver's again, which shows the method's noise)
 *   cb    the driver's own, with a CUPTI callback subscriber on
 *         cuLaunchHostFunc that reads its parameters (stream, function,
 *         data) and counts, as a tool built on the callback API would
 *   act   the driver's own, with CUPTI's activity API recording the
 *         driver API calls (CUPTI_ACTIVITY_KIND_DRIVER, as a tracer does)
 *         and, where this CUPTI has it, CUPTI_ACTIVITY_KIND_HOST_LAUNCH
 *         (start, end, stream, thread of each host function); buffers
 *         read after each batch
 *
 * Figures, ns (median over batches):
 *   enqueue   per launch while the callback thread runs the earlier ones
 *   gated     per launch while the stream is held: the enqueue path alone
 *   spacing   between the starts of back-to-back host functions on the
 *             callback thread (what each adds there)
 * then what each way reported for the launches it watched.
 *
 *   bench_cupti [ROUNDS]
 * Needs a GPU and CUPTI; built only where CUPTI's headers and library are.
 */
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcguard.h"

#define BENCH_NAME "bench_cupti"
#include "bench_driver.h"
#include "bench_time.h"

#define CUPTI(call)                                                            \
    do {                                                                       \
        CUptiResult r_ = (call);                                               \
        if (r_ != CUPTI_SUCCESS) {                                             \
            const char *s_ = NULL;                                             \
            cuptiGetResultString(r_, &s_);                                     \
            fprintf(stderr, "bench_cupti: %s failed: %s\n", #call,             \
                    s_ ? s_ : "?");                                            \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

enum { WAY_DRV, WAY_HCG, WAY_CB, WAY_ACT, N_WAYS };
static const char *const way_name[N_WAYS] = {"drv", "hcg", "cb", "act"};
enum { BATCH = 500 };

/* ---- what the CUPTI tools see ------------------------------------------ */
static CUpti_SubscriberHandle subscriber;
static uint64_t cb_seen, cb_with_fn;   /* callbacks, and those naming our function */
#ifdef HCG_CUPTI_HOST_LAUNCH
static uint64_t act_records, act_ns;   /* host-launch records, their summed run time */
#endif
static uint64_t act_api;               /* driver-API records of cuLaunchHostFunc */
static uint64_t act_dropped;
static void noop(void *p);

static void CUPTIAPI on_api(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id,
                            const void *data)
{
    (void)ud;
    const CUpti_CallbackData *cb = data;
    if (dom != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER)
        return;
    if (id != CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc &&
        id != CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc_ptsz)
        return;
    const cuLaunchHostFunc_params *p = cb->functionParams;
    cb_seen++;
    if (p && p->fn == noop)
        cb_with_fn++;
}

static void set_callbacks(int on)
{
    CUPTI(cuptiEnableCallback((uint32_t)on, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                              CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc));
    CUPTI(cuptiEnableCallback((uint32_t)on, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                              CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc_ptsz));
}

enum { ACT_BUF = 8 << 20 };

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(8, ACT_BUF);
    *size = *buf ? ACT_BUF : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
            act_api += a->cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc ||
                       a->cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc_ptsz;
        }
#ifdef HCG_CUPTI_HOST_LAUNCH
        if (rec->kind == CUPTI_ACTIVITY_KIND_HOST_LAUNCH) {
            const CUpti_ActivityHostLaunch *h = (const CUpti_ActivityHostLaunch *)rec;
            act_records++;
            if (h->end > h->start)
                act_ns += h->end - h->start;
        }
#endif
    }
    free(buf);
}

static void cupti_start(void)
{
    CUPTI(cuptiSubscribe(&subscriber, on_api, NULL));
    CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
}

static void cupti_stop(void)
{
    CUPTI(cuptiActivityFlushAll(1));
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
        act_dropped += dropped;
    CUPTI(cuptiUnsubscribe(subscriber));
}

/* Turn way w's watcher on or off around its batches. */
static void watch(int w, int on)
{
    if (w == WAY_CB)
        set_callbacks(on);
    if (w == WAY_ACT) {
        if (on) {
            CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
#ifdef HCG_CUPTI_HOST_LAUNCH
            CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_HOST_LAUNCH));
#endif
        } else {
            CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER));
#ifdef HCG_CUPTI_HOST_LAUNCH
            CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_HOST_LAUNCH));
#endif
            CUPTI(cuptiActivityFlushAll(1));
        }
    }
}

/* ---- the work ---------------------------------------------------------- */
static void noop(void *p)
{
    (void)p;
}

static atomic_int gate;
static void wait_gate(void *p)
{
    (void)p;
    struct timespec ts = {0, 20000};
    while (!atomic_load(&gate))
        nanosleep(&ts, NULL);
}

static uint64_t starts[BATCH];
static void stamp_start(void *p)
{
    starts[(uintptr_t)p] = now_ns();
}

static uint64_t batch_enqueue(CUstream s, launch_fn launch, int gated)
{
    if (gated) {
        atomic_store(&gate, 0);
        DRV(launch(s, wait_gate, NULL));
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < BATCH; i++)
        DRV(launch(s, noop, NULL));
    uint64_t t = (now_ns() - t0) / BATCH;
    atomic_store(&gate, 1);
    DRV(cuStreamSynchronize(s));
    return t;
}

/* Host functions queued behind a held stream, then let go: the spacing of
 * their starts is the callback thread's cost per host function. */
static uint64_t batch_spacing(CUstream s, launch_fn launch)
{
    atomic_store(&gate, 0);
    DRV(launch(s, wait_gate, NULL));
    for (uintptr_t i = 0; i < BATCH; i++)
        DRV(launch(s, stamp_start, (void *)i));
    atomic_store(&gate, 1);
    DRV(cuStreamSynchronize(s));
    return (starts[BATCH - 1] - starts[0]) / (BATCH - 1);
}

enum { FIG_ENQUEUE, FIG_GATED, FIG_SPACING, N_FIGS };
static const char *const fig_name[N_FIGS] = {"enqueue", "gated", "spacing"};

static void print_figures(uint64_t *v[N_FIGS][N_WAYS], size_t n)
{
    printf("%-8s", "figure");
    for (int w = 0; w < N_WAYS; w++)
        printf(" %7s", way_name[w]);
    for (int w = 1; w < N_WAYS; w++)
        printf(" %9s", way_name[w]);
    printf("\n");
    for (int f = 0; f < N_FIGS; f++) {
        uint64_t m[N_WAYS];
        for (int w = 0; w < N_WAYS; w++)
            m[w] = median(v[f][w], n);
        printf("%-8s", fig_name[f]);
        for (int w = 0; w < N_WAYS; w++)
            printf(" %7llu", (unsigned long long)m[w]);
        for (int w = 1; w < N_WAYS; w++)
            printf(" %9.3f", m[0] ? (double)m[w] / (double)m[0] : 0.0);
        printf("\n");
    }
    printf("(ns, medians of %zu batches of %d; the last three columns are each way over drv)\n", n,
           BATCH);
}

static uint64_t launched[N_WAYS];

static void run_rounds(CUstream s, const launch_fn *way, int rounds)
{
    uint64_t *v[N_FIGS][N_WAYS];
    for (int f = 0; f < N_FIGS; f++)
        for (int w = 0; w < N_WAYS; w++)
            v[f][w] = calloc((size_t)rounds, sizeof(uint64_t));
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < N_WAYS; k++) {
            int w = (r + k) % N_WAYS;
            watch(w, 1);
            v[FIG_ENQUEUE][w][r] = batch_enqueue(s, way[w], 0);
            v[FIG_GATED][w][r] = batch_enqueue(s, way[w], 1);
            v[FIG_SPACING][w][r] = batch_spacing(s, way[w]);
            watch(w, 0);
            launched[w] += 3 * BATCH + 2;
        }
    }
    print_figures(v, (size_t)rounds);
    for (int f = 0; f < N_FIGS; f++)
        for (int w = 0; w < N_WAYS; w++)
            free(v[f][w]);
}

/* What each way knew about the launches it watched. */
static void print_reports(int preloaded)
{
    printf("reports:\n");
    if (preloaded) {
        hcguard_stats st;
        memset(&st, 0, sizeof st);
        int (*get)(hcguard_stats *, size_t) =
            (int (*)(hcguard_stats *, size_t))dlsym(RTLD_DEFAULT, "hcguard_get_stats");
        if (get && get(&st, sizeof st) == 0)
            printf("  hcg: %llu launches watched; hcguard counted %llu launched, %llu ran, each "
                   "with its function (named), stream, queue wait and run time (log, trace, "
                   "summary), host-copy records checked\n",
                   (unsigned long long)launched[WAY_HCG],
                   (unsigned long long)st.host_fns_launched,
                   (unsigned long long)st.host_fns_ran);
    } else {
        printf("  hcg: hcguard not preloaded (this column is the driver's own again)\n");
    }
    printf("  cb:  %llu launches watched; %llu callbacks, %llu naming the host function "
           "(parameters at enqueue only: nothing about when or how long it ran)\n",
           (unsigned long long)launched[WAY_CB], (unsigned long long)cb_seen,
           (unsigned long long)cb_with_fn);
    printf("  act: %llu launches watched; %llu cuLaunchHostFunc API records (when the call "
           "was made; no function, no data)",
           (unsigned long long)launched[WAY_ACT], (unsigned long long)act_api);
#ifdef HCG_CUPTI_HOST_LAUNCH
    printf(", %llu host-launch records, mean run time %.0f ns (start and end, stream, thread; "
           "no function, no record contents)", (unsigned long long)act_records,
           act_records ? (double)act_ns / (double)act_records : 0.0);
#else
    printf("; this CUPTI has no host-launch records (CUPTI_ACTIVITY_KIND_HOST_LAUNCH)");
#endif
    printf(", %llu dropped\n", (unsigned long long)act_dropped);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 60;
    if (rounds < 3)
        rounds = 3;
    bench_context();
    CUstream s = bench_stream();
    launch_fn real = (launch_fn)bench_driver_fn("cuLaunchHostFunc");
    int preloaded = dlsym(RTLD_DEFAULT, "hcguard_host_copy") != NULL;
    printf("hcguard %s\n", preloaded ? "yes" : "no");
    cupti_start();
    launch_fn way[N_WAYS] = {real, cuLaunchHostFunc, real, real};
    for (int w = 0; w < N_WAYS; w++) { /* warm up: first calls, CUPTI's set-up */
        watch(w, 1);
        batch_enqueue(s, way[w], 0);
        watch(w, 0);
        launched[w] += BATCH;
    }
    run_rounds(s, way, rounds);
    cupti_stop();
    print_reports(preloaded);
    cuStreamDestroy(s);
    return 0;
}
