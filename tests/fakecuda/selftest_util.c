/* Self-test helpers: what host functions did, gates, time. */
#include "selftest.h"

/* ---- what host functions did ------------------------------------------ */
/* Written on the callback thread, read after a synchronize. */
runs_seen runs;

void CUDA_CB record(void *p)
{
    if (runs.n < MAX_RUNS) {
        runs.ids[runs.n] = (intptr_t)p;
        runs.thread[runs.n] = pthread_self();
    }
    runs.n++;
}

void runs_reset(void) { memset(&runs, 0, sizeof runs); }

/* The last runs were exactly ids[0..n). */
int runs_are(const intptr_t *ids, int n)
{
    if (runs.n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (runs.ids[i] != ids[i])
            return 0;
    return 1;
}

void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = g->started = 0;
    atomic_store(&g->done, 0);
}

void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void gate_wait_started(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->started)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void CUDA_CB gated(void *p)
{
    gate *g = p;
    pthread_mutex_lock(&g->mu);
    g->started = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    sleep_ms(50);
    atomic_store(&g->done, 1);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

