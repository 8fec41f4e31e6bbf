/* Per-thread event rings and the collector that drains them.
 *
 * Each thread that produces events (the driver's callback threads, and
 * application threads that report findings) owns one single-producer,
 * single-consumer ring. The collector thread is the only consumer; a ring
 * that is full drops the event and counts it: the driver's thread never
 * waits for hcguard. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <stddef.h>
#include <unistd.h>

#include "events/events.h"

#define COLLECT_INTERVAL_NS 20000000L

/* Producer and consumer indices on lines of their own, and the producer
 * reads the consumer's only when the ring looks half full: in the common
 * case a push touches no line the collector writes. */
typedef struct hcg_ring {
    _Alignas(64) _Atomic uint64_t head; /* next slot the producer writes */
    uint64_t tail_seen;                 /* the producer's copy of tail */
    uint64_t check_at;                  /* producer: head at which to look at tail again */
    uint64_t cap;                       /* events; a power of two */
    _Atomic uint64_t dropped;
    /* The counting of the last event pushed: step_mark is (head << 2 | i)
     * while its step i is made, step_old that counter before it
     * (count_pushed). */
    _Atomic uint64_t step_mark, step_old;
    _Alignas(64) _Atomic uint64_t cnt[HCG_CNT_N]; /* the owner's exact counts */
    _Alignas(64) _Atomic uint64_t tail; /* next slot the consumer reads */
    /* What the owner runs now (fn, since when in ticks; 0: nothing), read
     * by the watchdog. */
    _Atomic uintptr_t run_fn;
    _Atomic(const void *) run_tag;
    _Atomic uint64_t run_since;
    _Atomic uint32_t run_tid;
    _Atomic uint64_t run_seq;       /* and the run's seq and stream */
    _Atomic uintptr_t run_stream;
    uint64_t reported_since;            /* collector: run_since already reported */
    _Alignas(64) atomic_int owned;      /* a live thread produces into it */
    struct hcg_ring *next;                  /* list of all rings; only grows */
    size_t map_bytes;
    /* The consumer's batch [tail, pend_to) being written to the files, and
     * where each file (by exec slot) ended before it (batch_begins): off
     * the lines the owner writes for every event. */
    _Atomic uint64_t pend_to;
    int64_t pend_off[HCG_SINK_SLOTS];
    /* Each event on two lines of its own: unaligned, each shared a line
     * with the next, which the producer then wrote while the collector
     * could be reading the one before. */
    _Alignas(64) hcg_event ev[];
} ring;
_Static_assert(offsetof(ring, ev) % 64 == 0 && sizeof(hcg_event) % 64 == 0,
               "events start on cache lines");
/* What the owner writes as each run begins (run_*) is one line. */
_Static_assert(offsetof(ring, run_stream) + sizeof(uintptr_t) - offsetof(ring, run_fn) <= 64 &&
                   offsetof(ring, run_fn) / 64 == offsetof(ring, run_stream) / 64,
               "the run_* fields share one cache line");

/* Counts the collector makes itself (slow and hung host functions). */
static _Atomic uint64_t coll_cnt_own[HCG_CNT_N];
/* The counts of events of threads that have no ring (push_ringless). */
static _Atomic uint64_t ringless_cnt[HCG_CNT_N];
static _Atomic uint64_t ringless_dropped;

/* In the flight recorder when recording (they outlive the process). */
static _Atomic uint64_t *coll_cnt_of(void)
{
    return hcg_g_flight ? hcg_g_flight->coll_cnt : coll_cnt_own;
}
/* Bumped to wake the collector (a futex word). */
static _Atomic uint32_t wake_word;
static atomic_int coll_asleep;
/* Bumped after every drain pass (a futex word for launches waiting). */
static _Atomic uint32_t drain_gen;
static atomic_int drain_waiters;
static atomic_int coll_live; /* a collector thread runs */

static _Atomic(ring *) rings;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint drain_owner; /* the thread holding drain_lock, 0 if none */
/* While the files are sealed for execs under way (hcg_events_seal_files:
 * how many), or written for the last time at exit (files_done), no drain
 * writes to them. Under drain_lock. */
static int files_sealed, files_done;

static int files_writable(void)
{
    return !files_sealed && !files_done;
}
static pthread_mutex_t coll_lock = PTHREAD_MUTEX_INITIALIZER;
static int coll_running;
/* Stops in force (execs under way, the exit): no start until each exec
 * that stopped it has failed (hcg_collector_resume). Under coll_lock. */
static int coll_held;
static atomic_int coll_stop;
static pthread_t coll_thread;
static atomic_int coll_failed; /* errno of a start that failed (said once), 0 */

static atomic_uint_fast64_t seq;

/* The next rejection's or finding's sequence number. */
static uint64_t next_seq(void)
{
    return atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed) + 1;
}

uint64_t hcg_event_next_seq(void)
{
    return next_seq();
}

void hcg_event_link_seq(uint64_t s)
{
    hcg_self.linked_seq = s;
}

uint32_t hcg_gettid_slow(void)
{
    hcg_self.tid = (uint32_t)syscall(SYS_gettid);
    return hcg_self.tid;
}

/* drain_lock, with its holder known (the signal path must not wait for
 * the thread it interrupted). A drain writes files and names functions
 * (open, read, write: cancellation points): a program thread draining
 * (hcg_events_flush, hcguard_get_stats, exit) is not cancelled inside,
 * which would leave the lock held; its state before, kept by the holder. */
static int drain_cancel;

static void drain_enter(void)
{
    int cancel = hcg_nocancel_begin();
    pthread_mutex_lock(&drain_lock);
    drain_cancel = cancel;
    atomic_store_explicit(&drain_owner, hcg_gettid(), memory_order_relaxed);
}

static void drain_leave(void)
{
    int cancel = drain_cancel;
    atomic_store_explicit(&drain_owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&drain_lock);
    hcg_nocancel_end(cancel);
}

/* At thread exit: the ring is another thread's to take from now on, and
 * this thread's own pointer is cleared at once, so that a later
 * destructor that launches takes a ring of its own rather than sharing
 * one with the thread that took this over. */
static void release_ring(void *p)
{
    if (hcg_self.ring == p)
        hcg_self.ring = NULL;
    atomic_store_explicit(&((ring *)p)->owned, 0, memory_order_release);
}

/* With no key left (the program took them all), a ring is not given
 * back at its thread's exit, rather than set on a key that is the
 * program's. */
static int ring_key_ok;

static void make_key(void)
{
    ring_key_ok = pthread_key_create(&ring_key, release_ring) == 0;
}

/* Events per ring: the largest power of two that HCGUARD_BUFFER holds. */
static uint64_t ring_cap(void)
{
    size_t bytes = hcg_config_get()->buffer_bytes;
    uint64_t cap = 1;
    while (cap * 2 * sizeof(hcg_event) + sizeof(ring) <= bytes)
        cap *= 2;
    return cap < 64 ? 64 : cap;
}

size_t hcg_events_ring_bytes(void)
{
    return sizeof(ring) + ring_cap() * sizeof(hcg_event);
}

/* In the flight recorder when recording (its events outlive the process),
 * else the process's own memory. */
static ring *new_ring(void)
{
    uint64_t cap = ring_cap();
    size_t bytes = sizeof(ring) + cap * sizeof(hcg_event);
    ring *r = hcg_flight_ring();
    if (r)
        memset(r, 0, sizeof *r); /* a record's ring may have served an image before exec */
    else
        r = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    r->cap = cap;
    r->check_at = cap / 2;
    r->map_bytes = bytes;
    return r;
}

/* A ring for this thread: one left by a thread that exited, or a new one.
 * Taking over a ring keeps its unread events and its counts: there is
 * still one producer, and one writer of each count. */
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
        if (!(r = new_ring()))
            return NULL;
        atomic_store(&r->owned, 1);
        ring *head = atomic_load(&rings);
        do
            r->next = head;
        while (!atomic_compare_exchange_weak(&rings, &head, r));
    }
    if (ring_key_ok)
        pthread_setspecific(ring_key, r);
    return r;
}

/* One writer per counter: a load and a store, no locked instruction. */
static inline void bump(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* What an event adds to the counts: at most 3 (counter, amount) steps. */
typedef struct cnt_step {
    unsigned idx;
    uint64_t add;
} cnt_step;

static unsigned event_steps(const hcg_event *e, cnt_step s[3])
{
    unsigned n = 0;
    switch (e->kind) {
    case HCG_EV_RUN:
        s[n++] = (cnt_step){HCG_CNT_RAN + (e->fnkind < HCG_FN_KIND_COUNT ? e->fnkind : 0), 1};
        if (hcg_fnkind_is_copy((hcg_fnkind)e->fnkind))
            s[n++] = (cnt_step){HCG_CNT_BYTES, e->bytes};
        break;
    case HCG_EV_SKIP:
        s[n++] = (cnt_step){HCG_CNT_SKIPPED + (e->reason < HCGUARD_STATUS_COUNT ? e->reason : 0),
                            1};
        if (e->flags & HCG_EVF_REPORTED)
            s[n++] = (cnt_step){HCG_CNT_SKIPPED_REPORTED, 1};
        break;
    case HCG_EV_REJECT:
        s[n++] = (cnt_step){HCG_CNT_REJECTED + (e->reason < HCGUARD_STATUS_COUNT ? e->reason : 0),
                            1};
        break;
    case HCG_EV_FINDING:
        s[n++] = (cnt_step){HCG_CNT_FINDING + (e->reason < HCG_FIND_COUNT ? e->reason : 0), 1};
        break;
    default:
        break;
    }
    if ((e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP) && e->graph)
        s[n++] = (cnt_step){HCG_CNT_GRAPH_RUNS, 1};
    return n;
}

/* An event dropped (its ring full): counted, nothing else. */
static void count_dropped(_Atomic uint64_t *cnt, const hcg_event *e)
{
    cnt_step s[3];
    for (unsigned i = 0, n = event_steps(e, s); i < n; i++)
        bump(&cnt[s[i].idx], s[i].add);
}

/* The event just published at head - 1, counted. A process killed in the
 * middle leaves the step it was at and that counter's value before it, so
 * that the launcher counts what is left of it (finish_counting): the
 * recovered counts hold every event the rings hold, once. Release stores:
 * each step's note is made before its counter, each counter before the
 * next note (a death stops the thread in program order). */
static inline void count_step(ring *r, uint64_t mark, unsigned idx, uint64_t add)
{
    uint64_t old = atomic_load_explicit(&r->cnt[idx], memory_order_relaxed);
    atomic_store_explicit(&r->step_old, old, memory_order_relaxed);
    atomic_store_explicit(&r->step_mark, mark, memory_order_release);
    atomic_store_explicit(&r->cnt[idx], old + add, memory_order_release);
}

static inline void count_pushed(ring *r, const hcg_event *e, uint64_t head)
{
    /* The common events, a stream launch's run, inline: as event_steps. */
    if (HCG_LIKELY(e->kind == HCG_EV_RUN && !e->graph && e->fnkind < HCG_FN_KIND_COUNT)) {
        count_step(r, head << 2, HCG_CNT_RAN + e->fnkind, 1);
        if (hcg_fnkind_is_copy((hcg_fnkind)e->fnkind))
            count_step(r, head << 2 | 1, HCG_CNT_BYTES, e->bytes);
        return;
    }
    cnt_step s[3];
    for (unsigned i = 0, n = event_steps(e, s); i < n; i++)
        count_step(r, head << 2 | i, s[i].idx, s[i].add);
}

/* The launcher: the counts the last event of r (at head - 1) had still to
 * add when its thread died, into out. */
static void finish_counting(const ring *r, uint64_t head, hcg_counts *out)
{
    cnt_step s[3];
    if (!head)
        return;
    unsigned n = event_steps(&r->ev[(head - 1) & (r->cap - 1)], s), from = 0;
    uint64_t mark = atomic_load(&r->step_mark);
    if (mark >> 2 == head && (mark & 3) < n) {
        unsigned i = mark & 3;
        from = atomic_load(&r->cnt[s[i].idx]) == atomic_load(&r->step_old) ? i : i + 1;
    }
    for (unsigned i = from; i < n; i++)
        out->v[s[i].idx] += s[i].add;
}

void hcg_count_collector(hcg_finding f)
{
    bump(&coll_cnt_of()[HCG_CNT_FINDING + ((unsigned)f < HCG_FIND_COUNT ? f : 0)], 1);
}

void hcg_counts_get(hcg_counts *out)
{
    for (unsigned i = 0; i < HCG_CNT_N; i++)
        out->v[i] = atomic_load_explicit(&coll_cnt_of()[i], memory_order_relaxed) +
                    atomic_load_explicit(&ringless_cnt[i], memory_order_relaxed);
    for (ring *r = atomic_load(&rings); r; r = r->next)
        for (unsigned i = 0; i < HCG_CNT_N; i++)
            out->v[i] += atomic_load_explicit(&r->cnt[i], memory_order_relaxed);
}

uint64_t hcg_counts_sum(const hcg_counts *c, unsigned first, unsigned n)
{
    uint64_t t = 0;
    for (unsigned i = first; i < first + n && i < HCG_CNT_N; i++)
        t += c->v[i];
    return t;
}

static void wake_collector(void)
{
    atomic_fetch_add_explicit(&wake_word, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&coll_asleep, memory_order_seq_cst))
        syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The ring has passed the mark at which the producer looks at the
 * consumer's index again (rare: about twice per ring's worth of events):
 * half full or more means the collector is woken now rather than at its
 * next interval. */
static void passed_mark(ring *r, uint64_t h)
{
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t half = r->cap / 2;
    if (h - r->tail_seen >= half) {
        wake_collector();
        r->check_at = h + r->cap / 8; /* and again if it is still not drained */
    } else {
        r->check_at = r->tail_seen + half;
    }
}

hcg_event hcg_event_make(hcg_evkind kind, unsigned reason, hcg_api api, uintptr_t stream,
                         uintptr_t fn, uintptr_t user)
{
    hcg_event e = {0};
    e.kind = (uint8_t)kind;
    e.reason = (uint8_t)reason;
    e.api = (uint8_t)api;
    e.tid = hcg_gettid();
    if (kind == HCG_EV_REJECT || kind == HCG_EV_FINDING)
        e.seq = next_seq();
    if (kind == HCG_EV_FINDING && hcg_self.linked_seq) {
        e.seq = hcg_self.linked_seq;
        hcg_self.linked_seq = 0;
    }
    e.t_enqueue = hcg_ticks();
    if (kind == HCG_EV_FINDING)
        e.t_start = e.t_end = e.t_enqueue;
    e.stream = stream;
    e.fn = fn;
    e.user = user;
    return e;
}

static _Atomic(void (*)(uint64_t)) lost_hook;

/* An event that flow control counts: a one-shot launch's run or skip. */
static inline int flow_counted(const hcg_event *e)
{
    return !e->graph && (e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP);
}

/* The events of threads that have no ring (none could be mapped: out of
 * memory, RLIMIT_AS, the map count): dropped, and counted here, by any
 * thread (atomic adds), so that the counts stay exact, the loss is said,
 * and flow control does not wait for events that will never be drained. */
/* Events this thread drops before it tries to map a ring again. */
static _Thread_local unsigned ring_retry_in;

__attribute__((noinline, cold)) static void push_ringless(const hcg_event *e)
{
    cnt_step s[3];
    for (unsigned i = 0, n = event_steps(e, s); i < n; i++)
        atomic_fetch_add_explicit(&ringless_cnt[s[i].idx], s[i].add, memory_order_relaxed);
    atomic_fetch_add_explicit(&ringless_dropped, 1, memory_order_release); /* as r->dropped */
    if (flow_counted(e)) {
        void (*lost)(uint64_t) = atomic_load_explicit(&lost_hook, memory_order_acquire);
        if (lost)
            lost(e->seq);
    }
}

__attribute__((noinline, cold)) static ring *try_acquire_ring(void)
{
    if (ring_retry_in) {
        ring_retry_in--;
        return NULL;
    }
    ring *r = acquire_ring();
    if (!r)
        ring_retry_in = 4096;
    return r;
}

uint64_t hcg_events_ringless(void)
{
    return atomic_load_explicit(&ringless_dropped, memory_order_acquire);
}

void hcg_event_push(const hcg_event *e)
{
    ring *r = hcg_self.ring;
    if (HCG_UNLIKELY(!r)) {
        r = hcg_self.ring = try_acquire_ring();
        if (!r) {
            push_ringless(e);
            return;
        }
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (HCG_UNLIKELY(h - r->tail_seen >= r->cap)) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_seen >= r->cap) {
            count_dropped(r->cnt, e);
            /* After the counts (release): the summary reads it first. */
            atomic_store_explicit(&r->dropped, atomic_load_explicit(&r->dropped,
                                                                     memory_order_relaxed) + 1,
                                  memory_order_release);
            if (flow_counted(e)) {
                void (*lost)(uint64_t) = atomic_load_explicit(&lost_hook, memory_order_acquire);
                if (lost)
                    lost(e->seq);
            }
            return;
        }
    }
    r->ev[h & (r->cap - 1)] = *e;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    count_pushed(r, e, h + 1);
    if (HCG_UNLIKELY(h + 1 >= r->check_at))
        passed_mark(r, h + 1);
}

/* An application thread's ring three quarters full of its own events
 * (rejections): wait, as a launch does in flow control, for the collector
 * to bring it down to a half, while the collector drains it. After 2 s
 * without progress the thread gives up, and waits no more until the
 * collector has drained some of its ring (it may be held by a lock this
 * thread holds: the loader's, inside dlopen). */
static _Thread_local uint64_t gave_up_at = UINT64_MAX; /* the ring's tail then */

static void wait_for_room(ring *r, uint64_t head, uint64_t tail)
{
    /* Inside a launch, which has no cancellation point of its own. */
    int cancel = hcg_nocancel_begin();
    uint64_t since = hcg_wait_clock_ns();
    while (head - tail >= r->cap / 2 && atomic_load(&coll_live)) {
        hcg_events_wait_drain(hcg_events_drain_gen(), 1);
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire), now = hcg_wait_clock_ns();
        if (t != tail) {
            tail = t, since = now;
        } else if (now - since >= 2000000000ull) {
            gave_up_at = tail;
            break;
        }
    }
    hcg_nocancel_end(cancel);
}

void hcg_event_push_app(const hcg_event *e)
{
    ring *r = hcg_self.ring;
    if (r && !hcg_self.in_host_fn && atomic_load_explicit(&coll_live, memory_order_relaxed)) {
        uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - t >= r->cap / 4 * 3 && t != gave_up_at)
            wait_for_room(r, h, t);
    }
    hcg_event_push(e);
}

/* ---- the sinks (src/sinks/sinks.c) ---------------------------------------- */
/* Every sink, or (files_only) only those that write files. */
static void to_sinks(const hcg_event *e, int files_only)
{
    for (const hcg_sink *const *k = hcg_sinks; *k; k++)
        if (!files_only || (*k)->flush)
            (*k)->event(e);
}

int hcg_event_slow(const hcg_event *run, hcg_event *out)
{
    /* As the summary counts them (src/sinks/findings.c). */
    if (run->kind != HCG_EV_RUN ||
        (double)(run->t_end - run->t_start) / 1e6 <= hcg_config_get()->slow_ms)
        return 0;
    *out = *run;
    out->kind = HCG_EV_FINDING;
    out->reason = HCG_FIND_SLOW;
    out->dst = out->src = out->bytes = 0;
    return 1;
}

/* A drained event to the sinks; a slow run's finding (counted by the
 * summary's sink itself) to the files after it. */
static void to_sinks_slow(const hcg_event *e, int files_only)
{
    hcg_event slow;
    to_sinks(e, files_only);
    if (HCG_UNLIKELY(e->kind == HCG_EV_RUN) && hcg_event_slow(e, &slow))
        to_sinks(&slow, 1);
}

static void flush_files(void)
{
    for (const hcg_sink *const *k = hcg_sinks; *k; k++)
        if ((*k)->flush)
            (*k)->flush();
}

static void to_ns(hcg_event *e, const hcg_clock_ref_t *ref)
{
    if (HCG_UNLIKELY(!e->t_enqueue && e->kind != HCG_EV_REJECT)) { /* a launch not stamped */
        e->t_enqueue = e->t_start;
        e->flags |= HCG_EVF_NO_STAMP;
    }
    e->t_enqueue = hcg_ticks_to_ns(ref, e->t_enqueue);
    if (e->kind != HCG_EV_REJECT) {
        e->t_start = hcg_ticks_to_ns(ref, e->t_start);
        e->t_end = hcg_ticks_to_ns(ref, e->t_end);
    }
}

#define BATCH 64

static _Atomic(void (*)(uint64_t)) drained_hook;

void hcg_events_on_lost(void (*hook)(uint64_t seq))
{
    atomic_store_explicit(&lost_hook, hook, memory_order_release);
}

void hcg_events_on_drained(void (*hook)(uint64_t seq))
{
    atomic_store_explicit(&drained_hook, hook, memory_order_release);
}

#define EACH_FILE_SINK(k)                                                                   \
    for (const hcg_sink *const *k = hcg_sinks; *k; k++)                                     \
        if ((*k)->file_end && (*k)->rewrite_from && (*k)->exec_slot >= 0 &&                \
            (*k)->exec_slot < HCG_SINK_SLOTS)

/* When recording, the events [tail, end) are about to be written to the
 * files: noted, with where each file ends now. A process killed after
 * writing them (a write that another thread's exit or a SIGKILL lets
 * finish, or cuts short) and before their slots are given back leaves
 * them both in the files and in the ring; the launcher then has each file
 * hold them once (hcg_events_recover). */
static void batch_begins(ring *r, uint64_t end)
{
    if (!hcg_g_flight)
        return;
    /* What the files' buffers hold (the collector's own findings, written
     * between passes) goes out first: it is in no ring, and must not be
     * taken for part of the batch. */
    flush_files();
    EACH_FILE_SINK(k)
        r->pend_off[(*k)->exec_slot] = (*k)->file_end();
    atomic_store_explicit(&r->pend_to, end, memory_order_release);
}

/* Whether the counting of r's event at h - 1, the last pushed, has moved
 * its first counter (its launch's, in the counts from then on). Its step's
 * mark is stored before that counter (count_step), so a mark alone says
 * only that the counter is about to move: the counter is compared with
 * its value before. Every event's first step adds 1. */
static int first_counted(const ring *r, uint64_t h)
{
    uint64_t mark = atomic_load_explicit(&r->step_mark, memory_order_acquire);
    if (mark >> 2 != h)
        return 0;
    if (mark & 3)
        return 1;
    cnt_step s[3];
    if (!event_steps(&r->ev[(h - 1) & (r->cap - 1)], s))
        return 1;
    return atomic_load_explicit(&r->cnt[s[0].idx], memory_order_acquire) !=
           atomic_load_explicit(&r->step_old, memory_order_relaxed);
}

/* The ring's head, less its last event while the counting of that event
 * has not moved its first counter (an event is published before it is
 * counted: see count_pushed): a drain does not write an event the counts
 * do not hold yet, and the exit summary, which reads the counts after
 * this, names none they do not hold. The rest of the counting follows at
 * once, on the owner's thread. */
static uint64_t counted_head(const ring *r, uint64_t tail)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    if (h != tail && !first_counted(r, h) && atomic_load_explicit(&r->owned, memory_order_acquire))
        h--;
    return h;
}

/* Events leave a ring in batches: each batch goes to the sinks (and, when
 * recording, is written to the files) before its slots are given back, so
 * that an event is always in the ring or in the files, whenever the process
 * dies. Only then are their launches counted as drained: a launch waiting
 * for room (flow control) then finds it. */
static void drain(ring *r, const hcg_clock_ref_t *ref)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = counted_head(r, t);
    while (t != h) {
        uint64_t seqs[BATCH];
        unsigned n = 0;
        uint64_t end = h - t > BATCH ? t + BATCH : h;
        batch_begins(r, end);
        for (; t != end; t++) {
            hcg_event e = r->ev[t & (r->cap - 1)];
            to_ns(&e, ref);
            to_sinks_slow(&e, 0);
            if (flow_counted(&e))
                seqs[n++] = e.seq;
        }
        if (hcg_g_flight)
            flush_files();
        atomic_store_explicit(&r->tail, t, memory_order_release);
        void (*on_drained)(uint64_t) = atomic_load_explicit(&drained_hook, memory_order_acquire);
        for (unsigned i = 0; on_drained && i < n; i++)
            on_drained(seqs[i]);
    }
}

/* ---- the flight recorder's rings, read by the launcher ------------------ */
static const ring *record_ring(const hcg_flight *f, uint32_t i)
{
    const ring *r = (const ring *)((const char *)f + f->rings_off + (size_t)i * f->ring_bytes);
    uint64_t cap = r->cap;
    /* Divided, not multiplied: the program may have written any cap, and
     * a large power of two's bytes would wrap to look small. */
    if (cap == 0 || (cap & (cap - 1)) || f->ring_bytes < sizeof(ring) ||
        cap > (f->ring_bytes - sizeof(ring)) / sizeof(hcg_event))
        return NULL; /* never set up, or not a ring */
    return r;
}

/* The batch a drain was writing when the program died (at most one:
 * drains are serialised): each file made to hold it once, before any
 * event is written again, as the trace is cut back to where the batch
 * began and that would take what was written for another ring since. */
static void batch_cut_short(const ring *const *rs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h = atomic_load(&rs[i]->head), t = atomic_load(&rs[i]->tail);
        uint64_t pend = atomic_load(&rs[i]->pend_to);
        if (pend != t && pend - t <= h - t) { /* died writing [t, pend) */
            EACH_FILE_SINK(k)
                (*k)->rewrite_from(rs[i]->pend_off[(*k)->exec_slot]);
            return;
        }
    }
}

/* The record's rings that were set up, into rs; how many. */
static uint32_t record_rings(const hcg_flight *f, const ring *rs[HCG_FLIGHT_MAX_RINGS])
{
    uint32_t n = 0, all = atomic_load(&f->n_rings);
    for (uint32_t i = 0; i < all && i < HCG_FLIGHT_MAX_RINGS; i++)
        if ((rs[n] = record_ring(f, i)))
            n++;
    return n;
}

void hcg_events_recover(const hcg_flight *f, hcg_counts *counts, uint64_t *dropped)
{
    hcg_clock_ref_t ref;
    if (!hcg_flight_clock(f, &ref))
        hcg_clock_ref(&ref);
    memset(counts, 0, sizeof *counts);
    *dropped = 0;
    for (unsigned i = 0; i < HCG_CNT_N; i++)
        counts->v[i] = atomic_load(&f->coll_cnt[i]);
    const ring *rs[HCG_FLIGHT_MAX_RINGS];
    uint32_t n = record_rings(f, rs);
    batch_cut_short(rs, n);
    for (uint32_t i = 0; i < n; i++) {
        const ring *r = rs[i];
        for (unsigned k = 0; k < HCG_CNT_N; k++)
            counts->v[k] += atomic_load(&r->cnt[k]);
        *dropped += atomic_load(&r->dropped);
        uint64_t h = atomic_load(&r->head), t = atomic_load(&r->tail);
        finish_counting(r, h, counts);
        if (h - t > r->cap)
            t = h - r->cap;
        for (; t != h; t++) {
            hcg_event e = r->ev[t & (r->cap - 1)];
            to_ns(&e, &ref);
            to_sinks_slow(&e, 1);
        }
    }
}


/* A program thread draining holds back the signals whose default action
 * hcguard stands in for (src/check/fault.c): their handler, were it to
 * interrupt this drain, could not write the events this thread has taken
 * from the rings and not yet written out; once the drain is done it can. */
static void hold_deaths(sigset_t *old)
{
    static const int deaths[] = {HCG_DEATH_SIGNALS};
    sigset_t s;
    if (hcg_self.collector)
        return;
    uint64_t standin = atomic_load_explicit(&hcg_g_standin_sigs, memory_order_relaxed);
    sigemptyset(&s);
    for (size_t i = 0; i < sizeof deaths / sizeof deaths[0]; i++)
        if (standin & (1ull << (deaths[i] & 63)))
            sigaddset(&s, deaths[i]);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

static void release_deaths(const sigset_t *old)
{
    if (!hcg_self.collector)
        pthread_sigmask(SIG_SETMASK, old, NULL);
}

void hcg_events_flush(void)
{
    hcg_clock_ref_t ref;
    sigset_t held;
    hold_deaths(&held);
    drain_enter();
    if (files_writable()) {
        hcg_clock_ref(&ref);
        hcg_flight_note_clock(&ref);
        for (ring *r = atomic_load(&rings); r; r = r->next)
            drain(r, &ref);
        /* Written continuously, not only at exit. */
        flush_files();
    }
    drain_leave();
    release_deaths(&held);
    atomic_fetch_add_explicit(&drain_gen, 1, memory_order_release);
    if (atomic_load_explicit(&drain_waiters, memory_order_seq_cst))
        syscall(SYS_futex, &drain_gen, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void hcg_events_flush_files(void)
{
    sigset_t held;
    hcg_events_flush();
    hold_deaths(&held);
    drain_enter();
    if (files_writable())
        flush_files();
    drain_leave();
    release_deaths(&held);
}

void hcg_events_seal_files(void)
{
    sigset_t held;
    hold_deaths(&held);
    drain_enter();
    for (const hcg_sink *const *k = hcg_sinks; *k; k++)
        if ((*k)->seal)
            (*k)->seal();
    /* Left so, whole, while the exec goes on: a thread that drains meanwhile
     * (hcguard_get_stats, a fatal signal, an exec of another thread that
     * failed) could be cut off by the exec in the middle of its write. */
    files_sealed++;
    drain_leave();
    release_deaths(&held);
}

void hcg_events_unseal_files(void)
{
    drain_enter();
    if (files_sealed > 0)
        files_sealed--; /* at 0, each sink opens its seal again at its next event */
    drain_leave();
}

void hcg_events_files_done(void)
{
    drain_enter();
    files_done = 1;
    drain_leave();
}

/* The process is dying of a signal: its events to the log and the trace
 * only. The summary and the audit take locks the interrupted code may
 * hold, and will not be printed; functions not named yet are not looked
 * up (the loader's and malloc's locks). */
static void drain_to_files(ring *r, const hcg_clock_ref_t *ref)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    if (t != h)
        batch_begins(r, h);
    for (; t != h; t++) {
        hcg_event e = r->ev[t & (r->cap - 1)];
        to_ns(&e, ref);
        to_sinks_slow(&e, 1);
    }
    flush_files();
    atomic_store_explicit(&r->tail, t, memory_order_release);
}

/* How far the rings have been drained: moves while a drain makes progress. */
static uint64_t drained_so_far(void)
{
    uint64_t sum = 0;
    for (ring *r = atomic_load(&rings); r; r = r->next)
        sum += atomic_load_explicit(&r->tail, memory_order_relaxed);
    return sum;
}

void hcg_events_flush_from_signal(void)
{
    /* Another thread draining (the collector) goes on running: waited for
     * while it makes progress (a big backlog), up to 10 s in all, but no
     * more than 500 ms without progress (it may wait for a lock the
     * interrupted code holds). This thread, interrupted while draining,
     * cannot be waited for. */
    uint32_t me = hcg_gettid();
    uint64_t seen = drained_so_far();
    int cancel = hcg_nocancel_begin(); /* the process is to die of the signal, not a cancel */
    hcg_self.dying = 1; /* the sinks say nothing from here (sinkfile.c) */
    for (int idle = 0, ms = 0; pthread_mutex_trylock(&drain_lock) != 0; idle++, ms++) {
        if (atomic_load_explicit(&drain_owner, memory_order_relaxed) == me || idle >= 500 ||
            ms >= 10000) {
            hcg_self.dying = 0;
            hcg_nocancel_end(cancel);
            return;
        }
        struct timespec one = {0, 1000000};
        nanosleep(&one, NULL);
        uint64_t now = drained_so_far();
        if (now != seen) {
            seen = now;
            idle = 0;
        }
    }
    atomic_store_explicit(&drain_owner, me, memory_order_relaxed);
    drain_cancel = cancel;
    hcg_clock_ref_t ref;
    hcg_clock_ref(&ref);
    hcg_flight_note_clock(&ref);
    hcg_sinks_signal_mode(1);
    for (ring *r = atomic_load(&rings); r && files_writable(); r = r->next)
        drain_to_files(r, &ref);
    hcg_sinks_signal_mode(0);
    drain_leave();
    hcg_self.dying = 0;
}

uint64_t hcg_events_flow_room(void)
{
    return atomic_load_explicit(&coll_live, memory_order_relaxed) ? ring_cap() / 2 : 0;
}

uint32_t hcg_events_drain_gen(void)
{
    return atomic_load_explicit(&drain_gen, memory_order_acquire);
}

void hcg_events_wait_drain(uint32_t gen, unsigned ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    atomic_fetch_add_explicit(&drain_waiters, 1, memory_order_seq_cst);
    wake_collector();
    if (atomic_load_explicit(&drain_gen, memory_order_seq_cst) == gen)
        syscall(SYS_futex, &drain_gen, FUTEX_WAIT_PRIVATE, gen, &ts, NULL, 0);
    atomic_fetch_sub_explicit(&drain_waiters, 1, memory_order_relaxed);
}

static uintptr_t (*_Atomic running_site_of)(const void *tag);

void hcg_events_on_running(uintptr_t (*site_of)(const void *tag))
{
    atomic_store(&running_site_of, site_of);
}

void hcg_event_running(const hcg_event *run, const void *tag, uint64_t since)
{
    ring *r = hcg_self.ring;
    if (HCG_UNLIKELY(!r) && !(r = hcg_self.ring = try_acquire_ring()))
        return;
    if (!run) {
        atomic_store_explicit(&r->run_since, 0, memory_order_release);
        return;
    }
    /* run_since is 0 here (the last run cleared it): the watchdog skips the
     * ring until since is stored, after the rest (a seqlock's writer). */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&r->run_fn, run->fn, memory_order_relaxed);
    atomic_store_explicit(&r->run_tag, tag, memory_order_relaxed);
    atomic_store_explicit(&r->run_tid, run->tid, memory_order_relaxed);
    atomic_store_explicit(&r->run_seq, run->seq, memory_order_relaxed);
    atomic_store_explicit(&r->run_stream, run->stream, memory_order_relaxed);
    atomic_store_explicit(&r->run_since, since, memory_order_release);
}

void hcg_event_push_ran(const hcg_event *run)
{
    ring *r = hcg_self.ring;
    if (HCG_LIKELY(r)) /* made by hcg_event_running when the run began */
        atomic_store_explicit(&r->run_since, 0, memory_order_release);
    hcg_event_push(run);
}

uint64_t hcg_event_running_seq(void)
{
    ring *r = hcg_self.ring;
    return r ? atomic_load_explicit(&r->run_seq, memory_order_relaxed) : 0;
}

/* Report host functions running longer than hang_ns (collector). */
static void watch_hangs(uint64_t hang_ns)
{
    hcg_clock_ref_t ref;
    hcg_clock_ref(&ref);
    uint64_t now = hcg_ticks();
    for (ring *r = atomic_load(&rings); r; r = r->next) {
        uint64_t since = atomic_load_explicit(&r->run_since, memory_order_acquire);
        uintptr_t fn = atomic_load_explicit(&r->run_fn, memory_order_relaxed);
        const void *tag = atomic_load_explicit(&r->run_tag, memory_order_relaxed);
        if (!since || since == r->reported_since)
            continue;
        uint64_t t0 = hcg_ticks_to_ns(&ref, since), t1 = hcg_ticks_to_ns(&ref, now);
        if (t1 <= t0 || t1 - t0 < hang_ns)
            continue;
        r->reported_since = since;
        if (!HCG_FINDING_ON(hcg_config_get(), HCG_FIND_HANG))
            continue;
        uintptr_t (*site_of)(const void *) = atomic_load(&running_site_of);
        hcg_event e = hcg_event_make(HCG_EV_FINDING, HCG_FIND_HANG, 0,
                                     atomic_load_explicit(&r->run_stream, memory_order_relaxed),
                                     fn, 0);
        e.seq = atomic_load_explicit(&r->run_seq, memory_order_relaxed);
        e.caller = tag && site_of ? site_of(tag) : 0; /* checked below: the same run */
        e.t_start = t0;
        e.t_end = t1;
        e.t_enqueue = t0;
        e.tid = atomic_load_explicit(&r->run_tid, memory_order_relaxed);
        /* The fields were read after since (acquire): the run may have
         * ended and another begun meanwhile. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&r->run_since, memory_order_relaxed) != since)
            continue;
        hcg_count_collector(HCG_FIND_HANG);
        to_sinks(&e, 0);
    }
}

uint64_t hcg_events_runs(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < HCG_FN_KIND_COUNT; i++)
        n += atomic_load_explicit(&ringless_cnt[HCG_CNT_RAN + i], memory_order_relaxed);
    for (unsigned i = 0; i < HCGUARD_STATUS_COUNT; i++)
        n += atomic_load_explicit(&ringless_cnt[HCG_CNT_SKIPPED + i], memory_order_relaxed);
    for (ring *r = atomic_load(&rings); r; r = r->next) {
        for (unsigned i = 0; i < HCG_FN_KIND_COUNT; i++)
            n += atomic_load_explicit(&r->cnt[HCG_CNT_RAN + i], memory_order_relaxed);
        for (unsigned i = 0; i < HCGUARD_STATUS_COUNT; i++)
            n += atomic_load_explicit(&r->cnt[HCG_CNT_SKIPPED + i], memory_order_relaxed);
    }
    return n;
}

uint64_t hcg_events_undrained(void)
{
    uint64_t n = 0;
    for (ring *r = atomic_load(&rings); r; r = r->next) {
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        n += counted_head(r, t) - t;
    }
    return n;
}

uint64_t hcg_events_dropped(void)
{
    uint64_t n = atomic_load_explicit(&ringless_dropped, memory_order_acquire);
    for (ring *r = atomic_load(&rings); r; r = r->next)
        n += atomic_load_explicit(&r->dropped, memory_order_acquire);
    return n;
}

/* Sleep until woken (a ring passed half full, or stop) or the interval
 * is over, unless woken since seen was read. */
static void collector_sleep(uint32_t seen)
{
    struct timespec ts = {0, COLLECT_INTERVAL_NS};
    atomic_store_explicit(&coll_asleep, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&wake_word, memory_order_seq_cst) == seen)
        syscall(SYS_futex, &wake_word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
    atomic_store_explicit(&coll_asleep, 0, memory_order_relaxed);
}

static void *collector(void *arg)
{
    (void)arg;
    hcg_self.collector = 1;
    while (!atomic_load(&coll_stop)) {
        uint32_t seen = atomic_load_explicit(&wake_word, memory_order_acquire);
        /* No epoch while the pass works: it may be held up for as long as
         * a sink's write blocks (a message to a pipe nobody reads), and a
         * launch meanwhile takes a fresh stamp. A new one for the sleep,
         * at most COLLECT_INTERVAL_NS: a stamp reused under it is at most
         * that old. */
        hcg_clock_epoch_stop();
        hcg_events_flush();
        drain_enter();
        watch_hangs((uint64_t)(hcg_config_get()->hang_s * 1e9));
        drain_leave();
        hcg_clock_epoch_next();
        collector_sleep(seen);
    }
    return NULL;
}

void hcg_collector_start(void)
{
    pthread_mutex_lock(&coll_lock);
    if (!coll_running && !coll_held) {
        atomic_store(&coll_stop, 0);
        /* Keep application signals off the collector. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        /* An epoch from now until the thread's first pass begins (it
         * sets none while it works): given before the thread exists, as
         * it could begin its pass before this returned. */
        hcg_clock_epoch_next();
        int err = pthread_create(&coll_thread, NULL, collector, NULL);
        if (err == 0)
            coll_running = 1;
        else
            hcg_clock_epoch_stop();
        atomic_store(&coll_live, coll_running);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (err && !atomic_exchange(&coll_failed, err)) {
            pthread_mutex_unlock(&coll_lock);
            hcg_msg("ERROR: cannot start the collector thread (%s): events are written at "
                    "exit only, a full buffer drops them, and hung host functions are not "
                    "watched; tried again as the program launches",
                    strerror(err));
            return;
        }
        if (!err && atomic_exchange(&coll_failed, 0))
            hcg_msg("the collector thread started at last");
    }
    pthread_mutex_unlock(&coll_lock);
}

int hcg_collector_failed(void)
{
    return atomic_load(&coll_failed);
}

void hcg_collector_retry(void)
{
    if (HCG_UNLIKELY(atomic_load_explicit(&coll_failed, memory_order_relaxed)) &&
        !atomic_load(&coll_stop))
        hcg_collector_start();
}

void hcg_collector_resume(void)
{
    pthread_mutex_lock(&coll_lock);
    if (coll_held > 0)
        coll_held--;
    pthread_mutex_unlock(&coll_lock);
    hcg_collector_start();
}

void hcg_collector_stop(void)
{
    pthread_mutex_lock(&coll_lock);
    coll_held++;
    int was = coll_running;
    atomic_store(&coll_stop, 1);
    coll_running = 0;
    atomic_store(&coll_live, 0);
    wake_collector();
    pthread_mutex_unlock(&coll_lock);
    if (was)
        pthread_join(coll_thread, NULL);
    hcg_clock_epoch_stop();
    hcg_events_flush();
}

/* In a fork child only the forking thread exists: the collector is gone,
 * and the rings of other threads have no producer any more. */
void hcg_events_after_fork(void)
{
    pthread_mutex_init(&drain_lock, NULL);
    atomic_store(&drain_owner, 0);
    files_sealed = files_done = 0; /* the exec or the exit was another thread's */
    coll_held = 0;
    pthread_mutex_init(&coll_lock, NULL);
    coll_running = 0;
    atomic_store(&coll_live, 0);
    hcg_clock_epoch_stop();
    atomic_store(&coll_stop, 0);
    atomic_store(&coll_failed, 0);
    for (unsigned i = 0; i < HCG_CNT_N; i++) /* the parent's own */
        atomic_store_explicit(&ringless_cnt[i], 0, memory_order_relaxed);
    atomic_store_explicit(&ringless_dropped, 0, memory_order_relaxed);
    atomic_store(&coll_asleep, 0);
    atomic_store(&drain_waiters, 0);
    for (unsigned i = 0; i < HCG_CNT_N; i++)
        atomic_store(&coll_cnt_own[i], 0);
    hcg_self.tid = 0;
    /* The parent's events, and the host functions its threads were running
     * (the watchdog would call them hung), are the parent's. */
    for (ring *r = atomic_load(&rings); r; r = r->next) {
        if (r != hcg_self.ring)
            atomic_store(&r->owned, 0);
        atomic_store(&r->tail, atomic_load(&r->head));
        r->tail_seen = atomic_load(&r->head);
        r->check_at = r->tail_seen + r->cap / 2;
        atomic_store(&r->dropped, 0);
        for (unsigned i = 0; i < HCG_CNT_N; i++)
            atomic_store(&r->cnt[i], 0);
        atomic_store(&r->run_fn, 0);
        atomic_store(&r->run_since, 0);
        r->reported_since = 0;
    }
}
