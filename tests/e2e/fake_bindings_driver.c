/*
 * Test stand-in for cuda.bindings' driver module (cuda/bindings/driver*.so):
 * like it, driver.cuLaunchHostFunc never hands the user's function to the
 * driver, but a static GIL-taking wrapper (here without a GIL) whose
 * userData is a malloc'd {callback, userData} pair, freed after the call.
 * hcguard must look through the wrapper to see the host copy inside.
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
