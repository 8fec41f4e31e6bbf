/* Fork handling from one place: one pthread_atfork registration, each
 * module a hook in it. Before the fork, the locks guarding what a child
 * keeps (the thunk table, the oracle's query fd) are taken in a fixed
 * order, so that the child finds that state whole; after it the parent
 * releases them. Only locks never held across a driver call: the driver's
 * own fork handler may run first and hold what that call waits for (the
 * graph-exec table's lock is such a lock: a child starts that table
 * empty). In the child, which has only the forking
 * thread, every lock hcguard has is made anew (a message being printed,
 * a drain, a driver load in another thread at the fork would otherwise
 * leave one held for ever), and every module starts afresh: the child
 * reports only its own work. */
#include <pthread.h>

#include "lifecycle/lifecycle.h"

/* graph.c and init.c are in the preloaded library only: the core archive
 * (unit tests, the launcher) has no graph table and no lifecycle, and
 * takes these defaults; the library's own definitions replace them. */
__attribute__((weak)) void hcg_graph_after_fork(void) {}
__attribute__((weak)) void hcg_init_after_fork(void) {}

typedef struct fork_hook {
    void (*prepare)(void); /* NULL: nothing to take */
    void (*parent)(void);
    void (*child)(void);
} fork_hook;

static const fork_hook hooks[] = {
    {NULL, NULL, hcg_flight_after_fork},      /* first: the parent's record left alone */
    {hcg_thunk_fork_lock, hcg_thunk_fork_unlock, hcg_thunk_after_fork},
    {hcg_oracle_fork_lock, hcg_oracle_fork_unlock, hcg_oracle_after_fork},
    {NULL, NULL, hcg_graph_after_fork},       /* exec_lock: not taken (see graph.c) */
    {hcg_nvtx_fork_lock, hcg_nvtx_fork_unlock, hcg_nvtx_after_fork},
    {NULL, NULL, hcg_report_after_fork},      /* msg_lock */
    {NULL, NULL, hcg_callsite_after_fork},    /* site_lock */
    {NULL, NULL, hcg_driver_reset_after_fork}, /* drv_lock */
    {NULL, NULL, hcg_events_after_fork},      /* drain and collector locks, rings */
    {NULL, NULL, hcg_pool_after_fork},
    {NULL, NULL, hcg_copy_pool_after_fork},   /* no workers: made anew when needed */
    {NULL, NULL, hcg_summary_after_fork},     /* its lock too */
    {NULL, NULL, hcg_audit_after_fork},       /* its lock too */
    {NULL, NULL, hcg_jsonl_after_fork},
    {NULL, NULL, hcg_trace_after_fork},
    {NULL, NULL, hcg_init_after_fork},        /* last: the child starts anew */
};
#define N_HOOKS (sizeof hooks / sizeof hooks[0])

static void prepare(void)
{
    for (size_t i = 0; i < N_HOOKS; i++)
        if (hooks[i].prepare)
            hooks[i].prepare();
}

static void parent(void)
{
    for (size_t i = N_HOOKS; i-- > 0;)
        if (hooks[i].parent)
            hooks[i].parent();
}

static void child(void)
{
    for (size_t i = 0; i < N_HOOKS; i++)
        hooks[i].child();
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void do_register(void)
{
    pthread_atfork(prepare, parent, child);
}

void hcg_fork_register(void)
{
    pthread_once(&once, do_register);
}
