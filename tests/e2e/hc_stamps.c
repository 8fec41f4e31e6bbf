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
 * Prints "stamps run: passed"; exit 0. The summary is checked by the test.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

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

int main(int argc, char **argv)
{
    static const check_scenario scenarios[] = {CHECK_SCENARIO("run", scenario_run)};
    return check_scenario_main("hc_stamps", "stamps %s", scenarios,
                               sizeof scenarios / sizeof scenarios[0], argc, argv, NULL, NULL);
}
