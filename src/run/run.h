/* The run layer (src/run): the calls the driver runs instead of the
 * program's host functions. Each thread's pool of calls, the flow control
 * that keeps launches from outrunning the collector, the preparation of a
 * call at enqueue (recognise, check, allocate), and the trampoline that
 * runs it (re-check, copy, events). Above the check and events layers. */
#ifndef HCG_RUN_H
#define HCG_RUN_H

#include "check/check.h"

/* One host-function launch (stream) or one host node (graph). */
struct hcg_pool;

/* A graph node's launches, as cuGraphLaunch recorded them for each call its
 * executable graph holds (src/wrap/graph.c, under its lock), read by the
 * trampoline: the k-th run of a call is taken to be the k-th launch
 * recorded for it (launches of one executable graph run in order). A slot
 * is valid while n is the launch's number + 1, written last. */
#define HCG_REPLAY_SLOTS 16
typedef struct hcg_replay {
    _Atomic uint64_t n;
    _Atomic uint64_t seq, t_enqueue; /* the replay's own seq; ticks at launch */
    _Atomic uintptr_t stream;
    _Atomic uint32_t tid;            /* the launching thread */
} hcg_replay;
typedef struct hcg_replays {
    _Atomic uint64_t launched; /* recorded (application threads, serialised) */
    _Atomic uint64_t ran;      /* runs taken (callback threads) */
    hcg_replay slot[HCG_REPLAY_SLOTS];
} hcg_replays;

/* The first cache line holds all that a stream launch of an ordinary host
 * function touches: written by the launching thread, read by the callback
 * thread, which writes back only next_free when it returns the call. The
 * second line is for copies and graph nodes. */
typedef struct hcg_call {
    CUhostFn fn;
    void *user;
    uintptr_t stream;
    uint64_t t_enqueue;
    uint64_t seq;
    struct hcg_call *next_free;
    struct hcg_pool *owner;   /* the pool it returns to */
    uint8_t kind;             /* hcg_fnkind */
    uint8_t oneshot;          /* released after it ran (stream launches) */
    uint8_t api;              /* hcg_api: which entry point enqueued it */
    uint8_t enqueue_status;   /* hcguard_status at enqueue (audit mode) */
    uint8_t wrapped;          /* fn is cuda.bindings' wrapper: user is malloc'd by it */
    /* -- second line: copies (rec, snap) and graph nodes (the rest) -- */
    void *rec __attribute__((aligned(64))); /* copies: the record; wrapped: the wrapper's data */
    hcguard_copy_record snap; /* the record as validated at enqueue */
    uintptr_t graph, node;    /* for attribution */
    _Atomic uint32_t refs;    /* holders: its user object (roots), a root's chain */
    struct hcg_call *root;    /* the call the node was created with (NULL: this) */
    _Atomic(void *) chain;    /* root only: its hcg_link list (graph.c) */
    void *uobj;               /* root only: the CUuserObject that owns it */
    CUhostFn inner;           /* wrapped: the function the wrapper calls with rec */
    uint64_t gen;             /* copies: hcg_oracle_gen() when the check began */
    hcg_replays *replays;     /* graph nodes: their launches, or NULL (graph.c owns it) */
} __attribute__((aligned(64))) hcg_call;

/* The one initialiser: a call from this thread's pool for a one-shot
 * launch of fn(user) through api on s, its first line set, its sequence
 * number and enqueue time taken now (a graph node's caller then changes
 * what differs); NULL if out of memory. */
hcg_call *hcg_call_new(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_fnkind kind,
                       hcguard_status why, int wrapped);
/* Back to the pool at once: the allocating thread, for a call the driver
 * never saw. */
void hcg_call_free_local(hcg_call *c);
/* Back to its pool from any thread (the callback thread after a stream
 * launch ran, a graph's last holder). */
void hcg_call_release(hcg_call *c);
/* Flow control: a one-shot launch made from p (after the driver took it),
 * which may wait for the collector (see pool.c). */
void hcg_pool_flow(struct hcg_pool *p);
/* Make c stop loudly if it ever runs again (graph calls, before release). */
void hcg_call_poison(hcg_call *c);
void hcg_pool_after_fork(void);
void CUDA_CB hcg_trampoline(void *call);
/* The same for cuStreamAddCallback's CUstreamCallback (fn is one). */
void CUDA_CB hcg_stream_cb_trampoline(CUstream s, CUresult status, void *call);

/* The thread that launched the stream launch numbered seq (its pool's
 * owner now), 0 if unknown. */
uint32_t hcg_seq_launcher_tid(uint64_t seq);
/* Record a launch of a graph that holds c (graph.c, serialised by its
 * caller), and undo the last one recorded (the launch failed). */
void hcg_replay_note(hcg_call *c, uintptr_t stream, uint64_t ticks, uint32_t tid);
void hcg_replay_unnote(hcg_call *c);

/* Count a launch that reached the driver, by the launching thread, in its
 * own pool p, taken before the driver call (after it, the call may be
 * another thread's already). */
void hcg_count_launch(struct hcg_pool *p, hcg_fnkind kind);
/* Count a host function set on a graph node. */
void hcg_count_node(hcg_fnkind kind);
/* Launched on streams (counted in the pools) and set on graph nodes. */
uint64_t hcg_launched_of(hcg_fnkind kind);
uint64_t hcg_nodes_made(void);
/* Launches counted in a flight record's copy of the pools. */
uint64_t hcg_pool_store_launched(const void *store, hcg_fnkind kind);

/* ---- prepare.c: a call made at enqueue ---------------------------------- */
/* What a cuda.bindings wrapper will call, from its data {callback, user}:
 * its kind, or HCG_FN_ORDINARY (*fn and *rec left) if not a copy or wrong. */
hcg_fnkind hcg_look_through(void *data, CUhostFn *fn, void **rec);
/* HCGUARD_DEBUG: the first host functions enqueued, and what they are. */
void hcg_debug_call(hcg_api api, CUhostFn fn, void *user, hcg_fnkind kind, CUhostFn inner);
/* Recognise fn (through cuda.bindings' wrapper), check its record if it is
 * a copy, and make the call the trampoline will run. CUDA_ERROR_INVALID_VALUE
 * if refused (reported); else CUDA_SUCCESS and *out, NULL if out of memory. */
CUresult hcg_prepare_call(hcg_api api, CUstream s, CUhostFn fn, void *user, hcg_call **out);


#endif /* HCG_RUN_H */
