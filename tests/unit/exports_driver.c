/*
 * A stand-in driver for the unit test of the exports (test_thunk), loaded
 * through HCGUARD_DRIVER: cuDriverGetVersion answers 4242 and counts its
 * calls; cuStreamQuery and cuCtxGetCurrent jump to whatever the test set
 * with exports_driver_set_probe (a function that records every argument
 * register). Any other driver function is missing.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define API __attribute__((visibility("default")))

API int exports_driver_calls;

API CUresult cuDriverGetVersion(int *v)
{
    exports_driver_calls++;
    *v = 4242;
    return CUDA_SUCCESS;
}

void *exports_driver_probe __attribute__((visibility("hidden")));

API void exports_driver_set_probe(void *fn);
API void exports_driver_set_probe(void *fn)
{
    exports_driver_probe = fn;
}

/* Tail jumps that leave every argument register as the caller set it. */
#if defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
#define LANDING "endbr64\n"
#else
#define LANDING ""
#endif
#define PROBE_JUMP(name)                                                       \
    ".globl " #name "\n.type " #name ",@function\n" #name ":\n" LANDING        \
    "jmp *exports_driver_probe(%rip)\n.size " #name ",.-" #name "\n"
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define LANDING "bti c\n"
#else
#define LANDING ""
#endif
#define PROBE_JUMP(name)                                                       \
    ".globl " #name "\n.type " #name ",%function\n" #name ":\n" LANDING        \
    "adrp x16, exports_driver_probe\n"                                         \
    "ldr x16, [x16, #:lo12:exports_driver_probe]\nbr x16\n"                    \
    ".size " #name ",.-" #name "\n"
#endif
#ifdef PROBE_JUMP
__asm__(".pushsection .text\n.p2align 4\n" PROBE_JUMP(cuStreamQuery)
        ".p2align 4\n" PROBE_JUMP(cuCtxGetCurrent) ".popsection\n");
#endif
