/* The call pools: the calls the trampoline runs, allocated and returned
 * without locks, their sequence numbers and launch counts, and the flow
 * control that keeps one-shot launches from outrunning the collector.
 * Common path: no lock, no allocation, no system call. */
#include <errno.h>
#include <inttypes.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "run/run.h"

/* ---- the call pool ------------------------------------------------------
 * Each thread that allocates calls has a pool: a free list only it touches,
 * and a stack of calls given back by other threads (the driver's callback
 * thread, after a run), taken whole when the free list runs dry. So
 * allocating costs no atomic operation on a line another core writes.
 * Calls are carved from chunks that are never unmapped; pools of threads
 * that exited are taken over by new threads. */
#define CHUNK_CALLS 256


/* Static: a pool is small, and mapping a page for one would land in any
 * one-page hole of the address space. */
#define MAX_POOLS 1024
static hcg_pool pool_store_own[MAX_POOLS];
/* The flight recorder's copy when recording (the launch counts outlive
 * the process). */
static hcg_pool *pool_store = pool_store_own;
static atomic_uint pools_used;
static _Atomic(hcg_pool *) pools;
static pthread_key_t pool_key, give_back_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;
/* The keys were made: with none left (the program took them all), a
 * pool is not given back at its thread's exit, rather than set on a key
 * number that is the program's. */
static int pool_key_ok, give_back_key_ok;

/* At thread exit: the pool is another thread's to take from now on, and
 * this thread's pointer is cleared at once, so that a later destructor
 * that launches takes a pool of its own instead of sharing this one (its
 * free list is not thread-safe) with the thread that took it over. */
static void pool_exit(void *p)
{
    if (hcg_self.pool == p)
        hcg_self.pool = NULL;
    atomic_store_explicit(&((hcg_pool *)p)->in_launch, 0, memory_order_relaxed); /* cancelled in one */
    atomic_store_explicit(&((hcg_pool *)p)->owned, 0, memory_order_release);
}

static void pool_drained(uint64_t seq);
static void pool_lost(uint64_t seq);

static void give_back_exit(void *unused);

static void make_pool_key(void)
{
    pool_key_ok = pthread_key_create(&pool_key, pool_exit) == 0;
    give_back_key_ok = pthread_key_create(&give_back_key, give_back_exit) == 0;
    hcg_events_on_drained(pool_drained); /* before any call exists */
    hcg_events_on_lost(pool_lost);
}

/* Host functions and graph nodes handed to the driver unmeasured: no
 * call for them (MAX_POOLS threads launching at once, out of memory). */
static atomic_ullong unmeasured;

void hcg_count_unmeasured(void)
{
    atomic_fetch_add_explicit(&unmeasured, 1, memory_order_relaxed);
}

uint64_t hcg_unmeasured(void)
{
    return atomic_load_explicit(&unmeasured, memory_order_relaxed);
}

/* Host copies refused for want of a call (hcg_copy_callless). */
static atomic_ullong callless;

void hcg_count_callless(void)
{
    atomic_fetch_add_explicit(&callless, 1, memory_order_relaxed);
}

uint64_t hcg_copies_callless(void)
{
    return atomic_load_explicit(&callless, memory_order_relaxed);
}

/* More threads launch at once than there are pools: said once; each of
 * their launches the driver takes is counted unmeasured, and a thread
 * takes a pool when one is free again. */
static hcg_pool *pools_full(void)
{
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        hcg_problem("more than %d threads launch host functions at once: the launches of "
                    "further threads go to the driver unmeasured (not counted, timed or "
                    "logged; in guard mode their host copies are refused) until one of them exits",
                    MAX_POOLS);
    return NULL;
}

static hcg_pool *acquire_pool(void)
{
    pthread_once(&pool_key_once, make_pool_key);
    hcg_pool *p;
    for (p = atomic_load(&pools); p; p = p->next) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&p->owned, &free_, 1))
            break;
    }
    if (!p) {
        unsigned i = atomic_load(&pools_used);
        do
            if (i >= MAX_POOLS)
                return pools_full();
        while (!atomic_compare_exchange_weak(&pools_used, &i, i + 1));
        p = &pool_store[i];
        /* Zeroed here, not assumed so: in a fork child of a recording
         * process, the record is a private mapping of the parent's file,
         * whose pages the child has not written yet still show what the
         * parent writes there, pools it took after the fork included. */
        memset(p, 0, sizeof *p);
        p->index = i;
        p->seq = (uint64_t)(i + 1) << 44; /* the pool in each number's top bits */
        atomic_store(&p->owned, 1);
        hcg_pool *head = atomic_load(&pools);
        do
            p->next = head;
        while (!atomic_compare_exchange_weak(&pools, &head, p));
    }
    atomic_store_explicit(&p->tid, hcg_gettid(), memory_order_relaxed);
    if (pool_key_ok)
        pthread_setspecific(pool_key, p);
    return p;
}

hcg_pool *hcg_pool_mine(void)
{
    pthread_once(&pool_key_once, make_pool_key);
    if (!hcg_self.pool)
        hcg_self.pool = acquire_pool();
    return hcg_self.pool;
}

/* The membarrier(2) command that makes every thread's earlier stores
 * visible to the caller: private expedited (registered once), else the
 * global one (slower: an RCU grace period), else 0 (none: a kernel before
 * 4.3, or a sandbox that refuses it). -1: not asked yet. */
static atomic_int barrier_cmd = -1;

static int barrier(void)
{
    int cmd = atomic_load(&barrier_cmd);
    if (cmd < 0) {
        long have = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        cmd = 0;
        if (have > 0 && (have & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
            cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
        else if (have > 0 && (have & MEMBARRIER_CMD_GLOBAL))
            cmd = MEMBARRIER_CMD_GLOBAL;
        atomic_store(&barrier_cmd, cmd);
    }
    return cmd && syscall(SYS_membarrier, cmd, 0, 0) == 0 ? 0 : -1;
}

/* ---- markers: launch marks of threads without a pool ------------------ */
/* Threads that wait for events (and may join streams to captures) but
 * never launched: many in a framework (PyTorch's), and their waits must
 * not share a lock's line. A marker is taken at a thread's first such
 * call and kept until it exits; static, as the pools are. */
#define MAX_MARKERS 1024
typedef struct hcg_marker {
    _Alignas(64) _Atomic uint32_t in_launch; /* as a pool's (run.h) */
    atomic_int owned;
    _Atomic uint32_t tid;
    struct hcg_marker *next; /* all markers taken; the list only grows */
} hcg_marker;
static hcg_marker marker_store[MAX_MARKERS];
static atomic_uint markers_used;
static _Atomic(hcg_marker *) markers;
static pthread_key_t marker_key;
static pthread_once_t marker_key_once = PTHREAD_ONCE_INIT;
static int marker_key_ok; /* else no marker: it could not be given back */
/* This thread: its marker was given back (it exits), or one is being
 * taken (a signal handler's call inside that): it takes none (now). */
static _Thread_local unsigned char marker_gone, marker_taking;

static void marker_exit(void *m)
{
    marker_gone = 1; /* a later destructor's wait would keep one for ever */
    if (hcg_self.marker == m)
        hcg_self.marker = NULL;
    atomic_store_explicit(&((hcg_marker *)m)->in_launch, 0, memory_order_relaxed);
    atomic_store_explicit(&((hcg_marker *)m)->tid, 0, memory_order_relaxed); /* see reclaim */
    atomic_store_explicit(&((hcg_marker *)m)->owned, 0, memory_order_release);
}

static void make_marker_key(void)
{
    marker_key_ok = pthread_key_create(&marker_key, marker_exit) == 0;
}

/* A marker whose owner exited without giving it back (it took it in the
 * last round of its exit destructors, after which none runs again): its
 * tid names no thread of this process any more. Taken over by swapping
 * that tid for ours; a marker being taken (owned, tid still 0) or given
 * back (tid 0 first) is not one. */
static hcg_marker *reclaim_marker(void)
{
    uint32_t me = hcg_gettid();
    for (hcg_marker *m = atomic_load(&markers); m; m = m->next) {
        uint32_t t = atomic_load(&m->tid);
        if (!t || t == me || !atomic_load(&m->owned) ||
            syscall(SYS_tgkill, getpid(), (pid_t)t, 0) == 0 || errno != ESRCH)
            continue;
        if (atomic_compare_exchange_strong(&m->tid, &t, me)) {
            atomic_store_explicit(&m->in_launch, 0, memory_order_relaxed);
            return m;
        }
    }
    return NULL;
}

static hcg_marker *acquire_marker(void)
{
    hcg_marker *m;
    for (m = atomic_load(&markers); m; m = m->next) {
        int free_ = 0;
        if (!atomic_load_explicit(&m->owned, memory_order_relaxed) &&
            atomic_compare_exchange_strong(&m->owned, &free_, 1))
            break;
    }
    if (!m) {
        unsigned i = atomic_load(&markers_used);
        do
            if (i >= MAX_MARKERS) {
                m = reclaim_marker();
                if (m)
                    pthread_setspecific(marker_key, m);
                return m; /* NULL: the caller takes the lock instead */
            }
        while (!atomic_compare_exchange_weak(&markers_used, &i, i + 1));
        m = &marker_store[i];
        atomic_store(&m->owned, 1);
        hcg_marker *head = atomic_load(&markers);
        do
            m->next = head;
        while (!atomic_compare_exchange_weak(&markers, &head, m));
    }
    atomic_store_explicit(&m->in_launch, 0, memory_order_relaxed);
    atomic_store_explicit(&m->tid, hcg_gettid(), memory_order_relaxed);
    pthread_setspecific(marker_key, m);
    return m;
}

/* After none was free: the thread's calls before it looks again (each
 * look walks every marker). */
static _Thread_local unsigned marker_retry_in;

/* The caller holds the lock instead where this gives NULL: it is not
 * measured, only ordered, so nothing is lost. */
static _Atomic uint32_t *marker_mine(void)
{
    if (HCG_UNLIKELY(!hcg_self.marker)) {
        if (marker_retry_in) {
            marker_retry_in--;
            return NULL;
        }
        if (marker_gone || marker_taking)
            return NULL;
        marker_taking = 1;
        atomic_signal_fence(memory_order_seq_cst);
        if (hcg_self.marker) { /* a handler took one before the flag was up */
            marker_taking = 0;
            return &hcg_self.marker->in_launch;
        }
        pthread_once(&marker_key_once, make_marker_key);
        hcg_marker *m = marker_key_ok ? acquire_marker() : NULL;
        hcg_self.marker = m;
        atomic_signal_fence(memory_order_seq_cst);
        marker_taking = 0;
        if (!m) {
            marker_retry_in = 4096;
            return NULL;
        }
    }
    return &hcg_self.marker->in_launch;
}

_Atomic uint32_t *hcg_mark_mine(void)
{
    if (HCG_LIKELY(hcg_self.pool))
        return &hcg_self.pool->in_launch;
    return marker_mine();
}

uint32_t hcg_marks_mine(void)
{
    hcg_pool *p = hcg_self.pool;
    hcg_marker *m = hcg_self.marker;
    return (p ? atomic_load_explicit(&p->in_launch, memory_order_relaxed) : 0) +
           (m ? atomic_load_explicit(&m->in_launch, memory_order_relaxed) : 0);
}

/* How long a begin waits for one launch before it gives up on it. */
#define SETTLE_NS 2000000000ull

/* One thread's mark (a pool's or a marker's), as settle_one reads it. */
typedef struct mark_of {
    _Atomic uint32_t *in_launch;
    atomic_int *owned;
    _Atomic uint32_t *tid;
} mark_of;

static int still_in_launch(mark_of p)
{
    return atomic_load_explicit(p.in_launch, memory_order_acquire) &&
           atomic_load_explicit(p.owned, memory_order_relaxed);
}

static uint64_t mono_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* Wait for p's launch to have its answer, until deadline (ns); -1 past
 * it (given up on: the caller says how many). */
static int settle_one(mark_of p, uint64_t deadline)
{
    for (unsigned spins = 0; still_in_launch(p); spins++) {
        if (spins < 64) {
            sched_yield();
            continue;
        }
        if (mono_ns() > deadline)
            return -1;
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
    return 0;
}

/* Without membarrier(2): time for the marks stored before the flag was
 * set to be seen (a store buffer drains in far less; a thread switched
 * out drains it at the switch). Not a guarantee of the memory model, so
 * the flag then stays set for good; but the launches and waits under way
 * are waited for, not let through unseen. The whole pause, whatever
 * signals come (a profiler's timer). */
#define UNFENCED_PAUSE_NS 1000000L

static void pause_for_marks(void)
{
    struct timespec left = {0, UNFENCED_PAUSE_NS};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

/* The marks of every other thread's calls, waited for SETTLE_NS in all
 * (not each: a begin holds the lock to write meanwhile). This thread's
 * own marks, left by a jump out of a call (a begin from a handler inside
 * one is refused before this), cannot be waited for: -1, after the
 * others. */
int hcg_launches_settle(void)
{
    hcg_pool *mine = hcg_self.pool;
    hcg_marker *own = hcg_self.marker;
    int rc = hcg_marks_mine() ? -1 : 0;
    if (barrier() != 0) {
        pause_for_marks();
        rc = -1;
    }
    /* Each launch marked now read the flag before it was set, or will go
     * to the lock once it reads it set: either way its mark goes soon. */
    uint64_t deadline = mono_ns() + SETTLE_NS;
    uint32_t stuck = 0, who = 0;
    for (hcg_pool *p = atomic_load(&pools); p; p = p->next)
        if (p != mine && settle_one((mark_of){&p->in_launch, &p->owned, &p->tid}, deadline) != 0)
            stuck++, who = atomic_load_explicit(&p->tid, memory_order_relaxed);
    for (hcg_marker *m = atomic_load(&markers); m; m = m->next)
        if (m != own && settle_one((mark_of){&m->in_launch, &m->owned, &m->tid}, deadline) != 0)
            stuck++, who = atomic_load_explicit(&m->tid, memory_order_relaxed);
    if (stuck) {
        hcg_problem("a capture began while %" PRIu32 " host function launch(es) or event "
                    "wait(s) (of thread %" PRIu32 "%s) had been under way for over 2 s (left by "
                    "a jump out of one, or blocked in the driver): they are not waited for, "
                    "and from now on every launch asks whether its stream captures",
                    stuck, who, stuck > 1 ? ", and others" : "");
        rc = -1;
    }
    return rc;
}

uint32_t hcg_seq_launcher_tid(uint64_t seq)
{
    uint64_t i = seq >> 44; /* pool_seq: the pool's index + 1 */
    if (i == 0 || i > atomic_load_explicit(&pools_used, memory_order_acquire) || i > MAX_POOLS)
        return 0;
    return atomic_load_explicit(&pool_store[i - 1].tid, memory_order_relaxed);
}

size_t hcg_pool_store_bytes(void)
{
    return sizeof pool_store_own;
}

/* At start-up, before any pool is taken. */
void hcg_pool_use_store(void *mem)
{
    if (atomic_load(&pools_used) != 0)
        return;
    memset(mem, 0, sizeof pool_store_own);
    pool_store = mem;
}

uint64_t hcg_pool_store_launched(const void *store, hcg_fnkind kind)
{
    const hcg_pool *p = store;
    uint64_t t = 0;
    for (unsigned i = 0; i < MAX_POOLS; i++)
        t += atomic_load_explicit(&p[i].launched[kind], memory_order_relaxed);
    return t;
}

/* Application threads only: a system call, on the rare path. */
static int refill(hcg_pool *p)
{
    p->free = atomic_exchange_explicit(&p->returned, NULL, memory_order_acquire);
    if (p->free)
        return 1;
    hcg_call *chunk = mmap(NULL, CHUNK_CALLS * sizeof *chunk, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (chunk == MAP_FAILED)
        return 0;
    for (size_t i = 0; i < CHUNK_CALLS; i++) {
        chunk[i].owner = p;
        chunk[i].next_free = i + 1 < CHUNK_CALLS ? &chunk[i + 1] : NULL;
    }
    p->free = chunk;
    return 1;
}

/* The allocation's rare path (hcg_call_alloc): this thread has no pool
 * yet, or its free list ran dry. NULL if out of memory. */
hcg_call *hcg_call_alloc_slow(void)
{
    hcg_pool *p = hcg_self.pool;
    if (HCG_UNLIKELY(!p) && !(p = hcg_self.pool = acquire_pool()))
        return NULL;
    if (!p->free && !refill(p))
        return NULL;
    return hcg_call_alloc();
}

/* What a released call runs, should a graph still hold it: a loud stop,
 * not a copy with stale data. */
static void CUDA_CB freed_call(void *arg)
{
    (void)arg;
    static const char msg[] = "==hcguard== internal error: a host node ran after hcguard freed it\n";
    hcg_write_raw(msg, sizeof msg - 1);
    abort();
}

hcg_call *hcg_call_new(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_fnkind kind,
                       hcguard_status why, int wrapped)
{
    hcg_call *c = hcg_call_alloc();
    if (HCG_UNLIKELY(!c))
        return NULL;
    hcg_call_init(c, api, s, fn, user, kind, why, wrapped, hcg_ticks());
    hcg_call_nvtx(c);
    return c;
}

/* ---- flow control -----------------------------------------------------------
 * The driver's queue may hold any number of host functions that have not run
 * yet; each will leave an event in the ring of the thread that runs it. So
 * that no ring overflows when the collector is slower than the launches
 * (a million noop host functions from one thread), the one-shot launches of
 * all threads whose events have not been drained are kept below half a
 * ring: past three quarters of it, a launch waits for the collector to
 * bring them down to a half. That is the application's thread waiting,
 * never the driver's callback thread. A thread looks at the others' counts
 * only after its credit (its part of the room left) is spent.
 *
 * Host functions that do not run (they wait for something the launching
 * thread does later, or for the device) are not waited for long. When no
 * host function ran anywhere for FLOW_IDLE_MS (rejections and findings,
 * which need none to run, do not count), the launch goes on, provided
 * that every launch not yet drained, run at once, would still fit in a
 * ring: behind a host function that is merely slow, the queue then grows
 * no further than a ring holds. Past that, and whenever nothing is
 * drained for FLOW_STALL_MS (the log's disk hangs), the launch goes on
 * after FLOW_STALL_MS; events may then be dropped, counted. The launches
 * given up on are left out of the count until they are drained; those
 * whose event was dropped count as drained. */
#define FLOW_STALL_MS 2000
#define FLOW_IDLE_MS 100

/* p's one-shot launches: all it launched on streams, less those captured
 * into graphs (one count fewer on every launch's path). */
static uint64_t flow_launched(const hcg_pool *p)
{
    uint64_t made = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        made += atomic_load_explicit(&p->launched[k], memory_order_relaxed);
    return made - atomic_load_explicit(&p->captured, memory_order_relaxed);
}

/* p's one-shot launches not yet drained: all of them (debt), or less
 * those given up on (outstanding). */
static uint64_t flow_debt(const hcg_pool *p)
{
    uint64_t drained = atomic_load_explicit(&p->flow_drained, memory_order_relaxed) +
                       atomic_load_explicit(&p->flow_lost, memory_order_relaxed);
    uint64_t made = flow_launched(p);
    return made > drained ? made - drained : 0;
}

static uint64_t flow_given_up(const hcg_pool *p)
{
    uint64_t given = atomic_load_explicit(&p->flow_forgiven, memory_order_relaxed);
    uint64_t back = atomic_load_explicit(&p->flow_forgiven_drained, memory_order_relaxed) +
                    atomic_load_explicit(&p->flow_forgiven_lost, memory_order_relaxed);
    return given > back ? given - back : 0;
}

static uint64_t flow_outstanding(const hcg_pool *p)
{
    uint64_t debt = flow_debt(p), given = flow_given_up(p);
    return debt > given ? debt - given : 0;
}

/* Over all pools: launches outstanding, and (*debt) not yet drained. */
static uint64_t flow_sums(uint64_t *debt)
{
    uint64_t t = 0;
    *debt = 0;
    for (hcg_pool *p = atomic_load(&pools); p; p = p->next) {
        t += flow_outstanding(p);
        *debt += flow_debt(p);
    }
    return t;
}

/* p's launches drained, or dropped: its own progress. */
static uint64_t flow_done(const hcg_pool *p)
{
    return atomic_load_explicit(&p->flow_drained, memory_order_relaxed) +
           atomic_load_explicit(&p->flow_lost, memory_order_relaxed);
}

/* Stop waiting for p's launches not yet drained: they count again as
 * they are drained (pool_drained), not before. The mark first, so that a
 * drain after it is counted back; one in the same instant may be counted
 * either way (no fence on the collector's path for it): the count may be
 * off by the few launches drained then, which flow control's half-ring
 * margin absorbs. Only p's launches: another thread's stay counted until
 * it gives up on them itself. */
static uint64_t flow_give_up(hcg_pool *p)
{
    atomic_store_explicit(&p->flow_forgive_below, p->seq + 1, memory_order_seq_cst);
    uint64_t mine = flow_outstanding(p);
    hcg_owner_add(&p->flow_forgiven, mine);
    return mine;
}

/* Wait until the undrained launches of all threads are down to half the
 * room, or waiting stops helping (above). Returns them. Progress is this
 * thread's launches drained, or all threads' undrained ones (given up on
 * or not: a give-up drains nothing) at a new low: another thread's
 * drained and replaced by more, while these stay, is not. */
static uint64_t flow_wait_for_room(hcg_pool *p, uint64_t room, uint64_t all)
{
    uint64_t debt, runs = hcg_events_runs(), done = flow_done(p), lowest;
    uint64_t since = hcg_wait_clock_ns(), made_at = since;
    flow_sums(&lowest);
    while (all > room / 2) {
        hcg_events_wait_drain(hcg_events_drain_gen(), 1);
        uint64_t done_was = done, now = hcg_wait_clock_ns(), runs_now = hcg_events_runs();
        all = flow_sums(&debt);
        done = flow_done(p);
        if (done != done_was || debt < lowest)
            since = made_at = now, lowest = debt < lowest ? debt : lowest;
        if (runs_now != runs)
            made_at = now;
        runs = runs_now;
        int idle = now - made_at >= FLOW_IDLE_MS * 1000000ull && debt <= 2 * room - room / 2;
        if (idle || now - since >= FLOW_STALL_MS * 1000000ull) {
            hcg_debug("%" PRIu64 " host functions launched and not drained, none %s for %" PRIu64
                      " ms: launches go on without waiting for them", all,
                      idle ? "run" : "drained", (now - (idle ? made_at : since)) / 1000000);
            return all - flow_give_up(p);
        }
    }
    return all;
}

/* Set while execs are under way (how many: the collector stopped for
 * them, started again once each has failed): launches of other threads
 * wait for them. */
static atomic_int exec_window;

void hcg_pool_exec_window(int on)
{
    if (on)
        atomic_fetch_add(&exec_window, 1);
    else if (atomic_fetch_sub(&exec_window, 1) <= 0)
        atomic_fetch_add(&exec_window, 1); /* none was open */
}

/* The room once the collector an exec stopped runs again (the exec
 * failed), 0 if the window closed otherwise or FLOW_STALL_MS passed. */
static uint64_t flow_wait_exec(void)
{
    uint64_t room = 0;
    for (unsigned ms = 0; ms < FLOW_STALL_MS && !room && atomic_load(&exec_window); ms++) {
        struct timespec one = {0, 1000000};
        nanosleep(&one, NULL);
        room = hcg_events_flow_room();
    }
    return room;
}

static void flow_wait(hcg_pool *p)
{
    uint64_t room = hcg_events_flow_room();
    if (!room && !hcg_self.in_host_fn && atomic_load(&exec_window))
        room = flow_wait_exec();
    /* No collector (none yet, an exec's, exit's), or a launch inside a
     * host function: looked at again after a while, never given up on. */
    if (!room && !hcg_self.in_host_fn) {
        hcg_collector_retry(); /* one that could not be started */
        room = hcg_events_flow_room();
    }
    if (!room || hcg_self.in_host_fn) {
        p->credit = 1024;
        return;
    }
    unsigned used = atomic_load_explicit(&pools_used, memory_order_relaxed);
    uint64_t debt;
    uint64_t all = flow_sums(&debt);
    if (all >= room - room / 4)
        all = flow_wait_for_room(p, room, all);
    /* Half of what is left, shared among the threads that launch. */
    uint64_t left = room > all ? room - all : 0;
    p->credit = (int64_t)(left / (2 * (used ? used : 1))) + 1;
}

/* A launch has no cancellation point of its own: a cancel request that
 * comes while it waits here (nanosleep, a --debug message) waits too. */
__attribute__((noinline, cold)) void hcg_pool_flow_wait(hcg_pool *p)
{
    int cancel = hcg_nocancel_begin();
    flow_wait(p);
    hcg_nocancel_end(cancel);
}

/* The pool that numbered seq (its index + 1 in the top bits), or NULL. */
static hcg_pool *pool_of_seq(uint64_t seq)
{
    uint64_t i = seq >> 44;
    return i == 0 || i > MAX_POOLS ? NULL : &pool_store[i - 1];
}

/* The collector drained the event of the launch numbered seq (drains are
 * serialised: one writer). Counted back before counted drained, so that
 * a reader in between sees one launch too many, not too few. */
static void pool_drained(uint64_t seq)
{
    hcg_pool *p = pool_of_seq(seq);
    if (!p)
        return;
    if (seq < atomic_load_explicit(&p->flow_forgive_below, memory_order_relaxed))
        atomic_store_explicit(
            &p->flow_forgiven_drained,
            atomic_load_explicit(&p->flow_forgiven_drained, memory_order_relaxed) + 1,
            memory_order_relaxed);
    atomic_store_explicit(&p->flow_drained,
                          atomic_load_explicit(&p->flow_drained, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* The event of the launch numbered seq was dropped (its ring full; any
 * thread): it is never to be drained, and counts as if it had been. */
static void pool_lost(uint64_t seq)
{
    hcg_pool *p = pool_of_seq(seq);
    if (!p)
        return;
    if (seq < atomic_load_explicit(&p->flow_forgive_below, memory_order_relaxed))
        atomic_fetch_add_explicit(&p->flow_forgiven_lost, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->flow_lost, 1, memory_order_relaxed);
}

static uint64_t pool_launched(hcg_fnkind kind)
{
    uint64_t t = 0;
    for (hcg_pool *p = atomic_load(&pools); p; p = p->next)
        t += atomic_load_explicit(&p->launched[kind], memory_order_relaxed);
    return t;
}

void hcg_call_poison(hcg_call *c)
{
    c->fn = freed_call;
    c->kind = HCG_FN_ORDINARY;
}

void hcg_call_free_local(hcg_call *c)
{
    c->next_free = c->owner->free;
    c->owner->free = c;
}

/* The chain head..tail onto p's stack of returned calls. */
static void push_returned(hcg_pool *p, hcg_call *head, hcg_call *tail)
{
    hcg_call *old = atomic_load_explicit(&p->returned, memory_order_relaxed);
    do
        tail->next_free = old;
    while (!atomic_compare_exchange_weak_explicit(&p->returned, &old, head, memory_order_release,
                                                  memory_order_relaxed));
}

/* Writes only next_free: the call's line stays as the launching thread
 * left it, give or take that word. */
void hcg_call_release(hcg_call *c)
{
    push_returned(c->owner, c, c);
}

/* ---- giving calls back in batches ------------------------------------------
 * The callback thread gives a stream launch's call back after it ran. One
 * at a time, a launching thread that the callback thread keeps up with
 * would find its free list empty at nearly every launch and take the one
 * call just given back: an atomic exchange on a line the other core has
 * just written, then a miss on the call's own line. So each thread gives
 * back up to GIVE_BATCH calls of one pool at once (and what it holds when
 * the next call is another pool's, or when it exits). A launching thread
 * that runs dry meanwhile takes a new chunk: at most GIVE_BATCH - 1 calls
 * a thread are held back. */
#define GIVE_BATCH 32

typedef struct give_back {
    hcg_pool *pool;
    hcg_call *head, *tail;
    unsigned n;
    int keyed; /* its exit hook is set */
} give_back;

static _Thread_local give_back pending;

static void give_back_flush(give_back *g)
{
    if (g->n)
        push_returned(g->pool, g->head, g->tail);
    g->head = g->tail = NULL;
    g->n = 0;
}

static void give_back_exit(void *unused)
{
    (void)unused;
    give_back_flush(&pending);
}

void hcg_call_release_batched(hcg_call *c)
{
    give_back *g = &pending;
    hcg_pool *p = c->owner;
    if (HCG_UNLIKELY(g->pool != p)) {
        give_back_flush(g);
        g->pool = p;
        if (!g->keyed) {
            g->keyed = 1;
            if (give_back_key_ok) /* else kept at this thread's exit */
                pthread_setspecific(give_back_key, g); /* non-NULL: the hook runs */
        }
    }
    c->next_free = g->head;
    if (!g->head)
        g->tail = c;
    g->head = c;
    if (++g->n >= GIVE_BATCH)
        give_back_flush(g);
}

/* ---- launch counts --------------------------------------------------------
 * graphs as host nodes (made, or set on a node). */
static _Atomic uint64_t nodes_launched_own[HCG_FN_KIND_COUNT];
static _Atomic uint64_t nodes_made_own;

/* In the flight recorder when recording (they outlive the process). */
static _Atomic uint64_t *nodes_launched(void)
{
    return hcg_g_flight ? hcg_g_flight->nodes_launched : nodes_launched_own;
}

static _Atomic uint64_t *nodes_made(void)
{
    return hcg_g_flight ? &hcg_g_flight->nodes_made : &nodes_made_own;
}

/* Launches captured into graphs. */
static _Atomic uint64_t captured_launches;

void hcg_count_captured(void)
{
    atomic_fetch_add_explicit(&captured_launches, 1, memory_order_relaxed);
}

uint64_t hcg_captured_launches(void)
{
    return atomic_load_explicit(&captured_launches, memory_order_relaxed);
}

uint64_t hcg_nodes_made(void)
{
    return atomic_load(nodes_made());
}

/* Launched on streams (counted in the pools) and set on graph nodes. */
uint64_t hcg_launched_of(hcg_fnkind k)
{
    return atomic_load_explicit(&nodes_launched()[k], memory_order_relaxed) +
           pool_launched(k);
}

void hcg_count_node(hcg_fnkind kind)
{
    atomic_fetch_add_explicit(&nodes_launched()[kind], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(nodes_made(), 1, memory_order_relaxed);
}

/* In a fork child only the forking thread exists, and what was launched
 * before is the parent's. */
void hcg_pool_after_fork(void)
{
    atomic_store(&exec_window, 0); /* the execs were other threads' */
    for (hcg_marker *m = atomic_load(&markers); m; m = m->next)
        if (m != hcg_self.marker) {
            atomic_store(&m->owned, 0);
            atomic_store(&m->in_launch, 0);
            atomic_store(&m->tid, 0);
        }
    for (hcg_pool *p = atomic_load(&pools); p; p = p->next) {
        if (p != hcg_self.pool) {
            atomic_store(&p->owned, 0);
            atomic_store(&p->in_launch, 0);
        } /* this thread's launches may be under way (a fork from a signal
           * handler inside one): they take their marks off as they end */
        /* The free calls are left behind: under hcguard run a pool is in
         * the flight record, whose page the parent may have written since
         * the fork (a chunk mapped after it, calls given back that are not
         * free here) until this write made it the child's own. */
        p->free = NULL;
        atomic_store(&p->returned, NULL);
        for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
            atomic_store(&p->launched[k], 0);
        atomic_store(&p->captured, 0);
        atomic_store(&p->flow_forgiven, 0);
        p->credit = 0;
        atomic_store(&p->flow_drained, 0);
        atomic_store(&p->flow_forgiven_drained, 0);
        atomic_store(&p->flow_forgive_below, 0);
        atomic_store(&p->flow_lost, 0);
        atomic_store(&p->flow_forgiven_lost, 0);
    }
    atomic_store(&unmeasured, 0);
    atomic_store(&callless, 0);
    atomic_store(&exec_window, 0);
    atomic_store(&barrier_cmd, -1); /* a new process: registered anew */
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        atomic_store(&nodes_launched_own[k], 0);
    atomic_store(&nodes_made_own, 0);
    if (hcg_self.pool)
        atomic_store(&hcg_self.pool->tid, hcg_gettid()); /* the child's own thread */
}
