/*
 * hcg_validate_fields / hcg_validate_record against a model address space:
 * every status, the order of the checks, and the edges of each rule.
 */
#include <string.h>

#include "hcg.h"
#include "../common/check.h"
#include "../common/model_space.h"

typedef struct model {
    region reg[16];
    int n;
    hcguard_copy_record content; /* what read() returns at any address */
    int classify_calls, read_calls;
    int bogus;                   /* classify returns an out-of-range value */
} model;

/* Regions are kept in address order, so a walk needs no sort. */
static hcg_mem model_walk(const model *m, uintptr_t a, uintptr_t last,
                          int write)
{
    return region_walk(m->reg, m->n, a, last, write);
}

static hcg_mem model_classify(void *ctx, uintptr_t a, size_t n, int write)
{
    model *m = ctx;
    const region *r = region_at(m->reg, m->n, a);
    m->classify_calls++;
    if (m->bogus)
        return (hcg_mem)99;
    if (r && (r->perm & DEV))
        return HCG_MEM_DEVICE;
    return model_walk(m, a, a + (n - 1), write);
}

static int model_read(void *ctx, uintptr_t a, void *buf, size_t n)
{
    model *m = ctx;
    m->read_calls++;
    if (n - 1 > UINTPTR_MAX - a ||
        model_walk(m, a, a + (n - 1), 0) != HCG_MEM_OK)
        return -1;
    memset(buf, 0, n);
    memcpy(buf, &m->content, n < sizeof m->content ? n : sizeof m->content);
    return 0;
}

/* A process-like layout; addresses are plain numbers, nothing is touched. */
#define RW1 0x10000u   /* [0x10000, 0x14000) rw            */
#define RW2 0x14000u   /* [0x14000, 0x18000) rw, touching RW1 */
#define RO 0x18000u    /* [0x18000, 0x1c000) r, touching RW2  */
#define NONE 0x20000u  /* [0x20000, 0x21000) ---            */
#define WO 0x22000u    /* [0x22000, 0x23000) -w-            */
#define GAP1 0x30000u  /* [0x30000, 0x31000) rw, then a hole */
#define GAP2 0x32000u  /* [0x32000, 0x33000) rw             */
#define DEVM 0x40000u  /* [0x40000, 0x50000) device         */

static void model_init(model *m, hcg_oracle *o)
{
    static const region layout[] = {
        {RW1, RW2 - 1, R | W},         {RW2, RO - 1, R | W},
        {RO, 0x1bfffu, R},             {NONE, 0x20fffu, 0},
        {WO, 0x22fffu, W},             {GAP1, 0x30fffu, R | W},
        {GAP2, 0x32fffu, R | W},       {DEVM, 0x4ffffu, R | W | DEV},
    };
    memset(m, 0, sizeof *m);
    memcpy(m->reg, layout, sizeof layout);
    m->n = (int)(sizeof layout / sizeof layout[0]);
    o->ctx = m;
    o->read = model_read;
    o->classify = model_classify;
}

static hcguard_status fields(const hcg_oracle *o, uintptr_t dst,
                             uintptr_t src, size_t n)
{
    hcguard_copy_record r = {dst, src, n};
    return hcg_validate_fields(o, &r);
}

static void test_null_and_unreadable(void)
{
    model m;
    hcg_oracle o;
    hcguard_copy_record out = {1, 2, 3};
    model_init(&m, &o);
    m.content = (hcguard_copy_record){RW1, RW2, 16};
    CHECK_STATUS(hcg_validate_record(&o, NULL, &out), HCGUARD_ERR_NULL_RECORD);
    CHECK_STATUS(hcg_validate_fields(&o, NULL), HCGUARD_ERR_NULL_RECORD);
    CHECK_EQ(m.read_calls, 0);
    /* unmapped, not readable, write-only, straddling the end of a region */
    CHECK_STATUS(hcg_validate_record(&o, (void *)0x5000, &out),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    CHECK_STATUS(hcg_validate_record(&o, (void *)NONE, &out),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    CHECK_STATUS(hcg_validate_record(&o, (void *)WO, &out),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    CHECK_STATUS(hcg_validate_record(&o, (void *)(GAP1 + 0x1000 - 8), &out),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    CHECK(out.dst == 1 && out.src == 2 && out.nbytes == 3); /* untouched */
    /* readable record: out is filled whatever the verdict */
    CHECK_STATUS(hcg_validate_record(&o, (void *)RO, &out), HCGUARD_OK);
    CHECK(out.dst == RW1 && out.src == RW2 && out.nbytes == 16);
    m.content = (hcguard_copy_record){0, RW2, 16};
    CHECK_STATUS(hcg_validate_record(&o, (void *)(GAP1 + 0x1000 - 24), &out),
                 HCGUARD_ERR_NULL_DST);
    CHECK(out.dst == 0 && out.src == RW2);
    CHECK_STATUS(hcg_validate_record(&o, (void *)RO, NULL), HCGUARD_ERR_NULL_DST);
    /* no oracle, or one without read: nothing can be proven */
    CHECK_STATUS(hcg_validate_record(NULL, (void *)RO, &out),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    o.read = NULL;
    CHECK_STATUS(hcg_validate_record(&o, (void *)RO, &out),
                 HCGUARD_ERR_RECORD_UNREADABLE);
}

static void test_zero_bytes(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    CHECK_STATUS(fields(&o, 0, 0, 0), HCGUARD_OK);
    CHECK_STATUS(fields(&o, UINTPTR_MAX, UINTPTR_MAX, 0), HCGUARD_OK);
    CHECK_STATUS(fields(&o, 0x5000, NONE, 0), HCGUARD_OK);
    CHECK_STATUS(fields(&o, RO, DEVM, 0), HCGUARD_OK);
    CHECK_EQ(m.classify_calls, 0); /* nothing to copy, nothing to ask */
    CHECK_STATUS(fields(NULL, 0, 0, 0), HCGUARD_OK);
}

static void test_null_addresses(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    CHECK_STATUS(fields(&o, 0, RW2, 1), HCGUARD_ERR_NULL_DST);
    CHECK_STATUS(fields(&o, 0, 0, 1), HCGUARD_ERR_NULL_DST); /* dst first */
    CHECK_STATUS(fields(&o, RW1, 0, 1), HCGUARD_ERR_NULL_SRC);
    CHECK_STATUS(fields(&o, RW1, 0, SIZE_MAX), HCGUARD_ERR_NULL_SRC);
    CHECK_EQ(m.classify_calls, 0);
}

/* [UINTPTR_MAX - n + 1, UINTPTR_MAX] is the last range of n bytes. */
static void test_overflow(void)
{
    model m;
    hcg_oracle o;
    const size_t n = 16;
    const uintptr_t top = UINTPTR_MAX - 0xfff;
    model_init(&m, &o);
    m.reg[m.n++] = (region){top, UINTPTR_MAX, R | W};
    CHECK_STATUS(fields(&o, UINTPTR_MAX - n + 1, RW1, n), HCGUARD_OK);
    CHECK_STATUS(fields(&o, UINTPTR_MAX - n + 2, RW1, n),
                 HCGUARD_ERR_DST_OVERFLOW);
    CHECK_STATUS(fields(&o, RW1, UINTPTR_MAX - n + 1, n), HCGUARD_OK);
    CHECK_STATUS(fields(&o, RW1, UINTPTR_MAX - n + 2, n),
                 HCGUARD_ERR_SRC_OVERFLOW);
    CHECK_STATUS(fields(&o, UINTPTR_MAX, RW1, 1), HCGUARD_OK);
    CHECK_STATUS(fields(&o, UINTPTR_MAX, RW1, 2), HCGUARD_ERR_DST_OVERFLOW);
    CHECK_STATUS(fields(&o, RW1, UINTPTR_MAX, 2), HCGUARD_ERR_SRC_OVERFLOW);
    CHECK_STATUS(fields(&o, UINTPTR_MAX, UINTPTR_MAX, 2),
                 HCGUARD_ERR_DST_OVERFLOW); /* dst before src */
    /* the largest size: [1, UINTPTR_MAX] fits, [2, ...] does not */
    CHECK_STATUS(fields(&o, 2, 1, SIZE_MAX), HCGUARD_ERR_DST_OVERFLOW);
    CHECK_STATUS(fields(&o, 1, 2, SIZE_MAX), HCGUARD_ERR_SRC_OVERFLOW);
    CHECK_STATUS(fields(&o, 1, 1, SIZE_MAX), HCGUARD_ERR_OVERLAP);
    /* overflow is decided before overlap */
    CHECK_STATUS(fields(&o, UINTPTR_MAX - 7, UINTPTR_MAX - 7, 9),
                 HCGUARD_ERR_DST_OVERFLOW);
    int calls = m.classify_calls;
    CHECK_STATUS(fields(&o, UINTPTR_MAX - 7, RW1, 9), HCGUARD_ERR_DST_OVERFLOW);
    CHECK_EQ(m.classify_calls, calls);
    /* a range at the top that is not mapped is not an overflow */
    m.n--;
    CHECK_STATUS(fields(&o, UINTPTR_MAX - n + 1, RW1, n),
                 HCGUARD_ERR_DST_UNMAPPED);
}

static void test_overlap(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    const uintptr_t a = RW1 + 0x100;
    /* touching, both ways */
    CHECK_STATUS(fields(&o, a, a + 64, 64), HCGUARD_OK);
    CHECK_STATUS(fields(&o, a + 64, a, 64), HCGUARD_OK);
    /* one byte of overlap, both ways */
    CHECK_STATUS(fields(&o, a, a + 63, 64), HCGUARD_ERR_OVERLAP);
    CHECK_STATUS(fields(&o, a + 63, a, 64), HCGUARD_ERR_OVERLAP);
    /* one range inside the other cannot happen with one size; shifted by 1 */
    CHECK_STATUS(fields(&o, a, a + 1, 64), HCGUARD_ERR_OVERLAP);
    CHECK_STATUS(fields(&o, a + 1, a, 64), HCGUARD_ERR_OVERLAP);
    /* the same range */
    CHECK_STATUS(fields(&o, a, a, 1), HCGUARD_ERR_OVERLAP);
    CHECK_STATUS(fields(&o, a, a, 4096), HCGUARD_ERR_OVERLAP);
    /* one byte, adjacent */
    CHECK_STATUS(fields(&o, a, a + 1, 1), HCGUARD_OK);
    CHECK_STATUS(fields(&o, a + 1, a, 1), HCGUARD_OK);
    /* far apart, across regions */
    CHECK_STATUS(fields(&o, RW1, RO, 0x1000), HCGUARD_OK);
    /* overlap is decided before the oracle is asked */
    int calls = m.classify_calls;
    CHECK_STATUS(fields(&o, NONE, NONE + 1, 2), HCGUARD_ERR_OVERLAP);
    CHECK_EQ(m.classify_calls, calls);
}

static void test_dst_classes(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    CHECK_STATUS(fields(&o, 0x5000, RW1, 8), HCGUARD_ERR_DST_UNMAPPED);
    CHECK_STATUS(fields(&o, RO, RW1, 8), HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_STATUS(fields(&o, NONE, RW1, 8), HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_STATUS(fields(&o, WO, RW1, 8), HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_STATUS(fields(&o, DEVM, RW1, 8), HCGUARD_ERR_DST_DEVICE);
    CHECK_STATUS(fields(&o, DEVM + 0x8000, RW1, 0x100), HCGUARD_ERR_DST_DEVICE);
    /* dst is checked before src */
    CHECK_STATUS(fields(&o, 0x5000, 0x6000, 8), HCGUARD_ERR_DST_UNMAPPED);
    CHECK_STATUS(fields(&o, RO, DEVM, 8), HCGUARD_ERR_DST_NOT_WRITABLE);
}

static void test_src_classes(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    CHECK_STATUS(fields(&o, RW1, 0x5000, 8), HCGUARD_ERR_SRC_UNMAPPED);
    CHECK_STATUS(fields(&o, RW1, NONE, 8), HCGUARD_ERR_SRC_NOT_READABLE);
    CHECK_STATUS(fields(&o, RW1, WO, 8), HCGUARD_ERR_SRC_NOT_READABLE);
    CHECK_STATUS(fields(&o, RW1, DEVM, 8), HCGUARD_ERR_SRC_DEVICE);
    CHECK_STATUS(fields(&o, RW1, RO, 8), HCGUARD_OK); /* read-only is enough */
    CHECK_STATUS(fields(&o, RW1, RW2, 0x4000), HCGUARD_OK);
}

static void test_spanning(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    /* RW1 and RW2 touch: one range over both is fine */
    CHECK_STATUS(fields(&o, RW2 - 0x800, GAP1, 0x1000), HCGUARD_OK);
    CHECK_STATUS(fields(&o, GAP1, RW2 - 0x800, 0x1000), HCGUARD_OK);
    CHECK_STATUS(fields(&o, RW1, GAP1, 0x8000), HCGUARD_ERR_SRC_UNMAPPED);
    /* GAP1 and GAP2 have a hole between them */
    CHECK_STATUS(fields(&o, GAP1 + 0x800, RW1, 0x1000), HCGUARD_ERR_DST_UNMAPPED);
    CHECK_STATUS(fields(&o, RW1, GAP1 + 0x800, 0x1000), HCGUARD_ERR_SRC_UNMAPPED);
    /* the range ends at the last byte of GAP1, then one byte more */
    CHECK_STATUS(fields(&o, GAP1 + 0x800, RW1, 0x800), HCGUARD_OK);
    CHECK_STATUS(fields(&o, GAP1 + 0x800, RW1, 0x801), HCGUARD_ERR_DST_UNMAPPED);
    /* RW2 then RO: writable only up to the boundary */
    CHECK_STATUS(fields(&o, RO - 0x100, RW1, 0x100), HCGUARD_OK);
    CHECK_STATUS(fields(&o, RO - 0x100, RW1, 0x101),
                 HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_STATUS(fields(&o, GAP1, RO - 0x100, 0x200), HCGUARD_OK);
    /* a source over RW1, RW2 and RO, then one byte past RO */
    CHECK_STATUS(fields(&o, DEVM, RW1, 0xc000), HCGUARD_ERR_DST_DEVICE);
    CHECK_STATUS(fields(&o, 0x60000, RW1, 0xc000), HCGUARD_ERR_DST_UNMAPPED);
    m.reg[m.n++] = (region){0x60000, 0x6ffff, R | W};
    CHECK_STATUS(fields(&o, 0x60000, RW1, 0xc000), HCGUARD_OK);
    CHECK_STATUS(fields(&o, 0x60000, RW1, 0xc001), HCGUARD_ERR_SRC_UNMAPPED);
}

/* An oracle answer outside hcg_mem must never read as OK. */
static void test_fail_closed(void)
{
    model m;
    hcg_oracle o;
    model_init(&m, &o);
    m.bogus = 1;
    CHECK_STATUS(fields(&o, RW1, RW2, 8), HCGUARD_ERR_DST_NOT_WRITABLE);
    CHECK_STATUS(fields(NULL, RW1, RW2, 8), HCGUARD_ERR_DST_UNMAPPED);
    o.classify = NULL;
    CHECK_STATUS(fields(&o, RW1, RW2, 8), HCGUARD_ERR_DST_UNMAPPED);
    CHECK_STATUS(fields(NULL, 0, RW2, 8), HCGUARD_ERR_NULL_DST);
}

static hcg_mem src_bogus(void *ctx, uintptr_t a, size_t n, int write)
{
    (void)ctx;
    (void)a;
    (void)n;
    return write ? HCG_MEM_OK : (hcg_mem)99;
}

static hcg_mem src_no_write(void *ctx, uintptr_t a, size_t n, int write)
{
    (void)ctx;
    (void)a;
    (void)n;
    return write ? HCG_MEM_OK : HCG_MEM_NO_WRITE;
}

static void test_src_oracle_answers(void)
{
    hcg_oracle o = {NULL, NULL, src_bogus};
    CHECK_STATUS(fields(&o, RW1, RW2, 8), HCGUARD_ERR_SRC_NOT_READABLE);
    o.classify = src_no_write; /* readable, not writable: fine for a source */
    CHECK_STATUS(fields(&o, RW1, RW2, 8), HCGUARD_OK);
}

static const check_case cases[] = {
    CHECK_CASE(null_and_unreadable),
    CHECK_CASE(zero_bytes),
    CHECK_CASE(null_addresses),
    CHECK_CASE(overflow),
    CHECK_CASE(overlap),
    CHECK_CASE(dst_classes),
    CHECK_CASE(src_classes),
    CHECK_CASE(spanning),
    CHECK_CASE(fail_closed),
    CHECK_CASE(src_oracle_answers),
};

int main(int argc, char **argv)
{
    return check_main("test_validate", CHECK_CASES(cases), argc, argv);
}
