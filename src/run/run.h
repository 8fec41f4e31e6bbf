/* The run layer (src/run): the calls the driver runs instead of the
 * program's host functions. Each thread's pool of calls, the flow control
 * that keeps launches from outrunning the collector, the preparation of a
 * call at enqueue (recognise, check, allocate), and the trampoline that
 * runs it (re-check, copy, events). Above the check and events layers. */
#ifndef HCG_RUN_H
#define HCG_RUN_H

#include "check/check.h"

/* One host-function launch (stream) or one host node (graph). */
struct hcg_pool;

/* A graph node's launches, as cuGraphLaunch recorded them for each call its
 * executable graph holds (src/wrap/graph.c, under its lock), read by the
 * trampoline: the k-th run of a call is taken to be the k-th launch
 * recorded for it (launches of one executable graph run in order). A slot
 * is valid while n is the launch's number + 1, written last. */
#define HCG_REPLAY_SLOTS 16
typedef struct hcg_replay {
    _Atomic uint64_t n;
    _Atomic uint64_t seq, t_enqueue; /* the replay's own seq; ticks at launch */
    _Atomic uintptr_t stream;
    _Atomic uint32_t tid;            /* the launching thread */
} hcg_replay;
typedef struct hcg_replays {
    _Atomic uint64_t launched; /* recorded (application threads, serialised) */
    _Atomic uint64_t ran;      /* runs taken (callback threads) */
    hcg_replay slot[HCG_REPLAY_SLOTS];
} hcg_replays;

/* The first cache line holds all that a stream launch of an ordinary host
 * function touches: written by the launching thread, read by the callback
 * thread, which writes back only next_free when it returns the call. The
 * second line is for copies and graph nodes. */
typedef struct hcg_call {
    CUhostFn fn;
    void *user;
    uintptr_t stream;
    uint64_t t_enqueue;
    uint64_t seq;
    struct hcg_call *next_free;
    struct hcg_pool *owner;   /* the pool it returns to */
    uint8_t kind;             /* hcg_fnkind */
    uint8_t oneshot;          /* released after it ran (stream launches) */
    uint8_t api;              /* hcg_api: which entry point enqueued it */
    uint8_t enqueue_status;   /* hcguard_status at enqueue (audit mode) */
    uint8_t wrapped;          /* fn is cuda.bindings' wrapper: user is malloc'd by it */
    /* -- second line: copies (rec, snap) and graph nodes (the rest) -- */
    void *rec __attribute__((aligned(64))); /* copies: the record; wrapped: the wrapper's data */
    hcguard_copy_record snap; /* the record as validated at enqueue */
    uintptr_t graph, node;    /* for attribution */
    _Atomic uint32_t refs;    /* holders: its user object (roots), a root's chain */
    struct hcg_call *root;    /* the call the node was created with (NULL: this) */
    _Atomic(void *) chain;    /* root only: its hcg_link list (graph.c) */
    void *uobj;               /* root only: the CUuserObject that owns it */
    atomic_uchar home_gone;   /* root only: graph, node no longer name where it was
                               * made (destroyed: their handles may be reused) */
    CUhostFn inner;           /* wrapped: the function the wrapper calls with rec */
    uint64_t gen;             /* copies: hcg_oracle_gen() when the check began */
    /* The enqueue site (check/callsite.c), set by the wrapper after
     * hcg_call_new; read by the callback thread off the common path and by
     * the watchdog, hence atomic (relaxed: a plain store). */
    _Atomic uintptr_t caller;
    void *nvtx_name;          /* hcg_nvtx_on: its NVTX range's registered name */
    hcg_replays *replays;     /* graph nodes: their launches, or NULL (graph.c owns it) */
    uint64_t reject_seq;      /* enqueue_status not OK: the rejection that reported it */
} __attribute__((aligned(64))) hcg_call;

/* The one initialiser: a call from this thread's pool for a one-shot
 * launch of fn(user) through api on s, its first line set, its sequence
 * number and enqueue time taken now (a graph node's caller then changes
 * what differs); NULL if out of memory. */
hcg_call *hcg_call_new(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_fnkind kind,
                       hcguard_status why, int wrapped);
/* Back to the pool at once: the allocating thread, for a call the driver
 * never saw. */
void hcg_call_free_local(hcg_call *c);
/* Back to its pool from any thread (the callback thread after a stream
 * launch ran, a graph's last holder). */
void hcg_call_release(hcg_call *c);
/* The same from the callback thread after a stream launch ran: given back
 * with others of its pool, GIVE_BATCH at a time (pool.c). */
void hcg_call_release_batched(hcg_call *c);

/* ---- the call pool (pool.c), inline for the launch path ------------------
 * Each thread that allocates calls has a pool: a free list only it touches,
 * and a stack of calls given back by other threads (the driver's callback
 * thread, after a run), taken whole when the free list runs dry. So
 * allocating costs no atomic operation on a line another core writes. */
typedef struct hcg_pool {
    hcg_call *free;                 /* owner only */
    uint64_t seq;                   /* owner only: the last sequence number it gave,
                                     * its index + 1 in the top bits (pool.c) */
    _Atomic uint64_t launched[HCG_FN_KIND_COUNT]; /* owner writes, summary reads */
    unsigned index;
    _Atomic uint32_t tid;           /* the owner's thread id (the trace's enqueue marks) */
    /* Flow control, owner only: launches captured into graphs (the
     * launched[] less these are the one-shot launches made), launches it
     * may still make before it looks again, and launches given up on. */
    _Atomic uint64_t captured, flow_forgiven;
    int64_t credit;
    /* Ordinary launches until the next one takes its enqueue time stamp
     * (hcg_launch_stamp); copies the same, and the last time stamp a copy
     * took with the clock's epoch then (hcg_copy_stamp). */
    int32_t stamp_left, copy_left;
    uint32_t copy_epoch;
    /* Owner writes, a capture's begin reads: how many launches of the
     * owner (one, or more with a signal handler's) are between their
     * reading of HCG_LAUNCH_CAPTURE and the driver's answer (run.h). */
    _Atomic uint32_t in_launch;
    uint64_t copy_last;
    _Alignas(64) _Atomic(hcg_call *) returned;
    atomic_int owned;
    struct hcg_pool *next;          /* all pools; the list only grows */
    /* The collector: this pool's one-shot launches whose event it drained,
     * and of those, launches that flow control had given up on (numbered
     * below flow_forgive_below, which the owner sets as it gives up). */
    _Alignas(64) _Atomic uint64_t flow_drained, flow_forgiven_drained;
    _Atomic uint64_t flow_forgive_below;
    /* Any thread that dropped the event: launches never to be drained. */
    _Atomic uint64_t flow_lost, flow_forgiven_lost;
} hcg_pool;

/* The bytes of the pools' store, and memory to keep it in instead (the
 * flight record's, at start-up before any pool is made). */
size_t hcg_pool_store_bytes(void);
void hcg_pool_use_store(void *mem);
hcg_call *hcg_call_alloc_slow(void);

/* A call from this thread's pool (hcg_self.pool, NULL until its first
 * call); NULL if out of memory. */
static inline hcg_call *hcg_call_pop(hcg_pool *p);
static inline hcg_call *hcg_call_alloc(void)
{
    hcg_pool *p = hcg_self.pool;
    if (HCG_UNLIKELY(!p || !p->free))
        return hcg_call_alloc_slow();
    return hcg_call_pop(p);
}

/* The first call of p's free list (there is one), taken off it. */
static inline hcg_call *hcg_call_pop(hcg_pool *p)
{
    hcg_call *c = p->free;
    hcg_call *next = c->next_free;
    p->free = next;
    /* The next call's line was last written by the callback thread that
     * gave it back: fetch it now, while this launch goes on into the
     * driver, rather than stall on it at the next launch. (For writing on
     * Arm; x86-64's baseline has no prefetchw, so there it is fetched to
     * read, and prefetchw measured no better on an H100 host: RESULTS.md.
     * A prefetch of NULL is harmless.) */
    __builtin_prefetch(next, 1, 3);
    __builtin_prefetch((char *)next + 64, 1, 3); /* copies' line */
    return c;
}

/* ---- nvtx.c: NVTX ranges for Nsight Systems (HCGUARD_NVTX) ---------------- */
/* Set once at start-up, before any launch: every call then has its name. */
extern uint8_t hcg_nvtx_on;
/* Start-up (application thread): the "hcguard" domain, if configured. */
void hcg_nvtx_init(void);
/* fn's registered name (enqueue, application thread: a lock, an allocation
 * once per function); NULL if out of memory. */
void *hcg_nvtx_name(uintptr_t fn);
/* Around the host function, on the thread that runs it: no lock, no
 * allocation of hcguard's. copy: bytes is the payload. */
void hcg_nvtx_push(void *name, uint64_t bytes, int copy);
void hcg_nvtx_pop(void);
void hcg_nvtx_fork_lock(void);
void hcg_nvtx_fork_unlock(void);
void hcg_nvtx_after_fork(void);

/* Fill a call's first line. Sequence numbers carry the pool in their top
 * bits (unique, ordered per thread), so a launch costs no atomic
 * read-modify-write. t: its enqueue time stamp (hcg_ticks). Its NVTX name
 * is not set here: hcg_call_nvtx, where hcg_nvtx_on (the stream launch's
 * rare branch, hcg_call_new). */
static inline void hcg_call_init(hcg_call *c, hcg_api api, CUstream s, CUhostFn fn, void *user,
                                 hcg_fnkind kind, hcguard_status why, int wrapped, uint64_t t)
{
    hcg_pool *p = c->owner;
    c->fn = fn;
    c->user = user;
    c->stream = (uintptr_t)s;
    c->t_enqueue = t;
    c->seq = ++p->seq;
    c->kind = (uint8_t)kind;
    c->oneshot = 1;
    c->api = (uint8_t)api;
    c->enqueue_status = (uint8_t)why;
    if (HCG_UNLIKELY(why != HCGUARD_OK)) /* reported at enqueue just now (audit mode) */
        c->reject_seq = hcg_self.reject_seq;
    c->wrapped = (uint8_t)wrapped;
}

/* Where hcg_nvtx_on (set once at start-up, before any launch): the NVTX
 * name of c's function. */
static inline void hcg_call_nvtx(hcg_call *c)
{
    if (HCG_UNLIKELY(hcg_nvtx_on))
        c->nvtx_name = hcg_nvtx_name((uintptr_t)c->fn);
}

/* Which ordinary launches take an enqueue time stamp: 1 in
 * HCG_STAMP_EVERY, or every one (1) when an output needs each (the log,
 * the trace, NVTX ranges). Set at start-up (hcg_trampoline_init). */
extern uint32_t hcg_g_stamp_every;
/* Whether an ordinary launch from p is one that takes its enqueue time
 * stamp (each hcg_g_stamp_every-th of the thread's launches), counted; and
 * that stamp, hcg_ticks() or 0 ("no stamp": its event has no queue wait,
 * src/events). Copies: hcg_copy_stamp. */
static inline int hcg_launch_stamp_due(hcg_pool *p)
{
    if (HCG_LIKELY(--p->stamp_left > 0))
        return 0;
    p->stamp_left = (int32_t)hcg_g_stamp_every;
    return 1;
}
static inline uint64_t hcg_launch_stamp(hcg_pool *p)
{
    return hcg_launch_stamp_due(p) ? hcg_ticks() : 0;
}

/* A copy launch's times from p: *now, the time a verdict's age is taken
 * at, and the return value, its enqueue time stamp (0: none, as
 * hcg_launch_stamp). A verdict needs a time on every launch but not a
 * fresh one: the thread's last copy stamp serves while it is one of the
 * last hcg_g_stamp_every copies and the clock's epoch has not moved (the
 * collector went to sleep before it and has not woken since: at most
 * about 20 ms, base.h); else a fresh one is taken, and is the launch's
 * stamp. So a verdict may be taken for that much younger than it is (its
 * 100 ms are a bound on the case the generation cannot see:
 * src/check/oracle.c). */
static inline uint64_t hcg_copy_stamp(hcg_pool *p, uint64_t *now)
{
    uint32_t epoch = atomic_load_explicit(&hcg_g_clock_epoch, memory_order_relaxed);
    if (HCG_LIKELY(--p->copy_left > 0 && epoch == p->copy_epoch)) {
        *now = p->copy_last;
        return 0;
    }
    p->copy_left = (int32_t)hcg_g_stamp_every;
    p->copy_epoch = epoch ? epoch : HCG_EPOCH_NONE; /* none: the next launch stamps too */
    return p->copy_last = *now = hcg_ticks();
}

/* An owner-only counter others read: a plain add, no locked instruction. */
static inline void hcg_owner_add(_Atomic uint64_t *n, uint64_t v)
{
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + v,
                          memory_order_relaxed);
}
static inline void hcg_owner_inc(_Atomic uint64_t *n)
{
    hcg_owner_add(n, 1);
}

/* The thread that launched the stream launch numbered seq (its pool's
 * owner now), 0 if unknown. */
uint32_t hcg_seq_launcher_tid(uint64_t seq);
/* Record a launch of a graph that holds c (graph.c, serialised by its
 * caller), and undo the last one recorded (the launch failed). */
void hcg_replay_note(hcg_call *c, uintptr_t stream, uint64_t ticks, uint32_t tid);
void hcg_replay_unnote(hcg_call *c);

/* Count a launch, by the launching thread, in its own pool p: before the
 * driver call (after it, the call may be another thread's already), and
 * undone (hcg_uncount_launch) if the driver refuses it. */
static inline void hcg_count_launch(hcg_pool *p, hcg_fnkind kind)
{
    hcg_owner_inc(&p->launched[kind]);
}
static inline void hcg_uncount_launch(hcg_pool *p, hcg_fnkind kind)
{
    hcg_owner_add(&p->launched[kind], (uint64_t)-1);
}

/* Flow control: a one-shot launch made from p (after the driver took it
 * and hcg_count_launch counted it), which may wait for the collector once
 * the thread's credit is spent (see pool.c). A launch captured into a
 * graph is not one-shot: hcg_count_captured_in instead. */
void hcg_pool_flow_wait(hcg_pool *p);
/* Around an exec that stopped the collector (lifecycle): on before it,
 * off once it failed and the collector runs again. */
void hcg_pool_exec_window(int on);
static inline void hcg_pool_flow(hcg_pool *p)
{
    if (HCG_UNLIKELY(--p->credit <= 0))
        hcg_pool_flow_wait(p);
}
/* A launch that reads HCG_LAUNCH_CAPTURE clear takes the stream as not
 * capturing, without asking the driver or taking a lock: the begin that
 * opens a capture then sets it and waits (hcg_launches_settle) until no
 * such launch is left between that reading and the driver's answer. Two
 * stores on the launch path; the begin's membarrier(2) stands in for the
 * fence the launch would otherwise need between its mark and its read. */
/* A count, so that a signal handler's launch nested in this one does not
 * take this one's mark with its own. Owner only, and a handler ends
 * before what it interrupted goes on, so no locked add: on x86-64 one
 * add to memory, which no signal splits (a plain store as others see it). */
static inline void hcg_mark_count(_Atomic uint32_t *in_launch, int by)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    __asm__ volatile("addl %1, %0" : "+m"(*in_launch) : "ir"(by));
#else
    atomic_store_explicit(in_launch,
                          atomic_load_explicit(in_launch, memory_order_relaxed) + (uint32_t)by,
                          memory_order_release);
#endif
}
static inline void hcg_mark(_Atomic uint32_t *in_launch)
{
    hcg_mark_count(in_launch, 1);
    atomic_signal_fence(memory_order_seq_cst); /* the read comes after */
}
static inline void hcg_unmark(_Atomic uint32_t *in_launch)
{
    atomic_signal_fence(memory_order_seq_cst); /* the driver's answer came before */
    hcg_mark_count(in_launch, -1);
}
static inline void hcg_launch_mark(hcg_pool *p)
{
    hcg_mark(&p->in_launch);
}
static inline void hcg_launch_unmark(hcg_pool *p)
{
    hcg_unmark(&p->in_launch);
}
/* The mark of this thread's calls that may change which streams capture
 * or depend on it (a wait, a graph launch): its pool's if it has one,
 * else its marker's (taken now: a marker has no calls, counts or place in
 * the flight record, so that a thread that never launched waits without
 * a lock); NULL if neither (MAX_MARKERS threads hold one). */
_Atomic uint32_t *hcg_mark_mine(void);
/* This thread's marks, its pool's and its marker's: calls of its own
 * between their reading of HCG_LAUNCH_CAPTURE and the driver's answer. */
uint32_t hcg_marks_mine(void);
/* After HCG_LAUNCH_CAPTURE was set: every launch that may have read it
 * clear has had the driver's answer. Returns 0, or -1 if that cannot be
 * known (no membarrier(2); a launch of this very thread under way, which
 * a signal handler's begin interrupted; one under way for over 2 s, left
 * by a jump or blocked in the driver): then the flag must stay set for
 * good. Never inside a host function (a launch may wait in the driver
 * behind it). */
int hcg_launches_settle(void);
/* This thread's pool, taken now if it has none (NULL: none is free). */
hcg_pool *hcg_pool_mine(void);
static inline void hcg_count_captured_in(hcg_pool *p)
{
    hcg_owner_inc(&p->captured);
}

/* Make c stop loudly if it ever runs again (graph calls, before release). */
void hcg_call_poison(hcg_call *c);
void hcg_pool_after_fork(void);
void CUDA_CB hcg_trampoline(void *call);
/* Start-up: the watchdog may name the site of a running call; runs this
 * long (ticks) or longer take their site along (slow ones). */
void hcg_trampoline_init(void);
extern _Atomic uint64_t hcg_slow_ticks;
/* The same for cuStreamAddCallback's CUstreamCallback (fn is one). */
void CUDA_CB hcg_stream_cb_trampoline(CUstream s, CUresult status, void *call);

/* Count a host function set on a graph node. */
void hcg_count_node(hcg_fnkind kind);
/* Launched on streams (counted in the pools) and set on graph nodes. */
uint64_t hcg_launched_of(hcg_fnkind kind);
/* Host functions launched and graph nodes set that went to the driver
 * unmeasured (no call for them: too many threads at once, no memory). */
uint64_t hcg_unmeasured(void);
/* One more: a launch the driver took, or a node set, with no call. */
void hcg_count_unmeasured(void);
uint64_t hcg_nodes_made(void);
/* Stream launches captured into graphs (counted by wrap/graph.c; not on
 * streams, for the summary). */
void hcg_count_captured(void);
uint64_t hcg_captured_launches(void);
/* Launches counted in a flight record's copy of the pools. */
uint64_t hcg_pool_store_launched(const void *store, hcg_fnkind kind);

/* ---- prepare.c: a call made at enqueue ---------------------------------- */
/* What a cuda.bindings wrapper will call, from its data {callback, user}:
 * its kind, or HCG_FN_ORDINARY (*fn and *rec left) if not a copy or wrong. */
hcg_fnkind hcg_look_through(void *data, CUhostFn *fn, void **rec);
/* HCGUARD_DEBUG: the first host functions enqueued, and what they are. */
void hcg_debug_call(hcg_api api, CUhostFn fn, void *user, hcg_fnkind kind, CUhostFn inner);
/* Recognise fn (through cuda.bindings' wrapper), check its record if it is
 * a copy, and make the call the trampoline will run. CUDA_ERROR_INVALID_VALUE
 * if refused (reported), CUDA_ERROR_OUT_OF_MEMORY for a copy with no call
 * in guard mode (hcg_copy_callless); else CUDA_SUCCESS and *out, NULL if
 * out of memory. */
CUresult hcg_prepare_call(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_call **out);
/* A host copy that no call can be had for (out of memory, no pool free):
 * in guard mode refused, since it would run unchecked (returns
 * CUDA_ERROR_OUT_OF_MEMORY); in audit mode passed, unmeasured (returns
 * CUDA_SUCCESS); said once. hcg_copies_callless: how many refused. */
CUresult hcg_copy_callless(hcg_api api);
void hcg_count_callless(void);
uint64_t hcg_copies_callless(void);
/* The check of a copy fn recognised as kind (not through a wrapper) at
 * enqueue, for the launch's fast path: its record rec read once,
 * fault-contained, into *snap and checked (a record this thread found good
 * lately with the same contents, no unmap since, costs a compare). t: the
 * launch's time stamp (hcg_ticks), also the age of what is remembered.
 * *why: the verdict; *gen: the unmap generation the check began at.
 * Returns nonzero if the call must be refused (reported; guard mode). */
int hcg_prepare_copy(hcg_api api, CUstream s, CUhostFn fn, void *rec, hcg_fnkind kind,
                     uint64_t t, hcguard_copy_record *snap, hcguard_status *why, uint64_t *gen);


#endif /* HCG_RUN_H */
