/*
 * A process that forks after hcguard has started, as Python's
 * multiprocessing and data-loader workers do: each child reports only what
 * it did itself, and one that did nothing hcguard watches says nothing.
 *
 *   hc_fork quiet   the parent launches host functions (one with a bad
 *                   record), forks a child that exits at once and one that
 *                   exits 3, and launches more; each child's stderr must
 *                   stay empty and its exit status its own
 *   hc_fork busy    the same, and a child that passes memcpy as a host
 *                   function: its summary has that finding, none of the
 *                   parent's work
 *   hc_fork hang    the same as quiet, then a child that never ends: the
 *                   watchdog (HC_FORK_WATCHDOG_S seconds, 90 if unset)
 *                   must say so, dump every thread of both, and exit 124
 *   hc_fork first   hcguard's first work (a context, a bad launch) done
 *                   by another thread while the main thread is inside
 *                   fork(), in a prepare handler of the program's: the
 *                   child, which does nothing, must say nothing
 *   hc_fork pools   under hcguard run: pools a fork child takes start
 *                   empty, whatever its parent took since (below)
 *   hc_fork closefrom  under hcguard run: closefrom(3), a data file, then a
 *                   fork child launches 10 (below)
 *   hc_fork prestart [exec]
 *                   forks before hcguard starts in the parent, into one
 *                   log (below; check_fork_family.py)
 *   hc_fork refork  a started parent's child forks again: the parent's
 *                   files stay whole (check_fork_family.py)
 *   hc_fork started-exec | started-spawn
 *                   a started process execs itself, or spawns itself;
 *                   the new image forks a worker before it launches: all
 *                   of them append to its log (check_fork_family.py)
 *   hc_fork overlap forks before hcguard starts in the parent; the children
 *                   launch, all of them at work at the same time, into one
 *                   trace named without %p (below; check_trace_shared.py)
 *   hc_fork die-holding PATH
 *                   under hcguard run --trace PATH: launches, leaves a
 *                   child holding the trace's lock, and dies of SIGKILL
 *                   (below; check_trace_shared.py)
 *   hc_fork die     10 host functions, then death by SIGKILL
 *                   (check_trace_shared.py)
 *   hc_fork vfork | _Fork [exit]
 *                   10 host functions, then a child by vfork or _Fork,
 *                   which execs hc_fork spawned (5 host functions of its
 *                   own) or (_Fork's, exit) calls exit; then 5000 more:
 *                   none of the parent's events dropped, all counted
 *
 * Exit 0 passed, 1 failed, 77 not applicable (no device).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"
#include "../common/stderr_redirect.h"

#ifndef HC_FORK_WATCHDOG_S
#define HC_FORK_WATCHDOG_S 90
#endif

static atomic_int runs;
static void ordinary(void *p)
{
    (void)p;
    atomic_fetch_add(&runs, 1);
}

/* Fork a child that runs body, if any, then exits with status; its stderr
 * into out. */
static void child(int status, void (*body)(void), char *out, size_t len)
{
    int fd[2];
    if (pipe(fd) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        hcg_test_redirect_stderr(fd[1]);
        close(fd[0]);
        if (body)
            body();
        exit(status); /* destructors run: hcguard's exit path too */
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(fd[0], out + n, len - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd[0]);
    int st = 0;
    CHECK_MSG(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == status, "child exit status %d, want %d",
          WIFEXITED(st) ? WEXITSTATUS(st) : -1, status);
}

/* hcguard's lines only: a sanitizer runtime may say its own at exit. */
static void child_says_nothing(int status)
{
    char buf[4096];
    child(status, NULL, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "==hcguard==") == NULL, "a child that did nothing said: %s", buf);
}

static CUstream stream;

/* Refused before the driver is asked: a child can do it. */
static void launch_memcpy(void)
{
    CUresult r = cuLaunchHostFunc(stream, (CUhostFn)(void *)memcpy, NULL);
    if (r != CUDA_ERROR_INVALID_VALUE)
        fprintf(stderr, "memcpy as a host function: %d\n", (int)r);
}

static void hang_forever(void)
{
    for (;;)
        pause();
}

static void child_reports_its_own(void)
{
    char buf[16384];
    child(0, launch_memcpy, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "libc-function-as-host-fn") != NULL, "the child's finding: %s", buf);
    CHECK_MSG(strstr(buf, "errors: 1\n") != NULL, "one finding in the child's summary: %s",
          buf);
    CHECK_MSG(strstr(buf, "==hcguard== [pid ") != NULL, "no pid in the child's prefix: %s", buf);
    CHECK_MSG(strstr(buf, "host functions: 0 launched, 0 ran") != NULL,
          "the parent's work in the child's summary: %s", buf);
    CHECK_MSG(strstr(buf, "bad records rejected at enqueue") == NULL,
          "the parent's rejection in the child's summary: %s", buf);
    CHECK_MSG(strstr(buf, "memcpy as a host function:") == NULL, "not refused: %s", buf);
    /* What the child said, for the test's own expectations. */
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        fprintf(stderr, "child: %s\n", line);
}

enum { QUIET, BUSY, HANG };

/* The parent launches, forks children that do nothing or (BUSY) launch
 * on their own or (HANG) never end, and launches again. */
static void parent(int what)
{
    CUstream s = stream = test_context();
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (!copy) {
        fprintf(stderr, "SKIP: hcguard is not preloaded\n");
        exit(77);
    }
    static unsigned char a[64], b[64];
    hcguard_copy_record good = {(uintptr_t)a, (uintptr_t)b, sizeof a};
    hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), sizeof a}; /* overlap */
    for (int i = 0; i < 5; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuLaunchHostFunc(s, copy, &good));
    CHECK_MSG(cuLaunchHostFunc(s, copy, &bad) == CUDA_ERROR_INVALID_VALUE, "bad record refused");
    REQUIRE_OK(cuStreamSynchronize(s));
    child_says_nothing(0);
    child_says_nothing(3);
    if (what == BUSY)
        child_reports_its_own();
    if (what == HANG) { /* the watchdog must report this */
        char buf[64];
        child(0, hang_forever, buf, sizeof buf);
    }
    for (int i = 0; i < 5; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_MSG(atomic_load(&runs) == 10, "ordinary ran %d times", atomic_load(&runs));
}

static void quiet(void)
{
    parent(QUIET);
}

static void busy(void)
{
    parent(BUSY);
}

static void hang(void)
{
    parent(HANG);
}

/* ---- pools taken after a fork -----------------------------------------------
 * hc_fork pools: under hcguard run (a flight record), the parent forks a
 * child, then launches from 32 new threads (32 new pools, written into the
 * record); the child, once they are done, launches one host function from
 * each of 32 new threads of its own. Its pools must start empty: before,
 * the child took over the parent's free lists (calls it does not have) and
 * died of SIGSEGV, or counted the parent's launches as its own. */
#define POOL_THREADS 32
static unsigned pool_each;

static void *pool_launcher(void *arg)
{
    REQUIRE_OK(cuCtxSetCurrent((CUcontext)arg));
    for (unsigned i = 0; i < pool_each; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, ordinary, NULL));
    return NULL;
}

static void launch_from_threads(unsigned each)
{
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    pool_each = each;
    pthread_t t[POOL_THREADS];
    for (int i = 0; i < POOL_THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, pool_launcher, ctx) == 0);
    for (int i = 0; i < POOL_THREADS; i++)
        pthread_join(t[i], NULL);
    REQUIRE_OK(cuStreamSynchronize(stream));
}

static void pools(void)
{
    test_stats_fn get = test_require_hcguard(NULL);
    stream = test_context();
    REQUIRE_OK(cuLaunchHostFunc(stream, ordinary, NULL)); /* hcguard started */
    REQUIRE_OK(cuStreamSynchronize(stream));
    int go[2];
    REQUIRE(pipe(go) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        REQUIRE_OK(cuStreamCreate(&stream, 0)); /* the test driver's child: its own */
        atomic_store(&runs, 0);
        launch_from_threads(1);
        hcguard_stats s = test_stats(get);
        int ok = atomic_load(&runs) == POOL_THREADS && s.host_fns_launched == POOL_THREADS &&
                 s.host_fns_ran == POOL_THREADS;
        if (!ok)
            fprintf(stderr, "child: %d ran; hcguard counted %llu launched, %llu ran (want %d)\n",
                    atomic_load(&runs), (unsigned long long)s.host_fns_launched,
                    (unsigned long long)s.host_fns_ran, POOL_THREADS);
        exit(ok ? 0 : 1);
    }
    close(go[0]);
    launch_from_threads(200);
    REQUIRE(write(go[1], "g", 1) == 1);
    close(go[1]);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status 0x%x", st);
    hcguard_stats s = test_stats(get);
    CHECK_MSG(s.host_fns_launched == 1 + POOL_THREADS * 200, "parent: %llu launched",
              (unsigned long long)s.host_fns_launched);
}

/* ---- a fork after closefrom ----------------------------------------------
 * hc_fork closefrom: under hcguard run, the program closes every descriptor
 * above 2 (as a daemon does) and opens 8 data files of its own at the
 * lowest numbers, then forks; the child launches 10 host functions. The
 * child's hcguard makes its copy of the flight record without the record's
 * descriptor, never from the program's file: before, it mapped whatever
 * the number was (the data file, read as a record) or died with status 125
 * when it was closed. */
static void s_closefrom(void)
{
    test_stats_fn get = test_require_hcguard(NULL);
    stream = test_context();
    REQUIRE_OK(cuLaunchHostFunc(stream, ordinary, NULL)); /* hcguard started */
    REQUIRE_OK(cuStreamSynchronize(stream));
    closefrom(3);
    char data[8][32];
    int fd[8];
    for (int i = 0; i < 8; i++) { /* the numbers hcguard's files had */
        snprintf(data[i], sizeof data[i], "/tmp/hc_fork_dataXXXXXX");
        fd[i] = mkstemp(data[i]);
        REQUIRE(fd[i] >= 0 && write(fd[i], "PROGRAM DATA", 12) == 12);
    }
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        REQUIRE_OK(cuStreamCreate(&stream, 0)); /* the test driver's child: its own */
        atomic_store(&runs, 0);
        for (int i = 0; i < 10; i++)
            REQUIRE_OK(cuLaunchHostFunc(stream, ordinary, NULL));
        REQUIRE_OK(cuStreamSynchronize(stream));
        hcguard_stats s = test_stats(get);
        int ok = atomic_load(&runs) == 10 && s.host_fns_launched == 10 && s.host_fns_ran == 10;
        if (!ok)
            fprintf(stderr, "child: %d ran; hcguard counted %llu launched, %llu ran (want 10)\n",
                    atomic_load(&runs), (unsigned long long)s.host_fns_launched,
                    (unsigned long long)s.host_fns_ran);
        exit(ok ? 0 : 1);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status 0x%x", st);
    for (int i = 0; i < 5; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    for (int i = 0; i < 8; i++) {
        char back[32] = {0};
        CHECK(pread(fd[i], back, sizeof back - 1, 0) == 12 && strcmp(back, "PROGRAM DATA") == 0);
        close(fd[i]);
        unlink(data[i]);
    }
}

/* ---- hcguard's first work while the program forks ------------------------
 * The program's prepare handler runs inside fork(), before the child is
 * made: there another thread does the process's first CUDA work, and
 * hcguard registers its fork handler while the fork is under way (glibc
 * does not run such a handler for that fork). The child must still start
 * afresh: it did nothing, so it says nothing (not the parent's finding). */
static atomic_int first_go, first_done, first_gave_up, first_forked;

static void *first_work(void *arg)
{
    (void)arg;
    while (!atomic_load(&first_go))
        usleep(1000);
    stream = test_context();
    launch_memcpy(); /* hcguard starts: a finding of the parent's */
    atomic_store(&first_done, 1);
    while (!atomic_load(&first_forked)) /* idle at the fork, not exiting */
        usleep(1000);
    return NULL;
}

/* A C library that holds its fork lock across the prepare handlers makes
 * pthread_atfork wait for the fork: then the first work cannot happen in
 * it (nor can the registration race it), and the case does not apply. */
static void hold_fork(void)
{
    if (atomic_exchange(&first_go, 1))
        return; /* only the first fork */
    for (int i = 0; i < 5000 && !atomic_load(&first_done); i++)
        usleep(1000);
    atomic_store(&first_gave_up, !atomic_load(&first_done));
}

static void first(void)
{
    pthread_t t;
    if (!dlsym(RTLD_DEFAULT, "hcguard_host_copy")) { /* not a driver name: no CUDA work */
        fprintf(stderr, "SKIP: hcguard is not preloaded\n");
        exit(77);
    }
    REQUIRE(pthread_atfork(hold_fork, NULL, NULL) == 0);
    REQUIRE(pthread_create(&t, NULL, first_work, NULL) == 0);
    child_says_nothing(0);
    atomic_store(&first_forked, 1);
    REQUIRE(pthread_join(t, NULL) == 0);
    if (atomic_load(&first_gave_up)) {
        printf("SKIP: this C library's fork holds pthread_atfork up\n");
        exit(77);
    }
}

/* ---- children made without fork's handlers ------------------------------
 * vfork's child shares the parent's memory until it execs; _Fork's copies
 * it but runs no fork handler. Either finds hcguard's state its parent's,
 * and must leave it alone: exec'd, the new image writes its own events
 * (to the shared log, to no trace of its own) and its own summary; and the
 * parent keeps its collector (the launches after it lose no event with a
 * small buffer), its trace whole and its summary. A _Fork child that calls
 * exit instead must end, saying nothing. */
#define AFTER_CHILD 5000

static void spawned(void) /* the exec'd image */
{
    CUstream s = test_context();
    for (int i = 0; i < 5; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
}

static pid_t (*fork_fn(const char *how))(void)
{
    pid_t (*f)(void) = (pid_t(*)(void))dlsym(RTLD_DEFAULT, how);
    if (!f) {
        printf("SKIP: this C library has no %s\n", how);
        exit(77);
    }
    return f;
}

static void unhandled(const char *how, int argc, char **argv)
{
    int do_exec = argc < 1 || strcmp(argv[0], "exit") != 0;
    test_stats_fn get = test_require_hcguard(NULL);
    CUstream s = test_context();
    for (int i = 0; i < 10; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    self[n] = 0;
    char *args[] = {self, "spawned", NULL};
    fflush(NULL);
    pid_t pid = fork_fn(how)();
    if (pid == 0) {
        if (do_exec)
            execv(self, args);
        else
            exit(0); /* hcguard's destructor, in a child that is not its process */
        _exit(127);
    }
    REQUIRE(pid > 0);
    int st = 0;
    CHECK_MSG(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the child ended with status %d", st);
    for (int i = 0; i < AFTER_CHILD; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
    hcguard_stats now = test_stats(get);
    CHECK_MSG(now.events_dropped == 0, "%llu events dropped after the child",
              (unsigned long long)now.events_dropped);
    CHECK_MSG(now.host_fns_ran == 10 + AFTER_CHILD, "%llu ran",
              (unsigned long long)now.host_fns_ran);
}

/* _Fork reject: one rejection here, three in a child of _Fork (refused
 * before the driver is asked), which then _exits; the program's counts
 * are its own: one rejection. */
static void reject_in(CUstream s, int n)
{
    static unsigned char a[64];
    hcguard_copy_record bad = {(uintptr_t)a, (uintptr_t)(a + 8), sizeof a}; /* overlap */
    CUhostFn copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    for (int i = 0; i < n; i++)
        CHECK_MSG(cuLaunchHostFunc(s, copy, &bad) == CUDA_ERROR_INVALID_VALUE, "bad record");
}

static void fork_rejects(void)
{
    test_stats_fn get = test_require_hcguard(NULL);
    CUstream s = test_context();
    reject_in(s, 1);
    fflush(NULL);
    pid_t pid = fork_fn("_Fork")();
    if (pid == 0) {
        reject_in(s, 3);
        _exit(0);
    }
    REQUIRE(pid > 0);
    int st = 0;
    CHECK_MSG(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the child ended with status %d", st);
    hcguard_stats now = test_stats(get);
    CHECK_MSG(now.rejected == 1, "%llu rejections counted, want 1 (the child's are not "
              "this process's)", (unsigned long long)now.rejected);
}

/* _Fork execl: a child of _Fork execs with execl (which needs no malloc)
 * while another thread of the parent allocates all the time: its lock,
 * held at the _Fork, stays held in the child, whose exec must not wait for
 * it. 200 children, each given 5 s. */
static atomic_int churn_stop;

static void *churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_stop)) {
        void *volatile p = malloc(4000);
        free(p);
    }
    return NULL;
}

static void fork_execl(void)
{
    test_require_hcguard(NULL);
    CUstream s = test_context();
    REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL)); /* hcguard started */
    REQUIRE_OK(cuStreamSynchronize(s));
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, churn, NULL) == 0);
    pid_t (*f)(void) = fork_fn("_Fork");
    int hung = 0;
    for (int i = 0; i < 200 && !hung; i++) {
        pid_t pid = f();
        if (pid == 0) {
            signal(SIGALRM, SIG_DFL); /* not the watchdog's: this child dies of it */
            alarm(5);
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        REQUIRE(pid > 0);
        int st = 0;
        REQUIRE(waitpid(pid, &st, 0) == pid);
        hung = WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM;
        CHECK_MSG(hung || (WIFEXITED(st) && WEXITSTATUS(st) == 0), "child %d: status %d", i, st);
    }
    atomic_store(&churn_stop, 1);
    pthread_join(t, NULL);
    CHECK_MSG(!hung, "a child of _Fork hung in execl");
}

static void s_vfork(void)
{
    unhandled("vfork", 0, NULL); /* its child may only exec or _exit */
}

static void s_Fork(int argc, char **argv)
{
    if (argc > 0 && !strcmp(argv[0], "execl")) {
        fork_execl();
        return;
    }
    if (argc > 0 && !strcmp(argv[0], "reject")) {
        fork_rejects();
        return;
    }
    unhandled("_Fork", argc, argv);
}

/* hc_fork takes about a second, under a sanitizer a few: a hang (seen once
 * in CI, never reproduced) is reported with every thread's state long
 * before the test's timeout. */
static void watchdog(void)
{
    const char *wd = getenv("HC_FORK_WATCHDOG_S"); /* the watchdog's own test */
    test_watchdog(wd ? (unsigned)atoi(wd) : HC_FORK_WATCHDOG_S);
}

/* ---- prestart -----------------------------------------------------------
 * Forks before hcguard starts in the parent (no CUDA call yet): the
 * children, and the parent after them, launch host functions into one log
 * named without %p. Each child (or, with "exec", the image
 * it execs: hc_fork prestart-child) launches PRESTART_CHILD; the parent
 * PRESTART_PARENT once every child has exited. check_fork_family.py holds
 * the log to it: every run in it, none of an earlier run's. */
#define PRESTART_CHILDREN 4
#define PRESTART_CHILD 500
#define PRESTART_PARENT 300

static void launch_ordinary(int n)
{
    CUstream s = test_context();
    for (int i = 0; i < n; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
}

static void prestart_child(void)
{
    launch_ordinary(PRESTART_CHILD);
}

static void prestart(int argc, char **argv)
{
    int do_exec = argc > 0 && !strcmp(argv[0], "exec");
    pid_t kids[PRESTART_CHILDREN];
    for (int i = 0; i < PRESTART_CHILDREN; i++) {
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) {
            if (do_exec) {
                execl("/proc/self/exe", "hc_fork", "prestart-child", (char *)NULL);
                _exit(126);
            }
            prestart_child();
            exit(0);
        }
    }
    for (int i = 0; i < PRESTART_CHILDREN; i++) {
        int st = 0;
        REQUIRE(waitpid(kids[i], &st, 0) == kids[i]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", i, st);
    }
    launch_ordinary(PRESTART_PARENT);
}

/* ---- overlap ------------------------------------------------------------
 * OVERLAP_CHILDREN children forked before hcguard starts anywhere: each
 * launches OVERLAP_RUNS (hcguard starts in it and opens its files), says
 * so on a pipe, waits until every child has, then launches OVERLAP_RUNS
 * more. So all of them have their files open at once. The parent launches
 * nothing. */
#define OVERLAP_CHILDREN 4
#define OVERLAP_RUNS 20

static void overlap_child(int up, int go)
{
    char c;
    launch_ordinary(OVERLAP_RUNS);
    REQUIRE(write(up, "x", 1) == 1);
    REQUIRE(read(go, &c, 1) == 0); /* the parent closed it: every child is at work */
    launch_ordinary(OVERLAP_RUNS);
}

static void overlap(void)
{
    int up[2], go[2];
    REQUIRE(pipe(up) == 0 && pipe(go) == 0);
    pid_t kids[OVERLAP_CHILDREN];
    for (int i = 0; i < OVERLAP_CHILDREN; i++) {
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) {
            close(up[0]);
            close(go[1]);
            overlap_child(up[1], go[0]);
            exit(0);
        }
    }
    close(up[1]);
    close(go[0]);
    char c;
    for (int i = 0; i < OVERLAP_CHILDREN; i++) /* 0: a child died first */
        REQUIRE(read(up[0], &c, 1) == 1);
    close(go[1]);
    for (int i = 0; i < OVERLAP_CHILDREN; i++) {
        int st = 0;
        REQUIRE(waitpid(kids[i], &st, 0) == kids[i]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", i, st);
    }
}

/* Under hcguard run --trace PATH: 10 host functions, then a child given a
 * descriptor of hcguard's open trace (a dup: the same open file, whose
 * lock then outlives this process; hcguard's own descriptor is closed in
 * the child), and death by SIGKILL with events not written yet. hcguard
 * run, writing the program's last events, finds the trace held by another
 * process (the child, for 3 s): it must write none there. */
static void die_holding(int argc, char **argv)
{
    REQUIRE(argc == 1);
    char want[4096], link[64], got[4096];
    launch_ordinary(10); /* the trace is open from here */
    REQUIRE(realpath(argv[0], want) != NULL);
    int held = -1;
    for (int fd = 3; fd < 1024 && held < 0; fd++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, got, sizeof got - 1);
        if (n > 0 && (got[n] = '\0', strcmp(got, want) == 0))
            held = dup(fd);
    }
    REQUIRE(held >= 0);
    pid_t c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        sleep(3);
        _exit(0);
    }
    CUstream s = test_context();
    for (int i = 0; i < 10; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(s));
    kill(getpid(), SIGKILL);
}

static void die_now(void)
{
    launch_ordinary(10);
    kill(getpid(), SIGKILL);
}

/* A process that started forks a child, which forks again before either
 * launches: their files are the parent's (a fork child's), and neither
 * may start them anew; then the parent launches more. */
static void refork(void)
{
    launch_ordinary(5);
    pid_t c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        pid_t g = fork();
        if (g == 0)
            _exit(0);
        int st = 0;
        _exit(g > 0 && waitpid(g, &st, 0) == g && WIFEXITED(st) ? 0 : 1);
    }
    int st = 0;
    REQUIRE(waitpid(c, &st, 0) == c);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %d", st);
    launch_ordinary(6);
}

/* A process that started passes its log on: the next image of it, and a
 * process it spawns, append to it, and so do their fork children, though
 * they fork before they launch (no tree of their own: they never start
 * the log anew). */
static void fork_worker(int n)
{
    pid_t w = fork();
    REQUIRE(w >= 0);
    if (w == 0) {
        launch_ordinary(n);
        exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(w, &st, 0) == w);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker: status %d", st);
}

static void started_exec(void)
{
    launch_ordinary(3);
    execl("/proc/self/exe", "hc_fork", "started-exec-2", (char *)NULL);
    CHECK_MSG(0, "exec: %s", strerror(errno));
}

static void started_exec_2(void)
{
    fork_worker(2);
    launch_ordinary(1);
}

static void started_spawn(void)
{
    extern char **environ;
    launch_ordinary(3);
    pid_t d;
    char *argv[] = {"hc_fork", "started-spawn-2", NULL};
    REQUIRE(posix_spawn(&d, "/proc/self/exe", NULL, NULL, argv, environ) == 0);
    int st = 0;
    REQUIRE(waitpid(d, &st, 0) == d);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "spawned: status %d", st);
    launch_ordinary(4);
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO_ARGS("prestart", prestart, 0, 1, "[exec]"),
    CHECK_SCENARIO("started-exec", started_exec),
    CHECK_SCENARIO("started-exec-2", started_exec_2),
    CHECK_SCENARIO("started-spawn", started_spawn),
    CHECK_SCENARIO("started-spawn-2", started_exec_2),
    CHECK_SCENARIO("refork", refork),
    CHECK_SCENARIO("overlap", overlap),
    CHECK_SCENARIO("die", die_now),
    CHECK_SCENARIO_ARGS("die-holding", die_holding, 1, 1, "PATH"),
    CHECK_SCENARIO("prestart-child", prestart_child),
    CHECK_SCENARIO("quiet", quiet),
    CHECK_SCENARIO("busy", busy),
    CHECK_SCENARIO("hang", hang),
    CHECK_SCENARIO("first", first),
    CHECK_SCENARIO("pools", pools),
    CHECK_SCENARIO("closefrom", s_closefrom),
    CHECK_SCENARIO("vfork", s_vfork),
    CHECK_SCENARIO_ARGS("_Fork", s_Fork, 0, 1, "[exit|reject|execl]"),
    CHECK_SCENARIO("spawned", spawned),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_fork", "fork", CHECK_CASES(scenarios), argc, argv, watchdog,
                               NULL);
}
