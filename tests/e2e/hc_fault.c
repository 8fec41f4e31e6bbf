/*
 * Adversarial programs for the guard's promise: no bad host-copy record
 * ever takes the process down, whatever happens between the check and the
 * copy, and faults that are not hcguard's reach the program as without it.
 *
 *   hc_fault SCENARIO
 *   handlers     the program's SIGSEGV handlers, installed before and after
 *                hcguard's start-up, still get their faults (siglongjmp out
 *                of them works), see their own old handler, and a fault in
 *                hcguard's copy is contained all the same
 *   deaths       with no handler (or SIG_IGN) a fault kills with its signal
 *   buffers      dst/src unmapped, mprotect'ed, freed, a file truncated under
 *                them, after enqueue: refused or skipped with their reason
 *   record-gone  the record itself unmapped or freed after enqueue, unchanged
 *   relaunch     a record (and buffers) unmapped without libc's munmap and
 *                launched again: refused or skipped, never a crash
 *   past-eof     records and buffers in a file mapping past its end;
 *                "past-eof noreadv" with process_vm_readv denied by seccomp
 *   race [user]  a thread flips the record's dst between a good buffer and a
 *                PROT_NONE page while 200k copies are launched (with "user":
 *                through hc_fault_user_copy, named by HCGUARD_COPY_FN)
 *   snapshot     a registered copy function is not called (hcguard copies);
 *                a --copy-fn function gets hcguard's checked snapshot
 *
 * "Unmapped without libc's munmap" is modelled with the raw system call:
 * that is what glibc's free does for a large block. Exit 0: passed.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"
#include "deny_vm_readv.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1 /* its allocator keeps freed blocks mapped (quarantine) */
#else
#define ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#else
#define TSAN 0
#endif

static CUstream stream;
static CUhostFn copy_fn;
static test_stats_fn get_stats;
static int audit;
static size_t pg;

static hcguard_stats stats(void)
{
    return test_stats(get_stats);
}

/* What glibc's free does to a large block: no munmap through the PLT. */
static void raw_munmap(void *p, size_t n)
{
    CHECK_MSG(syscall(SYS_munmap, p, n) == 0, "raw munmap");
}

static void raw_mprotect(void *p, size_t n, int prot)
{
    CHECK_MSG(syscall(SYS_mprotect, p, n, prot) == 0, "raw mprotect");
}

/* ---- a host function that holds the stream until the test lets it go -- */
static void close_gate(void)
{
    CHECK_MSG(test_gate_close(stream, cuLaunchHostFunc) == CUDA_SUCCESS, "gate");
}

static void open_gate(void)
{
    test_gate_open();
    REQUIRE_OK(cuStreamSynchronize(stream));
}

static void ordinary(void *p)
{
    (void)p;
}

static void setup(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    stream = test_context();
    copy_fn = test_copy_fn(&get_stats);
    audit = test_mode_is("audit");
}

/* hcguard starts at the first launch: make it so. */
static void start_hcguard(void)
{
    REQUIRE_OK(cuLaunchHostFunc(stream, ordinary, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
}

/* One record enqueued behind the gate, spoilt by spoil(arg), then run:
 * the process must survive, the copy must be skipped (not run). */
typedef void (*spoil_fn)(void *arg);

static int spoil_unmaps(spoil_fn spoil);

/* Whether the page at p is mapped (by anyone). */
static int page_mapped(void *p)
{
    unsigned char v;
    return mincore(p, 1, &v) == 0;
}

/* 0 if the case says nothing and may be tried again (retry): the range
 * the spoil unmapped was mapped again (another thread's mmap took the
 * address) before the copy ran, which then rightly ran into it. */
static int spoilt_copy_try(const char *what, hcguard_copy_record *rec, spoil_fn spoil, void *arg,
                           int retry)
{
    hcguard_stats before = stats();
    close_gate();
    CUresult r = cuLaunchHostFunc(stream, copy_fn, rec);
    CHECK_MSG(r == CUDA_SUCCESS, "%s: good at enqueue, got %d", what, (int)r);
    spoil(arg);
    open_gate();
    if (retry && get_stats && spoil_unmaps(spoil) && stats().copies_ran != before.copies_ran &&
        page_mapped(arg)) {
        printf("%s: the unmapped range was mapped again before the copy ran: once more\n", what);
        return 0;
    }
    if (get_stats) {
        hcguard_stats s = stats();
        CHECK_MSG(s.skipped - before.skipped == 1, "%s: skipped %llu, want 1", what,
              (unsigned long long)(s.skipped - before.skipped));
        CHECK_MSG(s.copies_ran == before.copies_ran, "%s: the copy ran", what);
    }
    printf("survived: %s\n", what);
    return 1;
}

static void spoilt_copy(const char *what, hcguard_copy_record *rec, spoil_fn spoil, void *arg)
{
    spoilt_copy_try(what, rec, spoil, arg, 0);
}

/* ---- handlers ------------------------------------------------------------ */
static sigjmp_buf jb;
static volatile sig_atomic_t hits_a, hits_b, hits_c, hits_plain;
static volatile char *none_page;

static void h_a(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    hits_a++;
    siglongjmp(jb, 1);
}

static void h_b(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    hits_b++;
    if (si->si_code > 0)
        siglongjmp(jb, 1); /* a fault: do not re-execute it */
}

static void h_c(int sig)
{
    (void)sig;
    hits_c++;
    siglongjmp(jb, 1);
}

static void h_plain(int sig)
{
    (void)sig;
    hits_plain++;
    siglongjmp(jb, 1);
}

/* Touch the PROT_NONE page; 1 if a handler jumped out of the fault. */
static int fault_once(void)
{
    if (sigsetjmp(jb, 1) == 0) {
        none_page[0] = 1;
        return 0;
    }
    return 1;
}

static void set_handler(void (*fn)(int, siginfo_t *, void *), int flags, struct sigaction *old)
{
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = fn;
    a.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&a.sa_mask);
    CHECK_MSG(sigaction(SIGSEGV, &a, old) == 0, "sigaction");
}

/* What the kernel has for SIGSEGV, past any interposer. */
static void *kernel_handler(void)
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } k;
    memset(&k, 0, sizeof k);
    syscall(SYS_rt_sigaction, SIGSEGV, NULL, &k, sizeof k.mask);
    return k.handler;
}

static void spoil_raw_none(void *p)
{
    raw_mprotect(p, pg, PROT_NONE);
}

static void handlers(void)
{
    struct sigaction old, cur;
    none_page = test_map(pg, PROT_NONE);
    /* Before hcguard's start-up. */
    set_handler(h_a, 0, &old);
    CHECK_MSG(old.sa_handler == SIG_DFL, "first oldact is SIG_DFL");
    start_hcguard();
    CHECK_MSG(fault_once() && hits_a == 1, "the handler installed first got its fault (%d)",
          (int)hits_a);
    if (get_stats)
        CHECK_MSG(kernel_handler() != (void *)h_a, "hcguard's handler is first with the kernel");
    /* After: oldact is the program's own. */
    set_handler(h_b, 0, &old);
    CHECK_MSG(old.sa_sigaction == h_a && (old.sa_flags & SA_SIGINFO), "oldact is the program's h_a");
    CHECK_MSG(fault_once() && hits_b == 1, "the handler installed after got its fault (%d)",
          (int)hits_b);
    CHECK_MSG(sigaction(SIGSEGV, NULL, &cur) == 0 && cur.sa_sigaction == h_b, "query sees h_b");
    if (get_stats)
        CHECK_MSG(kernel_handler() != (void *)h_b, "hcguard's handler stays first");
    /* A SIGSEGV sent by kill() reaches the program's handler too. */
    raise(SIGSEGV);
    CHECK_MSG(hits_b == 2, "raise(SIGSEGV) reached the handler (%d)", (int)hits_b);
    /* A fault inside hcguard's copy is hcguard's: the handler never sees it. */
    unsigned char *src = test_map(pg, PROT_READ | PROT_WRITE);
    unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, pg};
    if (get_stats) {
        spoilt_copy("fault in hcguard's copy with the program's handler", &rec, spoil_raw_none,
                    dst);
        CHECK_MSG(hits_b == 2, "the program's handler saw hcguard's fault");
    }
    /* signal(): the old handler back, and plain handlers chained. */
    void (*prev)(int) = signal(SIGSEGV, h_plain);
    CHECK_MSG(prev == (void (*)(int))(void *)h_b, "signal() returned the old handler");
    CHECK_MSG(fault_once() && hits_plain == 1, "a signal() handler got its fault");
    /* SA_RESETHAND: once, then the default. */
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = h_c;
    a.sa_flags = SA_RESETHAND;
    sigemptyset(&a.sa_mask);
    CHECK_MSG(sigaction(SIGSEGV, &a, NULL) == 0, "sigaction SA_RESETHAND");
    CHECK_MSG(fault_once() && hits_c == 1, "the SA_RESETHAND handler got its fault");
    CHECK_MSG(sigaction(SIGSEGV, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL,
          "after SA_RESETHAND the disposition is SIG_DFL");
    /* A bad pointer: EFAULT, as the kernel says (glibc alone would fault,
     * and so does TSan's sigaction, which reads it before hcguard's). */
    errno = 0;
    if (get_stats && !TSAN)
        CHECK_MSG(sigaction(SIGSEGV, (const struct sigaction *)(uintptr_t)NEVER_MAPPED, NULL) == -1 &&
              errno == EFAULT,
          "sigaction with a bad act pointer: EFAULT");
    munmap(src, pg);
    munmap(dst, pg);
}

/* ---- deaths -------------------------------------------------------------- */
typedef void (*child_fn)(void);

static void child_segv(void)
{
    none_page[0] = 1;
}

static void child_ignored_segv(void)
{
    signal(SIGSEGV, SIG_IGN);
    none_page[0] = 1;
}

static void child_kill_segv(void)
{
    kill(getpid(), SIGSEGV);
    pause();
}

static void child_ignored_kill(void)
{
    signal(SIGSEGV, SIG_IGN);
    kill(getpid(), SIGSEGV); /* ignored: no death */
}

static void child_bus(void)
{
    FILE *f = tmpfile();
    if (!f || ftruncate(fileno(f), 16) != 0)
        _exit(3);
    volatile char *p = mmap(NULL, 2 * pg, PROT_READ, MAP_SHARED, fileno(f), 0);
    if (p == MAP_FAILED)
        _exit(3);
    (void)p[pg]; /* past the end of the file */
}

/* The wait status of fn run in a child: a signal number, or 1000 + exit. */
static int run_child(child_fn fn)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        fn();
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFSIGNALED(st) ? WTERMSIG(st) : 1000 + WEXITSTATUS(st);
}

static void deaths(void)
{
    none_page = test_map(pg, PROT_NONE);
    start_hcguard();
    int st;
    CHECK_MSG((st = run_child(child_segv)) == SIGSEGV, "no handler: killed by SIGSEGV (got %d)", st);
    CHECK_MSG((st = run_child(child_ignored_segv)) == SIGSEGV,
          "SIG_IGN: a fault still kills by SIGSEGV (got %d)", st);
    CHECK_MSG((st = run_child(child_kill_segv)) == SIGSEGV, "kill(SIGSEGV): killed (got %d)", st);
    CHECK_MSG((st = run_child(child_ignored_kill)) == 1000, "SIG_IGN: kill(SIGSEGV) ignored (got %d)",
          st);
    CHECK_MSG((st = run_child(child_bus)) == SIGBUS, "past EOF: killed by SIGBUS (got %d)", st);
}

/* ---- buffers ------------------------------------------------------------- */
static void spoil_munmap(void *p)
{
    munmap(p, pg);
}

static void spoil_none(void *p)
{
    mprotect(p, pg, PROT_NONE);
}

static void spoil_raw_unmap(void *p)
{
    raw_munmap(p, pg);
}

static void spoil_free(void *p)
{
    free(p);
}

static void spoil_truncate(void *fd)
{
    CHECK_MSG(ftruncate(*(int *)fd, 0) == 0, "ftruncate");
}

/* Whether spoil leaves the memory unmapped (not to be unmapped again: the
 * range may have been reused meanwhile). */
static int spoil_unmaps(spoil_fn spoil)
{
    return spoil == spoil_munmap || spoil == spoil_raw_unmap;
}

static void buffer_case(const char *what, int spoil_dst, spoil_fn spoil)
{
    for (int tries = 0, done = 0; !done; tries++) {
        unsigned char *src = test_map(pg, PROT_READ | PROT_WRITE);
        unsigned char *dst = test_map(pg, PROT_READ | PROT_WRITE);
        hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, pg};
        done = spoilt_copy_try(what, &rec, spoil, spoil_dst ? dst : src, tries < 4);
        if (!spoil_unmaps(spoil) || !spoil_dst)
            munmap(dst, pg);
        if (!spoil_unmaps(spoil) || spoil_dst)
            munmap(src, pg);
    }
}

static void file_case(const char *what, int spoil_dst)
{
    FILE *f = tmpfile();
    int fd = f ? fileno(f) : -1;
    CHECK_MSG(fd >= 0 && ftruncate(fd, (off_t)(4 * pg)) == 0, "file");
    if (fd < 0)
        return;
    unsigned char *file = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char *mem = test_map(4 * pg, PROT_READ | PROT_WRITE);
    CHECK_MSG(file != MAP_FAILED, "mmap file");
    hcguard_copy_record rec = {(uintptr_t)(spoil_dst ? file : mem),
                               (uintptr_t)(spoil_dst ? mem : file), 4 * pg};
    spoilt_copy(what, &rec, spoil_truncate, &fd);
    munmap(file, 4 * pg);
    munmap(mem, 4 * pg);
    fclose(f);
}

static void buffers(void)
{
    start_hcguard();
    buffer_case("dst unmapped", 1, spoil_munmap);
    buffer_case("src unmapped", 0, spoil_munmap);
    buffer_case("dst mprotect PROT_NONE", 1, spoil_none);
    buffer_case("src mprotect PROT_NONE", 0, spoil_none);
    buffer_case("dst unmapped past libc", 1, spoil_raw_unmap);
    buffer_case("src mprotect PROT_NONE past libc", 0, spoil_raw_none);
    file_case("file under dst truncated", 1);
    file_case("file under src truncated", 0);
    /* A large malloc block, freed: glibc unmaps it without munmap's PLT
     * entry. (ASan's allocator keeps it mapped, in quarantine.) */
    if (!ASAN) {
        size_t big = 8u << 20;
        unsigned char *src = malloc(big), *dst = malloc(big);
        CHECK_MSG(src && dst, "malloc");
        memset(src, 7, big);
        hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, big};
        spoilt_copy("dst freed (large malloc)", &rec, spoil_free, dst);
        rec.dst = (uintptr_t)(dst = malloc(big));
        spoilt_copy("src freed (large malloc)", &rec, spoil_free, src);
        free(dst);
    } else {
        printf("survived: dst freed (large malloc)\nsurvived: src freed (large malloc)\n");
    }
}

/* ---- the record itself ----------------------------------------------------- */
static void record_case(const char *what, spoil_fn spoil)
{
    unsigned char *buf = test_map(2 * pg, PROT_READ | PROT_WRITE);
    hcguard_copy_record *rec = test_map(pg, PROT_READ | PROT_WRITE);
    *rec = (hcguard_copy_record){(uintptr_t)buf, (uintptr_t)buf + pg, pg};
    spoilt_copy(what, rec, spoil, rec);
    if (!spoil_unmaps(spoil))
        munmap(rec, pg);
    munmap(buf, 2 * pg);
}

static void record_gone(void)
{
    start_hcguard();
    record_case("record unmapped", spoil_munmap);
    record_case("record unmapped past libc, unchanged", spoil_raw_unmap);
    record_case("record PROT_NONE past libc, unchanged", spoil_raw_none);
    if (!ASAN) {
        size_t big = 8u << 20;
        unsigned char *buf = test_map(2 * pg, PROT_READ | PROT_WRITE);
        hcguard_copy_record *rec = malloc(big);
        *rec = (hcguard_copy_record){(uintptr_t)buf, (uintptr_t)buf + pg, pg};
        spoilt_copy("record freed (large malloc)", rec, spoil_free, rec);
        munmap(buf, 2 * pg);
    } else {
        printf("survived: record freed (large malloc)\n");
    }
}

/* ---- launched again after the memory went ---------------------------------- */
/* The launch of rec must be refused (guard) or its copy skipped. */
static void refused_or_skipped(const char *what, hcguard_copy_record *rec)
{
    hcguard_stats before = stats();
    CUresult r = cuLaunchHostFunc(stream, copy_fn, rec);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(r == CUDA_SUCCESS || (r == CUDA_ERROR_INVALID_VALUE && !audit), "%s: launch %d", what,
          (int)r);
    if (get_stats) {
        hcguard_stats s = stats();
        uint64_t n = (s.rejected - before.rejected) + (s.skipped - before.skipped);
        CHECK_MSG(n >= 1, "%s: neither refused nor skipped", what);
        CHECK_MSG(s.copies_ran == before.copies_ran, "%s: the copy ran", what);
    }
    printf("survived: %s\n", what);
}

static void relaunch(void)
{
    start_hcguard();
    unsigned char *buf = test_map(2 * pg, PROT_READ | PROT_WRITE);
    /* The record: checked good (and remembered), then unmapped past libc. */
    hcguard_copy_record *rec = test_map(pg, PROT_READ | PROT_WRITE);
    *rec = (hcguard_copy_record){(uintptr_t)buf, (uintptr_t)buf + pg, pg};
    REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn, rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
    raw_munmap(rec, pg);
    refused_or_skipped("record unmapped past libc, launched again", rec);
    /* Its buffers: the same. */
    hcguard_copy_record good = {(uintptr_t)buf, (uintptr_t)buf + pg, pg};
    REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn, &good));
    REQUIRE_OK(cuStreamSynchronize(stream));
    raw_munmap(buf, 2 * pg);
    refused_or_skipped("buffers unmapped past libc, launched again", &good);
    if (!ASAN) {
        size_t big = 8u << 20;
        hcguard_copy_record *m = malloc(big);
        unsigned char *b = test_map(2 * pg, PROT_READ | PROT_WRITE);
        *m = (hcguard_copy_record){(uintptr_t)b, (uintptr_t)b + pg, pg};
        REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn, m));
        REQUIRE_OK(cuStreamSynchronize(stream));
        hcguard_copy_record *volatile gone = m; /* the use after free is the test */
        free(m);
        refused_or_skipped("record freed (large malloc), launched again", gone);
        munmap(b, 2 * pg);
    } else {
        printf("survived: record freed (large malloc), launched again\n");
    }
}

/* ---- file mappings past EOF --------------------------------------------------- */
static void launch_past_eof(const char *what, hcguard_copy_record *rec)
{
    refused_or_skipped(what, rec);
}

static void past_eof(int noreadv)
{
    if (noreadv) {
        CHECK_MSG(deny_vm_readv() == 0, "seccomp filter");
        char c = 0, d;
        struct iovec l = {&d, 1}, rm = {&c, 1};
        errno = 0;
        CHECK_MSG(process_vm_readv(getpid(), &l, 1, &rm, 1, 0) == -1 && errno == EPERM,
              "process_vm_readv is denied");
    }
    start_hcguard();
    FILE *f = tmpfile();
    int fd = f ? fileno(f) : -1;
    CHECK_MSG(fd >= 0 && ftruncate(fd, (off_t)pg) == 0, "file");
    if (fd < 0)
        return;
    unsigned char *file = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK_MSG(file != MAP_FAILED, "mmap");
    unsigned char *mem = test_map(2 * pg, PROT_READ | PROT_WRITE);
    /* The record past the end of the file. */
    refused_or_skipped("record past EOF", (hcguard_copy_record *)(void *)(file + pg));
    refused_or_skipped("record straddling EOF", (hcguard_copy_record *)(void *)(file + pg - 8));
    /* Buffers past the end. */
    hcguard_copy_record rec = {(uintptr_t)mem, (uintptr_t)file + pg, pg};
    launch_past_eof("src past EOF", &rec);
    rec = (hcguard_copy_record){(uintptr_t)file + 2 * pg, (uintptr_t)mem, pg};
    launch_past_eof("dst past EOF", &rec);
    rec = (hcguard_copy_record){(uintptr_t)mem, (uintptr_t)file + pg / 2, pg};
    launch_past_eof("src straddling EOF", &rec);
    munmap(file, 3 * pg);
    munmap(mem, 2 * pg);
    fclose(f);
}

/* ---- who copies ------------------------------------------------------------ */
/* Registered: declared to do exactly the record's copy, so never called
 * under hcguard. Named with --copy-fn: called with the checked snapshot. */
void hc_fault_registered_copy(void *p);
void hc_fault_user_copy(void *p);
static atomic_int registered_calls, user_calls;
static void *_Atomic user_seen;

void hc_fault_registered_copy(void *p)
{
    atomic_fetch_add(&registered_calls, 1);
    test_local_copy(p);
}

void hc_fault_user_copy(void *p)
{
    atomic_fetch_add(&user_calls, 1);
    atomic_store(&user_seen, p);
    test_local_copy(p);
}

static void snapshot(void)
{
    typedef int (*register_fn)(void *);
    register_fn reg = (register_fn)dlsym(RTLD_DEFAULT, "hcguard_register_copy_fn");
    start_hcguard();
    unsigned char src[512], dst[512];
    memset(src, 9, sizeof src);
    memset(dst, 0, sizeof dst);
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    if (reg)
        CHECK_MSG(reg((void *)hc_fault_registered_copy) == 0, "register");
    REQUIRE_OK(cuLaunchHostFunc(stream, hc_fault_registered_copy, &rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(memcmp(dst, src, sizeof src) == 0, "the registered copy was made");
    CHECK_MSG(atomic_load(&registered_calls) == (reg ? 0 : 1),
          "registered copy function called %d times", atomic_load(&registered_calls));
    memset(dst, 0, sizeof dst);
    hcguard_stats before = stats();
    REQUIRE_OK(cuLaunchHostFunc(stream, hc_fault_user_copy, &rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(memcmp(dst, src, sizeof src) == 0, "the --copy-fn copy was made");
    CHECK_MSG(atomic_load(&user_calls) == 1, "--copy-fn function called once");
    if (get_stats) {
        hcguard_stats s = stats();
        CHECK_MSG(s.copies_ran - before.copies_ran == 1, "--copy-fn function recognised");
        CHECK_MSG(atomic_load(&user_seen) != (void *)&rec,
              "--copy-fn function given the program's record, not hcguard's snapshot");
    }
}

/* ---- the race ------------------------------------------------------------------- */
#define RACE_LAUNCHES 200000
static atomic_int race_stop;

typedef struct flip_args {
    hcguard_copy_record *rec;
    uintptr_t good, bad;
} flip_args;

static void *flipper(void *v)
{
    flip_args *a = v;
    for (unsigned long i = 0; !atomic_load_explicit(&race_stop, memory_order_relaxed); i++)
        __atomic_store_n(&a->rec->dst, (i & 1) ? a->bad : a->good, __ATOMIC_RELAXED);
    return NULL;
}

static void race(void)
{
    if (!get_stats) {
        printf("SKIP: without hcguard the race crashes the program\n");
        exit(77);
    }
    start_hcguard();
    unsigned char *src = test_map(pg, PROT_READ | PROT_WRITE);
    unsigned char *good = test_map(pg, PROT_READ | PROT_WRITE);
    unsigned char *bad = test_map(pg, PROT_NONE);
    memset(src, 3, pg);
    hcguard_copy_record *rec = test_map(pg, PROT_READ | PROT_WRITE);
    *rec = (hcguard_copy_record){(uintptr_t)good, (uintptr_t)src, 64};
    flip_args fa = {rec, (uintptr_t)good, (uintptr_t)bad};
    hcguard_stats before = stats();
    pthread_t t;
    CHECK_MSG(pthread_create(&t, NULL, flipper, &fa) == 0, "thread");
    long accepted = 0, refused = 0;
    for (int i = 0; i < RACE_LAUNCHES; i++) {
        CUresult r = cuLaunchHostFunc(stream, copy_fn, rec);
        if (r == CUDA_SUCCESS)
            accepted++;
        else if (r == CUDA_ERROR_INVALID_VALUE && !audit)
            refused++;
        else
            CHECK_MSG(0, "launch %d: %d", i, (int)r);
        if (i % 4096 == 4095) { /* and drain hcguard's event buffers: no event lost */
            REQUIRE_OK(cuStreamSynchronize(stream));
            (void)stats();
        }
    }
    REQUIRE_OK(cuStreamSynchronize(stream));
    atomic_store(&race_stop, 1);
    pthread_join(t, NULL);
    if (get_stats) {
        hcguard_stats s = stats();
        uint64_t ran = s.copies_ran - before.copies_ran, skipped = s.skipped - before.skipped;
        uint64_t rejected = s.rejected - before.rejected;
        CHECK_MSG(s.copies_launched - before.copies_launched == (uint64_t)accepted,
              "copies launched %llu, accepted %ld",
              (unsigned long long)(s.copies_launched - before.copies_launched), accepted);
        CHECK_MSG(ran + skipped == (uint64_t)accepted, "ran %llu + skipped %llu != accepted %ld",
              (unsigned long long)ran, (unsigned long long)skipped, accepted);
        if (!audit)
            CHECK_MSG(rejected == (uint64_t)refused, "rejected %llu, refused %ld",
                  (unsigned long long)rejected, refused);
        CHECK_MSG(s.events_dropped == before.events_dropped, "events dropped");
        printf("race: %ld accepted, %ld refused, %llu ran, %llu skipped, %llu reported\n",
               accepted, refused, (unsigned long long)ran, (unsigned long long)skipped,
               (unsigned long long)rejected);
    }
    CHECK_MSG(good[0] == 3, "some copies ran");
    munmap(src, pg);
    munmap(good, pg);
    munmap(bad, pg);
    munmap(rec, pg);
}

/* past-eof [noreadv] */
static void past_eof_args(int argc, char **argv)
{
    past_eof(argc > 0 && strcmp(argv[0], "noreadv") == 0);
}

/* race [user]: with "user", the program's own copy function. */
static void race_args(int argc, char **argv)
{
    if (argc > 0 && strcmp(argv[0], "user") == 0)
        copy_fn = hc_fault_user_copy;
    race();
}

static void teardown(void)
{
    cuStreamDestroy(stream);
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("handlers", handlers),
    CHECK_SCENARIO("deaths", deaths),
    CHECK_SCENARIO("buffers", buffers),
    CHECK_SCENARIO("record-gone", record_gone),
    CHECK_SCENARIO("relaunch", relaunch),
    CHECK_SCENARIO_ARGS("past-eof", past_eof_args, 0, 1, "[noreadv]"),
    CHECK_SCENARIO_ARGS("race", race_args, 0, 1, "[user]"),
    CHECK_SCENARIO("snapshot", snapshot),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_fault", "fault %s", CHECK_CASES(scenarios), argc, argv,
                               setup, teardown);
}
