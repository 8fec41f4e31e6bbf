/* The real libc functions behind hcguard's interposers: one table
 * (driver/libc.def), one way to find each (src/driver/libc.c), one
 * re-entry guard. No <cuda.h>. */
#ifndef HCG_LIBC_H
#define HCG_LIBC_H

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "base/base.h"

typedef enum hcg_libc_id {
#define HCG_LIBC(id, symbol, how, version) HCG_LIBC_##id,
#include "driver/libc.def"
#undef HCG_LIBC
    HCG_LIBC_COUNT
} hcg_libc_id;

#define HCG_LIBC(id, symbol, how, version) typedef __typeof__(&symbol) hcg_libc_##id##_fn;
#include "driver/libc.def"
#undef HCG_LIBC

/* Uninstrumented: these run in signal handlers and before a sanitizer
 * preloaded ahead of hcguard has started. */
#define HCG_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

extern _Atomic(void *) hcg_g_libc[HCG_LIBC_COUNT];
void *hcg_libc_slow(hcg_libc_id id);
/* Row id's function, found on first use; NULL if there is none (the
 * caller falls back to the system call, or fails with ENOSYS). */
HCG_NO_SANITIZE static inline void *hcg_libc(hcg_libc_id id)
{
    void *p = atomic_load_explicit(&hcg_g_libc[id], memory_order_acquire);
    return HCG_LIKELY(p) ? p : hcg_libc_slow(id);
}
#define HCG_REAL(id) ((hcg_libc_##id##_fn)hcg_libc(HCG_LIBC_##id))

/* How a symbol is found: as a row's how (libc.def), or as the program's
 * own calls reach it (DEFAULT: dlsym(RTLD_DEFAULT)), or libc's default
 * version by dlsym on libc's handle (LIBC_DLSYM; not from a fork child or
 * a signal handler). */
typedef enum hcg_libc_how {
    HCG_LIBC_HOW_NEXT,
    HCG_LIBC_HOW_LIBC,
    HCG_LIBC_HOW_DEFAULT,
    HCG_LIBC_HOW_LIBC_DLSYM
} hcg_libc_how;
/* 1 while this thread looks a function up with dlsym: an interposer
 * called from inside dlsym then passes straight through. */
int hcg_libc_looking_up(void);
void *hcg_libc_find(const char *symbol, hcg_libc_how how, const char *version);

#endif /* HCG_LIBC_H */
