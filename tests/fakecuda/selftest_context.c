/* Self-test: before cuInit, init, devices, contexts, error names. */
#include "selftest.h"

/* ---- init, devices, contexts ------------------------------------------ */
void test_before_init(void)
{
    int v = 0, n = 0;
    void *p = NULL;
    CHECK_OK(cuDriverGetVersion(&v));
    CHECK(v == 13020);
    CHECK_CU(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cuLaunchHostFunc(NULL, record, NULL), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cuMemAlloc_v2((CUdeviceptr *)&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    /* The CUDA runtime looks entry points up before cuInit. */
    CHECK_OK(cuGetProcAddress_v2("cuInit", &p, 12000, 0, NULL));
    CHECK(p == (void *)cuInit);
    CHECK_CU(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

CUcontext g_ctx;

/* Device 0's primary context, current on this thread: what every case
 * after init_and_context needs. That case makes it; a case run alone
 * makes it here. */
void need_context(void)
{
    if (g_ctx)
        return;
    REQUIRE_OK(cuInit(0));
    REQUIRE_OK(cuDevicePrimaryCtxRetain(&g_ctx, 0));
    REQUIRE_OK(cuCtxSetCurrent(g_ctx));
}

void test_init_and_context(void)
{
    int n = 0;
    CUdevice dev = -1;
    char name[64] = "";
    CUcontext c = NULL, made = NULL;
    CUdeviceptr d;
    CHECK_OK(cuInit(0));
    CHECK_OK(cuDeviceGetCount(&n));
    CHECK(n == 1);
    CHECK_CU(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    CHECK_OK(cuDeviceGet(&dev, 0));
    CHECK(dev == 0);
    CHECK_OK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(strstr(name, "fakecuda") != NULL);
    CHECK_CU(cuDeviceGetName(name, 0, dev), CUDA_ERROR_INVALID_VALUE);

    /* Without a current context the default streams and allocation fail. */
    CHECK_OK(cuCtxGetCurrent(&c));
    CHECK(c == NULL);
    CHECK_CU(cuLaunchHostFunc(NULL, record, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuMemAlloc_v2(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);

    CHECK_OK(cuCtxCreate_v2(&made, 0, 0));
    CHECK_OK(cuCtxGetCurrent(&c));
    CHECK(c == made);
    CHECK_OK(cuCtxDestroy_v2(made));
    CHECK_OK(cuCtxGetCurrent(&c));
    CHECK(c == NULL);
    CHECK_CU(cuCtxSetCurrent(made), CUDA_ERROR_INVALID_CONTEXT);

    CHECK_OK(cuDevicePrimaryCtxRetain(&g_ctx, 0));
    CHECK_CU(cuCtxDestroy_v2(g_ctx), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_OK(cuCtxSetCurrent(g_ctx));
    CHECK_OK(cuCtxGetCurrent(&c));
    CHECK(c == g_ctx);
}

void test_error_names(void)
{
    const char *s = NULL;
    CHECK_OK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    CHECK(s && strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0);
    CHECK_OK(cuGetErrorString(CUDA_ERROR_NOT_READY, &s));
    CHECK(s && *s);
    CHECK_CU(cuGetErrorName((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    CHECK(s == NULL);
}

