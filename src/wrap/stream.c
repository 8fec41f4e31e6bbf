/* Stream wrappers: cuLaunchHostFunc and its variants, and the capture
 * entry points (a host function enqueued while its stream captures becomes
 * a graph node and runs once per replay). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

#include "wrap/wrap.h"

/* While no capture is open in the process (HCG_LAUNCH_CAPTURE clear in
 * hcg_g_launch_rare), no launch needs the (driver) question "is this
 * stream capturing?". While one is, a launch asks and launches holding
 * capture_lock to read, and the entry points that begin and end captures
 * hold it to write: the answer still holds when the driver takes the
 * launch. Without it, a capture begun (ended) by another thread between
 * the two made a launch found not capturing (capturing) a graph node freed
 * after its first run (a queued call freed with the capture graph). The
 * begin that opens a capture when none is open sets the flag, then waits
 * for the launches that read it clear (hcg_launch_mark, run.h); the end of
 * the last open capture clears it, and launches no longer ask. Where that
 * wait cannot be made sure of (no membarrier(2): a pause stands in), or
 * gives up (2 s), the flag stays set for good once set (README,
 * "Limits").
 * - Held only across the question and the driver call, never across a
 *   wait of hcguard's own (flow control waits after it is let go).
 * - Writers first: with readers first, launches on other streams, always
 *   one in flight, kept a begin waiting for seconds. So no thread may
 *   take it twice to read: none does (a launch makes no launch inside).
 * - Never taken inside a host function (hcg_self.in_host_fn): the driver
 *   refuses the call there anyway, and a begin or end waiting for the
 *   lock would wait for a launch blocked in the driver behind the very
 *   host function that waits.
 * A stream that joins a capture by waiting for an event recorded in it
 * (cuStreamWaitEvent) changes the answer for launches on it as a begin
 * does: the wait takes the lock to write too (stream_wait_event). */
static pthread_rwlock_t capture_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

/* Cancellation held back while the lock is: a launch cancelled in the
 * driver would leave it held, and every later begin waiting. Never taken
 * twice by one thread: a signal handler's call inside a call that holds
 * or waits for it (a destroy taking it to write behind its own thread's
 * read, or a second read behind a waiting writer) would wait for ever;
 * glibc says EDEADLK only for a second write. hcg_self.capture_held says
 * which (3 while waiting, set before the lock is asked for; 0 after it is
 * let go). Nested, without it: a launch inside its thread's read needs
 * none (that hold keeps every begin and end out); one inside a write or a
 * wait cannot trust its answer, and keeps its call (nested_unsure). Nested
 * in any call of its own thread that holds, waits for or is marked instead
 * of the lock (nested_call): a destroy counts no capture ended; a begin,
 * an end or a wait is refused (nested_refused; a wait inside a marked
 * call only while the flag is set): it could change the answer of the
 * very launch it interrupted. */
static hcg_capture_token capture_take(int write)
{
    hcg_capture_token t = {hcg_nocancel_begin(), 0};
    if (hcg_self.in_host_fn || hcg_self.capture_held)
        return t;
    hcg_self.capture_held = 3;
    t.held = (write ? pthread_rwlock_wrlock(&capture_lock)
                    : pthread_rwlock_rdlock(&capture_lock)) == 0;
    hcg_self.capture_held = t.held ? (write ? 2 : 1) : 0;
    return t;
}

/* Nested in its thread's write of the lock, or its wait for it: whether a
 * stream captures may change under the call (see capture_take). */
static int nested_unsure(void)
{
    return hcg_self.capture_held > 1;
}

/* A mark of this thread's pool found by nested_call for 2 s is taken to
 * be left by a call the thread jumped out of (siglongjmp from a handler),
 * not one a handler interrupted: stale_marks of its marks are not counted
 * from then on (until the count is seen lower), as a begin's settle gives
 * up on it. marked_since: when nested_call first found it marked, 0 once
 * it found it not. */
#define STALE_MARK_NS 2000000000ull
static _Thread_local uint32_t stale_marks;
static _Thread_local uint64_t marked_since;

/* More marks (its pool's and marker's) than this thread has left behind;
 * a mark older than STALE_MARK_NS becomes one left behind (said once). */
static int marked_now(void)
{
    uint32_t n = hcg_marks_mine();
    if (n <= stale_marks) {
        stale_marks = n;
        marked_since = 0;
        return 0;
    }
    uint64_t now = hcg_wait_clock_ns();
    if (!marked_since)
        marked_since = now;
    if (now - marked_since < STALE_MARK_NS)
        return 1;
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        hcg_problem("a host function launch or event wait of thread %" PRIu32 " did not finish "
                    "(a jump out of it?): captures begun on that thread no longer wait for it",
                    hcg_gettid());
    stale_marks = n;
    marked_since = 0;
    return 0;
}

/* A call from a signal handler inside a call of its own thread that holds
 * or waits for the lock, or that is marked (it read "no capture open" and
 * has not had the driver's answer: hcg_launch_mark, or a wait's mark). A
 * begin there would not wait for the call it interrupted: that launch
 * would be captured, taken for a one-shot. */
static int nested_call(void)
{
    if (hcg_self.capture_held)
        return 1;
    return marked_now();
}

/* A begin, an end or a wait called from a signal handler inside a call of
 * its own thread (nested_call): refused, said once. */
__attribute__((noinline, cold)) static int nested_refused(const char *name)
{
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        hcg_msg("ERROR: %s called from a signal handler inside a CUDA call of the same "
                "thread (or within 2 s of a jump out of one): refused with "
                "CUDA_ERROR_NOT_PERMITTED (hcguard cannot order it with that call's launch)",
                name);
    return 1;
}

hcg_capture_token hcg_capture_hold(void)
{
    return capture_take(0);
}

void hcg_capture_release(hcg_capture_token t)
{
    if (t.held) {
        pthread_rwlock_unlock(&capture_lock);
        hcg_self.capture_held = 0;
    }
    hcg_nocancel_end(t.cancel);
}

/* The child has the forking thread alone, and a fresh lock; held again as
 * that thread held it where it forked from a signal handler inside a
 * launch or a begin (which lets go of it when it resumes). */
void hcg_capture_after_fork(void)
{
    static const pthread_rwlock_t fresh = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
    capture_lock = fresh;
    if (hcg_self.capture_held == 1)
        pthread_rwlock_rdlock(&capture_lock);
    else if (hcg_self.capture_held == 2)
        pthread_rwlock_wrlock(&capture_lock);
}

/* Which entry point, and cuLaunchHostFunc_v2's sync mode. */
typedef struct launch_args {
    hcg_api api;
    CUstream stream;
    CUhostFn fn;
    void *user;
    unsigned int sync_mode;
    uintptr_t ra; /* the wrapper's return address: the enqueue site */
    void *real;   /* the driver's entry point for api (real_entry) */
} launch_args;

/* The real entry point of api (NULL: the driver has none). Inline with a
 * constant api in each wrapper, so that the choice costs nothing at run
 * time; loaded once a launch, and called through what was loaded. */
static inline __attribute__((always_inline)) void *real_entry(hcg_driver *d, hcg_api api)
{
    switch (api) {
    case HCG_API_LAUNCH_HOST_FUNC:
        return (void *)atomic_load_explicit(&d->cuLaunchHostFunc, memory_order_relaxed);
    case HCG_API_LAUNCH_HOST_FUNC_PTSZ:
        return (void *)atomic_load_explicit(&d->cuLaunchHostFunc_ptsz, memory_order_relaxed);
    case HCG_API_LAUNCH_HOST_FUNC_V2:
        return (void *)atomic_load_explicit(&d->cuLaunchHostFunc_v2, memory_order_relaxed);
    case HCG_API_LAUNCH_HOST_FUNC_V2_PTSZ:
        return (void *)atomic_load_explicit(&d->cuLaunchHostFunc_v2_ptsz, memory_order_relaxed);
    default: return NULL;
    }
}

/* a.real (the arguments are passed by value, never through memory another
 * thread could see) with fn(user). */
static inline __attribute__((always_inline)) CUresult call_real(launch_args a, CUhostFn fn,
                                                                void *user)
{
    switch (a.api) {
    case HCG_API_LAUNCH_HOST_FUNC:
    case HCG_API_LAUNCH_HOST_FUNC_PTSZ:
        return ((hcg_pfn_cuLaunchHostFunc)a.real)(a.stream, fn, user);
    case HCG_API_LAUNCH_HOST_FUNC_V2:
    case HCG_API_LAUNCH_HOST_FUNC_V2_PTSZ:
        return ((hcg_pfn_cuLaunchHostFunc_v2)a.real)(a.stream, fn, user, a.sync_mode);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The driver's answer r to a launch handed to it with no call to measure
 * it (out of memory, more launching threads than pools): counted if the
 * driver took it. */
static CUresult unmeasured(CUresult r)
{
    if (r == CUDA_SUCCESS)
        hcg_count_unmeasured();
    return r;
}

__attribute__((noinline, cold)) static CUresult call_unmeasured(launch_args a)
{
    return unmeasured(call_real(a, a.fn, a.user));
}

static int is_ptsz(hcg_api api)
{
    return api == HCG_API_LAUNCH_HOST_FUNC_PTSZ || api == HCG_API_LAUNCH_HOST_FUNC_V2_PTSZ;
}

/* Whether the call may be replayed (stream capture), so must not be freed
 * after its first run. Asked of the driver only once any capture began. */
/* Whether s (of the per-thread default stream's entry points: ptsz)
 * captures: 1, 0, or -1 if the driver cannot say. */
static int capture_status(hcg_driver *d, int ptsz, CUstream s)
{
    hcg_pfn_cuStreamIsCapturing q = ptsz ? atomic_load(&d->cuStreamIsCapturing_ptsz)
                                         : atomic_load(&d->cuStreamIsCapturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!q || q(s, &st) != CUDA_SUCCESS)
        return -1;
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

__attribute__((noinline)) static int stream_is_capturing(hcg_driver *d, hcg_api api,
                                                          CUstream s)
{
    /* Unknown: keeping the call alive is the safe side. */
    return capture_status(d, is_ptsz(api), s) != 0;
}

static void no_driver(void)
{
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        hcg_msg("%s: host functions cannot be launched", hcg_driver_error());
}

/* A captured launch: the call becomes the capture graph's. Nonzero if
 * the capture graph was not found (then nothing holds it). */
__attribute__((noinline, cold)) static int adopt_captured(hcg_call *c, hcg_api api,
                                                          CUstream s)
{
    if (hcg_graph_adopt_capture(c, s, is_ptsz(api)) == 0)
        return 0;
    hcg_debug("capture graph of stream %p not found: its host call is kept for ever if the "
              "driver takes it", (void *)s);
    return -1;
}

/* The driver refused c's launch with r: its count undone, and c, the
 * thread's own again, given back. */
__attribute__((noinline, cold)) static CUresult launch_refused(hcg_call *c, CUresult r)
{
    hcg_uncount_launch(c->owner, (hcg_fnkind)c->kind);
    hcg_call_free_local(c);
    return r;
}

/* c, a call from p of kind, to the driver: the driver runs c's trampoline
 * instead of the function. Counted first (undone if refused), so the
 * call is never read after the driver took it: the callback thread may
 * have run it and given it back already (its line is that thread's by
 * now), and c is the only value kept across the driver call (read only
 * if it is refused). No flow control (launch_hand adds it). */
static inline __attribute__((always_inline)) CUresult launch_given(launch_args a, hcg_pool *p,
                                                                   hcg_call *c, hcg_fnkind kind)
{
    hcg_count_launch(p, kind);
    CUresult r = call_real(a, hcg_trampoline, c);
    if (HCG_UNLIKELY(r != CUDA_SUCCESS))
        return launch_refused(c, r);
    return CUDA_SUCCESS;
}

/* launch_given, then flow control: the pool, this thread's, found again,
 * and the launch's mark taken off (hcg_launch_mark) before flow control
 * may wait.
 * Written out, not through launch_given: the launch path's instructions
 * are counted (bench/callgrind.py), and the compiler does not know that
 * launch_refused never returns CUDA_SUCCESS. */
static inline __attribute__((always_inline)) CUresult launch_hand(launch_args a, hcg_pool *p,
                                                                  hcg_call *c, hcg_fnkind kind)
{
    hcg_count_launch(p, kind);
    CUresult r = call_real(a, hcg_trampoline, c);
    hcg_pool *q = hcg_self.pool; /* p, found again */
    hcg_launch_unmark(q);        /* marked by the caller */
    if (HCG_UNLIKELY(r != CUDA_SUCCESS))
        return launch_refused(c, r);
    hcg_pool_flow(q);
    return CUDA_SUCCESS;
}

/* c launched on a stream that captures: the call becomes the capture
 * graph's (kept if the driver refuses it), counted as captured. */
__attribute__((noinline, cold)) static CUresult launch_captured(launch_args a, hcg_call *c)
{
    int loose = adopt_captured(c, a.api, a.stream);
    hcg_fnkind kind = (hcg_fnkind)c->kind;
    hcg_pool *pool = c->owner;
    CUresult r = call_real(a, hcg_trampoline, c);
    if (r != CUDA_SUCCESS) {
        /* Nothing was captured: no finding, and the wrapper's data is its
         * caller's again (cuda.bindings frees it when the driver refuses). */
        c->wrapped = 0;
        if (loose)
            hcg_call_free_local(c); /* the driver never had it, no graph holds it */
        return r;                   /* else it goes with the capture graph */
    }
    hcg_count_launch(pool, kind);
    hcg_count_captured_in(pool);
    hcg_graph_note_captured(c, a.stream, is_ptsz(a.api));
    /* The wrapper frees its data when it returns: a second replay would
     * read freed memory. The trampoline calls what it wraps instead. */
    if (c->wrapped) {
        hcg_event_link_seq(c->seq);
        hcg_audit_report_fn(HCG_FIND_ONESHOT_IN_GRAPH, a.api, a.stream, (void *)c->inner,
                            c->rec);
    }
    return r;
}

/* c launched in a process that has begun a capture: asked and launched
 * with no capture begun or ended in between (capture_lock). */
__attribute__((noinline)) static CUresult launch_capture_era(hcg_driver *d, launch_args a,
                                                            hcg_call *c)
{
    hcg_capture_token t = hcg_capture_hold();
    /* (Unsure: kept, as if captured; a capture graph not found keeps it.) */
    int captured = (!t.held && nested_unsure()) || stream_is_capturing(d, a.api, a.stream);
    CUresult r = captured ? launch_captured(a, c)
                          : launch_given(a, c->owner, c, (hcg_fnkind)c->kind);
    hcg_capture_release(t);
    if (!captured && r == CUDA_SUCCESS)
        hcg_pool_flow(hcg_self.pool);
    return r;
}

/* The launch path marks the thread's pool (hcg_launch_mark) before it
 * reads the flags that decide whether it asks about capture, and keeps
 * the mark until the driver answered (launch_hand) or it hands over to
 * the capture lock: every return before that takes it off here. Marks
 * count (a signal handler's launch may nest), so each is taken off once. */
__attribute__((noinline, cold)) static CUresult unmark_mine(CUresult r)
{
    if (hcg_self.pool)
        hcg_launch_unmark(hcg_self.pool);
    return r;
}

/* The thread's pool marked, by a path that came in unmarked. */
static void mark_mine(hcg_call *c)
{
    hcg_launch_mark(c->owner);
}

/* c launched, once what is rare is done: its NVTX name, its call site
 * (the return address alone, stored by the caller, or the stack when
 * --backtrace asks for frames, or, in a process with the CUDA runtime,
 * the program's frame above a return address into it), a capture. */
static inline __attribute__((always_inline)) CUresult launch_call(hcg_driver *d, launch_args a,
                                                                  hcg_call *c)
{
    hcg_pool *p = c->owner; /* this thread's, marked by the caller (unmark_mine) */
    int rare = atomic_load_explicit(&hcg_g_launch_rare, memory_order_acquire);
    if (HCG_UNLIKELY(rare)) {
        hcg_call_nvtx(c);
        if (rare & (HCG_LAUNCH_BACKTRACE | HCG_LAUNCH_RUNTIME))
            atomic_store_explicit(&c->caller, hcg_callsite_rare(a.ra), memory_order_relaxed);
        if (rare & HCG_LAUNCH_CAPTURE) {
            hcg_launch_unmark(p); /* the lock instead */
            return launch_capture_era(d, a, c);
        }
    }
    return launch_hand(a, p, c, (hcg_fnkind)c->kind);
}

/* Everything but an ordinary function or a copy launched as it is:
 * cuda.bindings' wrapper, libc functions, closures, HCGUARD_DEBUG. */
__attribute__((noinline)) static CUresult launch_general(hcg_driver *d, launch_args a,
                                                        int marked)
{
    hcg_call *c = NULL;
    CUresult r;
    if ((r = hcg_prepare_call(a.api, a.stream, a.fn, a.user, &c)) != CUDA_SUCCESS)
        ; /* refused: a bad record, a libc function, or a copy with no call */
    else if (HCG_UNLIKELY(!c))
        r = call_unmeasured(a);
    else
        r = CUDA_SUCCESS;
    if (r != CUDA_SUCCESS || !c)
        return marked ? unmark_mine(r) : r;
    if (!marked) /* launch_full's way in */
        mark_mine(c);
    atomic_store_explicit(&c->caller, a.ra, memory_order_relaxed);
    return launch_call(d, a, c);
}

/* A copy launched with no call to guard its run (out of memory, no pool
 * free): a bad record is refused as ever, and in guard mode a good one too
 * (hcg_copy_callless), since it would run unchecked; audit mode passes
 * it. */
__attribute__((noinline, cold)) static CUresult launch_copy_unmeasured(launch_args a,
                                                                      hcg_fnkind kind)
{
    hcguard_copy_record snap;
    hcguard_status why = HCGUARD_OK;
    uint64_t gen;
    if (hcg_prepare_copy(a.api, a.stream, a.fn, a.user, kind, hcg_ticks(), &snap, &why, &gen))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = hcg_copy_callless(a.api);
    return r != CUDA_SUCCESS ? r : call_unmeasured(a);
}

/* The whole check of a copy whose record is not this thread's last
 * verdict, unchanged (its first launch, another record, a record that
 * changed, an unmap since): c's snapshot and verdict from it, made at now
 * (hcg_copy_stamp). Nonzero if the launch is refused (c given back). */
__attribute__((noinline)) static int launch_copy_check(hcg_call *c, uint64_t now)
{
    hcguard_status why = HCGUARD_OK;
    uint64_t gen;
    if (hcg_prepare_copy((hcg_api)c->api, (CUstream)c->stream, c->fn, c->user,
                         (hcg_fnkind)c->kind, now, &c->snap, &why, &gen)) {
        hcg_call_free_local(c);
        return 1;
    }
    c->enqueue_status = (uint8_t)why;
    if (HCG_UNLIKELY(why != HCGUARD_OK)) /* reported at enqueue just now (audit mode) */
        c->reject_seq = hcg_self.reject_seq;
    c->gen = gen;
    return 0;
}

/* A copy function launched as it is, in c (a call from this thread's
 * pool): the call made first, then its record read once, fault-contained,
 * straight into the call's snapshot, and compared with this thread's last
 * verdict (there is one only once the fault handler is in:
 * hcg_oracle_hot); else the whole check (which reads it again: a record
 * that faulted is reported from there). What the compare needs is read
 * back from the call, not kept across the read. Its times: hcg_copy_stamp
 * (a time stamp sampled as an ordinary launch's, a verdict's age taken at
 * the thread's last one). */
static inline __attribute__((always_inline)) CUresult launch_copy(hcg_driver *d, launch_args a,
                                                                  hcg_fnkind kind, hcg_call *c)
{
    uint64_t now;
    hcg_call_init(c, a.api, a.stream, a.fn, a.user, kind, HCGUARD_OK, 0,
                  hcg_copy_stamp(c->owner, &now));
    c->rec = a.user;
    c->inner = a.fn;
    c->gen = hcg_oracle_gen(); /* before the record is read */
    atomic_store_explicit(&c->caller, a.ra, memory_order_relaxed);
    if (HCG_UNLIKELY(!hcg_oracle_hot(a.user) ||
                     hcg_fault_read_record(&c->snap, a.user) != 0 ||
                     !hcg_oracle_holds_hot(&c->snap, now, c->gen)) &&
        launch_copy_check(c, now))
        return unmark_mine(CUDA_ERROR_INVALID_VALUE);
    /* The launch's arguments again from c (and the entry point from the
     * table), not kept across the read. */
    launch_args b = {a.api, (CUstream)c->stream, c->fn, c->user, a.sync_mode,
                     atomic_load_explicit(&c->caller, memory_order_relaxed), real_entry(d, a.api)};
    return launch_call(d, b, c);
}

/* The whole launch path, every case: a driver, settings or start-up still
 * to load, mode off, a function to recognise, a copy, HCGUARD_DEBUG, a
 * thread's first launch, out of memory, NVTX names, call sites, capture.
 * Its arguments are the wrapper's own (all in registers), so the fast
 * path below reaches it by a jump. */
__attribute__((noinline)) static CUresult launch_full(hcg_api api, CUstream s, CUhostFn fn,
                                                      void *user, unsigned int sync_mode,
                                                      uintptr_t ra)
{
    launch_args a = {api, s, fn, user, sync_mode, ra, NULL};
    hcg_driver *d = hcg_driver_get();
    if (HCG_UNLIKELY(!d)) {
        no_driver();
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    a.real = real_entry(d, a.api);
    if (HCG_UNLIKELY(!a.real))
        return CUDA_ERROR_NOT_SUPPORTED; /* e.g. cuLaunchHostFunc_v2 on a 13.0 driver */
    const hcg_config *cfg = hcg_config_get();
    if (HCG_UNLIKELY(cfg->mode == HCG_MODE_OFF || a.fn == NULL))
        return call_real(a, a.fn, a.user);
    if (HCG_UNLIKELY(hcg_audit_wrapper_call(a.api)))
        return CUDA_ERROR_NOT_PERMITTED;
    hcg_init();
    if (HCG_UNLIKELY(atomic_load_explicit(&hcg_g_launch_rare, memory_order_relaxed) &
                     HCG_LAUNCH_UNREADY) && !cfg->debug)
        atomic_fetch_and(&hcg_g_launch_rare, ~HCG_LAUNCH_UNREADY); /* all is: see check.h */
    hcg_fnkind kind = hcg_recognize_fast((void *)a.fn);
    if (HCG_UNLIKELY(kind != HCG_FN_ORDINARY || cfg->debug)) {
        if (hcg_fnkind_is_copy(kind) && !cfg->debug) {
            hcg_call *c = hcg_call_alloc();
            if (HCG_UNLIKELY(!c))
                return launch_copy_unmeasured(a, kind);
            mark_mine(c);
            return launch_copy(d, a, kind, c);
        }
        return launch_general(d, a, 0);
    }
    hcg_call *c = hcg_call_alloc();
    if (HCG_UNLIKELY(!c))
        return call_unmeasured(a);
    hcg_call_init(c, a.api, a.stream, a.fn, a.user, kind, HCGUARD_OK, 0,
                  hcg_launch_stamp(c->owner));
    atomic_store_explicit(&c->caller, a.ra, memory_order_relaxed);
    mark_mine(c);
    return launch_call(d, a, c);
}

/* A copy (or a function only launch_general takes) recognised by the
 * fast path's test: the driver loaded, hcguard ready (as launch_fast_ok
 * found), the kind this thread's last answer. One function for each entry
 * point (api a constant in each: launch_known_jump), reached by a jump. */
static inline __attribute__((always_inline)) CUresult launch_known(hcg_api api, CUstream s,
                                                                   CUhostFn fn, void *user,
                                                                   unsigned int sync_mode,
                                                                   uintptr_t ra)
{
    launch_args a = {api, s, fn, user, sync_mode, ra, real_entry(&hcg_g_drv, api)};
    hcg_fnkind kind = (hcg_fnkind)hcg_t_recognized.kind;
    if (HCG_LIKELY(hcg_fnkind_is_copy(kind))) /* a call is there: launch_fast_ok */
        return launch_copy(&hcg_g_drv, a, kind, hcg_call_pop(hcg_self.pool));
    return launch_general(&hcg_g_drv, a, 1);
}
#define LAUNCH_APIS(X)                                                         \
    X(HCG_API_LAUNCH_HOST_FUNC)                                                \
    X(HCG_API_LAUNCH_HOST_FUNC_PTSZ)                                           \
    X(HCG_API_LAUNCH_HOST_FUNC_V2)                                             \
    X(HCG_API_LAUNCH_HOST_FUNC_V2_PTSZ)
#define LAUNCH_KNOWN(api)                                                      \
    __attribute__((noinline)) static CUresult launch_known_##api(              \
        CUstream s, CUhostFn fn, void *user, unsigned int sync_mode, uintptr_t ra) \
    {                                                                          \
        return launch_known(api, s, fn, user, sync_mode, ra);                  \
    }
LAUNCH_APIS(LAUNCH_KNOWN)
#undef LAUNCH_KNOWN
static inline __attribute__((always_inline)) CUresult launch_known_jump(launch_args a)
{
    switch (a.api) {
#define LAUNCH_KNOWN(api)                                                      \
    case api: return launch_known_##api(a.stream, a.fn, a.user, a.sync_mode, a.ra);
        LAUNCH_APIS(LAUNCH_KNOWN)
#undef LAUNCH_KNOWN
    default: return unmark_mine(CUDA_ERROR_INVALID_VALUE);
    }
}

/* Whether launch a from pool p may take the fast path (an ordinary
 * function) or launch_known: hcguard ready with nothing rare asked of
 * launches (hcg_g_launch_rare: one load for the driver, the settings and
 * start-up), the entry point there (a->real, loaded after that word, which
 * the first launch to find the driver loaded cleared), not inside a host
 * function, fn this thread's last recognised function, a call on p's free
 * list, and the counter for a time stamp if one is due. Loads and compares
 * only: no call, so nothing to keep across one. */
static inline __attribute__((always_inline)) int launch_fast_ok(launch_args *a, hcg_pool *p)
{
    CUhostFn fn = a->fn;
    return !atomic_load_explicit(&hcg_g_launch_rare, memory_order_acquire) &&
           (a->real = real_entry(&hcg_g_drv, a->api)) != NULL && /* loaded after the bit */
           fn != NULL && !hcg_self.in_host_fn && hcg_t_recognized.fn == (uintptr_t)fn &&
           hcg_t_recognized.gen ==
               atomic_load_explicit(&hcg_g_recognize_gen, memory_order_acquire) &&
           p->free && (p->stamp_left > 1 || hcg_ticks_counter_on());
}

/* The launch path, inline in each wrapper. An ordinary host function
 * launched again costs loads and compares: its kind from this thread's
 * last answer, a time stamp on 1 launch in HCG_STAMP_EVERY (each one when
 * an output needs it: hcg_launch_stamp; copies likewise, hcg_copy_stamp),
 * the call from the thread's own free list, a count in the thread's own
 * pool. Anything else jumps to launch_full or launch_known. The call is
 * the one value kept across the driver's (in the register saved in place
 * of the stack's alignment); the pool is found again afterwards, never
 * read from the call, which the callback thread may own by then. */
static inline __attribute__((always_inline)) CUresult launch(launch_args a)
{
    hcg_pool *p = hcg_self.pool;
    if (HCG_UNLIKELY(!p))
        return launch_full(a.api, a.stream, a.fn, a.user, a.sync_mode, a.ra);
    hcg_launch_mark(p); /* before launch_fast_ok reads the flags */
    if (HCG_UNLIKELY(!launch_fast_ok(&a, p))) {
        hcg_launch_unmark(p);
        return launch_full(a.api, a.stream, a.fn, a.user, a.sync_mode, a.ra);
    }
    if (HCG_UNLIKELY(hcg_t_recognized.kind != HCG_FN_ORDINARY))
        return launch_known_jump(a); /* marked still */
    hcg_call *c = hcg_call_pop(p);
    uint64_t t = hcg_launch_stamp_due(p) ? hcg_ticks_counter() : 0; /* launch_fast_ok: usable */
    hcg_call_init(c, a.api, a.stream, a.fn, a.user, HCG_FN_ORDINARY, HCGUARD_OK, 0, t);
    atomic_store_explicit(&c->caller, a.ra, memory_order_relaxed);
    return launch_hand(a, p, c, HCG_FN_ORDINARY);
}

CUresult hcg_w_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user)
{
    return launch((launch_args){HCG_API_LAUNCH_HOST_FUNC, s, fn, user, 0,
                               (uintptr_t)__builtin_return_address(0), NULL});
}

CUresult hcg_w_cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user)
{
    return launch((launch_args){HCG_API_LAUNCH_HOST_FUNC_PTSZ, s, fn, user, 0,
                               (uintptr_t)__builtin_return_address(0), NULL});
}

CUresult hcg_w_cuLaunchHostFunc_v2(CUstream s, CUhostFn fn, void *user, unsigned int mode)
{
    return launch((launch_args){HCG_API_LAUNCH_HOST_FUNC_V2, s, fn, user, mode,
                               (uintptr_t)__builtin_return_address(0), NULL});
}

CUresult hcg_w_cuLaunchHostFunc_v2_ptsz(CUstream s, CUhostFn fn, void *user, unsigned int mode)
{
    return launch((launch_args){HCG_API_LAUNCH_HOST_FUNC_V2_PTSZ, s, fn, user, mode,
                               (uintptr_t)__builtin_return_address(0), NULL});
}

/* ---- cuStreamAddCallback ---------------------------------------------------
 * A CUstreamCallback takes (stream, status, data): it gets a trampoline of
 * its own, and is timed and audited like a host function (it cannot be a
 * host copy). cuda.bindings' driver.cuStreamAddCallback hands the driver
 * its GIL-taking cuStreamCallbackWrapper with a malloc'd {callback,
 * userData} (the layout of its cuLaunchHostFunc wrapper's data), which it
 * frees after the call: what it wraps is what is audited. */
static hcg_fnkind add_callback_kind(CUstreamCallback cb, void *user, CUstreamCallback *inner,
                                    void **inner_user)
{
    *inner = cb;
    *inner_user = user;
    hcg_fnkind kind = hcg_recognize_fast((void *)cb);
    if (kind != HCG_FN_WRAP_BINDINGS)
        return kind;
    CUhostFn fn = NULL;
    void *data = NULL;
    kind = hcg_look_through(user, &fn, &data);
    if (fn) {
        *inner = (CUstreamCallback)(void *)fn;
        *inner_user = data;
    }
    return kind;
}

static CUresult add_callback(hcg_api api, CUstream s, CUstreamCallback cb, void *user,
                             unsigned int flags, uintptr_t ra)
{
    hcg_driver *d = hcg_driver_get();
    if (HCG_UNLIKELY(!d)) {
        no_driver();
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    hcg_pfn_cuStreamAddCallback real = api == HCG_API_STREAM_ADD_CALLBACK_PTSZ
                                    ? atomic_load(&d->cuStreamAddCallback_ptsz)
                                    : atomic_load(&d->cuStreamAddCallback);
    if (!real)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (hcg_config_get()->mode == HCG_MODE_OFF || !cb)
        return real(s, cb, user, flags);
    if (HCG_UNLIKELY(hcg_audit_wrapper_call(api)))
        return CUDA_ERROR_NOT_PERMITTED;
    hcg_init();
    CUstreamCallback inner;
    void *inner_user;
    hcg_fnkind kind = add_callback_kind(cb, user, &inner, &inner_user);
    if (HCG_UNLIKELY(hcg_config_get()->debug))
        hcg_debug_call(api, (CUhostFn)(void *)cb, user, kind, (CUhostFn)(void *)inner);
    int found = kind == HCG_FN_LIBC || kind == HCG_FN_CLOSURE;
    if (found && kind == HCG_FN_LIBC && hcg_config_get()->mode == HCG_MODE_GUARD) {
        hcg_audit_report_fn(HCG_FIND_LIBC_FN, api, s, (void *)inner, inner_user);
        return CUDA_ERROR_INVALID_VALUE;
    }
    hcg_call *c = hcg_call_new(api, s, (CUhostFn)(void *)cb, user, HCG_FN_ORDINARY, HCGUARD_OK, 0);
    if (HCG_UNLIKELY(found)) { /* reported with the launch's seq */
        if (c)
            hcg_event_link_seq(c->seq);
        hcg_audit_report_fn(kind == HCG_FN_LIBC ? HCG_FIND_LIBC_FN : HCG_FIND_CLOSURE, api, s,
                            (void *)inner, inner_user);
    }
    if (!c)
        return unmeasured(real(s, cb, user, flags));
    int rare = atomic_load_explicit(&hcg_g_launch_rare, memory_order_relaxed);
    atomic_store_explicit(&c->caller,
                          rare & (HCG_LAUNCH_BACKTRACE | HCG_LAUNCH_RUNTIME) ? hcg_callsite_rare(ra)
                                                                             : ra,
                          memory_order_relaxed);
    struct hcg_pool *pool = c->owner;
    CUresult r = real(s, hcg_stream_cb_trampoline, c, flags);
    if (r == CUDA_SUCCESS) {
        hcg_count_launch(pool, HCG_FN_ORDINARY);
        hcg_pool_flow(pool);
    } else
        hcg_call_free_local(c);
    return r;
}

CUresult hcg_w_cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *user, unsigned int flags)
{
    return add_callback(HCG_API_STREAM_ADD_CALLBACK, s, cb, user, flags,
                        (uintptr_t)__builtin_return_address(0));
}

CUresult hcg_w_cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *user,
                                        unsigned int flags)
{
    return add_callback(HCG_API_STREAM_ADD_CALLBACK_PTSZ, s, cb, user, flags,
                        (uintptr_t)__builtin_return_address(0));
}

/* ---- capture ---------------------------------------------------------- */
/* Captures begun through the entry points below and not yet ended.
 * Changed only with capture_lock held to write. */
static int captures_open;
/* HCG_LAUNCH_CAPTURE stays set for good: set where launches could not be
 * waited for (no membarrier(2), or a begin inside a host function). */
static atomic_int capture_sticky;
/* A capture was begun without the lock (inside a host function, audit
 * mode; set once the driver took it): not counted in captures_open, so it
 * may be open whatever that says, for good. */
static atomic_int capture_untracked;
/* The streams whose captures are open and that a program can destroy (not
 * a default stream), with their context: one destroyed while it captures,
 * or whose context is destroyed or reset, never ends its capture, which
 * would keep every launch asking for good. Changed with capture_lock held
 * to write. One not recorded (no memory) is only seen to end through
 * cuStreamEndCapture; its context unknown (NULL), only through its own
 * destroy. A capture into the program's own graph is recorded for its
 * context alone (ctx_only): it outlives its stream, not its context. */
typedef struct {
    CUstream s;
    CUcontext ctx;
    uint64_t born; /* origins_made when it was recorded */
    int ctx_only;
} origin;
static struct {
    origin *v;
    size_t n, cap;
} origins;
static _Atomic uint64_t origins_made;

static int destroyable(CUstream s)
{
    return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
}

static void origin_add(hcg_driver *d, CUstream s, int ctx_only)
{
    if (!destroyable(s))
        return;
    if (origins.n == origins.cap) {
        size_t cap = origins.cap ? origins.cap * 2 : 16;
        origin *v = realloc(origins.v, cap * sizeof *v);
        if (!v)
            return;
        origins.v = v;
        origins.cap = cap;
    }
    /* Asked now: once its context is gone, the stream cannot be asked. */
    hcg_pfn_cuStreamGetCtx q = atomic_load(&d->cuStreamGetCtx);
    CUcontext ctx = NULL;
    if (!q || q(s, &ctx) != CUDA_SUCCESS)
        ctx = NULL;
    origins.v[origins.n++] = (origin){s, ctx, atomic_fetch_add(&origins_made, 1) + 1, ctx_only};
}

/* 1 if s was recorded (and is no longer): at its capture's end (any), or
 * its destroy (not a capture into the program's graph). */
static int origin_remove(CUstream s, int any)
{
    for (size_t i = 0; i < origins.n; i++)
        if (origins.v[i].s == s && (any || !origins.v[i].ctx_only)) {
            origins.v[i] = origins.v[--origins.n];
            return 1;
        }
    return 0;
}

/* The captures of ctx's streams begun before its destroy (by then
 * origins_made was made), gone with it: how many were open; taken off the
 * list if remove (the lock held to write), else only counted (to read). */
static unsigned origins_of_ctx(CUcontext ctx, uint64_t made, int remove)
{
    unsigned n = 0;
    for (size_t i = 0; ctx && i < origins.n;) {
        if (origins.v[i].ctx == ctx && origins.v[i].born <= made) {
            if (remove)
                origins.v[i] = origins.v[--origins.n];
            else
                i++;
            n++;
        } else {
            i++;
        }
    }
    return n;
}

/* Before the driver's begin, t the lock: launches ask from now on; those
 * that read the flag clear have had their answer. */
static void capture_opening(hcg_capture_token t)
{
    if (!t.held) { /* inside a host function: nothing can be waited for */
        atomic_store(&capture_sticky, 1);
        atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_CAPTURE);
        return;
    }
    if (captures_open++ ||
        (atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_CAPTURE) & HCG_LAUNCH_CAPTURE))
        return;
    hcg_debug("a capture begins: launches ask whether their stream captures");
    if (hcg_launches_settle() != 0)
        atomic_store(&capture_sticky, 1);
}

/* A capture ended, or a begin failed (the lock held): the last one open
 * lets launches stop asking. */
static void capture_closing(void)
{
    if (captures_open > 0 && --captures_open == 0 && !atomic_load(&capture_sticky)) {
        atomic_fetch_and(&hcg_g_launch_rare, ~HCG_LAUNCH_CAPTURE);
        hcg_debug("no capture open: launches no longer ask whether their stream captures");
    }
}

/* Every begin-capture variant, alone (capture_lock held to write): no
 * launch is between its question and the driver's taking it. Launches
 * are told before the begin, not after it succeeds: one reading the flag
 * after this must ask, and takes the lock to. Its stream is recorded as
 * the capture's origin (a destroy of it ends the capture's count), but for
 * a capture into the program's own graph (cuStreamBeginCaptureToGraph,
 * to_graph) only its context's destroy does: it outlives its stream, so
 * that a stream joined to it may still add nodes that run. */
#define CAPTURE_WRAPPER(name, params, args, to_graph)                          \
    CUresult hcg_w_##name params                                               \
    {                                                                          \
        HCG_AUDIT_ENTRY(name);                                                 \
        HCG_DRV_OR_FAIL(d);                                                    \
        hcg_pfn_##name f = atomic_load(&d->name);                              \
        if (!f)                                                                \
            return CUDA_ERROR_NOT_SUPPORTED;                                   \
        if (HCG_UNLIKELY(nested_call()) && nested_refused(#name))              \
            return CUDA_ERROR_NOT_PERMITTED;                                   \
        hcg_capture_token t = capture_take(1);                                 \
        capture_opening(t);                                                    \
        CUresult r = f args;                                                   \
        if (r != CUDA_SUCCESS && t.held)                                       \
            capture_closing();                                                 \
        else if (t.held)                                                       \
            origin_add(d, s, to_graph);                                        \
        else if (r == CUDA_SUCCESS && !t.held)                                 \
            atomic_store(&capture_untracked, 1);                               \
        hcg_capture_release(t);                                                \
        return r;                                                              \
    }

/* The end of a capture: as a begin (no capture ended, none asked about);
 * counted as ended if s captured before and does not now. */
#define END_CAPTURE_WRAPPER(name, ptsz)                                        \
    CUresult hcg_w_##name(CUstream s, CUgraph *g)                              \
    {                                                                          \
        HCG_AUDIT_ENTRY(name);                                                 \
        HCG_DRV_OR_FAIL(d);                                                    \
        hcg_pfn_##name f = atomic_load(&d->name);                              \
        if (!f)                                                                \
            return CUDA_ERROR_NOT_SUPPORTED;                                   \
        if (HCG_UNLIKELY(nested_call()) && nested_refused(#name))              \
            return CUDA_ERROR_NOT_PERMITTED;                                   \
        if (!(atomic_load(&hcg_g_launch_rare) & HCG_LAUNCH_CAPTURE))           \
            return f(s, g); /* none open: no launch asks */                    \
        hcg_capture_token t = capture_take(1);                                 \
        int was = t.held ? capture_status(d, ptsz, s) : 0;                     \
        CUresult r = f(s, g);                                                  \
        if (was == 1 && capture_status(d, ptsz, s) == 0) {                     \
            origin_remove(s, 1);                                               \
            capture_closing();                                                 \
        }                                                                      \
        hcg_capture_release(t);                                                \
        return r;                                                              \
    }

CAPTURE_WRAPPER(cuStreamBeginCapture, (CUstream s), (s), 0)
CAPTURE_WRAPPER(cuStreamBeginCapture_ptsz, (CUstream s), (s), 0)
CAPTURE_WRAPPER(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode m), (s, m), 0)
CAPTURE_WRAPPER(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode m), (s, m), 0)
CAPTURE_WRAPPER(cuStreamBeginCaptureToGraph,
                (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                 size_t n, CUstreamCaptureMode m),
                (s, g, deps, edges, n, m), 1)
CAPTURE_WRAPPER(cuStreamBeginCaptureToGraph_ptsz,
                (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                 size_t n, CUstreamCaptureMode m),
                (s, g, deps, edges, n, m), 1)
END_CAPTURE_WRAPPER(cuStreamEndCapture, 0)
END_CAPTURE_WRAPPER(cuStreamEndCapture_ptsz, 1)

/* A stream destroyed while it captures: its capture can never be ended
 * (only on the stream that began it), so it is counted as ended; the
 * driver takes no more nodes into a graph that nobody can get. Nothing to
 * do while no capture is open, or once launches ask for good (sticky):
 * no write lock then, which would hold up every launch; nor from a signal
 * handler inside a call of its own thread (nested_call), which is made,
 * counting no capture ended. */
static int ends_no_count(void)
{
    return !(atomic_load(&hcg_g_launch_rare) & HCG_LAUNCH_CAPTURE) ||
           atomic_load(&capture_sticky) || nested_call();
}

static CUresult stream_destroy(hcg_driver *d, hcg_pfn_cuStreamDestroy_v2 f, CUstream s)
{
    (void)d;
    if (ends_no_count() || !destroyable(s))
        return f(s);
    hcg_capture_token t = capture_take(1);
    CUresult r = f(s);
    if (t.held && r == CUDA_SUCCESS && origin_remove(s, 0)) {
        hcg_debug("stream %p destroyed while it captured: its capture counted as ended", (void *)s);
        capture_closing();
    }
    hcg_capture_release(t);
    return r;
}

/* A wrapper of one argument, a of type T, made by how(d, the driver's
 * entry point, a). */
#define DESTROY_WRAPPER(name, T, how)                                          \
    CUresult hcg_w_##name(T a)                                                 \
    {                                                                          \
        HCG_AUDIT_ENTRY(name);                                                 \
        HCG_DRV_OR_FAIL(d);                                                    \
        hcg_pfn_##name f = atomic_load(&d->name);                              \
        return f ? how(d, f, a) : CUDA_ERROR_NOT_SUPPORTED;                    \
    }

DESTROY_WRAPPER(cuStreamDestroy, CUstream, stream_destroy)
DESTROY_WRAPPER(cuStreamDestroy_v2, CUstream, stream_destroy)

/* A context destroyed (cuCtxDestroy) or reset (the primary context's,
 * cuDevicePrimaryCtxReset: cudaDeviceReset) takes its streams with it,
 * and their captures, which can never be ended: counted as ended, as for
 * a stream destroyed. Matched by the context each origin's stream was
 * asked for at its begin; none is asked now (the driver may crash on a
 * stream of a context gone). The lock is not held across the call, which
 * waits for the context's work (a launch it waits for would wait for the
 * lock); so only origins recorded before it began (made) are counted, not
 * those of a context made meanwhile at the same address. */
static void ctx_gone(CUcontext ctx, uint64_t made, const char *how)
{
    /* Counted under the lock to read first: the write lock, which waits for
     * every launch that holds it (one may wait in the driver behind a host
     * function that waits for this thread), only for a context that had
     * a capture open. */
    hcg_capture_token t = hcg_capture_hold();
    unsigned n = t.held ? origins_of_ctx(ctx, made, 0) : 0;
    hcg_capture_release(t);
    if (!n)
        return;
    t = capture_take(1);
    n = t.held ? origins_of_ctx(ctx, made, 1) : 0;
    if (n)
        hcg_debug("context %p %s while %u of its streams captured: their captures counted as "
                  "ended", (void *)ctx, how, n);
    while (n--)
        capture_closing();
    hcg_capture_release(t);
}

static CUresult ctx_destroy(hcg_driver *d, hcg_pfn_cuCtxDestroy_v2 f, CUcontext ctx)
{
    (void)d;
    if (ends_no_count())
        return f(ctx);
    uint64_t made = atomic_load(&origins_made);
    CUresult r = f(ctx);
    if (r == CUDA_SUCCESS)
        ctx_gone(ctx, made, "destroyed");
    return r;
}

DESTROY_WRAPPER(cuCtxDestroy, CUcontext, ctx_destroy)
DESTROY_WRAPPER(cuCtxDestroy_v2, CUcontext, ctx_destroy)

/* The device's primary context, if it is active (NULL if not, or unknown):
 * retained and released again, which changes nothing. */
static CUcontext primary_of(hcg_driver *d, CUdevice dev)
{
    hcg_pfn_cuDevicePrimaryCtxGetState state = atomic_load(&d->cuDevicePrimaryCtxGetState);
    hcg_pfn_cuDevicePrimaryCtxRetain retain = atomic_load(&d->cuDevicePrimaryCtxRetain);
    hcg_pfn_cuDevicePrimaryCtxRelease_v2 release = atomic_load(&d->cuDevicePrimaryCtxRelease_v2);
    unsigned flags = 0;
    int active = 0;
    CUcontext ctx = NULL;
    if (!state || !retain || !release || state(dev, &flags, &active) != CUDA_SUCCESS ||
        !active || retain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    release(dev);
    return ctx;
}

static CUresult primary_reset(hcg_driver *d, hcg_pfn_cuDevicePrimaryCtxReset_v2 f, CUdevice dev)
{
    if (ends_no_count())
        return f(dev);
    uint64_t made = atomic_load(&origins_made);
    CUcontext ctx = primary_of(d, dev);
    CUresult r = f(dev);
    if (r == CUDA_SUCCESS && ctx)
        ctx_gone(ctx, made, "reset");
    return r;
}

DESTROY_WRAPPER(cuDevicePrimaryCtxReset, CUdevice, primary_reset)
DESTROY_WRAPPER(cuDevicePrimaryCtxReset_v2, CUdevice, primary_reset)

/* Released for the last time, the primary context is destroyed: the
 * driver then says it is not active. */
static CUresult primary_release(hcg_driver *d, hcg_pfn_cuDevicePrimaryCtxRelease_v2 f,
                                CUdevice dev)
{
    if (ends_no_count())
        return f(dev);
    uint64_t made = atomic_load(&origins_made);
    CUcontext ctx = primary_of(d, dev);
    CUresult r = f(dev);
    hcg_pfn_cuDevicePrimaryCtxGetState state = atomic_load(&d->cuDevicePrimaryCtxGetState);
    unsigned flags = 0;
    int active = 1;
    if (r == CUDA_SUCCESS && ctx && state && state(dev, &flags, &active) == CUDA_SUCCESS &&
        !active)
        ctx_gone(ctx, made, "released for the last time");
    return r;
}

DESTROY_WRAPPER(cuDevicePrimaryCtxRelease, CUdevice, primary_release)
DESTROY_WRAPPER(cuDevicePrimaryCtxRelease_v2, CUdevice, primary_release)

/* A stream that waits for an event recorded in a capture joins that
 * capture, and launches on it become nodes from then on: the wait is
 * ordered with launches as a begin is. While no capture is open, the wait
 * is marked as a launch is (run.h), so that a begin opening the first
 * capture waits for it: one that read the flag clear may yet join a
 * stream to that capture (an event recorded in it meanwhile). The mark is
 * the thread's pool's, or a marker's where it has none: no pool is taken
 * for a wait (one taken before start-up would stay out of the flight
 * record, and flow control shares its room among the pools). While a
 * capture may be open (counted, or begun without the lock), the wait
 * holds the lock to write, so that no launch on the stream it joins is
 * between its question and the driver's taking it; to read where it has
 * no mark (MAX_MARKERS threads), which keeps begins out. A wait from a signal
 * handler inside a call of its own thread that holds or waits for the
 * lock, or that is marked while the flag is set, is refused, as a begin
 * is there (nested_call). */
static CUresult stream_wait_event(hcg_pfn_cuStreamWaitEvent f, const char *name, CUstream s,
                                  CUevent e, unsigned int flags)
{
    _Atomic uint32_t *m = hcg_self.in_host_fn ? NULL : hcg_mark_mine();
    if (m) {
        hcg_mark(m);
        if (!(atomic_load_explicit(&hcg_g_launch_rare, memory_order_acquire) & HCG_LAUNCH_CAPTURE)) {
            CUresult r = f(s, e, flags);
            hcg_unmark(m);
            return r;
        }
        hcg_unmark(m);
    }
    if (HCG_UNLIKELY(nested_call()) && nested_refused(name))
        return CUDA_ERROR_NOT_PERMITTED;
    hcg_capture_token t = capture_take(0);
    if (t.held && (captures_open || atomic_load(&capture_untracked))) {
        hcg_capture_release(t);
        t = capture_take(1);
    }
    CUresult r = f(s, e, flags);
    hcg_capture_release(t);
    return r;
}

CUresult hcg_w_cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    HCG_AUDIT_ENTRY(cuStreamWaitEvent);
    HCG_DRV_OR_FAIL(d);
    hcg_pfn_cuStreamWaitEvent f = atomic_load(&d->cuStreamWaitEvent);
    return f ? stream_wait_event(f, "cuStreamWaitEvent", s, e, flags) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult hcg_w_cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    HCG_AUDIT_ENTRY(cuStreamWaitEvent_ptsz);
    HCG_DRV_OR_FAIL(d);
    hcg_pfn_cuStreamWaitEvent_ptsz f = atomic_load(&d->cuStreamWaitEvent_ptsz);
    return f ? stream_wait_event(f, "cuStreamWaitEvent_ptsz", s, e, flags)
             : CUDA_ERROR_NOT_SUPPORTED;
}

/* Exported under the driver's names: the entries of driver/entries.def
 * wrapped here. */
#define ALIAS_stream(name) HCG_EXPORT_ALIAS(name)
#define ALIAS_gpa(name)
#define ALIAS_graph(name)
#define ALIAS_called(name)
#define HCG_ENTRY(where, name, params) ALIAS_##where(name)
#include "driver/entries.def"
#undef HCG_ENTRY
