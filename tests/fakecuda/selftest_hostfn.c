/* Self-test: host functions and streams: order, the one callback thread,
 * synchronize, launch variants, calls from inside a host function. */
#include "selftest.h"

/* ---- host functions and streams --------------------------------------- */
void test_order_and_thread(void)
{
    need_context();
    CUstream a, b;
    CHECK_OK(cuStreamCreate(&a, 0));
    CHECK_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&b, 4), CUDA_ERROR_INVALID_VALUE);
    runs_reset();
    for (intptr_t i = 0; i < 300; i++) {
        CUstream s = i % 3 == 0 ? a : i % 3 == 1 ? b : NULL;
        CHECK_OK(cuLaunchHostFunc(s, record, (void *)i));
    }
    CHECK_OK(cuCtxSynchronize());
    CHECK(runs.n == 300);
    int in_order = 1, one_thread = 1;
    for (int i = 0; i < 300 && i < runs.n; i++) {
        in_order &= runs.ids[i] == i;
        one_thread &= pthread_equal(runs.thread[i], runs.thread[0]) != 0;
    }
    CHECK(in_order);
    CHECK(one_thread);
    CHECK(!pthread_equal(runs.thread[0], pthread_self()));

    /* The same one thread serves a second application thread too. */
    pthread_t first = runs.thread[0];
    runs_reset();
    CHECK_OK(cuLaunchHostFunc_ptsz(NULL, record, (void *)1));
    CHECK_OK(cuStreamSynchronize_ptsz(NULL));
    CHECK(runs.n == 1 && pthread_equal(runs.thread[0], first));
    CHECK_OK(cuStreamDestroy_v2(a));
    CHECK_OK(cuStreamDestroy_v2(b));
    CHECK_CU(cuStreamDestroy_v2(a), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuLaunchHostFunc(a, record, NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuStreamSynchronize(a), CUDA_ERROR_INVALID_HANDLE);
}

void test_synchronize_waits(void)
{
    need_context();
    CUstream a, b;
    gate g;
    CHECK_OK(cuStreamCreate(&a, 0));
    CHECK_OK(cuStreamCreate(&b, 0));

    gate_init(&g);
    CHECK_OK(cuLaunchHostFunc(a, gated, &g));
    CHECK_OK(cuLaunchHostFunc(b, record, NULL));
    CHECK_CU(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamQuery(b), CUDA_ERROR_NOT_READY); /* queued behind a's */
    gate_open(&g);
    CHECK_OK(cuStreamSynchronize(a));
    CHECK(atomic_load(&g.done) == 1);
    CHECK_OK(cuStreamQuery(a));
    CHECK_OK(cuStreamSynchronize(b));

    gate_init(&g);
    CHECK_OK(cuLaunchHostFunc(b, gated, &g));
    gate_open(&g);
    CHECK_OK(cuCtxSynchronize());
    CHECK(atomic_load(&g.done) == 1);

    /* The per-thread default stream, through the _ptsz entry points. */
    gate_init(&g);
    CHECK_OK(cuLaunchHostFunc_ptsz(NULL, gated, &g));
    CHECK_CU(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    gate_open(&g);
    CHECK_OK(cuStreamSynchronize_ptsz(NULL));
    CHECK(atomic_load(&g.done) == 1);

    /* The legacy stream, by name. */
    gate_init(&g);
    CHECK_OK(cuLaunchHostFunc(CU_STREAM_LEGACY, gated, &g));
    gate_open(&g);
    CHECK_OK(cuStreamSynchronize(NULL));
    CHECK(atomic_load(&g.done) == 1);

    CHECK_OK(cuStreamDestroy_v2(a));
    CHECK_OK(cuStreamDestroy_v2(b));
}

cb_record cb_seen;

void CUDA_CB stream_cb(CUstream s, CUresult status, void *user)
{
    cb_seen.stream = s;
    cb_seen.status = status;
    cb_seen.user = user;
    record(user);
}

void test_launch_variants(void)
{
    need_context();
    CUstream s;
    CHECK_OK(cuStreamCreate(&s, 0));
    CHECK_CU(cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchHostFunc_ptsz(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchHostFunc_v2(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchHostFunc_v2_ptsz(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchHostFunc_v2(s, record, NULL, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAddCallback(s, stream_cb, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAddCallback(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);

    runs_reset();
    CHECK_OK(cuLaunchHostFunc_v2(s, record, (void *)1, 0));
    CHECK_OK(cuLaunchHostFunc_v2(s, record, (void *)2, 1)); /* spin-wait mode */
    CHECK_OK(cuLaunchHostFunc_v2_ptsz(NULL, record, (void *)3, 0));
    CHECK_OK(cuStreamAddCallback(s, stream_cb, (void *)4, 0));
    CHECK_OK(cuStreamSynchronize(s));
    CHECK_OK(cuStreamSynchronize_ptsz(NULL));
    CHECK(RUNS_ARE(1, 2, 3, 4));
    CHECK(cb_seen.stream == s && cb_seen.status == CUDA_SUCCESS &&
          cb_seen.user == (void *)4);
    CHECK_OK(cuStreamAddCallback_ptsz(NULL, stream_cb, (void *)5, 0));
    CHECK_OK(cuStreamSynchronize_ptsz(NULL));
    CHECK(cb_seen.user == (void *)5 && cb_seen.stream == NULL);
    CHECK_OK(cuStreamDestroy_v2(s));
}

/* From inside a host function the driver refuses every call but a few
 * (as the real one does), instead of deadlocking on a synchronize. */
static CUresult inner_rc[8];

static void CUDA_CB calls_from_host_fn(void *p)
{
    int v;
    const char *name;
    void *fn;
    CUcontext c;
    inner_rc[0] = cuInit(0);
    inner_rc[1] = cuDriverGetVersion(&v);
    inner_rc[2] = cuGetErrorName(CUDA_SUCCESS, &name);
    inner_rc[3] = cuGetProcAddress_v2("cuInit", &fn, 12000, 0, NULL);
    inner_rc[4] = cuCtxSetCurrent(*(CUcontext *)p);
    inner_rc[5] = cuStreamSynchronize(NULL);
    inner_rc[6] = cuLaunchHostFunc(NULL, record, (void *)77);
    inner_rc[7] = cuCtxGetCurrent(&c);
}

void test_calls_inside_host_fn(void)
{
    need_context();
    CUcontext c = g_ctx;
    runs_reset();
    CHECK_OK(cuLaunchHostFunc(NULL, calls_from_host_fn, &c));
    CHECK_OK(cuCtxSynchronize());
    for (int i = 0; i < 4; i++)
        CHECK_CU(inner_rc[i], CUDA_SUCCESS);
    for (int i = 4; i < 8; i++)
        CHECK_CU(inner_rc[i], CUDA_ERROR_NOT_PERMITTED);
    CHECK_OK(cuCtxSynchronize());
    CHECK(runs.n == 0);
}

