/*
 * Attacks on the fault-contained copy (src/check/fault.c) itself, with the
 * program's own SIGSEGV handler installed:
 *   boundary  copies that fault at every offset around a page boundary
 *             (the first, a middle and the last byte of a PROT_NONE page,
 *             ranges that straddle into it or start in it), reading and
 *             writing, of sizes that take every path of memcpy and of the
 *             word loop, from several threads at once; between them the
 *             threads fault on their own (a store, libc's memcpy) and the
 *             program's handler must get exactly those faults
 *   boundary_movsb, boundary_memcpy: the same with every copy but the
 *             word loop's made by rep movsb, or by glibc's memcpy (x86-64;
 *             boundary takes the sizes each way as hcguard sets them)
 *   nested    another thread interrupts large contained copies with a
 *             signal whose handler makes a contained copy that faults and
 *             a fault of its own (libc's memcpy, caught by the program's
 *             handler): the inner fault is contained, the program's fault
 *             reaches the program, and the outer copy, interrupted, still
 *             has its own faults contained afterwards
 *   flags     the program's handler set with SA_RESETHAND, SIG_IGN or
 *             SA_NODEFER after hcguard's (in a child each): contained
 *             copies stay contained and do not use up SA_RESETHAND, the
 *             program's faults behave as the flag says, the last kills
 *   edges     sizes at rep movsb's window edges (4095 .. 65537), odd
 *             alignments, src == dst, overlap, faults at each edge read
 *             and written (the bytes before the hole copied, the
 *             direction flag clear after), n above PTRDIFF_MAX (n - lo
 *             wraps in the window's compare; glibc's memcpy wrapped around
 *             and returned 0), non-canonical and top-byte addresses
 *   nested_altstack: nested with the signal's handler on a sigaltstack
 *             (SA_ONSTACK), outer copies by rep movsb and by memcpy; the
 *             handler's copies fault by rep movsb (8 KiB) and by memcpy
 *   sent      SIGSEGV sent (tgkill, sigqueue) and SIGBUS BUS_MCEERR_AO (the
 *             kernel's asynchronous report of poisoned memory) arriving in
 *             long copies reach the program's handler, the copies complete
 *             (BUS_MCEERR_AO was taken for the copy's fault and lost)
 *   vanish    another thread munmaps, mprotects or ftruncates (MAP_SHARED
 *             memfd: SIGBUS) the middle of a 64 MiB copy's source or
 *             destination: whole, or -1 with the fault there and, by rep
 *             movsb, every byte before it copied
 *   truncated copies past a file's end under a MAP_SHARED mapping, read
 *             and written: SIGBUS contained, what precedes it copied
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sched.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcg.h"
#include "../common/check.h"

static size_t pg;

/* ---- the program's handler: counts and jumps back ----------------------- */
static _Thread_local sigjmp_buf *jump_to;
static _Thread_local int program_hits;
static atomic_int stray_hits; /* a fault the program did not expect */

static void program_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    if (!jump_to) {
        char b[96];
        int k = snprintf(b, sizeof b, "stray fault: sig %d code %d addr %#lx\n", sig,
                         si->si_code, (unsigned long)(uintptr_t)si->si_addr);
        if (k > 0 && write(2, b, (size_t)k) < 0)
            _exit(5);
        atomic_fetch_add(&stray_hits, 1);
        _exit(3); /* hcguard's copy fault reached the program: the test fails loudly */
    }
    program_hits++;
    siglongjmp(*jump_to, 1);
}

/* sig's action: h (SA_SIGINFO), else plain (a function, SIG_IGN or
 * SIG_DFL), with flags, nothing masked. */
static void set_action(int sig, void (*h)(int, siginfo_t *, void *), void (*plain)(int),
                       int flags)
{
    struct sigaction a;
    memset(&a, 0, sizeof a);
    if (h)
        a.sa_sigaction = h;
    else
        a.sa_handler = plain;
    a.sa_flags = flags | (h ? SA_SIGINFO : 0);
    sigemptyset(&a.sa_mask);
    REQUIRE(sigaction(sig, &a, NULL) == 0);
}

static void install_program_handler(void)
{
    set_action(SIGSEGV, program_segv, NULL, 0);
}

/* libc's memcpy, not inlined: a fault in libc's code that is the
 * program's, not hcguard's. */
static void *(*volatile libc_memcpy)(void *, const void *, size_t) = memcpy;

/* The program faults on its own: a store, then libc's memcpy. 1 if the
 * program's handler got both. */
static int program_faults(char *bad)
{
    sigjmp_buf jb;
    int before = program_hits;
    jump_to = &jb;
    if (sigsetjmp(jb, 1) == 0)
        *(volatile char *)bad = 1;
    if (sigsetjmp(jb, 1) == 0)
        libc_memcpy(bad, bad - 300, 200);
    jump_to = NULL;
    return program_hits - before == 2;
}

/* [good pages][one PROT_NONE page], the good part filled with a pattern. */
static char *map_with_hole(size_t good, char **bad)
{
    char *p = mmap(NULL, good + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    REQUIRE(mprotect(p + good, pg, PROT_NONE) == 0);
    for (size_t i = 0; i < good; i++)
        p[i] = (char)(i * 7 + 1);
    *bad = p + good;
    return p;
}

/* ---- boundary --------------------------------------------------------------- */
#define GOOD (160u * 1024) /* enough for the largest size below */
static const size_t sizes[] = {1, 7, 8, 16, 24, 40, 64, 65, 100, 128, 256, 1000,
                               2048, 4096, 5000, 16384, 65536, 131072};

typedef struct boundary_result {
    int copies, contained, faults_ok, good_ok, program_ok;
} boundary_result;

/* One copy of n bytes whose range covers [bad + at_lo, bad + at_hi]
 * (offsets from the PROT_NONE page, at_lo < 0 straddles into it), read
 * from the hole (write = 0) or written into it. */
static void one_fault(boundary_result *r, char *good, char *bad, char *other, size_t n,
                      long first, int write)
{
    hcg_fault_info fi;
    memset(&fi, 0, sizeof fi);
    char *at = bad + first;
    (void)good;
    int rc = write ? hcg_fault_copy(at, other, n, &fi) : hcg_fault_copy(other, at, n, &fi);
    r->copies++;
    if (rc == -1)
        r->contained++;
    if (rc == -1 && fi.sig == SIGSEGV && fi.code == SEGV_ACCERR && fi.addr >= (uintptr_t)bad &&
        fi.addr < (uintptr_t)bad + pg)
        r->faults_ok++;
    else
        fprintf(stderr, "size %zu at %ld %s: rc %d sig %d code %d addr %+ld\n", n, first,
                write ? "write" : "read", rc, fi.sig, fi.code, (long)(fi.addr - (uintptr_t)bad));
}

static void *boundary_thread(void *v)
{
    boundary_result *r = v;
    char *bad, *good = map_with_hole(GOOD, &bad);
    char *other = malloc(GOOD + 64);
    REQUIRE(other);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        for (int write = 0; write < 2; write++) {
            /* Ending in the hole's first byte, its middle and its last
             * byte (when n reaches that far), and starting at each. */
            long ends[3] = {0, (long)pg / 2, (long)pg - 1};
            for (int e = 0; e < 3; e++) {
                if ((size_t)ends[e] + 1 <= n) /* the range starts at or before bad */
                    one_fault(r, good, bad, other, n, ends[e] + 1 - (long)n, write);
                if ((size_t)ends[e] + n <= pg) /* the range starts in the hole */
                    one_fault(r, good, bad, other, n, ends[e], write);
            }
            /* Aligned for the word loop, straddling: 8 bytes before the hole. */
            if (n > 8 && n % 8 == 0)
                one_fault(r, good, bad, other, n, -8, write);
            /* Ending on the last good byte: copied whole. */
            memset(other, 0, n);
            int rc = write ? hcg_fault_copy(bad - n, other, n, NULL)
                           : hcg_fault_copy(other, bad - n, n, NULL);
            if (rc == 0 && memcmp(other, bad - n, n) == 0)
                r->good_ok++;
            else
                fprintf(stderr, "size %zu up to the hole: rc %d\n", n, rc);
            /* write left the good part zeroed: put the pattern back */
            if (write)
                for (size_t k = GOOD - n; k < GOOD; k++)
                    good[k] = (char)(k * 7 + 1);
            r->program_ok += program_faults(bad);
        }
    }
    free(other);
    munmap(good, GOOD + pg);
    return NULL;
}

#define N_THREADS 4

/* Every copy not made by the word loop made one way (x86-64), or as
 * hcguard chose (how < 0). */
static void movsb_for(int how, const char *name)
{
    static size_t lo0, hi0;
    static int saved;
    if (!saved) {
        hcg_fault_movsb_window(&lo0, &hi0, 0);
        saved = 1;
    }
    size_t lo = how < 0 ? lo0 : 1, hi = how < 0 ? hi0 : how ? (size_t)1 << 40 : 1;
    hcg_fault_movsb_window(&lo, &hi, 1);
    printf("%s: rep movsb for sizes [%zu, %zu)\n", name, lo, hi);
}

static void test_boundary(void)
{
    install_program_handler(); /* before hcguard's */
    CHECK_EQ(hcg_fault_install(), 0);
    install_program_handler(); /* and after: chained */
    pthread_t t[N_THREADS];
    boundary_result r[N_THREADS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < N_THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, boundary_thread, &r[i]) == 0);
    int rounds = (int)(sizeof sizes / sizeof sizes[0]) * 2;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK(r[i].copies > rounds * 3);
        CHECK_EQ(r[i].contained, r[i].copies);
        CHECK_EQ(r[i].faults_ok, r[i].copies);
        CHECK_EQ(r[i].good_ok, rounds);
        CHECK_EQ(r[i].program_ok, rounds);
    }
    CHECK_EQ(atomic_load(&stray_hits), 0);
    printf("boundary: %d threads x %d faulting copies contained, %d program faults each "
           "reached the program\n",
           N_THREADS, r[0].copies, 2 * r[0].program_ok);
}

/* ---- record ------------------------------------------------------------------ */
/* A copy record read by the launch path's own read, next to the hole at
 * every offset that reaches it (aligned: the three-word read; not: the
 * general copy): contained, the destination untouched by a read that
 * faulted; one that ends before the hole read whole. */
static void test_record(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    char *bad, *good = map_with_hole(pg, &bad);
    int contained = 0, untouched = 0, tried = 0;
    for (long at = -23; at < 8; at++) {
        hcguard_copy_record got;
        memset(&got, 0x5a, sizeof got);
        int rc = hcg_fault_read_record(&got, bad + at);
        tried++;
        contained += rc != 0;
        const unsigned char *b = (const unsigned char *)&got;
        int same = 1;
        for (size_t i = 0; i < sizeof got; i++)
            same &= b[i] == 0x5a;
        /* The three-word read (x86-64 release builds) writes nothing
         * unless it read all; the general copy may have begun. */
        untouched += same || (at & 7) != 0 || !HCG_FAULT_FIXUP;
    }
    CHECK_EQ(contained, tried);
    CHECK_EQ(untouched, tried);
    hcguard_copy_record whole;
    CHECK_EQ(hcg_fault_read_record(&whole, bad - 24), 0);
    CHECK(memcmp(&whole, bad - 24, sizeof whole) == 0);
    CHECK_EQ(hcg_fault_read_record(&whole, bad - 27), 0); /* not aligned */
    CHECK(memcmp(&whole, bad - 27, sizeof whole) == 0);
    CHECK_EQ(atomic_load(&stray_hits), 0);
    munmap(good, pg + pg);
    printf("record: %d reads reaching the hole contained%s\n", tried,
           HCG_FAULT_FIXUP ? ", the aligned ones wrote nothing" : "");
}

static void test_boundary_movsb(void)
{
    movsb_for(1, "boundary_movsb");
    test_boundary();
    movsb_for(-1, "boundary_movsb");
}

static void test_boundary_memcpy(void)
{
    movsb_for(0, "boundary_memcpy");
    test_boundary();
    movsb_for(-1, "boundary_memcpy");
}

/* ---- nested ------------------------------------------------------------------ */
#define BIG (4u << 20)
static char *n_bad;
static atomic_int usr1_runs, usr1_ok;
static atomic_int copier_done;
static int nested_altstack; /* SIGUSR1 with SA_ONSTACK, the copier on a sigaltstack */

/* During a copy (or not): a contained copy that faults, then the
 * program's own fault. */
static void on_usr1(int sig)
{
    (void)sig;
    char buf[256];
    hcg_fault_info fi;
    int ok = hcg_fault_copy(buf, n_bad + 8, sizeof buf, &fi) == -1 && fi.sig == SIGSEGV &&
             fi.addr >= (uintptr_t)n_bad && fi.addr < (uintptr_t)n_bad + pg;
    /* 8 KiB: rep movsb where hcguard sets the window; its last 4 KiB - 8
     * in the hole. */
    static _Thread_local char mid[8192];
    ok = ok && hcg_fault_copy(mid, n_bad - 4096 + 8, sizeof mid, &fi) == -1 &&
         fi.sig == SIGSEGV && fi.addr >= (uintptr_t)n_bad && fi.addr < (uintptr_t)n_bad + pg;
    size_t lo, hi;
    hcg_fault_movsb_window(&lo, &hi, 0);
    if (sizeof mid >= lo && sizeof mid < hi) /* in order, up to the hole */
        ok = ok && fi.addr == (uintptr_t)n_bad && memcmp(mid, n_bad - 4096 + 8, 4096 - 8) == 0;
    sigjmp_buf jb, *was = jump_to;
    int hits = program_hits;
    jump_to = &jb;
    if (sigsetjmp(jb, 1) == 0)
        libc_memcpy(buf, n_bad, sizeof buf);
    jump_to = was;
    ok = ok && program_hits == hits + 1;
    atomic_fetch_add(&usr1_runs, 1);
    atomic_fetch_add(&usr1_ok, ok);
}

typedef struct nested_result {
    int good, good_ok, faulting, faulting_ok;
} nested_result;

static void *copier(void *v)
{
    nested_result *r = v;
    stack_t ss = {.ss_sp = NULL, .ss_flags = 0, .ss_size = 1u << 16};
    if (nested_altstack) { /* the handlers run there, hcguard's included */
        ss.ss_sp = malloc(ss.ss_size);
        REQUIRE(ss.ss_sp && sigaltstack(&ss, NULL) == 0);
    }
    char *bad, *src = map_with_hole(BIG, &bad);
    char *dst = malloc(BIG);
    REQUIRE(dst);
    for (int i = 0; i < 24; i++) {
        hcg_fault_info fi;
        memset(dst, 0, BIG);
        r->good++;
        if (hcg_fault_copy(dst, src, BIG, NULL) == 0 && memcmp(dst, src, BIG) == 0)
            r->good_ok++;
        /* The last 100 bytes in the hole. */
        r->faulting++;
        if (hcg_fault_copy(dst, bad - BIG + 100, BIG, &fi) == -1 && fi.sig == SIGSEGV &&
            fi.addr >= (uintptr_t)bad && fi.addr < (uintptr_t)bad + pg)
            r->faulting_ok++;
        else
            fprintf(stderr, "faulting copy %d: sig %d addr %+ld\n", i, fi.sig,
                    (long)(fi.addr - (uintptr_t)bad));
    }
    atomic_store(&copier_done, 1);
    free(dst);
    if (ss.ss_sp) {
        stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
        REQUIRE(sigaltstack(&off, NULL) == 0);
        free(ss.ss_sp);
    }
    return NULL;
}

static void test_nested(void)
{
    char *bad, *mem = map_with_hole(pg, &bad);
    n_bad = bad;
    install_program_handler();
    CHECK_EQ(hcg_fault_install(), 0);
    set_action(SIGUSR1, NULL, on_usr1, nested_altstack ? SA_ONSTACK : 0);
    nested_result r = {0, 0, 0, 0};
    atomic_store(&copier_done, 0);
    atomic_store(&usr1_runs, 0);
    atomic_store(&usr1_ok, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, copier, &r) == 0);
    int sent = 0;
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer runs a signal's handler later, at a point of its
     * own, with every signal blocked: a fault in it kills whatever hcguard
     * does. The copies alone, then. */
    sent = 2000;
    printf("nested: no signals under ThreadSanitizer (it defers handlers, faults blocked)\n");
#elif defined(__SANITIZE_ADDRESS__)
    /* Sanitizer builds recover with siglongjmp, and AddressSanitizer's hook
     * on it takes the thread's own lock (pthread_getattr_np): a signal that
     * lands while that lock is held, and faults in its handler, waits on it
     * for ever. The release build (the assembly fix-up, no lock) is the one
     * that takes the signals. */
    sent = 2000;
    printf("nested: no signals under AddressSanitizer (its longjmp hook takes a lock)\n");
#endif
    while (!atomic_load(&copier_done) && sent < 2000) {
        if (pthread_kill(t, SIGUSR1) != 0)
            break;
        sent++;
        usleep(200);
    }
    pthread_join(t, NULL);
    CHECK_EQ(r.good_ok, r.good);
    CHECK_EQ(r.faulting_ok, r.faulting);
    CHECK_EQ(atomic_load(&usr1_ok), atomic_load(&usr1_runs));
    CHECK_EQ(atomic_load(&stray_hits), 0);
    printf("nested: %d copies, %d signals handled during them, every fault where it belongs\n",
           r.good + r.faulting, atomic_load(&usr1_runs));
    munmap(mem, 2 * pg);
}

/* The outer copies and the handler's by rep movsb (x86-64). */
static void test_nested_movsb(void)
{
    movsb_for(1, "nested_movsb");
    test_nested();
    movsb_for(-1, "nested_movsb");
}

/* ---- flags: the program's handler with SA_RESETHAND, SA_NODEFER, SIG_IGN --
 * Each in a child (the process must die of the program's own fault at the
 * end, as without hcguard); the child reports its stages on a pipe. First
 * in the table: no thread exists yet to stop a fork under user-mode
 * emulation. */
static int stage_fd = -1;
static sigjmp_buf flags_jb;
static volatile sig_atomic_t flags_depth, flags_inner_ok;

static void stage(char c)
{
    if (write(stage_fd, &c, 1) != 1)
        _exit(4);
}

/* A faulting contained copy by rep movsb (where there is one) and one by
 * memcpy: 1 if both were contained. */
static int contained_pair(char *bad)
{
    static char buf[8192];
    hcg_fault_info fi;
    int ok = hcg_fault_copy(buf, bad - 4096 + 8, 8192, &fi) == -1 && fi.sig == SIGSEGV;
    ok = ok && hcg_fault_copy(buf, bad + 8, 200, &fi) == -1 && fi.sig == SIGSEGV;
    return ok;
}

static void flags_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    if (++flags_depth == 1 && stage_fd >= 0 && n_bad) {
        /* SA_NODEFER: a second fault of the program's, inside its handler,
         * reaches the handler again; a contained copy in there too. */
        *(volatile char *)n_bad = 1;
    }
    if (n_bad)
        flags_inner_ok = contained_pair(n_bad);
    siglongjmp(flags_jb, 1);
}

/* how: 0 SA_RESETHAND, 1 SIG_IGN, 2 SA_NODEFER. */
static void flags_child(int how, char *bad)
{
    CHECK_EQ(hcg_fault_install(), 0);
    if (how == 0)
        set_action(SIGSEGV, flags_handler, NULL, SA_RESETHAND);
    else if (how == 1)
        set_action(SIGSEGV, NULL, SIG_IGN, 0);
    else
        set_action(SIGSEGV, flags_handler, NULL, SA_NODEFER);
    if (contained_pair(bad))
        stage('a');
    if (how == 1) {
        kill(getpid(), SIGSEGV); /* sent, ignored: nothing happens */
        stage('b');
    } else {
        flags_depth = 0;
        n_bad = how == 2 ? bad : NULL;
        if (sigsetjmp(flags_jb, 1) == 0)
            *(volatile char *)bad = 1;
        if (flags_depth == (how == 2 ? 2 : 1) && (how != 2 || flags_inner_ok))
            stage('b');
    }
    if (contained_pair(bad))
        stage('c');
    struct sigaction now;
    REQUIRE(sigaction(SIGSEGV, NULL, &now) == 0);
    if ((how == 0 && now.sa_handler == SIG_DFL) || (how == 1 && now.sa_handler == SIG_IGN) ||
        (how == 2 && now.sa_sigaction == flags_handler))
        stage('d');
    if (how == 2)
        set_action(SIGSEGV, NULL, SIG_DFL, 0);
    *(volatile char *)bad = 1; /* the program's fault: default action, death */
    stage('x');
    _exit(0);
}

static void test_flags(void)
{
    static const char *names[] = {"SA_RESETHAND", "SIG_IGN", "SA_NODEFER"};
    char *bad, *mem = map_with_hole(pg, &bad);
    for (int how = 0; how < 3; how++) {
        int fds[2];
        REQUIRE(pipe(fds) == 0);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            stage_fd = fds[1];
            flags_child(how, bad);
        }
        close(fds[1]);
        char got[8] = {0};
        size_t len = 0;
        ssize_t k;
        while (len < sizeof got - 1 && (k = read(fds[0], got + len, sizeof got - 1 - len)) > 0)
            len += (size_t)k;
        close(fds[0]);
        int st = 0;
        REQUIRE(waitpid(pid, &st, 0) == pid);
        CHECK_MSG(strcmp(got, "abcd") == 0, "%s: stages %s", names[how], got);
        CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "%s: status %#x", names[how], st);
        printf("flags: %s: copies contained, program faults its own, died of SIGSEGV\n",
               names[how]);
    }
    munmap(mem, 2 * pg);
}

/* ---- edges: sizes at the window's edges, odd pointers, odd sizes -------- */
#if defined(__x86_64__)
static unsigned long flags_now(void)
{
    unsigned long f;
    __asm__ volatile("pushfq; popq %0" : "=r"(f));
    return f;
}
#endif

/* Where a fault ending a range at the hole is reported: its first byte
 * (x86-64 reports the first byte of the page an access crosses into; an
 * Arm core may report the access's own start). */
#if defined(__x86_64__)
#define AT_HOLE(a, bad) ((a) == (uintptr_t)(bad))
#else
#define AT_HOLE(a, bad) ((a) + 64 >= (uintptr_t)(bad) && (a) < (uintptr_t)(bad) + pg)
#endif

/* A copy of n from src + so to dst + dof, checked against memmove's. */
static int copied_right(size_t n, size_t so, size_t dof)
{
    static char src[(64u << 10) + 64], dst[(64u << 10) + 64], want[(64u << 10) + 64];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)(i * 13 + 5);
    memset(dst, 0x5a, sizeof dst);
    memcpy(want, dst, sizeof want);
    memcpy(want + dof, src + so, n);
    return hcg_fault_copy(dst + dof, src + so, n, NULL) == 0 && memcmp(dst, want, sizeof dst) == 0;
}

static void edges_once(const char *how)
{
    static const size_t ns[] = {4095, 4096, 4097, 65535, 65536, 65537};
    size_t lo, hi;
    hcg_fault_movsb_window(&lo, &hi, 0);
    int bad_copies = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t so = 0; so < 8; so += 3)
            for (size_t dof = 0; dof < 8; dof += 5)
                if (!copied_right(ns[i], so, dof)) {
                    bad_copies++;
                    fprintf(stderr, "%s: size %zu +%zu +%zu copied wrong\n", how, ns[i], so, dof);
                }
    CHECK_EQ(bad_copies, 0);
    /* Faulting at the window's edges, each way: the fault in the hole. */
    char *bad, *mem = map_with_hole(128u << 10, &bad);
    static char other[(64u << 10) + 1];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        size_t n = ns[i];
        int movsb = n >= lo && n < hi; /* by rep movsb: in order, up to the hole */
        hcg_fault_info fi;
        memset(&fi, 0, sizeof fi);
        memset(other, 0, n);
        CHECK_MSG(hcg_fault_copy(other, bad - n + 1, n, &fi) == -1 && fi.sig == SIGSEGV &&
                      AT_HOLE(fi.addr, bad),
                  "%s: read %zu: sig %d at %+ld", how, n, fi.sig, (long)(fi.addr - (uintptr_t)bad));
        if (movsb)
            CHECK(memcmp(other, bad - n + 1, n - 1) == 0);
        memset(other, (int)i + 1, n);
        memset(&fi, 0, sizeof fi);
        CHECK_MSG(hcg_fault_copy(bad - n + 1, other, n, &fi) == -1 && fi.sig == SIGSEGV &&
                      AT_HOLE(fi.addr, bad),
                  "%s: write %zu: sig %d at %+ld", how, n, fi.sig,
                  (long)(fi.addr - (uintptr_t)bad));
        if (movsb)
            CHECK(memcmp(bad - n + 1, other, n - 1) == 0);
#if defined(__x86_64__)
        /* The recovered copy leaves the direction flag clear: a backward
         * move after it copies right. */
        CHECK_EQ(flags_now() & 0x400, 0);
        memmove(other + 1, other, 4096);
        CHECK_EQ(flags_now() & 0x400, 0);
#endif
    }
    /* src == dst, and one byte apart (memmove's business, but it must not
     * fault or write outside [dst, dst + n)). */
    char *p = mem;
    for (size_t i = 0; i < 8192; i++)
        p[i] = (char)i;
    CHECK_EQ(hcg_fault_copy(p, p, 8192, NULL), 0);
    int same = 1;
    for (size_t i = 0; i < 8192; i++)
        same &= p[i] == (char)i;
    CHECK(same);
    p[8192] = 77;
    p[8193] = 78;
    CHECK_EQ(hcg_fault_copy(p + 1, p, 8192, NULL), 0);
    CHECK_EQ(p[8193], 78); /* written: [1, 8193) alone */
    CHECK_EQ(p[0], 0);
    /* n with the top bit set (n - lo wraps in the window's compare): the
     * copy runs into the end of the mapping, and that fault is contained. */
    /* glibc's memcpy, given the last two, wrapped around, wrote below dst
     * and returned. */
    static const size_t huge[] = {(size_t)1 << 63, ((size_t)1 << 63) | 8192, SIZE_MAX - 4095,
                                  SIZE_MAX - 100000, SIZE_MAX};
    hcg_fault_info fi;
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
        for (int write = 0; write < 2; write++) {
            memset(&fi, 0, sizeof fi);
            int rc = write ? hcg_fault_copy(bad - 4096, other, huge[i], &fi)
                           : hcg_fault_copy(other, bad - 4096, huge[i], &fi);
            CHECK_MSG(rc == -1 && fi.sig == SIGSEGV && fi.code == SI_KERNEL && fi.addr == 0,
                      "%s: %s %#zx: rc %d sig %d code %d", how, write ? "write" : "read",
                      huge[i], rc, fi.sig, fi.code);
        }
    /* Addresses no mapping can have: non-canonical on x86-64 (a general
     * protection fault, no address), top-byte tagged on aarch64. */
    static const uintptr_t wild[] = {(uintptr_t)1 << 63, ((uintptr_t)1 << 63) + 4096,
                                     (uintptr_t)-4096,
#if defined(__x86_64__) /* qemu-aarch64 reports a fault past its 48 bits at 0 */
                                     (uintptr_t)0x0001000000000000u
#endif
    };
    for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++)
        for (size_t k = 0; k < 3; k++) {
            static const size_t wn[] = {100, 8192, 1u << 20};
            memset(&fi, 0, sizeof fi);
            CHECK_MSG(hcg_fault_copy(other, (void *)wild[i], wn[k] > 65536 ? 65536 : wn[k], &fi) ==
                              -1 &&
                          fi.sig == SIGSEGV,
                      "%s: from %#lx", how, (unsigned long)wild[i]);
            memset(&fi, 0, sizeof fi);
            CHECK_MSG(hcg_fault_copy((void *)wild[i], other, wn[k] > 65536 ? 65536 : wn[k], &fi) ==
                              -1 &&
                          fi.sig == SIGSEGV,
                      "%s: to %#lx", how, (unsigned long)wild[i]);
        }
    munmap(mem, (128u << 10) + pg);
    printf("edges (%s): window [%zu, %zu): sizes at its edges copied and contained\n", how, lo, hi);
}

static void test_edges(void)
{
    install_program_handler();
    CHECK_EQ(hcg_fault_install(), 0);
    install_program_handler();
    edges_once("as set");
    movsb_for(1, "edges");
    edges_once("all movsb");
    movsb_for(0, "edges");
    edges_once("no movsb");
    movsb_for(-1, "edges");
    CHECK_EQ(atomic_load(&stray_hits), 0);
}

/* The same with the signal's handler on a sigaltstack (SA_ONSTACK), the
 * outer copies by rep movsb and by memcpy. */
static void test_nested_altstack(void)
{
    nested_altstack = 1;
    movsb_for(1, "nested_altstack");
    test_nested();
    movsb_for(0, "nested_altstack");
    test_nested();
    movsb_for(-1, "nested_altstack");
    nested_altstack = 0;
}

/* ---- sent: signals sent, not raised, during copies go to the program ----
 * A SIGSEGV sent with tgkill or sigqueue (si_code <= 0), and a SIGBUS the
 * kernel sends on its own time (BUS_MCEERR_AO: memory found poisoned in
 * the background, not by this instruction; queued here by the process
 * itself, as only it may, at an address inside the copy) land during long
 * copies: each must reach the program's handler, and each copy complete. */
#define SENT_N (8u << 20)
static atomic_int sent_seen, sent_stray;
static atomic_int sent_stop;
static char *sent_src;

static void on_sent(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if ((sig == SIGSEGV && si->si_code > 0) ||
        (sig == SIGBUS && si->si_code != BUS_MCEERR_AO && si->si_code > 0))
        atomic_fetch_add(&sent_stray, 1);
    atomic_fetch_add(&sent_seen, 1);
}

typedef struct sent_copier {
    int copies, ok;
} sent_copier;

static void *sent_thread(void *v)
{
    sent_copier *c = v;
    char *dst = malloc(SENT_N);
    REQUIRE(dst);
    while (!atomic_load(&sent_stop)) {
        hcg_fault_info fi;
        memset(dst, 0, SENT_N);
        int rc = hcg_fault_copy(dst, sent_src, SENT_N, &fi);
        c->copies++;
        if (rc == 0 && memcmp(dst, sent_src, SENT_N) == 0)
            c->ok++;
        else
            fprintf(stderr, "sent: copy rc %d sig %d code %d\n", rc, fi.sig, fi.code);
    }
    free(dst);
    return NULL;
}

/* SIGUSR2's handler, on the copier: queue the signal to its own thread (a
 * signal with a positive si_code may be queued by a thread to itself
 * alone). SIGSEGV and SIGBUS are blocked in this handler, so the signal
 * arrives as it returns: in the copy it interrupted, if it did. */
static atomic_int sent_kind;
/* qemu-user, which runs the Arm build here, takes a queued SIGBUS with a
 * positive code for a fault of its own and aborts: the two sent kinds
 * alone there. */
#if defined(__x86_64__)
#define SENT_KINDS 3
#else
#define SENT_KINDS 2
#endif

static void on_usr2(int sig)
{
    (void)sig;
    int kind = atomic_load(&sent_kind);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = kind == 2 ? SIGBUS : SIGSEGV;
    si.si_code = kind == 0 ? SI_TKILL : kind == 1 ? SI_QUEUE : BUS_MCEERR_AO;
    si.si_addr = sent_src + SENT_N / 2;
    int err = errno;
    long rc = kind == 0 ? syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGSEGV)
                        : syscall(SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid),
                                  si.si_signo, &si);
    if (rc != 0)
        atomic_fetch_add(&sent_stray, 1000);
    errno = err;
}

/* Have t send itself one signal; 1 once the program's handler saw it. */
static int send_one(pthread_t t, int kind)
{
    int before = atomic_load(&sent_seen);
    atomic_store(&sent_kind, kind);
    REQUIRE(pthread_kill(t, SIGUSR2) == 0);
    /* Not a timing condition: a lost signal never arrives; 5 s is the
     * bound on waiting for one that does. */
    for (int i = 0; i < 5000 && atomic_load(&sent_seen) == before; i++)
        usleep(1000);
    return atomic_load(&sent_seen) > before;
}

static _Atomic pid_t sent_tid;

static void *sent_thread_tid(void *v)
{
    atomic_store(&sent_tid, (pid_t)syscall(SYS_gettid));
    return sent_thread(v);
}

static void sent_once(const char *how)
{
    set_action(SIGSEGV, on_sent, NULL, 0);
    set_action(SIGBUS, on_sent, NULL, 0);
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_usr2;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGSEGV);
    sigaddset(&a.sa_mask, SIGBUS);
    REQUIRE(sigaction(SIGUSR2, &a, NULL) == 0);
    sent_copier c = {0, 0};
    atomic_store(&sent_stop, 0);
    atomic_store(&sent_tid, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, sent_thread_tid, &c) == 0);
    while (!atomic_load(&sent_tid))
        sched_yield();
    int arrived = 0, sent = 0;
    for (int i = 0; i < 60; i++, sent++)
        arrived += send_one(t, i % SENT_KINDS);
    atomic_store(&sent_stop, 1);
    pthread_join(t, NULL);
    CHECK_EQ(arrived, sent);
    CHECK_EQ(c.ok, c.copies);
    CHECK_EQ(atomic_load(&sent_stray), 0);
    printf("sent (%s): %d signals sent during %d copies of %u bytes, all to the program%s\n",
           how, sent, c.copies, SENT_N,
           SENT_KINDS < 3 ? " (no BUS_MCEERR_AO on this architecture: see SENT_KINDS)" : "");
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    REQUIRE(sigaction(SIGBUS, &dfl, NULL) == 0);
    install_program_handler();
}

static void test_sent(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    sent_src = malloc(SENT_N);
    REQUIRE(sent_src);
    for (size_t i = 0; i < SENT_N; i++)
        sent_src[i] = (char)(i * 11 + 3);
    movsb_for(1, "sent");
    sent_once("rep movsb");
    movsb_for(0, "sent");
    sent_once("memcpy");
    movsb_for(-1, "sent");
    free(sent_src);
}

/* ---- vanish: the buffers unmapped, protected or truncated mid-copy ------
 * Another thread takes away part of a long copy's source or destination
 * while it runs (or before, or after: each outcome is checked, none is
 * waited for): munmap, mprotect(PROT_NONE), or ftruncate of the file
 * under a MAP_SHARED mapping (SIGBUS). The copy returns 0 with everything
 * copied, or -1 with the fault in the part taken away; by rep movsb, the
 * bytes before it copied. */
#define VAN_N (64u << 20)
#define VAN_HOLE (VAN_N / 2)
#define VAN_HOLE_N (1u << 20)
enum { VAN_UNMAP, VAN_PROTECT, VAN_TRUNCATE };
static const char *const van_names[] = {"munmap", "mprotect", "ftruncate"};

typedef struct vanish {
    char *map; /* the side taken away */
    int how, fd;
    atomic_int go;
} vanish;

static void *vanisher(void *v)
{
    vanish *w = v;
    while (!atomic_load(&w->go))
        ;
    if (w->how == VAN_UNMAP)
        REQUIRE(munmap(w->map + VAN_HOLE, VAN_HOLE_N) == 0);
    else if (w->how == VAN_PROTECT)
        REQUIRE(mprotect(w->map + VAN_HOLE, VAN_HOLE_N, PROT_NONE) == 0);
    else
        REQUIRE(ftruncate(w->fd, VAN_HOLE) == 0);
    return NULL;
}

/* Put the part taken away back, filled with the pattern. */
static void van_restore(vanish *w, int is_src)
{
    if (w->how == VAN_UNMAP)
        REQUIRE(mmap(w->map + VAN_HOLE, VAN_HOLE_N, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == w->map + VAN_HOLE);
    else if (w->how == VAN_PROTECT)
        REQUIRE(mprotect(w->map + VAN_HOLE, VAN_HOLE_N, PROT_READ | PROT_WRITE) == 0);
    else
        REQUIRE(ftruncate(w->fd, VAN_N) == 0);
    if (is_src)
        for (size_t i = VAN_HOLE; i < VAN_N; i++)
            w->map[i] = (char)(i * 7 + 1);
}

/* dst[from, to) holds the source's pattern. */
static int van_same(const char *dst, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (dst[i] != (char)(i * 7 + 1))
            return 0;
    return 1;
}

static int van_stopped; /* copies the fault stopped (the rest were whole) */

static int van_round(char *dst, char *src, vanish *w, int is_src)
{
    size_t lo, hi;
    hcg_fault_movsb_window(&lo, &hi, 0);
    int in_order = VAN_N >= lo && VAN_N < hi;
    memset(dst, 0, VAN_N);
    atomic_store(&w->go, 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, vanisher, w) == 0);
    hcg_fault_info fi;
    memset(&fi, 0, sizeof fi);
    atomic_store(&w->go, 1);
    int rc = hcg_fault_copy(dst, src, VAN_N, &fi);
    pthread_join(t, NULL);
    uintptr_t hole = (uintptr_t)w->map + VAN_HOLE;
    uintptr_t hole_end = hole + (w->how == VAN_TRUNCATE ? VAN_N - VAN_HOLE : VAN_HOLE_N);
    int want_sig = w->how == VAN_TRUNCATE ? SIGBUS : SIGSEGV;
    int want_code = w->how == VAN_TRUNCATE ? BUS_ADRERR
                    : w->how == VAN_UNMAP  ? SEGV_MAPERR
                                           : SEGV_ACCERR;
    int ok;
    (void)src; /* taken away, maybe: compared with the pattern it held */
    if (rc == 0) { /* whole, before the part went (not read there now) */
        size_t skip_lo = is_src ? VAN_N : VAN_HOLE, skip_hi = is_src ? VAN_N : hole_end - hole + VAN_HOLE;
        ok = van_same(dst, 0, skip_lo) && van_same(dst, skip_hi, VAN_N);
    } else {
        van_stopped++;
        ok = rc == -1 && fi.sig == want_sig && fi.code == want_code && fi.addr >= hole &&
             fi.addr < hole_end;
        /* Everything before the fault copied: all of it, or, where dst
         * lost its part, what precedes that part (the rest went with it). */
        size_t done = fi.addr - (uintptr_t)w->map;
        if (ok && in_order)
            ok = van_same(dst, 0, is_src || done < VAN_HOLE ? done : VAN_HOLE);
    }
    if (!ok)
        fprintf(stderr, "vanish %s %s: rc %d sig %d code %d at %+ld\n", van_names[w->how],
                is_src ? "src" : "dst", rc, fi.sig, fi.code, (long)(fi.addr - hole));
    van_restore(w, is_src);
    return ok;
}

static char *van_map(int how, int *fd)
{
    *fd = -1;
    if (how == VAN_TRUNCATE) {
        *fd = memfd_create("hcg_test_fault", 0);
        REQUIRE(*fd >= 0 && ftruncate(*fd, VAN_N) == 0);
    }
    char *p = mmap(NULL, VAN_N, PROT_READ | PROT_WRITE,
                   *fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, *fd, 0);
    REQUIRE(p != MAP_FAILED);
    return p;
}

static void vanish_all(const char *mode)
{
    int ok = 0, rounds = 0;
    for (int how = 0; how < 3; how++)
        for (int is_src = 0; is_src < 2; is_src++) {
            vanish w;
            w.how = how;
            char *plain = malloc(VAN_N);
            REQUIRE(plain);
            w.map = van_map(how, &w.fd);
            char *src = is_src ? w.map : plain, *dst = is_src ? plain : w.map;
            for (size_t i = 0; i < VAN_N; i++)
                src[i] = (char)(i * 7 + 1);
            for (int r = 0; r < 2; r++, rounds++)
                ok += van_round(dst, src, &w, is_src);
            munmap(w.map, VAN_N);
            if (w.fd >= 0)
                close(w.fd);
            free(plain);
        }
    CHECK_EQ(ok, rounds);
    printf("vanish (%s): %d copies of 64 MiB with part of a buffer taken away: %d stopped "
           "there, the others whole\n",
           mode, rounds, van_stopped);
    van_stopped = 0;
}

/* A SIGBUS that reaches the program: not one of its own here. */
static void on_van_bus(int sig, siginfo_t *si, void *uc)
{
    char b[128];
    int k = snprintf(b, sizeof b, "vanish: SIGBUS reached the program: code %d addr %#lx pc %#lx\n",
                     si->si_code, (unsigned long)(uintptr_t)si->si_addr,
#if defined(__x86_64__)
                     (unsigned long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP]);
#else
                     (unsigned long)(uintptr_t)uc);
#endif
    (void)sig;
    if (k > 0 && write(2, b, (size_t)k) < 0)
        _exit(5);
    _exit(6);
}

static void test_vanish(void)
{
    set_action(SIGBUS, on_van_bus, NULL, 0);
    install_program_handler();
    CHECK_EQ(hcg_fault_install(), 0);
    movsb_for(1, "vanish");
    vanish_all("rep movsb");
    movsb_for(-1, "vanish");
    vanish_all("as set");
    CHECK_EQ(atomic_load(&stray_hits), 0);
}

/* ---- truncated: a file cut short under a MAP_SHARED mapping -------------
 * Copies of sizes each way round (the window's top, 64 KiB - 1, and 8
 * KiB) from and into the part past the end: SIGBUS at the first page
 * past it, contained; by rep movsb, what lies before copied (the end's
 * partial page reads as zeros past the file's end). */
static void truncated_once(const char *mode)
{
    const size_t len = 64u << 10, end = (16u << 10) + 100, first_bad = 20u << 10;
    size_t lo, hi;
    hcg_fault_movsb_window(&lo, &hi, 0);
    int fd = memfd_create("hcg_test_fault", 0);
    REQUIRE(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(m != MAP_FAILED);
    for (size_t i = 0; i < len; i++)
        m[i] = (char)(i * 5 + 2);
    REQUIRE(ftruncate(fd, (off_t)end) == 0);
    static char buf[64u << 10];
    static const size_t ns[] = {(64u << 10) - 1, 8192};
    for (size_t i = 0; i < 2; i++)
        for (int write = 0; write < 2; write++) {
            size_t n = ns[i], from = len - 1 - n; /* ends before the mapping's last byte */
            if (from > end - 100)
                from = end - 100;
            hcg_fault_info fi;
            memset(&fi, 0, sizeof fi);
            memset(buf, 0x33, n);
            int rc = write ? hcg_fault_copy(m + from, buf, n, &fi)
                           : hcg_fault_copy(buf, m + from, n, &fi);
            int ok = rc == -1 && fi.sig == SIGBUS && fi.code == BUS_ADRERR &&
                     fi.addr >= (uintptr_t)m + first_bad && fi.addr < (uintptr_t)m + len;
            if (ok && n >= lo && n < hi) {
                ok = fi.addr == (uintptr_t)m + first_bad;
                for (size_t k = from; k < first_bad && ok; k++) {
                    char want = write ? 0x33 : k < end ? (char)(k * 5 + 2) : 0;
                    ok = (write ? m[k] : buf[k - from]) == want;
                }
            }
            CHECK_MSG(ok, "%s: %s %zu at %zu: rc %d sig %d code %d at %+ld", mode,
                      write ? "write" : "read", n, from, rc, fi.sig, fi.code,
                      (long)(fi.addr - (uintptr_t)m));
            if (write) /* put the pattern back, and the zeros past the end */
                for (size_t k = from; k < first_bad; k++)
                    m[k] = k < end ? (char)(k * 5 + 2) : 0;
        }
    munmap(m, len);
    close(fd);
    printf("truncated (%s): copies past a file's end stopped by a contained SIGBUS\n", mode);
}

static void test_truncated(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    truncated_once("as set");
    movsb_for(1, "truncated");
    truncated_once("rep movsb");
    movsb_for(0, "truncated");
    truncated_once("memcpy");
    movsb_for(-1, "truncated");
}

/* ---- stale ------------------------------------------------------------------
 * A program's signal handler that siglongjmps out of an armed copy leaves
 * hcg_fault_sp behind. A later fault of the program's own memcpy at that
 * very stack pointer must still go to the program: its return address is
 * the program's, not hcguard's. Made exact here: hcg_fault_sp set to the
 * stack pointer libc's memcpy then runs at, called from code of no object
 * (an anonymous executable page: call *%rax; ret). */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* memcpy(d, s, n) called from page with the stack pointer at sp (8 mod 16)
 * on its entry; what it returned. */
__attribute__((noinline)) static uintptr_t memcpy_at(uintptr_t sp, void *page, void *d,
                                                     const void *src, size_t n)
{
    uintptr_t r = (uintptr_t)libc_memcpy;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "lea 16(%[sp]), %%rsp\n\t"
                     "call *%[page]\n\t"
                     "mov %%r12, %%rsp"
                     : "+a"(r), "+D"(d), "+S"(src), "+d"(n)
                     : [sp] "r"(sp), [page] "r"(page)
                     : "r12", "rcx", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
                       "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                       "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    return r;
}

static void test_stale(void)
{
    char *bad, *mem = map_with_hole(pg, &bad);
    unsigned char *page = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED);
    static const unsigned char code[] = {0xff, 0xd0, 0xc3}; /* call *%rax; ret */
    memcpy(page, code, sizeof code);
    REQUIRE(mprotect(page, pg, PROT_READ | PROT_EXEC) == 0);
    install_program_handler();
    CHECK_EQ(hcg_fault_install(), 0);
    char local[64];
    uintptr_t sp = (((uintptr_t)local - 8192) & ~(uintptr_t)15) - 8;
    /* A good copy that way first: the helper itself works. */
    char src[200], dst[200];
    memset(src, 7, sizeof src);
    CHECK_EQ(memcpy_at(sp, page, dst, src, sizeof dst), (uintptr_t)dst);
    CHECK(dst[199] == 7);
    sigjmp_buf jb;
    int hits = program_hits;
    volatile uintptr_t got = 0;
    hcg_fault_sp = sp; /* what a siglongjmp out of an armed copy leaves */
    jump_to = &jb;
    if (sigsetjmp(jb, 1) == 0)
        got = memcpy_at(sp, page, bad, src, sizeof src);
    jump_to = NULL;
    hcg_fault_sp = 0;
    CHECK_MSG(program_hits == hits + 1, "the program's fault was taken for hcguard's (returned %#lx)",
              (unsigned long)got);
    printf("stale: a program fault at a stale armed stack pointer reached the program\n");
    munmap(page, pg);
    munmap(mem, 2 * pg);
}
#else
static void test_stale(void)
{
    printf("stale: no armed copies in this build (x86-64 release only)\n");
}
#endif

static const check_case cases[] = {
    CHECK_CASE(flags),
    CHECK_CASE(boundary),
    CHECK_CASE(boundary_movsb),
    CHECK_CASE(boundary_memcpy),
    CHECK_CASE(record),
    CHECK_CASE(nested),
    CHECK_CASE(nested_movsb),
    CHECK_CASE(edges),
    CHECK_CASE(nested_altstack),
    CHECK_CASE(sent),
    CHECK_CASE(vanish),
    CHECK_CASE(truncated),
    CHECK_CASE(stale),
};

int main(int argc, char **argv)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    return check_main("test_fault", CHECK_CASES(cases), argc, argv);
}
