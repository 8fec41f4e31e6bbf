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
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
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
        atomic_fetch_add(&stray_hits, 1);
        _exit(3); /* hcguard's copy fault reached the program: the test fails loudly */
    }
    program_hits++;
    siglongjmp(*jump_to, 1);
}

static void install_program_handler(void)
{
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = program_segv;
    a.sa_flags = SA_SIGINFO;
    sigemptyset(&a.sa_mask);
    REQUIRE(sigaction(SIGSEGV, &a, NULL) == 0);
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

/* During a copy (or not): a contained copy that faults, then the
 * program's own fault. */
static void on_usr1(int sig)
{
    (void)sig;
    char buf[256];
    hcg_fault_info fi;
    int ok = hcg_fault_copy(buf, n_bad + 8, sizeof buf, &fi) == -1 && fi.sig == SIGSEGV &&
             fi.addr >= (uintptr_t)n_bad && fi.addr < (uintptr_t)n_bad + pg;
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
    return NULL;
}

static void test_nested(void)
{
    char *bad, *mem = map_with_hole(pg, &bad);
    n_bad = bad;
    install_program_handler();
    CHECK_EQ(hcg_fault_install(), 0);
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_usr1;
    sigemptyset(&a.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &a, NULL) == 0);
    nested_result r = {0, 0, 0, 0};
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

static const check_case cases[] = {
    CHECK_CASE(boundary),
    CHECK_CASE(boundary_movsb),
    CHECK_CASE(boundary_memcpy),
    CHECK_CASE(nested),
    CHECK_CASE(nested_movsb),
};

int main(int argc, char **argv)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    return check_main("test_fault", CHECK_CASES(cases), argc, argv);
}
