/* Stream capture of host functions and graph launches, and the capture
 * queries (cuStreamIsCapturing, cuStreamGetCaptureInfo*). */
#include <sched.h>

#include "fakecuda.h"

/* ======================================================================
 * Stream capture.
 * ====================================================================== */
/* s out of its capture: its state cleared (not the graph's). */
static void capture_clear(fc_stream *s)
{
    s->cap_graph = NULL;
    s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
    s->cap_origin = NULL;
    fc_state.n_capturing--;
}

/* Every stream that joined origin's capture leaves it. */
static void joined_leave(fc_stream *origin)
{
    while (origin->joined) {
        fc_stream *j = origin->joined;
        origin->joined = j->join_next;
        j->join_next = NULL;
        capture_clear(j);
    }
}

/* A joined stream leaves; an origin's capture is dropped, with the streams
 * that joined it, and its graph freed. */
void fc_stream_capture_drop(fc_stream *s)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE)
        return;
    fc_stream *o = s->cap_origin;
    if (o) {
        fc_stream **p = &o->joined;
        while (*p && *p != s)
            p = &(*p)->join_next;
        if (*p)
            *p = s->join_next;
        s->join_next = NULL;
        for (size_t i = 0; i < s->n_cap_deps && o->n_cap_gone < FC_CAP_DEPS; i++)
            o->cap_gone[o->n_cap_gone++] = s->cap_deps[i];
        capture_clear(s);
        return;
    }
    joined_leave(s);
    if (s->cap_user_graph) /* the caller's: what was captured stays in it */
        s->cap_graph->capturer = NULL;
    else
        fc_graph_free(s->cap_graph);
    capture_clear(s);
}

fc_stream *fc_capture_origin(fc_stream *s)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE)
        return NULL;
    return s->cap_origin ? s->cap_origin : s;
}

void fc_capture_invalidate(fc_stream *s)
{
    fc_stream *o = fc_capture_origin(s);
    if (!o)
        return;
    o->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    for (fc_stream *j = o->joined; j; j = j->join_next)
        j->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* ---- rejoining: every joined stream's last nodes must be ones the
 * origin's next node would depend on, directly or not, at the end ---- */
/* Whether n is among the origin's last nodes or their dependencies. */
static int reached(fc_stream *o, const fc_node *n, uint64_t walk)
{
    fc_node *stack[256];
    size_t top = 0;
    for (size_t i = 0; i < o->n_cap_deps && top < 256; i++)
        stack[top++] = (fc_node *)o->cap_deps[i];
    while (top) {
        fc_node *x = stack[--top];
        if (x == n)
            return 1;
        if (x->walk == walk)
            continue;
        x->walk = walk;
        for (size_t i = 0; i < x->ndeps; i++)
            if (top < 256)
                stack[top++] = x->deps[i];
            else
                return 1; /* deeper than modelled: taken as joined */
    }
    return 0;
}

static int deps_rejoined(fc_stream *o, const CUgraphNode *deps, size_t n)
{
    static uint64_t walks;
    for (size_t i = 0; i < n; i++)
        if (!reached(o, (const fc_node *)deps[i], ++walks))
            return 0;
    return 1;
}

/* Whether every stream that joined o's capture (destroyed ones included)
 * rejoined it. */
static int all_rejoined(fc_stream *o)
{
    for (fc_stream *j = o->joined; j; j = j->join_next)
        if (!deps_rejoined(o, j->cap_deps, j->n_cap_deps))
            return 0;
    return deps_rejoined(o, o->cap_gone, o->n_cap_gone);
}

/* ev's nodes added to what s's next node depends on (no node twice); more
 * than FC_CAP_DEPS is not modelled. */
static CUresult deps_merge(fc_stream *s, const fc_event *ev)
{
    for (size_t i = 0; i < ev->ndeps; i++) {
        size_t k = 0;
        while (k < s->n_cap_deps && s->cap_deps[k] != ev->deps[i])
            k++;
        if (k == FC_CAP_DEPS)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (k == s->n_cap_deps)
            s->cap_deps[s->n_cap_deps++] = ev->deps[i];
    }
    return CUDA_SUCCESS;
}

/* As driver 580 answers (probed): an event of a capture that is over is
 * CUDA_ERROR_INVALID_VALUE, and invalidates a capture the waiting stream
 * is in; one of another capture invalidates both. */
CUresult fc_capture_join(fc_stream *s, const fc_event *ev)
{
    fc_stream *o = ev->cap_origin; /* NULL: destroyed since */
    if (!o || o->cap_status == CU_STREAM_CAPTURE_STATUS_NONE || o->cap_id != ev->cap_id) {
        fc_capture_invalidate(s); /* that capture is over */
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (o->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (s == &fc_legacy) /* as a begin on it */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    fc_stream *mine = fc_capture_origin(s);
    if (mine && mine != o) {
        fc_capture_invalidate(s);
        fc_capture_invalidate(o);
        return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    }
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!mine) {
        s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->cap_mode = o->cap_mode;
        s->cap_thread = o->cap_thread;
        s->cap_id = o->cap_id;
        s->cap_epoch = o->cap_epoch;
        s->cap_graph = o->cap_graph;
        s->cap_origin = o;
        s->n_cap_deps = 0;
        s->join_next = o->joined;
        o->joined = s;
        fc_state.n_capturing++;
    }
    return deps_merge(s, ev);
}

/* A new node in the capture graph, after the previous captured node. */
static CUresult capture_node(fc_stream *s, CUgraphNodeType type, fc_node **out)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    fc_node *n = fc_node_add(s->cap_graph, type, s->n_cap_deps);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t k = 0; k < s->n_cap_deps; k++)
        n->deps[k] = (fc_node *)s->cap_deps[k];
    s->cap_deps[0] = (CUgraphNode)n;
    s->n_cap_deps = 1;
    *out = n;
    return CUDA_SUCCESS;
}

CUresult fc_capture_task(fc_stream *s, const fc_task *t)
{
    if (t->cb) /* cuStreamAddCallback cannot be captured */
        return fc_capture_forbid(s);
    fc_node *n;
    CUresult r = capture_node(s, CU_GRAPH_NODE_TYPE_HOST, &n);
    if (r == CUDA_SUCCESS) {
        n->host.fn = t->fn;
        n->host.userData = t->user;
    }
    return r;
}


/* A graph launched into a capturing stream: refused, and the capture
 * invalidated, as driver 580 (CUDA 13.0) does in every capture mode; with
 * FAKECUDA_GRAPH_LAUNCH_CAPTURED=1 it becomes a child graph node (a driver
 * that captures graph launches, which hcguard is ready for). */
CUresult fc_capture_graph(fc_stream *s, const fc_graph *src)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!fc_knob("FAKECUDA_GRAPH_LAUNCH_CAPTURED"))
        return fc_capture_forbid(s);
    fc_graph *child = fc_graph_clone(src, 1);
    if (!child)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_node *n;
    CUresult r = capture_node(s, CU_GRAPH_NODE_TYPE_GRAPH, &n);
    if (r != CUDA_SUCCESS) {
        fc_graph_free(child);
        return r;
    }
    n->child = child;
    child->owner = n;
    return CUDA_SUCCESS;
}

/* A capture into a new graph, or (into) into the caller's graph, its
 * first node depending on deps (cuStreamBeginCaptureToGraph). */
typedef struct fc_into {
    CUgraph graph;
    const CUgraphNode *deps;
    size_t n;
} fc_into;

/* into's graph may be captured into: the caller's own, idle, and deps
 * nodes of it (at most FC_CAP_DEPS). */
static CUresult into_check(const fc_graph *g, const fc_into *into)
{
    if (!g || !g->registered || g->owner || g->capturer || into->n > FC_CAP_DEPS ||
        (into->n && !into->deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < into->n; i++) {
        fc_node *d = fc_node_get(into->deps[i], -1);
        if (!d || d->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream h, int ptsz, CUstreamCaptureMode mode, const fc_into *into)
{
    FC_ENTER();
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS && s == &fc_legacy)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (r == CUDA_SUCCESS && s->cap_status)
        r = CUDA_ERROR_ILLEGAL_STATE;
    fc_graph *g = into ? fc_obj_get(into->graph, FC_GRAPH) : NULL;
    if (r == CUDA_SUCCESS && into)
        r = into_check(g, into);
    if (r == CUDA_SUCCESS && !(s->cap_graph = into ? g : fc_graph_new(1)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        s->cap_graph->capturer = s;
        s->cap_user_graph = into != NULL;
        s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_id = fc_id();
        s->cap_epoch = fc_state.cap_epoch;
        s->n_cap_deps = into ? into->n : 0;
        for (size_t i = 0; i < s->n_cap_deps; i++)
            s->cap_deps[i] = into->deps[i];
        s->cap_origin = s->joined = NULL;
        s->n_cap_gone = 0;
        fc_state.n_capturing++;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, 0, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, 1, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream,
                                                CUstreamCaptureMode mode)
{
    return begin_capture(hStream, 0, mode, NULL);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                                     CUstreamCaptureMode mode)
{
    return begin_capture(hStream, 1, mode, NULL);
}

/* Edge data other than the default is not modelled. */
static CUresult begin_capture_to_graph(CUstream h, int ptsz, CUgraph g, const CUgraphNode *deps,
                                       const CUgraphEdgeData *edges, size_t n,
                                       CUstreamCaptureMode mode)
{
    static const CUgraphEdgeData plain;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &plain, sizeof plain) != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    fc_into into = {g, deps, n};
    return begin_capture(h, ptsz, mode, &into);
}

FC_API CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                    const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData,
                                                    size_t numDependencies,
                                                    CUstreamCaptureMode mode)
{
    return begin_capture_to_graph(hStream, 0, hGraph, dependencies, dependencyData,
                                  numDependencies, mode);
}

FC_API CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                         const CUgraphNode *dependencies,
                                                         const CUgraphEdgeData *dependencyData,
                                                         size_t numDependencies,
                                                         CUstreamCaptureMode mode)
{
    return begin_capture_to_graph(hStream, 1, hGraph, dependencies, dependencyData,
                                  numDependencies, mode);
}

static CUresult end_capture_locked(fc_stream *s, CUgraph *phGraph)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        fc_stream_capture_drop(s); /* from any thread (measured) */
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(s->cap_thread, pthread_self()))
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (s->cap_origin) /* only the stream that began it ends it */
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    if (!all_rejoined(s)) { /* the capture is dropped, its streams leave it */
        fc_graph *into = s->cap_user_graph ? s->cap_graph : NULL;
        fc_stream_capture_drop(s);
        if (into) /* the caller's graph goes too: driver 580 frees it */
            fc_graph_free(into);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
    fc_graph *gr = s->cap_graph;
    gr->capturer = NULL;
    joined_leave(s);
    capture_clear(s);
    *phGraph = (CUgraph)gr;
    return CUDA_SUCCESS;
}

static CUresult end_capture(CUstream h, int ptsz, CUgraph *phGraph)
{
    FC_ENTER();
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        r = end_capture_locked(s, phGraph);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, 0, phGraph);
}

FC_API CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream,
                                                CUgraph *phGraph)
{
    return end_capture(hStream, 1, phGraph);
}

/* FAKECUDA_CAPTURE_QUERY_YIELD=1: the thread that asked yields once it
 * has the answer, so that another thread's begin or end of that capture
 * falls between the answer and what the caller does with it (race tests;
 * on a GPU the window is the scheduler's). */
static int query_yields(void)
{
    static atomic_int v = -1; /* read once: it is asked on every launch */
    return fc_knob_once(&v, "FAKECUDA_CAPTURE_QUERY_YIELD");
}

static CUresult is_capturing(CUstream h, int ptsz, CUstreamCaptureStatus *st)
{
    FC_ENTER();
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        *st = s->cap_status;
    fc_unlock();
    if (query_yields())
        sched_yield();
    return r;
}

FC_API CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                            CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, 0, captureStatus);
}

FC_API CUresult CUDAAPI cuStreamIsCapturing_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, 1, captureStatus);
}

/* The outputs of every cuStreamGetCaptureInfo version; NULL = not asked. */
typedef struct fc_capinfo {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
} fc_capinfo;

static void capture_info_fill(const fc_stream *s, const fc_capinfo *o)
{
    int active = s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    *o->status = s->cap_status;
    if (o->id)
        *o->id = active ? s->cap_id : 0;
    if (o->graph)
        *o->graph = active ? (CUgraph)s->cap_graph : NULL;
    if (o->deps)
        *o->deps = active ? s->cap_deps : NULL;
    if (o->edges)
        *o->edges = active ? s->cap_edges : NULL;
    if (o->ndeps)
        *o->ndeps = active ? s->n_cap_deps : 0;
}

static CUresult capture_info(CUstream h, int ptsz, const fc_capinfo *o)
{
    FC_ENTER();
    if (!o->status || (o->edges && !o->deps) || (o->deps && !o->ndeps))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        capture_info_fill(s, o);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out)
{
    fc_capinfo o = {.status = captureStatus_out, .id = id_out};
    return capture_info(hStream, 0, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out)
{
    fc_capinfo o = {.status = captureStatus_out, .id = id_out};
    return capture_info(hStream, 1, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    NULL, numDependencies_out};
    return capture_info(hStream, 0, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    NULL, numDependencies_out};
    return capture_info(hStream, 1, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
    size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    edgeData_out, numDependencies_out};
    return capture_info(hStream, 0, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
    size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    edgeData_out, numDependencies_out};
    return capture_info(hStream, 1, &o);
}

