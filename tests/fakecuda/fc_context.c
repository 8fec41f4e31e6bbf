/* cuInit, the device, primary and created contexts, the current context,
 * cuCtxSynchronize. */
#include "fakecuda.h"

/* ======================================================================
 * Initialisation, device, contexts.
 * ====================================================================== */
FC_API CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fc_atfork_init();
    fc_lock();
    if (!fc_inited()) {
        fc_obj_add(&fc_primary.obj, FC_CTX);
        atomic_store(&fc_init_done, 1);
    }
    fc_unlock();
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FC_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    FC_ENTER();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    FC_ENTER();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    FC_ENTER();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", FC_DEVICE_NAME);
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FC_ENTER();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_lock();
    fc_state.primary_refs++;
    if (!fc_obj_get(&fc_primary, FC_CTX)) /* made again after a reset */
        fc_obj_add(&fc_primary.obj, FC_CTX);
    fc_unlock();
    *pctx = (CUcontext)&fc_primary;
    return CUDA_SUCCESS;
}

static void primary_destroy(void);

/* The last release destroys the primary context (its work waited for). */
static CUresult primary_release(CUdevice dev)
{
    FC_ENTER();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_lock();
    CUresult r = fc_state.primary_refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && fc_state.primary_refs == 1)
        r = fc_wait_done(fc_state.enq_seq);
    if (r == CUDA_SUCCESS && --fc_state.primary_refs == 0)
        primary_destroy();
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev);
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev);
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FC_ENTER();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_lock();
    *flags = 0;
    *active = fc_state.primary_refs > 0 && fc_obj_get(&fc_primary, FC_CTX);
    fc_unlock();
    return CUDA_SUCCESS;
}

static void ctx_free_resources(fc_ctx *c);

/* The primary context's work waited for, then its streams (their captures
 * with them) and memory freed, and the context destroyed, as driver 580
 * does: its handle refused until it is retained again. */
static CUresult primary_reset(CUdevice dev)
{
    FC_ENTER();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_lock();
    CUresult r = fc_wait_done(fc_state.enq_seq);
    if (r == CUDA_SUCCESS)
        primary_destroy();
    fc_unlock();
    return r;
}

/* Under fc_lock. */
static void primary_destroy(void)
{
    if (fc_obj_get(&fc_primary, FC_CTX)) {
        ctx_free_resources(&fc_primary);
        fc_obj_del(&fc_primary.obj);
    }
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) { return primary_reset(dev); }

FC_API CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_reset(dev); }

/* A new context, made current on this thread (the driver pushes it). */
static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    FC_ENTER();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_lock();
    fc_obj_add(&c->obj, FC_CTX);
    fc_unlock();
    fc_t_ctx = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags,
                                    CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

FC_API CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags,
                                       CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

FC_API CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx,
                                       CUexecAffinityParam *paramsArray,
                                       int numParams, unsigned int flags,
                                       CUdevice dev)
{
    (void)paramsArray;
    (void)flags;
    if (numParams < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, dev);
}

FC_API CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx,
                                       CUctxCreateParams *ctxCreateParams,
                                       unsigned int flags, CUdevice dev)
{
    (void)ctxCreateParams;
    (void)flags;
    return ctx_create(pctx, dev);
}


static fc_stream *stream_of_ctx(const fc_ctx *c)
{
    for (size_t b = 0; b < FC_BUCKETS; b++)
        for (fc_obj *o = fc_state.objs[b]; o; o = o->hnext)
            if (o->kind == FC_STREAM && ((fc_stream *)o)->ctx == c)
                return (fc_stream *)o;
    return NULL;
}

/* Streams and memory die with their context, and so does the caller's
 * graph a stream of it captures into (driver 580 frees it: its handle is
 * refused afterwards). A stream is looked up afresh each time: dropping
 * its capture graph changes the registry. */
static void ctx_free_resources(fc_ctx *c)
{
    fc_stream *s;
    while ((s = stream_of_ctx(c))) {
        fc_graph *into = fc_capture_origin(s) == s && s->cap_user_graph ? s->cap_graph : NULL;
        fc_obj_del(&s->obj);
        fc_stream_capture_drop(s);
        fc_graph_free(into);
        free(s);
    }
    for (fc_mem **pp = &fc_state.mems; *pp;) {
        fc_mem *m = *pp;
        if (m->ctx == c) {
            *pp = m->next;
            fc_mem_release(m);
        } else {
            pp = &m->next;
        }
    }
}

static CUresult ctx_destroy(CUcontext ctx)
{
    FC_ENTER();
    fc_lock();
    fc_ctx *c = fc_obj_get(ctx, FC_CTX);
    CUresult r = c && !c->primary ? fc_wait_done(fc_state.enq_seq)
                                  : CUDA_ERROR_INVALID_CONTEXT;
    /* Looked up again: the lock was let go while waiting. */
    c = fc_obj_get(ctx, FC_CTX);
    if (r == CUDA_SUCCESS && !c)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        ctx_free_resources(c);
        fc_obj_del(&c->obj);
        free(c);
        if (fc_t_ctx == c)
            fc_t_ctx = NULL;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }

FC_API CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }

FC_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    FC_ENTER();
    fc_lock();
    fc_ctx *c = fc_obj_get(ctx, FC_CTX);
    fc_unlock();
    if (ctx && !c)
        return CUDA_ERROR_INVALID_CONTEXT;
    fc_t_ctx = c;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    FC_ENTER();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    *pctx = (CUcontext)fc_cur_ctx();
    fc_unlock();
    return CUDA_SUCCESS;
}

/* Wait for all work of context c (NULL: the current one). A capture in
 * progress makes this an error, and is invalidated by it. */
static CUresult ctx_sync(CUcontext c)
{
    FC_ENTER();
    fc_lock();
    CUresult r = CUDA_SUCCESS;
    if (c && !fc_obj_get(c, FC_CTX)) {
        r = CUDA_ERROR_CONTEXT_IS_DESTROYED; /* measured, for any bad handle */
    } else if (!c && !fc_cur_ctx()) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (fc_state.n_capturing) {
        fc_state.cap_epoch++;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else {
        r = fc_wait_done(fc_state.enq_seq);
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuCtxSynchronize(void) { return ctx_sync(NULL); }

FC_API CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) { return ctx_sync(ctx); }

