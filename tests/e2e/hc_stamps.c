/*
 * The enqueue time stamp, sampled: with no output that needs each
 * launch's stamp, 1 ordinary launch in 16 of each thread takes one, and
 * the summary's queue wait says it is sampled and from how many; with the
 * log (or trace) each launch has its stamp. A slow host function among the
 * launches not stamped is still found slow (the run's own stamps).
 *
 *   hc_stamps run     100 launches from this thread, the second of them
 *                     a host function of 50 ms; then 40 from another
 *                     thread (stamped: 7 + 3 = 10 when sampled, else 140)
 *   hc_stamps copies  160 launches of hcguard_host_copy with one good
 *                     record: stamped 1 in 16, and again whenever the
 *                     collector woke since the last stamp or is at work
 *                     (so 10 or more, fewer than 160), each when the log
 *                     needs it
 *   hc_stamps refused 200 launches, ordinary host functions and copies in
 *                     turn, every third one made with no current context
 *                     (the driver refuses it: CUDA_ERROR_INVALID_CONTEXT),
 *                     the others on the legacy stream: only those the
 *                     driver took are counted launched, and all of them run
 * Prints "stamps run: passed"; exit 0. The summary is checked by the test.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hcguard.h"
#include "testutil.h"

static CUstream stream;

static void noop(void *p)
{
    (void)p;
}

static void sleep_50ms(void *p)
{
    (void)p;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void launches(int n, int slow_at)
{
    for (int i = 0; i < n; i++)
        CHECK_OK(cuLaunchHostFunc(stream, i == slow_at ? sleep_50ms : noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
}

static void *other_thread(void *arg)
{
    (void)arg;
    launches(40, -1);
    return NULL;
}

static void scenario_run(void)
{
    stream = test_context();
    launches(100, 1);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, other_thread, NULL) == 0);
    pthread_join(t, NULL);
}

static void scenario_copies(void)
{
    stream = test_context();
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    REQUIRE(copy);
    static char src[8] = "stamped", dst[8];
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    for (int i = 0; i < 160; i++)
        CHECK_OK(cuLaunchHostFunc(stream, copy, &rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(memcmp(dst, src, sizeof src) == 0, "the copies did not copy");
}

/* A launch the driver refuses is undone: hcguard counted it before the
 * driver call (the call is the callback thread's once the driver has it),
 * and must uncount it and take its call back, on the fast path (the
 * function this thread launched last) as on the first launch. */
static void scenario_refused(void)
{
    test_context();
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    CUhostFn copy = NULL;
    test_stats_fn get = test_require_hcguard(&copy);
    static char src[8] = "refused", dst[8];
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    hcguard_stats before, after;
    REQUIRE(get(&before, sizeof before) == 0);
    unsigned taken = 0, copies = 0, refused = 0;
    for (int i = 0; i < 200; i++) {
        int is_copy = (i / 2) % 2; /* each kind twice in a row: its fast path */
        CUhostFn fn = is_copy ? copy : noop;
        void *user = is_copy ? (void *)&rec : NULL;
        if (i % 3 == 2) {
            REQUIRE_OK(cuCtxSetCurrent(NULL));
            CUresult r = cuLaunchHostFunc(NULL, fn, user);
            REQUIRE_OK(cuCtxSetCurrent(ctx));
            CHECK_MSG(r == CUDA_ERROR_INVALID_CONTEXT,
                      "launch %d with no context: %d, want CUDA_ERROR_INVALID_CONTEXT", i, (int)r);
            refused++;
            continue;
        }
        CHECK_OK(cuLaunchHostFunc(NULL, fn, user));
        taken++;
        copies += (unsigned)is_copy;
    }
    REQUIRE_OK(cuCtxSynchronize());
    REQUIRE(get(&after, sizeof after) == 0);
    CHECK_MSG(refused == 200 - taken, "%u refused of 200, %u taken", refused, taken);
    test_check_counted(&before, &after, taken, copies);
    CHECK_MSG(memcmp(dst, src, sizeof src) == 0, "the copies did not copy");
}

int main(int argc, char **argv)
{
    static const check_scenario scenarios[] = {CHECK_SCENARIO("run", scenario_run),
                                               CHECK_SCENARIO("copies", scenario_copies),
                                               CHECK_SCENARIO("refused", scenario_refused)};
    return check_scenario_main("hc_stamps", "stamps %s", scenarios,
                               sizeof scenarios / sizeof scenarios[0], argc, argv, NULL, NULL);
}
