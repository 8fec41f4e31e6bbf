/*
 * The launch's fast path (src/wrap/stream.c: launch_fast_ok) taken only
 * where all it skips is known to hold. Each scenario first launches a
 * function until it is this thread's last recognised one (a call on its
 * free list, hcguard ready), so that the launch under test would take the
 * fast path, then makes that path wrong for it:
 *
 *   hc_fast nested    a host function launches the same function three
 *                     times in a row, twice over: each of the six is a CUDA
 *                     call inside a host function (refused in guard mode,
 *                     reported in both), never a launch like any other
 *   hc_fast fork      the function the parent launched last launched again
 *                     by a fork child (an ordinary one, then a copy): the
 *                     child starts hcguard afresh (its own summary, its runs
 *                     counted), checks its copies' records (guard mode;
 *                     the test driver only: a real driver's context is not
 *                     the child's)
 *   hc_fast fork-busy 20 fork children, each launching the function the
 *                     parent's main thread launched last, while another
 *                     thread launches (its fast path, and the whole path
 *                     each time it changes function): each child counts its
 *                     own 20 launches
 *   hc_fast register  a function launched as ordinary, then registered as
 *                     a copy function (on another thread): its next launch
 *                     is a copy, its bad record refused
 *   hc_fast debug     with HCGUARD_DEBUG, every launch described (user data
 *                     1 to 5: the test expects the fifth)
 *   hc_fast capture   a capture begun on another thread: the launch into
 *                     it is the graph's, replayed three times
 *   hc_fast threads   threads released at once, each first launching a copy
 *                     or an ordinary function, then both in turn: every
 *                     launch counted once and run once
 *
 * Exit 0 passed, 1 failed, 77 not applicable (no device).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"
#include "../common/stderr_redirect.h"

static CUstream stream;
static CUhostFn copy_fn;
static test_stats_fn get_stats;
static int guard;

static void setup(void)
{
    stream = test_context();
    get_stats = test_require_hcguard(&copy_fn);
    guard = test_mode_is("guard");
}

static hcguard_stats stats(void)
{
    return test_stats(get_stats);
}

static atomic_int runs;
static void noop(void *p)
{
    (void)p;
    atomic_fetch_add(&runs, 1);
}

/* n launches of fn(user) on stream, all taken, then the stream drained. */
static void launch_n(CUhostFn fn, void *user, int n)
{
    for (int i = 0; i < n; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, fn, user));
    REQUIRE_OK(cuStreamSynchronize(stream));
}

/* ---- inside a host function ------------------------------------------------ */
/* The callback thread's first nested launch is recognised (audit mode goes
 * on past the report) and leaves a call on its free list: the next two
 * would take the fast path but for hcg_self.in_host_fn. */
static CUresult nested_got[6];
static atomic_int nested_n;

static void relaunch(void *p)
{
    (void)p;
    for (int i = 0; i < 3; i++) {
        int k = atomic_fetch_add(&nested_n, 1);
        if (k < 6)
            nested_got[k] = cuLaunchHostFunc(stream, noop, NULL);
    }
}

static void nested(void)
{
    launch_n(noop, NULL, 3); /* the main thread's fast path too */
    REQUIRE_OK(cuLaunchHostFunc(stream, relaunch, NULL));
    REQUIRE_OK(cuLaunchHostFunc(stream, relaunch, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    REQUIRE_OK(cuStreamSynchronize(stream)); /* what they launched, if the driver took it */
    CHECK_MSG(atomic_load(&nested_n) == 6, "%d nested launches", atomic_load(&nested_n));
    for (int i = 0; i < 6 && guard; i++)
        CHECK_MSG(nested_got[i] == CUDA_ERROR_NOT_PERMITTED,
                  "nested launch %d in guard mode: %d, want CUDA_ERROR_NOT_PERMITTED", i,
                  (int)nested_got[i]);
    /* The findings are counted by the test: cuda-call-in-host-fn +6. */
}

/* ---- fork ---------------------------------------------------------------------- */
static unsigned char fork_src[64] = "the parent's data", fork_dst[64];
static hcguard_copy_record fork_good = {(uintptr_t)fork_dst, (uintptr_t)fork_src, sizeof fork_src};
static hcguard_copy_record fork_bad = {(uintptr_t)fork_src, (uintptr_t)fork_src + 8,
                                       sizeof fork_src}; /* overlap */

static void *_Atomic busy_ctx;
static CUstream busy_stream;
static void noop_busy(void *p)
{
    (void)p;
}
static void other_busy(void *p)
{
    (void)p;
}

static int echo_children; /* what each child said, to stderr */

/* In a child: only the function the parent launched last, again (noop,
 * or the copy with good records and one bad), so that no launch of the
 * child's would take the whole path but for the fork. */
static void child_noop(void)
{
    atomic_store(&runs, 0);
    for (int i = 0; i < 20; i++)
        if (cuLaunchHostFunc(stream, noop, NULL) != CUDA_SUCCESS)
            fprintf(stderr, "child: launch %d refused\n", i);
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS)
        fprintf(stderr, "child: synchronize failed\n");
    if (atomic_load(&runs) != 20)
        fprintf(stderr, "child: noop ran %d times\n", atomic_load(&runs));
}

static void child_copy(void)
{
    memset(fork_dst, 0, sizeof fork_dst);
    for (int i = 0; i < 4; i++)
        if (cuLaunchHostFunc(stream, copy_fn, &fork_good) != CUDA_SUCCESS)
            fprintf(stderr, "child: copy %d refused\n", i);
    if (cuLaunchHostFunc(stream, copy_fn, &fork_bad) != CUDA_ERROR_INVALID_VALUE)
        fprintf(stderr, "child: bad record not refused\n");
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS)
        fprintf(stderr, "child: synchronize failed\n");
    if (memcmp(fork_dst, fork_src, sizeof fork_src) != 0)
        fprintf(stderr, "child: the copies did not copy\n");
}

/* A child that runs body; what it said checked for each of want. */
static void run_child(void (*body)(void), const char *const *want, size_t n_want)
{
    int fd[2];
    REQUIRE(pipe(fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        hcg_test_redirect_stderr(fd[1]);
        close(fd[0]);
        body();
        exit(0); /* destructors run: hcguard's summary */
    }
    close(fd[1]);
    static char buf[16384];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd[0]);
    int st = 0;
    CHECK_MSG(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit status %d",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    int failures = check_failures;
    CHECK_MSG(strstr(buf, "child:") == NULL, "the child failed: %s", buf);
    for (size_t i = 0; i < n_want; i++)
        CHECK_MSG(strstr(buf, want[i]) != NULL, "the child did not say \"%s\"", want[i]);
    if (failures == check_failures && !echo_children)
        return;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        fprintf(stderr, "the child said| %s\n", line);
}

static void fork_child(void)
{
    echo_children = 1;
    if (!guard) {
        fprintf(stderr, "SKIP: the child's bad record is refused in guard mode only\n");
        exit(77);
    }
    static const char *const want_noop[] = {"host functions: 20 launched, 20 ran"};
    static const char *const want_copy[] = {
        "host functions: 4 launched, 4 ran",
        "recognised as hcguard_host_copy: 4 launched, 4 ran",
        "bad records rejected at enqueue: 1",
    };
    launch_n(noop, NULL, 40);
    run_child(child_noop, want_noop, 1);
    launch_n(copy_fn, &fork_good, 4);
    run_child(child_copy, want_copy, 3);
    launch_n(noop, NULL, 6);
    CHECK_MSG(atomic_load(&runs) == 46, "the parent's noop ran %d times", atomic_load(&runs));
}

/* Forks while another thread launches: its fast path mostly, the whole
 * path whenever it changes function (the two alternate in runs of 16). */
static atomic_int busy_stop;
static void *busy_launcher(void *arg)
{
    (void)arg;
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)busy_ctx));
    for (unsigned i = 0; !atomic_load(&busy_stop); i++)
        if (cuLaunchHostFunc(busy_stream, (i / 16) & 1 ? other_busy : noop_busy, NULL) !=
            CUDA_SUCCESS)
            return (void *)1;
    return NULL;
}

static void fork_busy(void)
{
    static const char *const want_noop[] = {"host functions: 20 launched, 20 ran"};
    REQUIRE_OK(cuCtxGetCurrent((CUcontext *)&busy_ctx));
    REQUIRE_OK(cuStreamCreate(&busy_stream, CU_STREAM_NON_BLOCKING));
    launch_n(noop, NULL, 4);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, busy_launcher, NULL) == 0);
    for (int i = 0; i < 20; i++)
        run_child(child_noop, want_noop, 1);
    atomic_store(&busy_stop, 1);
    void *r;
    pthread_join(t, &r);
    CHECK_MSG(r == NULL, "a launch of the busy thread failed");
    REQUIRE_OK(cuStreamSynchronize(busy_stream));
    REQUIRE_OK(cuStreamDestroy(busy_stream));
}

/* ---- registration ------------------------------------------------------------- */
void hc_fast_maybe_copy(void *p);
static atomic_int maybe_calls;
void hc_fast_maybe_copy(void *p)
{
    atomic_fetch_add(&maybe_calls, 1);
    test_local_copy(p);
}

static void *register_it(void *arg)
{
    typedef int (*register_fn)(void *);
    register_fn reg = (register_fn)dlsym(RTLD_DEFAULT, "hcguard_register_copy_fn");
    *(int *)arg = reg ? reg((void *)hc_fast_maybe_copy) : -2;
    return NULL;
}

static void registration(void)
{
    static unsigned char src[32] = "registered", dst[32];
    hcguard_copy_record good = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    hcguard_copy_record bad = {(uintptr_t)src, (uintptr_t)src + 4, sizeof src}; /* overlap */
    launch_n(hc_fast_maybe_copy, &good, 3); /* ordinary: called, copies itself */
    CHECK_MSG(atomic_load(&maybe_calls) == 3, "called %d times as ordinary",
              atomic_load(&maybe_calls));
    pthread_t t;
    int got = -1;
    REQUIRE(pthread_create(&t, NULL, register_it, &got) == 0);
    pthread_join(t, NULL);
    CHECK_MSG(got == 0, "hcguard_register_copy_fn: %d", got);
    hcguard_stats before = stats();
    CUresult r = cuLaunchHostFunc(stream, hc_fast_maybe_copy, &bad);
    CHECK_MSG(r == (guard ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS),
              "a bad record of a function registered since: %d", (int)r);
    memset(dst, 0, sizeof dst);
    launch_n(hc_fast_maybe_copy, &good, 2);
    hcguard_stats after = stats();
    CHECK_MSG(after.copies_launched - before.copies_launched == (guard ? 2u : 3u),
              "copies launched %llu since the registration",
              (unsigned long long)(after.copies_launched - before.copies_launched));
    CHECK_MSG(after.rejected - before.rejected == 1, "rejected %llu",
              (unsigned long long)(after.rejected - before.rejected));
    CHECK_MSG(memcmp(dst, src, sizeof src) == 0, "the registered copy was made");
    CHECK_MSG(atomic_load(&maybe_calls) == 3, "a registered copy function called (%d calls)",
              atomic_load(&maybe_calls));
}

/* ---- HCGUARD_DEBUG ----------------------------------------------------------- */
static void debug(void)
{
    for (uintptr_t i = 1; i <= 5; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, noop, (void *)i));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(atomic_load(&runs) == 5, "noop ran %d times", atomic_load(&runs));
}

/* ---- a capture begun on another thread ------------------------------------------ */
static CUstream capture_stream;

static void *begin_capture(void *arg)
{
    *(CUresult *)arg = cuStreamBeginCapture(capture_stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    return NULL;
}

static atomic_int others;
static void other(void *p)
{
    (void)p;
    atomic_fetch_add(&others, 1);
}

/* The captured call is the graph's (kept alive by it): were it a one-shot
 * call, the first replay would give it back, and the launches between the
 * replays would take it for other's. */
static void capture(void)
{
    REQUIRE_OK(cuStreamCreate(&capture_stream, CU_STREAM_NON_BLOCKING));
    launch_n(noop, NULL, 3);
    pthread_t t;
    CUresult begun = CUDA_ERROR_UNKNOWN;
    REQUIRE(pthread_create(&t, NULL, begin_capture, &begun) == 0);
    pthread_join(t, NULL);
    REQUIRE_OK(begun);
    uint64_t live = stats().graph_calls_live;
    REQUIRE_OK(cuLaunchHostFunc(capture_stream, noop, NULL));
    CHECK_MSG(stats().graph_calls_live == live + 1, "the captured call is not the graph's");
    CUgraph g;
    CUgraphExec e;
    REQUIRE_OK(cuStreamEndCapture(capture_stream, &g));
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    REQUIRE_OK(cuGraphDestroy(g));
    int before = atomic_load(&runs);
    for (int i = 0; i < 3; i++) {
        REQUIRE_OK(cuGraphLaunch(e, capture_stream));
        REQUIRE_OK(cuStreamSynchronize(capture_stream));
        launch_n(other, NULL, 64);
    }
    CHECK_MSG(atomic_load(&runs) - before == 3, "the captured launch ran %d times in 3 replays",
              atomic_load(&runs) - before);
    CHECK_MSG(atomic_load(&others) == 3 * 64, "other ran %d times, want %d",
              atomic_load(&others), 3 * 64);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuStreamDestroy(capture_stream));
    /* The driver frees the captured call later, on its own thread: before
     * the exit's leak check. */
    for (int i = 0; i < 2000 && stats().graph_calls_live != live; i++)
        usleep(1000);
    CHECK_MSG(stats().graph_calls_live == live, "the captured call outlived its graph");
}

/* ---- threads first launching at once ---------------------------------------- */
#define THREADS 8
#define PER_THREAD 2000
static pthread_barrier_t start_line;
static CUcontext ctx;

static void *launcher(void *arg)
{
    int copy_first = (int)(uintptr_t)arg & 1;
    /* Not on the thread's stack: the copies run after it exits. */
    static unsigned char src[THREADS][16], dst[THREADS][16];
    static hcguard_copy_record recs[THREADS];
    unsigned me = (unsigned)(uintptr_t)arg;
    hcguard_copy_record *rec = &recs[me];
    *rec = (hcguard_copy_record){(uintptr_t)dst[me], (uintptr_t)src[me], sizeof src[me]};
    memset(src[me], (int)me + 1, sizeof src[me]);
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return (void *)1;
    pthread_barrier_wait(&start_line);
    uintptr_t failed = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        int is_copy = ((i / 3) & 1) ^ copy_first; /* three in a row: each kind's fast path */
        failed += cuLaunchHostFunc(stream, is_copy ? copy_fn : noop, is_copy ? (void *)rec : NULL) !=
                  CUDA_SUCCESS;
    }
    return (void *)failed;
}

static void threads(void)
{
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    hcguard_stats before = stats();
    REQUIRE(pthread_barrier_init(&start_line, NULL, THREADS) == 0);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, launcher, (void *)i) == 0);
    uintptr_t failed = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        failed += (uintptr_t)r;
    }
    REQUIRE_OK(cuCtxSynchronize());
    hcguard_stats after = stats();
    unsigned long long total = THREADS * PER_THREAD, copies = 0;
    for (int me = 0; me < THREADS; me++)
        for (int i = 0; i < PER_THREAD; i++)
            copies += (unsigned long long)(((i / 3) & 1) ^ (me & 1));
    CHECK_MSG(failed == 0, "%lu launches failed", (unsigned long)failed);
    test_check_counted(&before, &after, total, copies);
    CHECK_MSG((unsigned long long)atomic_load(&runs) == total - copies, "noop ran %d times",
              atomic_load(&runs));
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("nested", nested),       CHECK_SCENARIO("fork", fork_child),
    CHECK_SCENARIO("register", registration), CHECK_SCENARIO("debug", debug),
    CHECK_SCENARIO("capture", capture),     CHECK_SCENARIO("threads", threads),
    CHECK_SCENARIO("fork-busy", fork_busy),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_fast", "fast %s", CHECK_CASES(scenarios), argc, argv, setup,
                               NULL);
}
