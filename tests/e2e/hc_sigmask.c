/*
 * Fault containment on threads whose signal mask blocks SIGSEGV and
 * SIGBUS. A fault with either blocked kills the process whatever handler
 * is installed, and servers block every signal in main before they start
 * their threads (which inherit the mask): hcguard must unblock them for
 * its contained copies, and put the program's mask back after.
 *
 *   hc_sigmask blocked   every signal blocked in main before the driver
 *              starts (its callback thread may inherit the mask): a
 *              record that cannot be read is refused at enqueue; a copy
 *              whose destination was made inaccessible past libc after
 *              its check is skipped when it runs; sigaction given an unreadable
 *              action fails with EFAULT; the thread's mask is unchanged
 *   hc_sigmask toggled   the mask changed after the thread's copies found
 *              it open: blocked by sigprocmask, by pthread_sigmask, and on
 *              the callback thread by a host function, each followed by a
 *              copy that faults, contained
 * Prints "sigmask NAME: passed"; exit 0. Guard mode.
 */
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

static CUstream stream;
static CUhostFn copy_fn;
static test_stats_fn get_stats;
static size_t pg;

/* The page a record that cannot be read lies in. */
static void *unreadable_page(void)
{
    return test_map(pg, PROT_NONE);
}

/* A launch of a record that cannot be read: refused, the process alive. */
static void refused_unreadable(const char *what)
{
    hcguard_stats before = test_stats(get_stats);
    void *rec = unreadable_page();
    CUresult r = cuLaunchHostFunc(stream, copy_fn, rec);
    CHECK_MSG(r == CUDA_ERROR_INVALID_VALUE, "%s: an unreadable record's launch returned %d",
              what, (int)r);
    hcguard_stats after = test_stats(get_stats);
    CHECK_MSG(after.rejected == before.rejected + 1, "%s: %llu rejected, want 1", what,
              (unsigned long long)(after.rejected - before.rejected));
    munmap(rec, pg);
}

/* A good copy whose destination is made inaccessible past libc (the
 * check cannot know) while it waits behind a gate: skipped when it runs.
 * Not unmapped: another thread (a sanitizer's allocator) could map
 * something else there before the copy runs. */
static void skipped_inaccessible(const char *what)
{
    hcguard_stats before = test_stats(get_stats);
    unsigned char src[64];
    memset(src, 5, sizeof src);
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    REQUIRE_OK(test_gate_close(stream, cuLaunchHostFunc));
    CUresult r = cuLaunchHostFunc(stream, copy_fn, &rec);
    CHECK_MSG(r == CUDA_SUCCESS, "%s: a good record refused (%d)", what, (int)r);
    CHECK_MSG(syscall(SYS_mprotect, dst, pg, PROT_NONE) == 0, "%s: mprotect", what);
    test_gate_open();
    REQUIRE_OK(cuStreamSynchronize(stream));
    hcguard_stats after = test_stats(get_stats);
    CHECK_MSG(after.skipped == before.skipped + 1, "%s: %llu skipped, want 1", what,
              (unsigned long long)(after.skipped - before.skipped));
    munmap(dst, pg);
}

/* A good copy, run: the thread learns its mask is open. */
static void good_copy(const char *what)
{
    unsigned char src[64], dst[64];
    memset(src, 9, sizeof src);
    memset(dst, 0, sizeof dst);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    CHECK_MSG(cuLaunchHostFunc(stream, copy_fn, &rec) == CUDA_SUCCESS, "%s: refused", what);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(memcmp(src, dst, sizeof src) == 0, "%s: not copied", what);
}

static void faults_set(sigset_t *s)
{
    sigemptyset(s);
    sigaddset(s, SIGSEGV);
    sigaddset(s, SIGBUS);
}

/* Whether this thread's mask blocks both fault signals. */
static int faults_blocked(void)
{
    sigset_t cur;
    sigemptyset(&cur);
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, SIGSEGV) == 1 && sigismember(&cur, SIGBUS) == 1;
}

static void setup(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    get_stats = test_require_hcguard(&copy_fn);
    stream = test_context();
}

static void scenario_blocked(void)
{
    sigset_t all, before, after;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    sigemptyset(&before);
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    setup();
    refused_unreadable("blocked");
    refused_unreadable("blocked, again");
    skipped_inaccessible("blocked");
#if !defined(__SANITIZE_THREAD__) /* ThreadSanitizer's sigaction reads act before hcguard's */
    void *bad = unreadable_page();
    errno = 0;
    int rc = sigaction(SIGSEGV, bad, NULL);
    CHECK_MSG(rc == -1 && errno == EFAULT, "sigaction with an unreadable action: %d, errno %d",
              rc, errno);
    munmap(bad, pg);
#endif
    good_copy("blocked");
    sigemptyset(&after);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    for (int sig = 1; sig < NSIG; sig++)
        CHECK_MSG(sigismember(&before, sig) == sigismember(&after, sig),
                  "signal %d: blocked %d before, %d after", sig, sigismember(&before, sig),
                  sigismember(&after, sig));
}

/* On the callback thread: what a host function of the program does to
 * its mask stays. */
static void block_faults(void *p)
{
    (void)p;
    sigset_t f;
    faults_set(&f);
    pthread_sigmask(SIG_BLOCK, &f, NULL);
}

static void scenario_toggled(void)
{
    setup();
    sigset_t f;
    faults_set(&f);
    good_copy("open");
    CHECK(sigprocmask(SIG_BLOCK, &f, NULL) == 0);
    refused_unreadable("blocked by sigprocmask");
    CHECK_MSG(faults_blocked(), "sigprocmask's mask not kept");
    CHECK(pthread_sigmask(SIG_UNBLOCK, &f, NULL) == 0);
    good_copy("open again");
    CHECK(pthread_sigmask(SIG_BLOCK, &f, NULL) == 0);
    refused_unreadable("blocked by pthread_sigmask");
    CHECK_MSG(faults_blocked(), "pthread_sigmask's mask not kept");
    CHECK(pthread_sigmask(SIG_UNBLOCK, &f, NULL) == 0);
    good_copy("callback thread open"); /* learnt open there too */
    REQUIRE_OK(cuLaunchHostFunc(stream, block_faults, NULL));
    skipped_inaccessible("callback thread blocked by a host function");
}

int main(int argc, char **argv)
{
    static const check_scenario scenarios[] = {
        CHECK_SCENARIO("blocked", scenario_blocked),
        CHECK_SCENARIO("toggled", scenario_toggled),
    };
    return check_scenario_main("hc_sigmask", "sigmask %s", scenarios,
                               sizeof scenarios / sizeof scenarios[0], argc, argv, NULL, NULL);
}
