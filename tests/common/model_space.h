/*
 * A model address space for the validator's tests (tests/unit/
 * test_validate.c, tests/fuzz/fuzz_validate.c): regions with permissions,
 * kept in address order by the test, and the verdict the oracle would give
 * a range of it, found by walking from region to region. Nothing is
 * touched: addresses are plain numbers. Include it after hcg.h (hcg_mem).
 */
#ifndef HCG_TEST_MODEL_SPACE_H
#define HCG_TEST_MODEL_SPACE_H

#include <stdint.h>

enum { R = 1, W = 2, DEV = 4 }; /* a region's perm: readable, writable, device */

typedef struct region {
    uintptr_t start, last; /* inclusive, so a region may end at the top */
    unsigned perm;
} region;

/* The region of reg[0..n) holding p, or NULL. */
static inline const region *region_at(const region *reg, int n, uintptr_t p)
{
    for (int i = 0; i < n; i++)
        if (reg[i].start <= p && p <= reg[i].last)
            return &reg[i];
    return NULL;
}

/* What region r (NULL: no region) allows: read, or written too where
 * write. Device memory, like the driver's reservations, is not
 * host-accessible. */
static inline hcg_mem region_verdict(const region *r, int write)
{
    if (!r)
        return HCG_MEM_UNMAPPED;
    if (!(r->perm & R) || (r->perm & DEV))
        return HCG_MEM_NO_READ;
    if (write && !(r->perm & W))
        return HCG_MEM_NO_WRITE;
    return HCG_MEM_OK;
}

/* [a, last] read (or written): the first failing region's verdict. */
static inline hcg_mem region_walk(const region *reg, int n, uintptr_t a, uintptr_t last,
                                  int write)
{
    for (;;) {
        const region *r = region_at(reg, n, a);
        hcg_mem v = region_verdict(r, write);
        if (v != HCG_MEM_OK)
            return v;
        if (r->last >= last)
            return HCG_MEM_OK;
        a = r->last + 1;
    }
}

#endif
