/* The graph API that builds and changes graphs: create, destroy, add
 * nodes (host, empty, child graph, generic), node parameters and types. */
#include "fakecuda.h"

/* ======================================================================
 * Graph API.
 * ====================================================================== */

/* Dependencies must be distinct nodes of the same graph. */
static CUresult deps_check(const fc_graph *gr, const CUgraphNode *deps,
                           size_t n)
{
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const fc_node *d = fc_obj_get(deps[i], FC_NODE);
        if (!d || d->graph != gr)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Edge data other than the default (all zero) is for kernel nodes only. */
static CUresult edges_check(const CUgraphEdgeData *edges, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &zero, sizeof zero) != 0)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* What a new node is: its type, and its host function or child graph. */
typedef struct fc_newnode {
    CUgraphNodeType type;
    CUDA_HOST_NODE_PARAMS host;
    CUgraph child;
    int move_child; /* CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE */
} fc_newnode;

static int graph_is_within(const fc_graph *inner, const fc_graph *outer)
{
    for (; inner; inner = inner->owner ? inner->owner->graph : NULL)
        if (inner == outer)
            return 1;
    return 0;
}

/* The child graph a new node will own: a clone, or the graph itself. */
static CUresult child_take(fc_graph *gr, const fc_newnode *nn, fc_graph **out)
{
    fc_graph *src = fc_obj_get(nn->child, FC_GRAPH);
    if (!src || src->capturer)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nn->move_child) {
        *out = fc_graph_clone(src, 1);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (src->owner || graph_is_within(gr, src))
        return CUDA_ERROR_INVALID_VALUE;
    *out = src;
    return CUDA_SUCCESS;
}

static CUresult add_node_locked(CUgraphNode *ph, CUgraph hGraph,
                                const CUgraphNode *deps, size_t ndeps,
                                const fc_newnode *nn)
{
    fc_graph *gr = fc_obj_get(hGraph, FC_GRAPH);
    if (!gr)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = deps_check(gr, deps, ndeps);
    if (r == CUDA_SUCCESS && nn->type == CU_GRAPH_NODE_TYPE_HOST && !nn->host.fn)
        r = CUDA_ERROR_INVALID_VALUE;
    fc_graph *child = NULL;
    if (r == CUDA_SUCCESS && nn->type == CU_GRAPH_NODE_TYPE_GRAPH)
        r = child_take(gr, nn, &child);
    fc_node *n = r == CUDA_SUCCESS ? fc_node_add(gr, nn->type, ndeps) : NULL;
    if (r == CUDA_SUCCESS && !n) {
        if (!nn->move_child)
            fc_graph_free(child);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS)
        return r;
    for (size_t k = 0; k < ndeps; k++)
        n->deps[k] = (fc_node *)deps[k];
    n->host = nn->host;
    n->child = child;
    if (child)
        child->owner = n;
    *ph = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *ph, CUgraph hGraph,
                         const CUgraphNode *deps, size_t ndeps,
                         const fc_newnode *nn)
{
    FC_ENTER();
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = add_node_locked(ph, hGraph, deps, ndeps, nn);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    FC_ENTER();
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = fc_graph_new(1);
    fc_unlock();
    if (!gr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)gr;
    return CUDA_SUCCESS;
}

/* A graph owned by a node, or being captured into, is not the caller's to
 * destroy. */
FC_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    FC_ENTER();
    fc_lock();
    fc_graph *gr = fc_obj_get(hGraph, FC_GRAPH);
    CUresult r = gr && !gr->owner && !gr->capturer ? CUDA_SUCCESS
                                                   : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        fc_graph_free(gr);
    fc_unlock();
    return r;
}

/* A node of a graph the caller owns, with its edges (and its child graph);
 * the graph's other nodes keep their order. */
FC_API CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode)
{
    FC_ENTER();
    fc_lock();
    fc_node *n = fc_obj_get(hNode, FC_NODE);
    fc_graph *gr = n ? n->graph : NULL;
    if (!gr || gr->capturer) {
        fc_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = n->index; i + 1 < gr->n; i++) {
        gr->nodes[i] = gr->nodes[i + 1];
        gr->nodes[i]->index = i;
    }
    gr->n--;
    for (size_t i = 0; i < gr->n; i++) { /* the edges from it */
        fc_node *m = gr->nodes[i];
        size_t k = 0;
        for (size_t j = 0; j < m->ndeps; j++)
            if (m->deps[j] != n)
                m->deps[k++] = m->deps[j];
        m->ndeps = k;
    }
    fc_obj_del(&n->obj);
    fc_graph_free(n->child);
    fc_unlock();
    free(n->deps);
    free(n);
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode,
                                           CUgraph hGraph,
                                           const CUgraphNode *dependencies,
                                           size_t numDependencies,
                                           const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    FC_ENTER();
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    fc_newnode nn = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = *nodeParams};
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, &nn);
}

FC_API CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode,
                                            CUgraph hGraph,
                                            const CUgraphNode *dependencies,
                                            size_t numDependencies)
{
    fc_newnode nn = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, &nn);
}

FC_API CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode,
                                                 CUgraph hGraph,
                                                 const CUgraphNode *dependencies,
                                                 size_t numDependencies,
                                                 CUgraph childGraph)
{
    fc_newnode nn = {.type = CU_GRAPH_NODE_TYPE_GRAPH, .child = childGraph};
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, &nn);
}

/* Read a CUgraphNodeParams of a modelled type into nn. */
static CUresult node_params_in(const CUgraphNodeParams *p, fc_newnode *nn)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] ||
        p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    memset(nn, 0, sizeof *nn);
    nn->type = p->type;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_HOST:
        nn->host.fn = p->host.fn;
        nn->host.userData = p->host.userData;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if ((unsigned)p->graph.ownership > CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
            return CUDA_ERROR_INVALID_VALUE;
        nn->child = p->graph.graph;
        nn->move_child = p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult add_node_params(CUgraphNode *ph, CUgraph hGraph,
                                const CUgraphNode *deps,
                                const CUgraphEdgeData *edges, size_t ndeps,
                                const CUgraphNodeParams *p)
{
    FC_ENTER();
    fc_newnode nn;
    CUresult r = node_params_in(p, &nn);
    if (r == CUDA_SUCCESS)
        r = edges_check(edges, ndeps);
    return r == CUDA_SUCCESS ? add_node(ph, hGraph, deps, ndeps, &nn) : r;
}

FC_API CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies,
                                       size_t numDependencies,
                                       CUgraphNodeParams *nodeParams)
{
    return add_node_params(phGraphNode, hGraph, dependencies, NULL,
                           numDependencies, nodeParams);
}

FC_API CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode,
                                          CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData,
                                          size_t numDependencies,
                                          CUgraphNodeParams *nodeParams)
{
    return add_node_params(phGraphNode, hGraph, dependencies, dependencyData,
                           numDependencies, nodeParams);
}

/* Look up a node; NULL unless it exists and (type >= 0) has that type. */
fc_node *fc_node_get(CUgraphNode h, int type)
{
    fc_node *n = fc_obj_get(h, FC_NODE);
    return n && (type < 0 || n->type == (CUgraphNodeType)type) ? n : NULL;
}

FC_API CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode,
                                                 CUDA_HOST_NODE_PARAMS *nodeParams)
{
    FC_ENTER();
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = fc_node_get(hNode, CU_GRAPH_NODE_TYPE_HOST);
    if (n)
        *nodeParams = n->host;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphHostNodeSetParams(
    CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    FC_ENTER();
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = fc_node_get(hNode, CU_GRAPH_NODE_TYPE_HOST);
    if (n)
        n->host = *nodeParams;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode,
                                                      CUgraph *phGraph)
{
    FC_ENTER();
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = fc_node_get(hNode, CU_GRAPH_NODE_TYPE_GRAPH);
    if (n)
        *phGraph = (CUgraph)n->child;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Only host nodes have parameters that may be set in this model. */
CUresult fc_node_params_set(fc_node *n, const CUgraphNodeParams *p)
{
    fc_newnode nn;
    CUresult r = node_params_in(p, &nn);
    if (r != CUDA_SUCCESS)
        return r;
    if (nn.type != n->type)
        return CUDA_ERROR_INVALID_VALUE;
    if (nn.type != CU_GRAPH_NODE_TYPE_HOST)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!nn.host.fn)
        return CUDA_ERROR_INVALID_VALUE;
    n->host = nn.host;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode,
                                             CUgraphNodeParams *nodeParams)
{
    FC_ENTER();
    fc_lock();
    fc_node *n = fc_node_get(hNode, -1);
    CUresult r = n ? fc_node_params_set(n, nodeParams) : CUDA_ERROR_INVALID_VALUE;
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphNodeGetParams(CUgraphNode hNode,
                                             CUgraphNodeParams *nodeParams)
{
    FC_ENTER();
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = fc_node_get(hNode, -1);
    if (n) {
        memset(nodeParams, 0, sizeof *nodeParams);
        nodeParams->type = n->type;
        if (n->type == CU_GRAPH_NODE_TYPE_HOST) {
            nodeParams->host.fn = n->host.fn;
            nodeParams->host.userData = n->host.userData;
        } else if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            nodeParams->graph.graph = (CUgraph)n->child;
        }
    }
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode,
                                           CUgraphNodeType *type)
{
    FC_ENTER();
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = fc_node_get(hNode, -1);
    if (n)
        *type = n->type;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

