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
    /* Destroying a stream mid-capture drops the capture. */
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_OK(cuLaunchHostFunc(s, record, NULL));
    CHECK_OK(cuStreamDestroy_v2(s));
    CHECK_OK(cuCtxSynchronize());
}

