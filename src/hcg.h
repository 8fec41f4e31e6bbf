/*
 * Internal interfaces of libhcguard. One section per source file; every
 * name here is either hcg_-prefixed or static in its file.
 */
#ifndef HCG_H
#define HCG_H

#define __CUDA_API_VERSION_INTERNAL 1 /* plain, unrenamed driver prototypes */
#include <cuda.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hcguard.h"

#define HCG_EXPORT __attribute__((visibility("default")))
/* Export hcg_w_<name> under the driver's own name, while hcguard's own
 * references stay on the hidden hcg_w_ symbol. */
#define HCG_EXPORT_ALIAS(name)                                                 \
    extern __typeof(hcg_w_##name) name                                         \
        __attribute__((alias("hcg_w_" #name), visibility("default")));
#define HCG_LIKELY(x) __builtin_expect(!!(x), 1)
#define HCG_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- config.c: HCGUARD_* environment, read once ---------------------- */
typedef enum hcg_mode { HCG_MODE_GUARD, HCG_MODE_AUDIT, HCG_MODE_OFF } hcg_mode;

#define HCG_MAX_COPY_FNS 32
#define HCG_PATH_MAX 4096

typedef struct hcg_config {
    hcg_mode mode;
    char log_path[HCG_PATH_MAX];    /* JSON Lines event log, expanded; "" = none */
    char log_pattern[HCG_PATH_MAX]; /* as given, for a fork child's own %p */
    char trace_path[HCG_PATH_MAX];  /* Chrome trace (HCGUARD_TRACE), expanded; "" = none */
    char trace_pattern[HCG_PATH_MAX];
    int error_exitcode;             /* 0 = exit status untouched */
    int summary;                    /* print the exit summary (default 1) */
    int debug;                      /* HCGUARD_DEBUG: routing decisions on stderr */
    int recheck_always;             /* re-check unchanged records at run time too */
    double slow_ms;                 /* HCGUARD_SLOW_MS: a host function this long is reported */
    double hang_s;                  /* HCGUARD_HANG_S: still running this long: reported */
    char driver_path[HCG_PATH_MAX]; /* "" = libcuda.so.1 */
    size_t n_copy_fns;
    char copy_fns[HCG_MAX_COPY_FNS][128]; /* HCGUARD_COPY_FN, split on ',' */
    size_t buffer_bytes;                  /* HCGUARD_BUFFER: each thread's event ring */
    unsigned file_mode;                   /* HCGUARD_FILE_MODE: created files (0600) */
    char report_path[HCG_PATH_MAX];       /* HCGUARD_LOG_FILE: messages and summary; "" = stderr */
    char report_pattern[HCG_PATH_MAX];
    unsigned print_limit;                 /* HCGUARD_PRINT_LIMIT: findings printed; 0 = all */
} hcg_config;
#define HCG_PRINT_LIMIT_DEFAULT 100

#define HCG_BUFFER_DEFAULT (4u << 20)
#define HCG_BUFFER_MIN (64u << 10)
#define HCG_BUFFER_MAX (1u << 30)
#define HCG_BUFFER_EXPECTED "a size from 64K to 1G (bytes, or a number with K, M or G)"
/* HCGUARD_BUFFER's value into *out: 0, or -1 if it is not HCG_BUFFER_EXPECTED. */
int hcg_parse_buffer_size(const char *v, size_t *out);

typedef const char *(*hcg_getenv_fn)(const char *name);

/* The process configuration; parsed on first use. Never NULL. Inline,
 * as it is asked on every launch: once loaded, one load. */
extern hcg_config hcg_g_config;
extern atomic_int hcg_g_config_ready;
const hcg_config *hcg_config_load(void);
static inline const hcg_config *hcg_config_get(void)
{
    if (HCG_LIKELY(atomic_load_explicit(&hcg_g_config_ready, memory_order_acquire)))
        return &hcg_g_config;
    return hcg_config_load();
}
/* Parse from getenv_fn into *c. Returns 0, or -1 with one line in err for
 * each bad value, separated by '\n' (each such field keeps its default). */
int hcg_config_parse(hcg_config *c, hcg_getenv_fn getenv_fn, char *err,
                     size_t errlen);
/* Expand %p (pid), %h (host), %q{VAR}, %% in pattern. Returns 0, or -1
 * with a message in err (unknown %x, unset VAR, unterminated %q{, too long). */
int hcg_expand_path(const char *pattern, char *out, size_t outlen,
                    hcg_getenv_fn getenv_fn, char *err, size_t errlen);

/* ---- driver.c: the real libcuda -------------------------------------- */
typedef CUresult (*hcg_pfn_gpa_v1)(const char *, void **, int, cuuint64_t);
typedef CUresult (*hcg_pfn_gpa_v2)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
typedef CUresult (*hcg_pfn_launch)(CUstream, CUhostFn, void *);
typedef CUresult (*hcg_pfn_launch_v2)(CUstream, CUhostFn, void *, unsigned int);
typedef CUresult (*hcg_pfn_ptr_attrs)(unsigned int, CUpointer_attribute *,
                                      void **, CUdeviceptr);

typedef CUresult (*hcg_pfn_begin_capture_v1)(CUstream);
typedef CUresult (*hcg_pfn_begin_capture)(CUstream, CUstreamCaptureMode);
typedef CUresult (*hcg_pfn_begin_capture_to_graph)(CUstream, CUgraph,
                                                   const CUgraphNode *,
                                                   const CUgraphEdgeData *,
                                                   size_t, CUstreamCaptureMode);
typedef CUresult (*hcg_pfn_is_capturing)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*hcg_pfn_add_callback)(CUstream, CUstreamCallback, void *, unsigned int);

/* Graph entry points: wrapped, or called by the graph wrappers. */
#define HCG_GRAPH_REAL(X)                                                      \
    X(cuGraphAddHostNode) X(cuGraphAddNode) X(cuGraphAddNode_v2)               \
    X(cuGraphHostNodeSetParams) X(cuGraphHostNodeGetParams)                    \
    X(cuGraphNodeSetParams) X(cuGraphNodeGetParams)                            \
    X(cuGraphExecHostNodeSetParams) X(cuGraphExecNodeSetParams)                \
    X(cuGraphInstantiate) X(cuGraphInstantiate_v2) X(cuGraphInstantiateWithFlags) \
    X(cuGraphInstantiateWithParams) X(cuGraphInstantiateWithParams_ptsz)       \
    X(cuGraphExecUpdate) X(cuGraphExecUpdate_v2) X(cuGraphExecDestroy)         \
    X(cuGraphGetNodes) X(cuGraphNodeGetType) X(cuGraphChildGraphNodeGetGraph)  \
    X(cuUserObjectCreate) X(cuUserObjectRelease) X(cuGraphRetainUserObject)    \
    X(cuGraphReleaseUserObject) X(cuStreamGetCaptureInfo_v2)                   \
    X(cuStreamGetCaptureInfo_v2_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz)

enum {
#define HCG_X(n) HCG_G_##n,
    HCG_GRAPH_REAL(HCG_X)
#undef HCG_X
    HCG_G_COUNT
};

/* Every real entry point hcguard wraps or calls. Slots are written once
 * (at load, or adopted from cuGetProcAddress) and read without locks. */
typedef struct hcg_driver {
    void *handle;
    _Atomic(hcg_pfn_gpa_v1) cuGetProcAddress;
    _Atomic(hcg_pfn_gpa_v2) cuGetProcAddress_v2;
    _Atomic(hcg_pfn_launch) cuLaunchHostFunc;
    _Atomic(hcg_pfn_launch) cuLaunchHostFunc_ptsz;
    _Atomic(hcg_pfn_launch_v2) cuLaunchHostFunc_v2;
    _Atomic(hcg_pfn_launch_v2) cuLaunchHostFunc_v2_ptsz;
    _Atomic(hcg_pfn_ptr_attrs) cuPointerGetAttributes;
    /* Capture: host functions enqueued while capturing become graph nodes,
     * which run once per replay, so their hcg_call must outlive one run. */
    _Atomic(hcg_pfn_begin_capture_v1) cuStreamBeginCapture;
    _Atomic(hcg_pfn_begin_capture_v1) cuStreamBeginCapture_ptsz;
    _Atomic(hcg_pfn_begin_capture) cuStreamBeginCapture_v2;
    _Atomic(hcg_pfn_begin_capture) cuStreamBeginCapture_v2_ptsz;
    _Atomic(hcg_pfn_begin_capture_to_graph) cuStreamBeginCaptureToGraph;
    _Atomic(hcg_pfn_begin_capture_to_graph) cuStreamBeginCaptureToGraph_ptsz;
    _Atomic(hcg_pfn_is_capturing) cuStreamIsCapturing;
    _Atomic(hcg_pfn_is_capturing) cuStreamIsCapturing_ptsz;
    _Atomic(void *) g[HCG_G_COUNT]; /* HCG_G_<name>: graph entry points */
    _Atomic(hcg_pfn_add_callback) cuStreamAddCallback;
    _Atomic(hcg_pfn_add_callback) cuStreamAddCallback_ptsz;
} hcg_driver;

/* The real graph entry point `name` as a pointer of type T (NULL if the
 * driver lacks it). */
#define HCG_GREAL(d, name, T) ((T)atomic_load(&(d)->g[HCG_G_##name]))

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
/* name (at version, or any if NULL) in the dynamic symbol table of the
 * loaded object whose file name begins with object ("libc.so."); NULL if
 * either is not found. Uses no dlsym and no instrumented libc function. */
void *hcg_dynsym(const char *object, const char *name, const char *version);
/* glibc's own dlsym/dlvsym, never the exported wrappers. */
void *hcg_real_dlsym(void *handle, const char *name);
void *hcg_real_dlvsym(void *handle, const char *name, const char *version);

/* ---- intercept.c: routing of dlsym, dlvsym, cuGetProcAddress ---------- */
/* If p is the real address of an entry point hcguard wraps, return the
 * wrapper; else p. name is the symbol the caller asked for (may be NULL),
 * used to adopt pointers for variants the driver does not export. */
void *hcg_route(const char *name, void *p, cuuint64_t flags);

/* The wrappers, hidden; exported under the driver's names. */
CUresult hcg_w_cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult hcg_w_cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
CUresult hcg_w_cuLaunchHostFunc(CUstream, CUhostFn, void *);
CUresult hcg_w_cuLaunchHostFunc_ptsz(CUstream, CUhostFn, void *);
CUresult hcg_w_cuLaunchHostFunc_v2(CUstream, CUhostFn, void *, unsigned int);
CUresult hcg_w_cuLaunchHostFunc_v2_ptsz(CUstream, CUhostFn, void *, unsigned int);
CUresult hcg_w_cuStreamAddCallback(CUstream, CUstreamCallback, void *, unsigned int);
CUresult hcg_w_cuStreamAddCallback_ptsz(CUstream, CUstreamCallback, void *, unsigned int);
CUresult hcg_w_cuStreamBeginCapture(CUstream);
CUresult hcg_w_cuStreamBeginCapture_ptsz(CUstream);
CUresult hcg_w_cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode);
CUresult hcg_w_cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult hcg_w_cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode *,
                                           const CUgraphEdgeData *, size_t,
                                           CUstreamCaptureMode);
CUresult hcg_w_cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode *,
                                                const CUgraphEdgeData *, size_t,
                                                CUstreamCaptureMode);

CUresult hcg_w_cuGraphAddHostNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                  const CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphAddNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                              CUgraphNodeParams *);
CUresult hcg_w_cuGraphAddNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *,
                                 const CUgraphEdgeData *, size_t, CUgraphNodeParams *);
CUresult hcg_w_cuGraphHostNodeSetParams(CUgraphNode, const CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphHostNodeGetParams(CUgraphNode, CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphNodeSetParams(CUgraphNode, CUgraphNodeParams *);
CUresult hcg_w_cuGraphNodeGetParams(CUgraphNode, CUgraphNodeParams *);
CUresult hcg_w_cuGraphExecHostNodeSetParams(CUgraphExec, CUgraphNode,
                                            const CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, CUgraphNodeParams *);
CUresult hcg_w_cuGraphInstantiate(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult hcg_w_cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult hcg_w_cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult hcg_w_cuGraphInstantiateWithParams(CUgraphExec *, CUgraph,
                                            CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult hcg_w_cuGraphInstantiateWithParams_ptsz(CUgraphExec *, CUgraph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult hcg_w_cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
CUresult hcg_w_cuGraphExecUpdate_v2(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
CUresult hcg_w_cuGraphExecDestroy(CUgraphExec);
CUresult hcg_w_cuGraphLaunch(CUgraphExec, CUstream);
CUresult hcg_w_cuGraphLaunch_ptsz(CUgraphExec, CUstream);

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
void hcg_oracle_set_ptr_attrs(hcg_pfn_ptr_attrs f);
/* How ranges are classified now: "procmap-query" or "maps". */
const char *hcg_oracle_method(void);

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
typedef enum hcg_fnkind {
    HCG_FN_ORDINARY = 0,
    HCG_FN_COPY_HCGUARD,    /* hcguard_host_copy                          */
    HCG_FN_COPY_CUDA_CORE,  /* cuda.core _host_copy, by ELF symbol table   */
    HCG_FN_COPY_USER,       /* named in HCGUARD_COPY_FN                    */
    HCG_FN_COPY_REGISTERED, /* hcguard_register_copy_fn (the Python hook)  */
    /* cuda.bindings' driver.cuLaunchHostFunc runs every function through
     * its own GIL-taking wrapper, whose userData is {CUhostFn, void *}:
     * looked through, to recognise and check what it will call. */
    HCG_FN_WRAP_BINDINGS,
    HCG_FN_LIBC,            /* memcpy & co.: not a CUhostFn (audit finding)  */
    HCG_FN_CLOSURE,         /* code in no loaded object: ctypes/cffi/JIT      */
    HCG_FN_KIND_COUNT
} hcg_fnkind;

static inline int hcg_fnkind_is_copy(hcg_fnkind k)
{
    return k >= HCG_FN_COPY_HCGUARD && k <= HCG_FN_COPY_REGISTERED;
}

/* cuda.bindings' wrapper data (cuHostCallbackData in its driver module). */
typedef struct hcg_bindings_cb {
    CUhostFn callback;
    void *user;
} hcg_bindings_cb;
const char *hcg_fnkind_name(hcg_fnkind k); /* "ordinary", "hcguard_host_copy", ... */

/* Classify fn; cached, so a repeated pointer costs one hash probe. */
hcg_fnkind hcg_recognize(void *fn);
/* Best symbol name for fn ("memcpy", "__pyx_f_..._host_copy") into buf,
 * with the object file in obj; returns 0, or -1 if none ("anonymous"). */
int hcg_symbolize(const void *fn, char *buf, size_t len, char *obj,
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

/* ---- elfsym.c: static symbol tables ------------------------------------ */
/* Find the symbol of the ELF file at path whose [value, value + size)
 * holds the file-relative address off. Returns 0 and the name, -1 if the
 * file has no .symtab, no such symbol, or is not a readable ELF file. */
int hcg_elf_symbol_at(const char *path, uintptr_t off, char *name, size_t len);
/* The same, with the symbol's st_value in *start (may be NULL). off is in
 * st_value space: run-time address minus link_map l_addr (dladdr1
 * RTLD_DL_LINKMAP), i.e. base-relative for ET_DYN, absolute for ET_EXEC. */
int hcg_elf_symbol_find(const char *path, uintptr_t off, char *name,
                        size_t len, uintptr_t *start);
/* The same over an ELF image of size bytes already in memory (fuzzing). */
int hcg_elf_symbol_image(const void *img, size_t size, uintptr_t off,
                         char *name, size_t len, uintptr_t *start);

/* ---- clock ------------------------------------------------------------- */
uint64_t hcg_now_ns(void); /* CLOCK_MONOTONIC */
/* Event time stamps: a raw counter, cheap on any thread. */
void hcg_clock_init(void);
/* 1 once the raw counter is known to be invariant and in use; inline, as
 * every launch and every host function reads the clock. */
extern atomic_int hcg_g_clock_counter;
uint64_t hcg_ticks_slow(void);
static inline uint64_t hcg_ticks(void)
{
#if defined(__x86_64__)
    if (HCG_LIKELY(atomic_load_explicit(&hcg_g_clock_counter, memory_order_relaxed)))
        return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    if (HCG_LIKELY(atomic_load_explicit(&hcg_g_clock_counter, memory_order_relaxed))) {
        uint64_t v;
        __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
        return v;
    }
#endif
    return hcg_ticks_slow();
}
/* A reference point (counter and clock read together, and the rate) to
 * turn ticks into CLOCK_MONOTONIC nanoseconds. */
typedef struct hcg_clock_ref_t {
    uint64_t tick, ns;
    double ns_per_tick;
} hcg_clock_ref_t;
void hcg_clock_ref(hcg_clock_ref_t *r);
uint64_t hcg_ticks_to_ns(const hcg_clock_ref_t *r, uint64_t t);

/* ---- trampoline.c: what the driver runs instead ------------------------ */
/* One host-function launch (stream) or one host node (graph). */
struct hcg_pool;

/* The first cache line holds all that a stream launch of an ordinary host
 * function touches: written by the launching thread, read by the callback
 * thread, which writes back only next_free when it returns the call. The
 * second line is for copies and graph nodes. */
typedef struct hcg_call {
    CUhostFn fn;
    void *user;
    uintptr_t stream;
    uint64_t t_enqueue;
    uint64_t seq;
    struct hcg_call *next_free;
    struct hcg_pool *owner;   /* the pool it returns to */
    uint8_t kind;             /* hcg_fnkind */
    uint8_t oneshot;          /* released after it ran (stream launches) */
    uint8_t api;              /* hcg_api: which entry point enqueued it */
    uint8_t enqueue_status;   /* hcguard_status at enqueue (audit mode) */
    uint8_t wrapped;          /* fn is cuda.bindings' wrapper: user is malloc'd by it */
    /* -- second line: copies (rec, snap) and graph nodes (the rest) -- */
    void *rec __attribute__((aligned(64))); /* copies: the record; wrapped: the wrapper's data */
    hcguard_copy_record snap; /* the record as validated at enqueue */
    uintptr_t graph, node;    /* for attribution */
    _Atomic uint32_t refs;    /* holders: its user object (roots), a root's chain */
    struct hcg_call *root;    /* the call the node was created with (NULL: this) */
    _Atomic(void *) chain;    /* root only: its hcg_link list (graph.c) */
    void *uobj;               /* root only: the CUuserObject that owns it */
    CUhostFn inner;           /* wrapped: the function the wrapper calls with rec */
    uint64_t gen;             /* copies: hcg_oracle_gen() when the check began */
} __attribute__((aligned(64))) hcg_call;

/* Calls come from a pool of the allocating thread; NULL if out of memory. */
hcg_call *hcg_call_alloc(void);
/* Back to the pool at once: the allocating thread, for a call the driver
 * never saw. */
void hcg_call_free_local(hcg_call *c);
/* Back to its pool from any thread (the callback thread after a stream
 * launch ran, a graph's last holder). */
void hcg_call_release(hcg_call *c);
/* c's sequence number, and counting a launch: in the pool, on the thread
 * that allocated it. */
uint64_t hcg_pool_seq(hcg_call *c);
void hcg_pool_count(struct hcg_pool *p, hcg_fnkind kind);
uint64_t hcg_pool_launched(hcg_fnkind kind);
/* Flow control: a one-shot launch made from p (after the driver took it),
 * which may wait for the collector (see trampoline.c); and, collector, the
 * event of the launch numbered seq drained. */
void hcg_pool_flow(struct hcg_pool *p);
void hcg_pool_drained(uint64_t seq);
/* Make c stop loudly if it ever runs again (graph calls, before release). */
void hcg_call_poison(hcg_call *c);
void hcg_pool_after_fork(void);
void CUDA_CB hcg_trampoline(void *call);
/* The same for cuStreamAddCallback's CUstreamCallback (fn is one). */
void CUDA_CB hcg_stream_cb_trampoline(CUstream s, CUresult status, void *call);
/* The call the current thread is running, or NULL. */
const hcg_call *hcg_current_call(void);

/* ---- events.c: per-thread rings and the collector ---------------------- */
typedef enum hcg_api {
    HCG_API_LAUNCH_HOST_FUNC = 0, /* cuLaunchHostFunc       */
    HCG_API_LAUNCH_HOST_FUNC_PTSZ,
    HCG_API_LAUNCH_HOST_FUNC_V2,
    HCG_API_LAUNCH_HOST_FUNC_V2_PTSZ,
    HCG_API_GRAPH_ADD_HOST_NODE,     /* cuGraphAddHostNode, cuGraphAddNode(_v2) */
    HCG_API_GRAPH_SET_PARAMS,        /* cuGraph(Host)NodeSetParams */
    HCG_API_GRAPH_EXEC_SET_PARAMS,   /* cuGraphExec(Host)NodeSetParams */
    HCG_API_STREAM_ADD_CALLBACK,     /* cuStreamAddCallback */
    HCG_API_STREAM_ADD_CALLBACK_PTSZ,
    HCG_API_GRAPH_LAUNCH,            /* cuGraphLaunch(_ptsz): only as a call inside a host fn */
    HCG_API_COUNT
} hcg_api;
const char *hcg_api_name(hcg_api a);

typedef enum hcg_evkind {
    HCG_EV_RUN = 1,   /* a host function ran (copy or not)          */
    HCG_EV_SKIP,      /* a copy was skipped at run time (reason)    */
    HCG_EV_REJECT,    /* rejected / reported at enqueue (reason)    */
    HCG_EV_FINDING,   /* host-callback misuse (reason: hcg_finding) */
} hcg_evkind;

/* What the audit finds; names are stable (summary, event log). */
typedef enum hcg_finding {
    HCG_FIND_CUDA_CALL = 1, /* "cuda-call-in-host-fn": bytes = thunk index + 1 */
    HCG_FIND_LIBC_FN,       /* "libc-function-as-host-fn": memcpy & co. as a CUhostFn */
    HCG_FIND_CLOSURE,       /* "closure-host-fn": code in anonymous memory (ctypes, cffi) */
    HCG_FIND_SLOW,          /* "slow-host-fn": ran longer than HCGUARD_SLOW_MS */
    HCG_FIND_HANG,          /* "hung-host-fn": still running after HCGUARD_HANG_S */
    /* "oneshot-host-fn-in-graph": captured through cuda.bindings, whose
     * wrapper frees its data after one run, into a graph that replays it */
    HCG_FIND_ONESHOT_IN_GRAPH,
    HCG_FIND_COUNT
} hcg_finding;
const char *hcg_finding_name(hcg_finding f);

/* A skip of a record already reported at enqueue (audit mode): shown, but
 * not counted as a second error. */
#define HCG_EVF_REPORTED 0x01

typedef struct hcg_event {
    uint8_t kind;   /* hcg_evkind */
    uint8_t fnkind; /* hcg_fnkind */
    uint8_t reason; /* hcguard_status */
    uint8_t api;    /* hcg_api */
    uint8_t flags;  /* HCG_EVF_* */
    uint8_t fault_sig;  /* copy-faulted: SIGSEGV or SIGBUS (in the padding) */
    uint8_t fault_code; /* copy-faulted: its si_code */
    uint32_t tid;
    uint64_t seq;
    uint64_t t_enqueue, t_start, t_end; /* hcg_ticks(); ns once drained */
    uint64_t bytes;
    uintptr_t fn, user, stream, dst, src;
    uintptr_t graph, node; /* graph host nodes; 0 for stream launches */
    uintptr_t fault_addr;  /* copy-faulted: the address that faulted */
} hcg_event;

/* Exact counters. Each thread counts what it did (ran, copied, skipped,
 * rejected, found) in its own ring's block when it pushes the event, one
 * writer per block (relaxed load and store, no read-modify-write), summed
 * on demand: never derived from drained events, which may be dropped. */
enum {
    HCG_CNT_RAN = 0,                                         /* + hcg_fnkind */
    HCG_CNT_BYTES = HCG_CNT_RAN + HCG_FN_KIND_COUNT,         /* copied */
    HCG_CNT_SKIPPED,                                         /* + hcguard_status */
    HCG_CNT_SKIPPED_REPORTED = HCG_CNT_SKIPPED + HCGUARD_STATUS_COUNT,
    HCG_CNT_GRAPH_RUNS,
    HCG_CNT_REJECTED,                                        /* + hcguard_status */
    HCG_CNT_FINDING = HCG_CNT_REJECTED + HCGUARD_STATUS_COUNT, /* + hcg_finding */
    HCG_CNT_N = HCG_CNT_FINDING + HCG_FIND_COUNT
};
typedef struct hcg_counts {
    uint64_t v[HCG_CNT_N];
} hcg_counts;
/* The sums over every thread (and the collector's own). */
void hcg_counts_get(hcg_counts *out);
/* A finding the collector makes itself (slow, hung): counted there. */
void hcg_count_collector(hcg_finding f);
/* Sum of n counters from first. */
uint64_t hcg_counts_sum(const hcg_counts *c, unsigned first, unsigned n);

/* Copy *e into the calling thread's ring: no lock, no allocation (after a
 * thread's first event), no system call in the common path (the collector
 * is woken when the ring passes half full). Counts it first; drops and
 * counts the drop when full. */
void hcg_event_push(const hcg_event *e);
/* Around a host function: what the thread runs, for the watchdog. */
void hcg_event_running(uintptr_t fn, uint64_t since);
/* Report host functions running longer than hang_ns (collector). */
void hcg_events_watch(uint64_t hang_ns);
/* Drain every ring into the sinks now (any thread; serialised). */
void hcg_events_flush(void);
/* Start the collector thread (idempotent; after fork, restarts). */
void hcg_collector_start(void);
/* Stop the collector and drain what is left (exit). */
void hcg_collector_stop(void);
void hcg_events_after_fork(void);
/* Flow control: how many undrained events the launches may leave
 * (half a ring; 0 when no collector runs); the count of drain passes, and
 * waiting (at most ms) for the next one, having woken the collector. */
uint64_t hcg_events_flow_room(void);
uint32_t hcg_events_drain_gen(void);
void hcg_events_wait_drain(uint32_t gen, unsigned ms);
uint64_t hcg_events_dropped(void);
/* Drain every ring and write the files' buffers out now (before exec). */
void hcg_events_flush_files(void);
/* The same from a fatal signal's handler: only if no drain is under way
 * (a trylock), so it never waits; async-signal-safe as far as the sinks'
 * formatting (snprintf) is. */
void hcg_events_flush_from_signal(void);
uint32_t hcg_gettid(void); /* cached per thread */

/* ---- summary.c: aggregation and the exit summary ----------------------- */
void hcg_summary_event(const hcg_event *e); /* collector thread only */
void hcg_summary_stats(hcguard_stats *out);
void hcg_summary_print(int fd);
uint64_t hcg_summary_errors(void);
/* In a fork child: counters start from nothing (the child reports its own). */
void hcg_summary_after_fork(void);
/* Whether this process launched, ran or was told anything worth a summary. */
int hcg_summary_active(void);

/* ---- flight.c: the flight recorder (under hcguard run) -------------------- */
#define HCG_FLIGHT_MAGIC 0x3172666467636868ull /* "hhcgdfr1" */
#define HCG_FLIGHT_MAX_RINGS 64

/* At the start of the file HCGUARD_FLIGHT names; then the call pools'
 * store (pools_off) and the rings (rings_off, ring_bytes each). */
typedef struct hcg_flight {
    uint64_t magic;                  /* HCG_FLIGHT_MAGIC once set up */
    uint64_t bytes, ring_bytes, pools_off, rings_off;
    _Atomic int32_t pid;             /* the process recording into it */
    _Atomic int32_t finished;        /* it wrote everything and its summary */
    _Atomic uint32_t n_rings;
    int32_t mode;                    /* hcg_mode */
    _Atomic uint64_t nodes_launched[HCG_FN_KIND_COUNT]; /* set on graph nodes */
    _Atomic uint64_t nodes_made;
    _Atomic uint64_t coll_cnt[HCG_CNT_N]; /* the collector's own counts */
    char log_path[HCG_PATH_MAX], trace_path[HCG_PATH_MAX];
    char report_path[HCG_PATH_MAX];  /* HCGUARD_LOG_FILE, expanded */
} hcg_flight;

extern hcg_flight *hcg_g_flight; /* NULL: not recording */
/* Map HCGUARD_FLIGHT's file, if set and not another process's (start-up,
 * before any ring or pool is made). */
void hcg_flight_attach(void);
/* Memory for the next ring in the file (ring_bytes, not zeroed), or NULL. */
void *hcg_flight_ring(void);
void hcg_flight_finished(int done);
void hcg_flight_after_fork(void); /* first of the fork child's hooks */
/* events.c, trampoline.c: the parts of the record they keep. */
size_t hcg_events_ring_bytes(void);
size_t hcg_pool_store_bytes(void);
void hcg_pool_use_store(void *mem);
uint64_t hcg_pool_store_launched(const void *store, hcg_fnkind kind);
/* The launcher, after the program at pid ended (how: "exit status 3",
 * "signal 9 (Killed)"): if it did not finish itself, the events left in
 * its rings go to its log and trace and its summary is printed. 1 if it
 * did so (*errors: what --error-exitcode counts), 0 if there was nothing
 * to do, -1 if the file is not a record. */
int hcg_flight_recover(const char *path, pid_t pid, const char *how, uint64_t *errors);
/* events.c: the events left in a record's rings, to the sinks; its counts. */
void hcg_events_recover(const hcg_flight *f, hcg_counts *counts, uint64_t *dropped);
/* summary.c: the summary of a record's counts. */
void hcg_summary_print_recovered(const hcg_flight *f, const hcg_counts *c, uint64_t dropped,
                                 pid_t pid, const char *how);
uint64_t hcg_summary_errors_of(const hcg_counts *c);
/* jsonl.c, trace.c: continue the file of process pid. */
int hcg_jsonl_reopen(const char *path, pid_t pid);
int hcg_trace_reopen(const char *path, pid_t pid);

/* ---- sinkfile.c: the sinks' output files --------------------------------- */
#define HCG_SINK_EVENT_MAX 2048 /* room reserved for one event's text */

typedef struct hcg_sinkfile {
    const char *what;               /* "event log", "trace": for messages */
    int fd;                         /* -1: none */
    int shared_ok;                  /* a fork child may append to the parent's file */
    int open_pending;               /* a fork child's own file, not opened yet */
    int unshared;                   /* a fork child that may not share, with no %p */
    int started;                    /* an event was written to this file */
    int err;                        /* the first write error, 0 if none */
    pid_t pid;
    uint64_t written, lost;         /* events */
    unsigned buf_events;
    size_t used;
    char path[HCG_PATH_MAX], pattern[HCG_PATH_MAX];
    char buf[1 << 16];
} hcg_sinkfile;

/* Which sink a file is, for HCGUARD_EXEC (see sinkfile.c). */
enum { HCG_SINK_LOG = 0, HCG_SINK_TRACE = 1, HCG_SINK_REPORT = 2 };
/* How the image before this one left the file of sink slot (HCGUARD_EXEC):
 * 'c' continue it, 'n' write none, '-' start it anew. pattern: the file's
 * name before expansion (one with %p is a process's own). */
char hcg_exec_inherited(int slot, const char *pattern, int shared_ok);
/* Open an output file safely (see sinkfile.c): created new with
 * HCGUARD_FILE_MODE, or an existing regular file of the effective user
 * truncated (kept and appended to with HCG_OPEN_APPEND); a symlink, FIFO,
 * device, directory or another user's file is refused. Returns the fd
 * (O_APPEND, O_CLOEXEC, blocking), or -1 with the reason in why. */
#define HCG_OPEN_APPEND 1
int hcg_open_output_why(const char *path, int flags, char *why, size_t len);
/* The same, saying why it failed (hcg_problem) for the `what` of path. */
int hcg_open_output(const char *path, const char *what, int flags);
/* Open path (expanded from pattern, kept for a fork child's own %p).
 * shared_ok: a fork child without %p appends to the same file; else it
 * writes none. An image started by exec continues the file the image
 * before it had open. 0, or -1 with a message. */
int hcg_sinkfile_open(hcg_sinkfile *f, const char *what, const char *path, const char *pattern,
                      int shared_ok, int slot);
int hcg_sinkfile_reopen(hcg_sinkfile *f, const char *what, const char *path, pid_t pid);
/* Write out what is buffered, keeping the file open (before exec). */
void hcg_sinkfile_flush(hcg_sinkfile *f);
/* What the next image should do with this file: 'c', 'n' or '-'. */
char hcg_sinkfile_exec_state(const hcg_sinkfile *f);
/* Room for one event (HCG_SINK_EVENT_MAX bytes), or NULL if there is no
 * file; then hcg_sinkfile_commit with the length written. */
char *hcg_sinkfile_reserve(hcg_sinkfile *f);
void hcg_sinkfile_commit(hcg_sinkfile *f, size_t len);
/* Write out the rest and footer (may be NULL), close, report an error. */
void hcg_sinkfile_close(hcg_sinkfile *f, const char *footer);
void hcg_sinkfile_after_fork(hcg_sinkfile *f);
void hcg_sinkfile_summary(const hcg_sinkfile *f); /* the summary's line */
/* From now on every function is "unknown" (the launcher, writing events of
 * a program that ended). */
void hcg_fn_names_gone(void);
/* on: hcg_fn_name answers from its cache alone ("unknown" else): a signal
 * handler is writing. */
void hcg_fn_names_cached_only(int on);
/* fn's symbol (or "anonymous"), looked up once per function (collector). */
const char *hcg_fn_name(uintptr_t fn);
/* s as the body of a JSON string into out; returns the length (< room). */
size_t hcg_json_str(char *out, size_t room, const char *s);

/* ---- jsonl.c: the event log -------------------------------------------- */
/* 0 or -1 (message printed). pattern: as configured, so that a fork child
 * whose log name holds %p writes a log of its own. */
int hcg_jsonl_open(const char *path, const char *pattern);
/* In a fork child: the parent's unwritten events are the parent's. */
void hcg_jsonl_after_fork(void);
void hcg_jsonl_event(const hcg_event *e);
void hcg_jsonl_flush(void);       /* drains serialised: under the drain lock */
char hcg_jsonl_exec_state(void);
/* Write out what is left and close; a write error is reported here. */
void hcg_jsonl_close(void);
/* The summary's line about the log (after hcg_jsonl_close). */
void hcg_jsonl_summary(void);

/* ---- trace.c: the Chrome trace -------------------------------------------- */
int hcg_trace_open(const char *path, const char *pattern); /* 0 or -1 (message printed) */
void hcg_trace_event(const hcg_event *e);
void hcg_trace_flush(void);
char hcg_trace_exec_state(void);
void hcg_trace_close(void);
void hcg_trace_after_fork(void);
void hcg_trace_summary(void);

/* ---- report.c: messages ------------------------------------------------ */
/* "==hcguard== " prefixed line, serialised, on hcguard's own duplicate of
 * stderr (taken at load, so a program reusing fd 2 never gets it) or the
 * HCGUARD_LOG_FILE file. */
void hcg_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hcg_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Text as it is, where messages go (for paths that cannot format). */
void hcg_write_raw(const char *text, size_t len);
/* 'c' if the report file is open (the next image continues it), else '-'. */
char hcg_report_exec_state(void);
/* The launcher, for a program that died: its report file, appended to. */
void hcg_report_continue(const char *path);
/* Misconfiguration: printed now as an ERROR (without --debug) and kept,
 * to be repeated in the summary (hcg_problems_print). */
void hcg_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hcg_problems_print(void);
/* Kept for the summary only, not printed now. */
void hcg_problem_keep(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned hcg_problems_count(void);
/* 1 if one more finding may be printed under HCGUARD_PRINT_LIMIT; else 0,
 * counted (the first time, says so). */
int hcg_print_take(void);
uint64_t hcg_print_suppressed(void);
/* Report one enqueue-time finding (printed once per call) and count it. */
void hcg_report_reject(hcg_api api, CUstream s, void *fn, void *user,
                       hcg_fnkind kind, const hcguard_copy_record *r,
                       hcguard_status why, int refused);

void hcg_report_skip(const hcg_event *e);

/* ---- audit.c: host-callback misuse --------------------------------------- */
void hcg_audit_init(void);
/* Inside a host function, one of hcguard's own wrappers was called: report
 * it; nonzero if the call must be refused (guard mode). Outside host
 * functions (hcg_audit_wrapper_call, inline below the thunks), 0. */
int hcg_audit_wrapper_call_slow(hcg_api api);
/* The libc function fn is ("memcpy"), or NULL. */
const char *hcg_audit_libc_name(const void *fn);
void hcg_audit_report_fn(hcg_finding f, hcg_api api, CUstream s, void *fn, void *user);
void hcg_audit_event(const hcg_event *e); /* collector */
uint64_t hcg_audit_errors(const hcg_counts *c); /* the findings that are errors */
void hcg_audit_print(const hcg_counts *c);
void hcg_audit_after_fork(void); /* a fork child's findings are its own */

/* ---- fork.c: one pthread_atfork registration for every module ---------- */
/* Idempotent; called by the modules that hold locks, before they take one. */
void hcg_fork_register(void);
/* The modules' hooks: locks whose state a child keeps are taken before the
 * fork and released after it; in the child every lock is made anew. */
void hcg_thunk_fork_lock(void);
void hcg_thunk_fork_unlock(void);
void hcg_thunk_after_fork(void);
void hcg_oracle_fork_lock(void);
void hcg_oracle_fork_unlock(void);
void hcg_oracle_after_fork(void);
void hcg_graph_fork_lock(void);
void hcg_graph_fork_unlock(void);
void hcg_graph_after_fork(void);
void hcg_report_after_fork(void);
void hcg_init_after_fork(void);

/* ---- lifecycle.c: exec, fatal signals ------------------------------------ */
/* For the chained handlers of fatal signals: write the events still in the
 * rings to the log and the trace, without waiting for any lock. */
void hcg_lifecycle_flush_from_signal(void);
/* init.c: the summary of an image about to exec, if it did anything. */
void hcg_lifecycle_exec_summary(void);

/* ---- init.c: lifecycle ------------------------------------------------- */
/* Start-up (pthread_once); safe from any intercepted call. Inline: once
 * started, one load. */
extern atomic_int hcg_g_started;
void hcg_init_slow(void);
static inline void hcg_init(void)
{
    if (HCG_UNLIKELY(!atomic_load_explicit(&hcg_g_started, memory_order_acquire)))
        hcg_init_slow();
}
uint64_t hcg_next_seq(void);
/* Count a launch that reached the driver, by the launching thread, in its
 * own pool p, taken before the driver call (after it, the call may be
 * another thread's already). */
void hcg_count_launch(struct hcg_pool *p, hcg_fnkind kind);
/* Count a host function set on a graph node. */
void hcg_count_node(hcg_fnkind kind);

/* ---- thunk.c: entry points handed out for any driver function ---------- */
/* Set by the trampoline while the thread runs a host function. Initial-exec
 * TLS, so the thunks read it with one load from the thread pointer. */
extern _Thread_local unsigned char hcg_in_host_fn
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

static inline int hcg_audit_wrapper_call(hcg_api api)
{
    return HCG_UNLIKELY(hcg_in_host_fn) ? hcg_audit_wrapper_call_slow(api) : 0;
}

#define HCG_THUNK_MAX 4096
/* A handler's answer that lets the call through to the real function. */
#define HCG_THUNK_PASS ((CUresult)-1)
/* Called when a thunk is entered inside a host function: HCG_THUNK_PASS
 * calls real with the caller's arguments; anything else is returned to the
 * caller instead. Runs with hcg_in_host_fn cleared. For an export not yet
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
/* The exports: a thunk for each function of the driver hcguard was built
 * against, at indices HCG_THUNK_MAX + i, which libhcguard exports under the
 * function's name. The first call looks the function up in the driver
 * (loading it); a call that cannot be served returns
 * CUDA_ERROR_NOT_INITIALIZED (no driver) or CUDA_ERROR_NOT_FOUND (the
 * driver lacks it). None without thunks. */
unsigned hcg_thunk_exports(void);
void *hcg_thunk_export(unsigned i); /* export i's entry point, NULL past the end */
int hcg_thunk_is_export(const void *p);

/* ---- graph.c: host nodes ---------------------------------------------------
 * A host function enqueued while its stream captures: attach c to the
 * capture graph (it runs on every replay, and lives as long as the graph).
 * Returns 0, or -1 if the capture graph cannot be found (c then lives for
 * ever: leaking is the safe side). */
int hcg_graph_adopt_capture(hcg_call *c, CUstream s, int ptsz);
/* After the launch: note which node the capture made of it. */
void hcg_graph_note_captured(hcg_call *c, CUstream s, int ptsz);
uint64_t hcg_graph_calls_live(void);

/* ---- stream.c: shared with graph.c ------------------------------------ */
/* Recognise fn (through cuda.bindings' wrapper), check its record if it is
 * a copy, and make the call the trampoline will run. CUDA_ERROR_INVALID_VALUE
 * if refused (reported); else CUDA_SUCCESS and *out, NULL if out of memory. */
CUresult hcg_prepare_call(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_call **out);

#endif /* HCG_H */
