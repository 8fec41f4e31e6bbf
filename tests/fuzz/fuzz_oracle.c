/*
 * Fuzzing of the process oracle against real page layouts.
 *
 * Each input builds a layout of NPAGES pages in a reserved region: holes,
 * PROT_NONE, read-only and read-write anonymous pages, and read-only and
 * read-write pages of a shared file mapping whose file ends somewhere in
 * the region (pages past its end raise SIGBUS when touched). The layout is
 * changed through libc's munmap and mprotect (which bump hcguard's unmap
 * generation) or, per input, through the raw system calls and MAP_FIXED
 * over a mapping (as glibc's free does: hcguard is not told). Then queries from the rest of the input are checked against
 * the ground truth, with PROCMAP_QUERY or the /proc/self/maps fallback,
 * and the caches on or off:
 *   - read() never faults, and returns the bytes exactly when every page
 *     is readable, else -1;
 *   - classify() gives the verdict of the first failing page, except that
 *     with the cache on after raw changes it may be stale (by design: the
 *     copies it lets through are fault-contained), never a crash.
 * fuzz_oracle_replay also runs its sequence again with process_vm_readv
 * denied by a seccomp filter; the libFuzzer binary does when
 * HCG_FUZZ_DENY_VM_READV=1.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcg.h"
#include "replay.h"
#include "../e2e/deny_vm_readv.h"

#define NPAGES 12

enum kind { K_HOLE, K_NONE, K_RO, K_RW, K_FILE_RW, K_FILE_RO, K_COUNT };

typedef struct layout {
    unsigned char kind[NPAGES];
    unsigned eof_pages; /* file pages [0, eof_pages) exist */
    int raw;            /* changes made past libc */
    int cache;
} layout;

static size_t pg;
static char *g_region; /* NPAGES + 2 pages; the first and last stay holes */
static int g_memfd = -1;
static unsigned char g_buf[NPAGES * 16384];
static unsigned long g_checked_classify, g_checked_read, g_faulting_reads;

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static unsigned take(input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static unsigned take16(input *in)
{
    unsigned a = take(in);
    return a | take(in) << 8;
}

static unsigned char pattern(size_t page, size_t off)
{
    return (unsigned char)(page * 31 + off * 7 + 1);
}

static void fail(const char *what, uintptr_t off, size_t len, int got, int want)
{
    fprintf(stderr, "fuzz_oracle: %s at page offset %#lx len %zu: got %d, want %d\n", what,
            (unsigned long)off, len, got, want);
    abort();
}

/* ---- the layout ---------------------------------------------------------- */
/* Through libc: munmap first (hcguard wraps it and is told), since hcguard
 * does not wrap mmap, whose MAP_FIXED would replace a mapping unseen. */
static void *map_fixed(void *at, int prot, int file, size_t off, int raw)
{
    int flags = MAP_FIXED | (file ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS);
    if (!raw)
        munmap(at, pg);
    void *p = raw ? (void *)syscall(SYS_mmap, at, pg, prot, flags, file ? g_memfd : -1, off)
                  : mmap(at, pg, prot, flags, file ? g_memfd : -1, (off_t)off);
    if (p != at) {
        perror("fuzz_oracle: mmap");
        abort();
    }
    return p;
}

static void place(const layout *l, size_t i)
{
    char *at = g_region + (i + 1) * pg;
    int raw = l->raw;
    switch (l->kind[i]) {
    case K_HOLE:
        if (raw)
            syscall(SYS_munmap, at, pg);
        else
            munmap(at, pg);
        break;
    case K_NONE: map_fixed(at, PROT_NONE, 0, 0, raw); break;
    case K_RO:
    case K_RW:
        map_fixed(at, PROT_READ | PROT_WRITE, 0, 0, raw);
        for (size_t o = 0; o < pg; o++)
            at[o] = (char)pattern(i, o);
        if (l->kind[i] == K_RO) {
            if (raw)
                syscall(SYS_mprotect, at, pg, PROT_READ);
            else
                mprotect(at, pg, PROT_READ);
        }
        break;
    default:
        map_fixed(at, l->kind[i] == K_FILE_RW ? PROT_READ | PROT_WRITE : PROT_READ, 1, i * pg,
                  raw);
        break;
    }
}

static void build(layout *l, input *in)
{
    unsigned flags = take(in);
    hcg_oracle_force_fallback(flags & 1);
    l->cache = (flags & 2) != 0;
    l->raw = (flags & 4) != 0;
    hcg_oracle_set_cache(l->cache);
    l->eof_pages = take(in) % (NPAGES + 1);
    for (size_t i = 0; i < NPAGES; i++)
        l->kind[i] = (unsigned char)(take(in) % K_COUNT);
    /* The file: pattern bytes in its pages, then its end. */
    if (ftruncate(g_memfd, (off_t)(NPAGES * pg)) != 0)
        abort();
    for (size_t i = 0; i < NPAGES; i++) {
        for (size_t o = 0; o < pg; o++)
            g_buf[o] = pattern(i, o);
        if (pwrite(g_memfd, g_buf, pg, (off_t)(i * pg)) != (ssize_t)pg)
            abort();
    }
    if (ftruncate(g_memfd, (off_t)(l->eof_pages * pg)) != 0)
        abort();
    for (size_t i = 0; i < NPAGES; i++)
        place(l, i);
}

static void teardown(void)
{
    /* Back to one PROT_NONE reservation, through libc. */
    munmap(g_region, (NPAGES + 2) * pg);
    if (mmap(g_region, (NPAGES + 2) * pg, PROT_NONE,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) != g_region)
        abort();
    munmap(g_region, pg);
    munmap(g_region + (NPAGES + 1) * pg, pg);
}

/* ---- the ground truth ------------------------------------------------------ */
static int still_hole(size_t i)
{
    unsigned char v;
    return mincore(g_region + (i + 1) * pg, pg, &v) != 0;
}

static hcg_mem page_verdict(const layout *l, size_t i, int write)
{
    switch (l->kind[i]) {
    case K_HOLE: return HCG_MEM_UNMAPPED;
    case K_NONE: return HCG_MEM_NO_READ;
    case K_RO:
    case K_FILE_RO: return write ? HCG_MEM_NO_WRITE : HCG_MEM_OK;
    default: return HCG_MEM_OK;
    }
}

static int page_readable(const layout *l, size_t i)
{
    switch (l->kind[i]) {
    case K_RO:
    case K_RW: return 1;
    case K_FILE_RO:
    case K_FILE_RW: return i < l->eof_pages;
    default: return 0;
    }
}

/* Holes are still holes (nothing else was mapped there meanwhile). */
static int holes_intact(const layout *l, size_t first, size_t last)
{
    for (size_t i = first; i <= last; i++)
        if (l->kind[i] == K_HOLE && !still_hole(i))
            return 0;
    return 1;
}

static void check_classify(const layout *l, size_t off, size_t len, int write)
{
    const hcg_oracle *o = hcg_oracle_process();
    size_t first = off / pg, last = (off + len - 1) / pg;
    hcg_mem want = HCG_MEM_OK;
    for (size_t i = first; i <= last && want == HCG_MEM_OK; i++)
        want = page_verdict(l, i, write);
    hcg_mem got = o->classify(o->ctx, (uintptr_t)g_region + pg + off, len, write);
    if (l->raw && l->cache)
        return; /* may be stale, by design; it did not crash */
    if (!holes_intact(l, first, last))
        return;
    if (got != want)
        fail(write ? "classify for writing" : "classify for reading", off, len, (int)got,
             (int)want);
    g_checked_classify++;
}

static void check_read(const layout *l, size_t off, size_t len)
{
    const hcg_oracle *o = hcg_oracle_process();
    size_t first = off / pg, last = (off + len - 1) / pg;
    int want = 0;
    for (size_t i = first; i <= last; i++)
        if (!page_readable(l, i))
            want = -1;
    memset(g_buf, 0xee, len);
    int got = o->read(o->ctx, (uintptr_t)g_region + pg + off, g_buf, len);
    if (!holes_intact(l, first, last))
        return;
    if (got != want)
        fail("read", off, len, got, want);
    if (got == 0)
        for (size_t k = 0; k < len; k++)
            if (g_buf[k] != pattern((off + k) / pg, (off + k) % pg))
                fail("read bytes", off + k, 1, g_buf[k], pattern((off + k) / pg, (off + k) % pg));
    g_checked_read++;
    g_faulting_reads += got != 0;
}

/* ---- the target ---------------------------------------------------------- */
static void init_once(void)
{
    if (g_region)
        return;
    pg = (size_t)sysconf(_SC_PAGESIZE);
    if (pg > 16384)
        abort();
    g_memfd = memfd_create("hcg-fuzz-oracle", MFD_CLOEXEC);
    g_region = mmap(NULL, (NPAGES + 2) * pg, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_memfd < 0 || g_region == MAP_FAILED)
        abort();
    munmap(g_region, pg);
    munmap(g_region + (NPAGES + 1) * pg, pg);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *deny = getenv("HCG_FUZZ_DENY_VM_READV");
    if (deny && strcmp(deny, "1") == 0 && deny_vm_readv() != 0)
        fprintf(stderr, "fuzz_oracle: cannot deny process_vm_readv here\n");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    layout l;
    init_once();
    build(&l, &in);
    size_t span = NPAGES * pg;
    for (int q = 0; q < 8 && in.n >= 5; q++) {
        unsigned op = take(&in);
        size_t off = (take16(&in) * 7u) % span;
        size_t len = 1 + take16(&in) % (op & 8 ? 64 : span - off);
        if (len > span - off)
            len = span - off;
        if (op & 1)
            check_read(&l, off, len);
        else
            check_classify(&l, off, len, (op & 2) != 0);
    }
    teardown();
    hcg_oracle_force_fallback(0);
    hcg_oracle_set_cache(1);
    return 0;
}

#ifdef HCG_FUZZ_REPLAY
/* fuzz_oracle_replay [-n COUNT] [FILE...]: COUNT random inputs from a fixed
 * seed, then again in a child with process_vm_readv denied, then each FILE. */
int main(int argc, char **argv)
{
    unsigned long count = 3000, files = 0;
    int i = replay_count_arg(argc, argv, &count);
    replay_random(count, 0x6f7261636c65u, 64, 0);
    printf("fuzz_oracle_replay: %lu classify and %lu reads checked (%lu refused)\n",
           g_checked_classify, g_checked_read, g_faulting_reads);
    if (g_checked_classify < count / 2 || g_checked_read < count / 2 || g_faulting_reads == 0) {
        fprintf(stderr, "fuzz_oracle_replay: too few checks: the generator proves little\n");
        return 1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (deny_vm_readv() != 0) {
            printf("fuzz_oracle_replay: seccomp unavailable: process_vm_readv not denied\n");
            fflush(NULL);
            _exit(0);
        }
        replay_random(count / 2, 0x73656363u, 64, 0);
        printf("fuzz_oracle_replay: process_vm_readv denied: %lu more reads checked\n",
               g_checked_read);
        fflush(NULL);
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "fuzz_oracle_replay: the run with process_vm_readv denied failed\n");
        return 1;
    }
    for (; i < argc; i++)
        if (replay_path(argv[i], &files) != 0)
            return 2;
    return 0;
}
#endif
