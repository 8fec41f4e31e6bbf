/* The pthread_atfork registration. Modules that hold a lock a fork child
 * must find free call hcg_fork_register before they first take it (the
 * configuration, the oracle, the thunks, start-up); its handlers walk the
 * table of every module's hooks, hcg_fork_hooks, which the top layer
 * provides (src/lifecycle/fork.c), since only it knows every module.
 *
 * A handler registered while another thread is inside fork() does not run
 * for that fork (glibc runs only the handlers it found when the fork
 * began): hcguard's first lock taken then (its first work while the
 * program forks) would be copied held into a child that runs none of the
 * child hooks (and reports the parent's counts as its own). So a second
 * handler, registered when the library is loaded, runs the child hooks in
 * such a child: registered first, its child handler runs before the
 * other's, and knows from the forking thread's mark whether the other's
 * prepare handler ran in this fork. The hooks' handler itself is still
 * registered at the first call, late, as before: its prepare handler runs
 * before those of libraries registered earlier (an allocator's, say,
 * whose locks a thread holding a hook's lock may wait for). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "base/base.h"

static atomic_int armed;           /* hcg_fork_register was called */
static atomic_int owner;           /* the process hcguard's state belongs to */
static _Thread_local int prepared; /* this thread's fork ran the prepare hooks */

static void prepare(void)
{
    prepared = 1;
    for (size_t i = 0; i < hcg_n_fork_hooks; i++)
        if (hcg_fork_hooks[i].prepare)
            hcg_fork_hooks[i].prepare();
}

static void parent(void)
{
    prepared = 0;
    for (size_t i = hcg_n_fork_hooks; i-- > 0;)
        if (hcg_fork_hooks[i].parent)
            hcg_fork_hooks[i].parent();
}

static void child_hooks(void)
{
    for (size_t i = 0; i < hcg_n_fork_hooks; i++)
        if (hcg_fork_hooks[i].child)
            hcg_fork_hooks[i].child();
}

static void child(void)
{
    prepared = 0;
    child_hooks();
}

/* The child of a fork that began before the hooks' handler was registered,
 * after hcg_fork_register was called: the child hooks run without the
 * prepare hooks having run, and make every lock anew, held or not. */
static void child_missed(void)
{
    atomic_store(&owner, (int)getpid());
    if (atomic_load(&armed) && !prepared)
        child_hooks();
}

__attribute__((constructor)) static void register_at_load(void)
{
    atomic_store(&owner, (int)getpid());
    pthread_atfork(NULL, NULL, child_missed);
}

/* Registered at load, child_missed runs in the child of every fork();
 * vfork, _Fork and a bare clone run no handler, so their child still
 * finds its parent's pid here. */
int hcg_fork_foreign(void)
{
    return atomic_load(&owner) != (int)getpid();
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void do_register(void)
{
    pthread_atfork(prepare, parent, child);
}

/* Armed before the registration and before the caller's first lock: a
 * fork that copies that lock held copies this too. Stored once only: some
 * callers are on paths taken often, by many threads. */
void hcg_fork_register(void)
{
    if (!atomic_load_explicit(&armed, memory_order_relaxed))
        atomic_store(&armed, 1);
    pthread_once(&once, do_register);
}
