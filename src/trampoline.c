/* The run-time trampoline: what the driver calls instead of the user's host
 * function. It re-checks a copy's record when it changed since it was
 * checked, times the call, and leaves one event in the thread's ring.
 * Common path: no lock, no allocation, no system call. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hcg.h"

/* ---- the call pool ------------------------------------------------------
 * Calls are allocated on application threads and freed on the driver's
 * callback thread, so the pool is a set of slabs of slots claimed by
 * compare-and-swap on `busy`: no lock, no ABA. Slabs are only added. */
#define SLAB_SLOTS 4096

typedef struct slab {
    struct slab *next;
    hcg_call slot[SLAB_SLOTS];
} slab;

static _Atomic(slab *) slabs;
static atomic_size_t cursor;
static atomic_size_t n_slabs;

static hcg_call *claim_in(slab *s, size_t start)
{
    for (size_t i = 0; i < SLAB_SLOTS; i++) {
        hcg_call *c = &s->slot[(start + i) % SLAB_SLOTS];
        uint8_t want = 0;
        if (!atomic_load_explicit(&c->busy, memory_order_relaxed) &&
            atomic_compare_exchange_strong_explicit(&c->busy, &want, 1, memory_order_acquire,
                                                    memory_order_relaxed))
            return c;
    }
    return NULL;
}

static slab *add_slab(void)
{
    slab *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return NULL;
    slab *head = atomic_load(&slabs);
    do
        s->next = head;
    while (!atomic_compare_exchange_weak(&slabs, &head, s));
    atomic_fetch_add(&n_slabs, 1);
    return s;
}

hcg_call *hcg_call_alloc(void)
{
    size_t start = atomic_fetch_add_explicit(&cursor, 1, memory_order_relaxed);
    for (slab *s = atomic_load(&slabs); s; s = s->next) {
        hcg_call *c = claim_in(s, start);
        if (c)
            return c;
    }
    slab *s = add_slab();
    return s ? claim_in(s, 0) : NULL;
}

void hcg_call_free(hcg_call *c)
{
    atomic_store_explicit(&c->busy, 0, memory_order_release);
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
