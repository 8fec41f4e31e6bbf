/* The interception layer (src/intercept): what the program reaches instead
 * of the driver: dlsym, dlvsym and cuGetProcAddress routed to hcguard's
 * wrappers, and thunks that notice any driver call made inside a host
 * function. Above the driver layer. */
#ifndef HCG_INTERCEPT_H
#define HCG_INTERCEPT_H

#include "driver/driver.h"

/* ---- intercept.c ----------------------------------------------------------
 * Told the return address of every cuGetProcAddress call and dlsym of a
 * driver name (set by the call sites, check/callsite.c: is it the CUDA
 * runtime?); NULL: nobody asks. */
extern void (*hcg_gpa_caller_hook)(uintptr_t ra);

/* ---- thunk.c: entry points handed out for any driver function ---------- */
/* hcg_self.in_host_fn (base.h) is set by the trampoline while the thread
 * runs a host function; the thunks read it from the thread pointer. */


#include "intercept/thunk_layout.h" /* HCG_THUNK_MAX */
/* A handler's answer that lets the call through to the real function. */
#define HCG_THUNK_PASS ((CUresult)-1)
/* Called when a thunk is entered inside a host function: HCG_THUNK_PASS
 * calls real with the caller's arguments; anything else is returned to the
 * caller instead. Runs with hcg_self.in_host_fn cleared. For an export not yet
 * called, real is its resolver. */
typedef CUresult (*hcg_thunk_handler)(unsigned idx, const char *name, void *real);

/* A thunk that behaves exactly like real (any signature), noticing calls
 * made inside a host function; the same real always gets the same thunk.
 * Returns real itself if it is NULL or a thunk, if the table is full, or on
 * an architecture without thunks. Application threads; thread-safe. */
void *hcg_thunk_for(const char *name, void *real);
void hcg_thunk_set_handler(hcg_thunk_handler h); /* NULL: pass everything */
const char *hcg_thunk_name(unsigned idx);        /* NULL if idx is not in use */
unsigned hcg_thunk_count(void);
void hcg_thunk_fork_lock(void); /* fork hooks (src/lifecycle/fork.c) */
void hcg_thunk_fork_unlock(void);
void hcg_thunk_after_fork(void);
/* The exports: a thunk for each function of the driver hcguard was built
 * against, at indices HCG_THUNK_MAX + i, which libhcguard exports under the
 * function's name. The first call looks the function up in the driver
 * (loading it); a call that cannot be served returns
 * CUDA_ERROR_NOT_INITIALIZED (no driver) or CUDA_ERROR_NOT_FOUND (the
 * driver lacks it). None without thunks. */
unsigned hcg_thunk_exports(void);
void *hcg_thunk_export(unsigned i); /* export i's entry point, NULL past the end */
int hcg_thunk_is_export(const void *p);

/* Export hcg_w_<name> under the driver's own name, while hcguard's own
 * references stay on the hidden hcg_w_ symbol. */
#define HCG_EXPORT_ALIAS(name)                                                 \
    extern __typeof(hcg_w_##name) name                                         \
        __attribute__((alias("hcg_w_" #name), visibility("default")));
/* The wrappers (src/wrap, and cuGetProcAddress's here), hidden; exported
 * under the driver's names: hcg_w_<name> for every entry of
 * driver/entries.def not marked `called`. */
#define HCG_W_PROTO_gpa(name, params) CUresult hcg_w_##name params;
#define HCG_W_PROTO_stream(name, params) CUresult hcg_w_##name params;
#define HCG_W_PROTO_graph(name, params) CUresult hcg_w_##name params;
#define HCG_W_PROTO_called(name, params)
#define HCG_ENTRY(where, name, params) HCG_W_PROTO_##where(name, params)
#include "driver/entries.def"
#undef HCG_ENTRY

#endif /* HCG_INTERCEPT_H */
