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
 *   stream capture of host functions and graph launches, across streams
 *   through events (fc_event.c); a DOT dump.
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
 * (CUDA_ERROR_NOT_SUPPORTED), events beyond create, record, synchronize,
 * destroy and a stream's wait (which outside capture is already met: one
 * queue), cuStreamUpdateCaptureDependencies, the global-mode capture ban on other
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
#ifndef HCG_FAKECUDA_H
#define HCG_FAKECUDA_H

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
FC_API CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData,
                                            unsigned int syncMode);
FC_API CUresult CUDAAPI cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn, void *userData,
                                                 unsigned int syncMode);
FC_API CUresult CUDAAPI cuGraphNodeGetParams(CUgraphNode hNode,
                                             CUgraphNodeParams *nodeParams);

#define FC_DRIVER_VERSION 13020
#define FC_DEVICE_NAME "fakecuda test device (no GPU)"

/* ======================================================================
 * Handles. Every handle given out (context, stream, graph, node, exec,
 * user object) is the address of an object that starts with fc_obj and is
 * kept in a hash set, so a stale or foreign handle is refused with an
 * error instead of being dereferenced.
 * ====================================================================== */
enum fc_kind { FC_CTX = 1, FC_STREAM, FC_GRAPH, FC_NODE, FC_EXEC, FC_UOBJ, FC_EVENT };

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

/* What a captured node may depend on: the last node of the stream, and
 * of each stream whose capture event it waited for. */
#define FC_CAP_DEPS 8

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
    fc_graph *cap_graph;                /* the origin's; a joined stream's is shared */
    int cap_user_graph;                 /* cap_graph is the caller's (ToGraph) */
    CUgraphNode cap_deps[FC_CAP_DEPS];  /* what the next captured node depends on */
    CUgraphEdgeData cap_edges[FC_CAP_DEPS];
    size_t n_cap_deps;
    /* Cross-stream capture: a stream that joined another's capture by
     * waiting for an event recorded in it has that stream as cap_origin;
     * an origin lists the streams that joined it (joined, join_next),
     * which leave the capture when it ends or is dropped. */
    struct fc_stream *cap_origin, *joined, *join_next;
    /* An origin: the last nodes of joined streams destroyed meanwhile,
     * which its end still wants rejoined (as driver 580 does). */
    CUgraphNode cap_gone[FC_CAP_DEPS];
    size_t n_cap_gone;
} fc_stream;

/* An event (fc_event.c): where its last record was made. Outside capture
 * that is a point in the one queue (seq); inside a capture, the capture
 * (its origin stream and id) and the nodes a stream waiting for it then
 * depends on. */
typedef struct fc_event {
    fc_obj obj;
    uint64_t seq;
    int in_capture;
    fc_stream *cap_origin;
    cuuint64_t cap_id;
    CUgraphNode deps[FC_CAP_DEPS];
    size_t ndeps;
} fc_event;

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

/* All the driver's state, guarded by mu; host functions run without it. */
struct fc_state {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* queue became non-empty, or stopping */
    pthread_cond_t done_cv; /* done_seq advanced, or the thread ended */
    fc_work *head, *tail;
    uint64_t enq_seq, done_seq;
    int worker_started, worker_running, stopping;
    pthread_t worker;
    fc_obj *objs[FC_BUCKETS];
    fc_mem *mems;
    int primary_refs;
    unsigned n_capturing;
    uint64_t cap_epoch; /* bumped by cuCtxSynchronize to invalidate captures */
};
extern struct fc_state fc_state;

/* ======================================================================
 * User objects (fc_uobj.c). A reference count and a destructor. The
 * caller's references are counted apart from those that graphs own, so
 * that releasing or moving references the caller does not own (undefined
 * behaviour in the real driver) is refused here. The last release queues
 * the destructor behind all work already queued: it runs on the callback
 * thread, after every launch enqueued while some executable graph still
 * held a reference.
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

/* ======================================================================
 * Graph objects (fc_graph.c; the API in fc_graph_build.c and
 * fc_graph_query.c, executable graphs in fc_exec.c). Nodes are kept in
 * creation order: a node can only depend on nodes that already exist, so
 * that order is topological, and a launch runs host nodes in it.
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
    uint64_t walk; /* the last walk that reached it (fc_capture.c, unjoined) */
};

/* ---- fc_core.c: state, lock, handles ------------------------------------ */
extern atomic_int fc_init_done;      /* cuInit has run */
extern fc_ctx fc_primary;            /* device 0's primary context */
extern fc_stream fc_legacy;          /* the NULL stream and CU_STREAM_LEGACY */
extern _Thread_local fc_stream fc_t_ptds; /* this thread's default stream */
extern _Thread_local fc_ctx *fc_t_ctx;    /* may be stale: always looked up */
extern _Thread_local int fc_t_on_worker;  /* this is the callback thread */
void fc_lock(void);
void fc_unlock(void);
int fc_inited(void);
CUresult fc_enter(void);
/* A knob (README): name set to 1 in the environment, read now, or read
 * once into *v (-1 until then) for one asked on every launch. */
int fc_knob(const char *name);
int fc_knob_once(atomic_int *v, const char *name);
/* The start of every entry point but cuInit: what fc_enter says, returned
 * unless it is CUDA_SUCCESS. */
#define FC_ENTER()                                                             \
    do {                                                                       \
        CUresult fc_enter_r_ = fc_enter();                                     \
        if (fc_enter_r_ != CUDA_SUCCESS)                                       \
            return fc_enter_r_;                                                \
    } while (0)
uint64_t fc_id(void);
void fc_obj_add(fc_obj *o, int kind);
void fc_obj_del(fc_obj *o);
void *fc_obj_get(const void *h, int kind);
fc_ctx *fc_cur_ctx(void);

/* ---- fc_hostfn.c: the callback thread's queue ---------------------------- */
void fc_atfork_init(void);
CUresult fc_worker_ensure(void);
fc_work *fc_work_new(size_t ntasks);
CUresult fc_queue_push(fc_work *w, uint64_t *seq);
CUresult fc_enqueue(fc_stream *s, fc_work *w);
CUresult fc_wait_done(uint64_t seq);

/* ---- fc_stream.c, fc_capture.c, fc_memory.c ------------------------------- */
CUresult fc_stream_get(CUstream h, int ptsz, fc_stream **out);
CUresult fc_capture_forbid(fc_stream *s);
/* The capture s takes part in, every stream of it, is invalidated (an end
 * then says CUDA_ERROR_STREAM_CAPTURE_INVALIDATED); nothing if s does not
 * capture. */
void fc_capture_invalidate(fc_stream *s);
void fc_stream_capture_drop(fc_stream *s);
/* The capture s takes part in, by its origin stream (s itself for one it
 * began); NULL if s does not capture. */
fc_stream *fc_capture_origin(fc_stream *s);
/* s joins the capture that ev was recorded in (or, already in it, adds
 * ev's nodes to what its next node depends on). */
CUresult fc_capture_join(fc_stream *s, const fc_event *ev);
/* s is being destroyed: events recorded in its captures forget it. */
void fc_events_forget(const fc_stream *s);
CUresult fc_capture_task(fc_stream *s, const fc_task *t);
CUresult fc_capture_graph(fc_stream *s, const fc_graph *src);
void fc_mem_release(fc_mem *m);

/* ---- fc_graph.c, fc_graph_build.c, fc_uobj.c: the graph model -------------- */
fc_graph *fc_graph_new(int registered);
void fc_graph_free(fc_graph *gr);
fc_graph *fc_graph_clone(const fc_graph *src, int registered);
fc_node *fc_node_add(fc_graph *gr, CUgraphNodeType type, size_t ndeps);
size_t fc_graph_count_host(const fc_graph *gr);
void fc_graph_tasks(const fc_graph *gr, fc_task *t, size_t *k);
int fc_urefs_reserve(fc_graph *gr, size_t n);
fc_uref *fc_uref_find(const fc_graph *gr, const fc_uobj *o);
int fc_graph_hold(fc_graph *gr, fc_uobj *o, uint64_t n);
void fc_urefs_assign(fc_graph *dst, const fc_graph *src);
fc_node *fc_node_get(CUgraphNode h, int type);
CUresult fc_node_params_set(fc_node *n, const CUgraphNodeParams *p);
void fc_uobj_put(fc_uobj *o, uint64_t n);

#endif /* HCG_FAKECUDA_H */
