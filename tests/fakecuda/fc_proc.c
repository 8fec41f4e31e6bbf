/* Entry-point lookup: cuGetProcAddress (v1) and _v2 over a table of every
 * entry point this driver has. */
#include "fakecuda.h"

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
    P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    P("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
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
    P("cuStreamGetCtx", 9020, cuStreamGetCtx),
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
    P("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph),
    PT("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph_ptsz),
    P("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PT("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    P("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing_ptsz),
    P("cuEventCreate", 2000, cuEventCreate),
    P("cuEventDestroy", 2000, cuEventDestroy),
    P("cuEventDestroy", 4000, cuEventDestroy_v2),
    P("cuEventRecord", 2000, cuEventRecord),
    PT("cuEventRecord", 7000, cuEventRecord_ptsz),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    P("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    PT("cuStreamWaitEvent", 7000, cuStreamWaitEvent_ptsz),
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
    P("cuGraphDestroyNode", 10000, cuGraphDestroyNode),
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
    P("cuGraphNodeSetEnabled", 11060, cuGraphNodeSetEnabled),
    P("cuGraphExecNodeSetParams", 12020, cuGraphExecNodeSetParams),
    P("cuGraphExecChildGraphNodeSetParams", 11010, cuGraphExecChildGraphNodeSetParams),
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

