/*
 * hcg_recognize: hcguard_host_copy, registered functions, names from
 * HCGUARD_COPY_FN (static and dynamic symbols), a fake cuda.core module
 * under the paths wheels use (and under paths it must not match), its
 * stripped copy, the cache, and concurrent use.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcg.h"
#include "../common/check.h"

#define CHECK_KIND(fn, want)                                                 \
    do {                                                                     \
        hcg_fnkind got_ = hcg_recognize(fn);                                 \
        if (got_ != (want))                                                  \
            check_fail(__FILE__, __LINE__, "hcg_recognize(%s) == %s (got %s, want %s)", \
                       #fn, #want, hcg_fnkind_name(got_), hcg_fnkind_name(want)); \
    } while (0)

#define PYMOD(dir) HCG_PYMOD_DIR "/" dir "/" HCG_PYMOD_FILE
#define STRIPPED HCG_PYMOD_STRIPPED_DIR "/cuda/core/" HCG_PYMOD_FILE
#define COPY_NAME "__pyx_f_4cuda_4core_4cu13_14_host_callback__host_copy"

/* Set before the configuration is first read. */
#define COPY_FNS " hcg_test_user_copy , fake_user_copy"

__attribute__((noinline)) static void hcg_test_user_copy(void *rec)
{
    const hcguard_copy_record *r = rec;
    if (r->nbytes)
        memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}

__attribute__((noinline)) static void hcg_test_ordinary(void *arg)
{
    *(volatile int *)arg += 1;
}

typedef struct module {
    void *handle;
    void *copy;  /* __pyx_f_..._host_callback__host_copy */
    void *plain; /* _host_copy */
    void *near;  /* __pyx_f_..._host_callback_host_copy: not a copy */
    void *other; /* another static function */
    void *user;  /* fake_user_copy, exported */
} module;

static module open_module(const char *path)
{
    module m = {0};
    m.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(m.handle != NULL, "dlopen %s: %s", path, dlerror());
    if (!m.handle)
        return m;
    void *(*get)(void);
    *(void **)&get = dlsym(m.handle, "fake_host_copy_fn");
    m.copy = get ? get() : NULL;
    *(void **)&get = dlsym(m.handle, "fake_other_fn");
    m.other = get ? get() : NULL;
    *(void **)&get = dlsym(m.handle, "fake_plain_copy_fn");
    m.plain = get ? get() : NULL;
    *(void **)&get = dlsym(m.handle, "fake_near_copy_fn");
    m.near = get ? get() : NULL;
    m.user = dlsym(m.handle, "fake_user_copy");
    CHECK(m.copy && m.plain && m.near && m.other && m.user);
    return m; /* never closed: cached answers stay valid */
}

static void test_names(void)
{
    CHECK_STR(hcg_fnkind_name(HCG_FN_ORDINARY), "ordinary");
    CHECK_STR(hcg_fnkind_name(HCG_FN_COPY_HCGUARD), "hcguard_host_copy");
    CHECK_STR(hcg_fnkind_name(HCG_FN_COPY_CUDA_CORE), "cuda.core _host_copy");
    CHECK_STR(hcg_fnkind_name(HCG_FN_COPY_USER), "user (HCGUARD_COPY_FN)");
    CHECK_STR(hcg_fnkind_name(HCG_FN_COPY_REGISTERED),
              "registered (hcguard_register_copy_fn)");
    CHECK_STR(hcg_fnkind_name(HCG_FN_KIND_COUNT), "unknown");
    CHECK(!hcg_fnkind_is_copy(HCG_FN_ORDINARY) && hcg_fnkind_is_copy(HCG_FN_COPY_USER));
}

static void test_builtin(void)
{
    uint64_t m = hcg_recognize_misses();
    CHECK_KIND(NULL, HCG_FN_ORDINARY);
    CHECK_KIND((void *)hcguard_host_copy, HCG_FN_COPY_HCGUARD);
    CHECK(hcg_recognize_misses() == m); /* neither needs a look-up */
}

static void test_user(void)
{
    CHECK(hcg_config_get()->n_copy_fns == 2);
    CHECK_KIND((void *)hcg_test_user_copy, HCG_FN_COPY_USER);
    /* Only the exact start of the named function counts. */
    CHECK_KIND((char *)(void *)hcg_test_user_copy + 1, HCG_FN_ORDINARY);
    CHECK_KIND((void *)hcg_test_ordinary, HCG_FN_ORDINARY);
    int v = 0;
    hcg_test_ordinary(&v);
    CHECK(v == 1);
}

static void test_cuda_core(void)
{
    const char *recognised[] = {PYMOD("cuda/core/cu13"), PYMOD("cuda/core"),
                                PYMOD("cuda/core/graph")};
    for (size_t i = 0; i < 3; i++) {
        module m = open_module(recognised[i]);
        CHECK_KIND(m.copy, HCG_FN_COPY_CUDA_CORE);
        CHECK_KIND(m.plain, HCG_FN_COPY_CUDA_CORE);
        CHECK_KIND(m.near, HCG_FN_ORDINARY);
        CHECK_KIND(m.other, HCG_FN_ORDINARY);
        CHECK_KIND(m.user, HCG_FN_COPY_USER); /* dynamic symbol, named */
    }
    /* The same file elsewhere, or under another name: the symbol alone is
     * not enough. */
    const char *elsewhere[] = {
        PYMOD("xcuda/core"), PYMOD("other"),
        HCG_PYMOD_DIR "/cuda/core/_not_callback.cpython-311-x86_64-linux-gnu.so",
        PYMOD("cuda/core") ".orig",
    };
    for (size_t i = 0; i < sizeof elsewhere / sizeof elsewhere[0]; i++) {
        module m = open_module(elsewhere[i]);
        CHECK_KIND(m.copy, HCG_FN_ORDINARY);
        CHECK_KIND(m.plain, HCG_FN_ORDINARY);
        CHECK_KIND(m.user, HCG_FN_COPY_USER);
    }
}

static void test_module_copies(void)
{
    module m = open_module(PYMOD("cuda/core/cu13"));
    if (!m.copy)
        return;
    char src[32] = "host copy through the module", dst[32] = {0};
    hcguard_copy_record r = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    ((void (*)(void *))m.copy)(&r);
    CHECK(memcmp(dst, src, sizeof src) == 0);
}

static void test_stripped(void)
{
    module m = open_module(STRIPPED);
    CHECK_KIND(m.copy, HCG_FN_ORDINARY); /* cached as ordinary now */
    CHECK_KIND(m.user, HCG_FN_COPY_USER); /* .dynsym survives stripping */
    CHECK(hcguard_register_copy_fn(m.copy) == 0);
    CHECK_KIND(m.copy, HCG_FN_COPY_REGISTERED);
    CHECK(hcguard_register_copy_fn(m.copy) == 0); /* again: still fine */
    CHECK_KIND(m.copy, HCG_FN_COPY_REGISTERED);
    CHECK(hcguard_register_copy_fn(NULL) == -1);
    CHECK_KIND(m.other, HCG_FN_ORDINARY);
}

/* Found by .symtab and registered by the Python hook too: the symbol table
 * is what recognised it, and the summary says both. */
static void test_registered_and_symtab(void)
{
    module m = open_module(PYMOD("cuda/core/graph"));
    CHECK(hcguard_register_copy_fn(m.copy) == 0);
    CHECK_KIND(m.copy, HCG_FN_COPY_CUDA_CORE);
    CHECK_STR(hcg_copy_fn_how((uintptr_t)m.copy, HCG_FN_COPY_CUDA_CORE),
              "recognised by symbol table (registered too)");
    module s = open_module(STRIPPED);
    /* Registered and seen by test_stripped too; again here, so that this
     * case stands alone. */
    CHECK(hcguard_register_copy_fn(s.copy) == 0);
    CHECK_KIND(s.copy, HCG_FN_COPY_REGISTERED);
    CHECK_STR(hcg_copy_fn_how((uintptr_t)s.copy, HCG_FN_COPY_REGISTERED),
              "registered (Python hook or hcguard_register_copy_fn)");
    CHECK_STR(hcg_copy_fn_how((uintptr_t)m.user, HCG_FN_COPY_USER),
              "recognised by name (--copy-fn)");
    CHECK_STR(hcg_copy_fn_how((uintptr_t)hcguard_host_copy, HCG_FN_COPY_HCGUARD),
              "hcguard's own");
    /* What the summary lists under each kind: the functions seen. */
    uintptr_t fns[64];
    size_t n = hcg_copy_fns_of(HCG_FN_COPY_REGISTERED, fns, 64);
    int found = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        found += fns[i] == (uintptr_t)s.copy;
        CHECK(fns[i] != (uintptr_t)m.copy);
    }
    CHECK(found == 1);
    n = hcg_copy_fns_of(HCG_FN_COPY_CUDA_CORE, fns, 64);
    found = 0;
    for (size_t i = 0; i < n && i < 64; i++)
        found += fns[i] == (uintptr_t)m.copy;
    CHECK(found == 1);
    CHECK(hcg_copy_fns_of(HCG_FN_COPY_HCGUARD, fns, 1) == 1);
    CHECK(fns[0] == (uintptr_t)hcguard_host_copy);
    CHECK(hcg_copy_fns_of(HCG_FN_COPY_CUDA_CORE, fns, 0) >= 1); /* counts past max */
}

static void test_symbolize(void)
{
    char name[256], obj[4096];
    CHECK(hcg_symbolize((void *)hcg_test_user_copy, name, sizeof name, obj, sizeof obj) == 0);
    CHECK_STR(name, "hcg_test_user_copy");
    CHECK(obj[0] != '\0');
    CHECK(hcg_symbolize((char *)(void *)hcg_test_user_copy + 2, name, sizeof name, NULL, 0) == 0);
    CHECK_STR(name, "hcg_test_user_copy+0x2");

    module m = open_module(PYMOD("cuda/core/cu13"));
    CHECK(hcg_symbolize(m.copy, name, sizeof name, obj, sizeof obj) == 0);
    CHECK_STR(name, COPY_NAME);
    CHECK_STR(obj, PYMOD("cuda/core/cu13"));
    CHECK(hcg_symbolize(m.user, name, sizeof name, obj, sizeof obj) == 0);
    CHECK_STR(name, "fake_user_copy");

    module s = open_module(STRIPPED);
    CHECK(hcg_symbolize(s.copy, name, sizeof name, obj, sizeof obj) == -1);
    CHECK_STR(obj, STRIPPED);
    /* Without .symtab, the dynamic symbol holding the address. */
    CHECK(hcg_symbolize((char *)s.user + 1, name, sizeof name, obj, sizeof obj) == 0);
    CHECK_STR(name, "fake_user_copy+0x1");

    int on_stack;
    CHECK(hcg_symbolize(&on_stack, name, sizeof name, obj, sizeof obj) == -1);
    CHECK_STR(obj, "");
    CHECK(hcg_symbolize(NULL, name, sizeof name, obj, sizeof obj) == -1);
    CHECK_STR(obj, "");
}

static void test_cache(void)
{
    module m = open_module(PYMOD("other"));
    uint64_t before = hcg_recognize_misses();
    CHECK_KIND(m.other, HCG_FN_ORDINARY);
    CHECK(hcg_recognize_misses() == before + 1);
    for (int i = 0; i < 3; i++)
        CHECK_KIND(m.other, HCG_FN_ORDINARY);
    CHECK(hcg_recognize_misses() == before + 1); /* no file read again */
    /* A copy kind is cached too. */
    module c = open_module(PYMOD("cuda/core"));
    CHECK_KIND(c.copy, HCG_FN_COPY_CUDA_CORE);
    before = hcg_recognize_misses();
    CHECK_KIND(c.copy, HCG_FN_COPY_CUDA_CORE);
    CHECK(hcg_recognize_misses() == before);
}

/* ---- concurrent use (for TSan) ------------------------------------------ */

typedef struct expect {
    void *fn;
    hcg_fnkind kind;
} expect;

static expect g_expect[8];
static size_t g_nexpect;
static char g_late[1]; /* registered while the readers run */
static _Atomic int g_mismatch;

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        for (size_t k = 0; k < g_nexpect; k++) {
            if (hcg_recognize(g_expect[k].fn) != g_expect[k].kind)
                atomic_fetch_add(&g_mismatch, 1);
        }
        hcg_fnkind late = hcg_recognize(g_late);
        if (late != HCG_FN_ORDINARY && late != HCG_FN_COPY_REGISTERED)
            atomic_fetch_add(&g_mismatch, 1);
    }
    return NULL;
}

static void test_threads(void)
{
    module m = open_module(PYMOD("cuda/core/cu13"));
    expect e[] = {
        {(void *)hcguard_host_copy, HCG_FN_COPY_HCGUARD},
        {(void *)hcg_test_user_copy, HCG_FN_COPY_USER},
        {(void *)hcg_test_ordinary, HCG_FN_ORDINARY},
        {m.copy, HCG_FN_COPY_CUDA_CORE},
        {m.other, HCG_FN_ORDINARY},
        {m.user, HCG_FN_COPY_USER},
    };
    memcpy(g_expect, e, sizeof e);
    g_nexpect = sizeof e / sizeof e[0];
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, reader, NULL) == 0);
    CHECK(hcguard_register_copy_fn(g_late) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&g_mismatch) == 0);
    CHECK_KIND(g_late, HCG_FN_COPY_REGISTERED);
}

/* ---- limits --------------------------------------------------------------- */

static void test_register_full(void)
{
    static char slots[200];
    int ok = 0;
    /* The three that earlier cases register (again a no-op), so that the
     * count below holds with or without them. */
    CHECK(hcguard_register_copy_fn(open_module(STRIPPED).copy) == 0);
    CHECK(hcguard_register_copy_fn(open_module(PYMOD("cuda/core/graph")).copy) == 0);
    CHECK(hcguard_register_copy_fn(g_late) == 0);
    /* hcguard's own copy and libc's functions take no slot */
    CHECK(hcguard_register_copy_fn((void *)hcguard_host_copy) == 0);
    CHECK(hcguard_register_copy_fn((void *)memcpy) == -1);
    CHECK(hcguard_register_copy_fn((void *)memmove) == -1);
    CHECK_KIND((void *)memcpy, HCG_FN_LIBC);
    for (size_t i = 0; i < sizeof slots; i++)
        ok += hcguard_register_copy_fn(&slots[i]) == 0;
    /* 64 slots, three of them taken above (the stripped copy, the graph/
     * module's, g_late). */
    CHECK(ok == 61);
    CHECK(hcguard_register_copy_fn(&slots[0]) == 0);    /* already in */
    CHECK(hcguard_register_copy_fn(&slots[199]) == -1); /* full */
    CHECK_KIND(&slots[0], HCG_FN_COPY_REGISTERED);
    CHECK_KIND(&slots[60], HCG_FN_COPY_REGISTERED);
    CHECK_KIND(&slots[61], HCG_FN_ORDINARY);
}

/* More pointers than the cache holds: answers stay right, some miss again. */
static void test_cache_full(void)
{
    enum { N = 5000 };
    static char many[N];
    int wrong = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t before = hcg_recognize_misses();
        for (int i = 0; i < N; i++)
            wrong += hcg_recognize(&many[i]) != HCG_FN_ORDINARY;
        uint64_t missed = hcg_recognize_misses() - before;
        if (pass == 0)
            CHECK(missed == N);
        else
            CHECK(missed >= N - 4096 && missed < N);
    }
    CHECK(wrong == 0);
    CHECK_KIND((void *)hcg_test_user_copy, HCG_FN_COPY_USER);
}

static const check_case cases[] = {
    CHECK_CASE(names),
    CHECK_CASE(builtin),
    CHECK_CASE(user),
    CHECK_CASE(cuda_core),
    CHECK_CASE(module_copies),
    CHECK_CASE(stripped),
    CHECK_CASE(registered_and_symtab),
    CHECK_CASE(symbolize),
    CHECK_CASE(cache),
    CHECK_CASE(threads),
    CHECK_CASE(register_full),
    CHECK_CASE(cache_full),
};

int main(int argc, char **argv)
{
    setenv("HCGUARD_COPY_FN", COPY_FNS, 1);
    return check_main("test_recognize", CHECK_CASES(cases), argc, argv);
}
