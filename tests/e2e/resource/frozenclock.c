/* LD_PRELOAD shim, as libfaketime with a frozen (absolute) time: every
 * clock_gettime of CLOCK_MONOTONIC* and CLOCK_REALTIME* returns the time
 * of its first call. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>
static struct timespec frozen[16];
static int have[16];
int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id >= 0 && id < 16 && id != CLOCK_PROCESS_CPUTIME_ID && id != CLOCK_THREAD_CPUTIME_ID) {
        if (!__atomic_load_n(&have[id], __ATOMIC_ACQUIRE)) {
            syscall(SYS_clock_gettime, id, &frozen[id]);
            __atomic_store_n(&have[id], 1, __ATOMIC_RELEASE);
        }
        *ts = frozen[id];
        return 0;
    }
    return (int)syscall(SYS_clock_gettime, id, ts);
}
