/* Self-test: user objects, their references, graphs and execs that own
 * them. */
#include "selftest.h"

/* ---- user objects ----------------------------------------------------- */
static void uo_init(uo *u, gate *after)
{
    memset(u, 0, sizeof *u);
    atomic_store(&u->runs, 0);
    u->after = after;
    u->after_done = -1;
}

static void CUDA_CB uo_destroy(void *p)
{
    uo *u = p;
    u->thread = pthread_self();
    u->inner = cuCtxSynchronize();
    if (u->after)
        u->after_done = atomic_load(&u->after->done);
    atomic_fetch_add(&u->runs, 1);
}

CUuserObject uo_create(uo *u, gate *after, unsigned refs)
{
    CUuserObject o = NULL;
    uo_init(u, after);
    CHECK_OK(cuUserObjectCreate(&o, u, uo_destroy, refs, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    return o;
}

/* A stream that never captures: work on it runs after every destructor
 * already queued, since the test driver's callback thread runs all work
 * in the order it was queued. */
static CUstream g_uo_stream;

/* g_uo_stream, made by the first user-object case that needs it. */
static CUstream uo_stream(void)
{
    if (!g_uo_stream)
        CHECK_OK(cuStreamCreate(&g_uo_stream, 0));
    return g_uo_stream;
}

static void CUDA_CB noop(void *p) { (void)p; }

/* Has u's destructor run exactly n times, with everything queued so far
 * done? A destructor is waited for as the docs say (no CUDA API waits for
 * one): by what it signals, with a timeout. */
int uo_runs_are(uo *u, int n)
{
    for (int i = 0; i < 5000 && atomic_load(&u->runs) < n; i++)
        sleep_ms(1);
    CUresult r1 = cuLaunchHostFunc(uo_stream(), noop, NULL);
    CUresult r2 = cuStreamSynchronize(uo_stream());
    return r1 == CUDA_SUCCESS && r2 == CUDA_SUCCESS && atomic_load(&u->runs) == n;
}

/* The thread that runs host functions. */
pthread_t callback_thread(void)
{
    runs_reset();
    CHECK_OK(cuLaunchHostFunc(uo_stream(), record, NULL));
    CHECK_OK(cuStreamSynchronize(uo_stream()));
    return runs.thread[0];
}

CUgraph one_node_graph(CUhostFn fn, void *user)
{
    CUgraph gr;
    CUgraphNode n;
    CUDA_HOST_NODE_PARAMS p = {fn, user};
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphAddHostNode(&n, gr, NULL, 0, &p));
    return gr;
}

void test_uobj_bad_input(void)
{
    need_context();
    const unsigned big = (unsigned)INT_MAX + 1u;
    const unsigned sync = CU_USER_OBJECT_NO_DESTRUCTOR_SYNC;
    uo u;
    CUuserObject o = NULL;
    CUgraph gr, other;

    uo_init(&u, NULL);
    CHECK_CU(cuUserObjectCreate(&o, &u, uo_destroy, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &u, uo_destroy, 1, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &u, uo_destroy, 1, sync | 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &u, uo_destroy, 0, sync), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &u, uo_destroy, big, sync), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(NULL, &u, uo_destroy, 1, sync), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &u, NULL, 1, sync), CUDA_ERROR_INVALID_VALUE);
    CHECK(o == NULL);

    o = uo_create(&u, NULL, 1);
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphCreate(&other, 0));
    CHECK_CU(cuUserObjectRetain(o, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectRetain(o, big), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectRelease(o, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectRelease(o, big), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectRetain((CUuserObject)&u, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectRelease((CUuserObject)gr, 1), CUDA_ERROR_INVALID_VALUE);
    /* Releasing references the caller does not own (undefined behaviour in
     * the real driver) is refused, and changes nothing. */
    CHECK_CU(cuUserObjectRelease(o, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(gr, o, 1, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(gr, o, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(gr, o, big, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject((CUgraph)&u, o, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(gr, (CUuserObject)gr, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(gr, o, 2, CU_GRAPH_USER_OBJECT_MOVE),
             CUDA_ERROR_INVALID_VALUE); /* the caller owns one */
    CHECK_OK(cuGraphRetainUserObject(gr, o, 1, 0));
    CHECK_CU(cuGraphReleaseUserObject(gr, o, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphReleaseUserObject(gr, o, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphReleaseUserObject(other, o, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphReleaseUserObject(gr, (CUuserObject)gr, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphReleaseUserObject(gr, o, 1));
    CHECK_CU(cuGraphReleaseUserObject(gr, o, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuUserObjectRelease(o, 1));
    CHECK(uo_runs_are(&u, 1));
    /* The handle dies with its last reference (using it is undefined
     * behaviour in the real driver; here it is refused). */
    CHECK_CU(cuUserObjectRetain(o, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphDestroy(gr));
    CHECK_OK(cuGraphDestroy(other));
}

/* The caller's own references; the destructor runs once, on the callback
 * thread, where CUDA calls are refused. */
void test_uobj_caller_refs(void)
{
    need_context();
    uo u;
    CUuserObject o = uo_create(&u, NULL, 2);
    CHECK_OK(cuUserObjectRelease(o, 1));
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuUserObjectRetain(o, 3));
    CHECK_OK(cuUserObjectRelease(o, 3));
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuUserObjectRelease(o, 1));
    CHECK(uo_runs_are(&u, 1));
    CHECK(pthread_equal(u.thread, callback_thread()));
    CHECK(!pthread_equal(u.thread, pthread_self()));
    CHECK_CU(u.inner, CUDA_ERROR_NOT_PERMITTED);
}

void test_uobj_graph(void)
{
    need_context();
    uo u, v;
    CUgraph gr;

    /* MOVE: the caller's only reference becomes the graph's. */
    CUuserObject o = uo_create(&u, NULL, 1);
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphRetainUserObject(gr, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_CU(cuUserObjectRelease(o, 1), CUDA_ERROR_INVALID_VALUE); /* owns none */
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuGraphDestroy(gr));
    CHECK(uo_runs_are(&u, 1));

    /* Without MOVE the graph takes new references of its own. */
    o = uo_create(&v, NULL, 1);
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphRetainUserObject(gr, o, 2, 0));
    CHECK_OK(cuUserObjectRelease(o, 1));
    CHECK(uo_runs_are(&v, 0));
    CHECK_OK(cuGraphReleaseUserObject(gr, o, 1));
    CHECK(uo_runs_are(&v, 0));
    CHECK_OK(cuGraphDestroy(gr));
    CHECK(uo_runs_are(&v, 1));
}

/* A clone owns copies of the references, with the same multiplicity. */
void test_uobj_clone(void)
{
    need_context();
    uo u;
    CUgraph gr, cl;
    CUuserObject o = uo_create(&u, NULL, 1);
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphRetainUserObject(gr, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_OK(cuGraphRetainUserObject(gr, o, 2, 0));
    CHECK_OK(cuGraphClone(&cl, gr));
    CHECK_OK(cuGraphDestroy(gr));
    CHECK(uo_runs_are(&u, 0));
    CHECK_CU(cuGraphReleaseUserObject(cl, o, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGraphReleaseUserObject(cl, o, 2));
    CHECK(uo_runs_are(&u, 0));
    CHECK_OK(cuGraphDestroy(cl));
    CHECK(uo_runs_are(&u, 1));
}

/* Every instantiate entry point gives the exec references of its own. */
static void uobj_exec_on(CUstream s)
{
    enum { NEXEC = 5 };
    uo u;
    CUgraphExec e[NEXEC];
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = 0};
    CUgraph gr = one_node_graph(record, (void *)7);
    CUuserObject o = uo_create(&u, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(gr, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_OK(cuGraphInstantiateWithFlags(&e[0], gr, 0));
    CHECK_OK(cuGraphInstantiate(&e[1], gr, NULL, NULL, 0));
    CHECK_OK(cuGraphInstantiate_v2(&e[2], gr, NULL, NULL, 0));
    CHECK_OK(cuGraphInstantiateWithParams(&e[3], gr, &ip));
    CHECK_OK(cuGraphInstantiateWithParams_ptsz(&e[4], gr, &ip));
    CHECK_OK(cuGraphDestroy(gr));
    for (int i = 0; i < NEXEC; i++) {
        CHECK(uo_runs_are(&u, 0));
        launch_and_wait(e[i], s);
        CHECK(RUNS_ARE(7));
        CHECK_OK(cuGraphExecDestroy(e[i]));
    }
    CHECK(uo_runs_are(&u, 1));
}

ON_A_STREAM(uobj_exec)
