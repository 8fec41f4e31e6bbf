/* Per-thread event rings and the collector that drains them.
 *
 * Each thread that produces events (the driver's callback threads, and
 * application threads that report findings) owns one single-producer,
 * single-consumer ring. The collector thread is the only consumer; a ring
 * that is full drops the event and counts it: the driver's thread never
 * waits for hcguard. */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hcg.h"

#define RING_CAP 4096 /* events; a power of two */
#define COLLECT_INTERVAL_NS 20000000L

/* Producer and consumer indices on lines of their own, and the producer
 * reads the consumer's only when the ring looks full: in the common case a
 * push touches no line the collector writes. */
typedef struct ring {
    _Alignas(64) _Atomic uint64_t head; /* next slot the producer writes */
    uint64_t tail_seen;                 /* the producer's copy of tail */
    _Atomic uint64_t dropped;
    _Alignas(64) _Atomic uint64_t tail; /* next slot the consumer reads */
    /* What the owner runs now (fn, since when in ticks; 0: nothing), read
     * by the watchdog. On the producer's line: two stores per host function. */
    _Atomic uintptr_t run_fn;
    _Atomic uint64_t run_since;
    _Atomic uint32_t run_tid;
    uint64_t reported_since;            /* collector: run_since already reported */
    _Alignas(64) atomic_int owned;      /* a live thread produces into it */
    struct ring *next;                  /* list of all rings; only grows */
    hcg_event ev[RING_CAP];
} ring;

static _Atomic(ring *) rings;
static _Thread_local ring *mine;
static _Thread_local uint32_t tid_cache;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t coll_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t coll_cond = PTHREAD_COND_INITIALIZER;
static int coll_running, coll_stop;
static pthread_t coll_thread;

static atomic_uint_fast64_t seq;

uint64_t hcg_next_seq(void)
{
    return atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed) + 1;
}

const char *hcg_api_name(hcg_api a)
{
    static const char *names[HCG_API_COUNT] = {
        "cuLaunchHostFunc", "cuLaunchHostFunc_ptsz", "cuLaunchHostFunc_v2",
        "cuLaunchHostFunc_v2_ptsz", "cuGraphAddHostNode", "cuGraphHostNodeSetParams",
        "cuGraphExecHostNodeSetParams", "cuStreamAddCallback", "cuStreamAddCallback_ptsz",
        "cuGraphLaunch"};
    return (unsigned)a < HCG_API_COUNT ? names[a] : "unknown";
}

uint32_t hcg_gettid(void)
{
    if (HCG_UNLIKELY(tid_cache == 0))
        tid_cache = (uint32_t)syscall(SYS_gettid);
    return tid_cache;
}

static void release_ring(void *p)
{
    atomic_store_explicit(&((ring *)p)->owned, 0, memory_order_release);
}

static void make_key(void)
{
    pthread_key_create(&ring_key, release_ring);
}

/* A ring for this thread: one left by a thread that exited, or a new one.
 * Taking over a ring keeps its unread events: there is still one producer. */
static ring *acquire_ring(void)
{
    pthread_once(&key_once, make_key);
    ring *r;
    for (r = atomic_load(&rings); r; r = r->next) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&r->owned, &free_, 1))
            break;
    }
    if (!r) {
        r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED)
            return NULL;
        atomic_store(&r->owned, 1);
        ring *head = atomic_load(&rings);
        do
            r->next = head;
        while (!atomic_compare_exchange_weak(&rings, &head, r));
    }
    pthread_setspecific(ring_key, r);
    return r;
}

void hcg_event_push(const hcg_event *e)
{
    ring *r = mine;
    if (HCG_UNLIKELY(!r)) {
        r = mine = acquire_ring();
        if (!r)
            return;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (HCG_UNLIKELY(h - r->tail_seen >= RING_CAP)) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_seen >= RING_CAP) {
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
            return;
        }
    }
    r->ev[h & (RING_CAP - 1)] = *e;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

static void drain(ring *r, const hcg_clock_ref_t *ref)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    for (; t != h; t++) {
        hcg_event e = r->ev[t & (RING_CAP - 1)];
        e.t_enqueue = hcg_ticks_to_ns(ref, e.t_enqueue);
        if (e.kind != HCG_EV_REJECT) {
            e.t_start = hcg_ticks_to_ns(ref, e.t_start);
            e.t_end = hcg_ticks_to_ns(ref, e.t_end);
        }
        hcg_summary_event(&e);
        hcg_audit_event(&e);
        hcg_jsonl_event(&e);
        hcg_trace_event(&e);
    }
    atomic_store_explicit(&r->tail, t, memory_order_release);
}

void hcg_events_flush(void)
{
    hcg_clock_ref_t ref;
    pthread_mutex_lock(&drain_lock);
    hcg_clock_ref(&ref);
    for (ring *r = atomic_load(&rings); r; r = r->next)
        drain(r, &ref);
    pthread_mutex_unlock(&drain_lock);
}

void hcg_event_running(uintptr_t fn, uint64_t since)
{
    ring *r = mine;
    if (HCG_UNLIKELY(!r) && !(r = mine = acquire_ring()))
        return;
    atomic_store_explicit(&r->run_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&r->run_tid, hcg_gettid(), memory_order_relaxed);
    atomic_store_explicit(&r->run_since, since, memory_order_release);
}

void hcg_events_watch(uint64_t hang_ns)
{
    hcg_clock_ref_t ref;
    hcg_clock_ref(&ref);
    uint64_t now = hcg_ticks();
    for (ring *r = atomic_load(&rings); r; r = r->next) {
        uint64_t since = atomic_load_explicit(&r->run_since, memory_order_acquire);
        uintptr_t fn = atomic_load_explicit(&r->run_fn, memory_order_relaxed);
        if (!since || since == r->reported_since)
            continue;
        uint64_t t0 = hcg_ticks_to_ns(&ref, since), t1 = hcg_ticks_to_ns(&ref, now);
        if (t1 <= t0 || t1 - t0 < hang_ns)
            continue;
        r->reported_since = since;
        hcg_event e = {0};
        e.kind = HCG_EV_FINDING;
        e.reason = HCG_FIND_HANG;
        e.fn = fn;
        e.t_start = t0;
        e.t_end = t1;
        e.t_enqueue = t0;
        e.tid = atomic_load_explicit(&r->run_tid, memory_order_relaxed);
        hcg_summary_event(&e);
        hcg_audit_event(&e);
        hcg_jsonl_event(&e);
        hcg_trace_event(&e);
    }
}

uint64_t hcg_events_dropped(void)
{
    uint64_t n = 0;
    for (ring *r = atomic_load(&rings); r; r = r->next)
        n += atomic_load_explicit(&r->dropped, memory_order_relaxed);
    return n;
}

static void *collector(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&coll_lock);
    while (!coll_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += COLLECT_INTERVAL_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&coll_cond, &coll_lock, &ts);
        pthread_mutex_unlock(&coll_lock);
        hcg_events_flush();
        pthread_mutex_lock(&drain_lock);
        hcg_events_watch((uint64_t)(hcg_config_get()->hang_s * 1e9));
        pthread_mutex_unlock(&drain_lock);
        pthread_mutex_lock(&coll_lock);
    }
    pthread_mutex_unlock(&coll_lock);
    return NULL;
}

void hcg_collector_start(void)
{
    pthread_mutex_lock(&coll_lock);
    if (!coll_running) {
        coll_stop = 0;
        /* Keep application signals off the collector. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&coll_thread, NULL, collector, NULL) == 0)
            coll_running = 1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&coll_lock);
}

void hcg_collector_stop(void)
{
    pthread_mutex_lock(&coll_lock);
    int was = coll_running;
    coll_stop = 1;
    coll_running = 0;
    pthread_cond_signal(&coll_cond);
    pthread_mutex_unlock(&coll_lock);
    if (was)
        pthread_join(coll_thread, NULL);
    hcg_events_flush();
}

/* In a fork child only the forking thread exists: the collector is gone,
 * and the rings of other threads have no producer any more. */
void hcg_events_after_fork(void)
{
    pthread_mutex_init(&drain_lock, NULL);
    pthread_mutex_init(&coll_lock, NULL);
    pthread_cond_init(&coll_cond, NULL);
    coll_running = 0;
    coll_stop = 0;
    tid_cache = 0;
    /* The parent's events, and the host functions its threads were running
     * (the watchdog would call them hung), are the parent's. */
    for (ring *r = atomic_load(&rings); r; r = r->next) {
        if (r != mine)
            atomic_store(&r->owned, 0);
        atomic_store(&r->tail, atomic_load(&r->head));
        r->tail_seen = atomic_load(&r->head);
        atomic_store(&r->dropped, 0);
        atomic_store(&r->run_fn, 0);
        atomic_store(&r->run_since, 0);
        r->reported_since = 0;
    }
}
