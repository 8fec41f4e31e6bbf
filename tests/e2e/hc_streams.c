/* Many streams: the trace's stream tracks are bounded (256 a process, the
 * rest on one shared track) however many streams a program makes.
 *
 *   hc_streams N    two host functions on each of: the NULL stream,
 *                   CU_STREAM_LEGACY, CU_STREAM_PER_THREAD (of the main
 *                   thread and of a second one), the NULL stream through
 *                   cuLaunchHostFunc_ptsz, and N streams made for it
 *
 * Every stream gets the same number, so that how many runs land on the
 * shared track does not depend on which streams were seen first. Prints
 * "streams: passed" when every host function ran. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "testutil.h"

#define PER_STREAM 2

static atomic_ulong ran;

static void noop(void *p)
{
    (void)p;
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

static void launch_on(CUstream s)
{
    for (int i = 0; i < PER_STREAM; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, noop, NULL));
}

static void *per_thread_stream(void *arg)
{
    REQUIRE_OK(cuCtxSetCurrent(*(CUcontext *)arg));
    launch_on(CU_STREAM_PER_THREAD);
    REQUIRE_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: hc_streams N\n");
        return 2;
    }
    unsigned n = (unsigned)atoi(argv[1]);
    CUstream first = test_context();
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);
    launch_fn ptsz = (launch_fn)dlsym(RTLD_DEFAULT, "cuLaunchHostFunc_ptsz");
    REQUIRE(ptsz != NULL);
    launch_on(NULL);
    launch_on(CU_STREAM_LEGACY);
    launch_on(CU_STREAM_PER_THREAD);
    for (int i = 0; i < PER_STREAM; i++)
        REQUIRE_OK(ptsz(NULL, noop, NULL));
    pthread_t t;
    pthread_create(&t, NULL, per_thread_stream, &ctx);
    pthread_join(t, NULL);
    CUstream *s = calloc(n, sizeof *s);
    REQUIRE(s != NULL);
    s[0] = first;
    for (unsigned i = 1; i < n; i++)
        REQUIRE_OK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    for (unsigned i = 0; i < n; i++)
        launch_on(s[i]);
    REQUIRE_OK(cuCtxSynchronize());
    for (unsigned i = 0; i < n; i++)
        REQUIRE_OK(cuStreamDestroy(s[i]));
    free(s);
    unsigned long want = (unsigned long)(n + 5) * PER_STREAM;
    CHECK_MSG(atomic_load(&ran) == want, "ran %lu of %lu", atomic_load(&ran), want);
    printf("streams: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
