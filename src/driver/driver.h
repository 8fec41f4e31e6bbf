/* The driver layer (src/driver): the real libcuda's entry points, loaded
 * on first use, and glibc's own dlsym and dlvsym. Above the base layer. */
#ifndef HCG_DRIVER_H
#define HCG_DRIVER_H

#define __CUDA_API_VERSION_INTERNAL 1 /* plain, unrenamed driver prototypes */
#include <cuda.h>

#include "base/base.h"

/* ---- driver.c: the real libcuda -------------------------------------- */
typedef CUresult (*hcg_pfn_gpa_v1)(const char *, void **, int, cuuint64_t);
typedef CUresult (*hcg_pfn_gpa_v2)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
typedef CUresult (*hcg_pfn_launch)(CUstream, CUhostFn, void *);
typedef CUresult (*hcg_pfn_launch_v2)(CUstream, CUhostFn, void *, unsigned int);
typedef CUresult (*hcg_pfn_ptr_attrs)(unsigned int, CUpointer_attribute *,
                                      void **, CUdeviceptr);

typedef CUresult (*hcg_pfn_begin_capture_v1)(CUstream);
typedef CUresult (*hcg_pfn_begin_capture)(CUstream, CUstreamCaptureMode);
typedef CUresult (*hcg_pfn_begin_capture_to_graph)(CUstream, CUgraph,
                                                   const CUgraphNode *,
                                                   const CUgraphEdgeData *,
                                                   size_t, CUstreamCaptureMode);
typedef CUresult (*hcg_pfn_is_capturing)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*hcg_pfn_add_callback)(CUstream, CUstreamCallback, void *, unsigned int);

/* Graph entry points: wrapped, or called by the graph wrappers. */
#define HCG_GRAPH_REAL(X)                                                      \
    X(cuGraphAddHostNode) X(cuGraphAddNode) X(cuGraphAddNode_v2)               \
    X(cuGraphHostNodeSetParams) X(cuGraphHostNodeGetParams)                    \
    X(cuGraphNodeSetParams) X(cuGraphNodeGetParams)                            \
    X(cuGraphExecHostNodeSetParams) X(cuGraphExecNodeSetParams)                \
    X(cuGraphInstantiate) X(cuGraphInstantiate_v2) X(cuGraphInstantiateWithFlags) \
    X(cuGraphInstantiateWithParams) X(cuGraphInstantiateWithParams_ptsz)       \
    X(cuGraphExecUpdate) X(cuGraphExecUpdate_v2) X(cuGraphExecDestroy)         \
    X(cuGraphGetNodes) X(cuGraphNodeGetType) X(cuGraphChildGraphNodeGetGraph)  \
    X(cuUserObjectCreate) X(cuUserObjectRelease) X(cuGraphRetainUserObject)    \
    X(cuGraphReleaseUserObject) X(cuStreamGetCaptureInfo_v2)                   \
    X(cuStreamGetCaptureInfo_v2_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz)

enum {
#define HCG_X(n) HCG_G_##n,
    HCG_GRAPH_REAL(HCG_X)
#undef HCG_X
    HCG_G_COUNT
};

/* Every real entry point hcguard wraps or calls. Slots are written once
 * (at load, or adopted from cuGetProcAddress) and read without locks. */
typedef struct hcg_driver {
    void *handle;
    _Atomic(hcg_pfn_gpa_v1) cuGetProcAddress;
    _Atomic(hcg_pfn_gpa_v2) cuGetProcAddress_v2;
    _Atomic(hcg_pfn_launch) cuLaunchHostFunc;
    _Atomic(hcg_pfn_launch) cuLaunchHostFunc_ptsz;
    _Atomic(hcg_pfn_launch_v2) cuLaunchHostFunc_v2;
    _Atomic(hcg_pfn_launch_v2) cuLaunchHostFunc_v2_ptsz;
    _Atomic(hcg_pfn_ptr_attrs) cuPointerGetAttributes;
    /* Capture: host functions enqueued while capturing become graph nodes,
     * which run once per replay, so their hcg_call must outlive one run. */
    _Atomic(hcg_pfn_begin_capture_v1) cuStreamBeginCapture;
    _Atomic(hcg_pfn_begin_capture_v1) cuStreamBeginCapture_ptsz;
    _Atomic(hcg_pfn_begin_capture) cuStreamBeginCapture_v2;
    _Atomic(hcg_pfn_begin_capture) cuStreamBeginCapture_v2_ptsz;
    _Atomic(hcg_pfn_begin_capture_to_graph) cuStreamBeginCaptureToGraph;
    _Atomic(hcg_pfn_begin_capture_to_graph) cuStreamBeginCaptureToGraph_ptsz;
    _Atomic(hcg_pfn_is_capturing) cuStreamIsCapturing;
    _Atomic(hcg_pfn_is_capturing) cuStreamIsCapturing_ptsz;
    _Atomic(void *) g[HCG_G_COUNT]; /* HCG_G_<name>: graph entry points */
    _Atomic(hcg_pfn_add_callback) cuStreamAddCallback;
    _Atomic(hcg_pfn_add_callback) cuStreamAddCallback_ptsz;
} hcg_driver;

/* The real graph entry point `name` as a pointer of type T (NULL if the
 * driver lacks it). */
#define HCG_GREAL(d, name, T) ((T)atomic_load(&(d)->g[HCG_G_##name]))

/* The driver table, loading libcuda on first call; NULL if it cannot be
 * loaded (the reason was printed once). Inline: once loaded, one load. */
extern hcg_driver hcg_g_drv;
extern _Atomic int hcg_g_drv_state; /* 0 not tried, 1 loaded, -1 failed */
hcg_driver *hcg_driver_load(void);
static inline hcg_driver *hcg_driver_get(void)
{
    if (HCG_LIKELY(atomic_load_explicit(&hcg_g_drv_state, memory_order_acquire) == 1))
        return &hcg_g_drv;
    return hcg_driver_load();
}
/* In a wrapper: d is the driver table, or the wrapper answers
 * CUDA_ERROR_NOT_INITIALIZED. */
#define HCG_DRV_OR_FAIL(d)                                                     \
    hcg_driver *d = hcg_driver_get();                                          \
    if (!d)                                                                    \
        return CUDA_ERROR_NOT_INITIALIZED
/* The table if libcuda is already loaded by hcguard, else NULL; never loads. */
hcg_driver *hcg_driver_peek(void);
void hcg_driver_reset_after_fork(void);
/* Why the driver could not be loaded ("" if it was, or was not tried). */
const char *hcg_driver_error(void);
/* glibc's own dlsym/dlvsym, never the exported wrappers. */
void *hcg_real_dlsym(void *handle, const char *name);
void *hcg_real_dlvsym(void *handle, const char *name, const char *version);
/* Run once the driver is loaded, before any thunk can be handed out: the
 * audit sets the handler of calls made inside host functions there. The
 * preloaded library defines it (src/lifecycle/init.c); else NULL. */
extern void (*hcg_driver_loaded_hook)(void);

#endif /* HCG_DRIVER_H */
