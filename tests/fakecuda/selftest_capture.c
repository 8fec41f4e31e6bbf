/* Self-test: stream capture. */
#include "selftest.h"

/* ---- stream capture --------------------------------------------------- */
static CUgraphExec one_node_exec(intptr_t id)
{
    CUgraph gr;
    CUgraphNode n;
    CUDA_HOST_NODE_PARAMS p = {record, (void *)id};
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphAddHostNode(&n, gr, NULL, 0, &p));
    CUgraphExec e = instantiate(gr);
    CHECK_OK(cuGraphDestroy(gr));
    return e;
}

static void test_capture_basic(CUstream s)
{
    CUstreamCaptureStatus st;
    cuuint64_t id = 0;
    CUgraph cg = NULL, got;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t nd = 0, n = 0;
    CUgraphNode nodes[4], dep;
    CUDA_HOST_NODE_PARAMS hp;
    CUgraphExec inner = one_node_exec(33);

    CHECK_OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* the legacy stream */
    runs_reset();
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
             CUDA_ERROR_ILLEGAL_STATE);
    CHECK_OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)31));
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)32));
    CHECK_OK(cuStreamGetCaptureInfo_v3(s, &st, &id, &cg, &deps, &edges, &nd));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && cg != NULL && nd == 1);
    if (nd == 1) {
        CHECK_OK(cuGraphHostNodeGetParams(deps[0], &hp));
        CHECK(hp.userData == (void *)32);
        CHECK(edges[0].from_port == 0 && edges[0].type == 0);
    }
    setenv("FAKECUDA_GRAPH_LAUNCH_CAPTURED", "1", 1);
    CHECK_OK(cuGraphLaunch(inner, s));
    unsetenv("FAKECUDA_GRAPH_LAUNCH_CAPTURED");
    CHECK_OK(cuStreamEndCapture(s, &got));
    CHECK(got == cg);
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_ILLEGAL_STATE);
    CHECK_OK(cuCtxSynchronize());
    CHECK(runs.n == 0); /* captured, not run */

    n = 4;
    CHECK_OK(cuGraphGetNodes(got, nodes, &n));
    CHECK(n == 3);
    n = 1;
    CHECK_OK(cuGraphNodeGetDependencies(nodes[1], &dep, &n));
    CHECK(n == 1 && dep == nodes[0]);
    CUgraphExec e = instantiate(got);
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(31, 32, 33));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_OK(cuGraphExecDestroy(inner));
    CHECK_OK(cuGraphDestroy(got));
}

/* A graph launch into a capture is refused and invalidates it (driver
 * 580 in every mode), unless FAKECUDA_GRAPH_LAUNCH_CAPTURED=1. */
static void test_capture_graph_launch(CUstream s)
{
    CUstreamCaptureStatus st;
    CUgraph got = (CUgraph)1;
    CUgraphExec inner = one_node_exec(34);
    runs_reset();
    for (int m = 0; m < 3; m++) {
        CHECK_OK(cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)m));
        CHECK_CU(cuGraphLaunch(inner, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        CHECK_OK(cuStreamIsCapturing(s, &st));
        CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
        CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        CHECK(got == NULL);
    }
    CHECK_OK(cuCtxSynchronize());
    CHECK(runs.n == 0);
    CHECK_OK(cuGraphExecDestroy(inner));
}

static void test_capture_invalidated(CUstream s)
{
    CUstreamCaptureStatus st;
    CUgraph got = (CUgraph)1;

    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CHECK_CU(cuLaunchHostFunc(s, record, NULL), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(got == NULL);

    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(cuStreamAddCallback(s, stream_cb, NULL, 0),
             CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);

    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

static CUstream g_cap_stream;

static void *end_capture_elsewhere(void *p)
{
    CUgraph got;
    *(CUresult *)p = cuStreamEndCapture(g_cap_stream, &got);
    return NULL;
}

/* cuCtxSynchronize during a capture fails and invalidates it; an
 * invalidated capture may then be ended from any thread. */
static void test_capture_ctx_sync(CUstream s)
{
    CUstreamCaptureStatus st;
    CUresult r = CUDA_SUCCESS;
    CUgraph got;
    pthread_t t;

    g_cap_stream = s;
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    pthread_create(&t, NULL, end_capture_elsewhere, &r);
    pthread_join(t, NULL);
    CHECK_CU(r, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_ILLEGAL_STATE);
    CHECK_OK(cuCtxSynchronize());
    CHECK_OK(cuCtxSynchronize_v2(NULL));
    CHECK_OK(cuCtxSynchronize_v2(g_ctx));
    CHECK_CU(cuCtxSynchronize_v2((CUcontext)&r), CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static void test_capture_threads(CUstream s)
{
    CUgraph got;
    size_t n = 0;
    CUresult r = CUDA_SUCCESS;
    pthread_t t;

    g_cap_stream = s;
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_OK(cuLaunchHostFunc_ptsz(s, record, (void *)1));
    pthread_create(&t, NULL, end_capture_elsewhere, &r);
    pthread_join(t, NULL);
    CHECK(r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CHECK_OK(cuStreamEndCapture(s, &got));
    CHECK_OK(cuGraphDestroy(got));

    /* The per-thread default stream can capture; the legacy one cannot. */
    CHECK_OK(cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK_OK(cuLaunchHostFunc_ptsz(NULL, record, (void *)41));
    CHECK_OK(cuLaunchHostFunc_v2_ptsz(NULL, record, (void *)42, 0));
    CHECK_OK(cuStreamEndCapture_ptsz(NULL, &got));
    CHECK_OK(cuGraphGetNodes(got, NULL, &n));
    CHECK(n == 2);
    CUgraphExec e = instantiate(got);
    runs_reset();
    CHECK_OK(cuGraphLaunch_ptsz(e, NULL));
    CHECK_OK(cuStreamSynchronize_ptsz(NULL));
    CHECK(RUNS_ARE(41, 42));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_OK(cuGraphDestroy(got));
}

/* A capture's state, by any of its streams. */
static CUstreamCaptureStatus cap_state(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_OK(cuStreamIsCapturing(s, &st));
    return st;
}

/* Ends a's capture, which must fail with want and leave no graph. */
static void end_fails(CUstream a, CUresult want)
{
    CUgraph g = NULL;
    CHECK_CU(cuStreamEndCapture(a, &g), want);
    CHECK(g == NULL && cap_state(a) == CU_STREAM_CAPTURE_STATUS_NONE);
}

/* Cross-stream capture: b joins a's capture by waiting for an event
 * recorded in it, its node depends on a's, a's next node on both; the end
 * of a's capture takes b out of it. Events outside capture; the errors,
 * as driver 580 answers them (an isolation or merge error invalidates). */
static void test_capture_join(CUstream a)
{
    CUstream b, c;
    CUevent ea, eb, out;
    CUgraph g;
    CUgraphNode nodes[4], deps[4];
    size_t n = 4, nd = 4;
    cuuint64_t ida = 0, idb = 0;
    CUstreamCaptureStatus st;
    CHECK_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cuEventCreate(&ea, 0));
    CHECK_OK(cuEventCreate(&eb, 0));
    CHECK_OK(cuEventCreate(&out, 0));
    CHECK_OK(cuEventRecord(out, b));
    CHECK_OK(cuEventSynchronize(out));
    CHECK_OK(cuStreamWaitEvent(c, out, 0)); /* outside capture: met */
    CHECK_CU(cuStreamWaitEvent(c, out, 2), CUDA_ERROR_INVALID_VALUE);
    runs_reset();
    /* An event recorded outside: isolation, and the capture invalidated. */
    CHECK_OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(cuStreamWaitEvent(a, out, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    CHECK(cap_state(a) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CHECK_CU(cuLaunchHostFunc(a, record, (void *)50), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    end_fails(a, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* b joins, captures, rejoins. */
    CHECK_OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuLaunchHostFunc(a, record, (void *)51));
    CHECK_OK(cuEventRecord(ea, a));
    CHECK_CU(cuEventSynchronize(ea), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_OK(cuStreamWaitEvent(b, ea, 0));
    CHECK(cap_state(b) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_OK(cuStreamGetCaptureInfo(a, &st, &ida));
    CHECK_OK(cuStreamGetCaptureInfo(b, &st, &idb));
    CHECK(ida != 0 && ida == idb);
    CHECK_CU(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    CHECK_OK(cuLaunchHostFunc(b, record, (void *)52));
    CHECK_OK(cuEventRecord(eb, b));
    CHECK_OK(cuStreamWaitEvent(a, eb, 0));
    CHECK_OK(cuLaunchHostFunc(a, record, (void *)53));
    CHECK_OK(cuStreamEndCapture(a, &g));
    CHECK(cap_state(b) == CU_STREAM_CAPTURE_STATUS_NONE);
    /* An event of a capture that is over. */
    CHECK_CU(cuStreamWaitEvent(c, ea, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphGetNodes(g, nodes, &n));
    CHECK(n == 3);
    CHECK_OK(cuGraphNodeGetDependencies(nodes[2], deps, &nd));
    CHECK(nd == 2 && deps[0] == nodes[0] && deps[1] == nodes[1]);
    CHECK_OK(cuCtxSynchronize());
    CHECK(runs.n == 0); /* captured, not run */
    CUgraphExec e = instantiate(g);
    launch_and_wait(e, a);
    CHECK(RUNS_ARE(51, 52, 53));
    CHECK_OK(cuGraphExecDestroy(e));
    CHECK_OK(cuGraphDestroy(g));
    /* A stream in another capture: a merge, both captures invalidated. */
    CHECK_OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuEventRecord(ea, a));
    CHECK_OK(cuStreamBeginCapture_v2(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(cuStreamWaitEvent(c, ea, 0), CUDA_ERROR_STREAM_CAPTURE_MERGE);
    CHECK(cap_state(a) == CU_STREAM_CAPTURE_STATUS_INVALIDATED &&
          cap_state(c) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_fails(c, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    end_fails(a, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* Unjoined: b took a launch after it rejoined; the end fails, both
     * streams leave, and the launch never runs. A stream that joined and
     * took nothing need not rejoin. */
    runs_reset();
    CHECK_OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuLaunchHostFunc(a, record, (void *)54));
    CHECK_OK(cuEventRecord(ea, a));
    CHECK_OK(cuStreamWaitEvent(b, ea, 0));
    CHECK_OK(cuStreamWaitEvent(c, ea, 0));
    CHECK_OK(cuLaunchHostFunc(b, record, (void *)55));
    CHECK_OK(cuEventRecord(eb, b));
    CHECK_OK(cuStreamWaitEvent(a, eb, 0));
    CHECK_OK(cuLaunchHostFunc(b, record, (void *)56));
    end_fails(a, CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    CHECK(cap_state(b) == CU_STREAM_CAPTURE_STATUS_NONE &&
          cap_state(c) == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuStreamWaitEvent(c, eb, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuCtxSynchronize());
    CHECK(runs.n == 0);
    /* A joined stream destroyed leaves the capture; its origin ends it if
     * it took nothing, and not if it took a node not rejoined. */
    CHECK_OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuEventRecord(ea, a));
    CHECK_OK(cuStreamWaitEvent(b, ea, 0));
    CHECK_OK(cuStreamDestroy_v2(b));
    CHECK_OK(cuStreamEndCapture(a, &g));
    CHECK_OK(cuGraphDestroy(g));
    CHECK_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuEventRecord(ea, a));
    CHECK_OK(cuStreamWaitEvent(b, ea, 0));
    CHECK_OK(cuLaunchHostFunc(b, record, (void *)57));
    CHECK_OK(cuStreamDestroy_v2(b));
    end_fails(a, CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    /* An origin destroyed takes the streams that joined it out, and its
     * events join nothing after. The legacy stream joins nothing. */
    CHECK_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuEventRecord(eb, b));
    CHECK_CU(cuStreamWaitEvent(CU_STREAM_LEGACY, eb, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_OK(cuStreamWaitEvent(c, eb, 0));
    CHECK_OK(cuStreamDestroy_v2(b));
    CHECK(cap_state(c) == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuStreamWaitEvent(c, eb, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuEventDestroy_v2(ea));
    CHECK_OK(cuEventDestroy_v2(eb));
    CHECK_OK(cuEventDestroy_v2(out));
    CHECK_CU(cuEventDestroy_v2(out), CUDA_ERROR_INVALID_HANDLE);
    CHECK_OK(cuStreamDestroy_v2(c));
}

/* A capture into the caller's graph, after one of its nodes. */
static void test_capture_to_graph(CUstream s)
{
    CUgraph g, other, got;
    CUgraphNode n0, n1, nodes[3], deps[2];
    size_t n = 3, nd = 2;
    CUDA_HOST_NODE_PARAMS p = {record, (void *)61};
    CHECK_OK(cuGraphCreate(&g, 0));
    CHECK_OK(cuGraphCreate(&other, 0));
    CHECK_OK(cuGraphAddHostNode(&n0, g, NULL, 0, &p));
    CHECK_OK(cuGraphAddHostNode(&n1, other, NULL, 0, &p));
    CHECK_CU(cuStreamBeginCaptureToGraph(s, g, &n1, NULL, 1, CU_STREAM_CAPTURE_MODE_RELAXED),
             CUDA_ERROR_INVALID_VALUE); /* a node of another graph */
    runs_reset();
    CHECK_OK(cuStreamBeginCaptureToGraph(s, g, &n0, NULL, 1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE); /* captured into */
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)62));
    CHECK_OK(cuStreamEndCapture(s, &got));
    CHECK(got == g);
    CHECK_OK(cuGraphGetNodes(g, nodes, &n));
    CHECK(n == 2);
    CHECK_OK(cuGraphNodeGetDependencies(nodes[1], deps, &nd));
    CHECK(nd == 1 && deps[0] == n0);
    CUgraphExec e = instantiate(g);
    launch_and_wait(e, s);
    CHECK(RUNS_ARE(61, 62));
    CHECK_OK(cuGraphExecDestroy(e));
    /* A stream destroyed mid-capture leaves the caller's graph to it. */
    CUstream s2;
    CHECK_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cuStreamBeginCaptureToGraph(s2, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuLaunchHostFunc(s2, record, (void *)63));
    CHECK_OK(cuStreamDestroy_v2(s2));
    n = 3;
    CHECK_OK(cuGraphGetNodes(g, nodes, &n));
    CHECK(n == 3);
    CHECK_OK(cuGraphDestroy(other));
    CHECK_OK(cuGraphDestroy(g));
    /* Unjoined: the caller's graph goes with the capture (driver 580
     * frees it: its handle is then refused). */
    CHECK_OK(cuGraphCreate(&g, 0));
    CUevent ev;
    CHECK_OK(cuEventCreate(&ev, 0));
    CHECK_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK_OK(cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuLaunchHostFunc(s, record, (void *)64));
    CHECK_OK(cuEventRecord(ev, s));
    CHECK_OK(cuStreamWaitEvent(s2, ev, 0));
    CHECK_OK(cuLaunchHostFunc(s2, record, (void *)65));
    got = NULL;
    CHECK_CU(cuStreamEndCapture(s, &got), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    CHECK(got == NULL);
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuStreamDestroy_v2(s2));
    CHECK_OK(cuEventDestroy_v2(ev));
}

void test_capture(void)
{
    need_context();
    CUstream s;
    CHECK_OK(cuStreamCreate(&s, 0));
    test_capture_basic(s);
    test_capture_invalidated(s);
    test_capture_graph_launch(s);
    test_capture_ctx_sync(s);
    test_capture_threads(s);
    test_capture_join(s);
    test_capture_to_graph(s);
    /* Destroying a stream mid-capture drops the capture. */
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_OK(cuLaunchHostFunc(s, record, NULL));
    CHECK_OK(cuStreamDestroy_v2(s));
    CHECK_OK(cuCtxSynchronize());
}

