/* The check layer (src/check): which host functions are copies, what the
 * address space looks like, whether a host-copy record is good, the
 * fault-contained copy, and the findings made at enqueue (wrong functions,
 * rejected records, CUDA calls inside host functions). Above the events
 * layer, whose rings take its findings. */
#ifndef HCG_CHECK_H
#define HCG_CHECK_H

#include "events/events.h"
#include "intercept/intercept.h"

/* ---- oracle.c: what the address space looks like ---------------------- */
typedef enum hcg_mem {
    HCG_MEM_OK = 0,
    HCG_MEM_UNMAPPED,     /* some page of the range is not mapped       */
    HCG_MEM_NO_READ,      /* mapped, but some page is not readable      */
    HCG_MEM_NO_WRITE,     /* mapped and readable, some page not writable */
    HCG_MEM_DEVICE        /* device-only memory (driver says so)        */
} hcg_mem;

/* The validator sees memory only through this, so it can be fuzzed with a
 * model address space. */
typedef struct hcg_oracle {
    void *ctx;
    /* Copy len bytes at addr into buf if they can be read; 0 or -1. */
    int (*read)(void *ctx, uintptr_t addr, void *buf, size_t len);
    /* Classify [addr, addr + len), len > 0, for reading or writing. */
    hcg_mem (*classify)(void *ctx, uintptr_t addr, size_t len, int write);
} hcg_oracle;

/* The oracle for this process (PROCMAP_QUERY, falling back to parsing
 * /proc/self/maps; cuPointerGetAttributes for device memory). Call it
 * from application threads only: it makes system calls and driver calls. */
const hcg_oracle *hcg_oracle_process(void);
/* Forget every thread's cached VMAs (the mappings changed). */
void hcg_oracle_invalidate(void);
/* The unmap generation: it moves on every munmap, mremap, mprotect or
 * shmdt made through libc. A verdict reached at generation g holds only
 * while it is still g. */
uint64_t hcg_oracle_gen(void);
/* 1 if the record at rec, whose contents are *r (read by the caller), was
 * found good lately with the same contents, and the generation has not
 * moved since; else 0 (check it). Reads no user memory. */
int hcg_oracle_recent(const void *rec, const hcguard_copy_record *r);
/* Remember rec as good with contents *r, checked at generation gen (read
 * before the check began). One entry per record: replaced in place. */
void hcg_oracle_remember(const void *rec, const hcguard_copy_record *r, uint64_t gen);
/* Turn the VMA and record caches on or off (tests, fuzzing; on by default). */
void hcg_oracle_set_cache(int on);
/* For tests and diagnostics. on != 0 forces the fallback: parse
 * /proc/self/maps instead of PROCMAP_QUERY (as on a kernel before 6.11).
 * Reads are fault-contained copies either way. */
void hcg_oracle_force_fallback(int on);
/* Ask f instead of the driver's cuPointerGetAttributes; NULL: the driver's. */
void hcg_oracle_set_ptr_attrs(hcg_pfn_cuPointerGetAttributes f);
/* How ranges are classified now: "procmap-query" or "maps". */
const char *hcg_oracle_method(void);
void hcg_oracle_fork_lock(void); /* fork hooks (src/lifecycle/fork.c) */
void hcg_oracle_fork_unlock(void);
void hcg_oracle_after_fork(void);

/* ---- fault.c: fault-contained copies ------------------------------------ */
/* Where and why a contained copy faulted. */
typedef struct hcg_fault_info {
    uintptr_t addr; /* the faulting address */
    int sig;        /* SIGSEGV or SIGBUS */
    int code;       /* si_code: SEGV_MAPERR, SEGV_ACCERR, BUS_ADRERR, ... */
} hcg_fault_info;

/* memcpy(dst, src, n), but a SIGSEGV or SIGBUS on either range returns -1
 * (with *out filled, out may be NULL) instead of killing the process.
 * No system call or lock when nothing faults. Contained only once
 * hcg_fault_install has succeeded; before that, a plain memcpy. */
int hcg_fault_copy(void *dst, const void *src, size_t n, hcg_fault_info *out);
/* Install hcguard's SIGSEGV and SIGBUS handlers, chained to those already
 * there (idempotent); 0, or -1. hcg_fault_ready: installed. */
int hcg_fault_install(void);
/* While the program leaves SIGABRT, SIGTERM, SIGINT, SIGHUP or SIGQUIT at
 * the default action, hook runs before the process dies of it (and before
 * a default-action death by SIGSEGV or SIGBUS); it runs in a signal
 * handler, so it must wait for nothing. See src/fault.c. */
void hcg_fault_watch_deaths(void (*hook)(void));
int hcg_fault_ready(void);
/* "SEGV_MAPERR", "BUS_ADRERR", ...; "other" when unknown. */
const char *hcg_fault_code_name(int sig, int code);

/* ---- validate.c: pure checks over an oracle ---------------------------- */
/* Check the fields of a record already read. */
hcguard_status hcg_validate_fields(const hcg_oracle *o,
                                   const hcguard_copy_record *r);
/* Read the record at rec through o into *out (when readable), then check
 * it. out may be NULL. */
hcguard_status hcg_validate_record(const hcg_oracle *o, const void *rec,
                                   hcguard_copy_record *out);

/* ---- recognize.c: which host functions are copies ---------------------- */
/* cuda.bindings' wrapper data (cuHostCallbackData in its driver module). */
typedef struct hcg_bindings_cb {
    CUhostFn callback;
    void *user;
} hcg_bindings_cb;

/* Classify fn; cached, so a repeated pointer costs one hash probe. */
hcg_fnkind hcg_recognize(void *fn);
/* Best symbol name for fn ("memcpy", "__pyx_f_..._host_copy") into buf,
 * with the object file in obj; returns 0, or -1 if none ("anonymous"). */
int hcg_symbolize(const void *fn, char *buf, size_t len, char *obj,
                  size_t objlen);
/* Set by a reader of other processes' logs (hcguard report): their
 * functions are named by it alone, never from this address space. */
extern int (*hcg_symbolize_from)(const void *fn, char *buf, size_t len, char *obj,
                                 size_t objlen);
/* HCGUARD_COPY_FN names that match nothing: a warning at the first host
 * function classified; at exit (at_exit), kept as a problem. */
void hcg_copy_fns_check(int at_exit);
/* Classifications that missed the cache (tests: a repeat must not miss). */
uint64_t hcg_recognize_misses(void);
/* The copy functions seen at enqueue whose launches count as kind k (at
 * most max into out); returns how many there are. */
size_t hcg_copy_fns_of(hcg_fnkind k, uintptr_t *out, size_t max);
/* How fn, counted as kind k, was recognised ("recognised by symbol table"). */
const char *hcg_copy_fn_how(uintptr_t fn, hcg_fnkind k);


/* ---- audit.c: host-callback misuse --------------------------------------- */
/* A cuda-call-in-host-fn finding's bytes: the thunk's index + 1, or this
 * bit with the hcg_api of one of hcguard's own wrappers. */
#define HCG_FIND_WRAPPER_BIT (1ull << 32)
void hcg_audit_init(void);
/* Inside a host function, one of hcguard's own wrappers was called: report
 * it; nonzero if the call must be refused (guard mode). Outside host
 * functions (hcg_audit_wrapper_call, inline below the thunks), 0. */
int hcg_audit_wrapper_call_slow(hcg_api api);
/* The libc function fn is ("memcpy"), or NULL. */
const char *hcg_audit_libc_name(const void *fn);
void hcg_audit_report_fn(hcg_finding f, hcg_api api, CUstream s, void *fn, void *user);

/* One of hcguard's wrappers was entered: 0 outside host functions (one
 * thread-local load), else as hcg_audit_wrapper_call_slow. */
static inline int hcg_audit_wrapper_call(hcg_api api)
{
    return HCG_UNLIKELY(hcg_in_host_fn) ? hcg_audit_wrapper_call_slow(api) : 0;
}

/* ---- src/run/trampoline.c ------------------------------------------------ */
/* The call the current thread is running, or NULL (defined by the run
 * layer: the oracle makes no driver call inside a host function, and the
 * audit names the host function a CUDA call was made in). */
struct hcg_call;
const struct hcg_call *hcg_current_call(void);
/* The running call's function, data, stream, graph node, kind and entry
 * point into *e (left as they are when it runs none). */
void hcg_current_call_describe(hcg_event *e);

/* ---- reject.c: bad records found at enqueue ------------------------------ */
/* Report one enqueue-time finding (printed once per call) and count it. */
void hcg_report_reject(hcg_api api, CUstream s, void *fn, void *user,
                       hcg_fnkind kind, const hcguard_copy_record *r,
                       hcguard_status why, int refused);

#endif /* HCG_CHECK_H */
