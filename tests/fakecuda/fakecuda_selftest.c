/*
 * Self-test of the test driver in tests/fakecuda (a libcuda.so.1 for CI
 * machines without a GPU). It checks the behaviour hcguard's tests rely
 * on, so that a wrong model fails here rather than passing them silently.
 * It always runs against the test driver (its build RPATH points there).
 *
 * Run with no arguments. "--exit-with-pending-work" is the child mode of
 * the exit test.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* plain, unrenamed driver prototypes */
#include <cuda.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CUDA 13.2 entry points, absent from the 13.0 cuda.h. */
CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn,
                                     void *userData, unsigned int syncMode);
CUresult CUDAAPI cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn,
                                          void *userData, unsigned int syncMode);
CUresult CUDAAPI cuGraphNodeGetParams(CUgraphNode hNode,
                                      CUgraphNodeParams *nodeParams);

extern char **environ;

#include "../common/check.h"

/* ---- what host functions did ------------------------------------------ */
/* Written on the callback thread, read after a synchronize. */
#define MAX_RUNS 512
static struct {
    int n;
    intptr_t ids[MAX_RUNS];
    pthread_t thread[MAX_RUNS];
} runs;

static void CUDA_CB record(void *p)
{
    if (runs.n < MAX_RUNS) {
        runs.ids[runs.n] = (intptr_t)p;
        runs.thread[runs.n] = pthread_self();
    }
    runs.n++;
}

static void runs_reset(void) { memset(&runs, 0, sizeof runs); }

/* The last runs were exactly ids[0..n). */
static int runs_are(const intptr_t *ids, int n)
{
    if (runs.n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (runs.ids[i] != ids[i])
            return 0;
    return 1;
}

#define RUNS_ARE(...)                                                   \
    runs_are((const intptr_t[]){__VA_ARGS__},                           \
             (int)(sizeof((const intptr_t[]){__VA_ARGS__}) / sizeof(intptr_t)))

/* A host function that blocks until the gate opens, then takes 50 ms. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, started;
    atomic_int done;
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = g->started = 0;
    atomic_store(&g->done, 0);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait_started(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->started)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void CUDA_CB gated(void *p)
{
    gate *g = p;
    pthread_mutex_lock(&g->mu);
    g->started = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    sleep_ms(50);
    atomic_store(&g->done, 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- init, devices, contexts ------------------------------------------ */
static void test_before_init(void)
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

static CUcontext g_ctx;

/* Device 0's primary context, current on this thread: what every case
 * after init_and_context needs. That case makes it; a case run alone
 * makes it here. */
static void need_context(void)
{
    if (g_ctx)
        return;
    REQUIRE_OK(cuInit(0));
    REQUIRE_OK(cuDevicePrimaryCtxRetain(&g_ctx, 0));
    REQUIRE_OK(cuCtxSetCurrent(g_ctx));
}

static void test_init_and_context(void)
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

static void test_error_names(void)
{
    const char *s = NULL;
    CHECK_OK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    CHECK(s && strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0);
    CHECK_OK(cuGetErrorString(CUDA_ERROR_NOT_READY, &s));
    CHECK(s && *s);
    CHECK_CU(cuGetErrorName((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    CHECK(s == NULL);
}

/* ---- host functions and streams --------------------------------------- */
static void test_order_and_thread(void)
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

static void test_synchronize_waits(void)
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

static struct {
    CUstream stream;
    CUresult status;
    void *user;
} cb_seen;

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *user)
{
    cb_seen.stream = s;
    cb_seen.status = status;
    cb_seen.user = user;
    record(user);
}

static void test_launch_variants(void)
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

static void test_calls_inside_host_fn(void)
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

/* ---- cuGetProcAddress ------------------------------------------------- */
static void *driver_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h);
    return p;
}

/* Look name up through _v2 at version v with flags: the pointer, or NULL
 * with the reason in *st. A valid query always returns CUDA_SUCCESS. */
static void *gpa(const char *name, int v, cuuint64_t flags,
                 CUdriverProcAddressQueryResult *st)
{
    void *p = (void *)1;
    *st = (CUdriverProcAddressQueryResult)99;
    CHECK_OK(cuGetProcAddress_v2(name, &p, v, flags, st));
    CHECK((p != NULL) == (*st == CU_GET_PROC_ADDRESS_SUCCESS));
    return p;
}

static void test_proc_address(void)
{
    need_context();
    const cuuint64_t PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const cuuint64_t LEGACY = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    const cuuint64_t BOTH = PTDS | LEGACY;
    CUdriverProcAddressQueryResult st;
    void *p;

    CHECK(gpa("cuLaunchHostFunc", 12000, 0, &st) == driver_sym("cuLaunchHostFunc"));
    CHECK(gpa("cuLaunchHostFunc", 10000, LEGACY, &st) ==
          driver_sym("cuLaunchHostFunc"));
    CHECK(gpa("cuLaunchHostFunc", 10000, PTDS, &st) ==
          driver_sym("cuLaunchHostFunc_ptsz"));
    CHECK(gpa("cuLaunchHostFunc", 12000, BOTH, &st) ==
          driver_sym("cuLaunchHostFunc_ptsz"));
    CHECK(gpa("cuLaunchHostFunc", 9020, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(gpa("cuLaunchHostFunc_v2", 13010, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(gpa("cuLaunchHostFunc_v2", 13020, 0, &st) ==
          driver_sym("cuLaunchHostFunc_v2"));
    CHECK(gpa("cuLaunchHostFunc_v2", 13020, PTDS, &st) ==
          driver_sym("cuLaunchHostFunc_v2_ptsz"));
    CHECK(gpa("cuGetProcAddress", 11030, 0, &st) == driver_sym("cuGetProcAddress"));
    CHECK(gpa("cuGetProcAddress", 12000, 0, &st) ==
          driver_sym("cuGetProcAddress_v2"));
    CHECK(gpa("cuMemAlloc", 3020, 0, &st) == driver_sym("cuMemAlloc_v2"));
    CHECK(gpa("cuMemcpyHtoD", 7000, PTDS, &st) == driver_sym("cuMemcpyHtoD_v2_ptds"));
    /* A per-thread variant has its own first version: no fallback below it. */
    CHECK(gpa("cuStreamSynchronize", 2000, LEGACY, &st) ==
          driver_sym("cuStreamSynchronize"));
    CHECK(gpa("cuStreamSynchronize", 2000, PTDS, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(gpa("cuStreamSynchronize", 7000, PTDS, &st) ==
          driver_sym("cuStreamSynchronize_ptsz"));
    CHECK(gpa("cuInit", 2000, PTDS, &st) == driver_sym("cuInit"));
    CHECK(gpa("cuStreamGetCaptureInfo", 12030, PTDS, &st) ==
          driver_sym("cuStreamGetCaptureInfo_v3_ptsz"));
    CHECK(gpa("cuStreamGetCaptureInfo", 11030, 0, &st) ==
          driver_sym("cuStreamGetCaptureInfo_v2"));
    CHECK(gpa("cuGraphInstantiate", 12000, 0, &st) == driver_sym("cuGraphInstantiate_v2"));
    CHECK(gpa("cuGraphInstantiateWithFlags", 11040, 0, &st) ==
          driver_sym("cuGraphInstantiateWithFlags"));
    CHECK(gpa("cuGraphExecUpdate", 12000, 0, &st) == driver_sym("cuGraphExecUpdate_v2"));
    CHECK(gpa("cuGraphExecUpdate", 11000, 0, &st) == driver_sym("cuGraphExecUpdate"));
    CHECK(gpa("cuGraphAddNode", 12030, 0, &st) == driver_sym("cuGraphAddNode_v2"));
    CHECK(gpa("cuCtxSynchronize", 13000, 0, &st) == driver_sym("cuCtxSynchronize_v2"));
    CHECK(gpa("cuGraphNodeGetParams", 13020, 0, &st) ==
          driver_sym("cuGraphNodeGetParams"));
    /* The 13.0 cuda.h maps cuStreamGetCaptureInfo to _v3. */
    CHECK(driver_sym("cuStreamGetCaptureInfo_v3") != NULL);
    CHECK(gpa("cuStreamGetCaptureInfo", 13000, 0, &st) ==
          driver_sym("cuStreamGetCaptureInfo_v3"));
    CHECK(gpa("cuStreamGetCaptureInfo", 10010, 0, &st) ==
          driver_sym("cuStreamGetCaptureInfo"));
    static const char *const uobj_fns[] = {
        "cuUserObjectCreate", "cuUserObjectRetain", "cuUserObjectRelease",
        "cuGraphRetainUserObject", "cuGraphReleaseUserObject"};
    for (size_t i = 0; i < sizeof uobj_fns / sizeof uobj_fns[0]; i++) {
        CHECK(driver_sym(uobj_fns[i]) != NULL);
        CHECK(gpa(uobj_fns[i], 11030, 0, &st) == driver_sym(uobj_fns[i]));
        CHECK(gpa(uobj_fns[i], 13000, PTDS, &st) == driver_sym(uobj_fns[i]));
        CHECK(gpa(uobj_fns[i], 11020, 0, &st) == NULL);
        CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    }
    /* A variant's own name is not a base name. */
    CHECK(gpa("cuMemAlloc_v2", 13020, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(gpa("cuNoSuchEntryPoint", 13020, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

    /* Bad queries: nothing is written. */
    p = (void *)1;
    st = (CUdriverProcAddressQueryResult)99;
    CHECK_CU(cuGetProcAddress_v2("cuInit", &p, 13030, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK(p == (void *)1 && st == (CUdriverProcAddressQueryResult)99);
    CHECK_CU(cuGetProcAddress_v2("cuInit", &p, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGetProcAddress_v2(NULL, &p, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGetProcAddress_v2("cuInit", &p, 12000, 0, NULL)); /* status optional */

    /* v1: same table, CUDA_ERROR_NOT_FOUND and *pfn untouched on a miss. */
    p = (void *)1;
    CHECK_CU(cuGetProcAddress("cuLaunchHostFunc", &p, 9000, 0), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuGetProcAddress("cuNoSuchEntryPoint", &p, 12000, 0), CUDA_ERROR_NOT_FOUND);
    CHECK(p == (void *)1);
    CHECK_OK(cuGetProcAddress("cuStreamQuery", &p, 12000, PTDS));
    CHECK(p == driver_sym("cuStreamQuery_ptsz"));
    CHECK(driver_sym("cuStreamQuery_ptsz") == (void *)cuStreamQuery_ptsz);
}

/* Every function the library exports must be reachable through
 * cuGetProcAddress_v2 at some version and flag, and nothing but driver
 * entry points may be exported. Reads the library's .dynsym. */
static int findable(const char *name, void *addr)
{
    static const int versions[] = {2000,  2020,  3020,  4000,  5000,  6000,  7000,
                                   10000, 10010, 10020, 11000, 11030, 11040, 12000,
                                   12020, 12030, 12050, 13000, 13020};
    char base[3][128];
    snprintf(base[0], sizeof base[0], "%s", name);
    snprintf(base[1], sizeof base[1], "%s", name);
    size_t n = strlen(base[1]);
    if (n > 5 && (!strcmp(base[1] + n - 5, "_ptsz") || !strcmp(base[1] + n - 5, "_ptds")))
        base[1][n - 5] = '\0';
    snprintf(base[2], sizeof base[2], "%s", base[1]);
    char *v = strrchr(base[2], '_');
    if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
        *v = '\0';
    for (int b = 0; b < 3; b++)
        for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
            for (cuuint64_t f = 1; f <= 2; f++) {
                void *p = NULL;
                if (cuGetProcAddress_v2(base[b], &p, versions[i], f, NULL) ==
                        CUDA_SUCCESS && p == addr)
                    return 1;
            }
    return 0;
}

static void test_exports(void)
{
    need_context();
    Dl_info info;
    CHECK(dladdr((void *)cuInit, &info) != 0);
    int fd = open(info.dli_fname, O_RDONLY);
    struct stat sb;
    CHECK(fd >= 0 && fstat(fd, &sb) == 0);
    if (fd < 0)
        return;
    const unsigned char *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    CHECK(map != MAP_FAILED && memcmp(map, ELFMAG, SELFMAG) == 0);
    if (map == MAP_FAILED)
        return;
    const ElfW(Ehdr) *eh = (const void *)map;
    const ElfW(Shdr) *sh = (const void *)(map + eh->e_shoff);
    int funcs = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const ElfW(Sym) *sym = (const void *)(map + sh[i].sh_offset);
        const char *str = (const char *)(map + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
            const char *name = str + sym[k].st_name;
            if (sym[k].st_shndx == SHN_UNDEF || !*name)
                continue;
            int is_fn = ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC;
            if (!is_fn || strncmp(name, "cu", 2) != 0) {
                fprintf(stderr, "unexpected export: %s\n", name);
                CHECK(!"only driver entry points are exported");
                continue;
            }
            funcs++;
            void *addr = driver_sym(name);
            if (!findable(name, addr)) {
                fprintf(stderr, "not found through cuGetProcAddress: %s\n", name);
                CHECK(!"every export is reachable through cuGetProcAddress");
            }
        }
    }
    CHECK(funcs > 50);
    munmap((void *)map, (size_t)sb.st_size);
}

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

static void test_device_memory(void)
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

static void test_host_memory(void)
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

/* ---- graphs ----------------------------------------------------------- */
static CUgraphExec instantiate(CUgraph gr)
{
    CUgraphExec e = NULL;
    CHECK_OK(cuGraphInstantiateWithFlags(&e, gr, 0));
    return e;
}

static void launch_and_wait(CUgraphExec e, CUstream s)
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

static void test_graphs(void)
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
    CHECK_OK(cuGraphLaunch(inner, s));
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

static void test_capture(void)
{
    need_context();
    CUstream s;
    CHECK_OK(cuStreamCreate(&s, 0));
    test_capture_basic(s);
    test_capture_invalidated(s);
    test_capture_ctx_sync(s);
    test_capture_threads(s);
    /* Destroying a stream mid-capture drops the capture. */
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_OK(cuLaunchHostFunc(s, record, NULL));
    CHECK_OK(cuStreamDestroy_v2(s));
    CHECK_OK(cuCtxSynchronize());
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

/* ---- user objects ----------------------------------------------------- */
/* What one user object's destructor saw. Written on the callback thread;
 * runs is the last write, and the reader waits for it. */
typedef struct uo {
    atomic_int runs;
    pthread_t thread;
    CUresult inner;   /* a CUDA call from the destructor */
    gate *after;      /* if set: a host function that must have finished */
    int after_done;
} uo;

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

static CUuserObject uo_create(uo *u, gate *after, unsigned refs)
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
static int uo_runs_are(uo *u, int n)
{
    for (int i = 0; i < 5000 && atomic_load(&u->runs) < n; i++)
        sleep_ms(1);
    CUresult r1 = cuLaunchHostFunc(uo_stream(), noop, NULL);
    CUresult r2 = cuStreamSynchronize(uo_stream());
    return r1 == CUDA_SUCCESS && r2 == CUDA_SUCCESS && atomic_load(&u->runs) == n;
}

/* The thread that runs host functions. */
static pthread_t callback_thread(void)
{
    runs_reset();
    CHECK_OK(cuLaunchHostFunc(uo_stream(), record, NULL));
    CHECK_OK(cuStreamSynchronize(uo_stream()));
    return runs.thread[0];
}

static CUgraph one_node_graph(CUhostFn fn, void *user)
{
    CUgraph gr;
    CUgraphNode n;
    CUDA_HOST_NODE_PARAMS p = {fn, user};
    CHECK_OK(cuGraphCreate(&gr, 0));
    CHECK_OK(cuGraphAddHostNode(&n, gr, NULL, 0, &p));
    return gr;
}

static void test_uobj_bad_input(void)
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
static void test_uobj_caller_refs(void)
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

static void test_uobj_graph(void)
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
static void test_uobj_clone(void)
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

static void test_uobj_capture(void)
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
     * copies of the exec's references. */
    CUgraph src = one_node_graph(record, (void *)12);
    o = uo_create(&x, NULL, 1);
    CHECK_OK(cuGraphRetainUserObject(src, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    e = instantiate(src);
    CHECK_OK(cuGraphDestroy(src));
    CHECK_OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_OK(cuGraphLaunch(e, s));
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

/* The cases above that take a stream, each on a stream of its own. */
#define ON_A_STREAM(name)                                                    \
    static void test_##name(void)                                            \
    {                                                                        \
        CUstream s;                                                          \
        need_context();                                                      \
        CHECK_OK(cuStreamCreate(&s, 0));                                     \
        name##_on(s);                                                        \
        CHECK_OK(cuStreamDestroy_v2(s));                                     \
    }
ON_A_STREAM(graph_params)
ON_A_STREAM(uobj_exec)
ON_A_STREAM(uobj_child)
ON_A_STREAM(uobj_queued_launch)
ON_A_STREAM(uobj_update)

/* ---- exit with work still queued -------------------------------------- */
static gate g_forever;

static int exit_child(void)
{
    CUcontext c;
    alarm(20); /* a hang at exit fails the parent's check */
    gate_init(&g_forever);
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 2;
    if (cuLaunchHostFunc(NULL, gated, &g_forever) ||
        cuLaunchHostFunc(NULL, record, (void *)1))
        return 3;
    gate_wait_started(&g_forever); /* the callback thread is now stuck */
    return 0;
}

static void test_exit_with_pending_work(void)
{
    char *argv[] = {"fakecuda_selftest", "--exit-with-pending-work", NULL};
    pid_t pid;
    int status = 0;
    double t0 = now_s();
    CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) == 0);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(now_s() - t0 < 10.0);
}

static const check_case cases[] = {
    CHECK_CASE(before_init),
    CHECK_CASE(init_and_context),
    CHECK_CASE(error_names),
    CHECK_CASE(order_and_thread),
    CHECK_CASE(synchronize_waits),
    CHECK_CASE(launch_variants),
    CHECK_CASE(calls_inside_host_fn),
    CHECK_CASE(proc_address),
    CHECK_CASE(exports),
    CHECK_CASE(device_memory),
    CHECK_CASE(host_memory),
    CHECK_CASE(graphs),
    CHECK_CASE(capture),
    CHECK_CASE(graph_params),
    CHECK_CASE(uobj_bad_input),
    CHECK_CASE(uobj_caller_refs),
    CHECK_CASE(uobj_graph),
    CHECK_CASE(uobj_clone),
    CHECK_CASE(uobj_exec),
    CHECK_CASE(uobj_child),
    CHECK_CASE(uobj_capture),
    CHECK_CASE(uobj_queued_launch),
    CHECK_CASE(uobj_update),
    CHECK_CASE(exit_with_pending_work),
};

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--exit-with-pending-work") == 0)
        return exit_child();
    /* LD_LIBRARY_PATH outranks the run path: on a GPU machine it may name
     * the real driver's directory. This tests the test driver only. */
    Dl_info self;
    if (!dladdr((void *)cuInit, &self) || !self.dli_fname ||
        !strstr(self.dli_fname, "fakecuda")) {
        printf("SKIP: libcuda.so.1 here is %s, not the test driver\n",
               self.dli_fname ? self.dli_fname : "unknown");
        return 77;
    }
    return check_main("fakecuda_selftest", CHECK_CASES(cases), argc, argv);
}
