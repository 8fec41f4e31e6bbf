/* The graph API that reads graphs: node lists, dependencies, clones and
 * the nodes in them, the DOT dump. */
#include "fakecuda.h"

/* The driver's convention for list queries: with out NULL, report the
 * count; else fill up to *num entries, set unused ones to NULL, and lower
 * *num to the real count when that is smaller. */
static void list_out(fc_node *const *items, size_t count, int roots_only,
                     CUgraphNode *out, CUgraphEdgeData *edges, size_t *num)
{
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        if (roots_only && items[i]->ndeps)
            continue;
        if (out && k < *num) {
            out[k] = (CUgraphNode)items[i];
            if (edges)
                memset(&edges[k], 0, sizeof edges[k]);
        }
        k++;
    }
    if (out)
        for (size_t i = k; i < *num; i++)
            out[i] = NULL;
    if (!out || k < *num)
        *num = k;
}

static CUresult graph_list(CUgraph hGraph, int roots_only, CUgraphNode *nodes,
                           size_t *num)
{
    FC_ENTER();
    if (!num)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = fc_obj_get(hGraph, FC_GRAPH);
    if (gr)
        list_out(gr->nodes, gr->n, roots_only, nodes, NULL, num);
    fc_unlock();
    return gr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes,
                                        size_t *numNodes)
{
    return graph_list(hGraph, 0, nodes, numNodes);
}

FC_API CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph,
                                            CUgraphNode *rootNodes,
                                            size_t *numRootNodes)
{
    return graph_list(hGraph, 1, rootNodes, numRootNodes);
}

static CUresult node_deps(CUgraphNode hNode, CUgraphNode *deps,
                          CUgraphEdgeData *edges, size_t *num)
{
    FC_ENTER();
    if (!num || (edges && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = fc_node_get(hNode, -1);
    if (n)
        list_out(n->deps, n->ndeps, 0, deps, edges, num);
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode,
                                                   CUgraphNode *dependencies,
                                                   size_t *numDependencies)
{
    return node_deps(hNode, dependencies, NULL, numDependencies);
}

FC_API CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode,
                                                      CUgraphNode *dependencies,
                                                      CUgraphEdgeData *edgeData,
                                                      size_t *numDependencies)
{
    return node_deps(hNode, dependencies, edgeData, numDependencies);
}

FC_API CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    FC_ENTER();
    if (!phGraphClone)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *src = fc_obj_get(originalGraph, FC_GRAPH);
    fc_graph *c = src ? fc_graph_clone(src, 1) : NULL;
    fc_unlock();
    if (!c)
        return src ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    *phGraphClone = (CUgraph)c;
    return CUDA_SUCCESS;
}

/* The copy of node `node_id` (of graph `graph_id`) in clone c or in one of
 * c's child graphs. */
static fc_node *find_copy(const fc_graph *c, uint64_t graph_id,
                          uint64_t node_id)
{
    for (size_t i = 0; i < c->n; i++) {
        fc_node *n = c->nodes[i];
        if (c->clone_of == graph_id && n->origin == node_id)
            return n;
        fc_node *inner = n->child ? find_copy(n->child, graph_id, node_id) : NULL;
        if (inner)
            return inner;
    }
    return NULL;
}

FC_API CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *phNode,
                                               CUgraphNode hOriginalNode,
                                               CUgraph hClonedGraph)
{
    FC_ENTER();
    if (!phNode)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *o = fc_node_get(hOriginalNode, -1);
    fc_graph *c = fc_obj_get(hClonedGraph, FC_GRAPH);
    fc_node *n = o && c ? find_copy(c, o->graph->id, o->id) : NULL;
    fc_unlock();
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *phNode = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static void dot_graph(FILE *f, const fc_graph *gr)
{
    static const char *const names[] = {
        [CU_GRAPH_NODE_TYPE_HOST] = "HOST",
        [CU_GRAPH_NODE_TYPE_GRAPH] = "GRAPH",
        [CU_GRAPH_NODE_TYPE_EMPTY] = "EMPTY",
    };
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *n = gr->nodes[i];
        fprintf(f, "  n%llu [label=\"%s", (unsigned long long)n->id,
                names[n->type]);
        if (n->type == CU_GRAPH_NODE_TYPE_HOST)
            fprintf(f, "\\nfn=%p\\nuserData=%p", (void *)n->host.fn,
                    n->host.userData);
        fprintf(f, "\"];\n");
        for (size_t k = 0; k < n->ndeps; k++)
            fprintf(f, "  n%llu -> n%llu;\n", (unsigned long long)n->deps[k]->id,
                    (unsigned long long)n->id);
        if (n->child) {
            fprintf(f, "  subgraph cluster_%llu {\n",
                    (unsigned long long)n->child->id);
            dot_graph(f, n->child);
            fprintf(f, "  }\n");
        }
    }
}

FC_API CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path,
                                             unsigned int flags)
{
    (void)flags;
    FC_ENTER();
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = fc_obj_get(hGraph, FC_GRAPH);
    FILE *f = gr ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "digraph fakecuda_graph_%llu {\n", (unsigned long long)gr->id);
        dot_graph(f, gr);
        fprintf(f, "}\n");
    }
    int failed = f && fclose(f) != 0;
    fc_unlock();
    if (!gr)
        return CUDA_ERROR_INVALID_VALUE;
    return f && !failed ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

