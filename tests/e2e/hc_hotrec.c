/*
 * The launch's shortcut for a copy record under attack: a record this
 * thread found good at its last launch, unchanged, is checked by one
 * fault-contained read and a compare with that verdict. Each attack makes
 * the record hot (launched good twice), then changes what the verdict was
 * about between two launches, and the next launch must be checked again:
 *
 *   changed    the record rewritten (overlap, then a bad source)
 *   unmapped   its destination unmapped through libc (the generation moves)
 *   protected  its destination made read-only through libc's pkey_mprotect
 *              (key -1: mprotect by another name; the generation moves)
 *   unreadable the record's own page made unreadable past libc (a system
 *              call: the generation does not move): the contained read
 *              faults, the launch is refused, the process goes on
 *   past-libc  its destination unmapped past libc: refused at enqueue if
 *              the verdict expired, else skipped when run (copy-faulted);
 *              never written, never a crash
 *   expired    its destination made inaccessible past libc, then the
 *              thread sleeps past the verdict's 100 ms:
 *              its next launch must be checked in full and refused, though
 *              it is one of the launches that reuse the thread's last time
 *              stamp (1 in 16 takes one) were the clock's epoch ignored
 *   threads    another thread rewrites it bad, launches it, mends it with
 *              other contents, unmaps a buffer: this thread's verdict is
 *              not taken for what changed
 *
 *   hc_hotrec guard|audit   (HCGUARD_MODE must say the same)
 * Prints "hotrec MODE: passed"; exit 0.
 *
 *   hc_hotrec blocked       (guard) expired, with hcguard's collector held
 *              up: its messages go to a pipe that is full (the program runs
 *              itself again with such a stderr, as "blocked-run"), and its
 *              message about a slow host function blocks it in write; the
 *              verdict slept past its 100 ms must still be checked in full
 *   hc_hotrec fork|exec     (guard) expired, across a fork (the child's
 *              launch) or an exec that failed (the collector stopped and
 *              started again): the thread's last copy stamp was taken under
 *              the collector's first epochs, those a collector started
 *              anew would have first; it must not serve the launch after
 *              (fork: on the test driver only, which a fork child may use)
 * Prints "hotrec NAME: passed"; exit 0.
 */
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

enum { N = 256 };

static CUstream stream;
static CUhostFn copy_fn;
static test_stats_fn get_stats;
static int audit;
static size_t pg;
static unsigned bad_launches; /* launches of a record that is bad */

static CUresult launch(hcguard_copy_record *rec)
{
    return cuLaunchHostFunc(stream, copy_fn, rec);
}

/* A good launch, run. */
static void good(hcguard_copy_record *rec, const char *what)
{
    CHECK_MSG(launch(rec) == CUDA_SUCCESS, "%s: a good record refused", what);
    REQUIRE_OK(cuStreamSynchronize(stream));
}

/* A launch of a bad record: refused (guard), or passed and skipped when
 * it runs (audit). */
static void bad(hcguard_copy_record *rec, const char *what)
{
    CUresult r = launch(rec);
    CHECK_MSG(r == (audit ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE),
              "%s: a bad record's launch returned %d", what, (int)r);
    REQUIRE_OK(cuStreamSynchronize(stream));
    bad_launches++;
}

/* Launched good twice: this thread's last verdict is about it. */
static void make_hot(hcguard_copy_record *rec, const char *what)
{
    good(rec, what);
    good(rec, what);
}

static void changed(void)
{
    unsigned char src[N], dst[N];
    memset(src, 7, sizeof src);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(&rec, "changed");
    rec.src = rec.dst + 8; /* overlapping */
    bad(&rec, "changed: overlap");
    rec.src = NEVER_MAPPED;
    bad(&rec, "changed: source never mapped");
    rec.src = (uintptr_t)src;
    memset(dst, 0, sizeof dst);
    good(&rec, "changed: mended");
    CHECK_MSG(memcmp(src, dst, N) == 0, "changed: the mended record did not copy");
}

static void unmapped(void)
{
    unsigned char src[N];
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(&rec, "unmapped");
    munmap(dst, pg);
    bad(&rec, "unmapped through libc");
}

static void protected_(void)
{
    unsigned char src[N];
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(&rec, "protected");
    CHECK_MSG(pkey_mprotect(dst, pg, PROT_READ, -1) == 0, "pkey_mprotect: %s", strerror(errno));
    bad(&rec, "destination made read-only by pkey_mprotect");
    munmap(dst, pg);
}

static void unreadable(void)
{
    unsigned char src[N], dst[N];
    hcguard_copy_record *rec = test_map(pg, PROT_READ | PROT_WRITE);
    *rec = (hcguard_copy_record){(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(rec, "unreadable");
    CHECK_MSG(syscall(SYS_mprotect, rec, pg, PROT_NONE) == 0, "mprotect");
    bad(rec, "record unreadable past libc");
    syscall(SYS_mprotect, rec, pg, PROT_READ | PROT_WRITE);
    good(rec, "unreadable: readable again");
    munmap(rec, pg);
}

static void expired(void)
{
    unsigned char src[N];
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(&rec, "expired");
    /* Not unmapped: over the sleep another thread (a sanitizer's
     * allocator) could map something there, a good destination again. */
    CHECK_MSG(syscall(SYS_mprotect, dst, pg, PROT_NONE) == 0, "mprotect");
    struct timespec ts = {0, 300 * 1000 * 1000}; /* the verdict's 100 ms, and a collector pass */
    nanosleep(&ts, NULL);
    bad(&rec, "expired: destination made inaccessible past libc, the verdict 300 ms old");
}

static void past_libc(void)
{
    unsigned char src[N];
    memset(src, 9, sizeof src);
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(&rec, "past-libc");
    hcguard_stats before = test_stats(get_stats);
    CHECK_MSG(syscall(SYS_munmap, dst, pg) == 0, "munmap");
    CUresult r = launch(&rec);
    REQUIRE_OK(cuStreamSynchronize(stream));
    hcguard_stats s = test_stats(get_stats);
    uint64_t refused = s.rejected - before.rejected, skipped = s.skipped - before.skipped;
    /* Which one depends on how long the verdict had lived: either way the
     * copy was not made. */
    if (refused == 0)
        CHECK_MSG(r == CUDA_SUCCESS && skipped == 1, "past-libc: passed at enqueue (%d), "
                  "then skipped %llu, want 1", (int)r, (unsigned long long)skipped);
    else
        CHECK_MSG(refused == 1 && r == (audit ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE) &&
                      skipped == (audit ? 1u : 0u),
                  "past-libc: rejected %llu (returned %d), skipped %llu", (unsigned long long)refused,
                  (int)r, (unsigned long long)skipped);
    CHECK_MSG(s.copies_ran == before.copies_ran, "past-libc: the copy ran");
    /* Taken out of the totals the other attacks are held to. */
    get_stats = NULL;
}

/* ---- another thread --------------------------------------------------- */
typedef enum { T_BREAK, T_MEND_OTHER, T_UNMAP } t_step;
static hcguard_copy_record shared;
static unsigned char t_src[N], t_src2[N], t_dst[N];
static unsigned char *t_buf;

static void *other_thread(void *arg)
{
    switch ((t_step)(uintptr_t)arg) {
    case T_BREAK: /* bad here too, and checked here */
        shared.src = NEVER_MAPPED;
        bad(&shared, "threads: the other thread's bad launch");
        break;
    case T_MEND_OTHER: /* good again, with contents this thread never saw */
        shared.src = (uintptr_t)t_src2;
        good(&shared, "threads: the other thread's good launch");
        break;
    case T_UNMAP:
        munmap(t_buf, pg);
        break;
    }
    return NULL;
}

static void on_other_thread(t_step step)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, other_thread, (void *)(uintptr_t)step) == 0);
    pthread_join(t, NULL);
}

static void threads(void)
{
    memset(t_src, 1, N);
    memset(t_src2, 2, N);
    shared = (hcguard_copy_record){(uintptr_t)t_dst, (uintptr_t)t_src, N};
    make_hot(&shared, "threads");
    on_other_thread(T_BREAK);
    bad(&shared, "threads: broken by the other thread");
    on_other_thread(T_MEND_OTHER);
    memset(t_dst, 0, N);
    good(&shared, "threads: mended by the other thread");
    CHECK_MSG(memcmp(t_dst, t_src2, N) == 0, "threads: not copied from the new source");
    /* A buffer of a hot record unmapped by another thread. */
    t_buf = test_map(pg, PROT_READ | PROT_WRITE);
    shared.src = (uintptr_t)t_buf;
    make_hot(&shared, "threads: unmap");
    on_other_thread(T_UNMAP);
    bad(&shared, "threads: source unmapped by the other thread");
}

static void run_attacks(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    stream = test_context();
    copy_fn = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    get_stats = (test_stats_fn)dlsym(RTLD_DEFAULT, "hcguard_get_stats");
    REQUIRE(copy_fn && get_stats);
    hcguard_stats before = test_stats(get_stats);
    changed();
    unmapped();
    protected_();
    unreadable();
    threads();
    expired();
    hcguard_stats s = test_stats(get_stats);
    CHECK_MSG(s.rejected - before.rejected == bad_launches, "rejected %llu, want %u",
              (unsigned long long)(s.rejected - before.rejected), bad_launches);
    CHECK_MSG(s.skipped - before.skipped == (audit ? bad_launches : 0), "skipped %llu, want %u",
              (unsigned long long)(s.skipped - before.skipped), audit ? bad_launches : 0);
    past_libc();
}

static void scenario_guard(void)
{
    run_attacks();
}

static void scenario_audit(void)
{
    audit = 1;
    run_attacks();
}

/* ---- the collector held up ------------------------------------------- */
/* In "blocked-run": this test's own stderr, and the two ends of the pipe
 * that is hcguard's (taken at start-up, before main). */
enum { FD_ERR = 100, FD_PIPE_R = 101, FD_PIPE_W = 102 };

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&ts, NULL);
}

static void slow_fn(void *p)
{
    (void)p;
    sleep_ms(50); /* over HCGUARD_SLOW_MS: the collector says so */
}

/* 1 if a thread of this process other than the caller is in write(2). */
static int other_thread_in_write(void)
{
    DIR *d = opendir("/proc/self/task");
    long me = syscall(SYS_gettid);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] == '.' || atol(e->d_name) == me)
            continue;
        char path[300], line[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/syscall", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(line, sizeof line, f) && atol(line) == SYS_write)
            found = 1;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

/* Fill the pipe to the last byte (the write end's flags are shared with
 * hcguard's: blocking again after). */
static void fill_pipe(void)
{
    int fl = fcntl(FD_PIPE_W, F_GETFL);
    REQUIRE(fl >= 0 && fcntl(FD_PIPE_W, F_SETFL, fl | O_NONBLOCK) == 0);
    static char junk[4096];
    memset(junk, '.', sizeof junk);
    for (size_t n = sizeof junk; n; n /= 2)
        while (write(FD_PIPE_W, junk, n) > 0)
            ;
    REQUIRE(fcntl(FD_PIPE_W, F_SETFL, fl) == 0);
}

/* Empties the pipe, once the launch under test has been made (a
 * rejection's message waits for it), and for the rest of the run. */
static void *drain_pipe(void *arg)
{
    (void)arg;
    sleep_ms(50);
    char buf[4096];
    while (read(FD_PIPE_R, buf, sizeof buf) > 0)
        ;
    return NULL;
}

static void scenario_blocked_run(void)
{
    REQUIRE(dup2(FD_ERR, 2) == 2); /* this test's messages; hcguard's go to the pipe */
    pg = (size_t)sysconf(_SC_PAGESIZE);
    stream = test_context();
    copy_fn = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    REQUIRE(copy_fn);
    unsigned char src[N];
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(&rec, "blocked");
    fill_pipe();
    CHECK_OK(cuLaunchHostFunc(stream, slow_fn, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    int held = 0;
    for (int ms = 0; ms < 10000 && !(held = other_thread_in_write()); ms++)
        sleep_ms(1);
    CHECK_MSG(held, "blocked: the collector never wrote its message");
    if (!held)
        return;
    /* Its stamp is taken while the collector is held up. */
    good(&rec, "blocked: launched while the collector is held up");
    /* Not unmapped: what runs meanwhile (a sanitizer's allocator) could map
     * something else there, which would be a good destination again. */
    CHECK_MSG(syscall(SYS_mprotect, dst, pg, PROT_NONE) == 0, "mprotect");
    sleep_ms(300);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, drain_pipe, NULL) == 0);
    pthread_detach(t);
    bad(&rec, "blocked: destination made inaccessible past libc, the verdict 300 ms old, "
              "the collector held up");
}

static void scenario_blocked(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int r = fcntl(p[0], F_DUPFD, FD_ERR + 10), w = fcntl(p[1], F_DUPFD, FD_ERR + 10);
        if (r < 0 || w < 0 || dup2(2, FD_ERR) < 0 || dup2(r, FD_PIPE_R) < 0 ||
            dup2(w, FD_PIPE_W) < 0 || dup2(w, 2) < 0)
            _exit(3);
        char *argv[] = {"hc_hotrec", "blocked-run", NULL};
        execv("/proc/self/exe", argv);
        _exit(4);
    }
    close(p[0]);
    close(p[1]);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "blocked-run: status 0x%x", st);
}

/* ---- a fork, an exec that failed ------------------------------------ */
static void ordinary_fn(void *p)
{
    (void)p;
}

/* The record made hot by the first launches of the process (this thread's
 * copy stamp taken under the collector's first epochs: that of its first
 * sleep), its destination made inaccessible past libc, and the verdict
 * left to age past its 100 ms. */
static void hot_then_aged(hcguard_copy_record *rec, unsigned char *src, const char *what)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    stream = test_context();
    copy_fn = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    REQUIRE(copy_fn);
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    *rec = (hcguard_copy_record){(uintptr_t)dst, (uintptr_t)src, N};
    make_hot(rec, what); /* hcguard starts: its collector too */
    sleep_ms(5);         /* its first pass made, not its second */
    good(rec, what);
    /* Not unmapped: what runs meanwhile (a sanitizer's allocator) could map
     * something else there, which would be a good destination again. */
    CHECK_MSG(syscall(SYS_mprotect, dst, pg, PROT_NONE) == 0, "mprotect");
    sleep_ms(300);
}

static void scenario_fork(void)
{
    unsigned char src[N];
    hcguard_copy_record rec;
    hot_then_aged(&rec, src, "fork");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        /* The child's collector starts at its first launch; then its
         * first pass, as in the parent before the stamp. (The test
         * driver's only: a real one is not to be used in a fork child.) */
        CHECK_OK(cuLaunchHostFunc(stream, ordinary_fn, NULL));
        sleep_ms(5);
        CUresult r = launch(&rec);
        if (r != CUDA_ERROR_INVALID_VALUE)
            fprintf(stderr, "fork: the child's launch of a record 300 ms old returned %d\n", (int)r);
        _exit(r == CUDA_ERROR_INVALID_VALUE && !check_failures ? 0 : 1);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork: child status 0x%x", st);
}

static void scenario_exec(void)
{
    unsigned char src[N];
    hcguard_copy_record rec;
    hot_then_aged(&rec, src, "exec");
    char *argv[] = {"hc_hotrec-none", NULL};
    CHECK_MSG(execv("/nonexistent/hc_hotrec-none", argv) == -1, "execv");
    sleep_ms(5); /* the collector started again: its first pass made */
    bad(&rec, "exec: destination made inaccessible past libc, the verdict 300 ms old, "
              "an exec failed");
}

int main(int argc, char **argv)
{
    static const check_scenario scenarios[] = {
        CHECK_SCENARIO("guard", scenario_guard),
        CHECK_SCENARIO("audit", scenario_audit),
        CHECK_SCENARIO("blocked", scenario_blocked),
        CHECK_SCENARIO("blocked-run", scenario_blocked_run),
        CHECK_SCENARIO("fork", scenario_fork),
        CHECK_SCENARIO("exec", scenario_exec),
    };
    return check_scenario_main("hc_hotrec", "hotrec %s", scenarios,
                               sizeof scenarios / sizeof scenarios[0], argc, argv, NULL, NULL);
}
