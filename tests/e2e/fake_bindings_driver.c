/*
 * Test stand-in for cuda.bindings' driver module (cuda/bindings/driver*.so):
 * like it, driver.cuLaunchHostFunc never hands the user's function to the
 * driver, but a static GIL-taking wrapper (here without a GIL) whose
 * userData is a malloc'd {callback, userData} pair, freed after the call.
 * hcguard must look through the wrapper to see the host copy inside.
 * driver.cuStreamAddCallback does the same with a CUstreamCallback (what
 * numba-cuda's Stream.add_callback passes a ctypes callback through).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>

typedef struct cuHostCallbackData {
    CUhostFn callback;
    void *userData;
} cuHostCallbackData;

/* The name Cython gives a cdef function cuHostCallbackWrapper in module
 * cuda.bindings.driver; static, so found only in the symbol table. */
static void __pyx_f_4cuda_8bindings_6driver_cuHostCallbackWrapper(void *data)
{
    cuHostCallbackData *cb = data;
    cb->callback(cb->userData);
    free(cb);
}

typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);

__attribute__((visibility("default"))) CUresult fake_bindings_launch(CUstream s, CUhostFn fn,
                                                                     void *user)
{
    launch_fn launch = (launch_fn)dlsym(RTLD_DEFAULT, "cuLaunchHostFunc");
    cuHostCallbackData *cb = malloc(sizeof *cb);
    if (!cb || !launch) {
        free(cb);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cb->callback = fn;
    cb->userData = user;
    CUresult r = launch(s, __pyx_f_4cuda_8bindings_6driver_cuHostCallbackWrapper, cb);
    if (r != CUDA_SUCCESS)
        free(cb);
    return r;
}

/* cuStreamAddCallback's: data {CUstreamCallback, userData}, freed after
 * the call (cuStreamCallbackData in cuda.bindings' driver module). */
typedef struct cuStreamCallbackData {
    CUstreamCallback callback;
    void *userData;
} cuStreamCallbackData;

static void CUDA_CB __pyx_f_4cuda_8bindings_6driver_cuStreamCallbackWrapper(CUstream stream,
                                                                           CUresult status,
                                                                           void *data)
{
    cuStreamCallbackData *cb = data;
    cb->callback(stream, status, cb->userData);
    free(cb);
}

typedef CUresult (*add_callback_fn)(CUstream, CUstreamCallback, void *, unsigned int);

__attribute__((visibility("default"))) CUresult
fake_bindings_add_callback(CUstream s, CUstreamCallback fn, void *user, unsigned int flags)
{
    add_callback_fn add = (add_callback_fn)dlsym(RTLD_DEFAULT, "cuStreamAddCallback");
    cuStreamCallbackData *cb = malloc(sizeof *cb);
    if (!cb || !add) {
        free(cb);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cb->callback = fn;
    cb->userData = user;
    CUresult r = add(s, __pyx_f_4cuda_8bindings_6driver_cuStreamCallbackWrapper, cb, flags);
    if (r != CUDA_SUCCESS)
        free(cb);
    return r;
}
