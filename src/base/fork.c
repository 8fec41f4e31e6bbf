/* The one pthread_atfork registration. Modules that hold a lock a fork
 * child must find free call hcg_fork_register before they first take it
 * (the configuration, the oracle, the thunks, start-up); its handlers walk
 * the table of every module's hooks, hcg_fork_hooks, which the top layer
 * provides (src/lifecycle/fork.c), since only it knows every module. */
#include <pthread.h>

#include "base/base.h"

static void prepare(void)
{
    for (size_t i = 0; i < hcg_n_fork_hooks; i++)
        if (hcg_fork_hooks[i].prepare)
            hcg_fork_hooks[i].prepare();
}

static void parent(void)
{
    for (size_t i = hcg_n_fork_hooks; i-- > 0;)
        if (hcg_fork_hooks[i].parent)
            hcg_fork_hooks[i].parent();
}

static void child(void)
{
    for (size_t i = 0; i < hcg_n_fork_hooks; i++)
        if (hcg_fork_hooks[i].child)
            hcg_fork_hooks[i].child();
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
