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
extern _Atomic uint64_t hcg_g_oracle_gen __attribute__((visibility("hidden")));
static inline uint64_t hcg_oracle_gen(void)
{
    return atomic_load_explicit(&hcg_g_oracle_gen, memory_order_acquire);
}
/* Records this thread found good lately (oracle.c), inline for the launch
 * path: a copy of the entry found last (hot) is looked at first, at a
 * fixed place. */
#define HCG_RC_SLOTS 8
typedef struct hcg_rc_entry {
    const void *rec;
    hcguard_copy_record r;
    uint64_t gen, until; /* until: hcg_ticks() when it expires */
} hcg_rc_entry;
typedef struct hcg_rc_cache {
    hcg_rc_entry hot;
    hcg_rc_entry e[HCG_RC_SLOTS];
    unsigned next;
} hcg_rc_cache;
extern _Thread_local hcg_rc_cache hcg_t_rc
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
static inline int hcg_rc_holds(const hcg_rc_entry *e, const void *rec,
                               const hcguard_copy_record *r, uint64_t t, uint64_t gen)
{
    return e->rec == rec && e->gen == gen && t <= e->until && e->r.dst == r->dst &&
           e->r.src == r->src && e->r.nbytes == r->nbytes;
}
int hcg_oracle_recent_slow(const void *rec, const hcguard_copy_record *r, uint64_t t);
/* The launch's fast path, in two steps around its read of the record: is
 * rec (not NULL) the record of this thread's last verdict? (There is one
 * only once the fault handler is installed, so the contained read may
 * follow.) Then: does that verdict hold for the contents *r just read, at
 * time t and generation gen (read before *r was)? */
static inline int hcg_oracle_hot(const void *rec)
{
    return hcg_t_rc.hot.rec == rec && rec != NULL;
}
static inline int hcg_oracle_holds_hot(const hcguard_copy_record *r, uint64_t t, uint64_t gen)
{
    const hcg_rc_entry *e = &hcg_t_rc.hot;
    /* One test of all the words, not a branch each. */
    uint64_t differ = (e->gen ^ gen) | (e->r.dst ^ r->dst) | (e->r.src ^ r->src) |
                      (e->r.nbytes ^ r->nbytes);
    return (differ == 0) & (t <= e->until);
}
/* 1 if the record at rec, whose contents are *r (read by the caller), was
 * found good by this thread lately (at most RC_TTL_NS, src/check/oracle.c,
 * before t, a hcg_ticks() time stamp) with the same contents, and the
 * generation has not moved since; else 0 (check it). Reads no user memory;
 * no clock, no system call. */
static inline int hcg_oracle_recent(const void *rec, const hcguard_copy_record *r, uint64_t t)
{
    if (HCG_LIKELY(hcg_rc_holds(&hcg_t_rc.hot, rec, r, t, hcg_oracle_gen())))
        return rec != NULL;
    return hcg_oracle_recent_slow(rec, r, t);
}
/* Remember rec as good with contents *r, checked at generation gen (read
 * before the check began) and time t (hcg_ticks). One entry per record:
 * replaced in place. */
void hcg_oracle_remember(const void *rec, const hcguard_copy_record *r, uint64_t gen, uint64_t t);
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

/* A contained copy needs SIGSEGV and SIGBUS to reach hcguard's handler:
 * a fault with either blocked kills the process, whatever the handler
 * (servers block every signal in main before they start their threads,
 * and the threads inherit the mask). A thread not known to have both
 * unblocked (hcg_self.faults_open: learnt by its first copy, forgotten
 * when the program sets a mask through pthread_sigmask or sigprocmask)
 * copies through this, which unblocks them for the copy's length: one
 * system call when they are open (the thread learns it), three when not. */
int hcg_fault_copy_masked(void *dst, const void *src, size_t n, hcg_fault_info *out);
/* memcpy(dst, src, n), but a SIGSEGV or SIGBUS on either range returns -1
 * (with *out filled, out may be NULL) instead of killing the process.
 * n above PTRDIFF_MAX, which no address space holds, returns -1 at once as
 * a fault at no address (SIGSEGV, SI_KERNEL): glibc's memcpy, given such
 * an n, may wrap around and write below dst instead of faulting.
 * No system call or lock when nothing faults. Contained only once
 * hcg_fault_install has succeeded; before that, a plain memcpy. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define HCG_FAULT_FIXUP 1
/* x86-64 without sanitizers: inline, around entries in fault_x86_64.S:
 * hcguard's own word loop (records: each field one value the program
 * wrote) and rep movsb (mid-sized copies where the processor has fast
 * string moves: as fast as glibc's memcpy there, and recognised by its pc,
 * so not armed), or glibc's memcpy armed by storing the stack pointer in
 * hcg_fault_sp (0: no copy armed). They return dst (in rax) or, after a
 * fault, HCG_FAULT_MARK | signal << 16 | si_code, with the address in
 * rdx: registers, which nothing can overwrite before the caller reads
 * them (a signal handler's copy could, in memory). See src/check/fault.c. */
#define HCG_HIDDEN __attribute__((visibility("hidden")))
#define HCG_FAULT_MARK ((uintptr_t)0xff << 56) /* no user address has it */
typedef struct hcg_fault_ret {
    uintptr_t done; /* rax */
    uintptr_t addr; /* rdx */
} hcg_fault_ret;
extern _Thread_local uintptr_t hcg_fault_sp HCG_HIDDEN;
/* Sizes copied by rep movsb: n - lo < span (span 0: none). */
extern size_t hcg_fault_movsb_lo HCG_HIDDEN, hcg_fault_movsb_span HCG_HIDDEN;
HCG_HIDDEN hcg_fault_ret hcg_fault_memcpy(void *dst, const void *src, size_t n);
HCG_HIDDEN hcg_fault_ret hcg_fault_words(void *dst, const void *src, size_t n);
HCG_HIDDEN hcg_fault_ret hcg_fault_movsb(void *dst, const void *src, size_t n);
HCG_HIDDEN hcg_fault_ret hcg_fault_record(void *dst, const void *src);
HCG_HIDDEN int hcg_fault_failed(hcg_fault_ret r, hcg_fault_info *out);
HCG_HIDDEN int hcg_fault_too_long(hcg_fault_info *out);

static inline int hcg_fault_copy(void *dst, const void *src, size_t n, hcg_fault_info *out)
{
    hcg_fault_ret r;
    if (HCG_UNLIKELY(!hcg_self.faults_open))
        return hcg_fault_copy_masked(dst, src, n, out);
    if (HCG_UNLIKELY((ptrdiff_t)n <= 0)) /* 0, or longer than any address space */
        return n == 0 ? 0 : hcg_fault_too_long(out);
    if (n <= 64 && (((uintptr_t)dst | (uintptr_t)src | n) & 7) == 0) {
        /* A record another thread may be rewriting is read a whole
         * aligned word per field, never a mix of two values (which could
         * be any address); small aligned copies go word by word. */
        r = hcg_fault_words(dst, src, n);
    } else if (n - hcg_fault_movsb_lo < hcg_fault_movsb_span) {
        r = hcg_fault_movsb(dst, src, n);
    } else {
        uintptr_t outer = hcg_fault_sp; /* a copy this one interrupted (a signal handler's) */
        r = hcg_fault_memcpy(dst, src, n);
        hcg_fault_sp = outer;
    }
    if (HCG_LIKELY((r.done & HCG_FAULT_MARK) != HCG_FAULT_MARK))
        return 0;
    return hcg_fault_failed(r, out);
}

/* A copy record read as hcg_fault_copy reads it (0, or nonzero if it
 * faulted), by the shortest path when it is aligned (the launch path and
 * the trampoline read one per copy). */
static inline int hcg_fault_read_record(hcguard_copy_record *dst, const void *src)
{
    if (HCG_LIKELY(hcg_self.faults_open && ((uintptr_t)src & 7) == 0)) {
        hcg_fault_ret r = hcg_fault_record(dst, src);
        if (HCG_LIKELY((r.done & HCG_FAULT_MARK) != HCG_FAULT_MARK))
            return 0;
        return hcg_fault_failed(r, NULL);
    }
    return hcg_fault_copy(dst, src, sizeof *dst, NULL);
}
#else
#define HCG_FAULT_FIXUP 0
int hcg_fault_copy(void *dst, const void *src, size_t n, hcg_fault_info *out);
static inline int hcg_fault_read_record(hcguard_copy_record *dst, const void *src)
{
    return hcg_fault_copy(dst, src, sizeof *dst, NULL);
}
#endif
/* ---- parcopy.c: large copies split across worker threads --------------- */
/* The least a thread is given of a split copy. */
#define HCG_COPY_PART_MIN ((size_t)1 << 20)
/* hcg_fault_copy, split into up to `threads` parts of at least
 * HCG_COPY_PART_MIN made by the copy pool's workers and the calling
 * thread; returns when every part is done; a fault in any part: -1 once,
 * with the first fault. Whole on this thread when it is too small or the
 * pool is busy with another copy. */
int hcg_copy_split(void *dst, const void *src, size_t n, unsigned threads, hcg_fault_info *out);
/* A copy hcguard makes for a host function: split as HCGUARD_COPY_THREADS
 * says. */
static inline int hcg_copy_run(void *dst, const void *src, size_t n, hcg_fault_info *out)
{
    if (HCG_LIKELY(n < 2 * HCG_COPY_PART_MIN)) /* never split: no setting to read */
        return hcg_fault_copy(dst, src, n, out);
    unsigned threads = hcg_config_get()->copy_threads;
    if (threads <= 1)
        return hcg_fault_copy(dst, src, n, out);
    return hcg_copy_split(dst, src, n, threads, out);
}
/* Join the workers (exit: closing = 1, none made again; exec: 0, made
 * again when needed). */
void hcg_copy_pool_stop(int closing);
unsigned hcg_copy_pool_workers(void); /* how many there are (tests) */
/* Where part i of parts begins in a split copy to dst of n bytes (tests). */
size_t hcg_copy_part_start(uintptr_t dst, size_t n, unsigned parts, unsigned i);
void hcg_copy_pool_after_fork(void);  /* fork hook (src/lifecycle/fork.c) */

/* Install hcguard's SIGSEGV and SIGBUS handlers, chained to those already
 * there (idempotent); 0, or -1. hcg_fault_ready: installed. */
int hcg_fault_install(void);
/* While the program leaves a death signal (HCG_DEATH_SIGNALS, base.h) at
 * the default action, hook runs before the process dies of it (and before
 * a default-action death by SIGSEGV or SIGBUS); it runs in a signal
 * handler, so it must wait for nothing. See src/check/fault.c. */
void hcg_fault_watch_deaths(void (*hook)(void));
int hcg_fault_ready(void);
void hcg_fault_after_fork(void); /* fork child hook (src/lifecycle/fork.c) */
/* "SEGV_MAPERR", "BUS_ADRERR", ...; "other" when unknown. */
const char *hcg_fault_code_name(int sig, int code);
/* The sizes [*lo, *hi) that contained copies make by rep movsb (x86-64
 * with fast string moves; none elsewhere), after setting them when set
 * is 1 (tests, bench_copy; *lo == *hi: none). */
void hcg_fault_movsb_window(size_t *lo, size_t *hi, int set);

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
/* The answer hcg_recognize last gave on this thread, valid while no
 * registration completed since (hcg_g_recognize_gen): a launch of the same
 * function again costs two compares (hcg_recognize_fast). */
typedef struct hcg_recognized {
    uintptr_t fn;
    unsigned gen;
    uint8_t kind;
} hcg_recognized;
extern _Thread_local hcg_recognized hcg_t_recognized
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern _Atomic unsigned hcg_g_recognize_gen __attribute__((visibility("hidden")));
static inline hcg_fnkind hcg_recognize_fast(void *fn)
{
    if (HCG_LIKELY(hcg_t_recognized.fn == (uintptr_t)fn &&
                   hcg_t_recognized.gen ==
                       atomic_load_explicit(&hcg_g_recognize_gen, memory_order_acquire)))
        return (hcg_fnkind)hcg_t_recognized.kind;
    return hcg_recognize(fn);
}
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
 * bit with the hcg_api of one of hcguard's own launch wrappers, or
 * HCG_FIND_ENTRY_BIT with the hcg_entry of any other wrapper. */
#define HCG_FIND_WRAPPER_BIT (1ull << 32)
#define HCG_FIND_ENTRY_BIT (1ull << 33)
void hcg_audit_init(void);
/* Inside a host function, one of hcguard's own wrappers was called: report
 * it; nonzero if the call must be refused (guard mode). Outside host
 * functions (hcg_audit_wrapper_call, inline below the thunks), 0. */
int hcg_audit_wrapper_call_slow(hcg_api api);
int hcg_audit_entry_call_slow(hcg_entry e);
/* The libc functions a host function must not be, looked up (once; at
 * start-up, before the collector runs: see lifecycle/init.c). */
void hcg_audit_libc_init(void);
/* The libc function fn is ("memcpy"), or NULL. */
const char *hcg_audit_libc_name(const void *fn);
void hcg_audit_report_fn(hcg_finding f, hcg_api api, CUstream s, void *fn, void *user);

/* One of hcguard's wrappers was entered: 0 outside host functions (one
 * thread-local load), else as hcg_audit_wrapper_call_slow. */
static inline int hcg_audit_wrapper_call(hcg_api api)
{
    return HCG_UNLIKELY(hcg_self.in_host_fn) ? hcg_audit_wrapper_call_slow(api) : 0;
}
/* The same for a wrapper that enqueues no host function, named by its
 * entry point. */
static inline int hcg_audit_entry_call(hcg_entry e)
{
    return HCG_UNLIKELY(hcg_self.in_host_fn) ? hcg_audit_entry_call_slow(e) : 0;
}

/* ---- src/run/trampoline.c ------------------------------------------------ */
/* The running call's function, data, stream, graph node, kind and entry
 * point into *e (left as they are when it runs none): the audit names the
 * host function a CUDA call was made in. Defined by the run layer, which
 * knows the call's layout. (Whether a call runs at all, the oracle reads
 * in hcg_self.current.) */
void hcg_current_call_describe(hcg_event *e);

/* ---- reject.c: bad records found at enqueue ------------------------------ */
/* Report one enqueue-time finding (printed once per call) and count it. */
void hcg_report_reject(hcg_api api, CUstream s, void *fn, void *user,
                       hcg_fnkind kind, const hcguard_copy_record *r,
                       hcguard_status why, int refused);

/* ---- callsite.c: which code of the application made a call ---------------
 * A site: a return address, or (HCG_SITE_BIT) an interned backtrace whose
 * first frame is the caller (--backtrace N). 0: unknown. */
#define HCG_SITE_BIT (1ull << 63)
/* The first frame outside hcguard, libcudart* and libcuda* of the calling
 * thread's stack (with --backtrace N, N frames from it, interned). */
uintptr_t hcg_callsite_here(void);
/* HCGUARD_BACKTRACE, copied at start-up (hcg_callsite_init). */
extern unsigned hcg_g_backtrace;
void hcg_callsite_init(void);
/* The rare paths of a stream launch, tested with one load: a capture has
 * begun somewhere (set by wrap/stream.c), --backtrace (set at start-up),
 * the CUDA runtime calls the wrappers (x86-64; set when libcudart* is
 * loaded at start-up or looks an entry point up: hcg_callsite_launch). */
#define HCG_LAUNCH_CAPTURE 1
#define HCG_LAUNCH_BACKTRACE 2
#define HCG_LAUNCH_RUNTIME 4
#define HCG_LAUNCH_NVTX 8 /* NVTX ranges: each call its function's name */
/* Not known ready: set at load and in a fork child, cleared by a launch
 * that found the driver loaded, the settings read with hcguard on and not
 * debugging, and start-up done (none of which is undone but by a fork).
 * So one load tells a stream launch's fast path all of that. */
#define HCG_LAUNCH_UNREADY 16
extern atomic_int hcg_g_launch_rare;
/* The site of a launch whose wrapper returns to ra: ra itself when that is
 * the program's code; when it is in the CUDA runtime or driver, the
 * program's return address further up, read from a stack slot learned
 * once per ra and path by unwinding (x86-64; ra itself elsewhere, or when
 * it cannot be learned). Call it from the wrapper's own thread, directly
 * below the wrapper's frame (not through a signal handler). */
uintptr_t hcg_callsite_launch(uintptr_t ra);
/* A stream launch's site when hcg_g_launch_rare has HCG_LAUNCH_BACKTRACE
 * (the stack walked: hcg_callsite_here) or HCG_LAUNCH_RUNTIME
 * (hcg_callsite_launch). */
uintptr_t hcg_callsite_rare(uintptr_t ra);
/* The same for a graph node made or set by a wrapper that returns to ra:
 * when the slot cannot tell, the stack is walked (hcg_callsite_here). */
uintptr_t hcg_callsite_made(uintptr_t ra);
size_t hcg_callsite_frames(uintptr_t site, uintptr_t *out, size_t max);
uintptr_t hcg_callsite_pc(uintptr_t site); /* its first frame */
/* "main+0x1c (in app)" for a site, or for one frame's pc. */
void hcg_callsite_name(uintptr_t site, char *buf, size_t len);
/* Set by a reader of other processes' logs (hcguard report): sites are
 * then its own numbers for the names the logs hold, named by it alone. */
extern int (*hcg_callsite_name_from)(uintptr_t site, char *buf, size_t len);
void hcg_callsite_pc_name(uintptr_t pc, char *buf, size_t len);
void hcg_callsite_after_fork(void); /* fork hook: the table's lock anew */
/* "    how main+0x1c (in app)", then --backtrace's frames, one a line. */
void hcg_callsite_print(const char *how, uintptr_t site);
void hcg_reject_after_fork(void); /* reject.c's set of what was printed */

#endif /* HCG_CHECK_H */
