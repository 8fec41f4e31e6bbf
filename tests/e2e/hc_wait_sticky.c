/*
 * cuStreamWaitEvent and the captures' lock where membarrier(2) is refused
 * (a sandbox; here a seccomp filter this program installs first): launches
 * then ask whether their stream captures from the first capture on, for
 * good, and a wait must still take the lock to write only while a capture
 * is open, not for the rest of the process. The program counts its
 * process's pthread_rwlock_wrlock calls (it defines the function: not for
 * a TSan build, whose runtime intercepts it).
 *
 * Run in audit mode: a begin inside a host function then reaches the
 * driver, which refuses it; waits must not take the write lock for it.
 *
 *   hc_wait_sticky      prints the counts, then "wait-sticky: passed" (or FAILED);
 *                       under HCGUARD_DEBUG=1, hcguard's lines show the captures
 *                       sticky ("a capture begins", never "no capture open")
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "hcguard.h"
#include "testutil.h"

static atomic_long wrlocks;

int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    static int (*real)(pthread_rwlock_t *);
    if (!real)
        real = (int (*)(pthread_rwlock_t *))dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
    atomic_fetch_add(&wrlocks, 1);
    return real(l);
}

static void CUDA_CB noop(void *p)
{
    (void)p;
}

static CUresult inner_begin = CUDA_SUCCESS;
static void CUDA_CB begins_capture(void *stream)
{
    inner_begin = cuStreamBeginCapture((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED);
}

/* membarrier(2) fails with ENOSYS from now on, in this process. */
static void refuse_membarrier(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {sizeof f / sizeof f[0], f};
    REQUIRE(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
    REQUIRE(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p) == 0);
}

/* Write locks taken by n waits of s for e. */
static long waits(CUstream s, CUevent e, int n)
{
    long w0 = atomic_load(&wrlocks);
    for (int i = 0; i < n; i++)
        REQUIRE_OK(cuStreamWaitEvent(s, e, 0));
    return atomic_load(&wrlocks) - w0;
}

int main(void)
{
    refuse_membarrier();
    CUstream s = test_context(), c;
    CUevent e;
    CUgraph g;
    test_require_hcguard(NULL);
    REQUIRE_OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventRecord(e, s));
    /* A launch first: this thread's waits are then marked while no capture
     * is open (a thread that never launched holds the lock to read). */
    REQUIRE_OK(cuLaunchHostFunc(c, noop, NULL));
    REQUIRE_OK(cuStreamSynchronize(c));
    long before = waits(s, e, 100);
    REQUIRE_OK(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    long open = waits(s, e, 100);
    REQUIRE_OK(cuStreamEndCapture(c, &g));
    REQUIRE_OK(cuGraphDestroy(g));
    long after = waits(s, e, 100);
    printf("write locks for 100 waits: before any capture %ld, with one open %ld, after it "
           "ended %ld\n",
           before, open, after);
    CHECK_EQ(before, 0L);
    CHECK_EQ(open, 100L);
    CHECK_EQ(after, 0L);
    /* A begin inside a host function, which the driver refuses (in audit
     * mode hcguard lets it through to the driver): no capture began, so
     * none may be open, and waits still take no write lock. */
    REQUIRE_OK(cuLaunchHostFunc(c, begins_capture, c));
    REQUIRE_OK(cuStreamSynchronize(c));
    long refused = waits(s, e, 100);
    printf("after a begin the driver refused inside a host function (%d): %ld\n",
           (int)inner_begin, refused);
    CHECK(inner_begin != CUDA_SUCCESS);
    CHECK_EQ(refused, 0L);
    REQUIRE_OK(cuEventDestroy(e));
    REQUIRE_OK(cuStreamDestroy(c));
    printf("wait-sticky: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}
