/* The wrapper layer (src/wrap): the driver's entry points that enqueue host
 * functions, capture streams and build graphs, hidden and exported under
 * the driver's own names. The top of the call path: above the run, check
 * and interception layers. */
#ifndef HCG_WRAP_H
#define HCG_WRAP_H

#include "run/run.h"

/* Inside a host function, a wrapped entry point is still a CUDA call made
 * there, as through a thunk: reported, and refused in guard mode. */
#define HCG_AUDIT_ENTRY(name)                                                  \
    if (HCG_UNLIKELY(hcg_audit_entry_call(HCG_ENT_##name)))                    \
    return CUDA_ERROR_NOT_PERMITTED

/* ---- graph.c: host nodes ---------------------------------------------------
 * A host function enqueued while its stream captures: attach c to the
 * capture graph (it runs on every replay, and lives as long as the graph).
 * Returns 0 (c is the graph's, or, if attaching it failed, kept for ever:
 * leaking is the safe side), or -1 if the capture graph cannot be found
 * (c untouched: the launch that follows is the judge). */
int hcg_graph_adopt_capture(hcg_call *c, CUstream s, int ptsz);
/* After the launch: note which node the capture made of it. */
void hcg_graph_note_captured(hcg_call *c, CUstream s, int ptsz);
uint64_t hcg_graph_calls_live(void);

void hcg_graph_after_fork(void); /* fork child hook (src/lifecycle/fork.c) */

/* ---- stream.c: captures -------------------------------------------------
 * Held (to read) by a launch that asks whether its stream captures, from
 * the question until the driver has the launch; no capture begins or ends
 * meanwhile. Not inside a host function (then held is 0). */
typedef struct hcg_capture_token {
    int cancel; /* the cancellation state to give back */
    int held;
} hcg_capture_token;
hcg_capture_token hcg_capture_hold(void);
void hcg_capture_release(hcg_capture_token t);
void hcg_capture_after_fork(void); /* fork child hook */

/* ---- src/lifecycle/init.c: the lazy start ---------------------------------
 * Start-up (pthread_once); safe from any intercepted call. Inline: once
 * started, one load. */
extern atomic_int hcg_g_started;
void hcg_init_slow(void);
static inline void hcg_init(void)
{
    if (HCG_UNLIKELY(!atomic_load_explicit(&hcg_g_started, memory_order_acquire)))
        hcg_init_slow();
}

#endif /* HCG_WRAP_H */
