/* The driver layer (src/driver): the real libcuda's entry points, loaded
 * on first use, and glibc's own dlsym and dlvsym. Above the base layer. */
#ifndef HCG_DRIVER_H
#define HCG_DRIVER_H

#define __CUDA_API_VERSION_INTERNAL 1 /* plain, unrenamed driver prototypes */
#include <cuda.h>

#include "base/base.h"
#include "driver/libc.h"

/* ---- driver.c: the real libcuda -------------------------------------- */
/* A pointer to the real entry point name: hcg_pfn_<name> (driver/entries.def). */
#define HCG_ENTRY(where, name, params) typedef CUresult(*hcg_pfn_##name) params;
#include "driver/entries.def"
#undef HCG_ENTRY

/* Each entry point of entries.def by number, HCG_ENT_<name>, and its name
 * ("unknown" for a number that is none). */
typedef enum hcg_entry {
#define HCG_ENTRY(where, name, params) HCG_ENT_##name,
#include "driver/entries.def"
#undef HCG_ENTRY
    HCG_ENT_COUNT
} hcg_entry;
const char *hcg_entry_name(hcg_entry e);

/* Every real entry point hcguard wraps or calls, a slot each, named as the
 * entry point. Slots are written once (at load, or adopted from
 * cuGetProcAddress) and read without locks. */
typedef struct hcg_driver {
    void *handle;
#define HCG_ENTRY(where, name, params) _Atomic(hcg_pfn_##name) name;
#include "driver/entries.def"
#undef HCG_ENTRY
} hcg_driver;



/* The driver table, loading libcuda on first call; NULL if it cannot be
 * loaded (the reason was printed once). Inline: once loaded, one load. */
extern hcg_driver hcg_g_drv;
extern _Atomic int hcg_g_drv_state; /* 0 not tried, 1 loaded, -1 failed */
hcg_driver *hcg_driver_load(void);
static inline hcg_driver *hcg_driver_get(void)
{
    if (HCG_LIKELY(atomic_load_explicit(&hcg_g_drv_state, memory_order_acquire) == 1))
        return &hcg_g_drv;
    return hcg_driver_load();
}
/* In a wrapper: d is the driver table, or the wrapper answers
 * CUDA_ERROR_NOT_INITIALIZED. */
#define HCG_DRV_OR_FAIL(d)                                                     \
    hcg_driver *d = hcg_driver_get();                                          \
    if (!d)                                                                    \
        return CUDA_ERROR_NOT_INITIALIZED
/* The table if libcuda is already loaded by hcguard, else NULL; never loads. */
hcg_driver *hcg_driver_peek(void);
void hcg_driver_reset_after_fork(void);
/* Why the driver could not be loaded ("" if it was, or was not tried). */
const char *hcg_driver_error(void);
/* glibc's own dlsym/dlvsym, never the exported wrappers. */
void *hcg_real_dlsym(void *handle, const char *name);
void *hcg_real_dlvsym(void *handle, const char *name, const char *version);
/* Run once the driver is loaded, before any thunk can be handed out: the
 * audit sets the handler of calls made inside host functions there. The
 * preloaded library defines it (src/lifecycle/init.c); else NULL. */
extern void (*hcg_driver_loaded_hook)(void);

#endif /* HCG_DRIVER_H */
