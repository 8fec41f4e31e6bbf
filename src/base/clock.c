/* Clocks. Events are stamped with a raw counter (the TSC on x86-64,
 * CNTVCT_EL0 on aarch64): reading it is a single instruction, where
 * clock_gettime may be a system call in a virtual machine whose clock
 * source the vDSO cannot read. Counts become CLOCK_MONOTONIC nanoseconds
 * when the collector drains the events, from two reference points taken
 * with clock_gettime, so no calibration delay is ever paid. Without an
 * invariant counter, ticks are clock_gettime nanoseconds. */
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "base/base.h"

uint64_t hcg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC from the kernel itself, for the bounds of hcguard's own
 * waits (flow control's 100 ms and 2 s): a clock_gettime that a preloaded
 * library fakes (libfaketime's frozen time) would keep them from ever
 * ending. Rare paths only: a system call. */
uint64_t hcg_wait_clock_ns(void)
{
    struct timespec ts;
    if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) != 0)
        return hcg_now_ns();
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int use_counter;
static atomic_int ready;
static hcg_clock_pair base;
static uint64_t started_ns; /* hcg_wait_clock_ns at start-up */
/* Ticks: a clock read that was not preempted. 4096 on x86-64 (1.3 to
 * 2 us of the TSC); 2 us of an Arm generic timer, which may run at only
 * 62.5 MHz (where 4096 ticks are 65 us: a read preempted for 60 us looked
 * tight). */
static uint64_t widest_ok = 4096;
/* The estimate before any rate: 1.0 for a TSC (1 GHz or more: errs
 * short), the generic timer's own frequency on Arm. */
static double rate_unknown = 1.0;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int counter_is_invariant(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1; /* invariant TSC */
#elif defined(__aarch64__)
    return 1; /* the generic timer's virtual count is architecturally constant */
#else
    return 0;
#endif
}

atomic_int hcg_g_clock_counter;
_Atomic uint32_t hcg_g_clock_epoch;
/* The epochs given so far: never given twice, not even after a stop or in
 * a fork child (which keeps its parent's count), so that no thread's
 * stamp taken at an old epoch can pass for one taken at the new. */
static _Atomic uint32_t epochs_given;

void hcg_clock_epoch_next(void)
{
    uint32_t e;
    do
        e = atomic_fetch_add_explicit(&epochs_given, 1, memory_order_relaxed) + 1;
    while (e == 0 || e == HCG_EPOCH_NONE);
    atomic_store_explicit(&hcg_g_clock_epoch, e, memory_order_relaxed);
}

void hcg_clock_epoch_stop(void)
{
    atomic_store_explicit(&hcg_g_clock_epoch, 0, memory_order_relaxed);
}

/* The counter and the clock read together: the counter read before and
 * after the clock, a few times, and the tightest pair kept (the counter at
 * its middle). A thread preempted between two reads would otherwise pair
 * a clock with a count from long before it, and every time converted from
 * that pair (a drain's worth of events, or the rate itself when it is the
 * start-up pair) would move by as much: two host functions run one after
 * the other could then overlap in the trace. The width kept says how far
 * the count may be off (hcg_clock_rate_wait allows for it). */
static void read_pair(hcg_clock_pair *p)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8 && best > widest_ok; i++) {
        uint64_t t0 = hcg_ticks_counter(), n = hcg_now_ns(), t1 = hcg_ticks_counter();
        if (t1 >= t0 && t1 - t0 < best) {
            best = t1 - t0;
            p->tick = t0 + best / 2;
            p->ns = n;
        }
    }
    if (best == UINT64_MAX) { /* the counter went backwards each time: not used */
        p->tick = hcg_ticks_counter();
        p->ns = hcg_now_ns();
    }
    p->width = best < ((uint64_t)1 << 32) ? best : (uint64_t)1 << 32; /* no overflow */
}

static void setup(void)
{
    use_counter = counter_is_invariant();
    started_ns = hcg_wait_clock_ns();
#if defined(__aarch64__)
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    if (hz / 500000 > 2)
        widest_ok = hz / 500000;
    if (hz)
        rate_unknown = 1e9 / (double)hz;
#endif
    if (use_counter)
        read_pair(&base);
    else
        base.ns = hcg_now_ns();
    atomic_store_explicit(&ready, 1, memory_order_release);
    atomic_store_explicit(&hcg_g_clock_counter, use_counter, memory_order_release);
}

void hcg_clock_init(void)
{
    pthread_once(&once, setup);
}

uint64_t hcg_ticks_slow(void)
{
    if (HCG_UNLIKELY(!atomic_load_explicit(&ready, memory_order_acquire)))
        hcg_clock_init();
    return use_counter ? hcg_ticks_counter() : hcg_now_ns();
}

/* The rate is measured over everything since start-up, so it only gets
 * better. It needs RATE_MIN_NS of it, and ticks enough that the two
 * pairs' widths are a small part of them (RATE_WIDTHS times both: the
 * rate then errs by 1/128 at most): a reference asked for sooner (a
 * program that drains, or ends, within its first 100 us; a start-up pair
 * read while the machine was busy) waits for them, up to RATE_MAX_NS,
 * rather than take 1 tick for 1 ns or a rate off by half. Only in the
 * first RATE_MAX_NS, by a clock no preloaded library fakes (a frozen
 * clock_gettime never shows them pass); nanosleep is safe in the signal
 * handler that may drain at a death. */
#define RATE_MIN_NS 100000u
#define RATE_MAX_NS 20000000u
#define RATE_WIDTHS 64u

uint64_t hcg_clock_rate_wait(const hcg_clock_pair *b, const hcg_clock_pair *p)
{
    uint64_t ns = p->ns > b->ns ? p->ns - b->ns : 0;
    if (ns >= RATE_MAX_NS)
        return 0;
    uint64_t need = ns < RATE_MIN_NS ? RATE_MIN_NS - ns : 0;
    uint64_t want = RATE_WIDTHS * (b->width + p->width); /* ticks */
    if (ns == 0 || p->tick <= b->tick) { /* no rate yet, however rough */
        need = need > RATE_MIN_NS ? need : RATE_MIN_NS;
    } else if (p->tick - b->tick < want) { /* at the rate seen so far */
        uint64_t ticks = p->tick - b->tick;
        uint64_t more = (uint64_t)((double)(want - ticks) * ((double)ns / (double)ticks)) + 1;
        need = more > need ? more : need;
    }
    return need < RATE_MAX_NS - ns ? need : RATE_MAX_NS - ns;
}

/* The rate of the last reference that had no need to wait, as the bits
 * of a double (0: none yet): hcg_clock_rate_estimate's. */
static _Atomic uint64_t settled_bits;

void hcg_clock_ref(hcg_clock_ref_t *r)
{
    hcg_clock_init();
    hcg_clock_pair p = {0, 0, 0};
    uint64_t wait = 0;
    if (use_counter) {
        read_pair(&p);
        for (int i = 0; i < 4 && (wait = hcg_clock_rate_wait(&base, &p)) != 0 &&
                        hcg_wait_clock_ns() - started_ns < RATE_MAX_NS;
             i++) {
            struct timespec ts = {(time_t)(wait / 1000000000u), (long)(wait % 1000000000u)};
            nanosleep(&ts, NULL);
            read_pair(&p);
        }
    } else {
        p.ns = hcg_now_ns();
    }
    r->tick = p.tick;
    r->ns = p.ns;
    r->ns_per_tick = 1.0;
    if (use_counter && p.tick > base.tick && p.ns > base.ns) {
        r->ns_per_tick = (double)(p.ns - base.ns) / (double)(p.tick - base.tick);
        if (hcg_clock_rate_wait(&base, &p) == 0) {
            uint64_t bits;
            memcpy(&bits, &r->ns_per_tick, sizeof bits);
            atomic_store_explicit(&settled_bits, bits, memory_order_relaxed);
        }
    }
}

double hcg_clock_rate_estimate(void)
{
    uint64_t bits = atomic_load_explicit(&settled_bits, memory_order_relaxed);
    double rate;
    if (bits) {
        memcpy(&rate, &bits, sizeof rate);
        return rate;
    }
    hcg_clock_init();
    if (!use_counter)
        return 1.0;
    uint64_t t = hcg_ticks_counter(), ns = hcg_now_ns();
    if (t <= base.tick || ns < base.ns + RATE_MIN_NS)
        return rate_unknown;
    return (double)(ns - base.ns) / (double)(t - base.tick);
}

uint64_t hcg_ticks_to_ns(const hcg_clock_ref_t *r, uint64_t t)
{
    if (!use_counter)
        return t;
    double d = ((double)t - (double)r->tick) * r->ns_per_tick;
    return (uint64_t)((double)r->ns + d);
}
