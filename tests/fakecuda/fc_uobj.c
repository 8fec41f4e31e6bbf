/* User objects: the reference count, the destructor queued behind all
 * work at the last release, and the cuUserObject and graph-reference API. */
#include "fakecuda.h"

/* Drop n references; the last one queues the destructor. The handle dies
 * at once: using it after its last release is undefined behaviour. */
void fc_uobj_put(fc_uobj *o, uint64_t n)
{
    uint64_t seq;
    o->refs -= n;
    if (o->refs)
        return;
    fc_obj_del(&o->obj);
    (void)fc_queue_push(o->dtor, &seq); /* fails only while unloading */
    free(o);
}

/* ======================================================================
 * User object API (the model's types are in fakecuda.h).
 * ====================================================================== */

/* cuda.h: a count must be nonzero and not larger than INT_MAX. */
static int uobj_count_ok(unsigned count)
{
    return count > 0 && count <= (unsigned)INT_MAX;
}

/* The callback thread is started now, so that the last release, which
 * queues the destructor, has nothing left that can fail. */
static CUresult uobj_register(fc_uobj *o)
{
    fc_lock();
    CUresult r = fc_state.stopping ? CUDA_ERROR_DEINITIALIZED : fc_worker_ensure();
    if (r == CUDA_SUCCESS)
        fc_obj_add(&o->obj, FC_UOBJ);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuUserObjectCreate(CUuserObject *object_out, void *ptr,
                                           CUhostFn destroy,
                                           unsigned int initialRefcount,
                                           unsigned int flags)
{
    FC_ENTER();
    if (!object_out || !destroy || !uobj_count_ok(initialRefcount) ||
        flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    fc_uobj *o = calloc(1, sizeof *o);
    fc_work *w = fc_work_new(1);
    CUresult r = o && w ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        w->ntasks = 1;
        w->tasks[0].fn = destroy;
        w->tasks[0].user = ptr;
        o->dtor = w;
        o->refs = o->user_refs = initialRefcount;
        r = uobj_register(o);
    }
    if (r != CUDA_SUCCESS) {
        free(w);
        free(o);
        return r;
    }
    *object_out = (CUuserObject)o;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuUserObjectRetain(CUuserObject object,
                                           unsigned int count)
{
    FC_ENTER();
    if (!uobj_count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_uobj *o = fc_obj_get(object, FC_UOBJ);
    if (o) {
        o->refs += count;
        o->user_refs += count;
    }
    fc_unlock();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Only references the caller owns may be released (not a graph's). */
FC_API CUresult CUDAAPI cuUserObjectRelease(CUuserObject object,
                                            unsigned int count)
{
    FC_ENTER();
    if (!uobj_count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_uobj *o = fc_obj_get(object, FC_UOBJ);
    CUresult r = o && o->user_refs >= count ? CUDA_SUCCESS
                                            : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        o->user_refs -= count;
        fc_uobj_put(o, count);
    }
    fc_unlock();
    return r;
}

/* With CU_GRAPH_USER_OBJECT_MOVE the caller's references become the
 * graph's (the count stays); without, the graph takes new ones. */
static CUresult graph_retain_locked(fc_graph *gr, fc_uobj *o, unsigned count,
                                    unsigned flags)
{
    int move = flags == CU_GRAPH_USER_OBJECT_MOVE;
    if (!gr || !o || (move && o->user_refs < count))
        return CUDA_ERROR_INVALID_VALUE;
    if (fc_graph_hold(gr, o, count) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (move)
        o->user_refs -= count;
    else
        o->refs += count;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphRetainUserObject(CUgraph graph,
                                                CUuserObject object,
                                                unsigned int count,
                                                unsigned int flags)
{
    FC_ENTER();
    if (!uobj_count_ok(count) || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = graph_retain_locked(fc_obj_get(graph, FC_GRAPH),
                                     fc_obj_get(object, FC_UOBJ), count, flags);
    fc_unlock();
    return r;
}

/* A graph may release only references it owns. */
FC_API CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph,
                                                 CUuserObject object,
                                                 unsigned int count)
{
    FC_ENTER();
    if (!uobj_count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = fc_obj_get(graph, FC_GRAPH);
    fc_uobj *o = fc_obj_get(object, FC_UOBJ);
    fc_uref *u = gr && o ? fc_uref_find(gr, o) : NULL;
    CUresult r = u && u->n >= count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        u->n -= count;
        if (u->n == 0)
            *u = gr->urefs[--gr->n_urefs];
        fc_uobj_put(o, count);
    }
    fc_unlock();
    return r;
}

