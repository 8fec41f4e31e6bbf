/* The test driver's shared state, its lock, and handles: every handle
 * given out is the address of an object that starts with fc_obj and sits
 * in a hash set, so a stale or foreign handle is refused, not followed. */
#include "fakecuda.h"

struct fc_state fc_state = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

atomic_int fc_init_done;
static atomic_uint_least64_t g_next_id = 1;
fc_ctx fc_primary = {.primary = 1};
fc_stream fc_legacy;
_Thread_local fc_stream fc_t_ptds;  /* this thread's default stream */
_Thread_local fc_ctx *fc_t_ctx;     /* may be stale: always looked up */
_Thread_local int fc_t_on_worker;

void fc_lock(void) { pthread_mutex_lock(&fc_state.mu); }
void fc_unlock(void) { pthread_mutex_unlock(&fc_state.mu); }
int fc_inited(void) { return atomic_load(&fc_init_done); }

/* What every entry point but cuInit, cuDriverGetVersion, cuGetErrorName,
 * cuGetErrorString and cuGetProcAddress checks first: the driver must be
 * initialised, and the caller must not be a host function (measured: the
 * driver refuses all other calls from its callback thread). */
CUresult fc_enter(void)
{
    if (!fc_inited())
        return CUDA_ERROR_NOT_INITIALIZED;
    return fc_t_on_worker ? CUDA_ERROR_NOT_PERMITTED : CUDA_SUCCESS;
}

uint64_t fc_id(void) { return atomic_fetch_add(&g_next_id, 1); }

static size_t obj_bucket(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9e3779b97f4a7c15u;
    return (size_t)(x >> (64 - FC_BUCKET_BITS));
}

void fc_obj_add(fc_obj *o, int kind)
{
    size_t b = obj_bucket(o);
    o->kind = kind;
    o->hnext = fc_state.objs[b];
    fc_state.objs[b] = o;
}

void fc_obj_del(fc_obj *o)
{
    fc_obj **pp = &fc_state.objs[obj_bucket(o)];
    while (*pp && *pp != o)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = o->hnext;
}

/* The live object of that kind at handle h, or NULL. */
void *fc_obj_get(const void *h, int kind)
{
    if (!h)
        return NULL;
    for (fc_obj *o = fc_state.objs[obj_bucket(h)]; o; o = o->hnext)
        if ((const void *)o == h)
            return o->kind == kind ? o : NULL;
    return NULL;
}

fc_ctx *fc_cur_ctx(void) { return fc_obj_get(fc_t_ctx, FC_CTX); }


int fc_knob(const char *name)
{
    const char *e = getenv(name);
    return e && e[0] == '1';
}

int fc_knob_once(atomic_int *v, const char *name)
{
    int y = atomic_load_explicit(v, memory_order_relaxed);
    if (y < 0) {
        y = fc_knob(name);
        atomic_store_explicit(v, y, memory_order_relaxed);
    }
    return y;
}
