/*
 * Fuzz target for hcg_validate_record. Each input builds a small model
 * address space (up to 4 regions with permissions and a device flag) and a
 * record somewhere in it; the verdict is compared with a reference written
 * plainly from the documented rules: 128-bit ends instead of wrap-free
 * subtractions, and per-point region lookups instead of a walk.
 *
 * Built two ways: for libFuzzer (clang -fsanitize=fuzzer), and with
 * HCG_FUZZ_REPLAY as a plain program that feeds a fixed pseudo-random
 * sequence of inputs, plus any files named on its command line, so the
 * invariants run under any compiler in CTest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcg.h"
#include "replay.h"
#include "../common/model_space.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_REGIONS = 4 };

typedef struct space {
    region reg[MAX_REGIONS];
    int n;
    uintptr_t rec_addr;
    hcguard_copy_record rec; /* the bytes at rec_addr */
    int classify_calls, read_calls;
} space;

/* ---- decoding ------------------------------------------------------------ */

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static uint64_t take(input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v = (v << 8) | (in->n ? *in->p : 0);
        if (in->n)
            in->p++, in->n--;
    }
    return v;
}

/* Sizes near the edges that matter: 0, 1, pages, and the top of size_t. */
static uint64_t take_size(input *in)
{
    switch (take(in, 1) % 8) {
    case 0: return 0;
    case 1: return 1 + take(in, 1) % 32;
    case 2: return take(in, 2);
    case 3: return 0x1000u * (1 + take(in, 1) % 4);
    case 4: return SIZE_MAX - take(in, 1);
    case 5: return (uint64_t)1 << (take(in, 1) % 64);
    case 6: return take(in, 8);
    default: return 0x1000u * (1 + take(in, 1) % 4) + take(in, 1) - 128;
    }
}

static uintptr_t take_base(input *in)
{
    switch (take(in, 1) % 4) {
    case 0: return (uintptr_t)take(in, 2) << 12;
    case 1: return UINTPTR_MAX - (uintptr_t)take(in, 3);
    case 2: return (uintptr_t)take(in, 8);
    default: return (uintptr_t)0x7f0000000000u + ((uintptr_t)take(in, 2) << 12);
    }
}

/* An address relative to something interesting: a region's edges, the
 * other field of the record, the top of the address space. */
static uintptr_t take_addr(input *in, const space *s, uintptr_t other)
{
    unsigned mode = (unsigned)take(in, 1);
    const region *r = &s->reg[(mode >> 3) % (unsigned)s->n];
    uintptr_t delta = (uintptr_t)(int64_t)(int8_t)take(in, 1);
    switch (mode % 8) {
    case 0: return 0;
    case 1: return r->start + delta;
    case 2: return r->last + 1 + delta;
    case 3: return r->start + (uintptr_t)take(in, 2);
    case 4: return other + delta;
    case 5: return UINTPTR_MAX - (uintptr_t)take(in, 1);
    case 6: return (uintptr_t)take(in, 8);
    default: return r->last - (uintptr_t)take(in, 1);
    }
}

/* Mostly a record that can be read, so that the later checks are reached. */
static uintptr_t take_rec_addr(input *in, const space *s)
{
    unsigned mode = (unsigned)take(in, 1);
    if (mode % 4 != 0)
        for (int i = 0; i < s->n; i++) {
            const region *r = &s->reg[(i + (int)(mode >> 2)) % s->n];
            if ((r->perm & (R | DEV)) == R && r->last - r->start >= 23)
                return r->start + (uintptr_t)(take(in, 1) % (r->last - r->start - 22));
        }
    return take_addr(in, s, 0);
}

static void build(space *s, input *in)
{
    uintptr_t cur = take_base(in);
    int want = 1 + (int)(take(in, 1) % MAX_REGIONS);
    memset(s, 0, sizeof *s);
    for (int i = 0; i < want; i++) {
        uint64_t gap = i == 0 ? 0 : take_size(in) % 0x10000;
        uint64_t len = 1 + take_size(in) % 0x100000;
        unsigned pb = (unsigned)take(in, 1); /* mostly readable host memory */
        unsigned perm = ((pb & 3) ? R : 0) | ((pb & 4) ? W : 0) |
                        ((pb & 0x18) == 0x18 ? DEV : 0);
        if (gap > UINTPTR_MAX - cur || len - 1 > UINTPTR_MAX - (cur + gap))
            break; /* regions stop at the top of the address space */
        cur += gap;
        s->reg[s->n++] = (region){cur, cur + (len - 1), perm};
        if (cur + (len - 1) == UINTPTR_MAX)
            break;
        cur += len;
    }
    if (s->n == 0) /* the first region did not fit: one byte at the top */
        s->reg[s->n++] = (region){UINTPTR_MAX, UINTPTR_MAX, R | W};
    s->rec_addr = take_rec_addr(in, s);
    s->rec.dst = take_addr(in, s, 0);
    s->rec.src = take_addr(in, s, s->rec.dst);
    s->rec.nbytes = (size_t)take_size(in);
}

/* ---- the model oracle handed to the validator ---------------------------- */

static const region *find(const space *s, uintptr_t p)
{
    return region_at(s->reg, s->n, p);
}

/* A walk from region to region; device regions are not host memory. */
static hcg_mem walk(const space *s, uintptr_t a, uintptr_t last, int write)
{
    return region_walk(s->reg, s->n, a, last, write);
}

static hcg_mem model_classify(void *ctx, uintptr_t a, size_t n, int write)
{
    space *s = ctx;
    const region *r = find(s, a);
    s->classify_calls++;
    if (n == 0 || n - 1 > UINTPTR_MAX - a)
        abort(); /* the validator must never ask for such a range */
    if (r && (r->perm & DEV))
        return HCG_MEM_DEVICE;
    return walk(s, a, a + (n - 1), write);
}

static int model_read(void *ctx, uintptr_t a, void *buf, size_t n)
{
    space *s = ctx;
    s->read_calls++;
    if (n != sizeof s->rec || a != s->rec_addr || n - 1 > UINTPTR_MAX - a ||
        walk(s, a, a + (n - 1), 0) != HCG_MEM_OK)
        return -1;
    memcpy(buf, &s->rec, n);
    return 0;
}

/* ---- the reference ------------------------------------------------------- */

typedef unsigned __int128 u128;
static const u128 SPACE_END = (u128)UINTPTR_MAX + 1;

/* Each sub-range between region edges is uniform; look at its first byte. */
static hcg_mem ref_range(const space *s, uintptr_t a, size_t n, int write)
{
    u128 end = (u128)a + n;
    u128 pts[1 + 2 * MAX_REGIONS];
    int np = 0;
    const region *first = find(s, a);
    if (first && (first->perm & DEV))
        return HCG_MEM_DEVICE;
    pts[np++] = a;
    for (int i = 0; i < s->n; i++) {
        u128 e[2] = {s->reg[i].start, (u128)s->reg[i].last + 1};
        for (int k = 0; k < 2; k++)
            if (e[k] > a && e[k] < end)
                pts[np++] = e[k];
    }
    for (int i = 1; i < np; i++) /* insertion sort: tiny */
        for (int j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
            u128 t = pts[j];
            pts[j] = pts[j - 1];
            pts[j - 1] = t;
        }
    for (int i = 0; i < np; i++) {
        hcg_mem v = region_verdict(find(s, (uintptr_t)pts[i]), write);
        if (v != HCG_MEM_OK)
            return v;
    }
    return HCG_MEM_OK;
}

static int ref_record_readable(const space *s)
{
    for (size_t i = 0; i < sizeof s->rec; i++) {
        u128 p = (u128)s->rec_addr + i;
        const region *r = p < SPACE_END ? find(s, (uintptr_t)p) : NULL;
        if (!r || !(r->perm & R) || (r->perm & DEV))
            return 0;
    }
    return 1;
}

static hcguard_status ref_status(const space *s)
{
    const hcguard_copy_record *r = &s->rec;
    u128 n = r->nbytes, d = r->dst, sr = r->src;
    hcg_mem m;
    if (s->rec_addr == 0)
        return HCGUARD_ERR_NULL_RECORD;
    if (!ref_record_readable(s))
        return HCGUARD_ERR_RECORD_UNREADABLE;
    if (n == 0)
        return HCGUARD_OK;
    if (d == 0)
        return HCGUARD_ERR_NULL_DST;
    if (sr == 0)
        return HCGUARD_ERR_NULL_SRC;
    if (d + n > SPACE_END)
        return HCGUARD_ERR_DST_OVERFLOW;
    if (sr + n > SPACE_END)
        return HCGUARD_ERR_SRC_OVERFLOW;
    if ((d > sr ? d : sr) < (d + n < sr + n ? d + n : sr + n))
        return HCGUARD_ERR_OVERLAP;
    m = ref_range(s, r->dst, r->nbytes, 1);
    if (m == HCG_MEM_UNMAPPED)
        return HCGUARD_ERR_DST_UNMAPPED;
    if (m == HCG_MEM_DEVICE)
        return HCGUARD_ERR_DST_DEVICE;
    if (m != HCG_MEM_OK)
        return HCGUARD_ERR_DST_NOT_WRITABLE;
    m = ref_range(s, r->src, r->nbytes, 0);
    if (m == HCG_MEM_UNMAPPED)
        return HCGUARD_ERR_SRC_UNMAPPED;
    if (m == HCG_MEM_DEVICE)
        return HCGUARD_ERR_SRC_DEVICE;
    if (m != HCG_MEM_OK)
        return HCGUARD_ERR_SRC_NOT_READABLE;
    return HCGUARD_OK;
}

/* ---- invariants ---------------------------------------------------------- */

static const uint8_t *g_data;
static size_t g_size;

static void fail(const space *s, const char *what, hcguard_status got,
                 hcguard_status want)
{
    fprintf(stderr, "fuzz_validate: %s: got %s, want %s\n", what,
            hcguard_status_name(got), hcguard_status_name(want));
    for (int i = 0; i < s->n; i++)
        fprintf(stderr, "  region [%#zx, %#zx] perm %u\n",
                (size_t)s->reg[i].start, (size_t)s->reg[i].last,
                s->reg[i].perm);
    fprintf(stderr, "  record at %#zx: dst %#zx src %#zx nbytes %#zx\n  input:",
            (size_t)s->rec_addr, (size_t)s->rec.dst, (size_t)s->rec.src,
            s->rec.nbytes);
    for (size_t i = 0; i < g_size; i++)
        fprintf(stderr, " %02x", g_data[i]);
    fprintf(stderr, "\n");
    abort();
}

/* OK means: nothing to copy, or two disjoint ranges inside the address
 * space, dst writable and src readable host memory. */
static int ok_is_sound(const space *s)
{
    const hcguard_copy_record *r = &s->rec;
    u128 d = r->dst, sr = r->src, n = r->nbytes;
    if (n == 0)
        return 1;
    return d != 0 && sr != 0 && d + n <= SPACE_END && sr + n <= SPACE_END &&
           (d + n <= sr || sr + n <= d) &&
           ref_range(s, r->dst, r->nbytes, 1) == HCG_MEM_OK &&
           ref_range(s, r->src, r->nbytes, 0) == HCG_MEM_OK;
}

/* Arithmetic first, without the oracle; then dst; then src if dst passed. */
static int expected_classify_calls(const space *s, hcguard_status got)
{
    switch (got) {
    case HCGUARD_OK: return s->rec.nbytes ? 2 : 0;
    case HCGUARD_ERR_DST_UNMAPPED:
    case HCGUARD_ERR_DST_NOT_WRITABLE:
    case HCGUARD_ERR_DST_DEVICE: return 1;
    case HCGUARD_ERR_SRC_UNMAPPED:
    case HCGUARD_ERR_SRC_NOT_READABLE:
    case HCGUARD_ERR_SRC_DEVICE: return 2;
    default: return 0;
    }
}

static unsigned long g_seen[HCGUARD_STATUS_COUNT];

static void check_one(space *s)
{
    hcg_oracle o = {s, model_read, model_classify};
    const hcguard_copy_record poison = {0xdead, 0xbeef, 0xf00d};
    hcguard_copy_record out = poison;
    hcguard_status want = ref_status(s);
    hcguard_status got = hcg_validate_record(&o, (const void *)s->rec_addr, &out);
    int readable = want != HCGUARD_ERR_NULL_RECORD &&
                   want != HCGUARD_ERR_RECORD_UNREADABLE;
    if (got != want)
        fail(s, "status differs from the reference", got, want);
    if (got == HCGUARD_OK && !ok_is_sound(s))
        fail(s, "OK for an unsafe copy", got, want);
    if (readable && memcmp(&out, &s->rec, sizeof out) != 0)
        fail(s, "out not filled from a readable record", got, want);
    if (!readable && memcmp(&out, &poison, sizeof out) != 0)
        fail(s, "out written for an unreadable record", got, want);
    if (s->read_calls != (s->rec_addr != 0))
        fail(s, "record read other than once", got, want);
    if (s->classify_calls != expected_classify_calls(s, got))
        fail(s, "oracle asked other than dst, then src, once each", got, want);
    if (readable && hcg_validate_fields(&o, &s->rec) != got)
        fail(s, "fields and record disagree", hcg_validate_fields(&o, &s->rec),
             got);
    g_seen[got]++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    space s;
    input in = {data, size};
    g_data = data;
    g_size = size;
    build(&s, &in);
    check_one(&s);
    return 0;
}

#ifdef HCG_FUZZ_REPLAY
/* fuzz_validate_replay [-n COUNT] [FILE...]: COUNT random inputs from a
 * fixed seed (default 200000), then each FILE as one input. */
int main(int argc, char **argv)
{
    unsigned long count = 200000, files = 0;
    int i = replay_count_arg(argc, argv, &count), missing = 0;
    replay_random(count, 0x68636775617264u, 192, 1);
    for (; i < argc; i++)
        if (replay_path(argv[i], &files) != 0)
            return 2;
    /* the generator must reach every verdict, or the run proves little */
    for (int s = 0; s < HCGUARD_STATUS_COUNT; s++) {
        printf("%-18s %lu\n", hcguard_status_name((hcguard_status)s), g_seen[s]);
        /* copy-faulted is a run-time verdict of the copy, not of a check */
        if (count >= 10000 && g_seen[s] == 0 && s != HCGUARD_ERR_COPY_FAULTED) {
            fprintf(stderr, "fuzz_validate_replay: %s never reached\n",
                    hcguard_status_name((hcguard_status)s));
            missing++;
        }
    }
    return missing ? 1 : 0;
}
#endif
