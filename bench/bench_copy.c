/*
 * bench_copy: the bandwidth of hcguard's copies against a plain memcpy, in
 * one process, as ratios measured side by side.
 *
 * 1. The fault-contained copy (hcg_fault_copy: glibc's memcpy entered
 *    through the armed entry, the handlers installed) against a plain
 *    memcpy of the same size, 4 KiB to MAX_MIB: "hot", the same buffers
 *    again and again (in the caches when they fit, as a small copy
 *    repeated finds them), and "cold", each copy at the next place of a
 *    256 MiB region (or MAX_MIB if larger), so that the data comes from
 *    memory. Each round makes at least 16 MiB (or one copy) of each kind,
 *    in chunks of 256 KiB (or one copy) alternating between the two; the
 *    ratio is the median over the rounds of plain time / hcguard time of
 *    the same round (1.000: no difference; below: hcguard slower). GB/s
 *    are medians.
 * 2. The per-copy fixed cost: a 24-byte record (the word loop) and a
 *    100-byte copy (memcpy) a million times each, best round.
 * 3. The split copy (HCGUARD_COPY_THREADS, hcg_copy_split) with 1 thread
 *    against N threads, 64 KiB to MAX_MIB, pinned to pageable and pageable
 *    to pinned when a CUDA driver is there (cuMemHostAlloc), plain
 *    malloc'd memory otherwise: the speed-up, median over the rounds of
 *    time with 1 / time with N of the same round.
 *
 *   bench_copy [ROUNDS] [MAX_MIB] [THREADS,...]
 * Defaults: 15 rounds, 256 MiB, threads 2,4,8.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hcg.h"
#include "bench_time.h"

#define MIB ((size_t)1 << 20)
#define COLD_REGION (256 * MIB)
#define BATCH (16 * MIB)
#define MAX_THREAD_COLS 8

/* Through a volatile pointer: the compiler may neither inline nor drop it. */
static void *(*volatile plain_memcpy)(void *, const void *, size_t) = memcpy;

static void die(const char *what)
{
    fprintf(stderr, "bench_copy: %s\n", what);
    exit(1);
}

/* Where the copies of a batch go: always the start (hot), or walking a
 * region (cold), each copy at the next place, page-aligned. */
typedef struct walker {
    unsigned char *src, *dst;
    size_t region, next;
    int cold;
} walker;

static size_t place(walker *w, size_t n)
{
    if (!w->cold)
        return 0;
    size_t step = (n + 4095) & ~(size_t)4095;
    if (w->next + step > w->region)
        w->next = 0;
    size_t at = w->next;
    w->next += step;
    return at;
}

static uint64_t time_plain(walker *w, size_t n, unsigned reps)
{
    uint64_t t = now_ns();
    for (unsigned i = 0; i < reps; i++) {
        size_t at = place(w, n);
        plain_memcpy(w->dst + at, w->src + at, n);
    }
    return now_ns() - t;
}

/* The method's own noise: set, the "hcguard" side runs plain memcpy too
 * (an A/A comparison, the "noise" columns). */
static int same_both;

static uint64_t time_contained(walker *w, size_t n, unsigned reps)
{
    if (same_both)
        return time_plain(w, n, reps);
    uint64_t t = now_ns();
    for (unsigned i = 0; i < reps; i++) {
        size_t at = place(w, n);
        if (hcg_fault_copy(w->dst + at, w->src + at, n, NULL) != 0)
            die("a copy faulted");
    }
    return now_ns() - t;
}

static void size_label(char *buf, size_t len, size_t n)
{
    if (n >= MIB)
        snprintf(buf, len, "%zu MiB", n / MIB);
    else
        snprintf(buf, len, "%zu KiB", n >> 10);
}

typedef struct figures {
    double plain_gbs, hcg_gbs, ratio;
} figures;

/* One round: reps copies of each kind, in chunks of about CHUNK bytes (or
 * one copy) that alternate between the two, so that whatever else the
 * machine does falls on both alike. */
#define CHUNK (256u << 10)
static void one_round(walker *w, size_t n, unsigned reps, unsigned r, double *tp, double *tc)
{
    unsigned k = n >= CHUNK ? 1 : (unsigned)(CHUNK / n);
    uint64_t p = 0, c = 0;
    for (unsigned done = 0, i = 0; done < reps; done += k, i++) {
        unsigned m = reps - done < k ? reps - done : k;
        if ((i + r) & 1) {
            c += time_contained(w, n, m);
            p += time_plain(w, n, m);
        } else {
            p += time_plain(w, n, m);
            c += time_contained(w, n, m);
        }
    }
    *tp = (double)p;
    *tc = (double)c;
}

static figures contained_vs_plain(walker *w, size_t n, unsigned rounds, double *tp, double *tc,
                                  double *ratio)
{
    unsigned reps = n >= BATCH ? 1 : (unsigned)(BATCH / n);
    time_plain(w, n, reps); /* warm both */
    time_contained(w, n, reps);
    for (unsigned r = 0; r < rounds; r++) {
        one_round(w, n, reps, r, &tp[r], &tc[r]);
        ratio[r] = tp[r] / tc[r];
    }
    double bytes = (double)n * reps;
    figures f = {bytes / median_double(tp, rounds), bytes / median_double(tc, rounds), median_double(ratio, rounds)};
    return f;
}

/* size bytes of fresh memory, written (no page fault inside the timing). */
static unsigned char *buffer(size_t size, int fill)
{
    unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("cannot map the buffers");
    memset(p, fill, size);
    return p;
}

/* Hot copies use src/dst of max bytes (as a program's buffers); cold ones
 * walk a region of their own. */
static void part_contained(size_t max, unsigned rounds)
{
    size_t region = max > COLD_REGION ? max : COLD_REGION;
    unsigned char *src = buffer(max, 0x5a), *dst = buffer(max, 0);
    unsigned char *csrc = buffer(region, 0x5a), *cdst = buffer(region, 0);
    double *tp = calloc(rounds, sizeof *tp), *tc = calloc(rounds, sizeof *tc);
    double *ratio = calloc(rounds, sizeof *ratio);
    if (!tp || !tc || !ratio)
        die("out of memory");
    printf("fault-contained copy against plain memcpy (GB/s = bytes per ns; ratio = plain time /"
           " hcguard time,\nmedian over %u rounds of the same round's pair; 1.000: no "
           "difference)\n",
           rounds);
    size_t lo, hi, none = 0;
    hcg_fault_movsb_window(&lo, &hi, 0);
    if (lo < hi)
        printf("contained copies of [%zu, %zu) bytes by rep movsb (the processor moves strings "
               "fast);\n'memcpy path': the hot ratio of those sizes through glibc's memcpy "
               "instead\n", lo, hi);
    else
        printf("no contained copy by rep movsb here (every one through glibc's memcpy)\n");
    printf("noise: the same ratio with plain memcpy on both sides (hot, cold)\n");
    printf("%-9s | %9s %9s %7s | %9s %9s %7s | %s | %s\n", "size", "hot:plain", "hcguard", "ratio",
           "cold:plain", "hcguard", "ratio", "memcpy path", "noise hot, cold");
    for (size_t n = 4096; n <= max; n *= 2) {
        walker hot = {src, dst, max, 0, 0}, cold = {csrc, cdst, region, 0, 1};
        figures h = contained_vs_plain(&hot, n, rounds, tp, tc, ratio);
        figures c = contained_vs_plain(&cold, n, rounds, tp, tc, ratio);
        char label[32], other[16] = "-";
        if (n >= lo && n < hi) {
            size_t l0 = lo, h0 = hi;
            hcg_fault_movsb_window(&none, &none, 1);
            figures m = contained_vs_plain(&hot, n, rounds, tp, tc, ratio);
            hcg_fault_movsb_window(&l0, &h0, 1);
            snprintf(other, sizeof other, "%.3f", m.ratio);
        }
        same_both = 1;
        figures hn = contained_vs_plain(&hot, n, rounds, tp, tc, ratio);
        figures cn = contained_vs_plain(&cold, n, rounds, tp, tc, ratio);
        same_both = 0;
        size_label(label, sizeof label, n);
        printf("%-9s | %9.2f %9.2f %7.3f | %9.2f %9.2f %7.3f | %11s | %.3f %.3f\n", label,
               h.plain_gbs, h.hcg_gbs, h.ratio, c.plain_gbs, c.hcg_gbs, c.ratio, other, hn.ratio,
               cn.ratio);
    }
    /* The fixed cost per copy, which only small copies can feel: a record
     * (24 bytes, aligned: hcguard's word loop) and 100 bytes (memcpy), a
     * million times, best round. */
    static const size_t fixed[] = {24, 100};
    for (size_t k = 0; k < 2; k++) {
        walker w = {src, dst, max, 0, 0};
        uint64_t bp = UINT64_MAX, bc = UINT64_MAX;
        for (unsigned r = 0; r < rounds; r++) {
            uint64_t p = time_plain(&w, fixed[k], 1000000);
            uint64_t c = time_contained(&w, fixed[k], 1000000);
            bp = p < bp ? p : bp;
            bc = c < bc ? c : bc;
        }
        printf("per-copy cost (%zu B%s): plain %.2f ns, hcguard %.2f ns: %+.2f ns\n", fixed[k],
               k ? "" : ", word loop", bp / 1e6, bc / 1e6, ((double)bc - (double)bp) / 1e6);
    }
    printf("\n");
    free(tp);
    free(tc);
    free(ratio);
    munmap(src, max);
    munmap(dst, max);
    munmap(csrc, region);
    munmap(cdst, region);
}

/* ---- split copies ----------------------------------------------------------- */
typedef int (*cuInit_fn)(unsigned);
typedef int (*cuDeviceGet_fn)(int *, int);
typedef int (*cuCtxRetain_fn)(void **, int);
typedef int (*cuCtxSet_fn)(void *);
typedef int (*cuMemHostAlloc_fn)(void **, size_t, unsigned);

/* n bytes of pinned memory from the CUDA driver, or NULL without one. */
static void *pinned(size_t n)
{
    static cuMemHostAlloc_fn alloc;
    static int tried;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        cuInit_fn init = h ? (cuInit_fn)dlsym(h, "cuInit") : NULL;
        cuDeviceGet_fn get = h ? (cuDeviceGet_fn)dlsym(h, "cuDeviceGet") : NULL;
        cuCtxRetain_fn retain = h ? (cuCtxRetain_fn)dlsym(h, "cuDevicePrimaryCtxRetain") : NULL;
        cuCtxSet_fn set = h ? (cuCtxSet_fn)dlsym(h, "cuCtxSetCurrent") : NULL;
        alloc = h ? (cuMemHostAlloc_fn)dlsym(h, "cuMemHostAlloc") : NULL;
        int dev;
        void *ctx;
        if (!init || !get || !retain || !set || !alloc || init(0) != 0 || get(&dev, 0) != 0 ||
            retain(&ctx, dev) != 0 || set(ctx) != 0)
            alloc = NULL;
    }
    void *p = NULL;
    if (!alloc || alloc(&p, n, 0) != 0)
        return NULL;
    return p;
}

static uint64_t time_split(unsigned char *dst, const unsigned char *src, size_t n, unsigned reps,
                           unsigned threads)
{
    uint64_t t = now_ns();
    for (unsigned i = 0; i < reps; i++)
        if (hcg_copy_split(dst, src, n, threads, NULL) != 0)
            die("a split copy faulted");
    return now_ns() - t;
}

/* One direction: 1 thread against each of threads[], per size. */
static void split_direction(const char *name, unsigned char *dst, const unsigned char *src,
                            size_t max, unsigned rounds, const unsigned *threads, unsigned nt)
{
    double *t1 = calloc(rounds, sizeof *t1), *tn = calloc(rounds, sizeof *tn);
    double *sp = calloc(rounds, sizeof *sp);
    if (!t1 || !tn || !sp)
        die("out of memory");
    printf("%s: speed-up of N threads over 1 (median over %u rounds of the same round's 1-thread"
           " time / N-thread time)\n",
           name, rounds);
    printf("%-9s %10s", "size", "1 thr GB/s");
    for (unsigned k = 0; k < nt; k++)
        printf("   N=%-2u GB/s x1   ", threads[k]);
    printf("\n");
    for (size_t n = 64 << 10; n <= max; n *= 2) {
        unsigned reps = n >= 64 * MIB ? 1 : (unsigned)(64 * MIB / n);
        char label[32];
        size_label(label, sizeof label, n);
        printf("%-9s", label);
        double one = 0;
        for (unsigned k = 0; k < nt; k++) {
            time_split(dst, src, n, 1, threads[k]); /* the workers made, the pages warm */
            for (unsigned r = 0; r < rounds; r++) {
                uint64_t a, b;
                if (r & 1) {
                    b = time_split(dst, src, n, reps, threads[k]);
                    a = time_split(dst, src, n, reps, 1);
                } else {
                    a = time_split(dst, src, n, reps, 1);
                    b = time_split(dst, src, n, reps, threads[k]);
                }
                t1[r] = (double)a;
                tn[r] = (double)b;
                sp[r] = (double)a / (double)b;
            }
            double bytes = (double)n * reps;
            if (k == 0) {
                one = bytes / median_double(t1, rounds);
                printf(" %10.2f", one);
            }
            printf("   %9.2f %6.3f", bytes / median_double(tn, rounds), median_double(sp, rounds));
        }
        printf("\n");
    }
    printf("\n");
    free(t1);
    free(tn);
    free(sp);
}

static unsigned parse_threads(const char *s, unsigned *out)
{
    unsigned n = 0;
    while (s && *s && n < MAX_THREAD_COLS) {
        char *end;
        unsigned long t = strtoul(s, &end, 10);
        if (end == s || t < 2 || t > HCG_COPY_THREADS_MAX)
            return 0;
        out[n++] = (unsigned)t;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return 0;
    }
    return n;
}

static void part_split(size_t max, unsigned rounds, const unsigned *threads, unsigned nt)
{
    unsigned char *pin_a = pinned(max), *pin_b = pin_a ? pinned(max) : NULL;
    unsigned char *page_a = malloc(max), *page_b = malloc(max);
    if (!page_a || !page_b)
        die("out of memory");
    memset(page_a, 1, max);
    memset(page_b, 2, max);
    if (pin_a && pin_b) {
        memset(pin_a, 3, max);
        memset(pin_b, 4, max);
        printf("split copies, pinned memory from the CUDA driver (cuMemHostAlloc)\n");
        split_direction("pinned -> pageable", page_a, pin_a, max, rounds, threads, nt);
        split_direction("pageable -> pinned", pin_b, page_b, max, rounds, threads, nt);
    } else {
        printf("split copies, no CUDA driver: malloc'd memory both sides\n");
        split_direction("malloc -> malloc", page_a, page_b, max, rounds, threads, nt);
    }
    printf("(copies under 2 MiB are never split: their ratio shows only the noise; the "
           "default is %d thread)\n",
           HCG_COPY_THREADS_DEFAULT);
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 15;
    size_t max = (size_t)(argc > 2 ? atoi(argv[2]) : 256) * MIB;
    unsigned threads[MAX_THREAD_COLS] = {2, 4, 8}, nt = 3;
    if (argc > 3)
        nt = parse_threads(argv[3], threads);
    if (rounds < 1 || rounds > 1000 || max < MIB || nt == 0) {
        fprintf(stderr, "usage: bench_copy [ROUNDS 1..1000] [MAX_MIB] [THREADS,... (2..64)]\n");
        return 2;
    }
    if (hcg_fault_install() != 0 || !hcg_fault_ready())
        die("cannot install the fault handlers");
    part_contained(max, rounds);
    part_split(max, rounds, threads, nt);
    return 0;
}
