/*
 * End-to-end test program: enqueues good and bad host-copy records through
 * one chosen interception path, and checks what comes back, what was
 * copied, and what hcguard counted. It runs the same way against the test
 * driver (CI) and the real driver (GPU machines).
 *
 *   hc_e2e PATH SCENARIO
 *   PATH:     direct dlsym gpa1 gpa2 gpa1-self gpa2-self ptsz ptsz-direct
 *             v2 v2-ptsz, or bindings (through a stand-in of cuda.bindings'
 *             callback wrapper, the module named by HC_E2E_BINDINGS_MODULE)
 *   SCENARIO: good    good copies are exact, ordinary host functions run
 *             bad     every bad-record class: CUDA_ERROR_INVALID_VALUE in
 *                     guard mode, passed through and skipped in audit mode
 *             changed a record made bad after enqueue is skipped at run time
 *
 * Exit 0: all checks passed; 1: a check failed; 77: not applicable here
 * (no GPU, or the driver lacks the entry point).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

/* ThreadSanitizer keeps the high part of the address space for itself. */
#if defined(__SANITIZE_THREAD__)
#define HIGH_HOLE_OK 0
#else
#define HIGH_HOLE_OK 1
#endif

#define SKIP 77

typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);
typedef CUresult (*launch_v2_fn)(CUstream, CUhostFn, void *, unsigned int);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

static launch_fn launch1;
static launch_v2_fn launch2;
static CUhostFn copy_fn;
static test_stats_fn get_stats;
static int audit;

static atomic_int ordinary_runs;
static void ordinary(void *p)
{
    (void)p;
    atomic_fetch_add(&ordinary_runs, 1);
}

static CUresult launch(CUstream s, CUhostFn fn, void *user)
{
    return launch1 ? launch1(s, fn, user) : launch2(s, fn, user, 0);
}

/* ---- how the entry point is obtained ------------------------------------ */
static void *driver_handle(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "SKIP: no libcuda.so.1: %s\n", dlerror());
        exit(SKIP);
    }
    return h;
}

static void *gpa2(const char *name, int version, cuuint64_t flags)
{
    gpa_v2_fn g = (gpa_v2_fn)dlsym(driver_handle(), "cuGetProcAddress_v2");
    CHECK_MSG(g != NULL, "dlsym cuGetProcAddress_v2");
    if (!g)
        exit(1);
    void *p = NULL;
    CUdriverProcAddressQueryResult st = 99;
    CUresult r = g(name, &p, version, flags, &st);
    if (r != CUDA_SUCCESS || !p) {
        fprintf(stderr, "SKIP: cuGetProcAddress_v2(%s, %d) = %d, status %d: this driver does not have it\n", name,
                version, (int)r, (int)st);
        exit(SKIP);
    }
    CHECK_MSG(st == CU_GET_PROC_ADDRESS_SUCCESS, "symbolStatus %d for %s", (int)st, name);
    return p;
}

static void pick_path(const char *path)
{
    void *h = driver_handle();
    if (strcmp(path, "direct") == 0) {
        launch1 = cuLaunchHostFunc;
    } else if (strcmp(path, "dlsym") == 0) {
        launch1 = (launch_fn)dlsym(h, "cuLaunchHostFunc");
    } else if (strcmp(path, "bindings") == 0) {
        const char *m = getenv("HC_E2E_BINDINGS_MODULE");
        void *mod = m ? dlopen(m, RTLD_NOW | RTLD_LOCAL) : NULL;
        CHECK_MSG(mod != NULL, "HC_E2E_BINDINGS_MODULE %s: %s", m ? m : "(unset)", dlerror());
        if (!mod)
            exit(1);
        launch1 = (launch_fn)dlsym(mod, "fake_bindings_launch");
    } else if (strcmp(path, "gpa1") == 0) {
        gpa_v1_fn g = (gpa_v1_fn)dlsym(h, "cuGetProcAddress");
        void *p = NULL;
        REQUIRE_OK(g("cuLaunchHostFunc", &p, 10000, CU_GET_PROC_ADDRESS_DEFAULT));
        launch1 = (launch_fn)p;
    } else if (strcmp(path, "gpa2") == 0) {
        launch1 = (launch_fn)gpa2("cuLaunchHostFunc", 10000, CU_GET_PROC_ADDRESS_DEFAULT);
    } else if (strcmp(path, "gpa2-self") == 0) {
        /* The CUDA runtime's way: cuGetProcAddress looked up through itself. */
        gpa_v2_fn self = (gpa_v2_fn)gpa2("cuGetProcAddress", 12000, 0);
        void *p = NULL;
        CUdriverProcAddressQueryResult st;
        REQUIRE_OK(self("cuLaunchHostFunc", &p, 12000, 0, &st));
        launch1 = (launch_fn)p;
    } else if (strcmp(path, "gpa1-self") == 0) {
        gpa_v1_fn g = (gpa_v1_fn)dlsym(h, "cuGetProcAddress");
        void *self = NULL, *p = NULL;
        REQUIRE_OK(g("cuGetProcAddress", &self, 11030, 0));
        REQUIRE_OK(((gpa_v1_fn)self)("cuLaunchHostFunc", &p, 11030, 0));
        launch1 = (launch_fn)p;
    } else if (strcmp(path, "ptsz") == 0) {
        launch1 = (launch_fn)gpa2("cuLaunchHostFunc", 10000,
                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    } else if (strcmp(path, "ptsz-direct") == 0) {
        launch1 = (launch_fn)dlsym(h, "cuLaunchHostFunc_ptsz");
    } else if (strcmp(path, "v2") == 0) {
        launch2 = (launch_v2_fn)gpa2("cuLaunchHostFunc_v2", 13020, 0);
    } else if (strcmp(path, "v2-ptsz") == 0) {
        launch2 = (launch_v2_fn)gpa2("cuLaunchHostFunc_v2", 13020,
                                     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    } else {
        fprintf(stderr, "unknown path '%s'\n", path);
        exit(2);
    }
    CHECK_MSG(launch1 || launch2, "no entry point for path %s", path);
    if (!launch1 && !launch2)
        exit(1);
}

/* ---- set-up ------------------------------------------------------------ */
static CUstream stream;

static void setup(void)
{
    stream = test_context();
    copy_fn = test_copy_fn(&get_stats);
    audit = test_mode_is("audit");
    if (test_mode_is("off"))
        get_stats = NULL; /* hcguard is passive: it counts nothing */
}

static hcguard_stats stats(void)
{
    return test_stats(get_stats);
}

/* npages of read-write memory followed by a page the copy cannot write:
 * unmapped where a free address can be had far above where mmap puts
 * things (so that no mapping made meanwhile fills the hole), else a guard
 * page (a sanitizer's own mappings would fill a hole). */
static unsigned char *rw_then_end(size_t npages)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    static uintptr_t next = (uintptr_t)0x200000000000ull;
    void *want = (void *)next;
    next += 64 * pg;
    unsigned char *p = HIGH_HOLE_OK ? mmap(want, npages * pg, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                                           -1, 0)
                                    : MAP_FAILED;
    if (p == (void *)want)
        return p;
    if (p != MAP_FAILED)
        munmap(p, npages * pg);
    p = test_map((npages + 1) * pg, PROT_READ | PROT_WRITE);
    mprotect(p + npages * pg, pg, PROT_NONE);
    return p;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 131u + (i >> 7));
}

/* hcguard_get_stats writes no more than the caller's size, and refuses
 * what it cannot fill. */
static void stats_api_checks(void)
{
    hcguard_stats s;
    memset(&s, 0xa5, sizeof s);
    CHECK_MSG(get_stats(NULL, sizeof s) == -1, "hcguard_get_stats(NULL) did not fail");
    CHECK_MSG(get_stats(&s, 0) == -1, "hcguard_get_stats(size 0) did not fail");
    CHECK_MSG(s.host_fns_launched == 0xa5a5a5a5a5a5a5a5ull, "a refused call wrote the stats");
    /* A caller built when the struct ended before graph_calls_live. */
    CHECK_MSG(get_stats(&s, offsetof(hcguard_stats, graph_calls_live)) == 0, "short stats");
    CHECK_MSG(s.graph_calls_live == 0xa5a5a5a5a5a5a5a5ull, "wrote past the caller's size");
    CHECK_MSG(s.host_fns_launched != 0xa5a5a5a5a5a5a5a5ull, "short stats not filled");
}

/* ---- scenarios --------------------------------------------------------- */
static void good(void)
{
    static const size_t sizes[] = {1, 24, 4096, 1u << 20, 3u << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    hcguard_copy_record rec[N + 2];
    unsigned char *src[N], *dst[N];
    hcguard_stats before = stats();
    for (int i = 0; i < N; i++) {
        src[i] = malloc(sizes[i]);
        dst[i] = calloc(1, sizes[i]);
        fill(src[i], sizes[i], (unsigned)i);
        rec[i] = (hcguard_copy_record){(uintptr_t)dst[i], (uintptr_t)src[i], sizes[i]};
        CHECK_MSG(launch(stream, copy_fn, &rec[i]) == CUDA_SUCCESS, "good copy %zu", sizes[i]);
        CHECK_MSG(launch(stream, ordinary, NULL) == CUDA_SUCCESS, "ordinary host function");
    }
    /* A zero-byte record copies nothing, whatever its addresses. */
    rec[N] = (hcguard_copy_record){0, 0, 0};
    CHECK_MSG(launch(stream, copy_fn, &rec[N]) == CUDA_SUCCESS, "zero-byte record");
    /* Touching ranges are fine: [b, b+16) and [b+16, b+32). */
    unsigned char touch[32];
    fill(touch, 32, 7);
    unsigned char expect_touch[32];
    memcpy(expect_touch, touch, 32);
    memcpy(expect_touch, touch + 16, 16);
    rec[N + 1] = (hcguard_copy_record){(uintptr_t)touch, (uintptr_t)(touch + 16), 16};
    CHECK_MSG(launch(stream, copy_fn, &rec[N + 1]) == CUDA_SUCCESS, "adjacent ranges");
    /* Pinned host memory is host memory. */
    void *pinned = NULL;
    REQUIRE_OK(cuMemAllocHost(&pinned, 1 << 16));
    unsigned char *pdst = malloc(1 << 16);
    fill(pinned, 1 << 16, 3);
    hcguard_copy_record prec = {(uintptr_t)pdst, (uintptr_t)pinned, 1 << 16};
    CHECK_MSG(launch(stream, copy_fn, &prec) == CUDA_SUCCESS, "pinned source");
    REQUIRE_OK(cuStreamSynchronize(stream));

    for (int i = 0; i < N; i++)
        CHECK_MSG(memcmp(src[i], dst[i], sizes[i]) == 0, "copy of %zu bytes differs", sizes[i]);
    CHECK_MSG(memcmp(touch, expect_touch, 32) == 0, "adjacent copy differs");
    CHECK_MSG(memcmp(pinned, pdst, 1 << 16) == 0, "pinned copy differs");
    CHECK_MSG(atomic_load(&ordinary_runs) == N, "ordinary ran %d times, want %d",
          atomic_load(&ordinary_runs), N);
    if (get_stats) {
        stats_api_checks();
        hcguard_stats s = stats();
        uint64_t copies = N + 3, all = 2 * N + 3, bytes = 16 + (1 << 16);
        for (int i = 0; i < N; i++)
            bytes += sizes[i];
        CHECK_MSG(s.copies_launched - before.copies_launched == copies, "copies launched %llu",
              (unsigned long long)(s.copies_launched - before.copies_launched));
        CHECK_MSG(s.copies_ran - before.copies_ran == copies, "copies ran %llu",
              (unsigned long long)(s.copies_ran - before.copies_ran));
        CHECK_MSG(s.host_fns_ran - before.host_fns_ran == all, "host functions ran %llu",
              (unsigned long long)(s.host_fns_ran - before.host_fns_ran));
        CHECK_MSG(s.bytes_copied - before.bytes_copied == bytes, "bytes %llu, want %llu",
              (unsigned long long)(s.bytes_copied - before.bytes_copied),
              (unsigned long long)bytes);
        CHECK_MSG(s.rejected == before.rejected && s.skipped == before.skipped,
              "no errors expected");
    }
    cuMemFreeHost(pinned);
    free(pdst);
    for (int i = 0; i < N; i++) {
        free(src[i]);
        free(dst[i]);
    }
}

typedef struct bad_case {
    const char *name;
    hcguard_copy_record rec;
    void *user; /* record pointer when not &rec */
} bad_case;

static void bad(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    CUdeviceptr dev = 0;
    REQUIRE_OK(cuMemAlloc(&dev, 1 << 20));
    unsigned char *ro = test_map((size_t)pg, PROT_READ);
    unsigned char *none = test_map((size_t)pg, PROT_NONE);
    uintptr_t gone = NEVER_MAPPED;
    unsigned char *rw = rw_then_end(4);
    uintptr_t a = (uintptr_t)rw, b = (uintptr_t)rw + (uintptr_t)pg * 2;
    bad_case cases[] = {
        {"null-record", {0, 0, 0}, NULL},
        {"record-unreadable", {0, 0, 0}, none},
        {"null-dst", {0, b, 64}, 0},
        {"null-src", {a, 0, 64}, 0},
        {"dst-overflow", {UINTPTR_MAX - 15, b, 64}, 0},
        {"src-overflow", {a, UINTPTR_MAX - 15, 64}, 0},
        {"overlap", {a, a + 8, 16}, 0},
        {"overlap", {a + 8, a, 16}, 0},
        {"overlap", {a, a, 1}, 0},
        {"dst-unmapped", {gone, b, 64}, 0},
        {"src-unmapped", {a, gone, 64}, 0},
        {"dst-unmapped", {b + (uintptr_t)pg * 2 - 32, a, 64}, 0}, /* runs off the end */
        {"dst-not-writable", {(uintptr_t)ro, b, 64}, 0},
        {"src-not-readable", {a, (uintptr_t)none, 64}, 0},
        {"dst-device", {(uintptr_t)dev, b, 64}, 0},
        {"src-device", {a, (uintptr_t)dev, 64}, 0},
    };
    enum { NC = sizeof cases / sizeof cases[0] };
    memset(rw, 0x5a, (size_t)pg * 4);
    hcguard_stats before = stats();
    CUresult want = audit ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < NC; i++) {
        void *user = i < 2 ? cases[i].user : &cases[i].rec;
        CUresult r = launch(stream, copy_fn, user);
        CHECK_MSG(r == want, "%s (case %d): got %d, want %d", cases[i].name, i, (int)r, (int)want);
    }
    /* The stream still works after rejections. */
    CHECK_MSG(launch(stream, ordinary, NULL) == CUDA_SUCCESS, "ordinary after bad");
    REQUIRE_OK(cuStreamSynchronize(stream));
    for (long i = 0; i < pg * 4; i++)
        if (rw[i] != 0x5a) {
            CHECK_MSG(0, "a bad copy wrote to memory at offset %ld", i);
            break;
        }
    if (get_stats) {
        hcguard_stats s = stats();
        CHECK_MSG(s.rejected - before.rejected == NC, "rejected %llu, want %d",
              (unsigned long long)(s.rejected - before.rejected), NC);
        uint64_t skipped = s.skipped - before.skipped;
        CHECK_MSG(skipped == (audit ? NC : 0), "skipped %llu, want %d", (unsigned long long)skipped,
              audit ? NC : 0);
        CHECK_MSG(s.copies_ran == before.copies_ran, "a bad copy ran");
    }
    cuMemFree(dev);
}

static void changed(void)
{
    uintptr_t gone = NEVER_MAPPED;
    unsigned char src[256], dst[256];
    fill(src, sizeof src, 11);
    memset(dst, 0, sizeof dst);
    hcguard_copy_record *rec = malloc(sizeof *rec);
    *rec = (hcguard_copy_record){(uintptr_t)dst, (uintptr_t)src, sizeof src};
    hcguard_stats before = stats();
    CHECK_MSG(test_gate_close(stream, launch) == CUDA_SUCCESS, "gate");
    CHECK_MSG(launch(stream, copy_fn, rec) == CUDA_SUCCESS, "good at enqueue");
    rec->dst = gone; /* bad by the time it runs */
    test_gate_open();
    REQUIRE_OK(cuStreamSynchronize(stream));
    if (get_stats) {
        hcguard_stats s = stats();
        CHECK_MSG(s.skipped - before.skipped == 1, "skipped %llu, want 1",
              (unsigned long long)(s.skipped - before.skipped));
    }
    /* Made good again, it copies. */
    rec->dst = (uintptr_t)dst;
    CHECK_MSG(launch(stream, copy_fn, rec) == CUDA_SUCCESS, "good again");
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(memcmp(src, dst, sizeof src) == 0, "copy after the record was mended");
    free(rec);
}

/* Look-ups hcguard must pass through: versioned ones fail as they would
 * without it, and an entry point it does not wrap is handed out as one
 * thunk of the driver's function, whichever way it is asked for, that
 * behaves as the function does. */
static int passthrough_check(void)
{
    void *h = driver_handle();
    dlerror();
    CHECK_MSG(dlvsym(h, "cuLaunchHostFunc", "GLIBC_2.2.5") == NULL,
          "a versioned look-up of an unversioned driver symbol must fail");
    CHECK_MSG(dlerror() != NULL, "dlerror after a failed dlvsym");
    /* A libc function no sanitizer intercepts, at libc's base version. */
#if defined(__aarch64__)
    const char *base = "GLIBC_2.17";
#else
    const char *base = "GLIBC_2.2.5";
#endif
    CHECK_MSG(dlvsym(RTLD_DEFAULT, "gnu_get_libc_version", base) == (void *)gnu_get_libc_version,
          "dlvsym(RTLD_DEFAULT, gnu_get_libc_version@%s)", base);
    CHECK_MSG(dlvsym(RTLD_NEXT, "gnu_get_libc_version", base) == (void *)gnu_get_libc_version,
          "dlvsym(RTLD_NEXT, gnu_get_libc_version@%s)", base);
    void *init = dlsym(h, "cuInit");
    CHECK_MSG(init != NULL && ((CUresult (*)(unsigned))init)(0) == CUDA_SUCCESS,
          "cuInit through dlsym");
    CHECK_MSG(dlsym(RTLD_DEFAULT, "cuStreamSynchronize") == (void *)cuStreamSynchronize,
          "dlsym(RTLD_DEFAULT, cuStreamSynchronize) is what the program links");
    CHECK_MSG(gpa2("cuInit", 2000, 0) == init, "cuGetProcAddress_v2(cuInit) is dlsym's");
    /* Per-thread default stream variants exist from CUDA 7.0. */
    void *sync_ptsz = gpa2("cuStreamSynchronize", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    CHECK_MSG(sync_ptsz == dlsym(h, "cuStreamSynchronize_ptsz"),
          "cuGetProcAddress_v2(cuStreamSynchronize, per-thread) is dlsym's _ptsz");
    CHECK_MSG(sync_ptsz != dlsym(h, "cuStreamSynchronize"),
          "the per-thread variant is not the legacy one");
    void *missing = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    gpa_v2_fn g = (gpa_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    /* The real driver answers CUDA_SUCCESS with NULL and the status. */
    CUresult r = g("cuNoSuchFunction", &missing, 13000, 0, &st);
    CHECK_MSG((r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_FOUND) && missing == NULL &&
              st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
          "an unknown name: NULL and SYMBOL_NOT_FOUND (got %d, %p, %d)", (int)r, missing, (int)st);
    printf("dlvsym passthrough: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}

static void teardown(void)
{
    cuStreamDestroy(stream);
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("good", good),
    CHECK_SCENARIO("bad", bad),
    CHECK_SCENARIO("changed", changed),
};

/* hc_e2e PATH SCENARIO: PATH is how the program reaches the driver. */
int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hc_e2e PATH good|bad|changed\n");
        return 2;
    }
    if (strcmp(argv[1], "dlvsym") == 0)
        return passthrough_check();
    setup();
    pick_path(argv[1]);
    Dl_info di;
    if (dladdr((void *)cuInit, &di) && di.dli_fname)
        printf("driver: %s\n", di.dli_fname);
    if (getenv("HC_E2E_REQUIRE_REAL") && di.dli_fname && strstr(di.dli_fname, "fakecuda")) {
        fprintf(stderr, "SKIP: the test driver was loaded, not the real one\n");
        return SKIP;
    }
    char done[128];
    snprintf(done, sizeof done, "%s %%s", argv[1]);
    return check_scenario_main("hc_e2e", done, CHECK_CASES(scenarios), argc - 1, argv + 1, NULL,
                               teardown);
}
