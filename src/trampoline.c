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
 * Calls are allocated on application threads and freed on the driver's
 * callback thread. A lock-free LIFO free list (Treiber stack) keeps the
 * slots that were just freed, still in cache, at the top; its head carries
 * a tag that changes with every update, so a slot popped and pushed back
 * meanwhile cannot fool a compare-and-swap (ABA). Slabs are only added. */
#define SLAB_BITS 12
#define SLAB_SLOTS (1u << SLAB_BITS)
#define MAX_SLABS 1024u /* 4M calls in flight, 512 MiB */

typedef struct slab {
    hcg_call slot[SLAB_SLOTS];
} slab;

static _Atomic(slab *) slabs[MAX_SLABS];
static atomic_uint n_slabs;
static _Atomic uint64_t free_head; /* tag << 32 | (index + 1) */
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

static hcg_call *slot_at(uint32_t index)
{
    slab *s = atomic_load_explicit(&slabs[index >> SLAB_BITS], memory_order_acquire);
    return &s->slot[index & (SLAB_SLOTS - 1)];
}

static void push_free(hcg_call *c)
{
    uint64_t h = atomic_load_explicit(&free_head, memory_order_relaxed), n;
    do {
        atomic_store_explicit(&c->next_free, (uint32_t)h, memory_order_relaxed);
        n = ((h >> 32) + 1) << 32 | (uint64_t)(c->index + 1);
    } while (!atomic_compare_exchange_weak_explicit(&free_head, &h, n, memory_order_release,
                                                     memory_order_relaxed));
}

static hcg_call *pop_free(void)
{
    uint64_t h = atomic_load_explicit(&free_head, memory_order_acquire), n;
    hcg_call *c;
    do {
        if ((uint32_t)h == 0)
            return NULL;
        c = slot_at((uint32_t)h - 1);
        n = ((h >> 32) + 1) << 32 | atomic_load_explicit(&c->next_free, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&free_head, &h, n, memory_order_acquire,
                                                     memory_order_acquire));
    return c;
}

/* Application threads only (allocation and a lock are allowed there). */
static int grow(void)
{
    pthread_mutex_lock(&grow_lock);
    unsigned k = atomic_load(&n_slabs);
    int ok = 0;
    if (k < MAX_SLABS) {
        slab *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s != MAP_FAILED) {
            atomic_store_explicit(&slabs[k], s, memory_order_release);
            atomic_store(&n_slabs, k + 1);
            for (uint32_t i = SLAB_SLOTS; i-- > 0;) {
                s->slot[i].index = (k << SLAB_BITS) | i;
                push_free(&s->slot[i]);
            }
            ok = 1;
        }
    }
    pthread_mutex_unlock(&grow_lock);
    return ok;
}

hcg_call *hcg_call_alloc(void)
{
    hcg_call *c;
    while (!(c = pop_free()))
        if (!grow())
            return NULL;
    return c;
}

/* What a freed call runs, should a graph still hold it: a loud stop, not
 * a copy with stale data. */
static void CUDA_CB freed_call(void *p)
{
    (void)p;
    static const char msg[] = "==hcguard== internal error: a host node ran after hcguard freed it\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}

void hcg_call_free(hcg_call *c)
{
    c->fn = freed_call;
    c->kind = HCG_FN_ORDINARY;
    push_free(c);
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

void CUDA_CB hcg_trampoline(void *arg)
{
    hcg_call *c = arg;
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
    e.graph = c->graph;
    e.node = c->node;
    e.t_start = hcg_ticks();
    current = c;
    int run = 1;
    if (hcg_fnkind_is_copy((hcg_fnkind)c->kind)) {
        hcguard_copy_record now = {0, 0, 0};
        hcguard_status st = recheck(c, &now);
        e.dst = now.dst;
        e.src = now.src;
        e.bytes = now.nbytes;
        if (HCG_UNLIKELY(st != HCGUARD_OK)) {
            e.kind = HCG_EV_SKIP;
            e.reason = (uint8_t)st;
            run = 0;
        }
    }
    if (HCG_LIKELY(run))
        c->fn(c->user);
    else if (c->wrapped)
        free(c->user); /* what cuda.bindings' wrapper would have done after the call */
    e.t_end = hcg_ticks();
    current = NULL;
    hcg_event_push(&e);
    if (c->oneshot)
        hcg_call_free(c);
}
