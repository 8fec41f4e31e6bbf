/* Deaths by signal, preloaded by hand: programs that try to break
 * hcguard's stand-in for the default action (src/check/fault.c).
 *
 *   hc_sigattack signalret     signal() and sigaction() give the program its
 *                              previous action back through every change
 *                              (handler, SIG_IGN, SIG_DFL again), a bad
 *                              pointer gives EFAULT; then dies of SIGTERM
 *   hc_sigattack resethand [early][info]  an SA_RESETHAND SIGTERM handler
 *                              (installed before hcguard starts: early; an
 *                              SA_SIGINFO one: info) runs once; the program
 *                              then sees SIG_DFL, and the second SIGTERM
 *                              kills it, its events written
 *   hc_sigattack thread        SIGTERM sent to a thread other than main
 *                              while main launches host functions
 *   hc_sigattack stats         SIGINT while main is inside hcguard_get_stats
 *   hc_sigattack fork          a fork child launches 100 and is killed by
 *                              SIGTERM; the parent launches 100 and exits
 *   hc_sigattack sysv          sysv_signal(SIGTERM) is seen; SIG_DFL again dies
 *                              with the events written
 *   hc_sigattack reraise       its SIGTERM handler sets SIG_DFL and raises again
 *   hc_sigattack abort         abort() while two threads malloc and free
 *   hc_sigattack scribble      under hcguard run: writes over the file names
 *                              in its flight record, then SIGKILL
 *   hc_sigattack countcut noted|unnoted|written  under hcguard run: the
 *                              counting of the last event is undone in its
 *                              flight record, as a death inside it leaves it
 *                              (its step noted, or not yet; written: left
 *                              done), then SIGKILL
 *   hc_sigattack flood N       N host functions, then SIGTERM at once
 * Each launches 100 host functions before it dies unless said otherwise,
 * and prints "<mode>: passed" when every check it makes held. */

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "events/events.h" /* hcg_flight: the record this attack writes over */
#include "hcguard.h"
#include "testutil.h"

/* ThreadSanitizer: a fork child of a threaded process starts no thread
 * (the test driver's worker), and its interceptors come before hcguard's.
 * AddressSanitizer (gcc 12's runtime) does not take its allocator's locks
 * across fork: a thread the child starts may wait for ever on one another
 * thread of the parent held at the fork (hcguard's collector, allocating
 * as it drains: seen in 1 run of 234, every thread of the child at
 * AsanThread::Init), so there too the child starts none; the normal build
 * runs the child's launches. */
#if defined(__SANITIZE_THREAD__)
#define FORK_THREADS_OK 0
#define TSAN 1
#elif defined(__SANITIZE_ADDRESS__)
#define FORK_THREADS_OK 0
#define TSAN 0
#else
#define FORK_THREADS_OK 1
#define TSAN 0
#endif

static CUstream stream;
static test_stats_fn get_stats;
static void noop(void *p)
{
    (void)p;
}

static void launch(int n)
{
    for (int i = 0; i < n; i++)
        if (cuLaunchHostFunc(stream, noop, NULL) != CUDA_SUCCESS) {
            fprintf(stderr, "FAIL: cuLaunchHostFunc\n");
            exit(1);
        }
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS) {
        fprintf(stderr, "FAIL: cuStreamSynchronize\n");
        exit(1);
    }
}

/* Said before the scenario dies of its signal: main never regains control. */
static void passed(const char *mode)
{
    if (check_failures)
        exit(1);
    printf("%s: passed\n", mode);
    fflush(stdout);
}

/* The end of a scenario that must die of SIGTERM: living on is the failure. */
static void die_of_sigterm(void)
{
    raise(SIGTERM);
    fprintf(stderr, "FAIL: SIGTERM did not kill\n");
    exit(1);
}

static void h1(int s)
{
    (void)s;
}
static void h2(int s)
{
    (void)s;
}

static void signalret(void)
{
    launch(100);
    CHECK_MSG(signal(SIGTERM, h1) == SIG_DFL, "signal(h1) did not return SIG_DFL");
    CHECK_MSG(signal(SIGTERM, h2) == h1, "signal(h2) did not return h1");
    CHECK_MSG(signal(SIGTERM, SIG_IGN) == h2, "signal(SIG_IGN) did not return h2");
    raise(SIGTERM); /* ignored */
    CHECK_MSG(signal(SIGTERM, SIG_DFL) == SIG_IGN, "signal(SIG_DFL) did not return SIG_IGN");
    CHECK_MSG(signal(SIGTERM, SIG_DFL) == SIG_DFL, "signal(SIG_DFL) twice: not SIG_DFL");
    errno = 0;
    if (!TSAN) /* ThreadSanitizer's own signal() takes SIG_ERR as a handler */
        CHECK_MSG(signal(SIGTERM, SIG_ERR) == SIG_ERR && errno == EINVAL,
               "signal(SIG_ERR): not EINVAL");
    struct sigaction *bad = (struct sigaction *)NEVER_MAPPED;
    errno = 0; /* ThreadSanitizer's sigaction reads act itself, before hcguard */
    CHECK_MSG(TSAN || (sigaction(SIGTERM, bad, NULL) == -1 && errno == EFAULT),
           "bad act: not EFAULT");
    errno = 0;
    CHECK_MSG(TSAN || (sigaction(SIGINT, NULL, bad) == -1 && errno == EFAULT),
           "bad oldact: not EFAULT");
    struct sigaction now;
    CHECK_MSG(sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == SIG_DFL,
           "SIGTERM not shown as SIG_DFL");
    CHECK_MSG(sigaction(SIGINT, NULL, &now) == 0 && now.sa_handler == SIG_DFL,
           "SIGINT not shown as SIG_DFL after the bad oldact");
    passed("signalret");
    die_of_sigterm();
}

static atomic_int reset_ran;

static void once(int s)
{
    (void)s;
    atomic_fetch_add(&reset_ran, 1);
}

static void once_info(int s, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    once(s);
}

/* early: installed before hcguard starts; info: an SA_SIGINFO handler. */
static void resethand(int early, int info)
{
    struct sigaction a, now;
    memset(&a, 0, sizeof a);
    if (info)
        a.sa_sigaction = once_info;
    else
        a.sa_handler = once;
    a.sa_flags = SA_RESETHAND | (info ? SA_SIGINFO : 0);
    if (!early)
        launch(1); /* hcguard has started: it watches deaths */
    CHECK_MSG(sigaction(SIGTERM, &a, NULL) == 0, "sigaction");
    if (early)
        launch(1);
    CHECK_MSG(sigaction(SIGTERM, NULL, &now) == 0 && now.sa_sigaction == a.sa_sigaction &&
               (now.sa_flags & SA_RESETHAND),
           "the program does not see its own SA_RESETHAND handler");
    raise(SIGTERM);
    CHECK_MSG(atomic_load(&reset_ran) == 1, "the SA_RESETHAND handler did not run once");
    CHECK_MSG(sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == SIG_DFL,
           "after SA_RESETHAND the program does not see SIG_DFL");
    passed("resethand");
    launch(100);
    die_of_sigterm();
}

static atomic_int side_ready;

static void *side(void *p)
{
    (void)p;
    atomic_store(&side_ready, (int)syscall(SYS_gettid));
    for (;;)
        pause();
    return NULL;
}

/* Main launches; the side thread, which launches nothing, takes SIGTERM. */
static void thread_term(void)
{
    pthread_t t;
    pthread_create(&t, NULL, side, NULL);
    while (!atomic_load(&side_ready))
        sched_yield();
    launch(100);
    passed("thread");
    syscall(SYS_tgkill, getpid(), atomic_load(&side_ready), SIGTERM);
    for (;;)
        launch(1); /* host functions go on until the process dies */
}

static volatile sig_atomic_t ints;

static void *interrupter(void *p)
{
    pid_t pid = getpid();
    (void)p;
    for (;;) {
        syscall(SYS_tgkill, pid, pid, SIGINT);
        usleep(1000);
    }
    return NULL;
}

/* SIGINT lands on main wherever it is, hcguard_get_stats (which drains)
 * included: the process dies of it, and the log holds every event. */
static void stats_int(void)
{
    launch(100);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s, NULL); /* the thread made below inherits it */
    pthread_t t;
    pthread_create(&t, NULL, interrupter, NULL);
    passed("stats");
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    for (;;) {
        hcguard_stats st;
        get_stats(&st, sizeof st);
    }
}

static void fork_term(void)
{
    launch(100);
    pid_t pid = fork();
    if (pid == 0) {
        if (!FORK_THREADS_OK)
            printf("expect-runs: 200\n"); /* only the parent's */
        fflush(stdout);
        if (FORK_THREADS_OK)
            launch(100);
        raise(SIGTERM);
        _exit(3);
    }
    int st = 0;
    CHECK_MSG(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
           "the fork child did not die of SIGTERM (status %#x)", st);
    launch(100);
    passed("fork");
}

/* sysv_signal does not pass through sigaction: the program must still see
 * what it set, and get hcguard's stand-in back by setting SIG_DFL. */
static void sysv(void)
{
    struct sigaction now;
    launch(1);
    sysv_signal(SIGTERM, h1);
    CHECK_MSG(sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == h1,
           "after sysv_signal the program does not see its handler");
    CHECK_MSG(signal(SIGTERM, SIG_DFL) == h1, "signal(SIG_DFL) did not return the sysv handler");
    launch(100);
    passed("sysv");
    die_of_sigterm();
}

/* The common cleanup pattern: the program's handler puts the default back
 * and raises the signal again, to die of it. */
static void cleanup_reraise(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

static void reraise(void)
{
    launch(1);
    CHECK_MSG(signal(SIGTERM, cleanup_reraise) == SIG_DFL, "signal did not return SIG_DFL");
    launch(100);
    passed("reraise");
    die_of_sigterm();
}

static void *churn(void *p)
{
    (void)p;
    for (;;)
        free(malloc(1 + (size_t)rand() % 4096));
    return NULL;
}

/* abort() while another thread is inside malloc all the time. */
static void abort_malloc(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    launch(100);
    passed("abort");
    abort();
}

/* Under hcguard run: the program writes over the file names in its own
 * flight record (a stray write would), with no terminating zero, and is
 * killed; hcguard run must not read them on past their fields. */
/* This process's flight record (its header mapped, the file in *fd), or
 * exit 1 said: not under hcguard run. */
static hcg_flight *own_flight(int *fd)
{
    const char *path = getenv("HCGUARD_FLIGHT");
    *fd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
    hcg_flight *f = *fd >= 0 ? mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0)
                             : MAP_FAILED;
    if (f == MAP_FAILED) {
        fprintf(stderr, "FAIL: no flight record (run this under hcguard run)\n");
        exit(1);
    }
    return f;
}

static void scribble(void)
{
    launch(100);
    int fd;
    hcg_flight *f = own_flight(&fd);
    memset(f->log_path, 'A', sizeof f->log_path);
    memset(f->trace_path, 'B', sizeof f->trace_path);
    memset(f->report_path, 'C', sizeof f->report_path);
    passed("scribble");
    raise(SIGKILL);
}

/* Under hcguard run: the program writes over the head of its first ring
 * and its size (a power of two whose events' bytes wrap to nothing, so
 * that it looks like one that fits), and is killed; hcguard run must read
 * no event outside the ring's memory, and still print the summary. */
static void scribble_ring(void)
{
    launch(100);
    int fd;
    hcg_flight *f = own_flight(&fd);
    uint64_t ring[4]; /* head, tail_seen, check_at, cap: a ring's first fields */
    REQUIRE(pread(fd, ring, sizeof ring, (off_t)f->rings_off) == (ssize_t)sizeof ring);
    unsigned shift = 0;
    while (((uint64_t)1 << shift) < sizeof(hcg_event))
        shift++;
    ring[0] = (uint64_t)1 << 40;
    ring[3] = (uint64_t)1 << (64 - shift);
    REQUIRE(pwrite(fd, ring, sizeof ring, (off_t)f->rings_off) == (ssize_t)sizeof ring);
    passed("scribble-ring");
    raise(SIGKILL);
}

/* Under hcguard run: the program is killed as its callback thread has
 * published the event of the 100th run and not yet counted it (the
 * counter's step noted, or not yet noted): its flight record is made to
 * look so, and hcguard run must count that run once (100 ran, not 99);
 * killed just after the counting (written), not twice (not 101).
 * A ring's first fields, as src/events/events.c lays them out: head,
 * tail_seen, check_at, cap, dropped, step_mark, step_old; its counters
 * from byte 64. The layout is checked against what 100 runs left first. */
enum { R_HEAD, R_CAP = 3, R_MARK = 5, R_OLD, R_CNT = 8 };

static void countcut(const char *how)
{
    launch(100);
    int fd;
    hcg_flight *f = own_flight(&fd);
    uint64_t r[R_CNT + HCG_CNT_N];
    off_t at = -1;
    for (uint32_t i = 0; i < atomic_load(&f->n_rings) && at < 0; i++) {
        off_t o = (off_t)(f->rings_off + (uint64_t)i * f->ring_bytes);
        REQUIRE(pread(fd, r, sizeof r, o) == (ssize_t)sizeof r);
        if (r[R_HEAD] == 100)
            at = o;
    }
    REQUIRE(at >= 0); /* the callback thread's ring holds the 100 runs */
    uint64_t *ran = &r[R_CNT + HCG_CNT_RAN + HCG_FN_ORDINARY];
    REQUIRE(r[R_CAP] >= 128 && !(r[R_CAP] & (r[R_CAP] - 1)));
    REQUIRE(*ran == 100 && r[R_MARK] == 100 << 2 && r[R_OLD] == 99);
    if (strcmp(how, "written"))
        *ran = 99;                /* the counter not yet written */
    if (!strcmp(how, "unnoted")) { /* nor its step noted: the last note the 99th's */
        r[R_MARK] = 99 << 2;
        r[R_OLD] = 98;
    }
    REQUIRE(pwrite(fd, r, sizeof r, at) == (ssize_t)sizeof r);
    passed("countcut");
    raise(SIGKILL);
}

static void s_countcut(int argc, char **argv)
{
    (void)argc;
    countcut(argv[0]);
}

static void flood(long n)
{
    for (long i = 0; i < n; i++)
        if (cuLaunchHostFunc(stream, noop, NULL) != CUDA_SUCCESS)
            exit(1);
    /* Every host function has run (the driver's queue is not the attack:
     * a process killed with launches still queued never runs them); their
     * events may still wait in the rings, which the signal must write. */
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS)
        exit(1);
    passed("flood");
    die_of_sigterm();
}

static void preloaded(void)
{
    stream = test_context();
    get_stats = test_require_hcguard(NULL);
}

/* resethand [early][info] */
static void s_resethand(int argc, char **argv)
{
    resethand(argc > 0 && strstr(argv[0], "early") != NULL,
              argc > 0 && strstr(argv[0], "info") != NULL);
}

static void s_flood(int argc, char **argv)
{
    (void)argc;
    flood(atol(argv[0]));
}

/* Each scenario says "NAME: passed" and then dies of its signal (one
 * that does not says FAIL and exits 1), but fork, which comes back. */
static const check_scenario scenarios[] = {
    CHECK_SCENARIO("signalret", signalret),
    CHECK_SCENARIO_ARGS("resethand", s_resethand, 0, 1, "[early|info|early-info]"),
    CHECK_SCENARIO("thread", thread_term),
    CHECK_SCENARIO("stats", stats_int),
    CHECK_SCENARIO("fork", fork_term),
    CHECK_SCENARIO("reraise", reraise),
    CHECK_SCENARIO("abort", abort_malloc),
    CHECK_SCENARIO("sysv", sysv),
    CHECK_SCENARIO("scribble", scribble),
    CHECK_SCENARIO("scribble-ring", scribble_ring),
    CHECK_SCENARIO_ARGS("countcut", s_countcut, 1, 1, "noted|unnoted|written"),
    CHECK_SCENARIO_ARGS("flood", s_flood, 1, 1, "N"),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_sigattack", "%s", CHECK_CASES(scenarios), argc, argv,
                               preloaded, NULL);
}
