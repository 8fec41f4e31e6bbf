/*
 * The clock (src/base/clock.c): counter ticks turned into CLOCK_MONOTONIC
 * nanoseconds through reference pairs (a count and a clock read
 * together). A thread preempted between the two reads of a pair would
 * pair a clock with a count from long before it, and every time converted
 * from that pair would move by as much.
 *
 *   early       (in a child, where the clock starts) ticks 200 ms apart,
 *               converted through a reference taken at once after
 *               start-up (a program that drains, or dies, in its first
 *               microseconds), come out within 5% of 200 ms (the truth
 *               read in the tightest of 64 pairs at each end, so that slow
 *               clock reads, 25 us each under emulation, do not put the
 *               check itself off); one try in three will do
 *   rate_wait   that wait, from given pairs: none once the pairs' widths
 *               are a small part of the ticks between them, else as long
 *               as makes them so, at least 100 us after start-up, at most
 *               20 ms
 *   estimate    (in a child, where the clock starts) the estimate a launch
 *               takes never waits: in the first 100 us 1.0 (a TSC) or the
 *               Arm counter's own frequency (not 1.0: a cache entry's
 *               100 ms were 1.6 s at 62.5 MHz), then the rate of the last
 *               reference that had no need to wait
 *   frozen      (named only: run with a CLOCK_MONOTONIC frozen by a
 *               preloaded library, libfaketime's way) references wait for
 *               a rate in the first 20 ms of the real clock at most: 200
 *               taken after that take under 20 ms (each waited 400 us)
 *   preempted   a timer whose handler sleeps 2 ms interrupts 400 times
 *               while ticks are taken and converted through a fresh
 *               reference each time: every converted time lies within 50 us
 *               of the clock read around its tick
 *   ordered     ticks taken one after another, a few microseconds apart,
 *               each converted through the reference of the drain that
 *               would read it (a fresh one every 1 to 20 ms, the
 *               collector's pace), from the program's first milliseconds
 *               on and while the same timer interrupts: every converted
 *               time is at least the one converted before it (two host
 *               functions run one after the other never overlap)
 */
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcg.h"
#include "../common/check.h"

static volatile sig_atomic_t interrupts;

static void sleep_2ms(int sig)
{
    (void)sig;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    interrupts++;
}

/* Every 50 us of the process's own CPU time, or as often as the kernel's
 * tick allows (so the 2 ms asleep in the handler do not bring the next
 * one at once). */
static void interrupt_every_50us(int on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? sleep_2ms : SIG_DFL;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, on ? 50 : 0}, {0, on ? 50 : 0}};
    setitimer(ITIMER_PROF, &it, NULL);
}

/* A count and a clock read together, the tightest of 64 tries. */
static double tight_pair(uint64_t *tick)
{
    uint64_t best = UINT64_MAX, ns = 0;
    *tick = 0; /* set by the first try, whose t1 - t0 is below UINT64_MAX */
    for (int i = 0; i < 64; i++) {
        uint64_t t0 = hcg_ticks(), n = hcg_now_ns(), t1 = hcg_ticks();
        if (t1 >= t0 && t1 - t0 < best) {
            best = t1 - t0;
            *tick = t0 + best / 2;
            ns = n;
        }
    }
    return (double)ns;
}

static int early_once(void)
{
    hcg_clock_init(); /* start-up: the base pair */
    hcg_clock_ref_t ref;
    hcg_clock_ref(&ref);
    uint64_t t0, t1;
    double n0 = tight_pair(&t0);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    double n1 = tight_pair(&t1);
    double d = (double)(hcg_ticks_to_ns(&ref, t1) - hcg_ticks_to_ns(&ref, t0));
    double off = d / (n1 - n0) - 1;
    if (off < 0.05 && off > -0.05)
        return 1;
    fprintf(stderr, "test_clock: early: %.0f ns converted to %.0f ns (%+.1f%%)\n", n1 - n0, d,
            off * 100);
    return 0;
}

/* One try of a case in a child of its own (where the clock starts): 1 if
 * it passed. */
static int child_try(int (*once)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0)
        _exit(once() ? 0 : 1);
    int st = 0;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Up to three tries: a start-up pair whose reads were all preempted puts
 * one try's rate off; a rate that is wrong puts every try off. */
static void test_early(void)
{
    int ok = 0;
    for (int i = 0; i < 3 && !ok; i++)
        ok = child_try(early_once);
    CHECK_MSG(ok, "3 tries, each out of 5%%");
}

/* A 62.5 MHz counter: 16 ns a tick, pairs 1 ms after start-up. */
static uint64_t wait_at(uint64_t ns, uint64_t ticks, uint64_t base_width, uint64_t width)
{
    hcg_clock_pair b = {1000, 1000000, base_width}, p = {1000 + ticks, 1000000 + ns, width};
    return hcg_clock_rate_wait(&b, &p);
}

static void test_rate_wait(void)
{
    /* 200 us, 12500 ticks, against widths of 1 us: none. */
    CHECK_EQ(wait_at(200000, 12500, 63, 63), 0);
    /* 50 us against the same: 64 times both widths is 8064 ticks, 4939
     * more at 16 ns. */
    uint64_t w = wait_at(50000, 3125, 63, 63);
    CHECK_MSG(w >= 79000 && w <= 79100, "50 us after: %llu ns", (unsigned long long)w);
    /* Narrow pairs 10 us after start-up: the 100 us of any rate. */
    CHECK_EQ(wait_at(10000, 625, 1, 1), 90000);
    /* A start-up pair 4000 ticks (64 us) wide: 64 times the widths. */
    w = wait_at(200000, 12500, 4000, 63);
    CHECK_MSG(w >= 3960000 && w <= 3961000, "wide start-up pair: %llu ns", (unsigned long long)w);
    /* Widths no wait would make small: up to 20 ms after start-up. */
    CHECK_EQ(wait_at(1000000, 62500, (uint64_t)1 << 32, (uint64_t)1 << 32), 19000000);
    CHECK_EQ(wait_at(20000000, 1250000, (uint64_t)1 << 32, 63), 0);
    /* A counter that has not moved, a clock that went back: no rate. */
    CHECK_EQ(wait_at(10000, 0, 1, 1), 100000);
    hcg_clock_pair b = {1000, 1000000, 1}, p = {2000, 900000, 1};
    CHECK_EQ(hcg_clock_rate_wait(&b, &p), 100000);
}

static uint64_t real_ns(void)
{
    return hcg_wait_clock_ns(); /* the kernel's, never faked */
}

static int estimate_once(void)
{
    hcg_clock_init();
    uint64_t t0 = real_ns();
    double first = hcg_clock_rate_estimate();
    for (int i = 0; i < 1000; i++)
        hcg_clock_rate_estimate();
    uint64_t took = real_ns() - t0;
    int ok = 1;
    if (took > 5000000) {
        fprintf(stderr, "test_clock: estimate: 1001 estimates took %llu ns\n",
                (unsigned long long)took);
        ok = 0;
    }
    double unknown = 1.0; /* a TSC's; the generic timer's own frequency */
#if defined(__aarch64__)
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    unknown = 1e9 / (double)hz;
#endif
    if (first != unknown && real_ns() - t0 < 50000) { /* (a slow first call may pass 100 us) */
        fprintf(stderr, "test_clock: estimate: %.6f at start-up, not %.6f\n", first, unknown);
        ok = 0;
    }
    hcg_clock_ref_t ref;
    hcg_clock_ref(&ref); /* waits for a rate */
    double est = hcg_clock_rate_estimate();
    if (est != ref.ns_per_tick) {
        fprintf(stderr, "test_clock: estimate: %.9f, the reference's rate %.9f\n", est,
                ref.ns_per_tick);
        ok = 0;
    }
    return ok;
}

static void test_estimate(void)
{
    int ok = 0;
    for (int i = 0; i < 3 && !ok; i++)
        ok = child_try(estimate_once);
    CHECK_MSG(ok, "3 tries, each failed");
}

static void test_frozen(void)
{
    struct timespec a, b, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &a);
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (a.tv_sec != b.tv_sec || a.tv_nsec != b.tv_nsec) {
        CHECK_MSG(0, "CLOCK_MONOTONIC moves: run with the frozen-clock library preloaded");
        return;
    }
    uint64_t start = real_ns();
    hcg_clock_init();
    hcg_clock_ref_t ref;
    while (real_ns() - start < 25000000) /* past the first 20 ms */
        hcg_clock_ref(&ref);
    uint64_t t0 = real_ns();
    for (int i = 0; i < 200; i++)
        hcg_clock_ref(&ref);
    uint64_t took = real_ns() - t0;
    CHECK_MSG(took < 20000000, "200 references took %llu ns", (unsigned long long)took);
}

static void test_preempted(void)
{
    hcg_clock_init();
    interrupt_every_50us(1);
    const uint64_t slack = 50 * 1000; /* ns */
    unsigned samples = 0, off = 0;
    uint64_t worst = 0;
    /* Until 400 interrupts (each lands between a pair's two reads now and
     * then), or 20 s. */
    uint64_t until = hcg_now_ns() + 20000000000ull;
    while (interrupts < 400 && hcg_now_ns() < until) {
        uint64_t w0 = hcg_now_ns(), t = hcg_ticks(), w1 = hcg_now_ns();
        hcg_clock_ref_t ref;
        hcg_clock_ref(&ref);
        if (w1 - w0 > slack) /* this sample's own reads were interrupted */
            continue;
        samples++;
        uint64_t ns = hcg_ticks_to_ns(&ref, t);
        uint64_t miss = ns + slack < w0 ? w0 - ns : ns > w1 + slack ? ns - w1 : 0;
        if (miss) {
            off++;
            worst = miss > worst ? miss : worst;
        }
    }
    interrupt_every_50us(0);
    CHECK_MSG(interrupts >= 400, "only %d interrupts in 20 s", (int)interrupts);
    CHECK_MSG(samples > 1000, "only %u samples not interrupted", samples);
    CHECK_MSG(off == 0, "%u of %u converted times off by up to %llu ns", off, samples,
              (unsigned long long)worst);
}

static void test_ordered(void)
{
    enum { MAX = 1 << 16 };
    static uint64_t taken[MAX];
    hcg_clock_init();
    interrupt_every_50us(1);
    uint64_t last_ns = 0, worst = 0;
    unsigned n = 0, back = 0, drains = 0;
    uint64_t until = hcg_now_ns() + 3000000000ull;
    while (hcg_now_ns() < until && drains < 400) {
        /* What a thread does between two drains (1 to 20 ms: the
         * collector's pace), then the drain: its reference, then the
         * ticks taken before it converted through it, in order. */
        uint64_t drain_at = hcg_now_ns() + 1000000 * (1 + drains % 20);
        unsigned k = 0;
        while (k < MAX && hcg_now_ns() < drain_at) {
            taken[k++] = hcg_ticks();
            for (volatile int spin = 0; spin < 2000; spin++)
                ;
        }
        hcg_clock_ref_t ref;
        hcg_clock_ref(&ref);
        drains++;
        for (unsigned i = 0; i < k; i++, n++) {
            uint64_t ns = hcg_ticks_to_ns(&ref, taken[i]);
            if (ns < last_ns) {
                back++;
                worst = last_ns - ns > worst ? last_ns - ns : worst;
            }
            last_ns = ns;
        }
    }
    interrupt_every_50us(0);
    CHECK_MSG(drains >= 100, "only %u drains", drains);
    CHECK_MSG(back == 0, "%u of %u converted times before the one before them, by up to %llu ns",
              back, n, (unsigned long long)worst);
}

int main(int argc, char **argv)
{
    static const check_case cases[] = {
        CHECK_CASE(early), /* first, in children: the clock starts in each */
        CHECK_CASE(rate_wait),
        CHECK_CASE(estimate),
        CHECK_CASE_NAMED_ONLY(frozen), /* tests/e2e/resource: with frozenclock */
        CHECK_CASE(preempted),
        CHECK_CASE(ordered),
    };
    return check_main("test_clock", CHECK_CASES(cases), argc, argv);
}
