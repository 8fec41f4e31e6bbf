/* A library loaded with dlopen whose static function launches a host
 * function: the call site is named from the library's .symtab. */
#include <cuda.h>

static __attribute__((noinline)) CUresult site_in_library(CUstream s, CUhostFn fn, void *user)
{
    CUresult r = cuLaunchHostFunc(s, fn, user);
    __asm__ __volatile__("" ::: "memory"); /* not a tail call */
    return r;
}

int hc_site_lib_launch(CUstream s, CUhostFn fn, void *user);
int hc_site_lib_launch(CUstream s, CUhostFn fn, void *user)
{
    return (int)site_in_library(s, fn, user);
}
