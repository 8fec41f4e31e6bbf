/* The interception layer (src/intercept): what the program reaches instead
 * of the driver: dlsym, dlvsym and cuGetProcAddress routed to hcguard's
 * wrappers, and thunks that notice any driver call made inside a host
 * function. Above the driver layer. */
#ifndef HCG_INTERCEPT_H
#define HCG_INTERCEPT_H

#include "driver/driver.h"

/* ---- intercept.c: routing of dlsym, dlvsym, cuGetProcAddress ---------- */
/* If p is the real address of an entry point hcguard wraps, return the
 * wrapper; else p. name is the symbol the caller asked for (may be NULL),
 * used to adopt pointers for variants the driver does not export. */
void *hcg_route(const char *name, void *p, cuuint64_t flags);

/* ---- thunk.c: entry points handed out for any driver function ---------- */
/* Set by the trampoline while the thread runs a host function. Initial-exec
 * TLS, so the thunks read it with one load from the thread pointer. */
extern _Thread_local unsigned char hcg_in_host_fn
    __attribute__((tls_model("initial-exec"), visibility("hidden")));


#include "intercept/thunk_layout.h" /* HCG_THUNK_MAX */
/* A handler's answer that lets the call through to the real function. */
#define HCG_THUNK_PASS ((CUresult)-1)
/* Called when a thunk is entered inside a host function: HCG_THUNK_PASS
 * calls real with the caller's arguments; anything else is returned to the
 * caller instead. Runs with hcg_in_host_fn cleared. For an export not yet
 * called, real is its resolver. */
typedef CUresult (*hcg_thunk_handler)(unsigned idx, const char *name, void *real);

/* A thunk that behaves exactly like real (any signature), noticing calls
 * made inside a host function; the same real always gets the same thunk.
 * Returns real itself if it is NULL or a thunk, if the table is full, or on
 * an architecture without thunks. Application threads; thread-safe. */
void *hcg_thunk_for(const char *name, void *real);
void hcg_thunk_set_handler(hcg_thunk_handler h); /* NULL: pass everything */
const char *hcg_thunk_name(unsigned idx);        /* NULL if idx is not in use */
unsigned hcg_thunk_count(void);
void hcg_thunk_fork_lock(void); /* fork hooks (src/lifecycle/fork.c) */
void hcg_thunk_fork_unlock(void);
void hcg_thunk_after_fork(void);
/* The exports: a thunk for each function of the driver hcguard was built
 * against, at indices HCG_THUNK_MAX + i, which libhcguard exports under the
 * function's name. The first call looks the function up in the driver
 * (loading it); a call that cannot be served returns
 * CUDA_ERROR_NOT_INITIALIZED (no driver) or CUDA_ERROR_NOT_FOUND (the
 * driver lacks it). None without thunks. */
unsigned hcg_thunk_exports(void);
void *hcg_thunk_export(unsigned i); /* export i's entry point, NULL past the end */
int hcg_thunk_is_export(const void *p);

/* Export hcg_w_<name> under the driver's own name, while hcguard's own
 * references stay on the hidden hcg_w_ symbol. */
#define HCG_EXPORT_ALIAS(name)                                                 \
    extern __typeof(hcg_w_##name) name                                         \
        __attribute__((alias("hcg_w_" #name), visibility("default")));
/* The wrappers (src/wrap), hidden; exported under the driver's names. */
CUresult hcg_w_cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult hcg_w_cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
CUresult hcg_w_cuLaunchHostFunc(CUstream, CUhostFn, void *);
CUresult hcg_w_cuLaunchHostFunc_ptsz(CUstream, CUhostFn, void *);
CUresult hcg_w_cuLaunchHostFunc_v2(CUstream, CUhostFn, void *, unsigned int);
CUresult hcg_w_cuLaunchHostFunc_v2_ptsz(CUstream, CUhostFn, void *, unsigned int);
CUresult hcg_w_cuStreamAddCallback(CUstream, CUstreamCallback, void *, unsigned int);
CUresult hcg_w_cuStreamAddCallback_ptsz(CUstream, CUstreamCallback, void *, unsigned int);
CUresult hcg_w_cuStreamBeginCapture(CUstream);
CUresult hcg_w_cuStreamBeginCapture_ptsz(CUstream);
CUresult hcg_w_cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode);
CUresult hcg_w_cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult hcg_w_cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode *,
                                           const CUgraphEdgeData *, size_t,
                                           CUstreamCaptureMode);
CUresult hcg_w_cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode *,
                                                const CUgraphEdgeData *, size_t,
                                                CUstreamCaptureMode);

CUresult hcg_w_cuGraphAddHostNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                  const CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphAddNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                              CUgraphNodeParams *);
CUresult hcg_w_cuGraphAddNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *,
                                 const CUgraphEdgeData *, size_t, CUgraphNodeParams *);
CUresult hcg_w_cuGraphHostNodeSetParams(CUgraphNode, const CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphHostNodeGetParams(CUgraphNode, CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphNodeSetParams(CUgraphNode, CUgraphNodeParams *);
CUresult hcg_w_cuGraphNodeGetParams(CUgraphNode, CUgraphNodeParams *);
CUresult hcg_w_cuGraphExecHostNodeSetParams(CUgraphExec, CUgraphNode,
                                            const CUDA_HOST_NODE_PARAMS *);
CUresult hcg_w_cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, CUgraphNodeParams *);
CUresult hcg_w_cuGraphInstantiate(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult hcg_w_cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult hcg_w_cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult hcg_w_cuGraphInstantiateWithParams(CUgraphExec *, CUgraph,
                                            CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult hcg_w_cuGraphInstantiateWithParams_ptsz(CUgraphExec *, CUgraph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult hcg_w_cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
CUresult hcg_w_cuGraphExecUpdate_v2(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
CUresult hcg_w_cuGraphExecDestroy(CUgraphExec);
CUresult hcg_w_cuGraphLaunch(CUgraphExec, CUstream);
CUresult hcg_w_cuGraphLaunch_ptsz(CUgraphExec, CUstream);


#endif /* HCG_INTERCEPT_H */
