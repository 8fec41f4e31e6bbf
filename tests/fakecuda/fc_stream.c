/* Streams: created ones, the NULL stream, CU_STREAM_LEGACY and the
 * per-thread stream; synchronize and query. */
#include "fakecuda.h"

/* ======================================================================
 * Streams.
 * ====================================================================== */

/* Resolve a stream handle. NULL is the legacy stream, or the calling
 * thread's own stream for the _ptsz entry points. */
CUresult fc_stream_get(CUstream h, int ptsz, fc_stream **out)
{
    fc_stream *s;
    if (!h)
        h = ptsz ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (!fc_cur_ctx())
            return CUDA_ERROR_INVALID_CONTEXT;
        s = h == CU_STREAM_LEGACY ? &fc_legacy : &fc_t_ptds;
    } else if (!(s = fc_obj_get(h, FC_STREAM))) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* A cuCtxSynchronize since the capture began has invalidated it. */
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
        s->cap_epoch != fc_state.cap_epoch)
        s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    *out = s;
    return CUDA_SUCCESS;
}

/* The context a stream was made in; a default stream's: the current one. */
FC_API CUresult CUDAAPI cuStreamGetCtx(CUstream h, CUcontext *pctx)
{
    FC_ENTER();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, 0, &s);
    if (r == CUDA_SUCCESS)
        *pctx = (CUcontext)(s->ctx ? s->ctx : fc_cur_ctx());
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FC_ENTER();
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->flags = Flags;
    fc_lock();
    s->ctx = fc_cur_ctx();
    if (s->ctx)
        fc_obj_add(&s->obj, FC_STREAM);
    fc_unlock();
    if (!s->ctx) {
        free(s);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

/* Work already enqueued still runs: queue entries do not refer to streams. */
static CUresult stream_destroy(CUstream hStream)
{
    FC_ENTER();
    fc_lock();
    fc_stream *s = fc_obj_get(hStream, FC_STREAM);
    if (s && s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE &&
        fc_knob("FAKECUDA_DESTROY_CAPTURING_REFUSED")) {
        fc_unlock();
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s) {
        fc_obj_del(&s->obj);
        fc_stream_capture_drop(s);
        fc_events_forget(s);
    }
    fc_unlock();
    free(s);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    return stream_destroy(hStream);
}

FC_API CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    return stream_destroy(hStream);
}

/* A synchronising call on a capturing stream ends the capture's validity. */
CUresult fc_capture_forbid(fc_stream *s)
{
    fc_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult stream_sync(CUstream h, int ptsz)
{
    FC_ENTER();
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        r = s->cap_status ? fc_capture_forbid(s) : fc_wait_done(s->last_seq);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    return stream_sync(hStream, 0);
}

FC_API CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int ptsz)
{
    FC_ENTER();
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS && s->cap_status)
        r = fc_capture_forbid(s);
    else if (r == CUDA_SUCCESS && fc_state.done_seq < s->last_seq)
        r = CUDA_ERROR_NOT_READY;
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, 0);
}

FC_API CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, 1);
}

