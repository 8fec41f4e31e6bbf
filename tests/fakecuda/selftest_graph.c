/* Self-test: graphs (build, query, exec, clone, update, DOT) and node
 * parameters. */
#include "selftest.h"

/* ---- graphs ----------------------------------------------------------- */
CUgraphExec instantiate(CUgraph gr)
{
    CUgraphExec e = NULL;
    CHECK_OK(cuGraphInstantiateWithFlags(&e, gr, 0));
    return e;
}

void launch_and_wait(CUgraphExec e, CUstream s)
{
    runs_reset();
    CHECK_OK(cuGraphLaunch(e, s));
    CHECK_OK(cuStreamSynchronize(s));
}

static int file_contains(const char *path, const char *needle)
{
    char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static void test_graph_build(CUgraph *pg, CUgraphNode nd[6])
{
    CUgraph gr, child;
    CUDA_HOST_NODE_PARAMS p1 = {record, (void *)1}, p3 = {record, (void *)3},
                          p4 = {record, (void *)4}, nofn = {NULL, NULL};
    CUgraphNode bad[2];
    CUgraphNodeParams np;

    CHECK_CU(cuGraphCreate(&gr, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphAddHostNode(&nd[0], gr, NULL, 0, &p1));           /* A */
    CHECK_OK(cuGraphAddEmptyNode(&nd[1], gr, &nd[0], 1));             /* B <- A */
    CHECK_OK(cuGraphAddHostNode(&nd[2], gr, &nd[1], 1, &p3));         /* C <- B */
    CHECK_OK(cuGraphCreate(&child, 0));
    CHECK_OK(cuGraphAddHostNode(&nd[5], child, NULL, 0, &p4));        /* D, in child */
    CHECK_OK(cuGraphAddChildGraphNode(&nd[3], gr, &nd[2], 1, child)); /* E <- C */

    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = record;
    np.host.userData = (void *)5;
    CHECK_OK(cuGraphAddNode(&nd[4], gr, &nd[3], 1, &np));              /* F <- E */

    /* Bad input. */
    CHECK_CU(cuGraphAddHostNode(&bad[0], gr, NULL, 0, &nofn), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddHostNode(&bad[0], gr, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddHostNode(&bad[0], gr, &nd[5], 1, &p1), CUDA_ERROR_INVALID_VALUE);
    bad[0] = bad[1] = nd[0];
    CHECK_CU(cuGraphAddEmptyNode(&bad[0], gr, bad, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphAddEmptyNode(&bad[0], gr, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    CHECK_CU(cuGraphAddNode_v2(&bad[0], gr, NULL, NULL, 0, &np), CUDA_ERROR_NOT_SUPPORTED);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.reserved0[1] = 1;
    CHECK_CU(cuGraphAddNode_v2(&bad[0], gr, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np.reserved0[1] = 0;
    CUgraphEdgeData edge = {.from_port = 1};
    CHECK_CU(cuGraphAddNode_v2(&bad[0], gr, &nd[0], &edge, 1, &np),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphDestroy(child)); /* the node holds a clone */
    CHECK_CU(cuGraphAddHostNode(&bad[0], gr, &nd[5], 1, &p1), CUDA_ERROR_INVALID_VALUE);
    *pg = gr;
}

static void test_graph_queries(CUgraph gr, CUgraphNode nd[6])
{
    size_t n = 0;
    CUgraphNode list[8], dep[2];
    CUgraphNodeType t;
    CUDA_HOST_NODE_PARAMS hp;
    CUgraphNodeParams np;
    CUgraph owned;

    CHECK_OK(cuGraphGetNodes(gr, NULL, &n));
    CHECK(n == 5);
    n = 8;
    CHECK_OK(cuGraphGetNodes(gr, list, &n));
    CHECK(n == 5 && list[0] == nd[0] && list[4] == nd[4] && list[5] == NULL);
    n = 8;
    CHECK_OK(cuGraphGetRootNodes(gr, list, &n));
    CHECK(n == 1 && list[0] == nd[0]);
    n = 2;
    CHECK_OK(cuGraphNodeGetDependencies(nd[2], dep, &n));
    CHECK(n == 1 && dep[0] == nd[1]);
    CHECK_OK(cuGraphNodeGetType(nd[1], &t));
    CHECK(t == CU_GRAPH_NODE_TYPE_EMPTY);
    CHECK_OK(cuGraphNodeGetType(nd[3], &t));
    CHECK(t == CU_GRAPH_NODE_TYPE_GRAPH);
    CHECK_OK(cuGraphHostNodeGetParams(nd[2], &hp));
    CHECK(hp.fn == record && hp.userData == (void *)3);
    CHECK_CU(cuGraphHostNodeGetParams(nd[1], &hp), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphNodeGetParams(nd[4], &np));
    CHECK(np.type == CU_GRAPH_NODE_TYPE_HOST && np.host.fn == record &&
          np.host.userData == (void *)5);
    CHECK_OK(cuGraphChildGraphNodeGetGraph(nd[3], &owned));
    CHECK_OK(cuGraphNodeGetParams(nd[3], &np));
    CHECK(np.type == CU_GRAPH_NODE_TYPE_GRAPH && np.graph.graph == owned);
    CHECK_CU(cuGraphDestroy(owned), CUDA_ERROR_INVALID_VALUE);
    n = 1;
    CHECK_OK(cuGraphGetNodes(owned, list, &n));
    CHECK(n == 1);
}

static void test_graph_exec(CUgraph gr, CUgraphNode nd[6], CUstream s)
{
    CUDA_HOST_NODE_PARAMS p11 = {record, (void *)11};
    CUgraphNodeParams np;
    CUgraphExec e = instantiate(gr);

    launch_and_wait(e, s);
    CHECK(RUNS_ARE(1, 3, 4, 5)); /* dependency order, child graph inside */

    /* The exec keeps its own copy: changing the graph does not change it. */
    CHECK_OK(cuGraphHostNodeSetParams(nd[0], &p11));
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(1, 3, 4, 5));
    CHECK_OK(cuGraphExecHostNodeSetParams(e, nd[0], &p11));
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(11, 3, 4, 5));
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = record;
    np.host.userData = (void *)15;
    CHECK_OK(cuGraphExecNodeSetParams(e, nd[4], &np));
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(11, 3, 4, 15));
    CHECK_CU(cuGraphExecHostNodeSetParams(e, nd[1], &p11), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecNodeSetParams(e, nd[1], &np), CUDA_ERROR_INVALID_VALUE);

    /* Launches queue like any other work, in stream order. */
    runs_reset();
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)100));
    CHECK_OK(cuGraphLaunch(e, s));
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)101));
    CHECK_OK(cuStreamSynchronize(s));
    CHECK(RUNS_ARE(100, 11, 3, 4, 15, 101));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_CU(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
}

static void test_graph_clone_update(CUgraph gr, CUgraphNode nd[6], CUstream s)
{
    CUgraph cl, other;
    CUgraphNode a2, d2, extra;
    CUDA_HOST_NODE_PARAMS hp, p21 = {record, (void *)21}, p22 = {record, (void *)22};
    CUgraphExecUpdateResultInfo info;
    CUgraphExecUpdateResult res;
    CUgraphNode err;
    CUgraphExec e = instantiate(gr);

    CHECK_OK(cuGraphClone(&cl, gr));
    CHECK_OK(cuGraphNodeFindInClone(&a2, nd[0], cl));
    CHECK(a2 != nd[0]);
    CHECK_OK(cuGraphHostNodeGetParams(a2, &hp));
    CHECK(hp.fn == record && hp.userData == (void *)11); /* params copied */
    CUgraph owned;
    CUgraphNode d;
    size_t one = 1;
    CHECK_OK(cuGraphChildGraphNodeGetGraph(nd[3], &owned));
    CHECK_OK(cuGraphGetNodes(owned, &d, &one));
    CHECK_OK(cuGraphNodeFindInClone(&d2, d, cl)); /* a node inside a child graph */
    CHECK(d2 != d);
    CHECK_OK(cuGraphHostNodeGetParams(d2, &hp));
    CHECK(hp.userData == (void *)4);
    CHECK_CU(cuGraphNodeFindInClone(&a2, nd[0], gr), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphNodeFindInClone(&a2, nd[0], cl));

    /* Whole-graph update from the clone, with one parameter changed. */
    CHECK_OK(cuGraphHostNodeSetParams(a2, &p21));
    CHECK_OK(cuGraphExecUpdate_v2(e, cl, &info));
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(21, 3, 4, 5));
    CHECK_OK(cuGraphExecHostNodeSetParams(e, a2, &p22)); /* nodes of the new graph */
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(22, 3, 4, 5));

    /* A changed topology, or node type, is refused and leaves it as it was. */
    CHECK_OK(cuGraphAddEmptyNode(&extra, cl, NULL, 0));
    CHECK_CU(cuGraphExecUpdate_v2(e, cl, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CHECK_OK(cuGraphCreate(&other, 0));
    CUgraphNode o[5];
    CHECK_OK(cuGraphAddEmptyNode(&o[0], other, NULL, 0));
    for (int i = 1; i < 5; i++)
        CHECK_OK(cuGraphAddEmptyNode(&o[i], other, &o[i - 1], 1));
    CHECK_CU(cuGraphExecUpdate(e, other, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK(res == CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED && err == o[0]);
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(22, 3, 4, 5));

    /* The exec outlives the graphs. */
    CHECK_OK(cuGraphDestroy(cl));
    CHECK_OK(cuGraphDestroy(other));
    CHECK_CU(cuGraphHostNodeGetParams(a2, &hp), CUDA_ERROR_INVALID_VALUE);
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(22, 3, 4, 5));
    CHECK_OK(cuGraphExecDestroy(e));
}

static void test_graph_instantiate_forms(CUgraph gr, CUstream s)
{
    CUgraphExec e;
    CUgraphNode err = (CUgraphNode)1;
    char log[16] = "x";
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
                                        .hUploadStream = s,
                                        .result_out = CUDA_GRAPH_INSTANTIATE_ERROR};
    CHECK_OK(cuGraphInstantiate_v2(&e, gr, &err, log, sizeof log));
    CHECK(err == NULL && log[0] == '\0');
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_OK(cuGraphInstantiateWithParams(&e, gr, &ip));
    CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_CU(cuGraphInstantiateWithFlags(&e, gr, 1u << 20), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, (CUgraph)&e, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_graph_dot(CUgraph gr)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fakecuda_selftest_%d.dot", (int)getpid());
    CHECK_OK(cuGraphDebugDotPrint(gr, path, 0));
    CHECK(file_contains(path, "digraph"));
    CHECK(file_contains(path, "HOST"));
    CHECK(file_contains(path, "->"));
    unlink(path);
    CHECK_CU(cuGraphDebugDotPrint(gr, "/nonexistent-dir/x.dot", 0),
             CUDA_ERROR_OPERATING_SYSTEM);
}

void test_graphs(void)
{
    need_context();
    CUgraph gr;
    CUgraphNode nd[6];
    CUgraphNodeType t;
    CUstream s;
    CHECK_OK(cuStreamCreate(&s, 0));
    test_graph_build(&gr, nd);
    test_graph_queries(gr, nd);
    test_graph_exec(gr, nd, s);
    test_graph_clone_update(gr, nd, s);
    test_graph_instantiate_forms(gr, s);
    test_graph_dot(gr);
    CHECK_OK(cuGraphDestroy(gr));
    CHECK_CU(cuGraphNodeGetType(nd[0], &t), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphDestroy(gr), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuStreamDestroy_v2(s));
}

/* ---- graph node parameters -------------------------------------------- */
static void CUDA_CB record_alt(void *p) { record((void *)((intptr_t)p + 1000)); }

static void host_params_are(CUgraphNode n, CUhostFn fn, intptr_t id, const char *file,
                            int line)
{
    CUDA_HOST_NODE_PARAMS hp = {NULL, NULL};
    CUgraphNodeParams np;
    static const int zero[3];
    memset(&np, 0xa5, sizeof np);
    CUresult r = cuGraphHostNodeGetParams(n, &hp);
    if (r != CUDA_SUCCESS)
        check_fail(file, line, "cuGraphHostNodeGetParams returned %s (%d), want CUDA_SUCCESS",
                   check_cu_name(r), (int)r);
    if (hp.fn != fn || hp.userData != (void *)id)
        check_fail(file, line, "host node parameters");
    r = cuGraphNodeGetParams(n, &np);
    if (r != CUDA_SUCCESS)
        check_fail(file, line, "cuGraphNodeGetParams returned %s (%d), want CUDA_SUCCESS",
                   check_cu_name(r), (int)r);
    if (!(np.type == CU_GRAPH_NODE_TYPE_HOST && np.host.fn == fn &&
          np.host.userData == (void *)id && !memcmp(np.reserved0, zero, sizeof zero) &&
          np.reserved2 == 0))
        check_fail(file, line, "generic node parameters");
}

#define HOST_PARAMS_ARE(n, fn, id) host_params_are((n), (fn), (id), __FILE__, __LINE__)

/* The getters return exactly what was set; the exec setters change only
 * the exec's copy, never the graph's node nor a later instantiation. */
static void graph_params_on(CUstream s)
{
    CUgraph gr, cl;
    CUgraphNode n, m, n2;
    CUDA_HOST_NODE_PARAMS p1 = {record, (void *)1}, p3 = {record_alt, (void *)3},
                          p10 = {record_alt, (void *)10};
    CUgraphNodeParams np;

    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphAddHostNode(&n, gr, NULL, 0, &p1));
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = record;
    np.host.userData = (void *)2;
    CHECK_OK(cuGraphAddNode(&m, gr, &n, 1, &np));
    HOST_PARAMS_ARE(n, record, 1);
    HOST_PARAMS_ARE(m, record, 2);
    CHECK_OK(cuGraphHostNodeSetParams(n, &p3));
    HOST_PARAMS_ARE(n, record_alt, 3);
    np.host.userData = (void *)4;
    CHECK_OK(cuGraphNodeSetParams(m, &np));
    HOST_PARAMS_ARE(m, record, 4);

    CUgraphExec e = instantiate(gr);
    CHECK_OK(cuGraphExecHostNodeSetParams(e, n, &p10));
    np.host.fn = record_alt;
    np.host.userData = (void *)20;
    CHECK_OK(cuGraphExecNodeSetParams(e, m, &np));
    HOST_PARAMS_ARE(n, record_alt, 3);
    HOST_PARAMS_ARE(m, record, 4);
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(1010, 1020));

    CUgraphExec e2 = instantiate(gr);
    launch_and_wait(e2, s);
    CHECK(RUNS_ARE(1003, 4));
    CHECK_OK(cuGraphClone(&cl, gr));
    CHECK_OK(cuGraphNodeFindInClone(&n2, n, cl));
    HOST_PARAMS_ARE(n2, record_alt, 3);
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_OK(cuGraphExecDestroy(e2));
    CHECK_OK(cuGraphDestroy(cl));
    CHECK_OK(cuGraphDestroy(gr));
}

ON_A_STREAM(graph_params)
