/*
 * The call pools (src/run/pool.c): calls given back by another thread
 * return to the pool they came from, in batches (hcg_call_release_batched)
 * and at that thread's exit, so that a launching thread never needs a new
 * chunk while its calls sit unused elsewhere; and the launch path's
 * last-answer cache of hcg_recognize (src/check/recognize.c) follows a
 * registration made after it; a capture's begin waits for the launches
 * marked (hcg_launches_settle), and not for ever.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hcg.h"
#include "../common/check.h"

enum { N = 250 }; /* not a whole number of batches: the rest waits for the exit */

typedef struct giver {
    hcg_call **calls;
    size_t n;
    hcg_call *other; /* given back after calls, from another pool (or NULL) */
} giver;

static void *give_back(void *p)
{
    giver *g = p;
    for (size_t i = 0; i < g->n; i++)
        hcg_call_release_batched(g->calls[i]);
    if (g->other)
        hcg_call_release_batched(g->other);
    return NULL;
}

static void give_from_thread(giver *g)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, give_back, g) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Allocate n calls on this thread, sorted by address. */
static void take(hcg_call **out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = hcg_call_new(HCG_API_LAUNCH_HOST_FUNC, NULL, NULL, NULL, HCG_FN_ORDINARY,
                              HCGUARD_OK, 0);
        REQUIRE(out[i] != NULL);
    }
    qsort(out, n, sizeof *out, cmp_ptr);
}

/* Every call given back by a thread that exited is this thread's again:
 * the next allocations are the same calls, no new chunk. */
static void test_batched_back_at_exit(void)
{
    static hcg_call *first[N], *again[N];
    /* Empty the free list first, so that what follows comes back from the
     * returned stack only. */
    hcg_call *c;
    size_t drained = 0;
    static hcg_call *rest[4096];
    take(first, N);
    while (hcg_self.pool && hcg_self.pool->free && drained < 4096 && (c = hcg_call_alloc()))
        rest[drained++] = c;
    giver g = {first, N, NULL};
    give_from_thread(&g);
    take(again, N);
    CHECK_EQ(memcmp(first, again, sizeof first), 0);
    for (size_t i = 0; i < N; i++)
        hcg_call_free_local(again[i]);
    for (size_t i = 0; i < drained; i++)
        hcg_call_free_local(rest[i]);
}

static void *take_one(void *p)
{
    *(hcg_call **)p = hcg_call_new(HCG_API_LAUNCH_HOST_FUNC, NULL, NULL, NULL, HCG_FN_ORDINARY,
                                   HCGUARD_OK, 0);
    return NULL;
}

/* A call of another pool given back flushes what the thread held of the
 * first: both pools get theirs. */
static void test_pool_switch_flushes(void)
{
    hcg_call *mine[3], *theirs = NULL;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, take_one, &theirs) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    REQUIRE(theirs != NULL);
    CHECK(theirs->owner != hcg_self.pool || hcg_self.pool == NULL);
    take(mine, 3);
    hcg_pool *p = mine[0]->owner;
    hcg_call *before = atomic_load(&p->returned);
    giver g = {mine, 3, theirs};
    give_from_thread(&g);
    size_t found = 0;
    for (hcg_call *r = atomic_load(&p->returned); r && r != before; r = r->next_free)
        for (int i = 0; i < 3; i++)
            found += r == mine[i];
    CHECK_EQ(found, (size_t)3);
    int theirs_back = 0;
    for (hcg_call *r = atomic_load(&theirs->owner->returned); r; r = r->next_free)
        theirs_back |= r == theirs;
    CHECK(theirs_back);
}

/* A copy's time stamp is reused only under the clock's epoch it was taken
 * in (hcg_copy_stamp): the epoch after the collector stopped and started
 * again (an exec that failed, a fork child) is a new one, never the one
 * the stamp was taken in, however few passes were made since. */
static void test_copy_stamp_epoch_not_reused(void)
{
    hcg_pool p;
    memset(&p, 0, sizeof p);
    hcg_g_stamp_every = HCG_STAMP_EVERY;
    uint64_t now, t;
    hcg_clock_epoch_next(); /* the collector asleep */
    CHECK(hcg_copy_stamp(&p, &t) != 0);
    CHECK(hcg_copy_stamp(&p, &now) == 0 && now == t); /* reused */
    hcg_clock_epoch_stop(); /* stopped (before an exec; a fork child) */
    hcg_clock_epoch_next(); /* started again, asleep */
    CHECK_MSG(hcg_copy_stamp(&p, &now) != 0, "a stamp from before the stop was reused");
    t = now;
    CHECK(hcg_copy_stamp(&p, &now) == 0 && now == t);
    hcg_clock_epoch_stop(); /* at work: no stamp reused, none kept for after */
    CHECK(hcg_copy_stamp(&p, &now) != 0);
    hcg_clock_epoch_next();
    CHECK(hcg_copy_stamp(&p, &now) != 0);
}

static void ordinary_fn(void *p)
{
    (void)p;
}

/* The thread's last answer must not outlive a registration. */
static void test_recognize_fast_follows_registration(void)
{
    CHECK_EQ(hcg_recognize_fast((void *)ordinary_fn), HCG_FN_ORDINARY);
    CHECK_EQ(hcg_recognize_fast((void *)ordinary_fn), HCG_FN_ORDINARY); /* from the cache */
    REQUIRE(hcguard_register_copy_fn((void *)ordinary_fn) == 0);
    CHECK_EQ(hcg_recognize_fast((void *)ordinary_fn), HCG_FN_COPY_REGISTERED);
    CHECK_EQ(hcg_recognize((void *)ordinary_fn), HCG_FN_COPY_REGISTERED);
}

/* ---- the capture begin's wait (hcg_launches_settle) ---------------------- */
typedef struct marker {
    atomic_int state; /* 1: marked (twice: a nested launch, once taken off), 2: told to go */
    int depth;
} marker;

static void *hold_marked(void *v)
{
    marker *m = v;
    hcg_pool *p = hcg_pool_mine();
    REQUIRE(p != NULL);
    for (int i = 0; i < m->depth; i++)
        hcg_launch_mark(p);
    hcg_launch_unmark(p); /* the nested one's: the outer mark stays */
    atomic_store(&m->state, 1);
    while (atomic_load(&m->state) != 2)
        usleep(1000);
    for (int i = 1; i < m->depth; i++)
        hcg_launch_unmark(p);
    return NULL;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A launch that stays marked (nested in one that was, then taken off;
 * left by a jump): the begin waits for it while it is marked, 2 s at most,
 * then gives up (-1: the flag stays set); one taken off in time is waited
 * for exactly; a begin whose own thread is marked (a signal handler's,
 * inside a launch) cannot wait. */
static void test_settle(void)
{
    if (hcg_launches_settle() != 0) {
        printf("settle: no membarrier here: nothing to wait with\n");
        return;
    }
    marker m = {0, 2};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, hold_marked, &m) == 0);
    while (atomic_load(&m.state) != 1)
        usleep(1000);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(hcg_launches_settle(), -1);
    double waited = seconds_since(&t0);
    CHECK_MSG(waited > 1.9 && waited < 10, "gave up after %.2f s", waited);
    atomic_store(&m.state, 2);
    REQUIRE(pthread_join(t, NULL) == 0);
    CHECK_EQ(hcg_launches_settle(), 0); /* taken off */

    marker q = {0, 1};
    REQUIRE(pthread_create(&t, NULL, hold_marked, &q) == 0);
    while (atomic_load(&q.state) != 1)
        usleep(1000);
    CHECK_EQ(hcg_launches_settle(), 0); /* depth 1: marked, then taken off */
    atomic_store(&q.state, 2);
    REQUIRE(pthread_join(t, NULL) == 0);

    hcg_pool *mine = hcg_pool_mine();
    REQUIRE(mine != NULL);
    hcg_launch_mark(mine);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(hcg_launches_settle(), -1);
    CHECK(seconds_since(&t0) < 1);
    hcg_launch_unmark(mine);
    CHECK_EQ(hcg_launches_settle(), 0);
    printf("settle: a marked launch waited for 2 s then given up (%.2f s), a nested mark "
           "kept, the begin's own thread not waited for\n", waited);
}

static const check_case cases[] = {
    CHECK_CASE(settle),
    CHECK_CASE(batched_back_at_exit),
    CHECK_CASE(pool_switch_flushes),
    CHECK_CASE(recognize_fast_follows_registration),
    CHECK_CASE(copy_stamp_epoch_not_reused),
};

int main(int argc, char **argv)
{
    return check_main("test_pool", CHECK_CASES(cases), argc, argv);
}
