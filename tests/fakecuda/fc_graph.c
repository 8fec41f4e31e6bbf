/* The graph model behind the API: graphs, nodes in creation (so
 * topological) order, clones, the user-object references a graph owns, the
 * host tasks a launch runs. */
#include "fakecuda.h"

fc_graph *fc_graph_new(int registered)
{
    fc_graph *gr = calloc(1, sizeof *gr);
    if (!gr)
        return NULL;
    gr->id = fc_id();
    gr->registered = registered;
    if (registered)
        fc_obj_add(&gr->obj, FC_GRAPH);
    return gr;
}

/* Room for at least n user object references. */
int fc_urefs_reserve(fc_graph *gr, size_t n)
{
    if (n <= gr->cap_urefs)
        return 0;
    size_t cap = gr->cap_urefs ? gr->cap_urefs : 4;
    while (cap < n)
        cap *= 2;
    fc_uref *u = realloc(gr->urefs, cap * sizeof *u);
    if (!u)
        return -1;
    gr->urefs = u;
    gr->cap_urefs = cap;
    return 0;
}

fc_uref *fc_uref_find(const fc_graph *gr, const fc_uobj *o)
{
    for (size_t i = 0; i < gr->n_urefs; i++)
        if (gr->urefs[i].o == o)
            return &gr->urefs[i];
    return NULL;
}

/* Graph gr now owns n more references on o; the caller counts them in o. */
int fc_graph_hold(fc_graph *gr, fc_uobj *o, uint64_t n)
{
    fc_uref *u = fc_uref_find(gr, o);
    if (!u) {
        if (fc_urefs_reserve(gr, gr->n_urefs + 1) != 0)
            return -1;
        u = &gr->urefs[gr->n_urefs++];
        u->o = o;
        u->n = 0;
    }
    u->n += n;
    return 0;
}

/* Make dst own the same references as src (a clone's, or an update's). New
 * references are taken before the old ones go, so an object the two share
 * never reaches zero on the way. dst must have room (fc_urefs_reserve). */
void fc_urefs_assign(fc_graph *dst, const fc_graph *src)
{
    for (size_t i = 0; i < src->n_urefs; i++)
        src->urefs[i].o->refs += src->urefs[i].n;
    for (size_t i = 0; i < dst->n_urefs; i++)
        fc_uobj_put(dst->urefs[i].o, dst->urefs[i].n);
    if (src->n_urefs)
        memcpy(dst->urefs, src->urefs, src->n_urefs * sizeof *src->urefs);
    dst->n_urefs = src->n_urefs;
}

void fc_graph_free(fc_graph *gr)
{
    if (!gr)
        return;
    for (size_t i = 0; i < gr->n; i++) {
        fc_node *n = gr->nodes[i];
        fc_graph_free(n->child);
        if (gr->registered)
            fc_obj_del(&n->obj);
        free(n->deps);
        free(n);
    }
    for (size_t i = 0; i < gr->n_urefs; i++)
        fc_uobj_put(gr->urefs[i].o, gr->urefs[i].n);
    if (gr->registered)
        fc_obj_del(&gr->obj);
    free(gr->urefs);
    free(gr->nodes);
    free(gr);
}

/* Append a node with room for ndeps dependencies, which the caller fills. */
fc_node *fc_node_add(fc_graph *gr, CUgraphNodeType type, size_t ndeps)
{
    if (gr->n == gr->cap) {
        size_t cap = gr->cap ? 2 * gr->cap : 8;
        fc_node **nodes = realloc(gr->nodes, cap * sizeof *nodes);
        if (!nodes)
            return NULL;
        gr->nodes = nodes;
        gr->cap = cap;
    }
    fc_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    if (ndeps && !(n->deps = calloc(ndeps, sizeof *n->deps))) {
        free(n);
        return NULL;
    }
    n->ndeps = ndeps;
    n->type = type;
    n->id = fc_id();
    n->graph = gr;
    n->index = gr->n;
    gr->nodes[gr->n++] = n;
    if (gr->registered)
        fc_obj_add(&n->obj, FC_NODE);
    return n;
}


static int node_clone(fc_graph *dst, const fc_node *s)
{
    fc_graph *child = NULL;
    if (s->child && !(child = fc_graph_clone(s->child, dst->registered)))
        return -1;
    fc_node *n = fc_node_add(dst, s->type, s->ndeps);
    if (!n) {
        fc_graph_free(child);
        return -1;
    }
    n->origin = s->id;
    n->host = s->host;
    n->child = child;
    if (child)
        child->owner = n;
    for (size_t k = 0; k < s->ndeps; k++)
        n->deps[k] = dst->nodes[s->deps[k]->index];
    return 0;
}

/* A copy of src with its nodes, child graphs and user object references
 * (as clone, instantiate and child graph nodes make). */
fc_graph *fc_graph_clone(const fc_graph *src, int registered)
{
    fc_graph *c = fc_graph_new(registered);
    if (!c)
        return NULL;
    c->clone_of = src->id;
    if (fc_urefs_reserve(c, src->n_urefs) != 0) {
        fc_graph_free(c);
        return NULL;
    }
    fc_urefs_assign(c, src);
    for (size_t i = 0; i < src->n; i++) {
        if (node_clone(c, src->nodes[i]) != 0) {
            fc_graph_free(c);
            return NULL;
        }
    }
    return c;
}

size_t fc_graph_count_host(const fc_graph *gr)
{
    size_t k = 0;
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *n = gr->nodes[i];
        k += n->type == CU_GRAPH_NODE_TYPE_HOST;
        if (n->child)
            k += fc_graph_count_host(n->child);
    }
    return k;
}

void fc_graph_tasks(const fc_graph *gr, fc_task *t, size_t *k)
{
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *n = gr->nodes[i];
        if (n->type == CU_GRAPH_NODE_TYPE_HOST) {
            t[*k].fn = n->host.fn;
            t[*k].user = n->host.userData;
            (*k)++;
        }
        if (n->child)
            fc_graph_tasks(n->child, t, k);
    }
}

