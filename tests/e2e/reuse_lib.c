/* Two libraries of one layout (hc_dlreuse): built with REUSE_COPY, its
 * host function hc_fn_copy is a copy function (named with --copy-fn, or
 * registered); built without, hc_fn_mine at the same offset is an
 * ordinary host function with data of its own. Both names are as long,
 * both call memcpy through the PLT, and the host function comes first in
 * its own page of the text, so that the one loaded after the other was
 * unloaded lands at the same address. */
#include <stdint.h>
#include <string.h>

extern int hc_reuse_calls;
extern void *hc_reuse_seen;
void hc_fn_copy(void *p);
void hc_fn_mine(void *p);
int hc_reuse_calls;
void *hc_reuse_seen;

typedef struct reuse_data {
    uintptr_t a, b;
    size_t n;
} reuse_data;

__attribute__((noinline)) static void impl(void *p);

#define FIRST __attribute__((noinline, section(".text.hot.hc_reuse"), aligned(4096)))
#ifdef REUSE_COPY
FIRST void hc_fn_copy(void *p)
#else
FIRST void hc_fn_mine(void *p)
#endif
{
    impl(p);
}

#ifdef REUSE_COPY
/* The record's copy. */
static void impl(void *p)
{
    const reuse_data *r = p;
    if (r && r->n)
        memcpy((void *)r->a, (const void *)r->b, r->n);
}
#else
/* Its own data: counted, seen, its n moved on. */
static void impl(void *p)
{
    reuse_data *d = p;
    hc_reuse_seen = p;
    hc_reuse_calls++;
    size_t next = d->n + 1;
    memcpy(&d->n, &next, d->a ? sizeof d->n : 0); /* a call, as the copy's */
}
#endif
