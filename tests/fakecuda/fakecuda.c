/*
 * fakecuda: a TEST DRIVER for CI machines without a GPU.
 *
 * This is not part of hcguard; nothing under src/ knows of it. It is a small
 * libcuda.so.1 that models only what hcguard's tests need. Test programs
 * link it with -lcuda at build time; on a machine with a GPU they get the
 * real driver at run time instead. So every entry point defined here has the
 * real driver's exported name and exact signature: cuda.h (13.0) is included
 * with __CUDA_API_VERSION_INTERNAL, which declares the plain, unrenamed
 * symbols, so the compiler checks each definition against its prototype.
 * The three CUDA 13.2 entry points that 13.0's cuda.h lacks are declared
 * below. Only driver entry points are exported (-fvisibility=hidden), and
 * the library binds its own symbols (-Bsymbolic-functions), so the pointers
 * that cuGetProcAddress hands out are this library's, as with the real one,
 * even while an interposer is preloaded.
 *
 * Where the real driver's behaviour was not plain from cuda.h, it was
 * measured on driver 580.159.04 (CUDA 13.0) on an H200, and the comments
 * say "measured".
 *
 * What is modelled:
 * - One device (ordinal 0), a primary context, created contexts, and the
 *   calling thread's current context. Everything but cuInit,
 *   cuDriverGetVersion (13020), cuGetErrorName/String and cuGetProcAddress
 *   returns CUDA_ERROR_NOT_INITIALIZED before cuInit, and
 *   CUDA_ERROR_NOT_PERMITTED when called from inside a host function.
 * - Streams: created streams, the NULL stream, CU_STREAM_LEGACY and
 *   CU_STREAM_PER_THREAD (NULL means the per-thread stream in the _ptsz
 *   entry points). There is ONE callback thread for the process, started on
 *   the first launch. All host work runs on it in FIFO order of enqueue,
 *   which keeps every stream's order (and is a valid schedule for the real
 *   driver too). A stream synchronize waits until everything enqueued on
 *   that stream so far has run; cuCtxSynchronize waits for everything.
 * - Memory: cuMemAlloc gives device-only memory: each allocation is its own
 *   PROT_NONE mapping, so the host faults on it as on a GPU, and its bytes
 *   live in a shadow buffer for cuMemcpyHtoD/DtoH. Pinned host memory is
 *   ordinary read/write memory. cuPointerGetAttribute(s) know both.
 * - cuGetProcAddress (v1) and _v2: a table of base names, each with the
 *   variants and the CUDA version that selects them, _ptsz/_ptds variants
 *   under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, and symbolStatus.
 * - Graphs of host, empty and child-graph nodes; clone; instantiate (an
 *   executable graph keeps its own copy of the nodes); launch (host nodes run
 *   in creation order, which is a topological order, as one unit on the
 *   callback thread); per-node exec updates and whole-graph cuGraphExecUpdate;
 *   stream capture of host functions and graph launches; a DOT dump.
 * - User objects (cuUserObjectCreate/Retain/Release,
 *   cuGraphRetainUserObject/ReleaseUserObject, at version 11030). The
 *   references a graph owns are copied by clone, by every instantiate entry
 *   point, into a child graph node's clone and into the child node that a
 *   graph launch under capture becomes; they are released when the graph
 *   (or exec, or capture graph dropped on invalidation) is destroyed.
 *   cuGraphExecUpdate replaces an exec's references with copies of the new
 *   source graph's, as the CUDA Programming Guide says (cuda.h is silent).
 *   When the last reference goes, the destructor is queued behind all work
 *   already queued, so it runs on the callback thread after every launch
 *   of an exec that held a reference. Two differences from the real
 *   driver, both where it leaves the behaviour undefined: releasing or
 *   moving references that the caller, or the graph, does not own is
 *   refused with CUDA_ERROR_INVALID_VALUE, and so is a handle whose last
 *   reference is gone. cuCtxSynchronize happens to wait for queued
 *   destructors here; no CUDA API promises that.
 *
 * What is not: kernels, modules, events, memsets, the 32-bit v1 memory
 * entry points (cuMemAlloc, cuMemcpyHtoD, ...), managed or registered
 * memory, peer access, memory pools, other node types
 * (CUDA_ERROR_NOT_SUPPORTED), cross-stream capture (events),
 * cuStreamUpdateCaptureDependencies, the global-mode capture ban on other
 * threads' unsafe calls, primary-context reset when its last reference
 * goes, and real timing or concurrency between streams.
 *
 * At exit (library destructor) work still queued, destructors of user
 * objects included, is dropped; the host
 * function that is running gets up to a second to finish; a callback thread
 * stuck in a host function is left behind rather than waited for.
 * In a child after fork() the queue is emptied and a new thread starts on
 * the next launch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1 /* plain, unrenamed driver prototypes */
#include <cuda.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define FC_API __attribute__((visibility("default")))

/* CUDA 13.2 additions, absent from the 13.0 cuda.h. */
enum { FC_HOST_TASK_BLOCKING = 0, FC_HOST_TASK_SPINWAIT = 1 }; /* CUhostTaskSyncMode */
FC_API CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn,
                                            void *userData,
                                            unsigned int syncMode);
FC_API CUresult CUDAAPI cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn,
                                                 void *userData,
                                                 unsigned int syncMode);
FC_API CUresult CUDAAPI cuGraphNodeGetParams(CUgraphNode hNode,
                                             CUgraphNodeParams *nodeParams);

#define FC_DRIVER_VERSION 13020
#define FC_DEVICE_NAME "fakecuda test device (no GPU)"

/* ======================================================================
 * Handles. Every handle given out (context, stream, graph, node, exec,
 * user object) is
 * the address of an object that starts with fc_obj and is kept in a hash
 * set, so a stale or foreign handle is refused with an error instead of
 * being dereferenced.
 * ====================================================================== */
enum fc_kind { FC_CTX = 1, FC_STREAM, FC_GRAPH, FC_NODE, FC_EXEC, FC_UOBJ };

typedef struct fc_obj {
    struct fc_obj *hnext;
    int kind;
} fc_obj;

#define FC_BUCKET_BITS 10
#define FC_BUCKETS (1u << FC_BUCKET_BITS)

typedef struct fc_ctx {
    fc_obj obj;
    int primary;
} fc_ctx;

typedef struct fc_graph fc_graph;
typedef struct fc_node fc_node;

typedef struct fc_stream {
    fc_obj obj;
    fc_ctx *ctx;
    unsigned flags;
    uint64_t last_seq; /* queue number of the last work enqueued on it */
    /* stream capture */
    CUstreamCaptureStatus cap_status;
    CUstreamCaptureMode cap_mode;
    pthread_t cap_thread;
    cuuint64_t cap_id;
    uint64_t cap_epoch;
    fc_graph *cap_graph;
    CUgraphNode cap_deps[1]; /* what the next captured node depends on */
    CUgraphEdgeData cap_edges[1];
    size_t n_cap_deps;
} fc_stream;

/* One host call: a CUhostFn, or a CUstreamCallback with its stream. */
typedef struct fc_task {
    CUhostFn fn;
    CUstreamCallback cb;
    CUstream stream;
    void *user;
} fc_task;

/* One unit of the callback thread's queue: a launch, or a graph launch. */
typedef struct fc_work {
    struct fc_work *next;
    uint64_t seq;
    size_t ntasks;
    fc_task tasks[];
} fc_work;

typedef struct fc_mem {
    struct fc_mem *next;
    int device;             /* 1: device-only (cuMemAlloc); 0: pinned host */
    uintptr_t base;
    size_t size, map_size;
    unsigned char *shadow;  /* device memory's contents */
    fc_ctx *ctx;
    unsigned long long buffer_id;
} fc_mem;

/* All state below is guarded by g.mu; host functions run without it. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* queue became non-empty, or stopping */
    pthread_cond_t done_cv; /* done_seq advanced, or the thread ended */
    fc_work *head, *tail;
    uint64_t enq_seq, done_seq;
    int worker_started, worker_running, stopping, atfork_set;
    pthread_t worker;
    fc_obj *objs[FC_BUCKETS];
    fc_mem *mems;
    int primary_refs;
    unsigned n_capturing;
    uint64_t cap_epoch; /* bumped by cuCtxSynchronize to invalidate captures */
} g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

static atomic_int g_inited;
static atomic_uint_least64_t g_next_id = 1;
static fc_ctx g_primary = {.primary = 1};
static fc_stream g_legacy;
static _Thread_local fc_stream t_ptds;  /* this thread's default stream */
static _Thread_local fc_ctx *t_ctx;     /* may be stale: always looked up */
static _Thread_local int t_on_worker;

static void fc_lock(void) { pthread_mutex_lock(&g.mu); }
static void fc_unlock(void) { pthread_mutex_unlock(&g.mu); }
static int fc_inited(void) { return atomic_load(&g_inited); }

/* What every entry point but cuInit, cuDriverGetVersion, cuGetErrorName,
 * cuGetErrorString and cuGetProcAddress checks first: the driver must be
 * initialised, and the caller must not be a host function (measured: the
 * driver refuses all other calls from its callback thread). */
static CUresult fc_enter(void)
{
    if (!fc_inited())
        return CUDA_ERROR_NOT_INITIALIZED;
    return t_on_worker ? CUDA_ERROR_NOT_PERMITTED : CUDA_SUCCESS;
}

static uint64_t fc_id(void) { return atomic_fetch_add(&g_next_id, 1); }

static size_t obj_bucket(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9e3779b97f4a7c15u;
    return (size_t)(x >> (64 - FC_BUCKET_BITS));
}

static void obj_add(fc_obj *o, int kind)
{
    size_t b = obj_bucket(o);
    o->kind = kind;
    o->hnext = g.objs[b];
    g.objs[b] = o;
}

static void obj_del(fc_obj *o)
{
    fc_obj **pp = &g.objs[obj_bucket(o)];
    while (*pp && *pp != o)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = o->hnext;
}

/* The live object of that kind at handle h, or NULL. */
static void *obj_get(const void *h, int kind)
{
    if (!h)
        return NULL;
    for (fc_obj *o = g.objs[obj_bucket(h)]; o; o = o->hnext)
        if ((const void *)o == h)
            return o->kind == kind ? o : NULL;
    return NULL;
}

static fc_ctx *cur_ctx(void) { return obj_get(t_ctx, FC_CTX); }

/* ======================================================================
 * The callback thread and its queue.
 * ====================================================================== */
static void run_work(const fc_work *w)
{
    for (size_t i = 0; i < w->ntasks; i++) {
        const fc_task *t = &w->tasks[i];
        if (t->fn)
            t->fn(t->user);
        else
            t->cb(t->stream, CUDA_SUCCESS, t->user);
    }
}

/* Free what has not run and count it as done, so nobody waits for it. */
static void drop_queued(void)
{
    while (g.head) {
        fc_work *w = g.head;
        g.head = w->next;
        free(w);
    }
    g.tail = NULL;
    g.done_seq = g.enq_seq;
    pthread_cond_broadcast(&g.done_cv);
}

static void *worker_main(void *arg)
{
    (void)arg;
    t_on_worker = 1;
    fc_lock();
    for (;;) {
        while (!g.head && !g.stopping)
            pthread_cond_wait(&g.work_cv, &g.mu);
        if (g.stopping)
            break;
        fc_work *w = g.head;
        g.head = w->next;
        if (!g.head)
            g.tail = NULL;
        fc_unlock();
        run_work(w);
        fc_lock();
        g.done_seq = w->seq;
        free(w);
        pthread_cond_broadcast(&g.done_cv);
    }
    drop_queued();
    g.worker_running = 0;
    pthread_cond_broadcast(&g.done_cv);
    fc_unlock();
    return NULL;
}

static void atfork_prepare(void) { fc_lock(); }
static void atfork_parent(void) { fc_unlock(); }

/* The child has no callback thread: forget the parent's queue. */
static void atfork_child(void)
{
    while (g.head) {
        fc_work *w = g.head;
        g.head = w->next;
        free(w);
    }
    g.tail = NULL;
    g.done_seq = g.enq_seq;
    g.worker_started = g.worker_running = 0;
    pthread_cond_init(&g.work_cv, NULL);
    pthread_cond_init(&g.done_cv, NULL);
    fc_unlock();
}

static CUresult worker_ensure(void)
{
    if (g.worker_started)
        return CUDA_SUCCESS;
    if (!g.atfork_set) {
        if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g.atfork_set = 1;
    }
    if (pthread_create(&g.worker, NULL, worker_main, NULL) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g.worker_started = g.worker_running = 1;
    return CUDA_SUCCESS;
}

static fc_work *work_new(size_t ntasks)
{
    if (ntasks > (SIZE_MAX - sizeof(fc_work)) / sizeof(fc_task))
        return NULL;
    return calloc(1, sizeof(fc_work) + ntasks * sizeof(fc_task));
}

/* Append w to the queue, behind everything already queued; takes w. */
static CUresult queue_push(fc_work *w, uint64_t *seq)
{
    CUresult r = g.stopping ? CUDA_ERROR_DEINITIALIZED : worker_ensure();
    if (r != CUDA_SUCCESS) {
        free(w);
        return r;
    }
    w->seq = ++g.enq_seq;
    if (g.tail)
        g.tail->next = w;
    else
        g.head = w;
    g.tail = w;
    *seq = w->seq;
    pthread_cond_signal(&g.work_cv);
    return CUDA_SUCCESS;
}

/* Append w to the queue as the next work of stream s; takes w. */
static CUresult enqueue(fc_stream *s, fc_work *w)
{
    return queue_push(w, &s->last_seq);
}

/* Wait until queue work number seq has run. The callback thread must
 * never wait for itself (fc_enter already refuses its calls). */
static CUresult wait_done(uint64_t seq)
{
    if (t_on_worker)
        return CUDA_ERROR_NOT_PERMITTED;
    while (g.done_seq < seq)
        pthread_cond_wait(&g.done_cv, &g.mu);
    return CUDA_SUCCESS;
}

/* ======================================================================
 * Initialisation, device, contexts.
 * ====================================================================== */
FC_API CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    if (!fc_inited()) {
        obj_add(&g_primary.obj, FC_CTX);
        atomic_store(&g_inited, 1);
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
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", FC_DEVICE_NAME);
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_lock();
    g.primary_refs++;
    fc_unlock();
    *pctx = (CUcontext)&g_primary;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_lock();
    CUresult r = g.primary_refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS)
        g.primary_refs--;
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

/* A new context, made current on this thread (the driver pushes it). */
static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fc_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_lock();
    obj_add(&c->obj, FC_CTX);
    fc_unlock();
    t_ctx = c;
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

static void stream_capture_drop(fc_stream *s);
static void mem_release(fc_mem *m);

static fc_stream *stream_of_ctx(const fc_ctx *c)
{
    for (size_t b = 0; b < FC_BUCKETS; b++)
        for (fc_obj *o = g.objs[b]; o; o = o->hnext)
            if (o->kind == FC_STREAM && ((fc_stream *)o)->ctx == c)
                return (fc_stream *)o;
    return NULL;
}

/* Streams and memory die with their context. A stream is looked up afresh
 * each time: dropping its capture graph changes the registry. */
static void ctx_free_resources(fc_ctx *c)
{
    fc_stream *s;
    while ((s = stream_of_ctx(c))) {
        obj_del(&s->obj);
        stream_capture_drop(s);
        free(s);
    }
    for (fc_mem **pp = &g.mems; *pp;) {
        fc_mem *m = *pp;
        if (m->ctx == c) {
            *pp = m->next;
            mem_release(m);
        } else {
            pp = &m->next;
        }
    }
}

static CUresult ctx_destroy(CUcontext ctx)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_ctx *c = obj_get(ctx, FC_CTX);
    CUresult r = c && !c->primary ? wait_done(g.enq_seq)
                                  : CUDA_ERROR_INVALID_CONTEXT;
    /* Looked up again: the lock was let go while waiting. */
    c = obj_get(ctx, FC_CTX);
    if (r == CUDA_SUCCESS && !c)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        ctx_free_resources(c);
        obj_del(&c->obj);
        free(c);
        if (t_ctx == c)
            t_ctx = NULL;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }

FC_API CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }

FC_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_ctx *c = obj_get(ctx, FC_CTX);
    fc_unlock();
    if (ctx && !c)
        return CUDA_ERROR_INVALID_CONTEXT;
    t_ctx = c;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    *pctx = (CUcontext)cur_ctx();
    fc_unlock();
    return CUDA_SUCCESS;
}

/* Wait for all work of context c (NULL: the current one). A capture in
 * progress makes this an error, and is invalidated by it. */
static CUresult ctx_sync(CUcontext c)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    CUresult r = CUDA_SUCCESS;
    if (c && !obj_get(c, FC_CTX)) {
        r = CUDA_ERROR_CONTEXT_IS_DESTROYED; /* measured, for any bad handle */
    } else if (!c && !cur_ctx()) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (g.n_capturing) {
        g.cap_epoch++;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else {
        r = wait_done(g.enq_seq);
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuCtxSynchronize(void) { return ctx_sync(NULL); }

FC_API CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) { return ctx_sync(ctx); }

/* ======================================================================
 * Streams.
 * ====================================================================== */

/* Resolve a stream handle. NULL is the legacy stream, or the calling
 * thread's own stream for the _ptsz entry points. */
static CUresult stream_get(CUstream h, int ptsz, fc_stream **out)
{
    fc_stream *s;
    if (!h)
        h = ptsz ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (!cur_ctx())
            return CUDA_ERROR_INVALID_CONTEXT;
        s = h == CU_STREAM_LEGACY ? &g_legacy : &t_ptds;
    } else if (!(s = obj_get(h, FC_STREAM))) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* A cuCtxSynchronize since the capture began has invalidated it. */
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
        s->cap_epoch != g.cap_epoch)
        s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    *out = s;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->flags = Flags;
    fc_lock();
    s->ctx = cur_ctx();
    if (s->ctx)
        obj_add(&s->obj, FC_STREAM);
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
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_stream *s = obj_get(hStream, FC_STREAM);
    if (s) {
        obj_del(&s->obj);
        stream_capture_drop(s);
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
static CUresult capture_forbid(fc_stream *s)
{
    s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult stream_sync(CUstream h, int ptsz)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        r = s->cap_status ? capture_forbid(s) : wait_done(s->last_seq);
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
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS && s->cap_status)
        r = capture_forbid(s);
    else if (r == CUDA_SUCCESS && g.done_seq < s->last_seq)
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

/* ======================================================================
 * User objects (the API is with the graph API). A reference count and a
 * destructor. The caller's references are counted apart from those that
 * graphs own, so that releasing or moving references the caller does not
 * own (undefined behaviour in the real driver) is refused here. When the
 * count reaches zero the destructor is queued behind all work already
 * queued: it runs on the callback thread, after every launch that was
 * enqueued while some executable graph still held a reference.
 * ====================================================================== */
typedef struct fc_uobj {
    fc_obj obj;
    uint64_t refs;      /* all references */
    uint64_t user_refs; /* those the caller owns */
    fc_work *dtor;      /* made at creation, so that a release cannot fail */
} fc_uobj;

/* The n references that one graph owns on object o. */
typedef struct fc_uref {
    fc_uobj *o;
    uint64_t n;
} fc_uref;

/* Drop n references; the last one queues the destructor. The handle dies
 * at once: using it after its last release is undefined behaviour. */
static void uobj_put(fc_uobj *o, uint64_t n)
{
    uint64_t seq;
    o->refs -= n;
    if (o->refs)
        return;
    obj_del(&o->obj);
    (void)queue_push(o->dtor, &seq); /* fails only while unloading */
    free(o);
}

/* ======================================================================
 * Graph objects (the API is further down). Nodes are kept in creation
 * order; since a node can only depend on nodes that already exist, that
 * order is topological, and a launch runs host nodes in it.
 * ====================================================================== */
struct fc_graph {
    fc_obj obj;
    uint64_t id;
    uint64_t clone_of;  /* id of the graph this is a clone of, or 0 */
    int registered;     /* its handles are live (not an exec's copy) */
    fc_node *owner;     /* child graph: the node that owns it */
    fc_stream *capturer; /* capture graph still being captured into */
    fc_node **nodes;
    size_t n, cap;
    fc_uref *urefs;     /* user object references it owns, one per object */
    size_t n_urefs, cap_urefs;
};

struct fc_node {
    fc_obj obj;
    uint64_t id;
    uint64_t origin;       /* clone: id of the node copied */
    uint64_t updated_from; /* exec copy: node last copied in by ExecUpdate */
    fc_graph *graph;
    size_t index;          /* position in graph->nodes */
    CUgraphNodeType type;
    CUDA_HOST_NODE_PARAMS host;
    fc_graph *child;       /* CU_GRAPH_NODE_TYPE_GRAPH: owned */
    size_t ndeps;
    fc_node **deps;
};

static fc_graph *graph_new(int registered)
{
    fc_graph *gr = calloc(1, sizeof *gr);
    if (!gr)
        return NULL;
    gr->id = fc_id();
    gr->registered = registered;
    if (registered)
        obj_add(&gr->obj, FC_GRAPH);
    return gr;
}

/* Room for at least n user object references. */
static int urefs_reserve(fc_graph *gr, size_t n)
{
    if (n <= gr->cap_urefs)
        return 0;
    size_t cap = gr->cap_urefs ? gr->cap_urefs : 4;
    while (cap < n)
        cap *= 2;
    fc_uref *u = realloc(gr->urefs, cap * sizeof *u);
    if (!u)
        return -1;
    gr->urefs = u;
    gr->cap_urefs = cap;
    return 0;
}

static fc_uref *uref_find(const fc_graph *gr, const fc_uobj *o)
{
    for (size_t i = 0; i < gr->n_urefs; i++)
        if (gr->urefs[i].o == o)
            return &gr->urefs[i];
    return NULL;
}

/* Graph gr now owns n more references on o; the caller counts them in o. */
static int graph_hold(fc_graph *gr, fc_uobj *o, uint64_t n)
{
    fc_uref *u = uref_find(gr, o);
    if (!u) {
        if (urefs_reserve(gr, gr->n_urefs + 1) != 0)
            return -1;
        u = &gr->urefs[gr->n_urefs++];
        u->o = o;
        u->n = 0;
    }
    u->n += n;
    return 0;
}

/* Make dst own the same references as src (a clone's, or an update's). New
 * references are taken before the old ones go, so an object the two share
 * never reaches zero on the way. dst must have room (urefs_reserve). */
static void urefs_assign(fc_graph *dst, const fc_graph *src)
{
    for (size_t i = 0; i < src->n_urefs; i++)
        src->urefs[i].o->refs += src->urefs[i].n;
    for (size_t i = 0; i < dst->n_urefs; i++)
        uobj_put(dst->urefs[i].o, dst->urefs[i].n);
    if (src->n_urefs)
        memcpy(dst->urefs, src->urefs, src->n_urefs * sizeof *src->urefs);
    dst->n_urefs = src->n_urefs;
}

static void graph_free(fc_graph *gr)
{
    if (!gr)
        return;
    for (size_t i = 0; i < gr->n; i++) {
        fc_node *n = gr->nodes[i];
        graph_free(n->child);
        if (gr->registered)
            obj_del(&n->obj);
        free(n->deps);
        free(n);
    }
    for (size_t i = 0; i < gr->n_urefs; i++)
        uobj_put(gr->urefs[i].o, gr->urefs[i].n);
    if (gr->registered)
        obj_del(&gr->obj);
    free(gr->urefs);
    free(gr->nodes);
    free(gr);
}

/* Append a node with room for ndeps dependencies, which the caller fills. */
static fc_node *node_add(fc_graph *gr, CUgraphNodeType type, size_t ndeps)
{
    if (gr->n == gr->cap) {
        size_t cap = gr->cap ? 2 * gr->cap : 8;
        fc_node **nodes = realloc(gr->nodes, cap * sizeof *nodes);
        if (!nodes)
            return NULL;
        gr->nodes = nodes;
        gr->cap = cap;
    }
    fc_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    if (ndeps && !(n->deps = calloc(ndeps, sizeof *n->deps))) {
        free(n);
        return NULL;
    }
    n->ndeps = ndeps;
    n->type = type;
    n->id = fc_id();
    n->graph = gr;
    n->index = gr->n;
    gr->nodes[gr->n++] = n;
    if (gr->registered)
        obj_add(&n->obj, FC_NODE);
    return n;
}

static fc_graph *graph_clone(const fc_graph *src, int registered);

static int node_clone(fc_graph *dst, const fc_node *s)
{
    fc_graph *child = NULL;
    if (s->child && !(child = graph_clone(s->child, dst->registered)))
        return -1;
    fc_node *n = node_add(dst, s->type, s->ndeps);
    if (!n) {
        graph_free(child);
        return -1;
    }
    n->origin = s->id;
    n->host = s->host;
    n->child = child;
    if (child)
        child->owner = n;
    for (size_t k = 0; k < s->ndeps; k++)
        n->deps[k] = dst->nodes[s->deps[k]->index];
    return 0;
}

/* A copy of src with its nodes, child graphs and user object references
 * (as clone, instantiate and child graph nodes make). */
static fc_graph *graph_clone(const fc_graph *src, int registered)
{
    fc_graph *c = graph_new(registered);
    if (!c)
        return NULL;
    c->clone_of = src->id;
    if (urefs_reserve(c, src->n_urefs) != 0) {
        graph_free(c);
        return NULL;
    }
    urefs_assign(c, src);
    for (size_t i = 0; i < src->n; i++) {
        if (node_clone(c, src->nodes[i]) != 0) {
            graph_free(c);
            return NULL;
        }
    }
    return c;
}

static size_t graph_count_host(const fc_graph *gr)
{
    size_t k = 0;
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *n = gr->nodes[i];
        k += n->type == CU_GRAPH_NODE_TYPE_HOST;
        if (n->child)
            k += graph_count_host(n->child);
    }
    return k;
}

static void graph_tasks(const fc_graph *gr, fc_task *t, size_t *k)
{
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *n = gr->nodes[i];
        if (n->type == CU_GRAPH_NODE_TYPE_HOST) {
            t[*k].fn = n->host.fn;
            t[*k].user = n->host.userData;
            (*k)++;
        }
        if (n->child)
            graph_tasks(n->child, t, k);
    }
}

/* ======================================================================
 * Stream capture.
 * ====================================================================== */
static void stream_capture_drop(fc_stream *s)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE)
        return;
    graph_free(s->cap_graph);
    s->cap_graph = NULL;
    s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
    g.n_capturing--;
}

/* A new node in the capture graph, after the previous captured node. */
static CUresult capture_node(fc_stream *s, CUgraphNodeType type, fc_node **out)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    fc_node *n = node_add(s->cap_graph, type, s->n_cap_deps);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t k = 0; k < s->n_cap_deps; k++)
        n->deps[k] = (fc_node *)s->cap_deps[k];
    s->cap_deps[0] = (CUgraphNode)n;
    s->n_cap_deps = 1;
    *out = n;
    return CUDA_SUCCESS;
}

static CUresult capture_task(fc_stream *s, const fc_task *t)
{
    if (t->cb) /* cuStreamAddCallback cannot be captured */
        return capture_forbid(s);
    fc_node *n;
    CUresult r = capture_node(s, CU_GRAPH_NODE_TYPE_HOST, &n);
    if (r == CUDA_SUCCESS) {
        n->host.fn = t->fn;
        n->host.userData = t->user;
    }
    return r;
}

/* A graph launched into a capturing stream becomes a child graph node. */
static CUresult capture_graph(fc_stream *s, const fc_graph *src)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    fc_graph *child = graph_clone(src, 1);
    if (!child)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_node *n;
    CUresult r = capture_node(s, CU_GRAPH_NODE_TYPE_GRAPH, &n);
    if (r != CUDA_SUCCESS) {
        graph_free(child);
        return r;
    }
    n->child = child;
    child->owner = n;
    return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream h, int ptsz, CUstreamCaptureMode mode)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS && s == &g_legacy)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (r == CUDA_SUCCESS && s->cap_status)
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (r == CUDA_SUCCESS && !(s->cap_graph = graph_new(1)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        s->cap_graph->capturer = s;
        s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_id = fc_id();
        s->cap_epoch = g.cap_epoch;
        s->n_cap_deps = 0;
        g.n_capturing++;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, 1, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream,
                                                CUstreamCaptureMode mode)
{
    return begin_capture(hStream, 0, mode);
}

FC_API CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                                     CUstreamCaptureMode mode)
{
    return begin_capture(hStream, 1, mode);
}

static CUresult end_capture_locked(fc_stream *s, CUgraph *phGraph)
{
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        stream_capture_drop(s); /* from any thread (measured) */
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(s->cap_thread, pthread_self()))
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    fc_graph *gr = s->cap_graph;
    gr->capturer = NULL;
    s->cap_graph = NULL;
    s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
    g.n_capturing--;
    *phGraph = (CUgraph)gr;
    return CUDA_SUCCESS;
}

static CUresult end_capture(CUstream h, int ptsz, CUgraph *phGraph)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        r = end_capture_locked(s, phGraph);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, 0, phGraph);
}

FC_API CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream,
                                                CUgraph *phGraph)
{
    return end_capture(hStream, 1, phGraph);
}

static CUresult is_capturing(CUstream h, int ptsz, CUstreamCaptureStatus *st)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        *st = s->cap_status;
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                            CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, 0, captureStatus);
}

FC_API CUresult CUDAAPI cuStreamIsCapturing_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, 1, captureStatus);
}

/* The outputs of every cuStreamGetCaptureInfo version; NULL = not asked. */
typedef struct fc_capinfo {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
} fc_capinfo;

static void capture_info_fill(const fc_stream *s, const fc_capinfo *o)
{
    int active = s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    *o->status = s->cap_status;
    if (o->id)
        *o->id = active ? s->cap_id : 0;
    if (o->graph)
        *o->graph = active ? (CUgraph)s->cap_graph : NULL;
    if (o->deps)
        *o->deps = active ? s->cap_deps : NULL;
    if (o->edges)
        *o->edges = active ? s->cap_edges : NULL;
    if (o->ndeps)
        *o->ndeps = active ? s->n_cap_deps : 0;
}

static CUresult capture_info(CUstream h, int ptsz, const fc_capinfo *o)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!o->status || (o->edges && !o->deps) || (o->deps && !o->ndeps))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS)
        capture_info_fill(s, o);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out)
{
    fc_capinfo o = {.status = captureStatus_out, .id = id_out};
    return capture_info(hStream, 0, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out)
{
    fc_capinfo o = {.status = captureStatus_out, .id = id_out};
    return capture_info(hStream, 1, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    NULL, numDependencies_out};
    return capture_info(hStream, 0, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    NULL, numDependencies_out};
    return capture_info(hStream, 1, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
    size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    edgeData_out, numDependencies_out};
    return capture_info(hStream, 0, &o);
}

FC_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
    size_t *numDependencies_out)
{
    fc_capinfo o = {captureStatus_out, id_out, graph_out, dependencies_out,
                    edgeData_out, numDependencies_out};
    return capture_info(hStream, 1, &o);
}

/* ======================================================================
 * Host functions and stream callbacks.
 * ====================================================================== */
static CUresult launch_task(CUstream h, int ptsz, const fc_task *t)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS && s->cap_status) {
        r = capture_task(s, t);
    } else if (r == CUDA_SUCCESS) {
        fc_work *w = work_new(1);
        if (w) {
            w->ntasks = 1;
            w->tasks[0] = *t;
        }
        r = w ? enqueue(s, w) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    fc_unlock();
    return r;
}

static CUresult launch_host(CUstream h, int ptsz, CUhostFn fn, void *user,
                            unsigned sync_mode)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!fn || (sync_mode != FC_HOST_TASK_BLOCKING &&
                sync_mode != FC_HOST_TASK_SPINWAIT))
        return CUDA_ERROR_INVALID_VALUE;
    fc_task t = {.fn = fn, .user = user};
    return launch_task(h, ptsz, &t);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                         void *userData)
{
    return launch_host(hStream, 0, fn, userData, FC_HOST_TASK_BLOCKING);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn,
                                              void *userData)
{
    return launch_host(hStream, 1, fn, userData, FC_HOST_TASK_BLOCKING);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn,
                                            void *userData,
                                            unsigned int syncMode)
{
    return launch_host(hStream, 0, fn, userData, syncMode);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn,
                                                 void *userData,
                                                 unsigned int syncMode)
{
    return launch_host(hStream, 1, fn, userData, syncMode);
}

static CUresult add_callback(CUstream h, int ptsz, CUstreamCallback cb,
                             void *user, unsigned flags)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fc_task t = {.cb = cb, .stream = h, .user = user};
    return launch_task(h, ptsz, &t);
}

FC_API CUresult CUDAAPI cuStreamAddCallback(CUstream hStream,
                                            CUstreamCallback callback,
                                            void *userData, unsigned int flags)
{
    return add_callback(hStream, 0, callback, userData, flags);
}

FC_API CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream,
                                                 CUstreamCallback callback,
                                                 void *userData,
                                                 unsigned int flags)
{
    return add_callback(hStream, 1, callback, userData, flags);
}

/* ======================================================================
 * Memory.
 * ====================================================================== */
static fc_mem *mem_at(uintptr_t p)
{
    for (fc_mem *m = g.mems; m; m = m->next)
        if (p >= m->base && p - m->base < m->size)
            return m;
    return NULL;
}

/* Does [p, p + n) touch device-only memory? */
static int mem_touches_device(uintptr_t p, size_t n)
{
    for (fc_mem *m = g.mems; m; m = m->next)
        if (m->device && p < m->base + m->size && m->base < p + n)
            return 1;
    return 0;
}

static void mem_release(fc_mem *m)
{
    munmap((void *)m->base, m->map_size);
    free(m->shadow);
    free(m);
}

/* Each allocation is its own mapping: device memory PROT_NONE (the host
 * faults on it), pinned host memory read/write. */
static CUresult mem_alloc(size_t size, int device, uintptr_t *out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIZE_MAX - page)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_mem *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->map_size = (size + page - 1) / page * page;
    void *p = mmap(NULL, m->map_size, device ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || (device && !(m->shadow = calloc(1, size)))) {
        if (p != MAP_FAILED)
            munmap(p, m->map_size);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->device = device;
    m->base = (uintptr_t)p;
    m->size = size;
    m->buffer_id = fc_id();
    fc_lock();
    m->ctx = cur_ctx();
    if (m->ctx) {
        m->next = g.mems;
        g.mems = m;
    }
    fc_unlock();
    if (!m->ctx) {
        mem_release(m);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *out = m->base;
    return CUDA_SUCCESS;
}

static CUresult mem_free(uintptr_t base, int device)
{
    fc_lock();
    fc_mem **pp = &g.mems;
    while (*pp && !((*pp)->base == base && (*pp)->device == device))
        pp = &(*pp)->next;
    fc_mem *m = *pp;
    if (m)
        *pp = m->next;
    fc_unlock();
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;
    mem_release(m);
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    CUresult r = mem_alloc(bytesize, 1, &p);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return r;
}

FC_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (dptr == 0)
        return CUDA_SUCCESS;
    return mem_free((uintptr_t)dptr, 1);
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                           CU_MEMHOSTALLOC_WRITECOMBINED;
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!pp || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize == 0) { /* measured: success, and no memory */
        *pp = NULL;
        return CUDA_SUCCESS;
    }
    uintptr_t p;
    CUresult r = mem_alloc(bytesize, 0, &p);
    if (r == CUDA_SUCCESS)
        *pp = (void *)p;
    return r;
}

FC_API CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

FC_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
                                       unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

FC_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!p)
        return CUDA_SUCCESS; /* what a zero-size cuMemAllocHost gave */
    return mem_free((uintptr_t)p, 0);
}

/* Where the bytes of [p, p + n) are: in the shadow of the device
 * allocation that holds all of it, or, for host memory, at p. NULL when the
 * range is partly device memory, or is not device memory but must be. */
static unsigned char *bytes_of(uintptr_t p, size_t n, int need_device)
{
    fc_mem *m = mem_at(p);
    if (m && m->device)
        return n <= m->size - (p - m->base) ? m->shadow + (p - m->base) : NULL;
    if (need_device || !p || p > UINTPTR_MAX - n || mem_touches_device(p, n))
        return NULL;
    return (unsigned char *)p;
}

/* A synchronous copy on the default stream: the work enqueued before it
 * on that stream runs first (on the legacy stream, all earlier work). The
 * host side may be device memory too, as with the real driver's unified
 * addressing. */
static CUresult copy_sync(uintptr_t dev, void *host, size_t n, int to_device,
                          int ptds)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (n == 0)
        return CUDA_SUCCESS;
    fc_lock();
    fc_stream *s;
    CUresult r = stream_get(NULL, ptds, &s);
    if (r == CUDA_SUCCESS)
        r = s->cap_status ? capture_forbid(s)
                          : wait_done(ptds ? s->last_seq : g.enq_seq);
    if (r == CUDA_SUCCESS) {
        unsigned char *d = bytes_of(dev, n, 1), *h = bytes_of((uintptr_t)host, n, 0);
        if (d && h)
            memmove(to_device ? d : h, to_device ? h : d, n);
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice,
                                        const void *srcHost, size_t ByteCount)
{
    return copy_sync((uintptr_t)dstDevice, (void *)(uintptr_t)srcHost,
                     ByteCount, 1, 0);
}

FC_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice,
                                             const void *srcHost,
                                             size_t ByteCount)
{
    return copy_sync((uintptr_t)dstDevice, (void *)(uintptr_t)srcHost,
                     ByteCount, 1, 1);
}

FC_API CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice,
                                        size_t ByteCount)
{
    return copy_sync((uintptr_t)srcDevice, dstHost, ByteCount, 0, 0);
}

FC_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost,
                                             CUdeviceptr srcDevice,
                                             size_t ByteCount)
{
    return copy_sync((uintptr_t)srcDevice, dstHost, ByteCount, 0, 1);
}

/* ======================================================================
 * Pointer attributes.
 * ====================================================================== */

/* Write attribute a of address p, inside allocation m, or m NULL for
 * memory the driver does not know. Returns CUDA_SUCCESS; or
 * CUDA_ERROR_INVALID_VALUE when the value does not exist for this memory
 * (what the plural form writes for it was still written); or
 * CUDA_ERROR_NOT_SUPPORTED for an attribute not modelled (nothing written).
 * Sizes and the values for unknown memory are the real driver's (measured):
 * booleans are 4 bytes; for unknown memory the host pointer is p itself,
 * the device ordinal is -2 and the range is not written. */
static CUresult attr_write(CUpointer_attribute a, void *data, const fc_mem *m,
                           uintptr_t p)
{
    CUresult ok = m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUcontext v = m ? (CUcontext)m->ctx : NULL;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
        unsigned v = !m ? 0u : m->device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
        CUdeviceptr v = m ? (CUdeviceptr)p : 0;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: {
        void *v = m && m->device ? NULL : (void *)p;
        memcpy(data, &v, sizeof v);
        return m && !m->device ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED: {
        unsigned v = m && a == CU_POINTER_ATTRIBUTE_MAPPED;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
        int v = m ? 0 : -2;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: {
        unsigned long long v = m ? m->buffer_id : 0;
        memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: {
        CUdeviceptr v = m ? (CUdeviceptr)m->base : 0;
        if (m)
            memcpy(data, &v, sizeof v);
        return ok;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: {
        size_t v = m ? m->size : 0;
        if (m)
            memcpy(data, &v, sizeof v);
        return ok;
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

FC_API CUresult CUDAAPI cuPointerGetAttribute(void *data,
                                              CUpointer_attribute attribute,
                                              CUdeviceptr ptr)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    const fc_mem *m = mem_at((uintptr_t)ptr);
    CUresult r = m ? attr_write(attribute, data, m, (uintptr_t)ptr)
                   : CUDA_ERROR_INVALID_VALUE;
    fc_unlock();
    return r;
}

/* Unknown memory is not an error here: it gets the values described at
 * attr_write (mostly zero). Attributes not modelled are left as the caller
 * set them. */
FC_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                               CUpointer_attribute *attributes,
                                               void **data, CUdeviceptr ptr)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (numAttributes && (!attributes || !data))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    const fc_mem *m = mem_at((uintptr_t)ptr);
    for (unsigned i = 0; i < numAttributes; i++)
        (void)attr_write(attributes[i], data[i], m, (uintptr_t)ptr);
    fc_unlock();
    return CUDA_SUCCESS;
}

/* ======================================================================
 * Graph API.
 * ====================================================================== */

/* Dependencies must be distinct nodes of the same graph. */
static CUresult deps_check(const fc_graph *gr, const CUgraphNode *deps,
                           size_t n)
{
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const fc_node *d = obj_get(deps[i], FC_NODE);
        if (!d || d->graph != gr)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Edge data other than the default (all zero) is for kernel nodes only. */
static CUresult edges_check(const CUgraphEdgeData *edges, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &zero, sizeof zero) != 0)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* What a new node is: its type, and its host function or child graph. */
typedef struct fc_newnode {
    CUgraphNodeType type;
    CUDA_HOST_NODE_PARAMS host;
    CUgraph child;
    int move_child; /* CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE */
} fc_newnode;

static int graph_is_within(const fc_graph *inner, const fc_graph *outer)
{
    for (; inner; inner = inner->owner ? inner->owner->graph : NULL)
        if (inner == outer)
            return 1;
    return 0;
}

/* The child graph a new node will own: a clone, or the graph itself. */
static CUresult child_take(fc_graph *gr, const fc_newnode *nn, fc_graph **out)
{
    fc_graph *src = obj_get(nn->child, FC_GRAPH);
    if (!src || src->capturer)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nn->move_child) {
        *out = graph_clone(src, 1);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (src->owner || graph_is_within(gr, src))
        return CUDA_ERROR_INVALID_VALUE;
    *out = src;
    return CUDA_SUCCESS;
}

static CUresult add_node_locked(CUgraphNode *ph, CUgraph hGraph,
                                const CUgraphNode *deps, size_t ndeps,
                                const fc_newnode *nn)
{
    fc_graph *gr = obj_get(hGraph, FC_GRAPH);
    if (!gr)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = deps_check(gr, deps, ndeps);
    if (r == CUDA_SUCCESS && nn->type == CU_GRAPH_NODE_TYPE_HOST && !nn->host.fn)
        r = CUDA_ERROR_INVALID_VALUE;
    fc_graph *child = NULL;
    if (r == CUDA_SUCCESS && nn->type == CU_GRAPH_NODE_TYPE_GRAPH)
        r = child_take(gr, nn, &child);
    fc_node *n = r == CUDA_SUCCESS ? node_add(gr, nn->type, ndeps) : NULL;
    if (r == CUDA_SUCCESS && !n) {
        if (!nn->move_child)
            graph_free(child);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS)
        return r;
    for (size_t k = 0; k < ndeps; k++)
        n->deps[k] = (fc_node *)deps[k];
    n->host = nn->host;
    n->child = child;
    if (child)
        child->owner = n;
    *ph = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *ph, CUgraph hGraph,
                         const CUgraphNode *deps, size_t ndeps,
                         const fc_newnode *nn)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = add_node_locked(ph, hGraph, deps, ndeps, nn);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = graph_new(1);
    fc_unlock();
    if (!gr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)gr;
    return CUDA_SUCCESS;
}

/* A graph owned by a node, or being captured into, is not the caller's to
 * destroy. */
FC_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_graph *gr = obj_get(hGraph, FC_GRAPH);
    CUresult r = gr && !gr->owner && !gr->capturer ? CUDA_SUCCESS
                                                   : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        graph_free(gr);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode,
                                           CUgraph hGraph,
                                           const CUgraphNode *dependencies,
                                           size_t numDependencies,
                                           const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    fc_newnode nn = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = *nodeParams};
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, &nn);
}

FC_API CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode,
                                            CUgraph hGraph,
                                            const CUgraphNode *dependencies,
                                            size_t numDependencies)
{
    fc_newnode nn = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, &nn);
}

FC_API CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode,
                                                 CUgraph hGraph,
                                                 const CUgraphNode *dependencies,
                                                 size_t numDependencies,
                                                 CUgraph childGraph)
{
    fc_newnode nn = {.type = CU_GRAPH_NODE_TYPE_GRAPH, .child = childGraph};
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, &nn);
}

/* Read a CUgraphNodeParams of a modelled type into nn. */
static CUresult node_params_in(const CUgraphNodeParams *p, fc_newnode *nn)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] ||
        p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    memset(nn, 0, sizeof *nn);
    nn->type = p->type;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_HOST:
        nn->host.fn = p->host.fn;
        nn->host.userData = p->host.userData;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if ((unsigned)p->graph.ownership > CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
            return CUDA_ERROR_INVALID_VALUE;
        nn->child = p->graph.graph;
        nn->move_child = p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult add_node_params(CUgraphNode *ph, CUgraph hGraph,
                                const CUgraphNode *deps,
                                const CUgraphEdgeData *edges, size_t ndeps,
                                const CUgraphNodeParams *p)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_newnode nn;
    CUresult r = node_params_in(p, &nn);
    if (r == CUDA_SUCCESS)
        r = edges_check(edges, ndeps);
    return r == CUDA_SUCCESS ? add_node(ph, hGraph, deps, ndeps, &nn) : r;
}

FC_API CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies,
                                       size_t numDependencies,
                                       CUgraphNodeParams *nodeParams)
{
    return add_node_params(phGraphNode, hGraph, dependencies, NULL,
                           numDependencies, nodeParams);
}

FC_API CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode,
                                          CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData,
                                          size_t numDependencies,
                                          CUgraphNodeParams *nodeParams)
{
    return add_node_params(phGraphNode, hGraph, dependencies, dependencyData,
                           numDependencies, nodeParams);
}

/* Look up a node; NULL unless it exists and (type >= 0) has that type. */
static fc_node *node_get(CUgraphNode h, int type)
{
    fc_node *n = obj_get(h, FC_NODE);
    return n && (type < 0 || n->type == (CUgraphNodeType)type) ? n : NULL;
}

FC_API CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode,
                                                 CUDA_HOST_NODE_PARAMS *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = node_get(hNode, CU_GRAPH_NODE_TYPE_HOST);
    if (n)
        *nodeParams = n->host;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphHostNodeSetParams(
    CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = node_get(hNode, CU_GRAPH_NODE_TYPE_HOST);
    if (n)
        n->host = *nodeParams;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode,
                                                      CUgraph *phGraph)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = node_get(hNode, CU_GRAPH_NODE_TYPE_GRAPH);
    if (n)
        *phGraph = (CUgraph)n->child;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Only host nodes have parameters that may be set in this model. */
static CUresult node_params_set(fc_node *n, const CUgraphNodeParams *p)
{
    fc_newnode nn;
    CUresult r = node_params_in(p, &nn);
    if (r != CUDA_SUCCESS)
        return r;
    if (nn.type != n->type)
        return CUDA_ERROR_INVALID_VALUE;
    if (nn.type != CU_GRAPH_NODE_TYPE_HOST)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!nn.host.fn)
        return CUDA_ERROR_INVALID_VALUE;
    n->host = nn.host;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode,
                                             CUgraphNodeParams *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_node *n = node_get(hNode, -1);
    CUresult r = n ? node_params_set(n, nodeParams) : CUDA_ERROR_INVALID_VALUE;
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphNodeGetParams(CUgraphNode hNode,
                                             CUgraphNodeParams *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = node_get(hNode, -1);
    if (n) {
        memset(nodeParams, 0, sizeof *nodeParams);
        nodeParams->type = n->type;
        if (n->type == CU_GRAPH_NODE_TYPE_HOST) {
            nodeParams->host.fn = n->host.fn;
            nodeParams->host.userData = n->host.userData;
        } else if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            nodeParams->graph.graph = (CUgraph)n->child;
        }
    }
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode,
                                           CUgraphNodeType *type)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = node_get(hNode, -1);
    if (n)
        *type = n->type;
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The driver's convention for list queries: with out NULL, report the
 * count; else fill up to *num entries, set unused ones to NULL, and lower
 * *num to the real count when that is smaller. */
static void list_out(fc_node *const *items, size_t count, int roots_only,
                     CUgraphNode *out, CUgraphEdgeData *edges, size_t *num)
{
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        if (roots_only && items[i]->ndeps)
            continue;
        if (out && k < *num) {
            out[k] = (CUgraphNode)items[i];
            if (edges)
                memset(&edges[k], 0, sizeof edges[k]);
        }
        k++;
    }
    if (out)
        for (size_t i = k; i < *num; i++)
            out[i] = NULL;
    if (!out || k < *num)
        *num = k;
}

static CUresult graph_list(CUgraph hGraph, int roots_only, CUgraphNode *nodes,
                           size_t *num)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!num)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = obj_get(hGraph, FC_GRAPH);
    if (gr)
        list_out(gr->nodes, gr->n, roots_only, nodes, NULL, num);
    fc_unlock();
    return gr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes,
                                        size_t *numNodes)
{
    return graph_list(hGraph, 0, nodes, numNodes);
}

FC_API CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph,
                                            CUgraphNode *rootNodes,
                                            size_t *numRootNodes)
{
    return graph_list(hGraph, 1, rootNodes, numRootNodes);
}

static CUresult node_deps(CUgraphNode hNode, CUgraphNode *deps,
                          CUgraphEdgeData *edges, size_t *num)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!num || (edges && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *n = node_get(hNode, -1);
    if (n)
        list_out(n->deps, n->ndeps, 0, deps, edges, num);
    fc_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode,
                                                   CUgraphNode *dependencies,
                                                   size_t *numDependencies)
{
    return node_deps(hNode, dependencies, NULL, numDependencies);
}

FC_API CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode,
                                                      CUgraphNode *dependencies,
                                                      CUgraphEdgeData *edgeData,
                                                      size_t *numDependencies)
{
    return node_deps(hNode, dependencies, edgeData, numDependencies);
}

FC_API CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!phGraphClone)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *src = obj_get(originalGraph, FC_GRAPH);
    fc_graph *c = src ? graph_clone(src, 1) : NULL;
    fc_unlock();
    if (!c)
        return src ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    *phGraphClone = (CUgraph)c;
    return CUDA_SUCCESS;
}

/* The copy of node `node_id` (of graph `graph_id`) in clone c or in one of
 * c's child graphs. */
static fc_node *find_copy(const fc_graph *c, uint64_t graph_id,
                          uint64_t node_id)
{
    for (size_t i = 0; i < c->n; i++) {
        fc_node *n = c->nodes[i];
        if (c->clone_of == graph_id && n->origin == node_id)
            return n;
        fc_node *inner = n->child ? find_copy(n->child, graph_id, node_id) : NULL;
        if (inner)
            return inner;
    }
    return NULL;
}

FC_API CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *phNode,
                                               CUgraphNode hOriginalNode,
                                               CUgraph hClonedGraph)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!phNode)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_node *o = node_get(hOriginalNode, -1);
    fc_graph *c = obj_get(hClonedGraph, FC_GRAPH);
    fc_node *n = o && c ? find_copy(c, o->graph->id, o->id) : NULL;
    fc_unlock();
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *phNode = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static void dot_graph(FILE *f, const fc_graph *gr)
{
    static const char *const names[] = {
        [CU_GRAPH_NODE_TYPE_HOST] = "HOST",
        [CU_GRAPH_NODE_TYPE_GRAPH] = "GRAPH",
        [CU_GRAPH_NODE_TYPE_EMPTY] = "EMPTY",
    };
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *n = gr->nodes[i];
        fprintf(f, "  n%llu [label=\"%s", (unsigned long long)n->id,
                names[n->type]);
        if (n->type == CU_GRAPH_NODE_TYPE_HOST)
            fprintf(f, "\\nfn=%p\\nuserData=%p", (void *)n->host.fn,
                    n->host.userData);
        fprintf(f, "\"];\n");
        for (size_t k = 0; k < n->ndeps; k++)
            fprintf(f, "  n%llu -> n%llu;\n", (unsigned long long)n->deps[k]->id,
                    (unsigned long long)n->id);
        if (n->child) {
            fprintf(f, "  subgraph cluster_%llu {\n",
                    (unsigned long long)n->child->id);
            dot_graph(f, n->child);
            fprintf(f, "  }\n");
        }
    }
}

FC_API CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path,
                                             unsigned int flags)
{
    (void)flags;
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = obj_get(hGraph, FC_GRAPH);
    FILE *f = gr ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "digraph fakecuda_graph_%llu {\n", (unsigned long long)gr->id);
        dot_graph(f, gr);
        fprintf(f, "}\n");
    }
    int failed = f && fclose(f) != 0;
    fc_unlock();
    if (!gr)
        return CUDA_ERROR_INVALID_VALUE;
    return f && !failed ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

/* ======================================================================
 * User object API (the model is above the graph objects).
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
    CUresult r = g.stopping ? CUDA_ERROR_DEINITIALIZED : worker_ensure();
    if (r == CUDA_SUCCESS)
        obj_add(&o->obj, FC_UOBJ);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuUserObjectCreate(CUuserObject *object_out, void *ptr,
                                           CUhostFn destroy,
                                           unsigned int initialRefcount,
                                           unsigned int flags)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!object_out || !destroy || !uobj_count_ok(initialRefcount) ||
        flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    fc_uobj *o = calloc(1, sizeof *o);
    fc_work *w = work_new(1);
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
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!uobj_count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_uobj *o = obj_get(object, FC_UOBJ);
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
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!uobj_count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_uobj *o = obj_get(object, FC_UOBJ);
    CUresult r = o && o->user_refs >= count ? CUDA_SUCCESS
                                            : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        o->user_refs -= count;
        uobj_put(o, count);
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
    if (graph_hold(gr, o, count) != 0)
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
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!uobj_count_ok(count) || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = graph_retain_locked(obj_get(graph, FC_GRAPH),
                                     obj_get(object, FC_UOBJ), count, flags);
    fc_unlock();
    return r;
}

/* A graph may release only references it owns. */
FC_API CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph,
                                                 CUuserObject object,
                                                 unsigned int count)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!uobj_count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_graph *gr = obj_get(graph, FC_GRAPH);
    fc_uobj *o = obj_get(object, FC_UOBJ);
    fc_uref *u = gr && o ? uref_find(gr, o) : NULL;
    CUresult r = u && u->n >= count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        u->n -= count;
        if (u->n == 0)
            *u = gr->urefs[--gr->n_urefs];
        uobj_put(o, count);
    }
    fc_unlock();
    return r;
}

/* ======================================================================
 * Executable graphs: a private copy of the graph, taken at instantiation.
 * ====================================================================== */
typedef struct fc_exec {
    fc_obj obj;
    fc_graph *snap;
    unsigned long long flags;
} fc_exec;

#define FC_INSTANTIATE_FLAGS                            \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |  \
     CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |               \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |        \
     CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate_locked(CUgraphExec *ph, CUgraph hGraph,
                                   unsigned long long flags)
{
    fc_graph *gr = obj_get(hGraph, FC_GRAPH);
    if (!gr || gr->capturer || (flags & ~(unsigned long long)FC_INSTANTIATE_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (!cur_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    fc_exec *e = calloc(1, sizeof *e);
    if (!e || !(e->snap = graph_clone(gr, 0))) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->flags = flags;
    obj_add(&e->obj, FC_EXEC);
    *ph = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *ph, CUgraph hGraph,
                            unsigned long long flags)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = instantiate_locked(ph, hGraph, flags);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec,
                                                    CUgraph hGraph,
                                                    unsigned long long flags)
{
    return instantiate(phGraphExec, hGraph, flags);
}

/* The pre-12.0 form: no flags, an error node and a log buffer. */
static CUresult instantiate_log(CUgraphExec *ph, CUgraph hGraph,
                                CUgraphNode *phErrorNode, char *logBuffer,
                                size_t bufferSize)
{
    CUresult r = instantiate(ph, hGraph, 0);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return r;
}

FC_API CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec,
                                           CUgraph hGraph,
                                           CUgraphNode *phErrorNode,
                                           char *logBuffer, size_t bufferSize)
{
    return instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer,
                           bufferSize);
}

FC_API CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec,
                                              CUgraph hGraph,
                                              CUgraphNode *phErrorNode,
                                              char *logBuffer, size_t bufferSize)
{
    return instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer,
                           bufferSize);
}

static CUresult instantiate_params(CUgraphExec *ph, CUgraph hGraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *p, int ptsz)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
        fc_stream *s;
        fc_lock();
        r = stream_get(p->hUploadStream, ptsz, &s);
        fc_unlock();
    }
    if (r == CUDA_SUCCESS)
        r = instantiate(ph, hGraph, p->flags);
    p->hErrNode_out = NULL;
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                      : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithParams(
    CUgraphExec *phGraphExec, CUgraph hGraph,
    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams, 0);
}

FC_API CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(
    CUgraphExec *phGraphExec, CUgraph hGraph,
    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams, 1);
}

FC_API CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_exec *e = obj_get(hGraphExec, FC_EXEC);
    if (e) {
        obj_del(&e->obj);
        graph_free(e->snap);
        free(e);
    }
    fc_unlock();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* All host nodes of the copy, as one queue entry: a launch's parameters
 * are those of the exec when it is launched. */
static CUresult graph_enqueue(fc_stream *s, const fc_graph *snap)
{
    size_t n = graph_count_host(snap);
    fc_work *w = work_new(n);
    if (!w)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t k = 0;
    graph_tasks(snap, w->tasks, &k);
    w->ntasks = k;
    return enqueue(s, w);
}

static CUresult graph_launch(CUgraphExec hExec, CUstream h, int ptsz)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_exec *e = obj_get(hExec, FC_EXEC);
    fc_stream *s;
    CUresult r = e ? stream_get(h, ptsz, &s) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = s->cap_status ? capture_graph(s, e->snap) : graph_enqueue(s, e->snap);
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 0);
}

FC_API CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec,
                                           CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 1);
}

/* The exec's copy of user node h (a node of the graph it was instantiated
 * from, or of the graph it was last updated from), top level only. */
static fc_node *exec_node(const fc_exec *e, CUgraphNode h)
{
    const fc_node *u = node_get(h, -1);
    for (size_t i = 0; u && i < e->snap->n; i++) {
        fc_node *x = e->snap->nodes[i];
        if (x->origin == u->id || x->updated_from == u->id)
            return x;
    }
    return NULL;
}

FC_API CUresult CUDAAPI cuGraphExecHostNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode,
    const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    fc_exec *e = obj_get(hGraphExec, FC_EXEC);
    fc_node *x = e ? exec_node(e, hNode) : NULL;
    CUresult r = x && x->type == CU_GRAPH_NODE_TYPE_HOST ? CUDA_SUCCESS
                                                         : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        x->host = *nodeParams;
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec,
                                                 CUgraphNode hNode,
                                                 CUgraphNodeParams *nodeParams)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_exec *e = obj_get(hGraphExec, FC_EXEC);
    fc_node *x = e ? exec_node(e, hNode) : NULL;
    CUresult r = x ? node_params_set(x, nodeParams) : CUDA_ERROR_INVALID_VALUE;
    fc_unlock();
    return r;
}

static int same_deps(const fc_node *a, const fc_node *b)
{
    if (a->ndeps != b->ndeps)
        return 0;
    for (size_t i = 0; i < b->ndeps; i++) {
        size_t k = 0;
        while (k < a->ndeps && a->deps[k]->index != b->deps[i]->index)
            k++;
        if (k == a->ndeps)
            return 0;
    }
    return 1;
}

/* Can graph gr replace copy snap? Nodes are paired in creation order, as
 * the driver does for graphs built by the same sequence of calls. */
static CUgraphExecUpdateResult update_check(const fc_graph *snap,
                                            const fc_graph *gr,
                                            CUgraphNode *err_node)
{
    *err_node = NULL;
    if (snap->n != gr->n)
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < gr->n; i++) {
        const fc_node *a = snap->nodes[i], *b = gr->nodes[i];
        *err_node = (CUgraphNode)b;
        if (a->type != b->type)
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (!same_deps(a, b))
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        CUgraphExecUpdateResult r =
            a->child ? update_check(a->child, b->child, err_node)
                     : CU_GRAPH_EXEC_UPDATE_SUCCESS;
        if (r != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            return r;
    }
    *err_node = NULL;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* Room in snap and its child graphs for the references of gr and its
 * child graphs, so that update_apply cannot fail half way. */
static int update_reserve(fc_graph *snap, const fc_graph *gr)
{
    if (urefs_reserve(snap, gr->n_urefs) != 0)
        return -1;
    for (size_t i = 0; i < gr->n; i++)
        if (snap->nodes[i]->child &&
            update_reserve(snap->nodes[i]->child, gr->nodes[i]->child) != 0)
            return -1;
    return 0;
}

/* Parameters are copied in, and so are user object references: the CUDA
 * Programming Guide ("CUDA User Objects") says the references of the new
 * source graph are cloned and replace those of the target, child graphs
 * included; cuda.h says nothing on it. A reference released here still
 * outlasts the launches already queued (see uobj_put). */
static void update_apply(fc_graph *snap, const fc_graph *gr)
{
    urefs_assign(snap, gr);
    for (size_t i = 0; i < gr->n; i++) {
        fc_node *a = snap->nodes[i];
        const fc_node *b = gr->nodes[i];
        a->host = b->host;
        a->updated_from = b->id;
        if (a->child)
            update_apply(a->child, b->child);
    }
}

static CUresult exec_update(CUgraphExec hExec, CUgraph hGraph,
                            CUgraphNode *err_node,
                            CUgraphExecUpdateResult *result)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    fc_lock();
    fc_exec *e = obj_get(hExec, FC_EXEC);
    fc_graph *gr = obj_get(hGraph, FC_GRAPH);
    CUresult r = e && gr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        *result = update_check(e->snap, gr, err_node);
        if (*result == CU_GRAPH_EXEC_UPDATE_SUCCESS &&
            update_reserve(e->snap, gr) != 0)
            *result = CU_GRAPH_EXEC_UPDATE_ERROR; /* out of memory */
        if (*result == CU_GRAPH_EXEC_UPDATE_SUCCESS)
            update_apply(e->snap, gr);
        else
            r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    fc_unlock();
    return r;
}

FC_API CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                          CUgraphNode *hErrorNode_out,
                                          CUgraphExecUpdateResult *updateResult_out)
{
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUresult r = exec_update(hGraphExec, hGraph, &err, &res);
    if (hErrorNode_out)
        *hErrorNode_out = err;
    if (updateResult_out)
        *updateResult_out = res;
    return r;
}

FC_API CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec,
                                             CUgraph hGraph,
                                             CUgraphExecUpdateResultInfo *resultInfo)
{
    CUresult r0 = fc_enter();
    if (r0 != CUDA_SUCCESS)
        return r0;
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    memset(resultInfo, 0, sizeof *resultInfo);
    resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    return exec_update(hGraphExec, hGraph, &resultInfo->errorNode,
                       &resultInfo->result);
}

/* ======================================================================
 * Error names and strings.
 * ====================================================================== */
typedef struct fc_error {
    CUresult code;
    const char *name;
    const char *text;
} fc_error;

/* Codes this driver returns get a description; the rest are named only. */
#define FC_ERR_T(c, t) {c, #c, t}
#define FC_ERR(c) {c, #c, #c " (never returned by the test driver)"}

static const fc_error fc_errors[] = {
    FC_ERR_T(CUDA_SUCCESS, "no error"),
    FC_ERR_T(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    FC_ERR_T(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    FC_ERR_T(CUDA_ERROR_NOT_INITIALIZED, "driver not initialized (cuInit not called)"),
    FC_ERR_T(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    FC_ERR(CUDA_ERROR_PROFILER_DISABLED),
    FC_ERR(CUDA_ERROR_PROFILER_NOT_INITIALIZED),
    FC_ERR(CUDA_ERROR_PROFILER_ALREADY_STARTED),
    FC_ERR(CUDA_ERROR_PROFILER_ALREADY_STOPPED),
    FC_ERR(CUDA_ERROR_STUB_LIBRARY),
    FC_ERR(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER),
    FC_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE),
    FC_ERR(CUDA_ERROR_NO_DEVICE),
    FC_ERR_T(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    FC_ERR(CUDA_ERROR_DEVICE_NOT_LICENSED),
    FC_ERR(CUDA_ERROR_INVALID_IMAGE),
    FC_ERR_T(CUDA_ERROR_INVALID_CONTEXT, "invalid or no current context"),
    FC_ERR(CUDA_ERROR_CONTEXT_ALREADY_CURRENT),
    FC_ERR(CUDA_ERROR_MAP_FAILED),
    FC_ERR(CUDA_ERROR_UNMAP_FAILED),
    FC_ERR(CUDA_ERROR_ARRAY_IS_MAPPED),
    FC_ERR(CUDA_ERROR_ALREADY_MAPPED),
    FC_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU),
    FC_ERR(CUDA_ERROR_ALREADY_ACQUIRED),
    FC_ERR(CUDA_ERROR_NOT_MAPPED),
    FC_ERR(CUDA_ERROR_NOT_MAPPED_AS_ARRAY),
    FC_ERR(CUDA_ERROR_NOT_MAPPED_AS_POINTER),
    FC_ERR(CUDA_ERROR_ECC_UNCORRECTABLE),
    FC_ERR(CUDA_ERROR_UNSUPPORTED_LIMIT),
    FC_ERR(CUDA_ERROR_CONTEXT_ALREADY_IN_USE),
    FC_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED),
    FC_ERR(CUDA_ERROR_INVALID_PTX),
    FC_ERR(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT),
    FC_ERR(CUDA_ERROR_NVLINK_UNCORRECTABLE),
    FC_ERR(CUDA_ERROR_JIT_COMPILER_NOT_FOUND),
    FC_ERR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
    FC_ERR(CUDA_ERROR_JIT_COMPILATION_DISABLED),
    FC_ERR(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY),
    FC_ERR(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC),
    FC_ERR(CUDA_ERROR_CONTAINED),
    FC_ERR(CUDA_ERROR_INVALID_SOURCE),
    FC_ERR(CUDA_ERROR_FILE_NOT_FOUND),
    FC_ERR(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND),
    FC_ERR(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED),
    FC_ERR_T(CUDA_ERROR_OPERATING_SYSTEM, "operating system call failed"),
    FC_ERR_T(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    FC_ERR_T(CUDA_ERROR_ILLEGAL_STATE, "operation not valid in this state"),
    FC_ERR(CUDA_ERROR_LOSSY_QUERY),
    FC_ERR_T(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    FC_ERR_T(CUDA_ERROR_NOT_READY, "work still pending"),
    FC_ERR(CUDA_ERROR_ILLEGAL_ADDRESS),
    FC_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
    FC_ERR(CUDA_ERROR_LAUNCH_TIMEOUT),
    FC_ERR(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING),
    FC_ERR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED),
    FC_ERR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED),
    FC_ERR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE),
    FC_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED),
    FC_ERR(CUDA_ERROR_ASSERT),
    FC_ERR(CUDA_ERROR_TOO_MANY_PEERS),
    FC_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED),
    FC_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED),
    FC_ERR(CUDA_ERROR_HARDWARE_STACK_ERROR),
    FC_ERR(CUDA_ERROR_ILLEGAL_INSTRUCTION),
    FC_ERR(CUDA_ERROR_MISALIGNED_ADDRESS),
    FC_ERR(CUDA_ERROR_INVALID_ADDRESS_SPACE),
    FC_ERR(CUDA_ERROR_INVALID_PC),
    FC_ERR(CUDA_ERROR_LAUNCH_FAILED),
    FC_ERR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE),
    FC_ERR(CUDA_ERROR_TENSOR_MEMORY_LEAK),
    FC_ERR_T(CUDA_ERROR_NOT_PERMITTED, "operation not permitted (from a host function)"),
    FC_ERR_T(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    FC_ERR(CUDA_ERROR_SYSTEM_NOT_READY),
    FC_ERR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
    FC_ERR(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE),
    FC_ERR(CUDA_ERROR_MPS_CONNECTION_FAILED),
    FC_ERR(CUDA_ERROR_MPS_RPC_FAILURE),
    FC_ERR(CUDA_ERROR_MPS_SERVER_NOT_READY),
    FC_ERR(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED),
    FC_ERR(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED),
    FC_ERR(CUDA_ERROR_MPS_CLIENT_TERMINATED),
    FC_ERR(CUDA_ERROR_CDP_NOT_SUPPORTED),
    FC_ERR(CUDA_ERROR_CDP_VERSION_MISMATCH),
    FC_ERR_T(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
             "operation not permitted while the stream is capturing"),
    FC_ERR_T(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
             "stream capture was invalidated by an earlier error"),
    FC_ERR(CUDA_ERROR_STREAM_CAPTURE_MERGE),
    FC_ERR(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED),
    FC_ERR(CUDA_ERROR_STREAM_CAPTURE_UNJOINED),
    FC_ERR(CUDA_ERROR_STREAM_CAPTURE_ISOLATION),
    FC_ERR(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT),
    FC_ERR(CUDA_ERROR_CAPTURED_EVENT),
    FC_ERR_T(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
             "stream capture ended from another thread"),
    FC_ERR(CUDA_ERROR_TIMEOUT),
    FC_ERR_T(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
             "graph update not possible (topology or node type changed)"),
    FC_ERR(CUDA_ERROR_EXTERNAL_DEVICE),
    FC_ERR(CUDA_ERROR_INVALID_CLUSTER_SIZE),
    FC_ERR(CUDA_ERROR_FUNCTION_NOT_LOADED),
    FC_ERR(CUDA_ERROR_INVALID_RESOURCE_TYPE),
    FC_ERR(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION),
    FC_ERR(CUDA_ERROR_KEY_ROTATION),
    FC_ERR(CUDA_ERROR_UNKNOWN),
};

static const fc_error *error_find(CUresult e)
{
    for (size_t i = 0; i < sizeof fc_errors / sizeof fc_errors[0]; i++)
        if (fc_errors[i].code == e)
            return &fc_errors[i];
    return NULL;
}

FC_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const fc_error *x = error_find(error);
    *pStr = x ? x->name : NULL;
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const fc_error *x = error_find(error);
    *pStr = x ? x->text : NULL;
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ======================================================================
 * cuGetProcAddress. Callers ask by base name at a CUDA version. Each row is
 * one variant and the first version that gets it; the highest row not above
 * the asked version wins. Under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 * a name with per-thread (_ptsz/_ptds) rows is looked up among those alone,
 * so asking below their version finds nothing, as with the real driver.
 * Results, as measured on driver 580 (CUDA 13.0):
 * - found: CUDA_SUCCESS, *pfn, status SUCCESS;
 * - unknown name or version too old: _v2 gives CUDA_SUCCESS, *pfn = NULL
 *   and status SYMBOL_NOT_FOUND or VERSION_NOT_SUFFICIENT; v1 gives
 *   CUDA_ERROR_NOT_FOUND and leaves *pfn as it was;
 * - a version above the driver's, or unknown flags: CUDA_ERROR_INVALID_VALUE,
 *   outputs untouched.
 * ====================================================================== */
typedef struct fc_proc {
    const char *name;
    int version;
    int per_thread;
    void *fn;
} fc_proc;

#define P(name, ver, fn) {name, ver, 0, (void *)fn}
#define PT(name, ver, fn) {name, ver, 1, (void *)fn}

static const fc_proc fc_procs[] = {
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuCtxCreate", 2000, cuCtxCreate),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxCreate", 11040, cuCtxCreate_v3),
    P("cuCtxCreate", 12050, cuCtxCreate_v4),
    P("cuCtxDestroy", 2000, cuCtxDestroy),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 2000, cuStreamDestroy),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    PT("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    P("cuStreamQuery", 2000, cuStreamQuery),
    PT("cuStreamQuery", 7000, cuStreamQuery_ptsz),
    P("cuStreamAddCallback", 5000, cuStreamAddCallback),
    PT("cuStreamAddCallback", 7000, cuStreamAddCallback_ptsz),
    P("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
    PT("cuLaunchHostFunc", 10000, cuLaunchHostFunc_ptsz),
    P("cuLaunchHostFunc_v2", 13020, cuLaunchHostFunc_v2),
    PT("cuLaunchHostFunc_v2", 13020, cuLaunchHostFunc_v2_ptsz),
    P("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    PT("cuStreamBeginCapture", 10000, cuStreamBeginCapture_ptsz),
    P("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    PT("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2_ptsz),
    P("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PT("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    P("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing_ptsz),
    P("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo),
    PT("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo_ptsz),
    P("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
    PT("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2_ptsz),
    P("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    PT("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3_ptsz),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    PT("cuMemcpyHtoD", 7000, cuMemcpyHtoD_v2_ptds),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    PT("cuMemcpyDtoH", 7000, cuMemcpyDtoH_v2_ptds),
    P("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    P("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuGraphCreate", 10000, cuGraphCreate),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuGraphAddHostNode", 10000, cuGraphAddHostNode),
    P("cuGraphAddEmptyNode", 10000, cuGraphAddEmptyNode),
    P("cuGraphAddChildGraphNode", 10000, cuGraphAddChildGraphNode),
    P("cuGraphChildGraphNodeGetGraph", 10000, cuGraphChildGraphNodeGetGraph),
    P("cuGraphAddNode", 12020, cuGraphAddNode),
    P("cuGraphAddNode", 12030, cuGraphAddNode_v2),
    P("cuGraphHostNodeGetParams", 10000, cuGraphHostNodeGetParams),
    P("cuGraphHostNodeSetParams", 10000, cuGraphHostNodeSetParams),
    P("cuGraphNodeSetParams", 12020, cuGraphNodeSetParams),
    P("cuGraphNodeGetParams", 13020, cuGraphNodeGetParams),
    P("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    P("cuGraphGetNodes", 10000, cuGraphGetNodes),
    P("cuGraphGetRootNodes", 10000, cuGraphGetRootNodes),
    P("cuGraphNodeGetDependencies", 10000, cuGraphNodeGetDependencies),
    P("cuGraphNodeGetDependencies", 12030, cuGraphNodeGetDependencies_v2),
    P("cuGraphClone", 10000, cuGraphClone),
    P("cuGraphNodeFindInClone", 10000, cuGraphNodeFindInClone),
    /* "cuGraphInstantiate" stays the 5-argument _v2: WithFlags has its
     * own name (measured). */
    P("cuGraphInstantiate", 10000, cuGraphInstantiate),
    P("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    P("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    PT("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams_ptsz),
    P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    P("cuGraphLaunch", 10000, cuGraphLaunch),
    PT("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    P("cuGraphExecHostNodeSetParams", 10020, cuGraphExecHostNodeSetParams),
    P("cuGraphExecNodeSetParams", 12020, cuGraphExecNodeSetParams),
    P("cuGraphExecUpdate", 10020, cuGraphExecUpdate),
    P("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2),
    P("cuGraphDebugDotPrint", 11030, cuGraphDebugDotPrint),
    P("cuUserObjectCreate", 11030, cuUserObjectCreate),
    P("cuUserObjectRetain", 11030, cuUserObjectRetain),
    P("cuUserObjectRelease", 11030, cuUserObjectRelease),
    P("cuGraphRetainUserObject", 11030, cuGraphRetainUserObject),
    P("cuGraphReleaseUserObject", 11030, cuGraphReleaseUserObject),
};
#undef P
#undef PT

static int proc_has_per_thread(const char *symbol)
{
    for (size_t i = 0; i < sizeof fc_procs / sizeof fc_procs[0]; i++)
        if (fc_procs[i].per_thread && strcmp(fc_procs[i].name, symbol) == 0)
            return 1;
    return 0;
}

/* The variant for (symbol, version, flags), or NULL with *st saying why. */
static void *proc_find(const char *symbol, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *st)
{
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                     proc_has_per_thread(symbol);
    const fc_proc *best = NULL;
    *st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    for (size_t i = 0; i < sizeof fc_procs / sizeof fc_procs[0]; i++) {
        const fc_proc *p = &fc_procs[i];
        if (p->per_thread != per_thread || strcmp(p->name, symbol) != 0)
            continue;
        if (!best)
            *st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        if (p->version <= cudaVersion && (!best || p->version > best->version))
            best = p;
    }
    if (best)
        *st = CU_GET_PROC_ADDRESS_SUCCESS;
    return best ? best->fn : NULL;
}

static int proc_args_ok(const char *symbol, void **pfn, int cudaVersion,
                        cuuint64_t flags)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    return symbol && pfn && !(flags & ~known) && cudaVersion <= FC_DRIVER_VERSION;
}

FC_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn,
                                         int cudaVersion, cuuint64_t flags)
{
    CUdriverProcAddressQueryResult st;
    if (!proc_args_ok(symbol, pfn, cudaVersion, flags))
        return CUDA_ERROR_INVALID_VALUE;
    void *fn = proc_find(symbol, cudaVersion, flags, &st);
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = fn;
    return CUDA_SUCCESS;
}

FC_API CUresult CUDAAPI cuGetProcAddress_v2(
    const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
    CUdriverProcAddressQueryResult *symbolStatus)
{
    CUdriverProcAddressQueryResult st;
    if (!proc_args_ok(symbol, pfn, cudaVersion, flags))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = proc_find(symbol, cudaVersion, flags, &st);
    if (symbolStatus)
        *symbolStatus = st;
    return CUDA_SUCCESS;
}

/* ======================================================================
 * Unload: stop the callback thread without hanging the exit.
 * ====================================================================== */
__attribute__((destructor)) static void fc_unload(void)
{
    fc_lock();
    g.stopping = 1;
    pthread_cond_broadcast(&g.work_cv);
    if (!g.worker_started || t_on_worker) {
        fc_unlock();
        return;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 1;
    while (g.worker_running &&
           pthread_cond_timedwait(&g.done_cv, &g.mu, &deadline) != ETIMEDOUT)
        ;
    int ended = !g.worker_running;
    g.worker_started = 0;
    fc_unlock();
    if (ended)
        pthread_join(g.worker, NULL);
    else
        pthread_detach(g.worker); /* stuck in a host function */
}
