/* Graph host nodes: cuGraphAddHostNode, cuGraphAddNode(_v2), the set-params
 * entry points (graph and executable graph), the getters, instantiation,
 * executable-graph update, and host functions captured from streams.
 *
 * A host node runs hcguard's trampoline with an hcg_call as its data, and
 * that call must live as long as anything can still run the node: the
 * graph, its clones, child-graph copies and executable graphs, whichever
 * dies last. The driver tracks exactly that for user objects, so the call
 * a node is created with (its root) is owned by a CUuserObject retained on
 * the graph: clones, child graphs and executable graphs take references to
 * it, and its destructor runs after the last one is gone.
 *
 * Set-params must not grow memory with each call (a program may set a node
 * a million times). A call set on a graph's node gets a user object of its
 * own, retained on the graph; the next set on that node releases the
 * graph's reference to the call it replaces, so it lives exactly as long as
 * the clones and executable graphs made while it was current. A call set on
 * an executable graph's node belongs to that graph's entry in the exec
 * table: replaced before any launch of it, it is freed at once; replaced
 * after one, it is retired, and freed by a host function hcguard enqueues
 * behind the next launch (launches of one executable graph run in order,
 * so every launch that could run it has finished by then). The rest (a
 * node of a clone, whose graph hcguard cannot name) is chained onto the
 * root and freed with it. An executable graph updated from another graph
 * (cuGraphExecUpdate) takes that graph's calls; they are chained onto a
 * root the executable graph holds, found when it was instantiated; a
 * child graph node of it set to another graph
 * (cuGraphExecChildGraphNodeSetParams) the same, and if that root was the
 * child's, what it holds passes to a root the executable graph keeps.
 * Destructors run on a driver thread: they touch only atomics. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "wrap/wrap.h"

#define REAL_OR_FAIL(d, name, f)                                               \
    hcg_pfn_##name f = atomic_load(&(d)->name);                                \
    if (!f)                                                                    \
        return CUDA_ERROR_NOT_FOUND

static atomic_int host_nodes_seen; /* any host node made through hcguard */
static atomic_uint_fast64_t calls_live;

uint64_t hcg_graph_calls_live(void)
{
    return atomic_load(&calls_live);
}

/* ---- lifetime ------------------------------------------------------------ */
static void call_unref(hcg_call *c)
{
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
        atomic_fetch_sub_explicit(&calls_live, 1, memory_order_relaxed);
        if (c->wrapped)
            free(c->user); /* the wrapper's data: the wrapper never ran to free it */
        free(c->replays);
        c->replays = NULL;
        hcg_call_poison(c);
        hcg_call_release(c);
    }
}

/* A root's chain: references it holds on other calls. A call may be held
 * by several roots (an updated executable graph's and its own node's). */
typedef struct hcg_link {
    hcg_call *c;
    struct hcg_link *next;
} hcg_link;

/* The user object's destructor: the last holder of the node is gone. */
static void CUDA_CB root_gone(void *p)
{
    hcg_call *root = p;
    hcg_link *l = atomic_exchange_explicit(&root->chain, NULL, memory_order_acq_rel);
    while (l) {
        hcg_link *next = l->next;
        call_unref(l->c);
        free(l);
        l = next;
    }
    call_unref(root);
}

/* Application threads only (it allocates). Without memory, c is kept for
 * ever rather than freed too early. */
static void chain_onto(hcg_call *root, hcg_call *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    hcg_link *l = malloc(sizeof *l);
    if (!l)
        return;
    l->c = c;
    void *head = atomic_load_explicit(&root->chain, memory_order_relaxed);
    do
        l->next = head;
    while (!atomic_compare_exchange_weak_explicit(&root->chain, &head, l, memory_order_release,
                                                  memory_order_relaxed));
}

/* Make c the root of a node of g: owned by a user object the graph holds.
 * On failure c is gone (freed now or by the destructor). */
static int attach_root(hcg_driver *d, hcg_call *c, CUgraph g)
{
    hcg_pfn_cuUserObjectCreate create = atomic_load(&d->cuUserObjectCreate);
    hcg_pfn_cuGraphRetainUserObject retain = atomic_load(&d->cuGraphRetainUserObject);
    hcg_pfn_cuUserObjectRelease release = atomic_load(&d->cuUserObjectRelease);
    CUuserObject o = NULL;
    c->root = NULL;
    c->graph = (uintptr_t)g;
    if (!create || !retain || !release ||
        create(&o, c, root_gone, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) != CUDA_SUCCESS) {
        call_unref(c);
        return -1;
    }
    c->uobj = o;
    if (retain(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE) != CUDA_SUCCESS) {
        release(o, 1); /* the destructor frees c */
        return -1;
    }
    atomic_store(&host_nodes_seen, 1);
    return 0;
}

/* The user object of a call set on a graph's node (not a root). */
static void CUDA_CB set_call_gone(void *p)
{
    call_unref(p);
}

/* Give c (refs 1) a user object of its own retained on g: 0, or -1 with c
 * untouched (the caller chains it instead). */
static int own_on_graph(hcg_driver *d, hcg_call *c, CUgraph g)
{
    hcg_pfn_cuUserObjectCreate create = atomic_load(&d->cuUserObjectCreate);
    hcg_pfn_cuGraphRetainUserObject retain = atomic_load(&d->cuGraphRetainUserObject);
    hcg_pfn_cuUserObjectRelease release = atomic_load(&d->cuUserObjectRelease);
    CUuserObject o = NULL;
    if (!create || !retain || !release || !atomic_load(&d->cuGraphReleaseUserObject))
        return -1;
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); /* survives a failed retain */
    if (create(&o, c, set_call_gone, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) != CUDA_SUCCESS) {
        atomic_fetch_sub_explicit(&c->refs, 1, memory_order_relaxed);
        return -1;
    }
    if (retain(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE) != CUDA_SUCCESS) {
        release(o, 1); /* drops the extra reference */
        return -1;
    }
    c->uobj = o;
    call_unref(c); /* the user object's reference is the only one */
    return 0;
}

/* g lets go of a set call it no longer runs; whatever copied g meanwhile
 * keeps its own reference. */
static void graph_drop(hcg_driver *d, CUgraph g, hcg_call *c)
{
    hcg_pfn_cuGraphReleaseUserObject drop = atomic_load(&d->cuGraphReleaseUserObject);
    if (drop && c && c->uobj)
        drop(g, c->uobj, 1);
}

/* The root of node n, if its host function is hcguard's. */
static hcg_call *node_root(hcg_driver *d, CUgraphNode n)
{
    hcg_pfn_cuGraphHostNodeGetParams get = atomic_load(&d->cuGraphHostNodeGetParams);
    CUDA_HOST_NODE_PARAMS p;
    if (!get || get(n, &p) != CUDA_SUCCESS || p.fn != hcg_trampoline || !p.userData)
        return NULL;
    hcg_call *c = p.userData;
    return c->root ? c->root : c;
}

static hcg_call *exec_root(CUgraphExec e);

/* A call set on node n later (of executable graph e, or of its graph when
 * e is NULL): freed with a root that whatever runs it holds, the exec's
 * own or else the node's; with no root to hang it on (a node hcguard never
 * saw), kept for ever. */
static void attach_to_root(hcg_call *c, hcg_call *root, CUgraphNode n)
{
    c->node = (uintptr_t)n;
    if (!root) {
        hcg_debug("host node %p was not made through hcguard: its new call is never freed",
                  (void *)n);
        return;
    }
    c->root = root;
    c->graph = root->graph;
    chain_onto(root, c);
    call_unref(c); /* the chain's reference is the only one */
}

/* The same with the root looked up now: the exec's, or else the node's
 * (before the driver sets c on a graph's node: after, the node runs c). */
static void attach_to_node(hcg_driver *d, hcg_call *c, CUgraphExec e, CUgraphNode n)
{
    hcg_call *root = e ? exec_root(e) : NULL;
    attach_to_root(c, root ? root : node_root(d, n), n);
}

/* ---- checking and making calls ------------------------------------------- */
static int passive(void)
{
    return hcg_config_get()->mode == HCG_MODE_OFF;
}

/* The return address of the wrapper a graph function is in: where the
 * node was made or set (hcg_callsite_made finds the program's frame). */
#define RA ((uintptr_t)__builtin_return_address(0))

/* Check fn/user as the host function of a node made or set by a wrapper
 * that returns to ra. Returns CUDA_SUCCESS with *out set (or NULL: pass
 * the parameters through unmeasured), or CUDA_ERROR_INVALID_VALUE if the
 * record is refused. */
static CUresult prepare(hcg_api api, CUhostFn fn, void *user, hcg_call **out, uintptr_t ra)
{
    *out = NULL;
    if (!fn || fn == hcg_trampoline)
        return CUDA_SUCCESS;
    hcg_init();
    hcg_call *c;
    CUresult r = hcg_prepare_call(api, NULL, fn, user, &c);
    if (r == CUDA_SUCCESS && !c)
        hcg_count_unmeasured(); /* set on the node as it is */
    if (r != CUDA_SUCCESS || !c)
        return r;
    c->oneshot = 0;
    atomic_fetch_add_explicit(&calls_live, 1, memory_order_relaxed);
    atomic_store_explicit(&c->refs, 1, memory_order_relaxed);
    atomic_store_explicit(&c->chain, NULL, memory_order_relaxed);
    c->root = NULL;
    c->uobj = NULL;
    c->graph = c->node = 0;
    atomic_store_explicit(&c->home_gone, 0, memory_order_relaxed);
    /* A node's run-time findings name where it was made or set. */
    atomic_store_explicit(&c->caller, hcg_callsite_made(ra), memory_order_relaxed);
    c->replays = calloc(1, sizeof *c->replays); /* without memory: replays unattributed */
    *out = c; /* counted once the driver took it (hcg_count_node) */
    return CUDA_SUCCESS;
}

/* ---- adding host nodes ------------------------------------------------- */
/* After the driver's answer r to adding a node running root c to g: counted
 * if taken, else let go by g at once (not kept until g goes). */
static CUresult added(hcg_driver *d, CUgraph g, hcg_call *c, CUgraphNode *ph, CUresult r)
{
    if (r != CUDA_SUCCESS) {
        graph_drop(d, g, c);
        return r;
    }
    hcg_count_node((hcg_fnkind)c->kind);
    if (ph)
        c->node = (uintptr_t)*ph;
    return r;
}

CUresult hcg_w_cuGraphAddHostNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n,
                                  const CUDA_HOST_NODE_PARAMS *p)
{
    HCG_AUDIT_ENTRY(cuGraphAddHostNode);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphAddHostNode, real);
    hcg_call *c = NULL;
    if (!p || passive())
        return real(ph, g, deps, n, p);
    CUresult r = prepare(HCG_API_GRAPH_ADD_HOST_NODE, p->fn, p->userData, &c, RA);
    if (r != CUDA_SUCCESS || !c || attach_root(d, c, g) != 0)
        return r != CUDA_SUCCESS ? r : real(ph, g, deps, n, p);
    CUDA_HOST_NODE_PARAMS q = {hcg_trampoline, c};
    r = real(ph, g, deps, n, &q);
    return added(d, g, c, ph, r);
}

/* cuGraphAddNode(_v2) with a host node: the same, on a copy of params. */
static CUresult add_node(hcg_driver *d, CUgraph g, CUgraphNodeParams *p, CUgraphNodeParams *q,
                         hcg_call **c, uintptr_t ra)
{
    *c = NULL;
    if (!p || p->type != CU_GRAPH_NODE_TYPE_HOST || passive())
        return CUDA_SUCCESS;
    CUresult r = prepare(HCG_API_GRAPH_ADD_HOST_NODE, p->host.fn, p->host.userData, c, ra);
    if (r != CUDA_SUCCESS || !*c)
        return r;
    if (attach_root(d, *c, g) != 0) {
        *c = NULL;
        return CUDA_SUCCESS;
    }
    *q = *p;
    q->host.fn = hcg_trampoline;
    q->host.userData = *c;
    return CUDA_SUCCESS;
}

CUresult hcg_w_cuGraphAddNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n,
                              CUgraphNodeParams *p)
{
    HCG_AUDIT_ENTRY(cuGraphAddNode);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphAddNode, real);
    CUgraphNodeParams q;
    hcg_call *c;
    CUresult r = add_node(d, g, p, &q, &c, RA);
    if (r != CUDA_SUCCESS)
        return r;
    r = real(ph, g, deps, n, c ? &q : p);
    return c ? added(d, g, c, ph, r) : r;
}

CUresult hcg_w_cuGraphAddNode_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps,
                                 const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    HCG_AUDIT_ENTRY(cuGraphAddNode_v2);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphAddNode_v2, real);
    CUgraphNodeParams q;
    hcg_call *c;
    CUresult r = add_node(d, g, p, &q, &c, RA);
    if (r != CUDA_SUCCESS)
        return r;
    r = real(ph, g, deps, edges, n, c ? &q : p);
    return c ? added(d, g, c, ph, r) : r;
}

/* ---- setting parameters ------------------------------------------------- */
static CUresult child_set_call(hcg_driver *d, CUgraphExec e, CUgraphNode n, CUgraph k,
                               CUgraphNodeParams *p);
static int exec_note_set(CUgraphExec e, CUgraphNode n, hcg_call *c, uint64_t before);
static uint64_t exec_launches(CUgraphExec e);

/* The call node n runs now (hcguard's), or NULL. */
static hcg_call *node_call(hcg_driver *d, CUgraphNode n)
{
    hcg_pfn_cuGraphHostNodeGetParams get = atomic_load(&d->cuGraphHostNodeGetParams);
    CUDA_HOST_NODE_PARAMS p;
    if (!get || get(n, &p) != CUDA_SUCCESS || p.fn != hcg_trampoline)
        return NULL;
    return p.userData;
}

/* A set on a graph's node: c, made for it, replaces prev there. */
typedef struct graph_set {
    hcg_call *c, *prev;
    hcg_call *root; /* the node's root before the set (NULL: none of hcguard's) */
    CUgraphNode n;
    CUgraph g; /* the graph c's user object is retained on, or NULL: chained */
} graph_set;

static CUresult prepare_graph_set(hcg_driver *d, CUgraphNode n, CUhostFn fn, void *user,
                                  graph_set *gs, uintptr_t ra)
{
    memset(gs, 0, sizeof *gs);
    CUresult r =
        passive() ? CUDA_SUCCESS : prepare(HCG_API_GRAPH_SET_PARAMS, fn, user, &gs->c, ra);
    if (!gs->c)
        return r;
    hcg_call *root = node_root(d, n);
    gs->prev = node_call(d, n);
    gs->root = root;
    gs->n = n;
    /* The node the root was made for, in the graph it was made in: that
     * graph holds the new call. Not once either was destroyed: a node or
     * graph made since may have the same handle, and would hold the call
     * for a graph it is not in. */
    if (root && root->node == (uintptr_t)n && root->graph &&
        !atomic_load_explicit(&root->home_gone, memory_order_acquire)) {
        gs->c->root = root;
        gs->c->graph = root->graph;
        gs->c->node = (uintptr_t)n;
        if (own_on_graph(d, gs->c, (CUgraph)root->graph) == 0) {
            gs->g = (CUgraph)root->graph;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_SUCCESS; /* chained once the driver took it */
}

/* After the driver's answer: the replaced call, or the refused new one,
 * is let go by the graph. */
static CUresult finish_graph_set(hcg_driver *d, graph_set *gs, CUresult r)
{
    if (r != CUDA_SUCCESS) { /* nothing was set: nothing counted or kept */
        if (gs->g)
            graph_drop(d, gs->g, gs->c);
        else
            call_unref(gs->c);
        return r;
    }
    hcg_count_node((hcg_fnkind)gs->c->kind);
    if (!gs->g)
        attach_to_root(gs->c, gs->root, gs->n);
    else if (gs->prev && gs->prev != gs->c && gs->prev->root && gs->prev->uobj)
        graph_drop(d, gs->g, gs->prev);
    return r;
}

CUresult hcg_w_cuGraphHostNodeSetParams(CUgraphNode n, const CUDA_HOST_NODE_PARAMS *p)
{
    HCG_AUDIT_ENTRY(cuGraphHostNodeSetParams);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphHostNodeSetParams, real);
    graph_set gs = {0};
    CUresult r = p ? prepare_graph_set(d, n, p->fn, p->userData, &gs, RA) : CUDA_SUCCESS;
    if (!p || !gs.c)
        return r != CUDA_SUCCESS ? r : real(n, p);
    CUDA_HOST_NODE_PARAMS q = {hcg_trampoline, gs.c};
    return finish_graph_set(d, &gs, real(n, &q));
}

CUresult hcg_w_cuGraphNodeSetParams(CUgraphNode n, CUgraphNodeParams *p)
{
    HCG_AUDIT_ENTRY(cuGraphNodeSetParams);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphNodeSetParams, real);
    if (!p || p->type != CU_GRAPH_NODE_TYPE_HOST)
        return real(n, p);
    graph_set gs;
    CUresult r = prepare_graph_set(d, n, p->host.fn, p->host.userData, &gs, RA);
    if (!gs.c)
        return r != CUDA_SUCCESS ? r : real(n, p);
    CUgraphNodeParams q = *p;
    q.host.fn = hcg_trampoline;
    q.host.userData = gs.c;
    return finish_graph_set(d, &gs, real(n, &q));
}

/* A call for node n of exec e, owned by e's entry once the driver took it
 * (exec_note_set); before: the launch count it was made at. */
static hcg_call *call_for_exec_set(hcg_driver *d, hcg_api api, CUgraphExec e, CUgraphNode n,
                                   CUhostFn fn, void *user, CUresult *r, uint64_t *before,
                                   uintptr_t ra)
{
    hcg_call *c = NULL;
    *r = passive() ? CUDA_SUCCESS : prepare(api, fn, user, &c, ra);
    if (c) {
        hcg_call *root = node_root(d, n); /* its runs name the graph it was made in */
        c->graph = root ? root->graph : 0;
        c->node = (uintptr_t)n;
        /* A graph that copies it (the exec launched into a capture) must
         * find the node's root through it, not take it for one. */
        c->root = root;
        *before = exec_launches(e);
    }
    return c;
}

static CUresult finish_exec_set(hcg_driver *d, CUgraphExec e, CUgraphNode n, hcg_call *c,
                                uint64_t before, CUresult r)
{
    if (r != CUDA_SUCCESS) {
        call_unref(c); /* the driver never had it */
        return r;
    }
    hcg_count_node((hcg_fnkind)c->kind);
    if (exec_note_set(e, n, c, before) != 0)
        attach_to_node(d, c, e, n); /* no memory for the entry: kept the old way */
    return r;
}

CUresult hcg_w_cuGraphExecHostNodeSetParams(CUgraphExec e, CUgraphNode n,
                                            const CUDA_HOST_NODE_PARAMS *p)
{
    HCG_AUDIT_ENTRY(cuGraphExecHostNodeSetParams);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphExecHostNodeSetParams, real);
    CUresult r = CUDA_SUCCESS;
    uint64_t before = 0;
    hcg_call *c = p ? call_for_exec_set(d, HCG_API_GRAPH_EXEC_SET_PARAMS, e, n, p->fn,
                                        p->userData, &r, &before, RA)
                    : NULL;
    if (!p || !c)
        return p && r != CUDA_SUCCESS ? r : real(e, n, p);
    CUDA_HOST_NODE_PARAMS q = {hcg_trampoline, c};
    return finish_exec_set(d, e, n, c, before, real(e, n, &q));
}

CUresult hcg_w_cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode n, CUgraphNodeParams *p)
{
    HCG_AUDIT_ENTRY(cuGraphExecNodeSetParams);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphExecNodeSetParams, real);
    if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH) /* a child graph node set anew */
        return child_set_call(d, e, n, p->graph.graph, p);
    if (!p || p->type != CU_GRAPH_NODE_TYPE_HOST)
        return real(e, n, p);
    CUresult r;
    uint64_t before = 0;
    hcg_call *c = call_for_exec_set(d, HCG_API_GRAPH_EXEC_SET_PARAMS, e, n, p->host.fn,
                                    p->host.userData, &r, &before, RA);
    if (!c)
        return r != CUDA_SUCCESS ? r : real(e, n, p);
    CUgraphNodeParams q = *p;
    q.host.fn = hcg_trampoline;
    q.host.userData = c;
    return finish_exec_set(d, e, n, c, before, real(e, n, &q));
}

/* ---- getters: what the user set, never the trampoline -------------------- */
static void unwrap(CUhostFn *fn, void **user)
{
    if (*fn == hcg_trampoline && *user) {
        const hcg_call *c = *user;
        *fn = c->fn;
        *user = c->user;
    }
}

CUresult hcg_w_cuGraphHostNodeGetParams(CUgraphNode n, CUDA_HOST_NODE_PARAMS *p)
{
    HCG_AUDIT_ENTRY(cuGraphHostNodeGetParams);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphHostNodeGetParams, real);
    CUresult r = real(n, p);
    if (r == CUDA_SUCCESS && p)
        unwrap(&p->fn, &p->userData);
    return r;
}

CUresult hcg_w_cuGraphNodeGetParams(CUgraphNode n, CUgraphNodeParams *p)
{
    HCG_AUDIT_ENTRY(cuGraphNodeGetParams);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphNodeGetParams, real);
    CUresult r = real(n, p);
    if (r == CUDA_SUCCESS && p && p->type == CU_GRAPH_NODE_TYPE_HOST)
        unwrap(&p->host.fn, &p->host.userData);
    return r;
}

/* ---- executable graphs ---------------------------------------------------
 * One entry per executable graph hcguard saw made or set: a root it holds
 * (any host node's root of the graph it was made from, for
 * cuGraphExecUpdate), the calls set on its nodes, those retired and not yet
 * freed, and how many launches it has had. A hash table that grows, so no
 * number of executable graphs degrades it. Application threads only. */
typedef struct exec_set {
    CUgraphNode node;
    hcg_call *c;
    uint64_t before; /* launches when c was made: none since, none ran it */
} exec_set;

/* A call an executable graph runs, and where in the graph it was made or
 * updated from: the position + 1 of the top-level child graph node that
 * holds it (0: a node of the graph itself). Positions, not handles: an
 * update's graph pairs its nodes with the instantiation graph's by order. */
typedef struct exec_call {
    hcg_call *c;
    uintptr_t top;
} exec_call;

/* A child graph node of the instantiation graph (whose handle a child set
 * names), and its top. */
typedef struct exec_child {
    CUgraphNode node;
    uintptr_t top;
} exec_child;

typedef struct exec_ent {
    CUgraphExec exec;
    hcg_call *root;
    uintptr_t root_top; /* where root's node is, as exec_call's top */
    uint64_t launches;
    exec_call *calls; /* the calls its nodes run now: each launch is recorded in them */
    size_t n_calls;
    exec_child *children; /* its instantiation graph's child graph nodes */
    size_t n_children;
    exec_set *sets;
    size_t n_sets, cap_sets;
    hcg_link *retired;
    struct exec_ent *next;
} exec_ent;

static struct {
    exec_ent **bucket;
    size_t n_buckets, n;
} execs;
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;

/* The fork child's hook (src/lifecycle/fork.c). exec_lock is held across
 * the driver's cuGraphLaunch (launches are counted and recorded in their
 * order), and a driver's fork handler registered after hcguard's runs
 * before it and may take the lock that call waits for: were hcguard's fork
 * handler to take exec_lock too, a fork during a graph launch would
 * deadlock (e2e_graph_fork_launch). So the lock is not taken at fork, and
 * the child, which may have inherited the table half-changed, starts an
 * empty one: it cannot run its parent's graphs anyway (a CUDA context does
 * not survive fork). The parent's table stays referenced, never read. */
static void *parent_table;

void hcg_graph_after_fork(void)
{
    pthread_mutex_init(&exec_lock, NULL);
    parent_table = execs.bucket;
    memset(&execs, 0, sizeof execs);
}

static size_t exec_hash(CUgraphExec e, size_t n_buckets)
{
    return (size_t)(((uintptr_t)e >> 4) * 0x9E3779B97F4A7C15ull >> 32) & (n_buckets - 1);
}

/* Twice the buckets once there are as many entries (without memory: the
 * chains get longer, nothing is lost). */
static void exec_grow(void)
{
    size_t nb = execs.n_buckets ? execs.n_buckets * 2 : 256;
    exec_ent **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < execs.n_buckets; i++)
        for (exec_ent *x = execs.bucket[i], *next; x; x = next) {
            next = x->next;
            size_t h = exec_hash(x->exec, nb);
            x->next = b[h];
            b[h] = x;
        }
    free(execs.bucket);
    execs.bucket = b;
    execs.n_buckets = nb;
}

/* e's entry (made if create), or NULL. Under exec_lock. */
static exec_ent *exec_get(CUgraphExec e, int create)
{
    if (execs.n_buckets) {
        for (exec_ent *x = execs.bucket[exec_hash(e, execs.n_buckets)]; x; x = x->next)
            if (x->exec == e)
                return x;
    }
    if (!create)
        return NULL;
    if (execs.n >= execs.n_buckets)
        exec_grow();
    exec_ent *x = execs.n_buckets ? calloc(1, sizeof *x) : NULL;
    if (!x)
        return NULL;
    size_t h = exec_hash(e, execs.n_buckets);
    x->exec = e;
    x->next = execs.bucket[h];
    execs.bucket[h] = x;
    execs.n++;
    return x;
}

/* c waits for the launches that may still run it (see graph_launch). */
static void retire(exec_ent *x, hcg_call *c)
{
    hcg_link *l = malloc(sizeof *l);
    if (!l) {
        if (x->root) {
            chain_onto(x->root, c);
            call_unref(c);
        }
        return; /* else kept for ever rather than freed too early */
    }
    l->c = c;
    l->next = x->retired;
    x->retired = l;
}

/* Every call e owns, retired: its nodes now run what an update gave them. */
static void retire_sets(exec_ent *x)
{
    for (size_t i = 0; i < x->n_sets; i++)
        retire(x, x->sets[i].c);
    x->n_sets = 0;
}

/* The calls a graph runs (each_call's visitor): they record its launches. */
typedef struct call_list {
    exec_call *v;
    size_t n, cap;
    uintptr_t top; /* when not 0, the top every call is given */
} call_list;

static int list_call(hcg_call *c, CUgraph in, uintptr_t top, void *arg)
{
    (void)in;
    call_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        exec_call *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return 1; /* the rest go unattributed */
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (exec_call){c, l->top ? l->top : top};
    return 0;
}

/* A root a graph holds (each_call's visitor take_root finds the first). */
typedef struct root_at {
    hcg_call *root;
    uintptr_t top;
} root_at;

/* e holds root; when calls is set, its nodes run those (taken). */
static void exec_put(CUgraphExec e, root_at root, call_list *calls)
{
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 1);
    if (x) {
        x->root = root.root;
        x->root_top = root.top;
    }
    if (x && calls) {
        free(x->calls);
        x->calls = calls->v;
        x->n_calls = calls->n;
        calls->v = NULL;
    }
    pthread_mutex_unlock(&exec_lock);
    if (calls)
        free(calls->v);
}

/* Node n of x runs c from now on, in place of what it ran. Under exec_lock. */
static void exec_swap_call(exec_ent *x, CUgraphNode n, hcg_call *c)
{
    for (size_t i = 0; i < x->n_calls; i++)
        if (x->calls[i].c->node == (uintptr_t)n) {
            x->calls[i].c = c;
            return;
        }
    exec_call *v = realloc(x->calls, (x->n_calls + 1) * sizeof *v);
    if (v) {
        x->calls = v;
        x->calls[x->n_calls++] = (exec_call){c, 0};
    }
}

/* e is destroyed: what it owns goes with the root it holds, whose user
 * object the driver releases once e's last launch is done. */
static void exec_forget(CUgraphExec e)
{
    pthread_mutex_lock(&exec_lock);
    exec_ent **at = execs.n_buckets ? &execs.bucket[exec_hash(e, execs.n_buckets)] : NULL;
    while (at && *at && (*at)->exec != e)
        at = &(*at)->next;
    exec_ent *x = at ? *at : NULL;
    if (x) {
        *at = x->next;
        execs.n--;
    }
    pthread_mutex_unlock(&exec_lock);
    if (!x)
        return;
    retire_sets(x);
    for (hcg_link *l = x->retired, *next; l; l = next) {
        next = l->next;
        if (x->root) {
            chain_onto(x->root, l->c);
            call_unref(l->c);
        } /* else no root to wait on: kept for ever rather than freed early */
        free(l);
    }
    free(x->sets);
    free(x->calls);
    free(x->children);
    free(x);
}

static hcg_call *exec_root(CUgraphExec e)
{
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 0);
    hcg_call *root = x ? x->root : NULL;
    pthread_mutex_unlock(&exec_lock);
    return root;
}

static uint64_t exec_launches(CUgraphExec e)
{
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 0);
    uint64_t n = x ? x->launches : 0;
    pthread_mutex_unlock(&exec_lock);
    return n;
}

/* c is what node n of e runs now: the call it replaces is freed if no
 * launch came since it was set, else retired. -1 without memory. */
static int exec_note_set(CUgraphExec e, CUgraphNode n, hcg_call *c, uint64_t before)
{
    hcg_call *freed = NULL;
    int rc = -1;
    atomic_store(&host_nodes_seen, 1); /* launches of e are counted from now */
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 1);
    size_t i = 0;
    while (x && i < x->n_sets && x->sets[i].node != n)
        i++;
    if (x && i == x->n_sets && x->n_sets == x->cap_sets) {
        size_t cap = x->cap_sets ? x->cap_sets * 2 : 4;
        exec_set *grown = realloc(x->sets, cap * sizeof *grown);
        if (grown) {
            x->sets = grown;
            x->cap_sets = cap;
        }
    }
    if (x && i < x->cap_sets) {
        if (i < x->n_sets) {
            if (x->sets[i].before == x->launches)
                freed = x->sets[i].c;
            else
                retire(x, x->sets[i].c);
        } else {
            x->n_sets++;
        }
        x->sets[i] = (exec_set){n, c, before};
        exec_swap_call(x, n, c);
        rc = 0;
    }
    pthread_mutex_unlock(&exec_lock);
    if (freed)
        call_unref(freed);
    return rc;
}

/* Behind a launch (driver thread): the retired calls it carries. */
static void CUDA_CB reap(void *p)
{
    for (hcg_link *l = p, *next; l; l = next) {
        next = l->next;
        call_unref(l->c);
        free(l);
    }
}


/* A launch of x on s, recorded in each call it runs before the driver can
 * run any (under exec_lock). */
static void note_replays(exec_ent *x, CUstream s)
{
    uint64_t now = hcg_ticks();
    uint32_t tid = hcg_gettid();
    for (size_t i = 0; i < x->n_calls; i++)
        hcg_replay_note(x->calls[i].c, (uintptr_t)s, now, tid);
}

/* Graph g runs c too (an executable graph launched into g's capture
 * copied the node running c): g holds a reference of its own on c, so that
 * the exec freeing it (a later set, its destruction) does not free it
 * under g, its clones and executable graphs. Without a user object, c is
 * kept for ever rather than freed too early. */
static void hold_on_graph(hcg_driver *d, CUgraph g, hcg_call *c)
{
    hcg_pfn_cuUserObjectCreate create = atomic_load(&d->cuUserObjectCreate);
    hcg_pfn_cuGraphRetainUserObject retain = atomic_load(&d->cuGraphRetainUserObject);
    hcg_pfn_cuUserObjectRelease release = atomic_load(&d->cuUserObjectRelease);
    CUuserObject o = NULL;
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    if (!g || !create || !retain || !release ||
        create(&o, c, set_call_gone, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) != CUDA_SUCCESS)
        return;
    if (retain(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE) != CUDA_SUCCESS) {
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); /* kept */
        release(o, 1);
    }
}

/* Launches of e are counted and made under exec_lock, so that their order
 * is the count's; the calls retired before this launch ride on a host
 * function behind it, which runs once every launch of e so far is done. */
static CUresult graph_launch_locked(hcg_driver *d, hcg_pfn_cuGraphLaunch real, CUgraphExec e,
                                    CUstream s, hcg_pfn_cuLaunchHostFunc after,
                                    hcg_pfn_cuStreamIsCapturing capturing,
                                    hcg_pfn_cuStreamGetCaptureInfo_v2 info)
{
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 0);
    /* A launch into a capture runs nothing now. Driver 580 refuses it (and
     * invalidates the capture); a driver that captures it as a child graph
     * node copies e's nodes, so the capture graph holds the calls e owns,
     * and the launch is neither counted (e may free what it replaces) nor
     * recorded for replays (no run of e's belongs to it). */
    CUstreamCaptureStatus cst = CU_STREAM_CAPTURE_STATUS_NONE;
    if (x && (atomic_load_explicit(&hcg_g_launch_rare, memory_order_relaxed) & HCG_LAUNCH_CAPTURE) &&
        capturing && capturing(s, &cst) == CUDA_SUCCESS &&
        cst == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        CUresult r = real(e, s);
        CUgraph g = NULL;
        if (r == CUDA_SUCCESS && x->n_sets &&
            (!info || info(s, &cst, NULL, &g, NULL, NULL) != CUDA_SUCCESS))
            g = NULL; /* then held for ever */
        for (size_t i = 0; r == CUDA_SUCCESS && i < x->n_sets; i++) {
            hold_on_graph(d, g, x->sets[i].c);
            if (x->sets[i].c->root) /* which the copied node names */
                hold_on_graph(d, g, x->sets[i].c->root);
        }
        pthread_mutex_unlock(&exec_lock);
        return r;
    }
    if (x) {
        x->launches++;
        note_replays(x, s);
    }
    CUresult r = real(e, s);
    if (r != CUDA_SUCCESS && x)
        for (size_t i = 0; i < x->n_calls; i++)
            hcg_replay_unnote(x->calls[i].c);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (r == CUDA_SUCCESS && x && x->retired && after && capturing &&
        capturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE) {
        hcg_link *carried = x->retired;
        x->retired = NULL;
        if (after(s, reap, carried) != CUDA_SUCCESS)
            x->retired = carried; /* the next launch tries again */
    }
    pthread_mutex_unlock(&exec_lock);
    return r;
}

/* While a capture is open, the launch holds capture_lock (stream.c)
 * across its questions "does s capture?" and what they decide: the
 * launch's holds on the capture graph, or its count, replays and the host
 * function that frees retired calls (which a capture begun in between
 * would make a node, freeing them on every replay). Before exec_lock.
 * While none is, it is marked as a host function's launch is (run.h), so
 * that a begin waits for it: with its thread's pool, or a marker where the
 * thread launched no host function (a graph launch takes no pool); with
 * neither (more threads than markers), it holds the lock instead. */
static CUresult graph_launch(hcg_driver *d, hcg_pfn_cuGraphLaunch real, CUgraphExec e,
                             CUstream s, hcg_pfn_cuLaunchHostFunc after,
                             hcg_pfn_cuStreamIsCapturing capturing,
                             hcg_pfn_cuStreamGetCaptureInfo_v2 info)
{
    if (!atomic_load(&host_nodes_seen) || passive())
        return real(e, s);
    _Atomic uint32_t *m = hcg_self.in_host_fn ? NULL : hcg_mark_mine();
    if (m) {
        hcg_mark(m);
        if (!(atomic_load_explicit(&hcg_g_launch_rare, memory_order_acquire) & HCG_LAUNCH_CAPTURE)) {
            CUresult r = graph_launch_locked(d, real, e, s, after, capturing, info);
            hcg_unmark(m);
            return r;
        }
        hcg_unmark(m);
    }
    hcg_capture_token t = hcg_capture_hold();
    CUresult r = graph_launch_locked(d, real, e, s, after, capturing, info);
    hcg_capture_release(t);
    return r;
}

/* Inside a host function a launch is a finding, as it was through the thunk
 * every unwrapped entry point gets. */
CUresult hcg_w_cuGraphLaunch(CUgraphExec e, CUstream s)
{
    HCG_AUDIT_ENTRY(cuGraphLaunch);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphLaunch, real);
    return graph_launch(d, real, e, s, atomic_load(&d->cuLaunchHostFunc),
                        atomic_load(&d->cuStreamIsCapturing),
                        atomic_load(&d->cuStreamGetCaptureInfo_v2));
}

CUresult hcg_w_cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
    HCG_AUDIT_ENTRY(cuGraphLaunch_ptsz);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphLaunch_ptsz, real);
    return graph_launch(d, real, e, s, atomic_load(&d->cuLaunchHostFunc_ptsz),
                        atomic_load(&d->cuStreamIsCapturing_ptsz),
                        atomic_load(&d->cuStreamGetCaptureInfo_v2_ptsz));
}

/* Visit hcguard's calls among g's host nodes (child graphs too), each with
 * the graph its node is in and its top (see exec_call); stop when visit
 * returns nonzero. */
typedef int (*call_visit)(hcg_call *c, CUgraph in, uintptr_t top, void *arg);
static int each_call_at(hcg_driver *d, CUgraph g, int depth, uintptr_t top, call_visit visit,
                        void *arg)
{
    hcg_pfn_cuGraphGetNodes get_nodes = atomic_load(&d->cuGraphGetNodes);
    hcg_pfn_cuGraphNodeGetType node_type = atomic_load(&d->cuGraphNodeGetType);
    hcg_pfn_cuGraphHostNodeGetParams get = atomic_load(&d->cuGraphHostNodeGetParams);
    hcg_pfn_cuGraphChildGraphNodeGetGraph child = atomic_load(&d->cuGraphChildGraphNodeGetGraph);
    size_t n = 0;
    if (depth > 8 || !get_nodes || !node_type || !get || get_nodes(g, NULL, &n) != CUDA_SUCCESS ||
        n == 0)
        return 0;
    CUgraphNode *all = malloc(n * sizeof *all);
    int stop = 0;
    if (!all || get_nodes(g, all, &n) != CUDA_SUCCESS)
        n = 0;
    for (size_t i = 0; i < n && !stop; i++) {
        CUgraphNodeType t;
        CUDA_HOST_NODE_PARAMS p;
        CUgraph sub;
        if (node_type(all[i], &t) != CUDA_SUCCESS)
            continue;
        if (t == CU_GRAPH_NODE_TYPE_HOST && get(all[i], &p) == CUDA_SUCCESS &&
            p.fn == hcg_trampoline && p.userData)
            stop = visit(p.userData, g, top, arg);
        else if (t == CU_GRAPH_NODE_TYPE_GRAPH && child && child(all[i], &sub) == CUDA_SUCCESS)
            stop = each_call_at(d, sub, depth + 1, depth ? top : (uintptr_t)i + 1, visit, arg);
    }
    free(all);
    return stop;
}

static int each_call(hcg_driver *d, CUgraph g, call_visit visit, void *arg)
{
    return each_call_at(d, g, 0, 0, visit, arg);
}

static int take_root(hcg_call *c, CUgraph in, uintptr_t top, void *arg)
{
    (void)in;
    *(root_at *)arg = (root_at){c->root ? c->root : c, top};
    return 1;
}

/* g's top-level child graph nodes, with their tops (see exec_call): how
 * many, in *out (malloc'd; none without memory). */
static size_t children_of(hcg_driver *d, CUgraph g, exec_child **out)
{
    hcg_pfn_cuGraphGetNodes get_nodes = atomic_load(&d->cuGraphGetNodes);
    hcg_pfn_cuGraphNodeGetType node_type = atomic_load(&d->cuGraphNodeGetType);
    size_t n = 0, k = 0;
    *out = NULL;
    if (!get_nodes || !node_type || get_nodes(g, NULL, &n) != CUDA_SUCCESS || n == 0)
        return 0;
    CUgraphNode *all = malloc(n * sizeof *all);
    exec_child *v = malloc(n * sizeof *v);
    if (all && v && get_nodes(g, all, &n) == CUDA_SUCCESS)
        for (size_t i = 0; i < n; i++) {
            CUgraphNodeType t;
            if (node_type(all[i], &t) == CUDA_SUCCESS && t == CU_GRAPH_NODE_TYPE_GRAPH)
                v[k++] = (exec_child){all[i], (uintptr_t)i + 1};
        }
    free(all);
    if (k)
        *out = v;
    else
        free(v);
    return k;
}

static void note_exec(hcg_driver *d, CUresult r, CUgraphExec *pe, CUgraph g)
{
    if (r != CUDA_SUCCESS || !pe || !atomic_load(&host_nodes_seen) || passive())
        return;
    root_at root = {0};
    call_list calls = {0};
    each_call(d, g, take_root, &root);
    each_call(d, g, list_call, &calls);
    exec_child *children;
    size_t n = children_of(d, g, &children);
    exec_put(*pe, root, &calls);
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(*pe, 0);
    if (x) {
        free(x->children);
        x->children = children;
        x->n_children = n;
        children = NULL;
    }
    pthread_mutex_unlock(&exec_lock);
    free(children);
}

/* Every instantiate variant: the real one, then the exec holds g's calls. */
#define INSTANTIATE_WRAPPER(name, params, args)                                \
    CUresult hcg_w_##name params                                               \
    {                                                                          \
        HCG_AUDIT_ENTRY(name);                                                 \
        HCG_DRV_OR_FAIL(d);                                                    \
        REAL_OR_FAIL(d, name, real);                                           \
        CUresult r = real args;                                                \
        note_exec(d, r, pe, g);                                                \
        return r;                                                              \
    }

INSTANTIATE_WRAPPER(cuGraphInstantiate,
                    (CUgraphExec *pe, CUgraph g, CUgraphNode *err, char *log, size_t len),
                    (pe, g, err, log, len))
INSTANTIATE_WRAPPER(cuGraphInstantiate_v2,
                    (CUgraphExec *pe, CUgraph g, CUgraphNode *err, char *log, size_t len),
                    (pe, g, err, log, len))
INSTANTIATE_WRAPPER(cuGraphInstantiateWithFlags,
                    (CUgraphExec *pe, CUgraph g, unsigned long long flags), (pe, g, flags))
INSTANTIATE_WRAPPER(cuGraphInstantiateWithParams,
                    (CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *ip), (pe, g, ip))
INSTANTIATE_WRAPPER(cuGraphInstantiateWithParams_ptsz,
                    (CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *ip), (pe, g, ip))

/* Whether root's chain holds c already (links are only added while the
 * root lives, and freed with it). */
static int chained(hcg_call *root, const hcg_call *c)
{
    for (const hcg_link *l = atomic_load_explicit(&root->chain, memory_order_acquire); l;
         l = l->next)
        if (l->c == c)
            return 1;
    return 0;
}

/* The calls on a root's chain as a set, to ask "chained already?" once for
 * each call of a graph: a scan of the chain for each was quadratic in a
 * graph's host nodes (2.8 ms an update at 2000 of them, on the test
 * driver's 12 us). Open addressing, at most half full; without memory,
 * each question scans the chain. Calls chained meanwhile by another thread
 * are not in it: one may then be chained twice, as with the scan. */
typedef struct chain_set {
    hcg_call *root;
    const hcg_call **slot; /* NULL: scan instead */
    size_t mask, n;
} chain_set;

static size_t set_home(const chain_set *s, const hcg_call *c)
{
    return (size_t)((((uintptr_t)c >> 6) * 0x9E3779B97F4A7C15ull) >> 32) & s->mask;
}

/* c's slot, or the empty one where it would go. */
static size_t set_find(const chain_set *s, const hcg_call *c)
{
    size_t i = set_home(s, c);
    while (s->slot[i] && s->slot[i] != c)
        i = (i + 1) & s->mask;
    return i;
}

static void set_put(chain_set *s, const hcg_call *c)
{
    size_t i = set_find(s, c);
    if (!s->slot[i]) {
        s->slot[i] = c;
        s->n++;
    }
}

/* Room for want members, at most half full: 0, or -1 (then it scans). */
static int set_fit(chain_set *s, size_t want)
{
    if (!s->slot || 2 * want <= s->mask + 1)
        return s->slot ? 0 : -1;
    size_t cap = 2 * (s->mask + 1);
    while (2 * want > cap)
        cap *= 2;
    const hcg_call **old = s->slot;
    size_t old_cap = s->mask + 1;
    s->slot = calloc(cap, sizeof *s->slot);
    s->mask = cap - 1;
    s->n = 0;
    for (size_t i = 0; s->slot && i < old_cap; i++)
        if (old[i])
            set_put(s, old[i]);
    free(old);
    return s->slot ? 0 : -1;
}

static void set_open(chain_set *s, hcg_call *root)
{
    s->root = root;
    s->n = 0;
    s->mask = 63;
    s->slot = calloc(s->mask + 1, sizeof *s->slot);
    for (const hcg_link *l = atomic_load_explicit(&root->chain, memory_order_acquire);
         l && set_fit(s, s->n + 1) == 0; l = l->next)
        set_put(s, l->c);
}

static void set_close(chain_set *s)
{
    free(s->slot);
}

/* c chained onto the set's root unless it is there already. */
static void chain_once(chain_set *s, hcg_call *c)
{
    int there = set_fit(s, s->n + 1) == 0 ? s->slot[set_find(s, c)] == c : chained(s->root, c);
    if (there)
        return;
    chain_onto(s->root, c);
    if (s->slot)
        set_put(s, c);
}

/* Once per call and root: an executable graph updated back and forth
 * between the same graphs must not grow the chain with each update. Not a
 * call set on a graph's node with a user object of its own there: the
 * update gives the exec a reference to each of the graph's user objects
 * (and the exec holds those it lets go until its launches in flight are
 * done: the CUDA programming guide, graph user objects), so the exec keeps
 * it as long as it can run it; chained, it was kept until the root died,
 * one more for each set and update. */
static int chain_to_exec(hcg_call *c, CUgraph in, uintptr_t top, void *arg)
{
    (void)in;
    (void)top;
    chain_set *s = arg;
    if (c != s->root && !(c->root && c->uobj))
        chain_once(s, c);
    return 0;
}

/* Before the driver's update, while e still holds the root it was made
 * with (the update lets go of it, and its destructor may run at once): g's
 * calls are chained onto it, in case the driver keeps it and not g's user
 * objects. Returns that root. */
static hcg_call *before_update(hcg_driver *d, CUgraphExec e, CUgraph g)
{
    if (passive() || !atomic_load(&host_nodes_seen))
        return NULL;
    hcg_call *root = exec_root(e);
    if (root) {
        chain_set s;
        set_open(&s, root);
        each_call(d, g, chain_to_exec, &s);
        set_close(&s);
    }
    return root;
}

/* The executable graph now runs g's calls: keep them while it lives. The
 * driver documents that an update gives the exec g's user objects in place
 * of its own, so a root of g is what the exec holds from now on (none: the
 * root it held may be gone, and is not used again). */
static void adopt_update(hcg_driver *d, CUgraphExec e, CUgraph g, hcg_call *root)
{
    root_at now = {0};
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 0);
    if (x) {
        retire_sets(x);
        x->n_calls = 0; /* they may be freed: the exec runs g's now */
    }
    pthread_mutex_unlock(&exec_lock);
    each_call(d, g, take_root, &now);
    call_list calls = {0};
    each_call(d, g, list_call, &calls);
    if (now.root || x)
        exec_put(e, now, &calls);
    else
        free(calls.v);
    if (!now.root && !root && atomic_load(&host_nodes_seen))
        hcg_debug("executable graph %p updated from %p: its host calls are kept for ever",
                  (void *)e, (void *)g);
}

CUresult hcg_w_cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err,
                                 CUgraphExecUpdateResult *res)
{
    HCG_AUDIT_ENTRY(cuGraphExecUpdate);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphExecUpdate, real);
    hcg_call *root = before_update(d, e, g);
    CUresult r = real(e, g, err, res);
    if (r == CUDA_SUCCESS && !passive())
        adopt_update(d, e, g, root);
    return r;
}

CUresult hcg_w_cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *res)
{
    HCG_AUDIT_ENTRY(cuGraphExecUpdate_v2);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphExecUpdate_v2, real);
    hcg_call *root = before_update(d, e, g);
    CUresult r = real(e, g, res);
    if (r == CUDA_SUCCESS && !passive())
        adopt_update(d, e, g, root);
    return r;
}

/* ---- an executable graph's child graph node set to another graph ------- */
/* What root holds, and root itself, held by to from now on (to NULL: kept
 * for ever rather than freed too early). While root's destructor cannot
 * run: its chain is freed only there. */
static void hand_over(hcg_call *root, hcg_call *to)
{
    hcg_link *l = atomic_load_explicit(&root->chain, memory_order_acquire);
    if (!to) {
        for (; l; l = l->next)
            atomic_fetch_add_explicit(&l->c->refs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&root->refs, 1, memory_order_relaxed);
        return;
    }
    chain_set s;
    set_open(&s, to);
    for (; l; l = l->next)
        if (l->c != to)
            chain_once(&s, l->c);
    chain_once(&s, root);
    set_close(&s);
}

/* The exec_call top of child graph node n of e's instantiation graph
 * (TOP_UNKNOWN: not one hcguard noted). Under exec_lock. */
#define TOP_UNKNOWN UINTPTR_MAX
static uintptr_t top_of(const exec_ent *x, CUgraphNode n)
{
    for (size_t i = 0; x && i < x->n_children; i++)
        if (x->children[i].node == n)
            return x->children[i].top;
    return TOP_UNKNOWN;
}

/* Whether a call whose node is at top `at` may be in child top (unknown
 * tops may be anywhere but in the graph's own nodes). */
static int in_child(uintptr_t at, uintptr_t top)
{
    return at == top || (at != 0 && (at == TOP_UNKNOWN || top == TOP_UNKNOWN));
}

/* A set of child graph node n of e to k's nodes, across the driver's call. */
typedef struct child_set {
    CUgraphExec e;
    CUgraphNode n;
    CUgraph k;
    uintptr_t top; /* n's */
    hcg_call *old; /* e's root, if it is one of n's: it passes to next */
    root_at next;  /* the root e holds after the set ({0}: e's stays) */
    int pinned;    /* old's user object retained across the driver's call */
} child_set;

/* Before the driver's set, while e still holds what n ran: k's calls are
 * chained onto e's root (as for an update), and if that root is one of
 * n's (which e lets go of), a root e keeps is found to take over what it
 * holds (k's first, or another of e's own), and the root is held until
 * then (its user object retained: a set the driver refuses changes
 * nothing). */
static child_set child_set_before(hcg_driver *d, CUgraphExec e, CUgraphNode n, CUgraph k)
{
    child_set cs = {e, n, k, TOP_UNKNOWN, NULL, {0}, 0};
    if (passive() || !atomic_load(&host_nodes_seen))
        return cs;
    hcg_call *root = before_update(d, e, k);
    each_call(d, k, take_root, &cs.next);
    pthread_mutex_lock(&exec_lock);
    exec_ent *x = exec_get(e, 0);
    cs.top = top_of(x, n);
    cs.next.top = cs.top;
    if (root && x && x->root == root && in_child(x->root_top, cs.top))
        cs.old = root;
    for (size_t i = 0; cs.old && !cs.next.root && i < x->n_calls; i++) {
        const hcg_call *c = x->calls[i].c;
        hcg_call *r = c->root ? c->root : (hcg_call *)c;
        if (!in_child(x->calls[i].top, cs.top) && r != root)
            cs.next = (root_at){r, x->calls[i].top};
    }
    pthread_mutex_unlock(&exec_lock);
    if (!cs.old) {
        if (root || !cs.next.root)
            cs.next = (root_at){0};
        return cs;
    }
    hcg_pfn_cuUserObjectRetain keep = atomic_load(&d->cuUserObjectRetain);
    cs.pinned = cs.old->uobj && keep && keep(cs.old->uobj, 1) == CUDA_SUCCESS;
    if (!cs.pinned)
        hand_over(cs.old, cs.next.root); /* now, while e still holds it */
    return cs;
}

/* e's calls in place of the one at cs->top (all of them kept if it is
 * unknown), and k's: the launches of e are recorded in them. */
static void adopt_child(exec_ent *x, const child_set *cs, call_list *calls)
{
    size_t kept = 0;
    for (size_t i = 0; i < x->n_calls; i++)
        if (cs->top == TOP_UNKNOWN || x->calls[i].top != cs->top)
            x->calls[kept++] = x->calls[i];
    x->n_calls = kept;
    exec_call *v = calls->n ? realloc(x->calls, (kept + calls->n) * sizeof *v) : NULL;
    if (v) { /* without memory: k's runs go unattributed */
        memcpy(v + kept, calls->v, calls->n * sizeof *v);
        x->calls = v;
        x->n_calls = kept + calls->n;
    }
    if (cs->next.root) {
        x->root = cs->next.root;
        x->root_top = cs->next.top;
    }
}

/* After the driver's answer r. */
static void child_set_after(hcg_driver *d, const child_set *cs, CUresult r)
{
    if (r == CUDA_SUCCESS && !passive() && atomic_load(&host_nodes_seen)) {
        if (cs->old && cs->pinned)
            hand_over(cs->old, cs->next.root);
        if (cs->old && !cs->next.root)
            hcg_debug("executable graph %p: a child graph set let go of its host calls' "
                      "holder: they are kept for ever", (void *)cs->e);
        call_list calls = {.top = cs->top};
        each_call(d, cs->k, list_call, &calls);
        pthread_mutex_lock(&exec_lock);
        exec_ent *x = exec_get(cs->e, cs->next.root != NULL);
        if (x)
            adopt_child(x, cs, &calls);
        pthread_mutex_unlock(&exec_lock);
        free(calls.v);
    }
    hcg_pfn_cuUserObjectRelease release = atomic_load(&d->cuUserObjectRelease);
    if (cs->pinned && release)
        release(cs->old->uobj, 1);
}

/* The set through either entry point: cuGraphExecNodeSetParams with p,
 * else cuGraphExecChildGraphNodeSetParams. */
static CUresult child_set_call(hcg_driver *d, CUgraphExec e, CUgraphNode n, CUgraph k,
                               CUgraphNodeParams *p)
{
    hcg_pfn_cuGraphExecNodeSetParams by_params = atomic_load(&d->cuGraphExecNodeSetParams);
    hcg_pfn_cuGraphExecChildGraphNodeSetParams by_graph =
        atomic_load(&d->cuGraphExecChildGraphNodeSetParams);
    if (p ? !by_params : !by_graph)
        return CUDA_ERROR_NOT_FOUND;
    child_set cs = child_set_before(d, e, n, k);
    CUresult r = p ? by_params(e, n, p) : by_graph(e, n, k);
    child_set_after(d, &cs, r);
    return r;
}

CUresult hcg_w_cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode n, CUgraph k)
{
    HCG_AUDIT_ENTRY(cuGraphExecChildGraphNodeSetParams);
    HCG_DRV_OR_FAIL(d);
    return child_set_call(d, e, n, k, NULL);
}

/* g is destroyed (its child graphs with it): the roots made in it no
 * longer name their graph and node, whose handles may be reused. */
static int home_gone(hcg_call *c, CUgraph in, uintptr_t top, void *arg)
{
    (void)arg;
    (void)top;
    hcg_call *r = c->root ? c->root : c;
    if (r->graph == (uintptr_t)in)
        atomic_store_explicit(&r->home_gone, 1, memory_order_release);
    return 0;
}

CUresult hcg_w_cuGraphDestroy(CUgraph g)
{
    HCG_AUDIT_ENTRY(cuGraphDestroy);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphDestroy, real);
    if (atomic_load(&host_nodes_seen) && !passive())
        each_call(d, g, home_gone, NULL);
    return real(g);
}

/* The same for one node (clones of its graph may still run its root). */
CUresult hcg_w_cuGraphDestroyNode(CUgraphNode n)
{
    HCG_AUDIT_ENTRY(cuGraphDestroyNode);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphDestroyNode, real);
    hcg_call *c = atomic_load(&host_nodes_seen) && !passive() ? node_call(d, n) : NULL;
    hcg_call *r = c ? (c->root ? c->root : c) : NULL;
    if (r && r->node == (uintptr_t)n)
        atomic_store_explicit(&r->home_gone, 1, memory_order_release);
    return real(n);
}

CUresult hcg_w_cuGraphExecDestroy(CUgraphExec e)
{
    HCG_AUDIT_ENTRY(cuGraphExecDestroy);
    HCG_DRV_OR_FAIL(d);
    REAL_OR_FAIL(d, cuGraphExecDestroy, real);
    /* Before the driver lets go of e's user objects: the root they keep
     * alive is what e's calls are handed to. */
    if (atomic_load(&host_nodes_seen))
        exec_forget(e);
    return real(e);
}

/* ---- stream capture --------------------------------------------------- */
int hcg_graph_adopt_capture(hcg_call *c, CUstream s, int ptsz)
{
    hcg_driver *d = hcg_driver_get();
    hcg_pfn_cuStreamGetCaptureInfo_v2 info =
        ptsz ? atomic_load(&d->cuStreamGetCaptureInfo_v2_ptsz) : atomic_load(&d->cuStreamGetCaptureInfo_v2);
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    if (!info || info(s, &st, NULL, &g, NULL, NULL) != CUDA_SUCCESS || !g) {
        c->oneshot = 0;
        return -1;
    }
    c->oneshot = 0;
    atomic_fetch_add_explicit(&calls_live, 1, memory_order_relaxed);
    atomic_store_explicit(&c->chain, NULL, memory_order_relaxed);
    c->graph = c->node = 0;
    atomic_store_explicit(&c->home_gone, 0, memory_order_relaxed);
    c->replays = calloc(1, sizeof *c->replays);
    /* A reference of its own while it attaches: if that fails (the user
     * object's destructor may already have run), c is kept for ever
     * rather than freed under the launch that follows. */
    atomic_store_explicit(&c->refs, 2, memory_order_relaxed);
    if (attach_root(d, c, g) == 0)
        call_unref(c); /* the graph's reference alone */
    return 0;
}

/* The node a capture just added: the stream's only dependency now. */
void hcg_graph_note_captured(hcg_call *c, CUstream s, int ptsz)
{
    hcg_count_captured();
    hcg_driver *d = hcg_driver_get();
    hcg_pfn_cuStreamGetCaptureInfo_v2 info =
        ptsz ? atomic_load(&d->cuStreamGetCaptureInfo_v2_ptsz) : atomic_load(&d->cuStreamGetCaptureInfo_v2);
    CUstreamCaptureStatus st;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    if (info && info(s, &st, NULL, NULL, &deps, &n) == CUDA_SUCCESS && n == 1 && deps)
        c->node = (uintptr_t)deps[0];
}

/* Exported under the driver's names: the entries of driver/entries.def
 * wrapped here. */
#define ALIAS_graph(name) HCG_EXPORT_ALIAS(name)
#define ALIAS_gpa(name)
#define ALIAS_stream(name)
#define ALIAS_called(name)
#define HCG_ENTRY(where, name, params) ALIAS_##where(name)
#include "driver/entries.def"
#undef HCG_ENTRY
