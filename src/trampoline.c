/* The run-time trampoline: what the driver calls instead of the user's host
 * function. It re-checks a copy's record when it changed since it was
 * checked, times the call, and leaves one event in the thread's ring.
 * Common path: no lock, no allocation, no system call. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hcg.h"

/* ---- the call pool ------------------------------------------------------
 * Each thread that allocates calls has a pool: a free list only it touches,
 * and a stack of calls given back by other threads (the driver's callback
 * thread, after a run), taken whole when the free list runs dry. So
 * allocating costs no atomic operation on a line another core writes.
 * Calls are carved from chunks that are never unmapped; pools of threads
 * that exited are taken over by new threads. */
#define CHUNK_CALLS 256

typedef struct hcg_pool {
    hcg_call *free;                 /* owner only */
    uint64_t seq;                   /* owner only: sequence numbers it gave */
    _Atomic uint64_t launched[HCG_FN_KIND_COUNT]; /* owner writes, summary reads */
    unsigned index;
    _Alignas(64) _Atomic(hcg_call *) returned;
    atomic_int owned;
    struct hcg_pool *next;          /* all pools; the list only grows */
} hcg_pool;

/* Static: a pool is small, and mapping a page for one would land in any
 * one-page hole of the address space. */
#define MAX_POOLS 1024
static hcg_pool pool_store[MAX_POOLS];
static atomic_uint pools_used;
static _Atomic(hcg_pool *) pools;
static _Thread_local hcg_pool *my_pool;
static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;

static void pool_exit(void *p)
{
    atomic_store_explicit(&((hcg_pool *)p)->owned, 0, memory_order_release);
}

static void make_pool_key(void)
{
    pthread_key_create(&pool_key, pool_exit);
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
        unsigned i = atomic_fetch_add(&pools_used, 1);
        if (i >= MAX_POOLS)
            return NULL; /* more live threads than that: their calls go unmeasured */
        p = &pool_store[i];
        p->index = i;
        atomic_store(&p->owned, 1);
        hcg_pool *head = atomic_load(&pools);
        do
            p->next = head;
        while (!atomic_compare_exchange_weak(&pools, &head, p));
    }
    pthread_setspecific(pool_key, p);
    return p;
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

hcg_call *hcg_call_alloc(void)
{
    hcg_pool *p = my_pool;
    if (HCG_UNLIKELY(!p) && !(p = my_pool = acquire_pool()))
        return NULL;
    if (HCG_UNLIKELY(!p->free) && !refill(p))
        return NULL;
    hcg_call *c = p->free;
    p->free = c->next_free;
    /* The next call's line was last written by the callback thread that
     * gave it back: fetch it now, for writing, while this launch goes on
     * into the driver, rather than stall on it at the next launch. */
    if (p->free) {
        __builtin_prefetch(p->free, 1, 3);
        __builtin_prefetch((char *)p->free + 64, 1, 3); /* copies' line */
    }
    return c;
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

/* Per pool, so that a launch costs no atomic read-modify-write: sequence
 * numbers carry the pool in their top bits (unique, ordered per thread);
 * counts are summed when read. */
uint64_t hcg_pool_seq(hcg_call *c)
{
    hcg_pool *p = c->owner;
    return (uint64_t)(p->index + 1) << 44 | ++p->seq;
}

void hcg_pool_count(hcg_call *c, hcg_fnkind kind)
{
    _Atomic uint64_t *n = &c->owner->launched[kind];
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

uint64_t hcg_pool_launched(hcg_fnkind kind)
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

/* Writes only next_free: the call's line stays as the launching thread
 * left it, give or take that word. */
void hcg_call_release(hcg_call *c)
{
    hcg_pool *p = c->owner;
    hcg_call *head = atomic_load_explicit(&p->returned, memory_order_relaxed);
    do
        c->next_free = head;
    while (!atomic_compare_exchange_weak_explicit(&p->returned, &head, c, memory_order_release,
                                                  memory_order_relaxed));
}

/* In a fork child only the forking thread exists, and what was launched
 * before is the parent's. */
void hcg_pool_after_fork(void)
{
    for (hcg_pool *p = atomic_load(&pools); p; p = p->next) {
        if (p != my_pool)
            atomic_store(&p->owned, 0);
        for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
            atomic_store(&p->launched[k], 0);
    }
}

/* ---- the trampoline ---------------------------------------------------- */
static _Thread_local const hcg_call *current;

const hcg_call *hcg_current_call(void)
{
    return current;
}

/* The record as it is now, checked again if it differs from what was
 * checked at enqueue (records at integer addresses may be rewritten). */
static hcguard_status recheck(const hcg_call *c, hcguard_copy_record *now)
{
    const hcguard_copy_record *r = c->rec;
    if (HCG_LIKELY(c->enqueue_status == HCGUARD_OK && !hcg_config_get()->recheck_always)) {
        *now = *r; /* readable at enqueue; a record freed since is the caller's bug */
        if (HCG_LIKELY(memcmp(now, &c->snap, sizeof *now) == 0))
            return HCGUARD_OK;
    }
    /* Uncommon path: system calls allowed; driver calls are not (the oracle
     * skips them inside a host function). */
    return hcg_validate_record(hcg_oracle_process(), r, now);
}

/* What both trampolines do around the user's function. */
static void run(hcg_call *c, CUstream s, CUresult status, int stream_cb)
{
    hcg_event e;
    e.kind = HCG_EV_RUN;
    e.fnkind = c->kind;
    e.reason = HCGUARD_OK;
    e.api = c->api;
    e.flags = c->enqueue_status != HCGUARD_OK ? HCG_EVF_REPORTED : 0;
    e.tid = hcg_gettid();
    e.seq = c->seq;
    e.t_enqueue = c->t_enqueue;
    e.fn = (uintptr_t)c->fn;
    e.user = (uintptr_t)c->user;
    e.stream = c->stream;
    e.bytes = e.dst = e.src = 0;
    e.graph = c->oneshot ? 0 : c->graph; /* the second line only when needed */
    e.node = c->oneshot ? 0 : c->node;
    e.t_start = hcg_ticks();
    current = c;
    int go = 1;
    if (hcg_fnkind_is_copy((hcg_fnkind)c->kind)) {
        hcguard_copy_record now = {0, 0, 0};
        hcguard_status st = recheck(c, &now);
        e.dst = now.dst;
        e.src = now.src;
        e.bytes = now.nbytes;
        if (HCG_UNLIKELY(st != HCGUARD_OK)) {
            e.kind = HCG_EV_SKIP;
            e.reason = (uint8_t)st;
            go = 0;
        }
    }
    if (HCG_LIKELY(go)) {
        /* Only the user's code counts as inside a host function: the
         * re-check above is hcguard's own. Nested trampolines keep theirs. */
        unsigned char was = hcg_in_host_fn;
        hcg_event_running(e.fn, e.t_start);
        hcg_in_host_fn = 1;
        if (stream_cb)
            ((CUstreamCallback)(void *)c->fn)(s, status, c->user);
        else if (HCG_UNLIKELY(c->wrapped && !c->oneshot))
            c->inner(c->rec); /* a wrapper that frees its data, in a graph */
        else
            c->fn(c->user);
        hcg_in_host_fn = was;
        hcg_event_running(0, 0);
    } else if (c->wrapped && c->oneshot) {
        free(c->user); /* what cuda.bindings' wrapper would have done after the call */
    }
    e.t_end = hcg_ticks();
    current = NULL;
    int oneshot = c->oneshot;
    hcg_event_push(&e);
    if (oneshot)
        hcg_call_release(c);
}

void CUDA_CB hcg_trampoline(void *arg)
{
    run(arg, NULL, CUDA_SUCCESS, 0);
}

void CUDA_CB hcg_stream_cb_trampoline(CUstream s, CUresult status, void *arg)
{
    run(arg, s, status, 1);
}
