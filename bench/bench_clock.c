/*
 * What each clock costs to read and how finely it ticks, on this machine:
 * the figures that decide how the callback thread is timed (a sampled
 * timer can keep the slow findings exact only if a clock cheaper than the
 * timer it replaces ticks finely enough for HCGUARD_SLOW_MS).
 *   bench_clock          one line per clock: ns a read, smallest step seen
 */
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include "bench_time.h"

enum { READS = 1000000, ROUNDS = 7 };

static uint64_t read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The median over ROUNDS of the ns a read of clock id costs. */
static double cost_ns(clockid_t id)
{
    uint64_t v[ROUNDS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < READS; i++)
            sink += read_clock(id);
        v[r] = now_ns() - t0;
    }
    (void)sink;
    return (double)median(v, ROUNDS) / READS;
}

/* The smallest nonzero step between two reads of clock id seen. */
static uint64_t step_ns(clockid_t id)
{
    uint64_t best = UINT64_MAX, prev = read_clock(id), t0 = now_ns();
    while (now_ns() - t0 < 200000000u) {
        uint64_t t = read_clock(id);
        if (t != prev && t - prev < best)
            best = t - prev;
        prev = t;
    }
    return best;
}

static void one(const char *name, clockid_t id)
{
    struct timespec res;
    clock_getres(id, &res);
    printf("%-24s %6.1f ns/read  step %9llu ns  getres %ld ns\n", name, cost_ns(id),
           (unsigned long long)step_ns(id), res.tv_nsec);
}

int main(void)
{
    char src[64] = "?";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (fgets(src, sizeof src, f))
            src[strcspn(src, "\n")] = 0;
        fclose(f);
    }
    printf("clocksource %s\n", src);
    one("CLOCK_MONOTONIC", CLOCK_MONOTONIC);
    one("CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE);
    one("CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW);
#if defined(__x86_64__)
    uint64_t v[ROUNDS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < READS; i++)
            sink += __rdtsc();
        v[r] = now_ns() - t0;
    }
    (void)sink;
    printf("%-24s %6.1f ns/read\n", "rdtsc", (double)median(v, ROUNDS) / READS);
#endif
    return 0;
}
