/*
 * cuStreamWaitEvent from threads that never launched a host function (a
 * framework's: PyTorch's threads wait for events all the time and launch
 * none): hcguard marks such a wait as it marks a launch, with a marker of
 * the thread's own, and takes no lock while no capture is open. The
 * program counts its process's pthread_rwlock_rdlock and _wrlock calls (it
 * defines them: not for a TSan build, whose runtime intercepts them).
 *
 *   hc_wait_locks       prints the counts, then "wait-locks: passed" (or FAILED)
 *   hc_wait_locks fork  a thread that never launched waits without end (the
 *                       test driver yields inside each wait:
 *                       FAKECUDA_WAIT_YIELD=1) while the process forks 20
 *                       times; each child begins and ends a capture at once:
 *                       no mark of the parent's waiter is waited for there
 *
 *   hc_wait_locks sticky
 *       where membarrier(2) is refused (a sandbox; here a seccomp filter
 *       installed first): launches then ask whether their stream captures
 *       from the first capture on, for good, and a wait must still take the
 *       lock to write only while a capture is open, not for the rest of the
 *       process. Run in audit mode: a begin inside a host function then
 *       reaches the driver, which refuses it; waits must not take the write
 *       lock for it. Prints "wait-sticky: passed" (or FAILED); under
 *       HCGUARD_DEBUG=1, hcguard's lines show the captures sticky ("a
 *       capture begins", never "no capture open")
 *
 *   hc_wait_locks first-begin | first-begin-pool
 *       membarrier(2) refused: a wait under way as the first capture
 *       begins (from a thread that never launched, or one with a pool) is
 *       waited for, so that a launch on the stream it would join is not
 *       captured as a one-shot (see first_begin); "wait-locks first-begin:
 *       passed"
 *   hc_wait_locks first-begin-jump
 *       membarrier(2) allowed, the beginning thread left a launch by a jump
 *       (its mark stays, taken after 2 s to be left behind): the begin still
 *       waits for the other threads' marks
 *   hc_wait_locks keys
 *       the program took every thread-specific key before hcguard made its
 *       own: waits and launches work, and the program's key keeps its
 *       values; "wait-locks keys: passed"
 *   hc_wait_locks dtor
 *       threads that wait in every round of their exit destructors, or in
 *       the last only (after which none runs: the marker is taken over from
 *       the exited thread), leave no marker taken; "wait-locks dtor: passed"
 *
 * Cases: 100 waits of a fresh thread with no capture open take no lock;
 * with one open, the lock to write each; after it ended, none again. More
 * threads at once than there are markers (1024), each waiting and
 * launching a graph that runs a host function: every call succeeds, those
 * without a marker take the lock to read, and no call pool is taken.
 * Markers of threads that exited are taken over: 2000 threads one after
 * another take no lock.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hcguard.h"
#include "testutil.h"

static atomic_long rdlocks, wrlocks;

int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    static int (*real)(pthread_rwlock_t *);
    if (!real)
        real = (int (*)(pthread_rwlock_t *))dlsym(RTLD_NEXT, "pthread_rwlock_rdlock");
    atomic_fetch_add(&rdlocks, 1);
    return real(l);
}

int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    static int (*real)(pthread_rwlock_t *);
    if (!real)
        real = (int (*)(pthread_rwlock_t *))dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
    atomic_fetch_add(&wrlocks, 1);
    return real(l);
}

static CUcontext ctx;
static CUstream waited;
static CUevent ev;

static atomic_int node_runs;

static void CUDA_CB node_fn(void *p)
{
    (void)p;
    atomic_fetch_add(&node_runs, 1);
}

typedef struct waiter {
    int n;                   /* waits to make */
    pthread_barrier_t *hold; /* all alive at once: wait here after, if set */
    atomic_int *failed;
    CUgraphExec launch;      /* and launch this once, if set */
} waiter;

static void *wait_thread(void *p)
{
    waiter *w = p;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    for (int i = 0; i < w->n; i++)
        if (cuStreamWaitEvent(waited, ev, 0) != CUDA_SUCCESS)
            atomic_fetch_add(w->failed, 1);
    if (w->launch && cuGraphLaunch(w->launch, waited) != CUDA_SUCCESS)
        atomic_fetch_add(w->failed, 1);
    if (w->hold)
        pthread_barrier_wait(w->hold);
    return NULL;
}

static pthread_t start(waiter *w)
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 128 << 10);
    REQUIRE(pthread_create(&t, &a, wait_thread, w) == 0);
    pthread_attr_destroy(&a);
    return t;
}

/* Locks (read, write) taken while one fresh thread makes n waits. */
static void fresh_waits(int n, long *rd, long *wr, atomic_int *failed)
{
    long r0 = atomic_load(&rdlocks), w0 = atomic_load(&wrlocks);
    waiter w = {n, NULL, failed, NULL};
    pthread_join(start(&w), NULL);
    *rd = atomic_load(&rdlocks) - r0;
    *wr = atomic_load(&wrlocks) - w0;
}

static atomic_int spin_stop;

static void *wait_spin(void *p)
{
    (void)p;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    while (!atomic_load(&spin_stop))
        REQUIRE_OK(cuStreamWaitEvent(waited, ev, 0));
    return NULL;
}

static uint64_t ms_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* In the child: a capture begun and ended, within 1 s. */
static int child_captures(void)
{
    CUstream c;
    CUgraph g;
    uint64_t t0 = ms_now();
    if (cuStreamCreate(&c, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS ||
        cuStreamEndCapture(c, &g) != CUDA_SUCCESS)
        return 2;
    return ms_now() - t0 < 1000 ? 0 : 3;
}

static int forks(void)
{
    pthread_t t;
    int bad = 0;
    REQUIRE(pthread_create(&t, NULL, wait_spin, NULL) == 0);
    for (int i = 0; i < 20; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        fflush(stdout);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0)
            _exit(child_captures());
        int st = 0;
        REQUIRE(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("child %d: status %#x\n", i, (unsigned)st);
            bad++;
        }
    }
    atomic_store(&spin_stop, 1);
    pthread_join(t, NULL);
    printf("20 fork children began and ended a capture; %d did not within 1 s\n", bad);
    CHECK_EQ(bad, 0);
    printf("wait-locks fork: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}

static void CUDA_CB noop(void *p)
{
    (void)p;
}

static CUresult inner_begin = CUDA_SUCCESS;
static void CUDA_CB begins_capture(void *stream)
{
    inner_begin = cuStreamBeginCapture((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED);
}

/* membarrier(2) fails with ENOSYS from now on, in this process. */
static void refuse_membarrier(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {sizeof f / sizeof f[0], f};
    REQUIRE(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
    REQUIRE(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p) == 0);
}

/* Write locks taken by n waits of s for e. */
static long waits(CUstream s, CUevent e, int n)
{
    long w0 = atomic_load(&wrlocks);
    for (int i = 0; i < n; i++)
        REQUIRE_OK(cuStreamWaitEvent(s, e, 0));
    return atomic_load(&wrlocks) - w0;
}

static int sticky(void)
{
    CUstream s = waited, c;
    CUevent e = ev;
    CUgraph g;
    REQUIRE_OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    /* A launch first: this thread's waits are then marked with its pool's
     * mark (a thread that never launched: its marker's). */
    REQUIRE_OK(cuLaunchHostFunc(c, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(c));
    long before = waits(s, e, 100);
    REQUIRE_OK(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    long open = waits(s, e, 100);
    REQUIRE_OK(cuStreamEndCapture(c, &g));
    REQUIRE_OK(cuGraphDestroy(g));
    long after = waits(s, e, 100);
    printf("write locks for 100 waits: before any capture %ld, with one open %ld, after it "
           "ended %ld\n",
           before, open, after);
    CHECK_EQ(before, 0L);
    CHECK_EQ(open, 100L);
    CHECK_EQ(after, 0L);
    /* A begin inside a host function, which the driver refuses (in audit
     * mode hcguard lets it through to the driver): no capture began, so
     * none may be open, and waits still take no write lock. */
    REQUIRE_OK(cuLaunchHostFunc(c, begins_capture, c));
    REQUIRE_OK(cuStreamSynchronize(c));
    long refused = waits(s, e, 100);
    printf("after a begin the driver refused inside a host function (%d): %ld\n",
           (int)inner_begin, refused);
    CHECK(inner_begin != CUDA_SUCCESS);
    CHECK_EQ(refused, 0L);
    long rd, wr;
    atomic_int failed = 0;
    fresh_waits(100, &rd, &wr, &failed);
    printf("100 waits of a thread that never launched, after: %ld write locks\n", wr);
    CHECK_EQ(wr, 0L);
    CHECK_EQ(atomic_load(&failed), 0);
    REQUIRE_OK(cuStreamDestroy(c));
    printf("wait-sticky: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}

enum { CROWD = 1100, MARKERS = 1024, SERIAL = 2000 };

static int counts(void)
{
    CUstream c;
    CUgraph g;
    atomic_int failed = 0;
    long rd, wr;
    REQUIRE_OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    fresh_waits(100, &rd, &wr, &failed);
    printf("100 waits, no capture ever: %ld read locks, %ld write locks\n", rd, wr);
    CHECK_EQ(rd, 0L);
    CHECK_EQ(wr, 0L);

    REQUIRE_OK(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    fresh_waits(100, &rd, &wr, &failed);
    printf("100 waits, a capture open: %ld read locks, %ld write locks\n", rd, wr);
    CHECK_EQ(wr, 100L);
    REQUIRE_OK(cuStreamEndCapture(c, &g));
    REQUIRE_OK(cuGraphDestroy(g));

    fresh_waits(100, &rd, &wr, &failed);
    printf("100 waits, the capture ended: %ld read locks, %ld write locks\n", rd, wr);
    CHECK_EQ(rd, 0L);
    CHECK_EQ(wr, 0L);

    /* More threads alive at once than markers, each waiting once and
     * launching a graph with a host node once: neither takes a call pool,
     * so none is short of one ("more than 1024 threads launch host
     * functions", rejected by the test). */
    CUgraph hg;
    CUgraphNode node;
    CUgraphExec he;
    CUDA_HOST_NODE_PARAMS hp = {node_fn, NULL};
    REQUIRE_OK(cuGraphCreate(&hg, 0));
    REQUIRE_OK(cuGraphAddHostNode(&node, hg, NULL, 0, &hp));
    REQUIRE_OK(cuGraphInstantiate(&he, hg, 0));
    static pthread_t crowd[CROWD];
    pthread_barrier_t hold;
    pthread_barrier_init(&hold, NULL, CROWD);
    waiter w = {1, &hold, &failed, he};
    long r0 = atomic_load(&rdlocks), w0 = atomic_load(&wrlocks);
    for (int i = 0; i < CROWD; i++)
        crowd[i] = start(&w);
    for (int i = 0; i < CROWD; i++)
        pthread_join(crowd[i], NULL);
    pthread_barrier_destroy(&hold);
    rd = atomic_load(&rdlocks) - r0;
    wr = atomic_load(&wrlocks) - w0;
    REQUIRE_OK(cuStreamSynchronize(waited));
    printf("%d threads alive at once, a wait and a graph launch each: %ld read locks, %ld write "
           "locks; the host node ran %d times\n",
           CROWD, rd, wr, atomic_load(&node_runs));
    CHECK(rd >= 2 * (CROWD - MARKERS) && rd <= 2 * CROWD);
    CHECK_EQ(wr, 0L);
    CHECK_EQ(atomic_load(&node_runs), CROWD);
    REQUIRE_OK(cuGraphExecDestroy(he));
    REQUIRE_OK(cuGraphDestroy(hg));

    /* Their markers taken over, one thread after another. */
    r0 = atomic_load(&rdlocks);
    w0 = atomic_load(&wrlocks);
    waiter one = {1, NULL, &failed, NULL};
    for (int i = 0; i < SERIAL; i++)
        pthread_join(start(&one), NULL);
    rd = atomic_load(&rdlocks) - r0;
    wr = atomic_load(&wrlocks) - w0;
    printf("%d threads one after another, a wait each: %ld read locks, %ld write locks\n",
           SERIAL, rd, wr);
    CHECK_EQ(rd, 0L);
    CHECK_EQ(wr, 0L);

    printf("waits refused: %d\n", atomic_load(&failed));
    CHECK_EQ(atomic_load(&failed), 0);
    REQUIRE_OK(cuStreamDestroy(c));
    printf("wait-locks: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}

/* ---- first-begin: a wait under way as the first capture begins, where
 * membarrier(2) is refused. This program's sched_yield, which the test
 * driver calls inside a wait and inside a launch (FAKECUDA_WAIT_YIELD=1,
 * FAKECUDA_LAUNCH_YIELD=1), orders it so:
 *   W: waits for ev on b; hcguard reads "no capture open"; inside the
 *      driver, W stops (up to 1 s, until L's launch is in the driver);
 *   main: begins a capture on a, records ev in it;
 *   L: launches fn on b; hcguard asks whether b captures (no); inside
 *      the driver, W goes on and joins b to the capture, then L's launch
 *      goes on.
 * Unless the begin waited for W (W then joins nothing: ev was not recorded
 * yet), L's launch is captured as a one-shot call, freed after its first
 * run: the replays run it again, or another launch's call. */
static _Thread_local int fb_role; /* 1: W, 2: L */
static atomic_int fb_arm_w, fb_arm_l, fb_w_parked, fb_release_w, fb_w_done, fb_l_go;
static atomic_int fb_runs;

static void spin_until(atomic_int *flag, uint64_t ms)
{
    uint64_t t0 = ms_now();
    while (!atomic_load(flag) && ms_now() - t0 < ms)
        syscall(SYS_sched_yield);
}

static sigjmp_buf fb_jump;
static atomic_int fb_arm_jump;

int sched_yield(void)
{
    if (atomic_exchange(&fb_arm_jump, 0))
        siglongjmp(fb_jump, 1); /* out of the launch, its mark left */
    if (fb_role == 1 && atomic_exchange(&fb_arm_w, 0)) {
        atomic_store(&fb_w_parked, 1);
        spin_until(&fb_release_w, 1000);
    } else if (fb_role == 2 && atomic_exchange(&fb_arm_l, 0)) {
        atomic_store(&fb_release_w, 1);
        spin_until(&fb_w_done, 1000);
    }
    return (int)syscall(SYS_sched_yield);
}

static void CUDA_CB fb_fn(void *p)
{
    (void)p;
    atomic_fetch_add(&fb_runs, 1);
}

static CUstream fb_b;
static int fb_pooled; /* W launched before: its pool's mark, else its marker's */

static void *fb_waiter(void *p)
{
    (void)p;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    if (fb_pooled) {
        REQUIRE_OK(cuLaunchHostFunc(waited, noop, NULL));
        REQUIRE_OK(cuStreamSynchronize(waited));
    }
    fb_role = 1;
    atomic_store(&fb_arm_w, 1);
    REQUIRE_OK(cuStreamWaitEvent(fb_b, ev, 0));
    atomic_store(&fb_w_done, 1);
    return NULL;
}

static void *fb_launcher(void *p)
{
    (void)p;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    REQUIRE_OK(cuLaunchHostFunc(waited, noop, NULL)); /* a pool of its own */
    REQUIRE_OK(cuStreamSynchronize(waited));
    spin_until(&fb_l_go, 5000);
    fb_role = 2;
    atomic_store(&fb_arm_l, 1);
    REQUIRE_OK(cuLaunchHostFunc(fb_b, fb_fn, NULL));
    return NULL;
}

/* This thread leaves a launch by a jump (its mark stays); 2 s on, the
 * mark is taken to be left behind and its begins are let through: they
 * must still wait for every other thread's marks. */
static void jump_out_of_launch(CUstream a)
{
    REQUIRE_OK(cuLaunchHostFunc(waited, noop, NULL)); /* this thread's pool */
    REQUIRE_OK(cuStreamSynchronize(waited));
    if (!sigsetjmp(fb_jump, 1)) {
        atomic_store(&fb_arm_jump, 1);
        (void)cuLaunchHostFunc(waited, noop, NULL);
        REQUIRE(!"the launch did not yield (FAKECUDA_LAUNCH_YIELD=1?)");
    }
    CUresult early = cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED);
    CHECK_EQ(early, CUDA_ERROR_NOT_PERMITTED);
    usleep(2100000);
}

static int first_begin(int how) /* 0: W never launched; 1: W has a pool; 2: 0 after a jump */
{
    CUstream a, own;
    CUgraph g;
    CUgraphExec e;
    pthread_t w, l;
    size_t nodes = 0;
    fb_pooled = how == 1;
    REQUIRE_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    if (how == 2)
        jump_out_of_launch(a);
    REQUIRE_OK(cuStreamCreate(&fb_b, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    REQUIRE(pthread_create(&l, NULL, fb_launcher, NULL) == 0);
    REQUIRE(pthread_create(&w, NULL, fb_waiter, NULL) == 0);
    spin_until(&fb_w_parked, 5000);
    REQUIRE(atomic_load(&fb_w_parked));
    REQUIRE_OK(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    int waited_for = atomic_load(&fb_w_done);
    REQUIRE_OK(cuEventRecord(ev, a));
    atomic_store(&fb_l_go, 1);
    pthread_join(l, NULL);
    pthread_join(w, NULL);
    REQUIRE_OK(cuStreamEndCapture(a, &g));
    REQUIRE_OK(cuGraphGetNodes(g, NULL, &nodes));
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    for (int i = 0; i < 3; i++) {
        REQUIRE_OK(cuGraphLaunch(e, own));
        REQUIRE_OK(cuStreamSynchronize(own));
        for (int k = 0; k < 300; k++) /* would take a freed call's place */
            REQUIRE_OK(cuLaunchHostFunc(own, noop, NULL));
        REQUIRE_OK(cuStreamSynchronize(own));
    }
    REQUIRE_OK(cuStreamSynchronize(fb_b));
    printf("first begin%s, the waiter %s: waited for it %d; graph nodes %zu; the launch ran %d "
           "times in 3 replays\n",
           how == 2 ? " after a jump out of a launch" : "",
           fb_pooled ? "with a pool" : "never launched", waited_for, nodes, atomic_load(&fb_runs));
    CHECK_EQ(waited_for, 1);
    CHECK_EQ(nodes, (size_t)0);
    CHECK_EQ(atomic_load(&fb_runs), 1);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    printf("wait-locks first-begin: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}

/* ---- keys: the program took every thread-specific key ----------------- */
static pthread_key_t prog_key;
static atomic_int prog_dtor_ok, prog_dtor_bad;

static void prog_dtor(void *p)
{
    atomic_fetch_add(*(int *)p == 42 ? &prog_dtor_ok : &prog_dtor_bad, 1);
}

static void *keyed_thread(void *p)
{
    static int mine = 42;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    REQUIRE(pthread_setspecific(prog_key, &mine) == 0);
    if (p) { /* and a launch: a call pool; and a rejected copy: a ring */
        static hcguard_copy_record bad = {0, 1, 8};
        REQUIRE_OK(cuLaunchHostFunc(waited, noop, NULL));
        REQUIRE_OK(cuStreamSynchronize(waited));
        CHECK(cuLaunchHostFunc(waited, test_copy_fn(NULL), &bad) != CUDA_SUCCESS);
    }
    REQUIRE_OK(cuStreamWaitEvent(waited, ev, 0));
    return NULL;
}

/* hcguard's keys for markers and pools are made at their first use: none
 * is left then, and no value of hcguard's may land on the program's key
 * (its destructor would be handed a marker, or a pool). prog_key is the
 * first key this program makes: 0 in a process whose other libraries
 * made none before main (hcguard makes its own later). */
static int keys(void)
{
    pthread_key_t k;
    int more = 0;
    REQUIRE(pthread_key_create(&prog_key, prog_dtor) == 0);
    while (pthread_key_create(&k, NULL) == 0)
        more++;
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, keyed_thread, i ? &more : NULL) == 0);
        pthread_join(t, NULL);
    }
    printf("keys: the program's key %u, then %d more; its destructor got its value %d times, "
           "another %d times\n",
           (unsigned)prog_key, more, atomic_load(&prog_dtor_ok), atomic_load(&prog_dtor_bad));
    CHECK_EQ(atomic_load(&prog_dtor_ok), 2);
    CHECK_EQ(atomic_load(&prog_dtor_bad), 0);
    printf("wait-locks keys: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}

/* ---- dtor: waits in every round of a thread's exit destructors -------- */
static pthread_key_t rounds_key;

static int last_round_only; /* the threads wait only in the last round */

static void rounds_dtor(void *p)
{
    long n = (long)(intptr_t)p;
    if (!last_round_only || n == 4)
        REQUIRE_OK(cuStreamWaitEvent(waited, ev, 0));
    if (n < 4) /* set again: called in the next round */
        pthread_setspecific(rounds_key, (void *)(intptr_t)(n + 1));
}

static void *rounds_thread(void *p)
{
    (void)p;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    pthread_setspecific(rounds_key, (void *)(intptr_t)1);
    if (!last_round_only)
        REQUIRE_OK(cuStreamWaitEvent(waited, ev, 0));
    return NULL;
}

/* A wait after the thread's marker was given back (a later destructor,
 * or a later round) takes none: one taken then would never be given back,
 * and 1100 such threads would leave no marker for anyone. */
static int dtor_rounds(void)
{
    atomic_int failed = 0;
    long rd, wr;
    fresh_waits(1, &rd, &wr, &failed); /* hcguard's key made first: its destructor runs first */
    REQUIRE(pthread_key_create(&rounds_key, rounds_dtor) == 0);
    for (last_round_only = 0; last_round_only < 2; last_round_only++) {
        for (int i = 0; i < CROWD; i++) {
            pthread_t t;
            REQUIRE(pthread_create(&t, NULL, rounds_thread, NULL) == 0);
            pthread_join(t, NULL);
        }
        fresh_waits(100, &rd, &wr, &failed);
        printf("after %d threads that waited in %s: 100 waits of a fresh thread took %ld read "
               "locks\n",
               CROWD, last_round_only ? "the last destructor round only" : "every destructor round",
               rd);
        CHECK_EQ(rd, 0L);
    }
    CHECK_EQ(atomic_load(&failed), 0);
    printf("wait-locks dtor: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}

static int first_begin_fresh(void)
{
    return first_begin(0);
}

static int first_begin_pooled(void)
{
    return first_begin(1);
}

static int first_begin_jumped(void)
{
    return first_begin(2);
}

static const struct {
    const char *name;
    int (*run)(void);
    int no_membarrier; /* refused before anything else */
} modes[] = {
    {"", counts, 0},
    {"fork", forks, 0},
    {"sticky", sticky, 1},
    {"first-begin", first_begin_fresh, 1},
    {"first-begin-pool", first_begin_pooled, 1},
    {"first-begin-jump", first_begin_jumped, 0},
    {"keys", keys, 0},
    {"dtor", dtor_rounds, 0},
};

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "";
    size_t m = 0;
    while (m < sizeof modes / sizeof modes[0] && strcmp(name, modes[m].name) != 0)
        m++;
    if (m == sizeof modes / sizeof modes[0]) {
        fprintf(stderr, "hc_wait_locks: unknown case %s\n", name);
        return 2;
    }
    if (modes[m].no_membarrier)
        refuse_membarrier();
    waited = test_context();
    test_require_hcguard(NULL);
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    REQUIRE_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventRecord(ev, waited));
    int rc = modes[m].run();
    REQUIRE_OK(cuEventDestroy(ev));
    return rc;
}
