/* Monotonic clock. clock_gettime(CLOCK_MONOTONIC) is served by the vDSO,
 * so reading it on the driver's callback thread makes no system call. */
#include <time.h>

#include "hcg.h"

uint64_t hcg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
