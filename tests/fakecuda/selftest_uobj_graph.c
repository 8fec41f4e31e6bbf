/* Self-test: user objects through child graphs, capture, queued launches
 * and exec updates. */
#include "selftest.h"

static CUgraphNode child_node(CUgraph parent, CUgraph child, int move)
{
    CUgraphNode n = NULL;
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.graph = child;
    np.graph.ownership = move ? CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE
                              : CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    CHECK_OK(cuGraphAddNode(&n, parent, NULL, 0, &np));
    return n;
}

/* A child graph node's graph is a clone, references included; they
 * belong to the child graph and go with whatever owns it. */
static void uobj_child_on(CUstream s)
{
    uo u, v, w;
    CUgraph ch, p1, p2, p3, owned;
    CUgraphNode n;

    ch = one_node_graph(record, (void *)8);
    CUuserObject o = uo_create(&u, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(ch, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_OK(cuGraphCreate(&p1, 0));
    CHECK_OK(cuGraphCreate(&p2, 0));
    CHECK_OK(cuGraphAddChildGraphNode(&n, p1, NULL, 0, ch));
    (void)child_node(p2, ch, 0);
    CHECK_OK(cuGraphDestroy(ch));
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuGraphDestroy(p1));
    CHECK(uo_runs_are(&u, 0));
    CUgraphExec e = instantiate(p2);
    CHECK_OK(cuGraphDestroy(p2));
    CHECK(uo_runs_are(&u, 0)); /* the exec's copy of the child holds one */
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(8));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK(uo_runs_are(&u, 1));

    /* Ownership moved to the node: the child graph goes with the parent. */
    ch = one_node_graph(record, (void *)9);
    o = uo_create(&v, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(ch, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_OK(cuGraphCreate(&p3, 0));
    (void)child_node(p3, ch, 1);
    CHECK_CU(cuGraphDestroy(ch), CUDA_ERROR_INVALID_VALUE);
    CHECK(uo_runs_are(&v, 0));
    CHECK_OK(cuGraphDestroy(p3));
    CHECK(uo_runs_are(&v, 1));

    /* References retained on the graph a node owns. */
    ch = one_node_graph(record, (void *)10);
    CHECK_OK(cuGraphCreate(&p1, 0));
    CHECK_OK(cuGraphAddChildGraphNode(&n, p1, NULL, 0, ch));
    CHECK_OK(cuGraphDestroy(ch));
    CHECK_OK(cuGraphChildGraphNodeGetGraph(n, &owned));
    o = uo_create(&w, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(owned, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK(uo_runs_are(&w, 0));
    CHECK_OK(cuGraphDestroy(p1));
    CHECK(uo_runs_are(&w, 1));
}

typedef CUresult(CUDAAPI *capinfo_v3_fn)(CUstream, CUstreamCaptureStatus *,
                                        cuuint64_t *, CUgraph *,
                                        const CUgraphNode **,
                                        const CUgraphEdgeData **, size_t *);

/* The graph being captured, found the ways a library finds it. */
static CUgraph capture_graph_of(CUstream s)
{
    CUstreamCaptureStatus st;
    CUgraph cg = NULL, cg2 = NULL, cg3 = NULL;
    capinfo_v3_fn v1 = NULL, v2 = NULL;
    CHECK_OK(cuStreamGetCaptureInfo_v3(s, &st, NULL, &cg, NULL, NULL, NULL));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && cg != NULL);
    CHECK_OK(cuGetProcAddress("cuStreamGetCaptureInfo", (void **)&v1, 13000, 0));
    CHECK_OK(cuGetProcAddress_v2("cuStreamGetCaptureInfo", (void **)&v2, 12030, 0, NULL));
    CHECK(v1 != NULL && v2 != NULL);
    if (v1 && v2) {
        CHECK_OK(v1(s, &st, NULL, &cg2, NULL, NULL, NULL));
        CHECK_OK(v2(s, &st, NULL, &cg3, NULL, NULL, NULL));
    }
    CHECK(cg2 == cg && cg3 == cg);
    return cg;
}

void test_uobj_capture(void)
{
    need_context();
    uo u, v, w, x;
    CUstream s, s2;
    CUgraph got = NULL;
    CHECK_OK(cuStreamCreate(&s, 0));

    /* Retained on the graph being captured; it comes out with the graph. */
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)11));
    CUgraph cg = capture_graph_of(s);
    CUuserObject o = uo_create(&u, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(cg, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuStreamEndCapture(s, &got));
    CHECK(got == cg);
    CUgraphExec e = instantiate(got);
    CHECK_OK(cuGraphDestroy(got));
    CHECK(uo_runs_are(&u, 0));
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(11));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK(uo_runs_are(&u, 1));

    /* An invalidated capture drops its graph and the graph's references. */
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    o = uo_create(&v, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(capture_graph_of(s), o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_CU(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(uo_runs_are(&v, 0));
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(uo_runs_are(&v, 1));

    /* So does a stream destroyed while capturing. */
    CHECK_OK(cuStreamCreate(&s2, 0));
    CHECK_OK(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    o = uo_create(&w, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(capture_graph_of(s2), o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_OK(cuStreamDestroy_v2(s2));
    CHECK(uo_runs_are(&w, 1));

    /* An exec launched into a capture becomes a child graph node holding
     * copies of the exec's references (a driver that captures graph
     * launches: see fc_capture_graph). */
    setenv("FAKECUDA_GRAPH_LAUNCH_CAPTURED", "1", 1);
    CUgraph src = one_node_graph(record, (void *)12);
    o = uo_create(&x, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(src, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    e = instantiate(src);
    CHECK_OK(cuGraphDestroy(src));
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuGraphLaunch(e, s));
    unsetenv("FAKECUDA_GRAPH_LAUNCH_CAPTURED");
    CHECK_OK(cuStreamEndCapture(s, &got));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK(uo_runs_are(&x, 0));
    CHECK_OK(cuGraphDestroy(got));
    CHECK(uo_runs_are(&x, 1));
    CHECK_OK(cuStreamDestroy_v2(s));
}

/* Hold the callback thread in a host function, so that what is launched
 * next stays queued, not started. */
static void hold_callback_thread(gate *blocker, CUstream s)
{
    gate_init(blocker);
    CHECK_OK(cuLaunchHostFunc(s, gated, blocker));
    gate_wait_started(blocker);
}

/* A graph whose host node marks gate *done when it has run. */
static CUgraph marking_graph(gate *done)
{
    gate_init(done);
    gate_open(done);
    return one_node_graph(gated, done);
}

/* An exec destroyed while a launch of it is still queued: its references
 * go only after that launch has run. */
static void uobj_queued_launch_on(CUstream s)
{
    uo u;
    gate blocker, ran;
    CUgraph gr = marking_graph(&ran);
    CUuserObject o = uo_create(&u, &ran, 1);
    CHECK_OK(cuGraphRetainUserObject(gr, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CUgraphExec e = instantiate(gr);
    CHECK_OK(cuGraphDestroy(gr));
    hold_callback_thread(&blocker, s);
    CHECK_OK(cuGraphLaunch(e, s));
    CHECK_OK(cuGraphExecDestroy(e));
    sleep_ms(20);
    CHECK(atomic_load(&u.runs) == 0); /* not on this thread, not yet */
    gate_open(&blocker);
    CHECK(uo_runs_are(&u, 1));
    CHECK(u.after_done == 1);
    CHECK(pthread_equal(u.thread, callback_thread()));
}

/* cuGraphExecUpdate: the exec's references become copies of the new
 * source graph's (CUDA Programming Guide, "CUDA User Objects"); those it
 * drops outlast the launches already queued. A refused update changes
 * nothing. */
static void uobj_update_on(CUstream s)
{
    uo a, b, c;
    gate blocker, ran;
    CUgraphExecUpdateResultInfo info;
    CUgraphNode extra;

    CUgraph g1 = marking_graph(&ran);
    CUuserObject oa = uo_create(&a, &ran, 1);
    CHECK_OK(cuGraphRetainUserObject(g1, oa, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CUgraphExec e = instantiate(g1);
    CHECK_OK(cuGraphDestroy(g1));
    CUgraph g2 = one_node_graph(record, (void *)13);
    CUuserObject ob = uo_create(&b, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(g2, ob, 1, CU_GRAPH_USER_OBJECT_MOVE));

    hold_callback_thread(&blocker, s);
    CHECK_OK(cuGraphLaunch(e, s));
    CHECK_OK(cuGraphExecUpdate_v2(e, g2, &info));
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
    sleep_ms(20);
    CHECK(atomic_load(&a.runs) == 0);
    gate_open(&blocker);
    CHECK(uo_runs_are(&a, 1));
    CHECK(a.after_done == 1);

    CUgraph g3 = one_node_graph(record, (void *)14);
    CHECK_OK(cuGraphAddEmptyNode(&extra, g3, NULL, 0));
    CUuserObject oc = uo_create(&c, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(g3, oc, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_CU(cuGraphExecUpdate_v2(e, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_OK(cuGraphDestroy(g3));
    CHECK(uo_runs_are(&c, 1));

    CHECK_OK(cuGraphDestroy(g2));
    CHECK(uo_runs_are(&b, 0)); /* the exec holds a copy of g2's */
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(13));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK(uo_runs_are(&b, 1));
}

ON_A_STREAM(uobj_child)
ON_A_STREAM(uobj_queued_launch)
ON_A_STREAM(uobj_update)
