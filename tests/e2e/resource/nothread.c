/* LD_PRELOAD shim: pthread_create fails with EAGAIN when called from
 * libhcguard.so (NOTHREAD_SKIP=N lets the first N such calls through;
 * NOTHREAD_FAILS=M: only calls before the M-th fail). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
static int seen;
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = dlvsym(RTLD_NEXT, "pthread_create", "GLIBC_2.34");
    if (!real)
        real = dlvsym(RTLD_NEXT, "pthread_create", "GLIBC_2.2.5");
    Dl_info di;
    if (dladdr(__builtin_return_address(0), &di) && di.dli_fname && strstr(di.dli_fname, "libhcguard")) {
        const char *s = getenv("NOTHREAD_SKIP"), *f = getenv("NOTHREAD_FAILS");
        int k = __atomic_fetch_add(&seen, 1, __ATOMIC_SEQ_CST);
        if (k >= (s ? atoi(s) : 0) && (!f || k < atoi(f)))
            return EAGAIN;
    }
    return real(t, a, fn, arg);
}
