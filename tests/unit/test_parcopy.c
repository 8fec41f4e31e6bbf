/*
 * The split copy (src/check/parcopy.c): parts that never overlap and cover
 * the copy, exact contents for sizes around every threshold and odd
 * alignments, two copies racing for the pool (one runs whole), a fault in
 * one part reported once, the pool stopped (exec, exit) and made again,
 * and fork while split copies run on another thread.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcg.h"
#include "../common/check.h"

#define MIB ((size_t)1 << 20)
#define THREADS 4

static size_t pg;

/* ---- the partition --------------------------------------------------------- */
static void test_parts(void)
{
    static const size_t sizes[] = {2 * MIB, 2 * MIB + 1, 3 * MIB - 7, 4 * MIB, 7 * MIB + 4095,
                                   64 * MIB + 3, (size_t)1 << 40};
    int checked = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (uintptr_t dst = 0x10000; dst < 0x10000 + 130; dst += 13)
            for (unsigned parts = 2; parts <= 64; parts++) {
                size_t n = sizes[s];
                if (n / parts < HCG_COPY_PART_MIN)
                    continue;
                size_t prev = 0;
                CHECK_EQ(hcg_copy_part_start(dst, n, parts, 0), 0);
                for (unsigned i = 1; i <= parts; i++) {
                    size_t a = hcg_copy_part_start(dst, n, parts, i);
                    if (i < parts)
                        CHECK_EQ((dst + a) % 64, 0); /* a cache line of dst */
                    CHECK(a > prev);                 /* no overlap, no empty part */
                    CHECK(a - prev >= HCG_COPY_PART_MIN - 64);
                    prev = a;
                }
                CHECK_EQ(prev, n); /* the whole copy */
                checked++;
            }
    CHECK(checked > 1000);
}

/* ---- contents ------------------------------------------------------------- */
static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 13) + 7);
}

/* A split copy of n bytes from src + smis into dst, after guard bytes and
 * dmis more (src: n + smis bytes, dst: n + dmis + 2 * guard): 1 if exact. */
enum { GUARD = 256 };
static int copy_checked_in(unsigned char *src, unsigned char *dst, size_t n, size_t dmis,
                           size_t smis, unsigned threads)
{
    for (size_t i = 0; i < n; i++)
        src[smis + i] = pattern(i);
    memset(dst, 0xee, n + dmis + 2 * GUARD);
    unsigned char *d = dst + GUARD + dmis;
    int ok = hcg_copy_split(d, src + smis, n, threads, NULL) == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = d[i] == pattern(i);
    for (size_t i = 0; ok && i < GUARD + dmis; i++)
        ok = dst[i] == 0xee;
    for (size_t i = 0; ok && i < GUARD; i++)
        ok = d[n + i] == 0xee;
    return ok;
}

/* The same in buffers of its own. */
static int copy_checked(size_t n, size_t dmis, size_t smis, unsigned threads)
{
    unsigned char *src = malloc(n + smis + 1), *dst = malloc(n + dmis + 2 * GUARD);
    REQUIRE(src && dst);
    int ok = copy_checked_in(src, dst, n, dmis, smis, threads);
    free(src);
    free(dst);
    return ok;
}

static void test_contents(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    static const size_t sizes[] = {0, 1, 4095, MIB, 2 * MIB - 1, 2 * MIB, 2 * MIB + 1,
                                   5 * MIB + 13, 17 * MIB + 63};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t m = 0; m < 3; m++) {
            CHECK_MSG(copy_checked(sizes[s], m * 17, m * 5 + (m == 2), THREADS),
                      "size %zu misaligned by %zu", sizes[s], m);
            CHECK_MSG(copy_checked(sizes[s], m * 3, 0, 64), "size %zu, 64 threads", sizes[s]);
        }
    /* Workers were made for the copies large enough: THREADS - 1 at least. */
    CHECK(hcg_copy_pool_workers() >= THREADS - 1);
}

/* ---- two copies at once ---------------------------------------------------- */
static atomic_int racing_ok;

static void *racer(void *v)
{
    (void)v;
    int ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= copy_checked(3 * MIB + (size_t)i * 4097, (size_t)i, (size_t)i * 3, THREADS);
    atomic_fetch_add(&racing_ok, ok);
    return NULL;
}

static void test_busy(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(pthread_create(&t[i], NULL, racer, NULL) == 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(atomic_load(&racing_ok), 3);
}

/* ---- a fault in one part ---------------------------------------------------- */
static void test_fault(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    size_t n = 8 * MIB;
    unsigned char *src = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *dst = malloc(n);
    REQUIRE(src != MAP_FAILED && dst);
    memset(src, 3, n);
    unsigned char *hole = src + n / 2 + 3 * pg; /* in a part a worker or this thread takes */
    REQUIRE(mprotect(hole, pg, PROT_NONE) == 0);
    for (int round = 0; round < 4; round++) {
        hcg_fault_info fi;
        memset(&fi, 0, sizeof fi);
        CHECK_EQ(hcg_copy_split(dst, src, n, THREADS, &fi), -1);
        CHECK_EQ(fi.sig, SIGSEGV);
        CHECK_EQ(fi.code, SEGV_ACCERR);
        CHECK(fi.addr >= (uintptr_t)hole && fi.addr < (uintptr_t)hole + pg);
    }
    /* The pool goes on: a good copy after. */
    REQUIRE(mprotect(hole, pg, PROT_READ | PROT_WRITE) == 0);
    memset(dst, 0, n);
    CHECK_EQ(hcg_copy_split(dst, src, n, THREADS, NULL), 0);
    CHECK(dst[0] == 3 && dst[n / 2 + 3 * pg] == 3 && dst[n - 1] == 3);
    munmap(src, n);
    free(dst);
}

/* ---- stopped (exec) and closed (exit) ---------------------------------------- */
static void test_stop(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    CHECK(copy_checked(4 * MIB, 1, 2, THREADS));
    CHECK(hcg_copy_pool_workers() >= THREADS - 1);
    hcg_copy_pool_stop(0); /* before exec: joined, made again when needed */
    CHECK_EQ(hcg_copy_pool_workers(), 0);
    CHECK(copy_checked(4 * MIB, 3, 0, THREADS));
    CHECK(hcg_copy_pool_workers() >= THREADS - 1);
    hcg_copy_pool_stop(1); /* exit: joined for good; copies still made, whole */
    CHECK_EQ(hcg_copy_pool_workers(), 0);
    CHECK(copy_checked(4 * MIB, 0, 5, THREADS));
    CHECK_EQ(hcg_copy_pool_workers(), 0);
}

/* ---- fork while split copies run ------------------------------------------- */
static atomic_int stop_copying, copies_made;

/* Split copies without end, in buffers made once: no thread but the
 * forking one allocates while it forks. A fork while another thread is
 * inside malloc leaves the child with that allocator's lock held under
 * ASan (GCC 12's runtime takes none around fork; glibc's malloc does), and
 * the child's first malloc waited for ever. */
static void *copying(void *v)
{
    int *ok = v;
    size_t n = 6 * MIB;
    unsigned char *src = malloc(n + 9 + 1), *dst = malloc(n + 7 + 2 * GUARD);
    REQUIRE(src && dst);
    while (!atomic_load(&stop_copying)) {
        *ok &= copy_checked_in(src, dst, n, 7, 9, THREADS);
        atomic_fetch_add(&copies_made, 1);
    }
    free(src);
    free(dst);
    return NULL;
}

static void test_fork(void)
{
    CHECK_EQ(hcg_fault_install(), 0);
    hcg_fork_register();
    int ok = 1;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, copying, &ok) == 0);
    /* The pool's workers made and started (their start allocates). */
    while (atomic_load(&copies_made) == 0)
        usleep(1000);
    for (int i = 0; i < 6; i++) {
        usleep(2000);
        pid_t pid = fork();
        if (pid == 0) {
            /* The child's own pool: made at its first split copy. (Not
             * under ThreadSanitizer, which cannot follow a thread started
             * after a multi-threaded fork: there the copy is made whole.) */
            int good = hcg_copy_pool_workers() == 0;
#if defined(__SANITIZE_THREAD__)
            good = good && copy_checked(5 * MIB, 1, 1, 1);
#else
            good = good && copy_checked(5 * MIB, 1, 1, THREADS) &&
                   hcg_copy_pool_workers() >= THREADS - 1;
#endif
            hcg_copy_pool_stop(1);
            _exit(good ? 0 : 1);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", i, st);
    }
    atomic_store(&stop_copying, 1);
    pthread_join(t, NULL);
    CHECK(ok);
}

static const check_case cases[] = {
    CHECK_CASE(parts),
    CHECK_CASE(contents),
    CHECK_CASE(busy),
    CHECK_CASE(fault),
#ifdef HCG_TEST_NO_THREADED_FORK
    CHECK_CASE_NAMED_ONLY(fork), /* under an emulator that cannot (validate.cmake) */
#else
    CHECK_CASE(fork),
#endif
    CHECK_CASE(stop),
};

int main(int argc, char **argv)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    return check_main("test_parcopy", CHECK_CASES(cases), argc, argv);
}
