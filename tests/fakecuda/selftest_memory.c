/* Self-test: device and pinned memory, copies, pointer attributes. */
#include "selftest.h"

/* ---- memory ----------------------------------------------------------- */
enum { NATTR = 9 };
typedef struct attrs {
    unsigned memtype;
    CUdeviceptr devptr;
    void *hostptr;
    unsigned managed;
    CUcontext ctx;
    CUdeviceptr start;
    size_t size;
    int ordinal;
    unsigned mapped;
} attrs;

#define UNTOUCHED_U64 0xa5a5a5a5a5a5a5a5ull

static CUresult get_attrs(const void *p, attrs *a)
{
    CUpointer_attribute which[NATTR] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
        CU_POINTER_ATTRIBUTE_HOST_POINTER,   CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_CONTEXT,        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_MAPPED};
    void *data[NATTR] = {&a->memtype, &a->devptr, &a->hostptr,
                         &a->managed, &a->ctx,    &a->start,
                         &a->size,    &a->ordinal, &a->mapped};
    memset(a, 0xa5, sizeof *a); /* so that what is written shows */
    return cuPointerGetAttributes(NATTR, which, data, (CUdeviceptr)(uintptr_t)p);
}

/* Can the host read [p, p + n)? write(2) says EFAULT, without touching it. */
static int host_readable(const void *p, size_t n)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    ssize_t w = write(fds[1], p, n);
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    if (w < 0 && err != EFAULT)
        return -1;
    return w == (ssize_t)n;
}

void test_device_memory(void)
{
    need_context();
    enum { SIZE = 4096 + 100 };
    CUdeviceptr d;
    attrs a;
    unsigned mt = 0;
    void *hp;
    static unsigned char in[SIZE], out[SIZE];

    CHECK_CU(cuMemAlloc_v2(&d, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuMemAlloc_v2(&d, SIZE));
    CHECK_OK(get_attrs((void *)(uintptr_t)(d + 10), &a));
    CHECK(a.memtype == CU_MEMORYTYPE_DEVICE);
    CHECK(a.devptr == d + 10);
    CHECK(a.hostptr == NULL);
    CHECK(a.managed == 0);
    CHECK(a.ctx == g_ctx);
    CHECK(a.start == d);
    CHECK(a.size == SIZE);
    CHECK(a.ordinal == 0 && a.mapped == 1);
    CHECK_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + SIZE - 1));
    CHECK(mt == CU_MEMORYTYPE_DEVICE);
    CHECK_CU(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d),
             CUDA_ERROR_INVALID_VALUE);
    CHECK(host_readable((void *)(uintptr_t)d, 16) == 0);
    CHECK(host_readable((void *)(uintptr_t)(d + 4096), 16) == 0);

    for (int i = 0; i < SIZE; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    CHECK_OK(cuMemcpyHtoD_v2(d, in, SIZE));
    CHECK_OK(cuMemcpyDtoH_v2(out, d, SIZE));
    CHECK(memcmp(in, out, SIZE) == 0);
    memset(out, 0, sizeof out);
    CHECK_OK(cuMemcpyDtoH_v2_ptds(out, d + 5, 10));
    CHECK(memcmp(in + 5, out, 10) == 0);
    CHECK_CU(cuMemcpyHtoD_v2(d + SIZE - 5, in, 10), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)in, out, 10),
             CUDA_ERROR_INVALID_VALUE);
    /* With unified addressing the "host" side may be device memory. */
    CHECK_OK(cuMemcpyDtoH_v2((void *)(uintptr_t)(d + 1000), d, 10));
    memset(out, 0, sizeof out);
    CHECK_OK(cuMemcpyDtoH_v2(out, d + 1000, 10));
    CHECK(memcmp(in, out, 10) == 0);
    CHECK_OK(cuMemcpyHtoD_v2(d + 2000, (void *)(uintptr_t)d, 10));
    CHECK_CU(cuMemcpyHtoD_v2(d, (void *)(uintptr_t)(d + SIZE - 5), 10),
             CUDA_ERROR_INVALID_VALUE);

    CHECK_CU(cuMemFree_v2(d + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeHost((void *)(uintptr_t)d), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuMemFree_v2(d));
    CHECK_OK(get_attrs((void *)(uintptr_t)d, &a));
    CHECK(a.memtype == 0 && a.ctx == NULL);
    CHECK_CU(cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuMemFree_v2(0));
}

static unsigned char *g_pinned;

static void CUDA_CB slow_fill(void *p)
{
    sleep_ms(30);
    memset(g_pinned, (int)(intptr_t)p, 64);
}

void test_host_memory(void)
{
    need_context();
    void *h = NULL, *h2 = NULL;
    attrs a;
    int x = 0;
    CUdeviceptr d;

    CHECK_OK(cuMemAllocHost_v2(&h, 1000));
    CHECK_OK(get_attrs((char *)h + 8, &a));
    CHECK(a.memtype == CU_MEMORYTYPE_HOST);
    CHECK(a.hostptr == (char *)h + 8);
    CHECK(a.devptr == (CUdeviceptr)(uintptr_t)h + 8);
    CHECK(a.start == (CUdeviceptr)(uintptr_t)h && a.size == 1000);
    CHECK(a.ctx == g_ctx && a.mapped == 1);
    memset(h, 0x5a, 1000);
    CHECK(host_readable(h, 1000) == 1);

    CHECK_CU(cuMemHostAlloc(&h2, 100, 0x100), CUDA_ERROR_INVALID_VALUE);
    h2 = (void *)1;
    CHECK_OK(cuMemAllocHost_v2(&h2, 0)); /* success, and no memory */
    CHECK(h2 == NULL);
    CHECK_OK(cuMemFreeHost(NULL));
    CHECK_OK(cuMemHostAlloc(&h2, 100, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CHECK_OK(get_attrs(h2, &a));
    CHECK(a.memtype == CU_MEMORYTYPE_HOST);

    /* A synchronous copy waits for work already on the default stream. */
    g_pinned = h;
    CHECK_OK(cuMemAlloc_v2(&d, 64));
    CHECK_OK(cuLaunchHostFunc(NULL, slow_fill, (void *)0x3c));
    CHECK_OK(cuMemcpyHtoD_v2(d, h, 64));
    unsigned char back[64];
    CHECK_OK(cuMemcpyDtoH_v2(back, d, 64));
    CHECK(back[0] == 0x3c && back[63] == 0x3c);
    CHECK_OK(cuMemFree_v2(d));

    /* Memory the driver does not know: SUCCESS in the plural form, with the
     * real driver's values (zero but for the host pointer and the ordinal,
     * the range not written); an error in the singular form. */
    CHECK_OK(get_attrs(&x, &a));
    CHECK(a.memtype == 0 && a.devptr == 0 && a.managed == 0 && a.ctx == NULL &&
          a.mapped == 0);
    CHECK(a.hostptr == &x && a.ordinal == -2);
    CHECK(a.start == UNTOUCHED_U64 && a.size == UNTOUCHED_U64);
    unsigned mt;
    CHECK_CU(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   (CUdeviceptr)(uintptr_t)&x),
             CUDA_ERROR_INVALID_VALUE);

    CHECK_OK(cuMemFreeHost(h));
    CHECK_OK(cuMemFreeHost(h2));
    CHECK_CU(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(get_attrs(h, &a));
    CHECK(a.memtype == 0);
}

