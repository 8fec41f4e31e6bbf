/* The real libc functions behind hcguard's interposers (driver/libc.def),
 * each found once and kept, and the one re-entry guard of their lookups:
 * glibc's dlsym may itself call a function hcguard interposes (sigaction,
 * munmap), which must then not look itself up again. */
#include <dlfcn.h>

#include "driver/driver.h"

typedef struct libc_row {
    const char *symbol;
    hcg_libc_how how;
    const char *version;
} libc_row;

static const libc_row rows[HCG_LIBC_COUNT] = {
#define HCG_LIBC(id, symbol, how, version) [HCG_LIBC_##id] = {#symbol, HCG_LIBC_HOW_##how, version},
#include "driver/libc.def"
#undef HCG_LIBC
};

_Atomic(void *) hcg_g_libc[HCG_LIBC_COUNT];

/* hcg_self.libc_lookup: set while this thread looks a function up with
 * dlsym. */

HCG_NO_SANITIZE int hcg_libc_looking_up(void)
{
    return hcg_self.libc_lookup;
}

HCG_NO_SANITIZE static void *own(const char *symbol, const char *version)
{
    void *p = version ? hcg_dynsym("libc.so.", symbol, version) : NULL;
    return p ? p : hcg_dynsym("libc.so.", symbol, NULL);
}

HCG_NO_SANITIZE static void *next(const char *symbol)
{
    if (hcg_self.libc_lookup)
        return NULL;
    hcg_self.libc_lookup = 1;
    void *p = hcg_real_dlsym(RTLD_NEXT, symbol);
    hcg_self.libc_lookup = 0;
    return p;
}

static void *libc_handle_sym(const char *symbol)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *p = libc ? hcg_real_dlsym(libc, symbol) : NULL;
    if (libc)
        dlclose(libc);
    return p;
}

HCG_NO_SANITIZE void *hcg_libc_find(const char *symbol, hcg_libc_how how, const char *version)
{
    void *p = NULL;
    switch (how) {
    case HCG_LIBC_HOW_NEXT: p = next(symbol); break;
    case HCG_LIBC_HOW_LIBC: break;
    case HCG_LIBC_HOW_DEFAULT: return hcg_real_dlsym(RTLD_DEFAULT, symbol);
    case HCG_LIBC_HOW_LIBC_DLSYM: return libc_handle_sym(symbol);
    }
    return p ? p : own(symbol, version);
}

/* Kept once found; a function found while a lookup runs on this thread
 * (libc's own, as a stand-in) is not kept, so the next call finds the
 * real next one. */
HCG_NO_SANITIZE void *hcg_libc_slow(hcg_libc_id id)
{
    const libc_row *r = &rows[id];
    int nested = r->how == HCG_LIBC_HOW_NEXT && hcg_self.libc_lookup;
    void *p = hcg_libc_find(r->symbol, r->how, r->version);
    if (p && !nested)
        atomic_store_explicit(&hcg_g_libc[id], p, memory_order_release);
    return p;
}
