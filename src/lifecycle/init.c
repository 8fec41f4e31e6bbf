/* Lifecycle: lazy start from the first intercepted launch (constructors
 * stay trivial: the CUDA runtime calls cuGetProcAddress before cuInit, and
 * Python may never touch CUDA), fork handling, and the exit summary. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lifecycle/lifecycle.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
atomic_int hcg_g_started;
static atomic_uint starter; /* the thread in start(), or that ran it; 0: none yet */
/* The audit's thunk handler, set when the driver is loaded (src/driver). */
void (*hcg_driver_loaded_hook)(void) = hcg_audit_init;
/* A fork child (a data loader's worker, say) reports only what it did
 * itself, and says nothing if it did nothing. */
static int forked;

/* The last of the fork child hooks (src/lifecycle/fork.c). No thread is started
 * here (POSIX allows a fork child little before exec): the child starts its
 * collector at its first launch, so one that launches nothing has none, and
 * exits without a summary. */
void hcg_init_after_fork(void)
{
    forked = 1;
    atomic_store(&hcg_g_started, 0);
    atomic_store(&starter, 0); /* the parent's */
    atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_UNREADY);
}

int hcg_start_begun(void)
{
    return atomic_load(&hcg_g_started) || atomic_load(&starter) != 0;
}

static void start(void)
{
    atomic_store(&starter, hcg_gettid());
    const hcg_config *c = hcg_config_get();
    hcg_clock_init();
    /* Before any ring or pool is made: the pools' launch counts are kept
     * in the record too. */
    void *pools = hcg_flight_attach(hcg_pool_store_bytes());
    if (pools)
        hcg_pool_use_store(pools);
    hcg_sinks_open(c);
    hcg_fork_register();
    hcg_nvtx_init(); /* before the first launch: calls carry its flag */
    /* Before the first check: reads of user memory and the copies hcguard
     * makes are fault-contained from here on (not in mode off, where
     * hcguard neither reads nor copies). */
    if (c->mode != HCG_MODE_OFF && hcg_fault_install() != 0)
        hcg_msg("cannot install the SIGSEGV/SIGBUS handlers: copies are not fault-contained");
    /* Preloaded by hand there is no flight recorder: a death by signal
     * would take the events still in memory with it. */
    if (c->mode != HCG_MODE_OFF && !hcg_g_flight && (c->log_path[0] || c->trace_path[0]))
        hcg_fault_watch_deaths(hcg_lifecycle_flush_from_signal);
    hcg_callsite_init();
    hcg_trampoline_init();
    /* libc's functions looked up now, on this thread: the collector names
     * functions with them, and must not be the one to look them up while
     * a thread holding the loader's lock (a library's constructor, inside
     * dlopen) waits for that lookup. */
    hcg_audit_libc_init();
    hcg_collector_start();
    atomic_store(&hcg_g_started, 1);
}

void hcg_init_slow(void)
{
    pthread_once(&once, start); /* done already in a fork child */
    hcg_collector_start();      /* idempotent; none while an exec or the exit holds it */
    atomic_store_explicit(&hcg_g_started, 1, memory_order_release);
}

HCG_EXPORT int hcguard_get_stats(hcguard_stats *out, size_t size)
{
    if (!out || size == 0)
        return -1;
    hcguard_stats all;
    /* Not before the start is done: another thread's first launch may be
     * opening the files (none holds an event before it). */
    if (atomic_load_explicit(&hcg_g_started, memory_order_acquire))
        hcg_events_flush();
    hcg_sinks_stats(&all);
    all.graph_calls_live = hcg_graph_calls_live();
    memcpy(out, &all, size < sizeof all ? size : sizeof all);
    return 0;
}

/* Before exec (src/lifecycle/lifecycle.c), the collector stopped and the files
 * written: this image's summary, if it did anything (the next one prints
 * its own at exit). */
void hcg_lifecycle_exec_summary(void)
{
    if (hcg_config_get()->summary && hcg_sinks_active())
        hcg_sinks_report();
}

/* A process that launched nothing says in one line that hcguard was
 * there, unless another process running hcguard may speak for it: one
 * that shares its stderr (a fork child, a process spawned, or exec'd after
 * a fork, by one running hcguard). The first process speaks, also after
 * it exec'd itself. */
static void say_idle(void)
{
    const hcg_config *c = hcg_config_get();
    if (c->mode == HCG_MODE_OFF || !c->summary || forked || getenv(HCG_SHARED_STDERR_VAR))
        return;
    hcg_sinks_report_idle();
}

/* The program exits while another thread starts hcguard (its first
 * launch): waited for, up to 2 s, so that the summary counts what that
 * thread launched rather than saying nothing was. Not for ever: the
 * starting thread may wait for a lock the exit holds (the loader's). Not
 * at all where the exit is the starting thread's own (a signal handler's
 * exit inside that first launch). Whether hcguard started. */
static int start_finished(void)
{
    uint32_t t = atomic_load(&starter);
    if (!t || t == hcg_gettid())
        return 0;
    for (int ms = 0; ms < 2000 && !atomic_load(&hcg_g_started); ms++) {
        struct timespec one = {0, 1000000};
        nanosleep(&one, NULL);
    }
    return atomic_load(&hcg_g_started);
}

/* At exit. A child of vfork or _Fork that calls exit finds its parent's
 * state (hcg_fork_foreign): its collector (vfork shares it; _Fork copied a
 * thread that does not exist in the child), its counts, its files: it
 * leaves them alone and says nothing. */
__attribute__((destructor)) static void finish(void)
{
    if (hcg_fork_foreign())
        return;
    if (!atomic_load(&hcg_g_started) && !start_finished()) {
        say_idle();
        return;
    }
    const hcg_config *c = hcg_config_get();
    hcg_copy_pool_stop(1);
    hcg_collector_stop();
    hcg_events_files_done();
    hcg_sinks_close();
    if (forked && !hcg_sinks_active())
        return;
    if (c->summary)
        hcg_sinks_report_exit();
    hcg_flight_finished(1); /* the launcher has nothing left to do */
    if (c->error_exitcode && hcg_sinks_errors() > 0) {
        fflush(NULL); /* _exit skips stdio's flush at exit */
        _exit(c->error_exitcode);
    }
}
