/* Host-function dispatch: the one callback thread and its FIFO queue,
 * cuLaunchHostFunc (every version) and cuStreamAddCallback, fork, and the
 * stop at unload. */
#include <sched.h>

#include "fakecuda.h"

/* ======================================================================
 * The callback thread and its queue.
 * ====================================================================== */
static void run_work(const fc_work *w)
{
    for (size_t i = 0; i < w->ntasks; i++) {
        const fc_task *t = &w->tasks[i];
        if (t->fn)
            t->fn(t->user);
        else
            t->cb(t->stream, CUDA_SUCCESS, t->user);
    }
}

/* Free what has not run and count it as done, so nobody waits for it. */
static void drop_queued(void)
{
    while (fc_state.head) {
        fc_work *w = fc_state.head;
        fc_state.head = w->next;
        free(w);
    }
    fc_state.tail = NULL;
    fc_state.done_seq = fc_state.enq_seq;
    pthread_cond_broadcast(&fc_state.done_cv);
}

static void *worker_main(void *arg)
{
    (void)arg;
    fc_t_on_worker = 1;
    fc_lock();
    for (;;) {
        while (!fc_state.head && !fc_state.stopping)
            pthread_cond_wait(&fc_state.work_cv, &fc_state.mu);
        if (fc_state.stopping)
            break;
        fc_work *w = fc_state.head;
        fc_state.head = w->next;
        if (!fc_state.head)
            fc_state.tail = NULL;
        fc_unlock();
        run_work(w);
        fc_lock();
        fc_state.done_seq = w->seq;
        free(w);
        pthread_cond_broadcast(&fc_state.done_cv);
    }
    drop_queued();
    fc_state.worker_running = 0;
    pthread_cond_broadcast(&fc_state.done_cv);
    fc_unlock();
    return NULL;
}

static void atfork_prepare(void) { fc_lock(); }
static void atfork_parent(void) { fc_unlock(); }

/* The child has no callback thread: forget the parent's queue (its
 * condition variables made anew first: no waiter of the parent's is here). */
static void atfork_child(void)
{
    pthread_cond_init(&fc_state.work_cv, NULL);
    pthread_cond_init(&fc_state.done_cv, NULL);
    drop_queued();
    fc_state.worker_started = fc_state.worker_running = 0;
    fc_unlock();
}

static void atfork_register(void)
{
    if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0) {
        fputs("fakecuda: pthread_atfork failed\n", stderr);
        abort();
    }
}

/* Called by cuInit before it takes the lock: every other entry point that
 * takes it refuses to run before cuInit, so from here on the lock is never
 * taken with the handlers missing (registered at the first launch, as they
 * were, a fork while another thread was in the driver before that gave the
 * child a lock held for ever). Not when the library is loaded: a program
 * that calls cuInit through an interposer has the interposer's handlers
 * registered first, so that the driver's prepare handler runs before the
 * interposer's, as a driver that registers at initialisation would have
 * it (e2e_graph_fork_launch checks hcguard against that order). A fork in
 * another thread during the first cuInit is not covered: a handler
 * registered while a fork is under way does not run for that fork. */
void fc_atfork_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, atfork_register);
}

CUresult fc_worker_ensure(void)
{
    if (fc_state.worker_started)
        return CUDA_SUCCESS;
    if (pthread_create(&fc_state.worker, NULL, worker_main, NULL) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_state.worker_started = fc_state.worker_running = 1;
    return CUDA_SUCCESS;
}

fc_work *fc_work_new(size_t ntasks)
{
    if (ntasks > (SIZE_MAX - sizeof(fc_work)) / sizeof(fc_task))
        return NULL;
    return calloc(1, sizeof(fc_work) + ntasks * sizeof(fc_task));
}

/* Append w to the queue, behind everything already queued; takes w. */
CUresult fc_queue_push(fc_work *w, uint64_t *seq)
{
    CUresult r = fc_state.stopping ? CUDA_ERROR_DEINITIALIZED : fc_worker_ensure();
    if (r != CUDA_SUCCESS) {
        free(w);
        return r;
    }
    w->seq = ++fc_state.enq_seq;
    if (fc_state.tail)
        fc_state.tail->next = w;
    else
        fc_state.head = w;
    fc_state.tail = w;
    *seq = w->seq;
    pthread_cond_signal(&fc_state.work_cv);
    return CUDA_SUCCESS;
}

/* Append w to the queue as the next work of stream s; takes w. */
CUresult fc_enqueue(fc_stream *s, fc_work *w)
{
    return fc_queue_push(w, &s->last_seq);
}

/* Wait until queue work number seq has run. The callback thread must
 * never wait for itself (fc_enter already refuses its calls). */
CUresult fc_wait_done(uint64_t seq)
{
    if (fc_t_on_worker)
        return CUDA_ERROR_NOT_PERMITTED;
    while (fc_state.done_seq < seq)
        pthread_cond_wait(&fc_state.done_cv, &fc_state.mu);
    return CUDA_SUCCESS;
}

/* ======================================================================
 * Host functions and stream callbacks.
 * ====================================================================== */
/* FAKECUDA_LAUNCH_YIELD=1: a launch yields before it looks at its
 * stream, so that another thread's begin of a capture lands between the
 * caller's last look and the launch's (race tests). */
static int launch_yields(void)
{
    static atomic_int v = -1;
    return fc_knob_once(&v, "FAKECUDA_LAUNCH_YIELD");
}

static CUresult launch_task(CUstream h, int ptsz, const fc_task *t)
{
    FC_ENTER();
    if (launch_yields())
        sched_yield();
    fc_lock();
    fc_stream *s;
    CUresult r = fc_stream_get(h, ptsz, &s);
    if (r == CUDA_SUCCESS && s->cap_status) {
        r = fc_capture_task(s, t);
    } else if (r == CUDA_SUCCESS) {
        fc_work *w = fc_work_new(1);
        if (w) {
            w->ntasks = 1;
            w->tasks[0] = *t;
        }
        r = w ? fc_enqueue(s, w) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    fc_unlock();
    return r;
}

static CUresult launch_host(CUstream h, int ptsz, CUhostFn fn, void *user,
                            unsigned sync_mode)
{
    FC_ENTER();
    if (!fn || (sync_mode != FC_HOST_TASK_BLOCKING &&
                sync_mode != FC_HOST_TASK_SPINWAIT))
        return CUDA_ERROR_INVALID_VALUE;
    fc_task t = {.fn = fn, .user = user};
    return launch_task(h, ptsz, &t);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                         void *userData)
{
    return launch_host(hStream, 0, fn, userData, FC_HOST_TASK_BLOCKING);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn,
                                              void *userData)
{
    return launch_host(hStream, 1, fn, userData, FC_HOST_TASK_BLOCKING);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn,
                                            void *userData,
                                            unsigned int syncMode)
{
    return launch_host(hStream, 0, fn, userData, syncMode);
}

FC_API CUresult CUDAAPI cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn,
                                                 void *userData,
                                                 unsigned int syncMode)
{
    return launch_host(hStream, 1, fn, userData, syncMode);
}

static CUresult add_callback(CUstream h, int ptsz, CUstreamCallback cb,
                             void *user, unsigned flags)
{
    FC_ENTER();
    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fc_task t = {.cb = cb, .stream = h, .user = user};
    return launch_task(h, ptsz, &t);
}

FC_API CUresult CUDAAPI cuStreamAddCallback(CUstream hStream,
                                            CUstreamCallback callback,
                                            void *userData, unsigned int flags)
{
    return add_callback(hStream, 0, callback, userData, flags);
}

FC_API CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream,
                                                 CUstreamCallback callback,
                                                 void *userData,
                                                 unsigned int flags)
{
    return add_callback(hStream, 1, callback, userData, flags);
}

/* ======================================================================
 * Unload: stop the callback thread without hanging the exit.
 * ====================================================================== */
__attribute__((destructor)) static void fc_unload(void)
{
    fc_lock();
    fc_state.stopping = 1;
    pthread_cond_broadcast(&fc_state.work_cv);
    if (!fc_state.worker_started || fc_t_on_worker) {
        fc_unlock();
        return;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 1;
    while (fc_state.worker_running &&
           pthread_cond_timedwait(&fc_state.done_cv, &fc_state.mu, &deadline) != ETIMEDOUT)
        ;
    int ended = !fc_state.worker_running;
    fc_state.worker_started = 0;
    fc_unlock();
    if (ended)
        pthread_join(fc_state.worker, NULL);
    else
        pthread_detach(fc_state.worker); /* stuck in a host function */
}

