/* Fork handling from one place: the pthread_atfork registration
 * (base/fork.c, which every module that holds a lock calls before it takes
 * it), and here, where every module is known, its table of hooks. Before
 * the fork, the locks guarding what a child keeps (the thunk table, the
 * oracle's query fd) are taken in a fixed order, so that the child finds
 * that state whole; after it the parent releases them. Only locks never
 * held across a driver call: the driver's own fork handler may run first
 * and hold what that call waits for (the graph-exec table's lock is such a
 * lock: a child starts that table empty). In the child, which has only the forking
 * thread, every lock hcguard has is made anew (a message being printed,
 * a drain, a driver load in another thread at the fork would otherwise
 * leave one held for ever), and every module starts afresh: the child
 * reports only its own work. */
#include <pthread.h>

#include "lifecycle/lifecycle.h"

/* graph.c, stream.c and init.c are in the preloaded library only: the core archive
 * (unit tests, the launcher) has no graph table and no lifecycle, and
 * takes these defaults; the library's own definitions replace them. */
__attribute__((weak)) void hcg_graph_after_fork(void) {}
__attribute__((weak)) void hcg_capture_after_fork(void) {}
__attribute__((weak)) void hcg_init_after_fork(void) {}

/* In order: prepare and child hooks first to last, parent hooks last to
 * first. Walked by the pthread_atfork handlers of base/fork.c. */
const hcg_fork_hook hcg_fork_hooks[] = {
    {NULL, NULL, hcg_flight_after_fork},      /* first: the parent's record left alone */
    {hcg_thunk_fork_lock, hcg_thunk_fork_unlock, hcg_thunk_after_fork},
    {hcg_oracle_fork_lock, hcg_oracle_fork_unlock, hcg_oracle_after_fork},
    {NULL, NULL, hcg_fault_after_fork},       /* the signal actions' spin lock */
    {NULL, NULL, hcg_graph_after_fork},       /* exec_lock: not taken (see graph.c) */
    {NULL, NULL, hcg_capture_after_fork},     /* capture_lock: held across driver calls */
    {hcg_nvtx_fork_lock, hcg_nvtx_fork_unlock, hcg_nvtx_after_fork},
    {NULL, NULL, hcg_report_after_fork},      /* msg_lock */
    {NULL, NULL, hcg_callsite_after_fork},    /* site_lock */
    {NULL, NULL, hcg_driver_reset_after_fork}, /* drv_lock */
    {NULL, NULL, hcg_events_after_fork},      /* drain and collector locks, rings */
    {NULL, NULL, hcg_pool_after_fork},
    {NULL, NULL, hcg_copy_pool_after_fork},   /* no workers: made anew when needed */
    {NULL, NULL, hcg_sinks_after_fork},      /* each sink's, their locks too */
    {NULL, NULL, hcg_init_after_fork},        /* last: the child starts anew */
};
const size_t hcg_n_fork_hooks = sizeof hcg_fork_hooks / sizeof hcg_fork_hooks[0];
