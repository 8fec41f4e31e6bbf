/* The base layer (src/base): the configuration, messages, the clock, ELF
 * and dynamic symbols, and the names of hcguard's enumerations. It calls
 * nothing above it and needs no <cuda.h>. */
#ifndef HCG_BASE_H
#define HCG_BASE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hcguard.h"

#define HCG_EXPORT __attribute__((visibility("default")))
#define HCG_LIKELY(x) __builtin_expect(!!(x), 1)
#define HCG_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The file name at the end of path (after its last '/'), or NULL for NULL. */
static inline const char *hcg_file_name(const char *path)
{
    const char *slash = path ? __builtin_strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

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
    int nvtx;      /* HCGUARD_NVTX: each host function an NVTX range (Nsight Systems) */
    char rank[16]; /* the MPI/Slurm rank from the launcher's environment; "" = unknown */
    unsigned copy_threads; /* HCGUARD_COPY_THREADS: threads a large copy is split across */
    unsigned backtrace;          /* HCGUARD_BACKTRACE: frames printed under a finding; 0 none */
    unsigned no_finding;         /* HCGUARD_NO_FINDING: 1 << hcg_finding of kinds switched off */
    int warnings_as_errors;      /* HCGUARD_WARNINGS_AS_ERRORS: --error-exitcode counts them */
} hcg_config;
#define HCG_BACKTRACE_MAX 64
/* Whether finding kind f (an hcg_finding) is reported. */
#define HCG_FINDING_ON(cfg, f) (!((cfg)->no_finding & (1u << (f))))
/* "cuda-call-in-host-fn" or its short name "cuda-call": the hcg_finding,
 * or 0 if neither. */
int hcg_finding_by_name(const char *name, size_t len);
#define HCG_PRINT_LIMIT_DEFAULT 100
/* 1: copies are not split (src/check/parcopy.c). */
#define HCG_COPY_THREADS_DEFAULT 1
#define HCG_COPY_THREADS_MAX 64

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
/* The settings, one row each of options.def, in its order: what the
 * library parses and the launcher's options are made from. */
typedef enum hcg_option_id {
#define HCG_OPTION(id, ...) HCG_OPT_##id,
#include "base/options.def"
#undef HCG_OPTION
    HCG_OPT_COUNT
} hcg_option_id;
typedef enum hcg_option_kind {
    HCG_OPT_KIND_VALUE, /* --option VALUE sets the variable to VALUE */
    HCG_OPT_KIND_LIST,  /* the same; values of repeated options joined with ',' */
    HCG_OPT_KIND_FLAG   /* --option sets the variable to arg */
} hcg_option_kind;
typedef struct hcg_option {
    const char *var;    /* "HCGUARD_MODE" */
    const char *option; /* "--mode" */
    hcg_option_kind kind;
    const char *arg;    /* the value's name in --help, or a flag's value */
    const char *shown_default; /* NULL: --help shows none */
    const char *help;
    int (*parse)(hcg_config *c, void *field, const char *v, hcg_getenv_fn getenv_fn,
                 char *why, size_t whylen);
    size_t field_offset; /* of the hcg_config field parse writes */
} hcg_option;
extern const hcg_option hcg_options[HCG_OPT_COUNT];
/* Check v as the value of o, with the parser the library uses: 0, or -1
 * with the quoted value and what is wrong with it in why. */
int hcg_option_check(const hcg_option *o, const char *v, hcg_getenv_fn getenv_fn,
                     char *why, size_t whylen);
/* Expand %p (pid), %h (host), %q{VAR}, %% in pattern. Returns 0, or -1
 * with a message in err (unknown %x, unset VAR, unterminated %q{, too long). */
int hcg_expand_path(const char *pattern, char *out, size_t outlen,
                    hcg_getenv_fn getenv_fn, char *err, size_t errlen);


/* ---- thread.c: each thread's own state, one block --------------------- */
/* Every thread-local hcguard keeps for a thread, but those of the launch
 * and copy paths whose types belong to their layer (docs/ARCHITECTURE.md
 * lists them: the copy's fault arming, the oracle's and recognition's
 * caches, the callback thread's calls to give back). Initial-exec: one
 * load from the thread pointer, no __tls_get_addr (see thread.c). Each
 * layer touches only its own fields; the pointers are opaque here. */
struct hcg_ring;
struct hcg_pool;
struct hcg_marker;
struct hcg_call;
typedef struct hcg_thread {
    /* intercept: the thread runs a host function (set by the trampoline).
     * First: the thunks' stubs read the byte at the block's address. */
    unsigned char in_host_fn;
    unsigned char libc_lookup;    /* driver/libc.c: a dlsym lookup runs (re-entry guard) */
    unsigned char driver_loading; /* driver/driver.c: inside the driver's load */
    unsigned char collector;      /* events: the collector (its signals all blocked) */
    unsigned char faults_open;    /* check/fault.c: SIGSEGV and SIGBUS known unblocked here */
    unsigned char dying;          /* events: flushing from a death signal's handler */
    unsigned char capture_held;   /* wrap/stream.c: capture_lock held (1 read, 2 write), 3 wanted */
    uint32_t tid;                 /* events: gettid(), cached; 0 not yet */
    struct hcg_ring *ring;        /* events: this thread's event ring */
    struct hcg_pool *pool;        /* run: this thread's call pool */
    struct hcg_marker *marker;    /* run: its launch mark without a pool */
    const struct hcg_call *current; /* run: the call whose host function runs now */
    uint64_t linked_seq;          /* events: the next finding's seq; 0: a new one */
    uint64_t reject_seq;          /* check: the seq of this thread's last rejection */
} hcg_thread;
extern _Thread_local hcg_thread hcg_self
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* ---- ownfd.c: hcguard's own descriptors ------------------------------------
 * A program may close every descriptor above 2 (closefrom(3), as daemons
 * do) and open files of its own that get the numbers hcguard had: each of
 * hcguard's descriptors is known by its file's identity, checked (one
 * fstat) before hcguard writes, once per message or per batch of events. */
typedef struct hcg_fileid {
    dev_t dev;
    ino_t ino;
} hcg_fileid;
/* id of fd's file now: 0, or -1 (then id matches nothing). */
int hcg_fileid_of(int fd, hcg_fileid *id);
/* 1 if fd still is the file id names. Async-signal-safe. */
int hcg_fileid_is(int fd, const hcg_fileid *id);
/* 1 if descriptors a and b are open on the same file. Async-signal-safe. */
int hcg_fileid_same(int a, int b);
/* 1 if path (not a link) names the file id names. */
int hcg_path_is(const char *path, const hcg_fileid *id);
/* path opened again to append, only if it still is the file id names
 * (never through a link): the new descriptor, or -1. */
int hcg_reopen_same(const char *path, const hcg_fileid *id);
/* All of buf to fd: 0, or the errno that stopped it; errno kept. Raises no
 * SIGPIPE in the program (a pipe whose reader has gone) and is no
 * cancellation point. Async-signal-safe. */
int hcg_write_all(int fd, const void *buf, size_t n);
/* The same, and how many bytes were written (*done) when it stopped. */
int hcg_write_all_done(int fd, const void *buf, size_t n, size_t *done);
/* The death signals: every signal whose default action ends the process
 * and that arrives on its own (sent, or raised by a system call: SIGPIPE,
 * SIGXFSZ, SIGXCPU), so that holding it back delays it. hcguard stands in
 * for their default action (src/check/fault.c) and a drain on a program
 * thread holds them back (src/events/events.c). Not the faults of an
 * instruction (SIGILL, SIGFPE, SIGTRAP, SIGSYS: held back, the kernel
 * kills at once; and debuggers and sandboxes own SIGTRAP and SIGSYS), nor
 * the real-time signals (glibc's own among them). Expanded where
 * <signal.h> is included. */
#define HCG_DEATH_SIGNALS                                                        \
    SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, \
        SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR
/* The death signals whose default hcguard stands in for now (bit 1 << sig,
 * set by src/check/fault.c): a drain on a program thread holds back these
 * alone (a program's own handler, a GC's suspend signal, must not wait). */
extern _Atomic uint64_t hcg_g_standin_sigs;
/* Cancellation requests wait (returns the state to give back): around
 * hcguard's sections that hold a lock across a cancellation point, and its
 * waits inside driver calls that have none. */
int hcg_nocancel_begin(void);
void hcg_nocancel_end(int old);

/* ---- report.c: messages ------------------------------------------------ */
/* The length of the UTF-8 character at s, 0 if it is not a valid one (a
 * stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
 * cut short): messages, the log and the trace write '?' for such a byte. */
size_t hcg_utf8_len(const unsigned char *s);
/* "==hcguard== " prefixed line, serialised, on hcguard's own duplicate of
 * stderr (taken at load, so a program reusing fd 2 never gets it) or the
 * HCGUARD_LOG_FILE file. */
void hcg_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hcg_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Text as it is, where messages go (for paths that cannot format). */
void hcg_write_raw(const char *text, size_t len);
/* 'c' if the report file is open (the next image continues it), else '-'. */
char hcg_report_exec_state(void);
/* The launcher, for a program that died: its report file appended to, if
 * path still names the file the program opened (id, from its record; 0:
 * none opened), else messages stay on stderr, said. */
void hcg_report_continue(const char *path, const hcg_fileid *id);
/* Messages and summaries to fd from now on (hcguard report: its output). */
void hcg_report_to_fd(int fd);
/* Misconfiguration: printed now as an ERROR (without --debug) and kept,
 * to be repeated in the summary (hcg_problems_print). */
void hcg_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hcg_problems_print(void);
/* Kept for the summary only, not printed now. */
void hcg_problem_keep(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 if one more finding may be printed under HCGUARD_PRINT_LIMIT; else 0,
 * counted (the first time, says so). */
int hcg_print_take(void);
uint64_t hcg_print_suppressed(void);
void hcg_report_after_fork(void); /* fork hook: msg_lock made anew */
/* More than one process shares stderr: the prefix becomes
 * "==hcguard== [pid N] " ("[pid N rank R]" with a rank; a known rank sets
 * it too). Set in a fork child and its parent, in a process spawned or
 * exec'd by one that had it (HCG_SHARED_STDERR_VAR in its environment),
 * and in a parent that spawned. */
#define HCG_SHARED_STDERR_VAR "HCGUARD_SHARED_STDERR"
void hcg_report_set_shared(void);
int hcg_report_shared(void);
/* For the launcher's summary of a program that died: its pid in a prefix
 * that has one. */
void hcg_report_set_pid(pid_t pid);

/* ---- fork.c: the pthread_atfork registration -----------------------------
 * For every module's hooks. Idempotent; called by the modules that hold
 * locks, before they take one: the hooks run in every fork from then on
 * (the child hooks also in a child of a fork already under way). */
void hcg_fork_register(void);
/* Whether the calling process is not the one hcguard's state belongs to: a
 * child made without fork's handlers (vfork's, which shares the parent's
 * memory until it execs or exits; _Fork's; a bare clone's). Such a child
 * must leave that state alone: it is its parent's (its collector, its
 * rings, its files' positions, its flight record). */
int hcg_fork_foreign(void);
/* A module's hooks: prepare (take its locks; NULL none), parent (release
 * them), child (start afresh: locks made anew). */
typedef struct hcg_fork_hook {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} hcg_fork_hook;
/* Every module's, in order; provided by the top layer (src/lifecycle/fork.c),
 * which knows every module, as the sinks layer provides hcg_sinks[]. */
extern const hcg_fork_hook hcg_fork_hooks[];
extern const size_t hcg_n_fork_hooks;

/* ---- dynsym.c: dynamic symbols of loaded objects ----------------------- */
/* name (at version, or any if NULL) in the dynamic symbol table of the
 * loaded object whose file name begins with object ("libc.so."); NULL if
 * either is not found. Uses no dlsym and no instrumented libc function. */
void *hcg_dynsym(const char *object, const char *name, const char *version);
/* The DT_SONAME of the loaded object at base whose dynamic section is dyn
 * (a link map's l_addr and l_ld), or NULL if it has none. */
const char *hcg_dyn_soname(uintptr_t base, const void *dyn);

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
/* CLOCK_MONOTONIC by system call, never faked: the bounds of waits. */
uint64_t hcg_wait_clock_ns(void);
/* Event time stamps: a raw counter, cheap on any thread. */
void hcg_clock_init(void);
/* 1 once the raw counter is known to be invariant and in use; inline, as
 * every launch and every host function reads the clock. */
extern atomic_int hcg_g_clock_counter;
uint64_t hcg_ticks_slow(void);
/* The raw counter, read inline: only where hcg_ticks_counter_on(). */
static inline int hcg_ticks_counter_on(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
    return atomic_load_explicit(&hcg_g_clock_counter, memory_order_relaxed);
#else
    return 0;
#endif
}
static inline uint64_t hcg_ticks_counter(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return 0;
#endif
}
static inline uint64_t hcg_ticks(void)
{
    if (HCG_LIKELY(hcg_ticks_counter_on()))
        return hcg_ticks_counter();
    return hcg_ticks_slow();
}
/* The clock's epoch: a new one, never given out before, each time the
 * collector goes to sleep (for at most 20 ms); 0 while it works (a pass
 * may be held up by a blocking write) and while none runs (before it
 * starts, after it stops, in a fork child until it starts again). A
 * launch that needs a time but not a fresh one (a copy verdict's age)
 * reuses its thread's last time stamp while the epoch has not moved
 * (run.h: hcg_copy_stamp): a load of a line written every 20 ms, not an
 * rdtsc. */
extern _Atomic uint32_t hcg_g_clock_epoch;
/* A value the epoch never takes. */
#define HCG_EPOCH_NONE UINT32_MAX
/* The collector goes to sleep (a new epoch, never 0), and works or none
 * runs any more (0). */
void hcg_clock_epoch_next(void);
void hcg_clock_epoch_stop(void);
/* A reference point (counter and clock read together, and the rate) to
 * turn ticks into CLOCK_MONOTONIC nanoseconds. */
typedef struct hcg_clock_ref_t {
    uint64_t tick, ns;
    double ns_per_tick;
} hcg_clock_ref_t;
void hcg_clock_ref(hcg_clock_ref_t *r);
/* A count and a clock read together, and how many ticks wide the reads
 * around the clock were: how far the count may be off. */
typedef struct hcg_clock_pair {
    uint64_t tick, ns, width;
} hcg_clock_pair;
/* How many ns to wait before a rate may be taken between the start-up
 * pair and a later one: 0 when now (clock.c says why). */
uint64_t hcg_clock_rate_wait(const hcg_clock_pair *base, const hcg_clock_pair *now);
/* Nanoseconds a tick, never waiting (a launch's estimate): the rate of the
 * last reference that had no need to wait; before one, from the start-up
 * pair and a clock read now; in the first 100 us, 1.0 for a TSC (which
 * errs short) and the counter's own frequency on Arm. */
double hcg_clock_rate_estimate(void);
uint64_t hcg_ticks_to_ns(const hcg_clock_ref_t *r, uint64_t t);

/* ---- outfile.c: output files ------------------------------------------- */
/* Which sink a file is, for HCGUARD_EXEC (see outfile.c). */
enum { HCG_SINK_LOG = 0, HCG_SINK_TRACE = 1, HCG_SINK_REPORT = 2, HCG_SINK_SLOTS = 3 };
/* How the image before this one left the file of sink slot (HCGUARD_EXEC):
 * 'c' continue it, 'n' write none, '-' start it anew; or, for a log of a
 * process tree (hcg_output_tree), 'k': start it anew unless a process of
 * the tree did (hcg_sinkfile_open). pattern: the file's name before
 * expansion (one with %p is a process's own). */
char hcg_exec_inherited(int slot, const char *pattern, int shared_ok);
/* A process tree forked before hcguard started in its first process:
 * none of its processes had a log open to hand on, so each would start a
 * log of a fixed name anew over the others' lines. The tree's token (0:
 * none), made at its first such fork (started: whether hcguard's start had
 * begun), kept by its fork children, and passed to an image they exec
 * (HCGUARD_EXEC); a child of a process that had started has none (its
 * files are that process's). Memory alone: fork handlers may do no more. */
void hcg_output_fork_prepare(int started);
void hcg_output_fork_child(int parent_started);
uint64_t hcg_output_tree(void);
/* 1 if a file of this name (its pattern) is appended to, never started
 * anew: under hcguard run with a flight record (HCGUARD_FLIGHT set), whose
 * program's processes all share a log or report file of a fixed name (a
 * shell's or mpirun's children, one after another or at once), and which
 * starts it anew itself, once, before the program. */
int hcg_run_appends(const char *pattern);
/* 1 if a file name's pattern may expand differently in each process (%p,
 * %q{VAR}, %h): not one file hcguard run can empty for all of them. */
int hcg_pattern_per_process(const char *pattern);
/* Open an output file safely (see outfile.c): created new with
 * HCGUARD_FILE_MODE, or an existing regular file of the effective user
 * truncated (kept and appended to with HCG_OPEN_APPEND); a symlink, FIFO,
 * device, directory or another user's file is refused. Returns the fd
 * (O_APPEND, O_CLOEXEC, blocking), or -1 with the reason in why. */
#define HCG_OPEN_APPEND 1
int hcg_open_output_why(const char *path, int flags, char *why, size_t len);
/* The file each output (slot HCG_SINK_*) was opened on, noted at each
 * open: under hcguard run the flight record keeps them, and hcguard run
 * continues a dead program's file only if its path still names it (the
 * program may have moved it away and put a file of its own there). */
void hcg_output_id_note(int slot, const hcg_fileid *id);
/* The other output (slot) already open on the file id, or -1: two outputs
 * named for one file would write into each other (and a trace's lock
 * would hold up a process tree's log). */
int hcg_output_id_other(int slot, const hcg_fileid *id);
/* "event log", "trace", "report file". */
const char *hcg_output_slot_name(int slot);
/* fd's file started anew (truncated): 0, or -1 with the reason in why. */
int hcg_output_start_anew(int fd, char *why, size_t len);
/* path opened as output slot's file (see hcg_open_output_why), to append
 * if keep, else started anew; its id in *id, noted as slot's. Refused, -1
 * with the reason in why, if it is the file of another output of this
 * process, or cannot be started anew. */
int hcg_open_slot_file(int slot, const char *path, int keep, hcg_fileid *id, char *why,
                       size_t len);
/* An output this process does not write because its path names another
 * file (an exec'd image's 'x'): hcguard run must not write there either. */
void hcg_output_id_elsewhere(int slot);
/* An output this process does not write because another process writes
 * it (a trace, sinkfile.c): hcguard run writes none there for it, and says
 * so (hcg_output_id_is_busy). */
void hcg_output_id_busy(int slot);
static inline int hcg_output_id_is_busy(const hcg_fileid *id)
{
    return id->dev == 0 && id->ino == (ino_t)-2;
}
/* From now on noted into ids (the flight record's), with what was noted
 * before copied there. */
void hcg_output_ids_keep_in(hcg_fileid ids[HCG_SINK_SLOTS]);

#endif /* HCG_BASE_H */
