/* A call made at enqueue, for a stream launch or a graph node: the host
 * function recognised (looking through cuda.bindings' wrapper), a copy's
 * record read once and checked, wrong functions reported, and the call
 * the trampoline will run allocated from the thread's pool. */
#include <stdio.h>

#include "run/run.h"

/* The record at rec into *snap, fault-contained: 0, or -1 if it cannot be
 * read. hcguard's fault handler is installed at start-up: the contained
 * copy is called directly (the oracle's read adds the fallback). */
static int read_record(const void *rec, hcguard_copy_record *snap)
{
    if (HCG_LIKELY(hcg_fault_ready()))
        return hcg_fault_copy(snap, rec, sizeof *snap, NULL);
    const hcg_oracle *o = hcg_oracle_process();
    return o->read(o->ctx, (uintptr_t)rec, snap, sizeof *snap);
}

/* Read a recognised copy's record rec once, fault-contained, into *snap
 * and check that snapshot (the only copy hcguard will ever use: the
 * trampoline copies from it). *gen: the unmap generation the check began
 * at. Returns nonzero if the call must be refused (guard mode). */
int hcg_prepare_copy(hcg_api api, CUstream s, CUhostFn fn, void *rec, hcg_fnkind kind,
                     uint64_t t, hcguard_copy_record *snap, hcguard_status *why, uint64_t *gen)
{
    *gen = hcg_oracle_gen();
    if (HCG_UNLIKELY(!rec))
        *why = HCGUARD_ERR_NULL_RECORD;
    else if (HCG_UNLIKELY(read_record(rec, snap) != 0))
        *why = HCGUARD_ERR_RECORD_UNREADABLE;
    else if (HCG_LIKELY(hcg_oracle_recent(rec, snap, t)))
        *why = HCGUARD_OK;
    else if ((*why = hcg_validate_fields(hcg_oracle_process(), snap)) == HCGUARD_OK)
        hcg_oracle_remember(rec, snap, *gen, t);
    if (HCG_LIKELY(*why == HCGUARD_OK))
        return 0;
    int guard = hcg_config_get()->mode == HCG_MODE_GUARD;
    int have_fields = *why != HCGUARD_ERR_NULL_RECORD && *why != HCGUARD_ERR_RECORD_UNREADABLE;
    hcg_report_reject(api, s, (void *)fn, rec, kind, have_fields ? snap : NULL, *why, guard);
    return guard;
}

/* What a cuda.bindings wrapper will call: its data's {callback, user}. */
hcg_fnkind hcg_look_through(void *data, CUhostFn *fn, void **rec)
{
    hcg_bindings_cb cb;
    if (!data || hcg_oracle_process()->read(NULL, (uintptr_t)data, &cb, sizeof cb) != 0 ||
        !cb.callback)
        return HCG_FN_ORDINARY; /* not {function, data}: leave it alone */
    *fn = cb.callback;
    *rec = cb.user;
    hcg_fnkind k = hcg_recognize((void *)cb.callback);
    return hcg_fnkind_is_copy(k) || k == HCG_FN_LIBC || k == HCG_FN_CLOSURE ? k
                                                                            : HCG_FN_ORDINARY;
}

/* Out of line: its buffers would make every launch probe the stack. */
__attribute__((noinline, cold)) void hcg_debug_call(hcg_api api, CUhostFn fn, void *user,
                                                      hcg_fnkind kind, CUhostFn inner)
{
    static atomic_int n;
    if (atomic_fetch_add(&n, 1) >= 16)
        return;
    char name[256], obj[HCG_PATH_MAX];
    int cancel = hcg_nocancel_begin(); /* naming reads files: none in a launch */
    if (hcg_symbolize((void *)fn, name, sizeof name, obj, sizeof obj) != 0)
        snprintf(name, sizeof name, "anonymous");
    hcg_debug("%s: host function %p %s (%s), user data %p: %s%s", hcg_api_name(api),
              (void *)fn, name, obj, user, hcg_fnkind_name(kind),
              inner != fn ? " (inside cuda.bindings' wrapper)" : "");
    hcg_nocancel_end(cancel);
}

/* A copy with no call (out of memory, or more launching threads alive
 * than pools) would run unguarded: its record read by the driver's thread
 * at each run, unchecked and not fault-contained (a graph node's at every
 * replay). Guard mode refuses it (counted); audit mode, which changes no
 * launch's outcome, passes it. Said once. */
__attribute__((noinline, cold)) CUresult hcg_copy_callless(hcg_api api)
{
    static atomic_int said;
    int guard = hcg_config_get()->mode == HCG_MODE_GUARD;
    if (guard)
        hcg_count_callless();
    if (!atomic_exchange(&said, 1))
        hcg_problem("%s: a host copy with no call to guard it (out of memory, or more threads "
                    "launching at once than hcguard has pools) %s", hcg_api_name(api),
                    guard ? "was refused with CUDA_ERROR_OUT_OF_MEMORY rather than run unchecked"
                          : "went to the driver unchecked (audit mode; guard mode refuses it)");
    return guard ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult hcg_prepare_call(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_call **out)
{
    *out = NULL;
    hcg_fnkind kind = hcg_recognize((void *)fn);
    CUhostFn inner = fn;
    void *rec = user;
    if (HCG_UNLIKELY(kind == HCG_FN_WRAP_BINDINGS))
        kind = hcg_look_through(user, &inner, &rec);
    if (HCG_UNLIKELY(hcg_config_get()->debug))
        hcg_debug_call(api, fn, user, kind, inner);
    hcg_finding found = 0; /* reported once the launch has its seq */
    if (HCG_UNLIKELY(kind == HCG_FN_LIBC || kind == HCG_FN_CLOSURE)) {
        found = kind == HCG_FN_LIBC ? HCG_FIND_LIBC_FN : HCG_FIND_CLOSURE;
        if (kind == HCG_FN_LIBC && hcg_config_get()->mode == HCG_MODE_GUARD) {
            hcg_audit_report_fn(found, api, s, (void *)inner, rec);
            return CUDA_ERROR_INVALID_VALUE;
        }
        kind = HCG_FN_ORDINARY;
    }
    hcguard_copy_record snap = {0, 0, 0};
    hcguard_status why = HCGUARD_OK;
    uint64_t gen = 0, t = hcg_ticks(); /* the enqueue time, and the age of a verdict */
    if (hcg_fnkind_is_copy(kind) &&
        hcg_prepare_copy(api, s, inner, rec, kind, t, &snap, &why, &gen))
        return CUDA_ERROR_INVALID_VALUE;
    hcg_call *c = hcg_call_alloc();
    if (HCG_UNLIKELY(!c)) {
        if (hcg_fnkind_is_copy(kind))
            return hcg_copy_callless(api);
        if (found)
            hcg_audit_report_fn(found, api, s, (void *)inner, rec);
        return CUDA_SUCCESS; /* out of memory: pass through, unmeasured */
    }
    hcg_call_init(c, api, s, fn, user, kind, why, inner != fn, t);
    hcg_call_nvtx(c);
    if (HCG_UNLIKELY(found)) {
        hcg_event_link_seq(c->seq);
        hcg_audit_report_fn(found, api, s, (void *)inner, rec);
    }
    if (hcg_fnkind_is_copy(kind) || c->wrapped) { /* the second line: rarely */
        c->rec = rec;
        c->snap = snap;
        c->inner = inner;
        c->gen = gen;
    }
    *out = c;
    return CUDA_SUCCESS;
}
