/* Nothing lost: exact counts and every event at high rates, an error after
 * a flood of warnings, thread-exit destructors that launch, fork while
 * another thread prints, exec, and ways of dying.
 *
 *   hc_lost flood N          N host functions from one thread, as fast as it can
 *   hc_lost execfail N E     N host functions from another thread while this
 *                            one makes E execs that fail
 *   hc_lost execnone         execs that execve refuses at once, between launches
 *   hc_lost manythreads T    T threads alive at once launch one each
 *   hc_lost rejects N        N launches refused (a bad record), as fast as they go
 *   hc_lost dlopen LIB N     a library's constructor makes N refused launches
 *                            and one that runs, inside dlopen
 *   hc_lost copies N         N host copies from one thread
 *   hc_lost threads T N      T threads on T streams launching N in total
 *   hc_lost gated N [busy]   N host functions behind one that waits for this
 *                            thread to open it after launching them all;
 *                            busy: behind a stream memory wait on the device
 *                            instead, while another thread's host functions
 *                            run and drain without pause on a stream of its
 *                            own (the real driver: skips where the driver
 *                            has no cuStreamWaitValue32); rejects: while
 *                            another thread's launches are refused, one a
 *                            millisecond
 *   hc_lost slowhead MS N [M]  N host functions behind one that runs MS ms,
 *                            waited for; then M more as fast as they go
 *   hc_lost afterdrop MS N G  N behind a host function of MS ms, so many that
 *                            events are dropped; then G behind a shut gate
 *   hc_lost warnings W       W closure warnings, then one bad record
 *   hc_lost dtor T N         T threads whose key destructors launch N in total
 *   hc_lost forkprint F busy|quiet  F forks while another thread floods messages
 *   hc_lost exec N M         N copies, then exec itself doing M copies
 *   hc_lost forkexec N M     N copies; a fork child execs itself doing M
 *   hc_lost execaway N PATH  N copies, then exec PATH with an empty
 *                            environment (no hcguard in the new image)
 *   hc_lost execdrain N PATH  the same while one thread launches and
 *                            another takes hcguard's counts, without end
 *   hc_lost execrace N PATH  the same while a third thread makes execs that
 *                            fail, without end
 *   hc_lost execat N PATH    N copies, then execveat PATH (empty environment)
 *   hc_lost exitbusy T       T threads launch without end; exit after 50 ms
 *   hc_lost exitstats T      the same, while two threads take the counts
 *                            without end; exit after 20 ms
 *   hc_lost exitinstart      a timer's handler exits 50 ms into the first
 *                            launch
 *   hc_lost exitwhilestart   exit 100 ms into another thread's first launch
 *   hc_lost die HOW [bad]    100 host functions (after a rejected record:
 *                            bad), then die HOW (segv, bus, abort, term,
 *                            int, exit, _exit, _Exit, kill; fault: a real
 *                            SIGSEGV; hup, quit, usr1, usr2, prof, vtalrm,
 *                            io, pwr, xcpu raised; pipe, xfsz, alrm from
 *                            the kernel; wait: pause until killed;
 *                            handler: its own SIGTERM handler _exits 7;
 *                            ignored: SIGTERM is ignored, also after exec)
 *   hc_lost vforkview SIG die|ign|reset  a vfork child dies of SIG, ignores
 *                            it or sets an SA_RESETHAND handler; the parent
 *                            sees SIG's default, runs 100 host functions in
 *                            all and raises SIG
 *   hc_lost sigview SIG dfl|ign   after a host function, the program's view
 *                            of SIG's action is the default, or ignored
 * Each prints "<mode>: passed" when every check held. */

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

static test_stats_fn get_stats;
static CUhostFn copy_fn;
static CUstream stream;
static atomic_ulong ran;

static void noop(void *p)
{
    (void)p;
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

static void setup(void)
{
    stream = test_context();
    get_stats = test_require_hcguard(&copy_fn);
}

/* hcguard's counts after a synchronize equal the program's own, and no
 * event was dropped. */
static void check_exact(const char *what, uint64_t launched, uint64_t copies, uint64_t bytes)
{
    hcguard_stats s = test_stats(get_stats);
    CHECK_MSG(s.host_fns_launched == launched, "%s: launched %llu, want %llu", what,
          (unsigned long long)s.host_fns_launched, (unsigned long long)launched);
    CHECK_MSG(s.host_fns_ran == launched, "%s: ran %llu, want %llu", what,
          (unsigned long long)s.host_fns_ran, (unsigned long long)launched);
    CHECK_MSG(s.copies_launched == copies && s.copies_ran == copies, "%s: copies %llu/%llu, want %llu",
          what, (unsigned long long)s.copies_launched, (unsigned long long)s.copies_ran,
          (unsigned long long)copies);
    CHECK_MSG(s.bytes_copied == bytes, "%s: bytes %llu, want %llu", what,
          (unsigned long long)s.bytes_copied, (unsigned long long)bytes);
    CHECK_MSG(s.events_dropped == 0, "%s: %llu events dropped", what,
          (unsigned long long)s.events_dropped);
}

static void flood(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(atomic_load(&ran) == n, "ran %lu of %lu", atomic_load(&ran), n);
    check_exact("flood", n, 0, 0);
}

/* n copies of 8 bytes, one after another on the stream, waited for. */
static void do_copies(unsigned long n)
{
    static char a[64], b[64];
    hcguard_copy_record rec = {(uintptr_t)a, (uintptr_t)b, 8};
    for (unsigned long i = 0; i < n; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn, &rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
}

static void copies(unsigned long n)
{
    do_copies(n);
    check_exact("copies", n, n, 8 * n);
}

typedef struct worker {
    pthread_t t;
    unsigned long n;
    CUcontext ctx;
} worker;

static void *launch_on_own_stream(void *arg)
{
    worker *w = arg;
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent(w->ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (unsigned long i = 0; i < w->n; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
    return NULL;
}

static void threads(unsigned t, unsigned long n)
{
    worker w[64];
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    if (t > 64)
        t = 64;
    for (unsigned i = 0; i < t; i++) {
        w[i].n = n / t + (i < n % t);
        w[i].ctx = ctx;
        pthread_create(&w[i].t, NULL, launch_on_own_stream, &w[i]);
    }
    for (unsigned i = 0; i < t; i++)
        pthread_join(w[i].t, NULL);
    CHECK_MSG(atomic_load(&ran) == n, "ran %lu of %lu", atomic_load(&ran), n);
    check_exact("threads", n, 0, 0);
}

/* ---- a queue held shut by its own launching thread ---------------------- */
static atomic_int gate_open;
static atomic_ulong busy_launched;

static void gate(void *p)
{
    (void)p;
    while (!atomic_load(&gate_open))
        nanosleep(&(struct timespec){0, 100000}, NULL);
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

static double since_s(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* n ordinary host functions launched on the stream: how long it took (s). */
static double launch_timed(unsigned long n)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < n; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    return since_s(&t0);
}

/* Host functions launched, run and drained without pause on a stream of
 * this thread's own until the gate opens (or 20 s, so that a launcher
 * that waits for the gate forever fails rather than hangs). */
static void *keep_busy(void *arg)
{
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent(arg));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load(&gate_open) && since_s(&t0) < 20) {
        for (int i = 0; i < 100; i++)
            REQUIRE_OK(cuLaunchHostFunc(s, noop, NULL));
        atomic_fetch_add(&busy_launched, 100);
        REQUIRE_OK(cuStreamSynchronize(s));
    }
    return NULL;
}

/* The stream held by the device until *flag (mapped host memory) is 1:
 * the callback thread stays free for other streams' host functions. */
static void *driver_proc(const char *name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (cuGetProcAddress(name, &fn, 12000, 0, &q) != CUDA_SUCCESS || !fn) {
        fprintf(stderr, "gated: this driver has no %s: skipped\n", name);
        exit(77);
    }
    return fn;
}

static volatile uint32_t *device_gate(void)
{
    CUresult (*wait)(CUstream, CUdeviceptr, uint32_t, unsigned) =
        (CUresult(*)(CUstream, CUdeviceptr, uint32_t, unsigned))driver_proc("cuStreamWaitValue32");
    CUresult (*dev_ptr)(CUdeviceptr *, void *, unsigned) =
        (CUresult(*)(CUdeviceptr *, void *, unsigned))driver_proc("cuMemHostGetDevicePointer");
    void *host;
    CUdeviceptr dev;
    REQUIRE_OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    REQUIRE_OK(dev_ptr(&dev, host, 0));
    *(volatile uint32_t *)host = 0;
    REQUIRE_OK(wait(stream, dev, 1, CU_STREAM_WAIT_VALUE_GEQ));
    return host;
}

/* Past three quarters of half a ring launched and not run, a launch waits
 * for the collector; these cannot run until the launches are over, so
 * waiting must stop soon (no host function runs anywhere), not after the
 * 2 s that a collector that frees no room is given; and, while another
 * thread's host functions run and drain (busy), within that 2 s. */
/* Another thread's launches refused (a bad record), one a millisecond,
 * until the gate opens: events that say nothing of host functions
 * running. */
static unsigned long rejects_made;

static void *keep_rejecting(void *ctx)
{
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)ctx));
    static unsigned char a[64];
    hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), sizeof a}; /* overlap */
    while (!atomic_load(&gate_open)) {
        CHECK_MSG(cuLaunchHostFunc(stream, copy_fn, &bad) == CUDA_ERROR_INVALID_VALUE,
                  "a bad record launched");
        rejects_made++;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return NULL;
}

static void gated(unsigned long n, const char *how)
{
    pthread_t t;
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    volatile uint32_t *flag = NULL;
    int busy = !strcmp(how, "busy"), rejects = !strcmp(how, "rejects");
    if (busy) {
        flag = device_gate();
        pthread_create(&t, NULL, keep_busy, ctx);
    } else {
        REQUIRE_OK(cuLaunchHostFunc(stream, gate, NULL));
        if (rejects)
            pthread_create(&t, NULL, keep_rejecting, ctx);
    }
    double s = launch_timed(n);
    atomic_store(&gate_open, 1);
    if (flag)
        *flag = 1;
    if (busy || rejects)
        pthread_join(t, NULL);
    if (rejects) {
        hcguard_stats st = test_stats(get_stats);
        CHECK_MSG(rejects_made > 0 && st.rejected == rejects_made, "%lu rejected, %llu counted",
                  rejects_made, (unsigned long long)st.rejected);
    }
    REQUIRE_OK(cuCtxSynchronize());
    fprintf(stderr, "gated: %lu launches behind a shut gate took %.3f s\n", n, s);
    CHECK_MSG(s < (busy ? 5 : 1.5), "%lu launches behind a shut gate took %.3f s: flow control "
              "waited for host functions that could not run", n, s);
    unsigned long all = n + !busy + atomic_load(&busy_launched);
    CHECK_MSG(atomic_load(&ran) == all, "ran %lu of %lu", atomic_load(&ran), all);
    check_exact("gated", all, 0, 0);
}

/* ---- a queue behind a slow host function -------------------------------- */
static void sleep_ms(void *p)
{
    long ms = (long)(intptr_t)p;
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

/* Behind a host function that is slow (not stuck: it ends by itself),
 * flow control may stop waiting, but not let more queue up than a ring
 * holds: when it ends, they all run at once, and none may be dropped.
 * The launches it gave up on count again once drained: m launches after
 * that are held back as any others are, and none dropped either. */
/* n host functions behind one of ms ms, waited for: hcguard's stats. */
static hcguard_stats behind_slow(long ms, unsigned long n)
{
    REQUIRE_OK(cuLaunchHostFunc(stream, sleep_ms, (void *)(intptr_t)ms));
    launch_timed(n);
    REQUIRE_OK(cuStreamSynchronize(stream));
    return test_stats(get_stats);
}

static void slowhead(long ms, unsigned long n, unsigned long m)
{
    hcguard_stats s = behind_slow(ms, n);
    CHECK_MSG(s.events_dropped == 0, "behind the slow host function: %llu events dropped",
              (unsigned long long)s.events_dropped);
    launch_timed(m);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(atomic_load(&ran) == n + m + 1, "ran %lu of %lu", atomic_load(&ran), n + m + 1);
    check_exact("slowhead", n + m + 1, 0, 0);
}

/* Launches whose events were dropped are never drained: they must count
 * as drained, or flow control, which stops waiting early only while all
 * undrained launches fit in a ring, would wait its full 2 s at every
 * later queue behind a gate. The drops are made by a head slower than
 * that 2 s with more behind it than a ring holds (printed; not required:
 * without them the second part shows nothing, and passes). */
static void afterdrop(long ms, unsigned long n, unsigned long g)
{
    hcguard_stats s = behind_slow(ms, n);
    fprintf(stderr, "afterdrop: %llu events dropped behind the slow host function\n",
            (unsigned long long)s.events_dropped);
    atomic_store(&gate_open, 0);
    REQUIRE_OK(cuLaunchHostFunc(stream, gate, NULL));
    double took = launch_timed(g);
    atomic_store(&gate_open, 1);
    REQUIRE_OK(cuStreamSynchronize(stream));
    fprintf(stderr, "afterdrop: %lu launches behind a shut gate took %.3f s\n", g, took);
    CHECK_MSG(took < 1.5, "%lu launches behind a shut gate after drops took %.3f s", g, took);
    s = test_stats(get_stats);
    unsigned long all = n + g + 2;
    CHECK_MSG(atomic_load(&ran) == all && s.host_fns_launched == all && s.host_fns_ran == all,
              "ran %lu, counted %llu launched %llu ran, want %lu", atomic_load(&ran),
              (unsigned long long)s.host_fns_launched, (unsigned long long)s.host_fns_ran, all);
}

/* Code in anonymous memory: a closure warning at every launch. */
static CUhostFn make_closure(void)
{
    return (CUhostFn)(void *)test_closures(1);
}

static void warnings(unsigned long w)
{
    CUhostFn c = make_closure();
    for (unsigned long i = 0; i < w; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, c, NULL));
    static char a[64];
    hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), 32}; /* overlap */
    CUresult r = cuLaunchHostFunc(stream, copy_fn, &bad);
    CHECK_MSG(r == CUDA_ERROR_INVALID_VALUE, "the bad record was not rejected: %d", (int)r);
    REQUIRE_OK(cuStreamSynchronize(stream));
    hcguard_stats s = test_stats(get_stats);
    CHECK_MSG(s.rejected == 1, "rejected %llu, want 1", (unsigned long long)s.rejected);
    CHECK_MSG(s.host_fns_ran == w, "ran %llu, want %lu", (unsigned long long)s.host_fns_ran, w);
}

/* ---- thread exit --------------------------------------------------------- */
typedef struct dtor_rec {
    uint64_t cookie;    /* what the host function expects to find */
    atomic_int runs;
} dtor_rec;

static pthread_key_t dtor_key;
static unsigned long per_thread;
static dtor_rec *recs;
static atomic_ulong next_rec, anomalies;
static CUcontext dtor_ctx;

static void check_own(void *p)
{
    dtor_rec *r = p;
    uint64_t want = (uint64_t)(r - recs) * 2654435761u + 1;
    if (r->cookie != want || atomic_fetch_add(&r->runs, 1) != 0)
        atomic_fetch_add(&anomalies, 1);
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

/* Runs as the thread exits, after hcguard's own destructors may have run. */
static void launch_in_dtor(void *arg)
{
    CUstream s = arg;
    for (unsigned long i = 0; i < per_thread; i++) {
        unsigned long k = atomic_fetch_add(&next_rec, 1);
        recs[k].cookie = (uint64_t)k * 2654435761u + 1;
        REQUIRE_OK(cuLaunchHostFunc(s, check_own, &recs[k]));
    }
}

static void *dtor_thread(void *arg)
{
    (void)arg;
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent(dtor_ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* A launch first, so that hcguard's pool and ring exist for this
     * thread (and its destructors are registered before ours runs). */
    REQUIRE_OK(cuLaunchHostFunc(s, noop, NULL));
    pthread_setspecific(dtor_key, s);
    return NULL;
}

static void dtor(unsigned t, unsigned long n)
{
    per_thread = n / t;
    recs = calloc(per_thread * t, sizeof *recs);
    REQUIRE_OK(cuCtxGetCurrent(&dtor_ctx));
    /* A launch first, so that hcguard's thread keys come before this
     * program's: at thread exit, hcguard's destructors run first, and the
     * program's then launch with hcguard's pool and ring released. */
    REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    pthread_key_create(&dtor_key, launch_in_dtor);
    /* Eight at a time, a new one started as the oldest ends: new threads
     * take over what exiting ones released while those still launch. */
    pthread_t th[8];
    for (unsigned i = 0; i < t + 8; i++) {
        if (i >= 8)
            pthread_join(th[i % 8], NULL);
        if (i < t)
            pthread_create(&th[i % 8], NULL, dtor_thread, NULL);
    }
    REQUIRE_OK(cuCtxSynchronize());
    unsigned long total = per_thread * t;
    CHECK_MSG(atomic_load(&anomalies) == 0, "%lu host functions got another launch's data",
          atomic_load(&anomalies));
    for (unsigned long i = 0; i < total; i++)
        if (atomic_load(&recs[i].runs) != 1) {
            CHECK_MSG(0, "record %lu ran %d times", i, atomic_load(&recs[i].runs));
            break;
        }
    CHECK_MSG(atomic_load(&ran) == total + t + 1, "ran %lu, want %lu", atomic_load(&ran), total + t + 1);
    check_exact("dtor", total + t + 1, 0, 0);
}

/* ---- fork while another thread prints ------------------------------------ */
static atomic_int stop_printing;
static unsigned char *closures; /* a page of "ret": every byte a distinct closure */

/* Past 1024 distinct closures hcguard prints a warning for every one it
 * meets: the collector prints without pause, holding the message lock
 * for each line. */
static void *print_flood(void *arg)
{
    (void)arg;
    REQUIRE_OK(cuCtxSetCurrent(dtor_ctx));
    CUstream s;
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; !atomic_load(&stop_printing); i = (i + 1) % pg) {
        REQUIRE_OK(cuLaunchHostFunc(s, (CUhostFn)(void *)(closures + i), NULL));
        if (i % 256 == 255)
            REQUIRE_OK(cuStreamSynchronize(s));
    }
    REQUIRE_OK(cuStreamSynchronize(s));
    return NULL;
}

/* A child that is stuck gets SIGKILL after 10 s: reported as hung. */
static int wait_bounded(pid_t pid)
{
    for (int ms = 0; ms < 10000; ms += 2) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* busy: each child launches (a rejected record) and prints its summary;
 * quiet: it only asks for the counts (drains), for ThreadSanitizer, which
 * cannot follow a thread the child would start. */
static void forkprint(unsigned f, int busy)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    closures = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#if defined(__x86_64__)
    memset(closures, 0xc3, pg); /* ret */
#else
    fprintf(stderr, "SKIP: no closure code for this architecture\n");
    exit(77);
#endif
    mprotect(closures, pg, PROT_READ | PROT_EXEC);
    /* hcguard's flood of warnings goes nowhere; the verdict to stdout. */
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    REQUIRE_OK(cuCtxGetCurrent(&dtor_ctx));
    pthread_t th;
    pthread_create(&th, NULL, print_flood, NULL);
    struct timespec warm = {0, 50000000};
    nanosleep(&warm, NULL);
    unsigned hung = 0, failed = 0;
    unsigned forks = 0;
    fflush(stdout); /* the children's exit would write it again */
    for (; forks < f && hung < 3; forks++) {
        pid_t pid = fork();
        if (pid == 0) {
            static char a[64];
            hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), 32};
            if (busy)
                (void)cuLaunchHostFunc(stream, copy_fn, &bad);
            hcguard_stats s;
            get_stats(&s, sizeof s);
            exit(busy && s.rejected != 1 ? 3 : 0);
        }
        int rc = wait_bounded(pid);
        hung += rc == -1;
        if (rc != 0 && rc != -1 && failed++ == 0)
            printf("forkprint: child %u exited %d\n", forks, rc), fflush(stdout);
    }
    atomic_store(&stop_printing, 1);
    pthread_join(th, NULL);
    hcguard_stats s = test_stats(get_stats);
    printf("forkprint: %u forks, %u hung, %u failed; the parent met %llu closures\n", forks, hung,
           failed, (unsigned long long)s.host_fns_ran);
    CHECK_MSG(!hung && !failed && s.host_fns_ran >= 2048,
              "%u hung, %u failed, %llu closures met", hung, failed,
              (unsigned long long)s.host_fns_ran);
}

/* ---- exec ---------------------------------------------------------------- */
static void exec_self(const char *m)
{
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        exit(1);
    self[len] = 0;
    execl(self, self, "copies-only", m, (char *)NULL);
    fprintf(stderr, "FAIL: exec: %s\n", strerror(errno));
    exit(1);
}

/* ---- dying ---------------------------------------------------------------- */
/* No mapping is at page 0: a real SIGSEGV, raised by the kernel. */
static volatile int *volatile fault_at = (volatile int *)8;

static void own_term(int sig)
{
    (void)sig;
    static const char m[] = "die: own SIGTERM handler ran\n";
    (void)!write(2, m, sizeof m - 1);
    _exit(7);
}

/* The program's view of sig's action: hcguard's stand-in never shows. */
static int sig_is(int sig, const char *want)
{
    struct sigaction now;
    if (sigaction(sig, NULL, &now) != 0)
        return 0;
    if (!strcmp(want, "dfl"))
        return now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO);
    return now.sa_handler == SIG_IGN;
}

static void sigview(int sig, const char *want)
{
    REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(sig_is(sig, want), "signal %d: the program's view is not %s", sig, want);
}

static void own_reset(int sig) { (void)sig; }

/* A vfork child (which shares this memory) dies of SIG (die), ignores it
 * (ign) or sets a handler with SA_RESETHAND (reset), then the parent's view
 * of SIG is still the default, and SIG still kills it (checked by the
 * caller: the events written, the status): before, the child's sigaction
 * or death changed hcguard's notes of the parent's actions, and the parent
 * was shown hcguard's handler as its own. */
static void vforkview(int sig, const char *how)
{
    REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    pid_t pid = vfork();
    if (pid == 0) {
        if (!strcmp(how, "die"))
            raise(sig);
        if (!strcmp(how, "ign"))
            signal(sig, SIG_IGN);
        if (!strcmp(how, "reset")) {
            struct sigaction a;
            memset(&a, 0, sizeof a);
            a.sa_handler = own_reset;
            a.sa_flags = SA_RESETHAND;
            sigaction(sig, &a, NULL);
        }
        _exit(0);
    }
    REQUIRE(pid > 0);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(sig_is(sig, "dfl"), "signal %d: after a vfork child's %s, the view is not the "
              "default", sig, how);
    for (int i = 1; i < 100; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    fprintf(stderr, "vforkview: 100 host functions ran, now raising %d\n", sig);
    raise(sig);
    fprintf(stderr, "FAIL: signal %d did not kill\n", sig);
    exit(1);
}

/* SIGTERM ignored (inherited): still ignored, and across exec too. */
static void ignored(void)
{
    raise(SIGTERM);
    fprintf(stderr, "die: SIGTERM ignored\n");
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        exit(1);
    self[len] = 0;
    execl(self, self, "sigview", "15", "ign", (char *)NULL);
    fprintf(stderr, "FAIL: exec: %s\n", strerror(errno));
    exit(1);
}

/* The ways of dying by a signal raised as it is. */
static const struct {
    const char *how;
    int sig;
} raised[] = {
    {"segv", SIGSEGV}, {"bus", SIGBUS},   {"term", SIGTERM},     {"int", SIGINT},
    {"kill", SIGKILL}, {"hup", SIGHUP},   {"quit", SIGQUIT},     {"usr1", SIGUSR1},
    {"usr2", SIGUSR2}, {"prof", SIGPROF}, {"vtalrm", SIGVTALRM}, {"io", SIGIO},
    {"pwr", SIGPWR},   {"xcpu", SIGXCPU},
};

/* The kernel's SIGPIPE: a write to a pipe nobody reads. */
static void die_by_pipe(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    close(p[0]);
    (void)!write(p[1], "x", 1);
    fprintf(stderr, "FAIL: no SIGPIPE\n");
    exit(1);
}

/* The kernel's SIGXFSZ: a write past RLIMIT_FSIZE (1 MiB: room for the
 * log and the trace of 100 host functions, which the limit binds too). */
static void die_by_fsize(void)
{
    char path[] = "/tmp/hc_lost_fsize_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    unlink(path);
    struct rlimit r = {1 << 20, 1 << 20};
    REQUIRE(setrlimit(RLIMIT_FSIZE, &r) == 0);
    static char block[1 << 20];
    (void)!write(fd, block, sizeof block);
    (void)!write(fd, block, sizeof block);
    fprintf(stderr, "FAIL: no SIGXFSZ\n");
    exit(1);
}

static void die(const char *how, int bad)
{
    static char a[64];
    hcguard_copy_record overlap = {(uintptr_t)a, (uintptr_t)(a + 8), 32};
    /* A stream's wait for an event first, as most programs make one before
     * their first host function: the record's counts hold all the same. */
    CUevent ev;
    REQUIRE_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventRecord(ev, stream));
    REQUIRE_OK(cuStreamWaitEvent(stream, ev, 0));
    REQUIRE_OK(cuEventDestroy(ev));
    if (bad)
        CHECK_MSG(cuLaunchHostFunc(stream, copy_fn, &overlap) == CUDA_ERROR_INVALID_VALUE,
              "the bad record was not rejected");
    for (int i = 0; i < 100; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    fprintf(stderr, "die: 100 host functions ran, now %s\n", how);
    for (size_t i = 0; i < sizeof raised / sizeof raised[0]; i++)
        if (!strcmp(how, raised[i].how))
            raise(raised[i].sig);
    if (!strcmp(how, "abort"))
        abort();
    else if (!strcmp(how, "fault"))
        *fault_at = 1;
    else if (!strcmp(how, "pipe"))
        die_by_pipe();
    else if (!strcmp(how, "xfsz"))
        die_by_fsize();
    else if (!strcmp(how, "alrm")) {
        struct itimerval once = {{0, 0}, {0, 1000}}; /* 1 ms */
        REQUIRE(setitimer(ITIMER_REAL, &once, NULL) == 0);
        for (;;)
            pause();
    } else if (!strcmp(how, "wait"))
        for (;;)
            pause();
    else if (!strcmp(how, "handler")) {
        struct sigaction act;
        memset(&act, 0, sizeof act);
        act.sa_handler = own_term;
        sigaction(SIGTERM, &act, NULL);
        raise(SIGTERM);
    } else if (!strcmp(how, "ignored"))
        ignored();
    else if (!strcmp(how, "_exit"))
        _exit(3);
    else if (!strcmp(how, "_Exit"))
        _Exit(4);
    else if (!strcmp(how, "exit"))
        exit(5);
    fprintf(stderr, "FAIL: unknown way of dying %s\n", how);
    exit(1);
}

/* ---- two rings, the later drained first ---------------------------------
 * ringcut N: a rejection here (this thread's ring is the record's first),
 * a host function (the callback thread's ring, its second), then N
 * rejections here while the next host function, hc_lost_marker, waits for
 * them, and a pause until killed: the collector's next pass writes the
 * marker's batch (the newer ring first) while this thread's N events are
 * still in its ring. */
static atomic_int rejections_made;
void hc_lost_marker(void *p);

__attribute__((noinline, used, visibility("default"))) void hc_lost_marker(void *p)
{
    while (!atomic_load(&rejections_made))
        usleep(100);
    noop(p);
}

static void reject_one(void)
{
    static char a[64];
    hcguard_copy_record overlap = {(uintptr_t)a, (uintptr_t)(a + 8), 32};
    CHECK_MSG(cuLaunchHostFunc(stream, copy_fn, &overlap) == CUDA_ERROR_INVALID_VALUE,
              "the bad record was not rejected");
}

static void ringcut(unsigned long n)
{
    reject_one();
    REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    usleep(100000); /* both rings drained */
    REQUIRE_OK(cuLaunchHostFunc(stream, hc_lost_marker, NULL));
    for (unsigned long i = 0; i < n; i++)
        reject_one();
    atomic_store(&rejections_made, 1);
    REQUIRE_OK(cuStreamSynchronize(stream));
    fprintf(stderr, "ringcut: %lu rejections made\n", n + 1);
    for (;;)
        pause();
}

/* hangcut: a host function, hc_lost_hung, that runs until the process is
 * killed (reported hung), while this thread makes a rejection every
 * millisecond: each collector pass has a batch of them to write. */
void hc_lost_hung(void *p);

__attribute__((noinline, used, visibility("default"))) void hc_lost_hung(void *p)
{
    (void)p;
    for (;;)
        pause();
}

static void hangcut(void)
{
    REQUIRE_OK(cuLaunchHostFunc(stream, hc_lost_hung, NULL));
    fprintf(stderr, "hangcut: rejecting until killed\n");
    for (;;) {
        reject_one();
        usleep(1000);
    }
}

/* ---- the scenarios, with their arguments -------------------------------- */
static unsigned long num(int argc, char **argv, int i)
{
    return i < argc ? strtoul(argv[i], NULL, 10) : 0;
}

/* A file that may be executed (mode 0700) but is no program (no ELF, no
 * #!): its exec goes the whole way and fails there with ENOEXEC. Its
 * path in buf; the caller unlinks it. */
static void make_unrunnable(char *buf, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, len, "%s/hc_lost-noexec-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(buf);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "not a program\n", 14) == 14);
    REQUIRE(fchmod(fd, 0700) == 0);
    REQUIRE(close(fd) == 0); /* none open for writing: no ETXTBSY */
}

/* execfail N E: another thread launches N host functions on a stream of
 * its own as fast as it can, while this one makes E execs that fail (of a
 * file that may be executed but is no program), 2 ms apart: hcguard stops
 * its collector for each exec and starts it again when it fails; the other
 * thread's launches wait for it meanwhile. None of their events dropped,
 * every exec's error its own. (A launch that found the collector stopped
 * gave up flow control for good; events were dropped by the hundred
 * thousand.) */
static atomic_int execfail_done, execfail_started;
static unsigned long execfail_n;

static void *execfail_launcher(void *ctx)
{
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)ctx));
    CUstream s;
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (unsigned long i = 0; i < execfail_n; i++) {
        REQUIRE_OK(cuLaunchHostFunc(s, noop, NULL));
        atomic_store(&execfail_started, 1);
    }
    REQUIRE_OK(cuStreamSynchronize(s));
    atomic_store(&execfail_done, 1);
    return NULL;
}

static void execfail(unsigned long n, unsigned long execs)
{
    CUcontext ctx;
    char prog[PATH_MAX];
    make_unrunnable(prog, sizeof prog);
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    execfail_n = n;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, execfail_launcher, ctx) == 0);
    /* After the first launch: a driver that starts a thread of its own
     * then (the test driver does) cannot while another thread is inside
     * execve (the kernel refuses CLONE_FS then: EAGAIN). */
    while (!atomic_load(&execfail_started))
        usleep(100);
    unsigned long k = 0;
    for (; k < execs && !atomic_load(&execfail_done); k++) {
        char *av[] = {"hc_lost-none", NULL};
        errno = 0;
        execv(prog, av); /* the exec goes the whole way */
        CHECK_MSG(errno == ENOEXEC, "exec %lu failed with errno %d, want ENOEXEC", k, errno);
        usleep(2000);
    }
    pthread_join(t, NULL);
    unlink(prog);
    CHECK_MSG(atomic_load(&ran) == n, "ran %lu of %lu", atomic_load(&ran), n);
    CHECK_MSG(k > 0, "no exec made during the launches");
    fprintf(stderr, "execfail: %lu failed execs during %lu launches\n", k, n);
    check_exact("execfail", n, 0, 0);
}

/* ---- execnone: execs refused before anything changes --------------------- */
/* libc's own exec functions, with no hcguard in between: what an exec
 * fails with without hcguard, which it must fail with under it too. */
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

static void *libc_fn(const char *name)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(libc);
    void *fn = dlsym(libc, name);
    REQUIRE(fn);
    return fn;
}

/* The errno of fn(path), 0 if it returned (it must not). */
static int exec_errno(execv_fn fn, const char *path)
{
    char *av[] = {"hc_lost-none", NULL};
    errno = 0;
    return fn(path, av) == -1 ? errno : 0;
}

/* exec of path by execv, execvp and execlp, each failing as libc's would
 * (what: for the message). */
static void expect_refused(const char *what, const char *path)
{
    static execv_fn libc_execv, libc_execvp;
    if (!libc_execv) {
        libc_execv = (execv_fn)libc_fn("execv");
        libc_execvp = (execv_fn)libc_fn("execvp");
    }
    int want = exec_errno(libc_execv, path), want_p = exec_errno(libc_execvp, path);
    CHECK_MSG(want != 0 && want_p != 0, "%s: '%s' ran without hcguard", what, path);
    int got = exec_errno(execv, path), got_p = exec_errno(execvp, path);
    CHECK_MSG(got == want, "%s: execv of '%s': errno %d, want %d", what, path, got, want);
    CHECK_MSG(got_p == want_p, "%s: execvp of '%s': errno %d, want %d", what, path, got_p,
              want_p);
    errno = 0;
    CHECK_MSG(execlp(path, "hc_lost-none", (char *)NULL) == -1 && errno == want_p,
              "%s: execlp of '%s': errno %d, want %d", what, path, errno, want_p);
    fprintf(stderr, "execnone: %s: '%s' refused, errno %d (execvp: %d)\n", what, path, want,
            want_p);
}

/* fexecve of path (opened with flags), failing as libc's would. */
static void expect_fd_refused(const char *path, int flags)
{
    static fexecve_fn libc_fexecve;
    if (!libc_fexecve)
        libc_fexecve = (fexecve_fn)libc_fn("fexecve");
    char *av[] = {"hc_lost-none", NULL};
    int fd = open(path, flags | O_CLOEXEC);
    REQUIRE(fd >= 0);
    errno = 0;
    int want = libc_fexecve(fd, av, environ) == -1 ? errno : 0;
    errno = 0;
    int got = fexecve(fd, av, environ) == -1 ? errno : 0;
    close(fd);
    CHECK_MSG(want != 0 && got == want, "fexecve of '%s': errno %d, want %d", path, got, want);
    fprintf(stderr, "execnone: fexecve of '%s' refused, errno %d\n", path, want);
}

static void path_file(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);
    REQUIRE(n >= 0 && (size_t)n < len);
}

/* A directory with entries for PATH searches of "hc_lost-prog": data/ (a
 * file not executable), dir/ (a directory), none/ (nothing), run/ (a
 * script exiting 42). */
static void make_path_dirs(char *top, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(top, len, "%s/hc_lost-path-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    REQUIRE(mkdtemp(top));
    static const char *const dirs[] = {"data", "dir", "none", "run", "dir/hc_lost-prog"};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        path_file(p, sizeof p, top, dirs[i]);
        REQUIRE(mkdir(p, 0700) == 0);
    }
    static const struct {
        const char *name, *text;
        mode_t mode;
    } files[] = {{"data/hc_lost-prog", "exit 41\n", 0600},
                 {"run/hc_lost-prog", "#!/bin/sh\nexit 42\n", 0700}};
    for (size_t i = 0; i < 2; i++) {
        path_file(p, sizeof p, top, files[i].name);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, files[i].mode);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, files[i].text, strlen(files[i].text)) ==
                (ssize_t)strlen(files[i].text));
        REQUIRE(close(fd) == 0);
    }
}

/* PATH set to the entries named, under top ("/dev/null" as it is). */
static void set_path(const char *top, const char *const *entries, size_t n)
{
    char path[4 * PATH_MAX] = "";
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(path);
        snprintf(path + used, sizeof path - used, "%s%s%s%s", i ? ":" : "",
                 entries[i][0] == '/' ? "" : top, entries[i][0] == '/' ? "" : "/", entries[i]);
    }
    REQUIRE(setenv("PATH", path, 1) == 0);
}

/* execvp of a name found first where it cannot run and then where it can
 * runs the second, as glibc's search does (a fork child's exit status). */
static void expect_search_runs(const char *top)
{
    static const char *const entries[] = {"data", "dir", "run"};
    set_path(top, entries, 3);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        char *av[] = {"hc_lost-prog", NULL};
        execvp(av[0], av);
        _exit(100 + errno % 100);
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 42,
              "execvp along data:dir:run: wait status %#x, want the exit status 42", st);
}

/* PATH searches where no entry can run the name: each fails as libc's. */
static void expect_search_refused(const char *top)
{
    static const char *const paths[][3] = {
        {"data", "none"}, {"none", "dir"}, {"none"}, {"none", "/dev/null"},
        {"/dev/null", "data"}, {"dir", "data", "none"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        size_t n = 0;
        while (n < 3 && paths[i][n])
            n++;
        set_path(top, paths[i], n);
        expect_refused(getenv("PATH"), "hc_lost-prog");
    }
}

static void remove_path_dirs(const char *top)
{
    static const char *const made[] = {"data/hc_lost-prog", "run/hc_lost-prog", "data",
                                       "dir/hc_lost-prog", "dir", "none", "run", ""};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        path_file(p, sizeof p, top, made[i]);
        if (unlink(p) != 0)
            rmdir(p);
    }
}

/* execnone: 5 host functions, execs that execve refuses before anything
 * changes (each failing as it would without hcguard, and stopping
 * nothing: no summary printed for it), 5 more. Refused: files that do not
 * exist, files that are not regular files or not executable (EACCES),
 * along PATH too (glibc's search goes on past a refused file and fails
 * with EACCES if it saw one), and fexecve's. */
static void execnone(void)
{
    char top[PATH_MAX], p[PATH_MAX];
    const char *path = getenv("PATH");
    char *saved_path = strdup(path ? path : "/bin:/usr/bin");
    make_path_dirs(top, sizeof top);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 5; i++)
            REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
        REQUIRE_OK(cuStreamSynchronize(stream));
        if (round)
            break;
        expect_refused("missing", "/nonexistent/hc_lost");
        expect_refused("missing", "/dev/null/hc_lost");
        expect_refused("missing", "");
        expect_refused("not executable", "/etc/passwd");
        path_file(p, sizeof p, top, "data/hc_lost-prog");
        expect_refused("not executable", p);
        expect_refused("a directory", top);
        expect_refused("a device", "/dev/null");
        expect_fd_refused("/etc/passwd", O_RDONLY);
        expect_fd_refused(top, O_RDONLY | O_DIRECTORY);
        expect_search_refused(top);
        expect_search_runs(top);
        REQUIRE(setenv("PATH", saved_path, 1) == 0);
    }
    remove_path_dirs(top);
    free(saved_path);
    check_exact("execnone", 10, 0, 0);
}

/* manythreads T: T threads, all alive at once, launch one host function
 * each, and one with a bad record (refused). Past hcguard's 1024 pools the launches go to the driver
 * unmeasured: all must run, and the summary must say how many were not
 * counted (it said nothing, and counted 1024 of 1100). */
static pthread_barrier_t many_bar;
static atomic_uint many_copies_refused, many_nodes_refused;
static unsigned char many_src[64], many_dst[64];
static hcguard_copy_record many_good = {(uintptr_t)many_dst, (uintptr_t)many_src, 64};

/* A good copy, launched and set on a graph node: run guarded, or (no call
 * to guard it: no pool free) refused with CUDA_ERROR_OUT_OF_MEMORY. Before,
 * a node made there ran the record unchecked at every replay: a record
 * made bad after crashed the program. */
static void good_copy_or_refused(void)
{
    CUresult r = cuLaunchHostFunc(stream, copy_fn, &many_good);
    CHECK_MSG(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "a good copy: %d", (int)r);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        atomic_fetch_add(&many_copies_refused, 1);
    CUgraph g;
    CUgraphNode n;
    CUDA_HOST_NODE_PARAMS p = {copy_fn, &many_good};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    r = cuGraphAddHostNode(&n, g, NULL, 0, &p);
    CHECK_MSG(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "a copy node: %d", (int)r);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        atomic_fetch_add(&many_nodes_refused, 1);
    REQUIRE_OK(cuGraphDestroy(g));
}

/* Overlapping: refused. */
static unsigned char many_a[64];
static hcguard_copy_record many_bad;

static void *one_launch(void *ctx)
{
    hcguard_copy_record *bad = &many_bad;
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)ctx));
    pthread_barrier_wait(&many_bar);
    REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    /* Refused with or without a pool. Not in audit mode, which would pass
     * it to the driver as it is from a thread with no pool, to run an
     * overlapping memcpy unguarded. */
    const char *mode = getenv("HCGUARD_MODE");
    if (!mode || strcmp(mode, "audit") != 0)
        CHECK_MSG(cuLaunchHostFunc(stream, copy_fn, bad) == CUDA_ERROR_INVALID_VALUE,
                  "a bad record launched");
    good_copy_or_refused();
    pthread_barrier_wait(&many_bar); /* all alive until all launched */
    return NULL;
}

static void manythreads(unsigned n)
{
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    many_bad = (hcguard_copy_record){(uintptr_t)many_a, (uintptr_t)(many_a + 8), 32};
    REQUIRE(pthread_barrier_init(&many_bar, NULL, n) == 0);
    pthread_t *t = calloc(n, sizeof *t);
    pthread_attr_t attr;
    REQUIRE(t && pthread_attr_init(&attr) == 0);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (unsigned i = 0; i < n; i++)
        REQUIRE(pthread_create(&t[i], &attr, one_launch, ctx) == 0);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    REQUIRE_OK(cuCtxSynchronize());
    CHECK_MSG(atomic_load(&ran) == n, "ran %lu of %u", atomic_load(&ran), n);
    printf("manythreads: copies refused %u, copy nodes refused %u\n",
           atomic_load(&many_copies_refused), atomic_load(&many_nodes_refused));
    free(t);
}

/* rejects N: N launches refused (an overlapping record) as fast as they
 * go: each rejection's event waits for room in the thread's ring, as a
 * launch does, none dropped (at the smallest buffer, a thousand were). */
static void rejects(unsigned long n)
{
    static unsigned char a[64];
    hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), 32};
    for (unsigned long i = 0; i < n; i++)
        CHECK_MSG(cuLaunchHostFunc(stream, copy_fn, &bad) == CUDA_ERROR_INVALID_VALUE,
                  "bad record %lu launched", i);
    hcguard_stats s = test_stats(get_stats);
    CHECK_MSG(s.rejected == n && s.events_dropped == 0, "%llu rejected, %llu events dropped",
              (unsigned long long)s.rejected, (unsigned long long)s.events_dropped);
}

/* dlopen LIB N: a library whose constructor makes N refused launches and
 * then one that runs (tests/e2e/ctor_reject.c), with hcguard's collector
 * at work on the log meanwhile. Under the loader's lock: before, the
 * constructor's launch waited for good on the collector, which waited for
 * that lock to look up libc's functions; and each rejection waited 2 s for
 * a collector held up so. Within 10 s, all counted. */
static void dlopen_ctor(const char *lib, unsigned long n)
{
    char v[32];
    snprintf(v, sizeof v, "%lu", n);
    setenv("HC_CTOR_REJECTS", v, 1);
    void *h = dlopen(lib, RTLD_NOW);
    REQUIRE(h != NULL);
    unsigned long *rejected = dlsym(h, "hc_ctor_rejected"), *ran_ = dlsym(h, "hc_ctor_ran");
    double *seconds = dlsym(h, "hc_ctor_seconds");
    REQUIRE(rejected && ran_ && seconds);
    fprintf(stderr, "dlopen: %lu refused and 1 launch in the constructor took %.3f s\n", n,
            *seconds);
    CHECK_MSG(*rejected == n && *ran_ == 1, "%lu refused of %lu, %lu ran", *rejected, n, *ran_);
    CHECK_MSG(*seconds < 10, "the constructor took %.3f s", *seconds);
    hcguard_stats s = test_stats(get_stats);
    CHECK_MSG(s.rejected == n && s.host_fns_ran == 1, "%llu rejected, %llu ran",
              (unsigned long long)s.rejected, (unsigned long long)s.host_fns_ran);
}

static void s_flood(int argc, char **argv) { flood(num(argc, argv, 0)); }
static void s_dlopen(int argc, char **argv) { dlopen_ctor(argv[0], num(argc, argv, 1)); }
static void s_rejects(int argc, char **argv) { rejects(num(argc, argv, 0)); }
static void s_manythreads(int argc, char **argv) { manythreads((unsigned)num(argc, argv, 0)); }
static void s_execfail(int argc, char **argv) { execfail(num(argc, argv, 0), num(argc, argv, 1)); }
static void s_copies(int argc, char **argv) { copies(num(argc, argv, 0)); }
static void s_gated(int argc, char **argv)
{
    gated(num(argc, argv, 0), argc > 1 ? argv[1] : "");
}
static void s_slowhead(int argc, char **argv)
{
    slowhead((long)num(argc, argv, 0), num(argc, argv, 1), num(argc, argv, 2));
}
static void s_afterdrop(int argc, char **argv)
{
    afterdrop((long)num(argc, argv, 0), num(argc, argv, 1), num(argc, argv, 2));
}
static void s_warnings(int argc, char **argv) { warnings(num(argc, argv, 0)); }
static void s_copies_only(int argc, char **argv) { do_copies(num(argc, argv, 0)); }

static void s_threads(int argc, char **argv)
{
    threads((unsigned)num(argc, argv, 0), num(argc, argv, 1));
}

static void s_dtor(int argc, char **argv)
{
    dtor((unsigned)num(argc, argv, 0), num(argc, argv, 1));
}

static void s_forkprint(int argc, char **argv)
{
    forkprint((unsigned)num(argc, argv, 0), argc > 1 && !strcmp(argv[1], "busy"));
}

/* exec N M: N copies, then this program again with "copies-only M". */
static void s_exec(int argc, char **argv)
{
    (void)argc;
    do_copies(num(argc, argv, 0));
    exec_self(argv[1]);
}

/* execaway N PATH: N copies, then exec PATH (a program hcguard does not
 * start in: /bin/true, or no hcguard there at all). */
static void s_execaway(int argc, char **argv)
{
    (void)argc;
    do_copies(num(argc, argv, 0));
    char *av[] = {argv[1], NULL};
    char *none[] = {NULL}; /* no HCGUARD_* and no LD_PRELOAD: no hcguard there */
    execve(argv[1], av, none);
    fprintf(stderr, "FAIL: exec %s: %s\n", argv[1], strerror(errno));
    exit(1);
}

/* forkexec N M: the same in a fork child, which must succeed. */
static void s_forkexec(int argc, char **argv)
{
    do_copies(num(argc, argv, 0));
    pid_t pid = fork();
    if (pid == 0)
        exec_self(argv[1]);
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: %d", st);
}

/* forkexecbuf N M [kill]: as forkexec, the child's image given a smaller
 * HCGUARD_BUFFER (its own choice), then N more copies here (and killed). */
static void s_forkexecbuf(int argc, char **argv)
{
    do_copies(num(argc, argv, 0));
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HCGUARD_BUFFER", "1M", 1);
        exec_self(argv[1]);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: %d", st);
    do_copies(num(argc, argv, 0));
    if (argc > 2 && !strcmp(argv[2], "kill")) {
        fprintf(stderr, "forkexecbuf: %lu copies, now killed\n", 2 * num(argc, argv, 0));
        raise(SIGKILL);
    }
    check_exact("forkexecbuf", 2 * num(argc, argv, 0), 2 * num(argc, argv, 0),
                16 * num(argc, argv, 0));
}

/* exitbusy T: T threads launch without end on streams of their own; the
 * main thread exits after 50 ms, while they go on until the process is
 * gone. The host functions they run after hcguard's last write are in its
 * counts and not in the log: the summary must say how many. */
static void *launch_forever(void *ctx)
{
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    while (cuLaunchHostFunc(s, noop, NULL) == CUDA_SUCCESS)
        ; /* until the driver is torn down at exit */
    for (;;)
        pause();
    return NULL;
}

/* As launch_forever, 64 at a time 200 us apart: the files stay small
 * enough to check at each of many rounds. */
static void *launch_paced(void *ctx)
{
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (unsigned i = 1; cuLaunchHostFunc(s, noop, NULL) == CUDA_SUCCESS; i++)
        if (i % 64 == 0)
            usleep(200);
    for (;;)
        pause();
    return NULL;
}

static void s_exitbusy(int argc, char **argv)
{
    CUcontext ctx;
    pthread_t t;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    for (unsigned long i = 0, n = num(argc, argv, 0); i < n; i++)
        REQUIRE(pthread_create(&t, NULL, launch_forever, ctx) == 0);
    usleep(50000);
    printf("exitbusy: passed\n");
    fflush(stdout);
    exit(0);
}

/* execdrain N PATH: as execaway, while one thread launches host functions
 * without end and another takes hcguard's counts without end (each call
 * writes what the buffers hold to the files): the exec comes in the
 * middle of their writes. */
static void *stats_on(void *arg)
{
    (void)arg;
    for (;;)
        test_stats(get_stats);
    return NULL;
}

static void s_execdrain(int argc, char **argv)
{
    CUcontext ctx;
    pthread_t t;
    do_copies(num(argc, argv, 0));
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    REQUIRE(pthread_create(&t, NULL, launch_forever, ctx) == 0);
    REQUIRE(pthread_create(&t, NULL, stats_on, NULL) == 0);
    usleep(2000);
    char *av[] = {argv[1], NULL};
    char *none[] = {NULL};
    execve(argv[1], av, none);
    fprintf(stderr, "FAIL: exec %s: %s\n", argv[1], strerror(errno));
    exit(1);
}

/* execrace N PATH: as execdrain, while a third thread makes execs that
 * fail (ENOEXEC: the whole way, stopping and sealing as this exec does)
 * without end: one fails while this thread is between its seal and its
 * exec, and must not open the files again under it. */
static char race_prog[PATH_MAX];
static atomic_ulong race_fails;

static void *fail_execs(void *arg)
{
    (void)arg;
    for (;;) {
        char *av[] = {race_prog, NULL};
        execv(race_prog, av);
        atomic_fetch_add(&race_fails, 1);
        usleep(1000 + (unsigned)rand() % 3000);
    }
    return NULL;
}

static void s_execrace(int argc, char **argv)
{
    CUcontext ctx;
    pthread_t t;
    do_copies(num(argc, argv, 0));
    make_unrunnable(race_prog, sizeof race_prog);
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    REQUIRE(pthread_create(&t, NULL, launch_paced, ctx) == 0);
    REQUIRE(pthread_create(&t, NULL, stats_on, NULL) == 0);
    REQUIRE(pthread_create(&t, NULL, fail_execs, NULL) == 0);
    for (unsigned long want = 1 + (unsigned)getpid() % 5; atomic_load(&race_fails) < want;)
        usleep(100);
    char *av[] = {argv[1], NULL};
    char *none[] = {NULL};
    execve(argv[1], av, none);
    fprintf(stderr, "FAIL: exec %s: %s\n", argv[1], strerror(errno));
    exit(1);
}

/* exitstats T: as exitbusy (paced), while two more threads take hcguard's
 * counts without end, 20 us apart (each writing the buffers to the files;
 * without a pause they kept the exit from the drain's lock) as the program
 * exits: after their close, none may write, and none may start the
 * collector again (the exit then waited for ever). */
static void *stats_paced(void *arg)
{
    (void)arg;
    for (;;) {
        test_stats(get_stats);
        usleep(20);
    }
    return NULL;
}

static void s_exitstats(int argc, char **argv)
{
    CUcontext ctx;
    pthread_t t;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    for (unsigned long i = 0, n = num(argc, argv, 0); i < n; i++)
        REQUIRE(pthread_create(&t, NULL, launch_paced, ctx) == 0);
    REQUIRE(pthread_create(&t, NULL, stats_paced, NULL) == 0);
    REQUIRE(pthread_create(&t, NULL, stats_paced, NULL) == 0);
    usleep(20000);
    printf("exitstats: passed\n");
    fflush(stdout);
    exit(0);
}

/* exitwhilestart: another thread's first launch (which a slow NVTX tool
 * holds up 300 ms in hcguard's start) is under way when this thread exits,
 * 100 ms after that thread said it launches: the exit must wait for the
 * start, and count that thread's launches. */
static atomic_int first_launch_begun;

static void *launch_after_saying(void *ctx)
{
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    atomic_store(&first_launch_begun, 1);
    while (cuLaunchHostFunc(s, noop, NULL) == CUDA_SUCCESS)
        ;
    for (;;)
        pause();
    return NULL;
}

static void s_exitwhilestart(void)
{
    CUcontext ctx;
    pthread_t t;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    REQUIRE(pthread_create(&t, NULL, launch_after_saying, ctx) == 0);
    while (!atomic_load(&first_launch_begun))
        usleep(1000);
    usleep(100000);
    printf("exitwhilestart: passed\n");
    fflush(stdout);
    exit(0);
}

/* exitinstart: a timer's handler calls exit 50 ms into this thread's
 * first launch (which a slow NVTX tool holds up in hcguard's start): the
 * exit must not wait for a start its own thread is making. */
static void exit_now(int sig)
{
    (void)sig;
    exit(0);
}

static void s_exitinstart(void)
{
    struct itimerval it = {{0, 0}, {0, 50000}};
    REQUIRE(signal(SIGALRM, exit_now) != SIG_ERR);
    REQUIRE(setitimer(ITIMER_REAL, &it, NULL) == 0);
    REQUIRE_OK(cuLaunchHostFunc(stream, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    printf("exitinstart: the launch returned before the timer\n");
}

/* execat N PATH: N copies, then execveat PATH with an empty environment. */
static void s_execat(int argc, char **argv)
{
    do_copies(num(argc, argv, 0));
    char *av[] = {argv[1], NULL};
    char *none[] = {NULL};
    execveat(AT_FDCWD, argv[1], av, none, 0);
    fprintf(stderr, "FAIL: execveat %s: %s\n", argv[1], strerror(errno));
    exit(1);
}

static void s_die(int argc, char **argv)
{
    die(argv[0], argc > 1 && !strcmp(argv[1], "bad"));
}

static void s_ringcut(int argc, char **argv) { ringcut(num(argc, argv, 0)); }
static void s_hangcut(void) { hangcut(); }

static void s_sigview(int argc, char **argv)
{
    (void)argc;
    sigview((int)num(argc, argv, 0), argv[1]);
}

static void s_vforkview(int argc, char **argv)
{
    (void)argc;
    vforkview((int)num(argc, argv, 0), argv[1]);
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO_ARGS("flood", s_flood, 1, 1, "N"),
    CHECK_SCENARIO_ARGS("execfail", s_execfail, 2, 2, "N EXECS"),
    CHECK_SCENARIO("execnone", execnone),
    CHECK_SCENARIO_ARGS("dlopen", s_dlopen, 2, 2, "LIB N"),
    CHECK_SCENARIO_ARGS("rejects", s_rejects, 1, 1, "N"),
    CHECK_SCENARIO_ARGS("manythreads", s_manythreads, 1, 1, "THREADS"),
    CHECK_SCENARIO_ARGS("copies", s_copies, 1, 1, "N"),
    CHECK_SCENARIO_ARGS("threads", s_threads, 1, 2, "THREADS [N]"),
    CHECK_SCENARIO_ARGS("gated", s_gated, 1, 2, "N [busy|rejects]"),
    CHECK_SCENARIO_ARGS("slowhead", s_slowhead, 2, 3, "MS N [M]"),
    CHECK_SCENARIO_ARGS("afterdrop", s_afterdrop, 3, 3, "MS N G"),
    CHECK_SCENARIO_ARGS("warnings", s_warnings, 1, 1, "N"),
    CHECK_SCENARIO_ARGS("dtor", s_dtor, 1, 2, "THREADS [N]"),
    CHECK_SCENARIO_ARGS("forkprint", s_forkprint, 1, 2, "FORKS [busy]"),
    CHECK_SCENARIO_ARGS("copies-only", s_copies_only, 1, 1, "N"),
    CHECK_SCENARIO_ARGS("exec", s_exec, 2, 2, "N M"),
    CHECK_SCENARIO_ARGS("forkexec", s_forkexec, 2, 2, "N M"),
    CHECK_SCENARIO_ARGS("execaway", s_execaway, 2, 2, "N PATH"),
    CHECK_SCENARIO_ARGS("execdrain", s_execdrain, 2, 2, "N PATH"),
    CHECK_SCENARIO_ARGS("execrace", s_execrace, 2, 2, "N PATH"),
    CHECK_SCENARIO_ARGS("execat", s_execat, 2, 2, "N PATH"),
    CHECK_SCENARIO_ARGS("exitstats", s_exitstats, 1, 1, "T"),
    CHECK_SCENARIO("exitinstart", s_exitinstart),
    CHECK_SCENARIO("exitwhilestart", s_exitwhilestart),
    CHECK_SCENARIO_ARGS("die", s_die, 1, 2, "HOW [bad]"),
    CHECK_SCENARIO_ARGS("exitbusy", s_exitbusy, 1, 1, "T"),
    CHECK_SCENARIO_ARGS("sigview", s_sigview, 2, 2, "SIGNAL dfl|ign"),
    CHECK_SCENARIO_ARGS("vforkview", s_vforkview, 2, 2, "SIGNAL die|ign|reset"),
    CHECK_SCENARIO_ARGS("ringcut", s_ringcut, 1, 1, "N"),
    CHECK_SCENARIO("hangcut", s_hangcut),
    CHECK_SCENARIO_ARGS("forkexecbuf", s_forkexecbuf, 2, 3, "N M [kill]"),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_lost", "%s", CHECK_CASES(scenarios), argc, argv, setup, NULL);
}
