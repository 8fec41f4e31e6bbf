/*
 * bench_copy: the bandwidth of hcguard's fault-contained copy
 * (hcg_fault_copy: glibc memcpy inside a recovery point, the handlers
 * installed) against a plain memcpy of the same buffers, in one process,
 * for sizes from 4 KiB to 256 MiB.
 *
 * For each size the two are timed batch by batch, alternating which goes
 * first, on the same source and destination (warm in the caches when they
 * fit, as a plain copy would find them); a batch copies at least 64 MiB
 * (or one copy). Prints per size the median GB/s of each, the ratio of the
 * medians contained / plain (1.000: no difference), and the ratio of the
 * best batches (less sensitive to a machine shared with other work).
 *   bench_copy [ROUNDS] [MAX_MIB]
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hcg.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Through a volatile pointer: the compiler may neither inline nor drop it. */
static void *(*volatile plain_memcpy)(void *, const void *, size_t) = memcpy;

static uint64_t time_plain(void *dst, const void *src, size_t n, unsigned reps)
{
    uint64_t t = now_ns();
    for (unsigned i = 0; i < reps; i++)
        plain_memcpy(dst, src, n);
    return now_ns() - t;
}

static uint64_t time_contained(void *dst, const void *src, size_t n, unsigned reps)
{
    uint64_t t = now_ns();
    for (unsigned i = 0; i < reps; i++)
        if (hcg_fault_copy(dst, src, n, NULL) != 0) {
            fprintf(stderr, "bench_copy: a copy faulted\n");
            exit(1);
        }
    return now_ns() - t;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v. */
static uint64_t median(uint64_t *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 15;
    size_t max = (argc > 2 ? (size_t)atoi(argv[2]) : 256) << 20;
    if (rounds < 1 || rounds > 1000 || max < 4096) {
        fprintf(stderr, "usage: bench_copy [ROUNDS 1..1000] [MAX_MIB]\n");
        return 2;
    }
    if (hcg_fault_install() != 0 || !hcg_fault_ready()) {
        fprintf(stderr, "bench_copy: cannot install the fault handlers\n");
        return 1;
    }
    unsigned char *src = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *dst = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t *tp = calloc(rounds, sizeof *tp), *tc = calloc(rounds, sizeof *tc);
    if (src == MAP_FAILED || dst == MAP_FAILED || !tp || !tc) {
        perror("bench_copy");
        return 1;
    }
    memset(src, 0x5a, max);
    memset(dst, 0, max);
    printf("%-10s %10s %10s %8s %8s\n", "size", "plain_GB/s", "hcguard", "ratio", "best");
    for (size_t n = 4096; n <= max; n *= 2) {
        unsigned reps = n >= (64u << 20) ? 1 : (unsigned)((64u << 20) / n);
        time_plain(dst, src, n, reps); /* warm both */
        time_contained(dst, src, n, reps);
        for (unsigned r = 0; r < rounds; r++) {
            if (r & 1) {
                tc[r] = time_contained(dst, src, n, reps);
                tp[r] = time_plain(dst, src, n, reps);
            } else {
                tp[r] = time_plain(dst, src, n, reps);
                tc[r] = time_contained(dst, src, n, reps);
            }
        }
        double bytes = (double)n * reps;
        double gp = bytes / (double)median(tp, rounds), gc = bytes / (double)median(tc, rounds);
        double best = (double)tp[0] / (double)tc[0]; /* sorted by median() */
        char label[32];
        if (n >= (1u << 20))
            snprintf(label, sizeof label, "%zu MiB", n >> 20);
        else
            snprintf(label, sizeof label, "%zu KiB", n >> 10);
        printf("%-10s %10.2f %10.2f %8.3f %8.3f\n", label, gp, gc, gc / gp, best);
    }
    printf("(GB/s = bytes per ns; medians of %u rounds; ratio = hcguard / plain of the medians,\n"
           " best = of the fastest batches)\n", rounds);
    /* The fixed cost per copy, which only small copies can feel: 64 bytes,
     * a million times, best of the rounds. */
    uint64_t bp = UINT64_MAX, bc = UINT64_MAX;
    for (unsigned r = 0; r < rounds; r++) {
        uint64_t p = time_plain(dst, src, 64, 1000000), c = time_contained(dst, src, 64, 1000000);
        bp = p < bp ? p : bp;
        bc = c < bc ? c : bc;
    }
    printf("per-copy cost (64 B): plain %.1f ns, hcguard %.1f ns: %.1f ns more\n", bp / 1e6,
           bc / 1e6, ((double)bc - (double)bp) / 1e6);
    return 0;
}
