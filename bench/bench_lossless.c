/*
 * bench_lossless: the sustained rate at which host functions can be
 * launched and every one of them recorded. T threads, each on a stream of
 * its own, launch N host functions in total as fast as they can, then
 * synchronize; each round is timed twice in one process, alternating:
 * through the driver's own cuLaunchHostFunc (found in libcuda's dynamic
 * symbol table: the rate without hcguard) and through the one the program
 * links (hcguard's, when preloaded, with whatever log or trace the
 * environment asks for). After the rounds it checks hcguard's counts: every
 * host function launched through hcguard ran, and no event was dropped.
 *
 * Prints "threads T rounds R launches N", then per way the median rate in
 * launches per second, the ratio (hcguard over driver), and the counts:
 *   rate drv M/s hcguard M/s ratio X
 *   hcguard launched L ran R dropped D
 * and exits 1 if any count is off (ran != launched, or dropped != 0).
 *   bench_lossless [THREADS [N [ROUNDS]]]
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

#define BENCH_NAME "bench_lossless"
#include "bench_driver.h"
#include "bench_time.h"

static atomic_ulong ran;
static CUcontext ctx;

static void noop(void *p)
{
    (void)p;
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

typedef struct worker {
    pthread_t t;
    launch_fn launch;
    CUstream s;
    unsigned long n;
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    DRV(cuCtxSetCurrent(ctx));
    for (unsigned long i = 0; i < w->n; i++)
        DRV(w->launch(w->s, noop, NULL));
    DRV(cuStreamSynchronize(w->s));
    return NULL;
}

/* Launches per second, from the first launch to the last host function. */
static double one_round(launch_fn launch, worker *w, unsigned t, unsigned long n)
{
    unsigned long before = atomic_load(&ran);
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < t; i++) {
        w[i].launch = launch;
        w[i].n = n / t + (i < n % t);
        pthread_create(&w[i].t, NULL, run_worker, &w[i]);
    }
    for (unsigned i = 0; i < t; i++)
        pthread_join(w[i].t, NULL);
    double s = (double)(now_ns() - t0) / 1e9;
    if (atomic_load(&ran) - before != n) {
        fprintf(stderr, BENCH_NAME ": %lu of %lu host functions ran\n", atomic_load(&ran) - before, n);
        exit(1);
    }
    return (double)n / s;
}

int main(int argc, char **argv)
{
    unsigned t = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000;
    unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 3;
    if (t < 1 || t > 64 || n < t || rounds < 1 || rounds > 32) {
        fprintf(stderr, "usage: bench_lossless [THREADS 1-64 [N [ROUNDS 1-32]]]\n");
        return 2;
    }
    ctx = bench_context();
    launch_fn drv = (launch_fn)bench_driver_fn("cuLaunchHostFunc");
    launch_fn linked = cuLaunchHostFunc;
    int (*stats)(hcguard_stats *, size_t) =
        (int (*)(hcguard_stats *, size_t))dlsym(RTLD_DEFAULT, "hcguard_get_stats");
    worker w[64];
    for (unsigned i = 0; i < t; i++)
        w[i].s = bench_stream();
    double r_drv[32], r_hcg[32];
    for (unsigned r = 0; r < rounds; r++) {
        r_drv[r] = one_round(drv, w, t, n);
        r_hcg[r] = one_round(linked, w, t, n);
    }
    double md = median_double(r_drv, rounds), mh = median_double(r_hcg, rounds);
    printf("threads %u rounds %u launches %lu\n", t, rounds, n);
    printf("rate drv %.3f M/s hcguard %.3f M/s ratio %.3f\n", md / 1e6, mh / 1e6, mh / md);
    if (!stats) {
        printf("hcguard no\n");
        return 0;
    }
    hcguard_stats s;
    stats(&s, sizeof s);
    unsigned long want = n * rounds;
    printf("hcguard launched %llu ran %llu dropped %llu\n", (unsigned long long)s.host_fns_launched,
           (unsigned long long)s.host_fns_ran, (unsigned long long)s.events_dropped);
    return s.host_fns_launched == want && s.host_fns_ran == want && s.events_dropped == 0 ? 0 : 1;
}
