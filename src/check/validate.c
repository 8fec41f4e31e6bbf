/*
 * Checks of a host-copy record. Pure: memory is seen only through the
 * oracle, so the same code runs against the process and against a model
 * address space in the tests and the fuzzer.
 *
 * Range rule: [a, a + n) with n > 0 is representable when its last byte,
 * a + n - 1, is an address, i.e. n - 1 <= UINTPTR_MAX - a. So
 * [UINTPTR_MAX - n + 1, UINTPTR_MAX] is the last range of n bytes; one byte
 * further is an overflow. No comparison below computes a + n, which would
 * wrap to 0 for that last range.
 */
#include "check/check.h"

static int range_wraps(uintptr_t a, size_t n)
{
    return n - 1 > UINTPTR_MAX - a; /* n > 0 */
}

/* Touching ranges (one ends where the other starts) do not overlap. */
static int ranges_overlap(uintptr_t a, uintptr_t b, size_t n)
{
    return a <= b ? b - a < n : a - b < n;
}

static hcguard_status dst_status(hcg_mem m)
{
    switch (m) {
    case HCG_MEM_OK: return HCGUARD_OK;
    case HCG_MEM_UNMAPPED: return HCGUARD_ERR_DST_UNMAPPED;
    case HCG_MEM_DEVICE: return HCGUARD_ERR_DST_DEVICE;
    case HCG_MEM_NO_READ:
    case HCG_MEM_NO_WRITE:
    default: return HCGUARD_ERR_DST_NOT_WRITABLE; /* unknown: fail closed */
    }
}

static hcguard_status src_status(hcg_mem m)
{
    switch (m) {
    case HCG_MEM_OK:
    case HCG_MEM_NO_WRITE: return HCGUARD_OK; /* readable is all src needs */
    case HCG_MEM_UNMAPPED: return HCGUARD_ERR_SRC_UNMAPPED;
    case HCG_MEM_DEVICE: return HCGUARD_ERR_SRC_DEVICE;
    case HCG_MEM_NO_READ:
    default: return HCGUARD_ERR_SRC_NOT_READABLE;
    }
}

/* Everything that needs no oracle, in the documented order. */
static hcguard_status check_arith(const hcguard_copy_record *r)
{
    size_t n = r->nbytes;
    if (n == 0)
        return HCGUARD_OK;
    if (r->dst == 0)
        return HCGUARD_ERR_NULL_DST;
    if (r->src == 0)
        return HCGUARD_ERR_NULL_SRC;
    if (range_wraps(r->dst, n))
        return HCGUARD_ERR_DST_OVERFLOW;
    if (range_wraps(r->src, n))
        return HCGUARD_ERR_SRC_OVERFLOW;
    if (ranges_overlap(r->dst, r->src, n))
        return HCGUARD_ERR_OVERLAP;
    return HCGUARD_OK;
}

hcguard_status hcg_validate_fields(const hcg_oracle *o,
                                   const hcguard_copy_record *r)
{
    hcguard_status s;
    if (!r)
        return HCGUARD_ERR_NULL_RECORD;
    s = check_arith(r);
    if (s != HCGUARD_OK || r->nbytes == 0)
        return s;
    if (!o || !o->classify) /* nothing can be proven mapped */
        return HCGUARD_ERR_DST_UNMAPPED;
    s = dst_status(o->classify(o->ctx, r->dst, r->nbytes, 1));
    if (s != HCGUARD_OK)
        return s;
    return src_status(o->classify(o->ctx, r->src, r->nbytes, 0));
}

hcguard_status hcg_validate_record(const hcg_oracle *o, const void *rec,
                                   hcguard_copy_record *out)
{
    hcguard_copy_record r;
    if (!rec)
        return HCGUARD_ERR_NULL_RECORD;
    if (!o || !o->read || o->read(o->ctx, (uintptr_t)rec, &r, sizeof r) != 0)
        return HCGUARD_ERR_RECORD_UNREADABLE;
    if (out)
        *out = r;
    return hcg_validate_fields(o, &r);
}
