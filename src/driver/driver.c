/* The real driver, and glibc's own dlsym/dlvsym.
 *
 * hcguard exports dlsym and dlvsym, so a plain call to either from inside
 * the library reaches the wrappers, and a versioned reference
 * (dlsym@GLIBC_2.34) is bound by the static linker to the library's own
 * definition. glibc's are found instead by looking them up in libc.so.6's
 * dynamic symbol table in memory, then, for the sake of any interposer
 * loaded after us, through dlvsym(RTLD_NEXT, "dlsym", ...). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/driver.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

static _Atomic(dlsym_fn) real_dlsym;
static _Atomic(dlvsym_fn) real_dlvsym;

/* Older glibc exported these at the architecture's base version. */
#if defined(__aarch64__)
#define HCG_GLIBC_BASE "GLIBC_2.17"
#else
#define HCG_GLIBC_BASE "GLIBC_2.2.5"
#endif

/* Everything from here to hcg_real_dlvsym_ptr can run before a sanitizer
 * runtime preloaded ahead of hcguard is initialised (it resolves its own
 * interceptors with dlsym, which is hcguard's): no instrumentation, and
 * no libc function a sanitizer intercepts. */
#define HCG_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

HCG_EARLY static void *libc_symbol(const char *name)
{
    void *p = hcg_dynsym("libc.so.", name, "GLIBC_2.34");
    return p ? p : hcg_dynsym("libc.so.", name, HCG_GLIBC_BASE);
}

HCG_EARLY static void *next_version(dlvsym_fn libc_dlvsym, const char *name)
{
    void *p = libc_dlvsym(RTLD_NEXT, name, "GLIBC_2.34");
    if (!p)
        p = libc_dlvsym(RTLD_NEXT, name, HCG_GLIBC_BASE);
    return p;
}

HCG_EARLY static void resolve_dl(void)
{
    if (atomic_load_explicit(&real_dlsym, memory_order_acquire))
        return;
    dlvsym_fn lv = (dlvsym_fn)libc_symbol("dlvsym");
    dlsym_fn ls = (dlsym_fn)libc_symbol("dlsym");
    if (!lv || !ls) {
        static const char msg[] = "==hcguard== cannot find glibc's dlsym; aborting\n";
        hcg_write_raw(msg, sizeof msg - 1);
        abort();
    }
    dlvsym_fn v = (dlvsym_fn)next_version(lv, "dlvsym");
    dlsym_fn s = (dlsym_fn)next_version(lv, "dlsym");
    /* RTLD_NEXT from here may find nothing, or hcguard's own stubs. */
    extern void *dlsym(void *, const char *);
    if (!s || (void *)s == (void *)dlsym)
        s = ls;
    if (!v || (void *)v == (void *)dlvsym)
        v = lv;
    atomic_store_explicit(&real_dlvsym, v, memory_order_release);
    atomic_store_explicit(&real_dlsym, s, memory_order_release);
}

HCG_EARLY void *hcg_real_dlsym(void *handle, const char *name)
{
    resolve_dl();
    return atomic_load_explicit(&real_dlsym, memory_order_acquire)(handle, name);
}

HCG_EARLY void *hcg_real_dlvsym(void *handle, const char *name, const char *version)
{
    resolve_dl();
    return atomic_load_explicit(&real_dlvsym, memory_order_acquire)(handle, name, version);
}

/* Exposed for the dlsym entry stubs, which jump to it keeping the caller's
 * return address (RTLD_NEXT and local scopes depend on it). */
void *hcg_real_dlsym_ptr(void);
void *hcg_real_dlvsym_ptr(void);
HCG_EARLY void *hcg_real_dlsym_ptr(void)
{
    resolve_dl();
    return (void *)atomic_load_explicit(&real_dlsym, memory_order_acquire);
}
HCG_EARLY void *hcg_real_dlvsym_ptr(void)
{
    resolve_dl();
    return (void *)atomic_load_explicit(&real_dlvsym, memory_order_acquire);
}

hcg_driver hcg_g_drv;
/* Weak: the preloaded library's definition replaces it. */
__attribute__((weak)) void (*hcg_driver_loaded_hook)(void);
_Atomic int hcg_g_drv_state;
static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;
static char drv_error[HCG_PATH_MAX + 256];

const char *hcg_entry_name(hcg_entry e)
{
    static const char *const names[HCG_ENT_COUNT] = {
#define HCG_ENTRY(where, name, params) #name,
#include "driver/entries.def"
#undef HCG_ENTRY
    };
    return (unsigned)e < HCG_ENT_COUNT ? names[e] : "unknown";
}

const char *hcg_driver_error(void)
{
    return drv_error;
}

#define FILL(slot) atomic_store(&hcg_g_drv.slot, hcg_real_dlsym(hcg_g_drv.handle, #slot))

/* Why what the driver's path loaded is no CUDA driver, or NULL: hcguard
 * itself (its wrappers would call themselves for ever), or a library with
 * neither of the entry points every driver has. */
static const char *not_a_driver(void *handle)
{
    struct link_map *loaded = NULL, *own = NULL;
    Dl_info info;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &loaded) == 0 &&
        dladdr1((void *)hcg_driver_load, &info, (void **)&own, RTLD_DL_LINKMAP) && own &&
        loaded == own)
        return "it is hcguard itself";
    if (!hcg_real_dlsym(handle, "cuInit") && !hcg_real_dlsym(handle, "cuDriverGetVersion"))
        return "it has neither cuInit nor cuDriverGetVersion";
    return NULL;
}

/* The driver's path named no driver (first load): said, and never used. */
static void refuse_driver(const char *path, const char *why)
{
    dlclose(hcg_g_drv.handle);
    hcg_g_drv.handle = NULL;
    snprintf(drv_error, sizeof drv_error, "%s is not a CUDA driver: %s", path, why);
    hcg_problem("%s (%s); every CUDA call will fail with CUDA_ERROR_NOT_INITIALIZED", drv_error,
                hcg_config_get()->driver_path[0] ? "--driver / HCGUARD_DRIVER"
                                                 : "found as libcuda.so.1");
    atomic_store(&hcg_g_drv_state, -1);
}

/* First try: load it (the program may not have yet). After a failure,
 * only look for one the program has loaded since (no file search): a
 * process that probes for CUDA before loading it must still be served. */
static void load_driver(int first)
{
    const char *path = hcg_config_get()->driver_path;
    if (!path[0])
        path = "libcuda.so.1";
    hcg_self.driver_loading = 1;
    hcg_g_drv.handle = dlopen(path, first ? RTLD_NOW | RTLD_GLOBAL : RTLD_NOW | RTLD_NOLOAD);
    if (!hcg_g_drv.handle) {
        if (!first) {
            hcg_self.driver_loading = 0;
            return;
        }
        const char *err = dlerror();
        hcg_self.driver_loading = 0;
        /* Said when a wrapped call needs it: a process that only probes
         * for CUDA through dlsym should hear nothing. */
        snprintf(drv_error, sizeof drv_error, "cannot load the CUDA driver %s: %s", path,
                 err ? err : "unknown error");
        /* A driver the user named must load: every CUDA call of the
         * program fails without it, so that is said at once. */
        if (hcg_config_get()->driver_path[0])
            hcg_problem("%s (--driver / HCGUARD_DRIVER); every CUDA call will fail with "
                        "CUDA_ERROR_NOT_INITIALIZED", drv_error);
        else
            hcg_debug("%s", drv_error);
        atomic_store(&hcg_g_drv_state, -1);
        return;
    }
    const char *why = not_a_driver(hcg_g_drv.handle);
    if (why) {
        hcg_self.driver_loading = 0;
        if (first) {
            refuse_driver(path, why);
        } else { /* said at the first try */
            dlclose(hcg_g_drv.handle);
            hcg_g_drv.handle = NULL;
        }
        return;
    }
#define HCG_ENTRY(where, name, params) FILL(name);
#include "driver/entries.def"
#undef HCG_ENTRY
    hcg_self.driver_loading = 0;
    if (hcg_driver_loaded_hook)
        hcg_driver_loaded_hook(); /* before any thunk can be handed out */
    atomic_store(&hcg_g_drv_state, 1);
    hcg_debug("driver %s loaded", path);
}

hcg_driver *hcg_driver_load(void)
{
    if (atomic_load_explicit(&hcg_g_drv_state, memory_order_acquire) == 1)
        return &hcg_g_drv;
    if (hcg_self.driver_loading) /* the driver's own start-up called back into us */
        return NULL;
    pthread_mutex_lock(&drv_lock);
    int st = atomic_load(&hcg_g_drv_state);
    if (st != 1)
        load_driver(st == 0);
    pthread_mutex_unlock(&drv_lock);
    return atomic_load(&hcg_g_drv_state) == 1 ? &hcg_g_drv : NULL;
}

hcg_driver *hcg_driver_peek(void)
{
    return atomic_load_explicit(&hcg_g_drv_state, memory_order_acquire) == 1 ? &hcg_g_drv : NULL;
}

void hcg_driver_reset_after_fork(void)
{
    pthread_mutex_init(&drv_lock, NULL);
    /* The table stays valid in a child; only a load in progress is lost. */
    hcg_self.driver_loading = 0;
}
