/* Events: create, record, synchronize, destroy, and a stream's wait for
 * one, which is how a stream joins another's capture (cross-stream
 * capture). Outside capture a wait is already met: every stream's work
 * runs in the one queue's order. */
#include <sched.h>

#include "fakecuda.h"

FC_API CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FC_ENTER();
    (void)Flags;
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    fc_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_lock();
    fc_obj_add(&e->obj, FC_EVENT);
    fc_unlock();
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent h)
{
    FC_ENTER();
    fc_lock();
    fc_event *e = fc_obj_get(h, FC_EVENT);
    if (e)
        fc_obj_del(&e->obj);
    fc_unlock();
    free(e);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void fc_events_forget(const fc_stream *s)
{
    for (size_t b = 0; b < FC_BUCKETS; b++)
        for (fc_obj *o = fc_state.objs[b]; o; o = o->hnext)
            if (o->kind == FC_EVENT && ((fc_event *)o)->cap_origin == s)
                ((fc_event *)o)->cap_origin = NULL;
}

FC_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent) { return event_destroy(hEvent); }

FC_API CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) { return event_destroy(hEvent); }

/* In a capture, the record notes the capture and the stream's last nodes
 * (no node is made); else the point in the queue reached so far. */
static CUresult event_record(CUevent h, CUstream hs, int ptsz)
{
    FC_ENTER();
    fc_lock();
    fc_event *e = fc_obj_get(h, FC_EVENT);
    fc_stream *s;
    CUresult r = e ? fc_stream_get(hs, ptsz, &s) : CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (r == CUDA_SUCCESS && s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        e->in_capture = 1;
        e->cap_origin = fc_capture_origin(s);
        e->cap_id = s->cap_id;
        e->ndeps = s->n_cap_deps;
        memcpy(e->deps, s->cap_deps, s->n_cap_deps * sizeof s->cap_deps[0]);
    } else if (r == CUDA_SUCCESS) {
        e->in_capture = 0;
        e->seq = s->last_seq;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0);
}

FC_API CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 1);
}

FC_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    FC_ENTER();
    fc_lock();
    fc_event *e = fc_obj_get(hEvent, FC_EVENT);
    CUresult r = !e ? CUDA_ERROR_INVALID_HANDLE
                 : e->in_capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                                 : fc_wait_done(e->seq);
    fc_unlock();
    return r;
}

/* FAKECUDA_WAIT_YIELD=1: a wait yields before it looks at the event, so
 * that another thread's begin and record land between the caller's last
 * look and the wait's (race tests). */
static int wait_yields(void)
{
    static atomic_int v = -1;
    return fc_knob_once(&v, "FAKECUDA_WAIT_YIELD");
}

/* An event recorded in a capture: the stream joins that capture. One
 * recorded outside: met already (one queue), but not from inside a
 * capture, which cannot depend on work outside it. */
static CUresult stream_wait_event(CUstream hs, CUevent h, unsigned int flags, int ptsz)
{
    FC_ENTER();
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (wait_yields())
        sched_yield();
    fc_lock();
    fc_event *e = fc_obj_get(h, FC_EVENT);
    fc_stream *s;
    CUresult r = e ? fc_stream_get(hs, ptsz, &s) : CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && e->in_capture)
        r = fc_capture_join(s, e);
    else if (r == CUDA_SUCCESS && s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE &&
             !(flags & CU_EVENT_WAIT_EXTERNAL)) {
        fc_capture_invalidate(s); /* as driver 580 does */
        r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, 0);
}

FC_API CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent,
                                               unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, 1);
}
