/* Executable graphs: instantiation (a private copy of the graph), launch,
 * per-node and whole-graph updates, destroy. */
#include "fakecuda.h"

/* ======================================================================
 * Executable graphs: a private copy of the graph, taken at instantiation.
 * ====================================================================== */
typedef struct fc_exec {
    fc_obj obj;
    fc_graph *snap;
    unsigned long long flags;
} fc_exec;

#define FC_INSTANTIATE_FLAGS                            \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |  \
     CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |               \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |        \
     CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate_locked(CUgraphExec *ph, CUgraph hGraph,
                                   unsigned long long flags)
{
    fc_graph *gr = fc_obj_get(hGraph, FC_GRAPH);
    if (!gr || gr->capturer || (flags & ~(unsigned long long)FC_INSTANTIATE_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_cur_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    fc_exec *e = calloc(1, sizeof *e);
    if (!e || !(e->snap = fc_graph_clone(gr, 0))) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->flags = flags;
    fc_obj_add(&e->obj, FC_EXEC);
    *ph = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *ph, CUgraph hGraph,
                            unsigned long long flags)
{
    FC_ENTER();
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = instantiate_locked(ph, hGraph, flags);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec,
                                                    CUgraph hGraph,
                                                    unsigned long long flags)
{
    return instantiate(phGraphExec, hGraph, flags);
}

/* The pre-12.0 form: no flags, an error node and a log buffer. */
static CUresult instantiate_log(CUgraphExec *ph, CUgraph hGraph,
                                CUgraphNode *phErrorNode, char *logBuffer,
                                size_t bufferSize)
{
    CUresult r = instantiate(ph, hGraph, 0);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return r;
}

FC_API CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec,
                                           CUgraph hGraph,
                                           CUgraphNode *phErrorNode,
                                           char *logBuffer, size_t bufferSize)
{
    return instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer,
                           bufferSize);
}

FC_API CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec,
                                              CUgraph hGraph,
                                              CUgraphNode *phErrorNode,
                                              char *logBuffer, size_t bufferSize)
{
    return instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer,
                           bufferSize);
}

static CUresult instantiate_params(CUgraphExec *ph, CUgraph hGraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *p, int ptsz)
{
    FC_ENTER();
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
        fc_stream *s;
        fc_lock();
        r = fc_stream_get(p->hUploadStream, ptsz, &s);
        fc_unlock();
    }
    if (r == CUDA_SUCCESS)
        r = instantiate(ph, hGraph, p->flags);
    p->hErrNode_out = NULL;
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                      : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithParams(
    CUgraphExec *phGraphExec, CUgraph hGraph,
    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams, 0);
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(
    CUgraphExec *phGraphExec, CUgraph hGraph,
    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams, 1);
}

FC_API CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FC_ENTER();
    fc_lock();
    fc_exec *e = fc_obj_get(hGraphExec, FC_EXEC);
    if (e) {
        fc_obj_del(&e->obj);
        fc_graph_free(e->snap);
        free(e);
    }
    fc_unlock();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* All host nodes of the copy, as one queue entry: a launch's parameters
 * are those of the exec when it is launched. */
static CUresult graph_enqueue(fc_stream *s, const fc_graph *snap)
{
    size_t n = fc_graph_count_host(snap);
    fc_work *w = fc_work_new(n);
    if (!w)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t k = 0;
    fc_graph_tasks(snap, w->tasks, &k);
    w->ntasks = k;
    return fc_enqueue(s, w);
}

static CUresult graph_launch(CUgraphExec hExec, CUstream h, int ptsz)
{
    FC_ENTER();
    fc_lock();
    fc_exec *e = fc_obj_get(hExec, FC_EXEC);
    fc_stream *s;
    CUresult r = e ? fc_stream_get(h, ptsz, &s) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = s->cap_status ? fc_capture_graph(s, e->snap) : graph_enqueue(s, e->snap);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 0);
}

FC_API CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec,
                                           CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 1);
}

/* The exec's copy of user node h (a node of the graph it was instantiated
 * from, or of the graph it was last updated from), top level only. */
static fc_node *exec_node(const fc_exec *e, CUgraphNode h)
{
    const fc_node *u = fc_node_get(h, -1);
    for (size_t i = 0; u && i < e->snap->n; i++) {
        fc_node *x = e->snap->nodes[i];
        if (x->origin == u->id || x->updated_from == u->id)
            return x;
    }
    return NULL;
}

FC_API CUresult CUDAAPI cuGraphExecHostNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode,
    const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    FC_ENTER();
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_exec *e = fc_obj_get(hGraphExec, FC_EXEC);
    fc_node *x = e ? exec_node(e, hNode) : NULL;
    CUresult r = x && x->type == CU_GRAPH_NODE_TYPE_HOST ? CUDA_SUCCESS
                                                         : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        x->host = *nodeParams;
    fc_unlock();
    return r;
}

/* Only kernel, memset and memcpy nodes can be disabled (the driver's
 * documentation): none of the test driver's kinds. */
FC_API CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              unsigned int isEnabled)
{
    FC_ENTER();
    (void)hGraphExec;
    (void)hNode;
    (void)isEnabled;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult child_set(fc_node *x, fc_graph *gr);

FC_API CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec,
                                                 CUgraphNode hNode,
                                                 CUgraphNodeParams *nodeParams)
{
    FC_ENTER();
    fc_lock();
    fc_exec *e = fc_obj_get(hGraphExec, FC_EXEC);
    fc_node *x = e ? exec_node(e, hNode) : NULL;
    CUresult r = !x ? CUDA_ERROR_INVALID_VALUE
                 : nodeParams && nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH
                     ? child_set(x, fc_obj_get(nodeParams->graph.graph, FC_GRAPH))
                     : fc_node_params_set(x, nodeParams);
    fc_unlock();
    return r;
}

static int same_deps(const fc_node *a, const fc_node *b)
{
    if (a->ndeps != b->ndeps)
        return 0;
    for (size_t i = 0; i < b->ndeps; i++) {
        size_t k = 0;
        while (k < a->ndeps && a->deps[k]->index != b->deps[i]->index)
            k++;
        if (k == a->ndeps)
            return 0;
    }
    return 1;
}

/* Can graph gr replace copy snap? Nodes are paired in creation order, as
 * the driver does for graphs built by the same sequence of calls. */
static CUgraphExecUpdateResult update_check(const fc_graph *snap,
                                            const fc_graph *gr,
                                            CUgraphNode *err_node)
{
    *err_node = NULL;
    if (snap->n != gr->n)
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *a = snap->nodes[i], *b = gr->nodes[i];
        *err_node = (CUgraphNode)b;
        if (a->type != b->type)
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (!same_deps(a, b))
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        CUgraphExecUpdateResult r =
            a->child ? update_check(a->child, b->child, err_node)
                     : CU_GRAPH_EXEC_UPDATE_SUCCESS;
        if (r != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            return r;
    }
    *err_node = NULL;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* Room in snap and its child graphs for the references of gr and its
 * child graphs, so that update_apply cannot fail half way. */
static int update_reserve(fc_graph *snap, const fc_graph *gr)
{
    if (fc_urefs_reserve(snap, gr->n_urefs) != 0)
        return -1;
    for (size_t i = 0; i < gr->n; i++)
        if (snap->nodes[i]->child &&
            update_reserve(snap->nodes[i]->child, gr->nodes[i]->child) != 0)
            return -1;
    return 0;
}

/* Parameters are copied in, and so are user object references: the CUDA
 * Programming Guide ("CUDA User Objects") says the references of the new
 * source graph are cloned and replace those of the target, child graphs
 * included; cuda.h says nothing on it. A reference released here still
 * outlasts the launches already queued (see fc_uobj_put). */
static void update_apply(fc_graph *snap, const fc_graph *gr)
{
    fc_urefs_assign(snap, gr);
    for (size_t i = 0; i < gr->n; i++) {
        fc_node *a = snap->nodes[i];
        const fc_node *b = gr->nodes[i];
        a->host = b->host;
        a->updated_from = b->id;
        if (a->child)
            update_apply(a->child, b->child);
    }
}

static CUresult exec_update(CUgraphExec hExec, CUgraph hGraph,
                            CUgraphNode *err_node,
                            CUgraphExecUpdateResult *result)
{
    FC_ENTER();
    fc_lock();
    fc_exec *e = fc_obj_get(hExec, FC_EXEC);
    fc_graph *gr = fc_obj_get(hGraph, FC_GRAPH);
    CUresult r = e && gr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        *result = update_check(e->snap, gr, err_node);
        if (*result == CU_GRAPH_EXEC_UPDATE_SUCCESS &&
            update_reserve(e->snap, gr) != 0)
            *result = CU_GRAPH_EXEC_UPDATE_ERROR; /* out of memory */
        if (*result == CU_GRAPH_EXEC_UPDATE_SUCCESS)
            update_apply(e->snap, gr);
        else
            r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    fc_unlock();
    return r;
}

/* Child graph node x of an exec takes gr's parameters, as an update of
 * that child alone: the same topology, and its user object references
 * replace the child's (the Programming Guide says so for this call too).
 * Under the lock. */
static CUresult child_set(fc_node *x, fc_graph *gr)
{
    CUgraphNode err;
    if (!x || !x->child || !gr || gr->capturer ||
        update_check(x->child, gr, &err) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (update_reserve(x->child, gr) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    update_apply(x->child, gr);
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec,
                                                           CUgraphNode hNode,
                                                           CUgraph childGraph)
{
    FC_ENTER();
    fc_lock();
    fc_exec *e = fc_obj_get(hGraphExec, FC_EXEC);
    CUresult r = child_set(e ? exec_node(e, hNode) : NULL, fc_obj_get(childGraph, FC_GRAPH));
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                          CUgraphNode *hErrorNode_out,
                                          CUgraphExecUpdateResult *updateResult_out)
{
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUresult r = exec_update(hGraphExec, hGraph, &err, &res);
    if (hErrorNode_out)
        *hErrorNode_out = err;
    if (updateResult_out)
        *updateResult_out = res;
    return r;
}

FC_API CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec,
                                             CUgraph hGraph,
                                             CUgraphExecUpdateResultInfo *resultInfo)
{
    FC_ENTER();
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    memset(resultInfo, 0, sizeof *resultInfo);
    resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    return exec_update(hGraphExec, hGraph, &resultInfo->errorNode,
                       &resultInfo->result);
}

