/* Host-callback misuse: CUDA calls made inside a host function, functions
 * that cannot be host functions (libc's memcpy and friends, whose
 * signature is not CUhostFn's), code in anonymous memory (ctypes and cffi
 * closures: Python callbacks that take the GIL on the driver's thread),
 * host functions that run long or hang.
 *
 * Findings made on the driver's callback thread (CUDA calls) go to that
 * thread's ring like any event: no lock there. The collector counts them,
 * prints each and keeps them for the summary (src/sinks/findings.c). */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check/check.h"

/* ---- CUDA calls inside host functions ----------------------------------- */
static void push_cuda_call(uint64_t what)
{
    if (!HCG_FINDING_ON(hcg_config_get(), HCG_FIND_CUDA_CALL))
        return;
    hcg_event e = hcg_event_make(HCG_EV_FINDING, HCG_FIND_CUDA_CALL, 0, 0, 0, 0);
    e.bytes = what;
    hcg_current_call_describe(&e); /* with the enqueue site of the launch */
    hcg_event_push(&e);
}

static CUresult on_thunk(unsigned idx, const char *name, void *real)
{
    (void)name;
    (void)real;
    /* Thunks are not handed out in mode off, but the exports are there in
     * every mode (a program linked with -lcuda is bound to them). */
    if (hcg_config_get()->mode == HCG_MODE_OFF)
        return HCG_THUNK_PASS;
    push_cuda_call((uint64_t)idx + 1);
    return hcg_config_get()->mode == HCG_MODE_GUARD ? CUDA_ERROR_NOT_PERMITTED : HCG_THUNK_PASS;
}

int hcg_audit_wrapper_call_slow(hcg_api api)
{
    push_cuda_call(HCG_FIND_WRAPPER_BIT | (uint64_t)api);
    return hcg_config_get()->mode == HCG_MODE_GUARD;
}

int hcg_audit_entry_call_slow(hcg_entry e)
{
    push_cuda_call(HCG_FIND_ENTRY_BIT | (uint64_t)e);
    return hcg_config_get()->mode == HCG_MODE_GUARD;
}

void hcg_audit_init(void)
{
    hcg_thunk_set_handler(on_thunk);
}

/* ---- wrong functions, found at enqueue ----------------------------------- */
static const char *const libc_names[] = {
    "memcpy", "memmove", "memset", "memcmp", "mempcpy", "bcopy", "bzero", "strcpy",
    "strncpy", "strcat", "strlen", "free", "__memcpy_chk", "__memmove_chk", "__memset_chk",
};
#define N_LIBC (sizeof libc_names / sizeof libc_names[0])

static void *libc_fns[2 * N_LIBC];
static pthread_once_t libc_once = PTHREAD_ONCE_INIT;

/* Both what the program gets (a sanitizer's interceptor, say) and libc's own. */
static void find_libc_fns(void)
{
    for (size_t i = 0; i < N_LIBC; i++) {
        libc_fns[2 * i] = hcg_libc_find(libc_names[i], HCG_LIBC_HOW_DEFAULT, NULL);
        libc_fns[2 * i + 1] = hcg_libc_find(libc_names[i], HCG_LIBC_HOW_LIBC_DLSYM, NULL);
    }
}

void hcg_audit_libc_init(void)
{
    pthread_once(&libc_once, find_libc_fns);
}

const char *hcg_audit_libc_name(const void *fn)
{
    hcg_audit_libc_init();
    for (size_t i = 0; i < 2 * N_LIBC; i++)
        if (libc_fns[i] && libc_fns[i] == fn)
            return libc_names[i / 2];
    return NULL;
}

/* Report a function found wrong at enqueue (application thread). */
void hcg_audit_report_fn(hcg_finding f, hcg_api api, CUstream s, void *fn, void *user)
{
    if (!HCG_FINDING_ON(hcg_config_get(), f))
        return;
    hcg_event e = hcg_event_make(HCG_EV_FINDING, f, api, (uintptr_t)s, (uintptr_t)fn,
                                 (uintptr_t)user);
    e.caller = hcg_callsite_here();
    hcg_event_push_app(&e);
}
