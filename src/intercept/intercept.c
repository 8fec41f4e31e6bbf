/* How calls reach hcguard: exported dlsym/dlvsym, cuGetProcAddress (v1 and
 * v2) and the routing of real driver pointers to hcguard's wrappers.
 *
 * Routing is by pointer: the real lookup runs first, and if what it found
 * is the real address of an entry point hcguard wraps, the wrapper of that
 * exact variant is handed out instead. A name-keyed table would hand a
 * _ptsz caller the legacy wrapper, or a v1 caller the 5-argument one. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "intercept/intercept.h"

typedef struct hcg_route_entry {
    const char *name;
    size_t slot; /* offsetof(hcg_driver, <name>) */
    void *wrapper;
} hcg_route_entry;

/* Every wrapped entry of driver/entries.def, in its order. */
#define ROUTE_gpa(n) {#n, offsetof(hcg_driver, n), (void *)hcg_w_##n},
#define ROUTE_stream(n) ROUTE_gpa(n)
#define ROUTE_graph(n) ROUTE_gpa(n)
#define ROUTE_called(n)
static const hcg_route_entry routes[] = {
#define HCG_ENTRY(where, name, params) ROUTE_##where(name)
#include "driver/entries.def"
#undef HCG_ENTRY
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

static _Atomic(void *) *slot_of(hcg_driver *d, const hcg_route_entry *e)
{
    return (_Atomic(void *) *)((char *)d + e->slot);
}

static const hcg_route_entry *route_by_name(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return NULL;
    for (size_t i = 0; i < N_ROUTES; i++)
        if (strcmp(routes[i].name, name) == 0)
            return &routes[i];
    return NULL;
}

/* Whether p is one of hcguard's wrappers (each exported under its name). */
static int is_wrapper(const void *p)
{
    for (size_t i = 0; i < N_ROUTES; i++)
        if (p == routes[i].wrapper)
            return 1;
    return 0;
}

/* The variant a cuGetProcAddress caller gets for a base name: the _ptsz
 * one under the per-thread flag, when hcguard wraps one. */
static const hcg_route_entry *route_for_request(const char *name, cuuint64_t flags)
{
    if (name && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        char buf[128];
        size_t n = strlen(name);
        if (n + 6 <= sizeof buf) {
            memcpy(buf, name, n);
            memcpy(buf + n, "_ptsz", 6);
            const hcg_route_entry *e = route_by_name(buf);
            if (e)
                return e;
        }
    }
    return route_by_name(name);
}

/* Whether p is code of the real driver (not of the runtime or a library
 * whose names also begin "cu"): only those get a thunk, which returns a
 * CUresult when it refuses a call. */
static int in_driver(hcg_driver *d, const void *p)
{
    static _Atomic(void *) base;
    void *b = atomic_load_explicit(&base, memory_order_acquire);
    Dl_info info;
    if (!b) {
        void *known = (void *)atomic_load(&d->cuGetProcAddress_v2);
        if (!known)
            known = (void *)atomic_load(&d->cuGetProcAddress);
        if (!known || !dladdr(known, &info))
            return 0;
        b = info.dli_fbase;
        atomic_store_explicit(&base, b, memory_order_release);
    }
    return dladdr(p, &info) && info.dli_fbase == b;
}

/* An entry point hcguard does not wrap: a thunk that notices calls made
 * inside host functions (unless hcguard is off). */
static void *guarded(hcg_driver *d, const char *name, void *p)
{
    if (hcg_config_get()->mode == HCG_MODE_OFF || !in_driver(d, p))
        return p;
    return hcg_thunk_for(name ? name : "?", p);
}

/* If p is the real address of an entry point hcguard wraps, return the
 * wrapper; else p. name is the symbol the caller asked for (may be NULL),
 * used to adopt pointers for variants the driver does not export. */
static void *route(const char *name, void *p, cuuint64_t flags)
{
    if (!p)
        return p;
    hcg_driver *d = hcg_driver_get();
    if (!d)
        return p;
    for (size_t i = 0; i < N_ROUTES; i++)
        if (atomic_load_explicit(slot_of(d, &routes[i]), memory_order_acquire) == p) {
            hcg_debug("route %s -> wrapper %s", name ? name : "?", routes[i].name);
            return routes[i].wrapper;
        }
    const hcg_route_entry *e = route_for_request(name, flags);
    if (!e)
        return guarded(d, name, p);
    if (p == e->wrapper)
        return p;
    /* A variant the driver hands out but does not export (newer entry
     * points): adopt its address, once. */
    void *expected = NULL;
    if (atomic_compare_exchange_strong(slot_of(d, e), &expected, p)) {
        hcg_debug("route %s -> wrapper %s (adopted %p)", name, e->name, p);
        return e->wrapper;
    }
    if (is_wrapper(p))
        return p;
    hcg_debug("route %s: %p is not the driver's %s (%p); passed through", name, p,
              e->name, expected);
    return guarded(d, name, p);
}

/* Whoever looks up an entry point (dlsym of a driver name, cuGetProcAddress):
 * the call sites want to know whether it is the CUDA runtime. */
__attribute__((weak)) void (*hcg_gpa_caller_hook)(uintptr_t ra);

static void tell_caller(uintptr_t ra)
{
    if (hcg_gpa_caller_hook)
        hcg_gpa_caller_hook(ra);
}

/* ---- dlsym / dlvsym ----------------------------------------------------
 * The exported entry points are small assembly stubs (dl_<arch>.S): they ask
 * hcg_dlsym_target where to go and jump there with the caller's own return
 * address, because glibc resolves RTLD_NEXT and a dlopen'd caller's local
 * scope from it. Only look-ups whose answer is a driver entry point go
 * through C; every other one is the caller's own, as without hcguard. */
void *hcg_dlsym_target(void *handle, const char *name) __attribute__((visibility("hidden"), used));
void *hcg_dlvsym_target(void *handle, const char *name, const char *version)
    __attribute__((visibility("hidden"), used));
void *hcg_real_dlsym_ptr(void);
void *hcg_real_dlvsym_ptr(void);

/* The file name's last part. */
/* Whether a loaded object is the driver, by its name as dlopen would
 * match it: its file name or its soname libcuda.so* (a vendor's copy or a
 * symlink of another name keeps the soname), or the --driver path's file
 * name. base, dyn: its load address and dynamic section. */
static int driver_named(const char *file, uintptr_t base, const void *dyn)
{
    const char *name = hcg_file_name(file), *path = hcg_config_get()->driver_path;
    const char *soname = dyn ? hcg_dyn_soname(base, dyn) : NULL;
    return strncmp(name, "libcuda.so", 10) == 0 ||
           (soname && strncmp(soname, "libcuda.so", 10) == 0) ||
           (path[0] && !strcmp(name, hcg_file_name(path)));
}

/* The dynamic section among an object's program headers, or NULL. */
static const void *dynamic_of(const struct dl_phdr_info *info)
{
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            return (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return NULL;
}

static int find_driver_object(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (info->dlpi_name && info->dlpi_name[0] &&
        driver_named(info->dlpi_name, info->dlpi_addr, dynamic_of(info)))
        *(int *)found = 1;
    return *(int *)found;
}

/* Whether a driver is loaded, by hcguard or the program; loads nothing.
 * Asked of the loader's list of objects: a dlopen with RTLD_NOLOAD would
 * search the library path's files first (tens of microseconds a look-up). */
static int driver_loaded(void)
{
    if (hcg_driver_peek())
        return 1;
    int found = 0;
    dl_iterate_phdr(find_driver_object, &found);
    return found;
}

/* Whether p lies in an object named as the driver is (libcuda.so*, or the
 * --driver path's file name): asked of the loader's list (dladdr), with
 * no file search, before hcguard has the driver's table. */
static int in_driver_object(const void *p)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name)
        return 0;
    return driver_named(lm->l_name, lm->l_addr, lm->l_ld);
}

/* Whether p is one of hcguard's exports under a driver's name: a thunk
 * export (thunk.c) or a wrapper (exported under its entry's name). */
static int is_own_export(const void *p)
{
    return hcg_thunk_is_export(p) || is_wrapper(p);
}

/* Whether hcguard must see a look-up that found p: p is one of its driver
 * exports, or a function of the real driver (handed out as a thunk). */
static int is_driver_entry(const void *p)
{
    if (!p)
        return 0;
    if (is_own_export(p))
        return 1;
    hcg_driver *d = hcg_driver_peek();
    return d ? in_driver(d, p) : in_driver_object(p);
}

/* The scope hcguard looks in first. RTLD_DEFAULT: the main program's
 * handle, which is the global scope, where every caller's own RTLD_DEFAULT
 * search begins: what is found there is what the caller would find. Asked
 * by handle, glibc adds no dependency to hcguard (RTLD_DEFAULT would keep
 * whatever library it found loaded for ever). Other handles: their own
 * scope, the same whoever asks. */
static void *scope_of(void *handle)
{
    static _Atomic(void *) global;
    if (handle != RTLD_DEFAULT)
        return handle;
    void *g = atomic_load_explicit(&global, memory_order_acquire);
    if (!g) {
        g = dlopen(NULL, RTLD_LAZY);
        atomic_store_explicit(&global, g, memory_order_release);
    }
    return g ? g : handle;
}

/* hcguard exports every driver entry point, its wrappers under their names
 * and a thunk for each other one: a program that probes for a driver with
 * dlsym(RTLD_DEFAULT, "cuInit") or "cuGetProcAddress_v2" would find
 * hcguard's. While none is loaded, the look-up of any of them goes on past
 * hcguard, as glibc's would have (NULL and a dlerror message, as a rule).
 * Once one is, the export is the right answer: a thunk of the driver's
 * function, or a wrapper. */
static void *dlsym_routed(void *handle, const char *name)
{
    void *p = hcg_real_dlsym(scope_of(handle), name);
    if (HCG_UNLIKELY(is_own_export(p)) && !driver_loaded())
        p = hcg_real_dlsym(RTLD_NEXT, name);
    tell_caller((uintptr_t)__builtin_return_address(0)); /* the stub jumped here */
    return route(name, p, 0);
}

static void *dlvsym_routed(void *handle, const char *name, const char *version)
{
    void *p = hcg_real_dlvsym(scope_of(handle), name, version);
    if (HCG_UNLIKELY(is_own_export(p)) && !driver_loaded())
        p = hcg_real_dlvsym(RTLD_NEXT, name, version);
    tell_caller((uintptr_t)__builtin_return_address(0));
    return route(name, p, 0);
}

/* Where a look-up of a "cu" name goes: hcguard's routing if the answer is
 * a driver entry point, else glibc's own dlsym, reached with the caller's
 * return address (its RTLD_DEFAULT scope includes its dlopen group, which
 * hcguard's does not: cuBLAS, cuFFT, the runtime's cuda* names). */
static void *sym_target(void *handle, const char *name)
{
    if (is_driver_entry(hcg_real_dlsym(scope_of(handle), name)))
        return (void *)dlsym_routed;
    return hcg_real_dlsym_ptr();
}

static void *vsym_target(void *handle, const char *name, const char *version)
{
    if (is_driver_entry(hcg_real_dlvsym(scope_of(handle), name, version)))
        return (void *)dlvsym_routed;
    return hcg_real_dlvsym_ptr();
}

/* A sanitizer runtime preloaded ahead of hcguard resolves its interceptors
 * with dlsym before it is initialised: this path runs uninstrumented, and
 * only names beginning "cu" go further. */
#define HCG_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

HCG_EARLY static int wants(void *handle, const char *name)
{
    return handle != RTLD_NEXT && name && name[0] == 'c' && name[1] == 'u';
}

HCG_EARLY void *hcg_dlsym_target(void *handle, const char *name)
{
    return wants(handle, name) ? sym_target(handle, name) : hcg_real_dlsym_ptr();
}

HCG_EARLY void *hcg_dlvsym_target(void *handle, const char *name, const char *version)
{
    return wants(handle, name) ? vsym_target(handle, name, version) : hcg_real_dlvsym_ptr();
}

/* The stubs: dl_x86_64.S, dl_aarch64.S. */
#if !defined(__x86_64__) && !defined(__aarch64__)
/* Portable fallback: RTLD_NEXT is resolved relative to hcguard itself. */
HCG_EXPORT void *dlsym(void *handle, const char *name)
{
    return ((void *(*)(void *, const char *))hcg_dlsym_target(handle, name))(handle, name);
}
HCG_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
    return ((void *(*)(void *, const char *, const char *))hcg_dlvsym_target(
        handle, name, version))(handle, name, version);
}
#endif

/* ---- cuGetProcAddress ---------------------------------------------------- */
CUresult hcg_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    hcg_driver *d = hcg_driver_get();
    hcg_pfn_cuGetProcAddress_v2 v2 = d ? atomic_load(&d->cuGetProcAddress_v2) : NULL;
    CUresult r;
    if (v2) {
        r = v2(symbol, pfn, version, flags, status);
    } else {
        /* A driver older than 12.0 has only the 4-argument form. */
        hcg_pfn_cuGetProcAddress v1 = d ? atomic_load(&d->cuGetProcAddress) : NULL;
        if (!v1)
            return CUDA_ERROR_NOT_INITIALIZED;
        r = v1(symbol, pfn, version, flags);
        if (status)
            *status = r == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS
                                        : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    if (r == CUDA_SUCCESS && pfn)
        *pfn = route(symbol, *pfn, flags);
    tell_caller((uintptr_t)__builtin_return_address(0));
    return r;
}

CUresult hcg_w_cuGetProcAddress(const char *symbol, void **pfn, int version,
                                cuuint64_t flags)
{
    hcg_driver *d = hcg_driver_get();
    hcg_pfn_cuGetProcAddress v1 = d ? atomic_load(&d->cuGetProcAddress) : NULL;
    if (!v1)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = v1(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = route(symbol, *pfn, flags);
    tell_caller((uintptr_t)__builtin_return_address(0));
    return r;
}

#define ALIAS_gpa(name) HCG_EXPORT_ALIAS(name)
#define ALIAS_stream(name)
#define ALIAS_graph(name)
#define ALIAS_called(name)
#define HCG_ENTRY(where, name, params) ALIAS_##where(name)
#include "driver/entries.def"
#undef HCG_ENTRY
