/* The run-time trampoline: what the driver calls instead of the user's host
 * function. It re-checks a copy's record when it changed since it was
 * checked, times the call, and leaves one event in the thread's ring.
 * Common path: no lock, no allocation, no system call. */
#include <inttypes.h>
#include <string.h>

#include "run/run.h"

/* ---- the trampoline ---------------------------------------------------- */

void hcg_current_call_describe(hcg_event *e)
{
    const hcg_call *c = hcg_self.current;
    if (!c)
        return;
    e->fn = (uintptr_t)c->fn;
    e->user = (uintptr_t)c->user;
    e->stream = c->stream;
    e->graph = c->graph;
    e->node = c->node;
    e->fnkind = c->kind;
    e->api = c->api;
    e->caller = atomic_load_explicit(&c->caller, memory_order_relaxed);
    if (c->wrapped) /* named by what cuda.bindings' wrapper calls */
        e->fn = (uintptr_t)c->inner;
    e->seq = hcg_event_running_seq(); /* the finding belongs to this run (a replay's own) */
}

/* Runs at least this long (ticks) take their call site along: the slow
 * ones (HCGUARD_SLOW_MS, a little less against rounding); set at start-up. */
_Atomic uint64_t hcg_slow_ticks = UINT64_MAX;

/* The enqueue site of the call the watchdog found running (a tag of
 * hcg_event_running); read while the call may be returned already, so
 * only an atomic field, and checked by the caller against the run's start. */
static uintptr_t running_site(const void *tag)
{
    return atomic_load_explicit(&((const hcg_call *)tag)->caller, memory_order_relaxed);
}

/* A run-time verdict on a record not changed since enqueue keeps the
 * enqueue reason: device memory is told by asking the driver, which the
 * callback thread may not do, so the re-check sees it only as unmapped. */
static hcguard_status same_reason(hcguard_status at_enqueue, hcguard_status now)
{
    if (at_enqueue == HCGUARD_ERR_DST_DEVICE &&
        (now == HCGUARD_ERR_DST_UNMAPPED || now == HCGUARD_ERR_DST_NOT_WRITABLE))
        return at_enqueue;
    if (at_enqueue == HCGUARD_ERR_SRC_DEVICE &&
        (now == HCGUARD_ERR_SRC_UNMAPPED || now == HCGUARD_ERR_SRC_NOT_READABLE))
        return at_enqueue;
    return now;
}

/* The record read once, fault-contained, into *now: the snapshot that is
 * checked and that the copy then runs from; the user's record is not read
 * again. It is re-checked unless it equals what was checked at enqueue and
 * no unmap happened since (the generation did not move); buffers unmapped
 * past libc since (glibc's free) are caught by the contained copy. */
/* hcg_fault_ready, remembered once true (it never becomes false again):
 * a load instead of a call. */
static int fault_ready(void)
{
    static atomic_int seen;
    if (HCG_LIKELY(atomic_load_explicit(&seen, memory_order_relaxed)))
        return 1;
    if (!hcg_fault_ready())
        return 0;
    atomic_store_explicit(&seen, 1, memory_order_relaxed);
    return 1;
}

static hcguard_status recheck(const hcg_call *c, hcguard_copy_record *now)
{
    if (HCG_UNLIKELY(!c->rec))
        return HCGUARD_ERR_NULL_RECORD;
    /* The contained copy itself once the handler is in (the oracle's read
     * adds only its fallback). */
    const hcg_oracle *o;
    int unread = HCG_LIKELY(fault_ready())
                     ? hcg_fault_read_record(now, c->rec)
                     : (o = hcg_oracle_process(),
                        o->read(o->ctx, (uintptr_t)c->rec, now, sizeof *now));
    if (HCG_UNLIKELY(unread != 0))
        return HCGUARD_ERR_RECORD_UNREADABLE;
    /* (A record unreadable at enqueue has no contents to compare.) */
    int same = now->dst == c->snap.dst && now->src == c->snap.src &&
               now->nbytes == c->snap.nbytes &&
               c->enqueue_status != HCGUARD_ERR_RECORD_UNREADABLE;
    if (HCG_LIKELY(same && hcg_oracle_gen() == c->gen && !hcg_config_get()->recheck_always))
        return (hcguard_status)c->enqueue_status;
    /* Uncommon path: system calls allowed; driver calls are not (the oracle
     * skips them inside a host function). */
    hcguard_status st = hcg_validate_fields(hcg_oracle_process(), now);
    return same ? same_reason((hcguard_status)c->enqueue_status, st) : st;
}

/* A run of a copy whose record was reported at enqueue (audit mode, or a
 * graph node set with a bad record) is that report's error only while
 * the record is what was reported and the verdict the same: once the
 * record changed (a graph node's replays read it afresh), a skip is a new
 * error, counted and said, and a good copy no error at all. */
static int same_as_reported(const hcg_call *c, hcguard_status st, const hcguard_copy_record *now)
{
    if (st != (hcguard_status)c->enqueue_status)
        return 0;
    return st == HCGUARD_ERR_RECORD_UNREADABLE || st == HCGUARD_ERR_NULL_RECORD ||
           (now->dst == c->snap.dst && now->src == c->snap.src && now->nbytes == c->snap.nbytes);
}

/* Whose code runs a checked copy: hcguard's own functions, cuda.core's and
 * registered ones are declared to do exactly the record's copy, so hcguard
 * does it, from the snapshot; a --copy-fn function may do more, so it is
 * called, with the snapshot's address. */
static int hcguard_copies(hcg_fnkind k)
{
    return k == HCG_FN_COPY_HCGUARD || k == HCG_FN_COPY_CUDA_CORE || k == HCG_FN_COPY_REGISTERED;
}

/* The copy, fault-contained (split across the copy threads when large);
 * a fault is the event's reason. */
static inline __attribute__((always_inline)) void copy_snapshot(const hcguard_copy_record *r,
                                                                hcg_event *e)
{
    hcg_fault_info fi;
    if (HCG_LIKELY(hcg_copy_run((void *)r->dst, (const void *)r->src, r->nbytes, &fi) == 0))
        return;
    e->kind = HCG_EV_SKIP;
    e->reason = HCGUARD_ERR_COPY_FAULTED;
    e->flags &= (uint8_t)~HCG_EVF_REPORTED; /* a new error, whatever enqueue said */
    e->fault_addr = fi.addr;
    e->fault_sig = (uint8_t)fi.sig;
    e->fault_code = (uint8_t)fi.code;
}

/* The user's function (or hcguard's copy for it). snap: a copy's checked
 * record, NULL for other host functions. Inline in run (no second frame
 * on the common path); the watchdog stops watching when run pushes the
 * event (hcg_event_push_ran). */
static inline __attribute__((always_inline)) void call_fn(hcg_call *c, CUstream s,
                                                          CUresult status, int stream_cb,
                                                          const hcguard_copy_record *snap,
                                                          hcg_event *e)
{
    /* Only the user's code counts as inside a host function: hcguard's
     * checks and copies are its own. Nested trampolines keep theirs. */
    unsigned char was = hcg_self.in_host_fn;
    hcg_event_running(e, c, e->t_start);
    if (snap && hcguard_copies((hcg_fnkind)c->kind)) {
        copy_snapshot(snap, e);
    } else {
        hcg_self.in_host_fn = 1;
        if (stream_cb)
            ((CUstreamCallback)(void *)c->fn)(s, status, c->user);
        else if (snap) /* --copy-fn: called with the checked snapshot */
            c->inner((void *)snap);
        else if (HCG_UNLIKELY(c->wrapped && !c->oneshot))
            c->inner(c->rec); /* a wrapper that frees its data, in a graph */
        else
            c->fn(c->user);
        hcg_self.in_host_fn = was;
    }
}

/* call_fn inside an NVTX range (HCGUARD_NVTX), off the common path; a
 * copy's range carries the bytes of its checked record. */
static __attribute__((noinline, cold)) void call_fn_nvtx(hcg_call *c, CUstream s, CUresult status,
                                                         int stream_cb,
                                                         const hcguard_copy_record *snap,
                                                         hcg_event *e)
{
    hcg_nvtx_push(c->nvtx_name, snap ? snap->nbytes : 0, snap != NULL);
    call_fn(c, s, status, stream_cb, snap, e);
    hcg_nvtx_pop();
}

/* ---- graph replays: which launch a node's run belongs to ----------------- */
void hcg_replay_note(hcg_call *c, uintptr_t stream, uint64_t ticks, uint32_t tid)
{
    hcg_replays *r = c->replays;
    if (!r)
        return;
    uint64_t k = atomic_load_explicit(&r->launched, memory_order_relaxed);
    hcg_replay *s = &r->slot[k % HCG_REPLAY_SLOTS];
    atomic_store_explicit(&s->n, 0, memory_order_relaxed); /* while it changes */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->seq, hcg_event_next_seq(), memory_order_relaxed);
    atomic_store_explicit(&s->t_enqueue, ticks, memory_order_relaxed);
    atomic_store_explicit(&s->stream, stream, memory_order_relaxed);
    atomic_store_explicit(&s->tid, tid, memory_order_relaxed);
    atomic_store_explicit(&s->n, k + 1, memory_order_release);
    atomic_store_explicit(&r->launched, k + 1, memory_order_relaxed);
}

void hcg_replay_unnote(hcg_call *c)
{
    hcg_replays *r = c->replays;
    uint64_t k = r ? atomic_load_explicit(&r->launched, memory_order_relaxed) : 0;
    if (!k)
        return;
    atomic_store_explicit(&r->slot[(k - 1) % HCG_REPLAY_SLOTS].n, 0, memory_order_relaxed);
    atomic_store_explicit(&r->launched, k - 1, memory_order_relaxed);
}

/* A graph node's run: the launch it belongs to gives it its own seq, the
 * launch's time and stream and thread; a launch not recorded (more than
 * HCG_REPLAY_SLOTS launches ahead of the run, a graph launched in a capture
 * or before hcguard saw its executable graph made) leaves the stream
 * unknown (0) and the wait 0. */
static void replay_of(const hcg_call *c, hcg_event *e)
{
    hcg_replays *r = c->replays;
    uint64_t k = atomic_fetch_add_explicit(&r->ran, 1, memory_order_relaxed);
    const hcg_replay *s = &r->slot[k % HCG_REPLAY_SLOTS];
    if (atomic_load_explicit(&s->n, memory_order_acquire) == k + 1) {
        e->seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
        e->t_enqueue = atomic_load_explicit(&s->t_enqueue, memory_order_relaxed);
        e->stream = atomic_load_explicit(&s->stream, memory_order_relaxed);
        e->enq_tid = atomic_load_explicit(&s->tid, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->n, memory_order_relaxed) == k + 1)
            return;
    }
    e->seq = hcg_event_next_seq();
    e->t_enqueue = e->t_start;
    e->stream = 0;
    e->enq_tid = 0;
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
    e.fault_sig = e.fault_code = 0;
    e.fault_addr = 0;
    if (HCG_UNLIKELY(e.flags)) /* its record was reported at enqueue */
        e.reject_seq = c->reject_seq;
    e.caller = 0;
    e.tid = hcg_gettid();
    e.seq = c->seq;
    e.t_enqueue = c->t_enqueue;
    /* A function inside cuda.bindings' wrapper is named by itself (the copy
     * function recognised, not the wrapper). */
    e.fn = (uintptr_t)(HCG_UNLIKELY(c->wrapped) ? c->inner : c->fn);
    e.user = (uintptr_t)c->user;
    e.stream = c->stream;
    e.bytes = e.dst = e.src = 0;
    e.graph = c->oneshot ? 0 : c->graph; /* the second line only when needed */
    e.node = c->oneshot ? 0 : c->node;
    e.t_start = hcg_ticks();
    e.enq_tid = 0; /* a stream launch's: its pool's (the sinks ask) */
    if (HCG_UNLIKELY(!c->oneshot) && c->replays)
        replay_of(c, &e);
    hcg_self.current = c;
    hcguard_copy_record now = {0, 0, 0};
    const hcguard_copy_record *snap = NULL;
    int go = 1;
    if (hcg_fnkind_is_copy((hcg_fnkind)c->kind)) {
        hcguard_status st = recheck(c, &now);
        if (HCG_UNLIKELY(e.flags) && !same_as_reported(c, st, &now))
            e.flags &= (uint8_t)~HCG_EVF_REPORTED; /* a new error, or none */
        e.dst = now.dst;
        e.src = now.src;
        e.bytes = now.nbytes;
        snap = &now;
        if (HCG_UNLIKELY(st != HCGUARD_OK)) {
            e.kind = HCG_EV_SKIP;
            e.reason = (uint8_t)st;
            go = 0;
        }
    }
    if (HCG_LIKELY(go)) {
        if (HCG_UNLIKELY(hcg_nvtx_on))
            call_fn_nvtx(c, s, status, stream_cb, snap, &e);
        else
            call_fn(c, s, status, stream_cb, snap, &e);
    }
    /* What cuda.bindings' wrapper would have done after the call, when it
     * was not called (skipped, or a copy run from the snapshot). */
    if (c->wrapped && c->oneshot && (!go || snap))
        free(c->user);
    e.t_end = hcg_ticks();
    /* Off the common path: a skip, or a slow run, names its enqueue site. */
    if (HCG_UNLIKELY(e.kind != HCG_EV_RUN ||
                     e.t_end - e.t_start >= atomic_load_explicit(&hcg_slow_ticks,
                                                                 memory_order_relaxed))) {
        e.caller = atomic_load_explicit(&c->caller, memory_order_relaxed);
    }
    hcg_self.current = NULL;
    int oneshot = c->oneshot;
    hcg_event_push_ran(&e);
    if (oneshot)
        hcg_call_release_batched(c);
}

/* Nanoseconds per tick, or less (a lower threshold only takes the site
 * along more often): the estimate, rough at the first launch (in the
 * first 100 us, 1.0 for a TSC of 1 GHz or more, and the counter's own
 * frequency on Arm). */
static double ns_per_tick_at_most(void)
{
    return hcg_clock_rate_estimate(); /* the first launch: no wait */
}

uint32_t hcg_g_stamp_every = 1;

void hcg_trampoline_init(void)
{
    const hcg_config *cfg = hcg_config_get();
    /* The log's t_enqueue_ns, the trace's enqueue slices and flows and
     * the NVTX ranges need every launch's stamp; the summary's queue wait
     * alone does with a sample. */
    int every = cfg->log_path[0] || cfg->trace_path[0] || cfg->nvtx;
    hcg_g_stamp_every = every ? 1 : HCG_STAMP_EVERY;
    hcg_events_on_running(running_site);
    if (cfg->slow_ms > 0 && HCG_FINDING_ON(cfg, HCG_FIND_SLOW))
        atomic_store(&hcg_slow_ticks,
                     (uint64_t)(cfg->slow_ms * 1e6 * 0.99 / ns_per_tick_at_most()));
}

void CUDA_CB hcg_trampoline(void *arg)
{
    run(arg, NULL, CUDA_SUCCESS, 0);
}

void CUDA_CB hcg_stream_cb_trampoline(CUstream s, CUresult status, void *arg)
{
    run(arg, s, status, 1);
}
