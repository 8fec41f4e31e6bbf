/*
 * Large copies split across a pool of worker threads (HCGUARD_COPY_THREADS).
 *
 * One copy from a host-copy record can be hundreds of MiB, and one thread
 * does not reach the memory bandwidth of the machine. With N threads asked
 * for, a copy of at least 2 MiB is cut into up to N parts of at least
 * 1 MiB, each boundary on a cache line of the destination, and the parts
 * are taken one by one by the copying thread itself and by the pool's
 * workers; the copy returns only when every part is done, so the host
 * function ends after its whole copy, as stream order wants.
 *
 * One pool serves every stream: a copy that finds it busy with another
 * stream's copy runs whole on its own thread rather than waiting. The
 * workers are created at the first split copy, with every asynchronous
 * signal blocked (the program's signals go to its own threads; the fault
 * signals stay open, so that hcguard's handler contains a fault in a part);
 * they are joined at exit and before exec, and a fork child, which has
 * none, makes its own at its first split copy.
 *
 * Each part is a fault-contained copy (fault.c): a fault in any part makes
 * the whole copy return -1 once, with the first fault's signal, code and
 * address; the other parts are still made (they are good memory).
 *
 * Handoff: the job (under the pool's lock) carries a number; a worker woken
 * copies the job under the lock, then takes parts with a compare-and-swap
 * on (number, next part), so that a worker late for a job that has ended
 * takes nothing from the next one. Parts done are counted under the lock,
 * and the last one wakes the copying thread.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "check/check.h"

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t n;
    unsigned parts;
} copy_job;

typedef struct copy_pool {
    pthread_mutex_t lock;
    pthread_cond_t work;     /* workers wait here for a job (or stop) */
    pthread_cond_t done;     /* the copying thread waits here for its parts */
    copy_job job;            /* the job numbered gen; under lock */
    uint32_t gen;            /* under lock */
    _Atomic uint64_t claim;  /* gen << 32 | the next part to take */
    unsigned finished;       /* parts of job gen done; under lock */
    int faulted;             /* under lock */
    hcg_fault_info fault;    /* the first fault of job gen; under lock */
    pthread_t thr[HCG_COPY_THREADS_MAX];
    unsigned n_thr;          /* under lock */
    int stop;                /* workers leave; none created meanwhile */
    int closed;              /* exit: none created again */
    atomic_flag busy;        /* a copy holds the pool */
} copy_pool;

static copy_pool g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                      PTHREAD_COND_INITIALIZER, {NULL, NULL, 0, 0}, 0, 0, 0, 0,
                      {0, 0, 0}, {0}, 0, 0, 0, ATOMIC_FLAG_INIT};

#define LINE 64

/* Where part i begins: i * (n / parts), moved down to a cache line of the
 * destination; 0 and n at the ends. With n / parts at least
 * HCG_COPY_PART_MIN, the boundaries strictly increase: parts never
 * overlap and cover the copy. */
size_t hcg_copy_part_start(uintptr_t dst, size_t n, unsigned parts, unsigned i)
{
    if (i == 0)
        return 0;
    if (i >= parts)
        return n;
    size_t off = n / parts * i;
    uintptr_t at = (dst + off) & ~(uintptr_t)(LINE - 1);
    return at - dst;
}

static size_t part_start(const copy_job *j, unsigned i)
{
    return hcg_copy_part_start((uintptr_t)j->dst, j->n, j->parts, i);
}

/* Take the next part of job gen: 1 and *i, or 0 when none is left (or the
 * job is no longer gen). */
static int take_part(uint32_t gen, unsigned parts, unsigned *i)
{
    uint64_t c = atomic_load_explicit(&g.claim, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(c >> 32) != gen || (uint32_t)c >= parts)
            return 0;
        if (atomic_compare_exchange_weak_explicit(&g.claim, &c, c + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *i = (uint32_t)c;
            return 1;
        }
    }
}

static void run_part(const copy_job *j, unsigned i)
{
    size_t a = part_start(j, i), b = part_start(j, i + 1);
    hcg_fault_info fi;
    int rc = hcg_fault_copy(j->dst + a, j->src + a, b - a, &fi);
    pthread_mutex_lock(&g.lock);
    if (rc != 0 && !g.faulted) {
        g.faulted = 1;
        g.fault = fi;
    }
    if (++g.finished == j->parts)
        pthread_cond_broadcast(&g.done);
    pthread_mutex_unlock(&g.lock);
}

static void *worker(void *arg)
{
    uint32_t seen = (uint32_t)(uintptr_t)arg;
    pthread_mutex_lock(&g.lock);
    for (;;) {
        while (g.gen == seen && !g.stop)
            pthread_cond_wait(&g.work, &g.lock);
        if (g.stop)
            break;
        seen = g.gen;
        copy_job j = g.job;
        pthread_mutex_unlock(&g.lock);
        unsigned i;
        while (take_part(seen, j.parts, &i))
            run_part(&j, i);
        pthread_mutex_lock(&g.lock);
    }
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

/* Under the lock: at least want workers, or as many as can be made. */
static unsigned ensure_workers(unsigned want)
{
    if (g.stop || g.closed || g.n_thr >= want)
        return g.stop || g.closed ? 0 : g.n_thr;
    /* Created with every signal blocked but those a fault raises, which
     * must reach hcguard's handler (blocked, the kernel would kill). */
    sigset_t all, saved;
    sigfillset(&all);
    static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
    for (size_t k = 0; k < sizeof sync_sigs / sizeof sync_sigs[0]; k++)
        sigdelset(&all, sync_sigs[k]);
    pthread_attr_t attr;
    int attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok)
        pthread_attr_setstacksize(&attr, 256u << 10); /* a part, and a fault's handler */
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    while (g.n_thr < want &&
           pthread_create(&g.thr[g.n_thr], attr_ok ? &attr : NULL, worker,
                          (void *)(uintptr_t)g.gen) == 0) {
        pthread_setname_np(g.thr[g.n_thr], "hcguard-copy");
        g.n_thr++;
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (attr_ok)
        pthread_attr_destroy(&attr);
    return g.n_thr;
}

/* Post job j to the workers; 0 if there are none to take it. */
static int post(const copy_job *j, uint32_t *gen)
{
    pthread_mutex_lock(&g.lock);
    if (ensure_workers(j->parts - 1) == 0) {
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    *gen = ++g.gen;
    g.job = *j;
    g.finished = 0;
    g.faulted = 0;
    atomic_store_explicit(&g.claim, (uint64_t)*gen << 32, memory_order_release);
    pthread_cond_broadcast(&g.work);
    pthread_mutex_unlock(&g.lock);
    return 1;
}

int hcg_copy_split(void *dst, const void *src, size_t n, unsigned threads, hcg_fault_info *out)
{
    size_t fit = n / HCG_COPY_PART_MIN;
    unsigned parts = fit < threads ? (unsigned)fit : threads;
    if (parts > HCG_COPY_THREADS_MAX)
        parts = HCG_COPY_THREADS_MAX;
    if (parts < 2 || atomic_flag_test_and_set_explicit(&g.busy, memory_order_acquire))
        return hcg_fault_copy(dst, src, n, out);
    copy_job j = {dst, src, n, parts};
    uint32_t gen;
    if (!post(&j, &gen)) {
        atomic_flag_clear_explicit(&g.busy, memory_order_release);
        return hcg_fault_copy(dst, src, n, out);
    }
    unsigned i;
    while (take_part(gen, parts, &i))
        run_part(&j, i);
    /* Not cancelled in the wait: the lock and the pool would stay taken. */
    int cancel = hcg_nocancel_begin();
    pthread_mutex_lock(&g.lock);
    while (g.finished < parts)
        pthread_cond_wait(&g.done, &g.lock);
    int faulted = g.faulted;
    hcg_fault_info fi = g.fault;
    pthread_mutex_unlock(&g.lock);
    hcg_nocancel_end(cancel);
    atomic_flag_clear_explicit(&g.busy, memory_order_release);
    if (!faulted)
        return 0;
    if (out)
        *out = fi;
    return -1;
}

void hcg_copy_pool_stop(int closing)
{
    pthread_t t[HCG_COPY_THREADS_MAX];
    pthread_mutex_lock(&g.lock);
    g.closed |= closing;
    g.stop = 1;
    unsigned n = g.n_thr;
    memcpy(t, g.thr, n * sizeof t[0]);
    g.n_thr = 0;
    pthread_cond_broadcast(&g.work);
    pthread_mutex_unlock(&g.lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_lock(&g.lock);
    g.stop = 0;
    pthread_mutex_unlock(&g.lock);
}

unsigned hcg_copy_pool_workers(void)
{
    pthread_mutex_lock(&g.lock);
    unsigned n = g.n_thr;
    pthread_mutex_unlock(&g.lock);
    return n;
}

/* The child has the forking thread alone: no workers, and the pool's lock
 * and flag as they were in no thread. */
void hcg_copy_pool_after_fork(void)
{
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.work, NULL);
    pthread_cond_init(&g.done, NULL);
    g.n_thr = 0;
    g.stop = 0;
    g.finished = 0;
    g.faulted = 0;
    atomic_flag_clear(&g.busy);
}
