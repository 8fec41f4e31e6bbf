/*
 * bench_callgrind: the instructions hcguard adds to a call on the
 * application's thread, counted by callgrind, so that the figure does not
 * move with the machine's load. Run by bench/callgrind.sh under
 *   valgrind --tool=callgrind --collect-atstart=no
 * with libhcguard preloaded. Each figure is counted two ways in the same
 * run, batch by batch: through the driver's own entry point (found in
 * libcuda's dynamic symbol table: what the program calls without hcguard)
 * and through the one the program links (hcguard's, when preloaded):
 *
 *   plain   cuLaunchHostFunc of an ordinary host function
 *   copy    cuLaunchHostFunc of hcguard_host_copy with a 64-byte record,
 *           validated at enqueue under hcguard
 *   thunk   cuCtxGetCurrent, a driver call hcguard does not wrap: under
 *           hcguard the linked one is its exported thunk
 *   cb_plain, cb_copy  the same ordinary host function, and
 *           hcguard_host_copy with an 8-byte record, counted where they
 *           run: on the driver's callback thread, launched through the
 *           driver's entry point (the function alone) or the linked one
 *           (hcguard's trampoline around it: its time stamps, the copy's
 *           re-check and hcguard's own copy of the 8 bytes, the event, the
 *           call given back)
 *
 * Collection is switched on (CALLGRIND_TOGGLE_COLLECT) around each batch
 * of CALLS calls on this thread only (for cb_*: by host functions
 * launched through the driver's own entry point before and after the
 * batch, on the callback thread only), and each batch is dumped with a
 * label "<figure> <way> <batch>" (CALLGRIND_DUMP_STATS_AT); the script
 * reads the dumps. Threads never collect unless they toggle, so the
 * driver's callback thread and hcguard's collector count nothing.
 *
 * What makes the count the same on every run:
 * - launches are gated: the stream is held by a host function blocked on
 *   a pipe, so the driver's thread sleeps while a batch is counted and
 *   the enqueue path never races it; the gate opens after the batch;
 * - each batch follows one uncounted call (warm caches);
 * - hcguard's verdict on a copy record holds while no mapping changed
 *   through libc, and for 100 ms of the launches' own time stamps
 *   (src/check/oracle.c): no batch lasts that long, so no wall clock
 *   decides how many full validations a batch makes;
 * - a batch on the callback thread is waited for in read(2), never on
 *   the driver's condition variable (counted_cb_batch).
 * The script takes each way's median batch (a batch that refills the
 * call pool costs a few instructions a call more).
 *
 *   bench_callgrind [BATCHES]
 * Prints "label" lines for the script, then "done".
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>

#include "hcguard.h"

#define BENCH_NAME "bench_callgrind"
#include "bench_driver.h"

enum { CALLS = 64 }; /* a multiple of the 1-in-16 stamp and the 32-call give-back */

typedef CUresult (*ctx_get_fn)(CUcontext *);

static int gate_pipe[2], held_pipe[2], ran_pipe[2];

static void pipe_put(int fd)
{
    if (write(fd, "g", 1) != 1) {
        perror("bench_callgrind: write");
        exit(1);
    }
}

static void pipe_take(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1) {
        perror("bench_callgrind: read");
        exit(1);
    }
}

/* Holds the stream until a byte arrives: the driver's thread blocks in
 * read(2), not in a polling loop that valgrind would have to schedule.
 * It says first that it holds it: until then the driver's thread may still
 * wait for work, and each launch would count a wake-up. */
static void wait_gate(void *p)
{
    (void)p;
    pipe_put(held_pipe[1]);
    pipe_take(gate_pipe[0]);
}

/* The stream held by wait_gate, running on the driver's thread. */
static void hold_stream(launch_fn launch, CUstream s)
{
    DRV(launch(s, wait_gate, NULL));
    pipe_take(held_pipe[0]);
}

static void noop(void *p)
{
    (void)p;
}

typedef struct way {
    const char *name; /* "driver" or "linked" */
    launch_fn launch;
    ctx_get_fn ctx_get;
} way;

typedef struct figure {
    const char *name;
    CUhostFn fn; /* NULL: the thunk figure (cuCtxGetCurrent) */
    void *user;
    int on_callback_thread; /* counted where the host functions run */
} figure;

/* Run on the callback thread, launched through the driver's own entry
 * point: collection there on, then off again. */
static void toggle_collect(void *p)
{
    (void)p;
    CALLGRIND_TOGGLE_COLLECT;
}

static CUstream stream;
static launch_fn real_launch;

static void one_call(const figure *f, const way *w)
{
    CUcontext c;
    if (f->fn)
        DRV(w->launch(stream, f->fn, f->user));
    else
        DRV(w->ctx_get(&c));
}

/* Run on the callback thread after a counted batch: says it ran. */
static void batch_ran(void *p)
{
    (void)p;
    pipe_put(ran_pipe[1]);
}

/* A batch counted on the callback thread: held while it is enqueued, so
 * that the CALLS host functions then run back to back between the two
 * toggles, with no wait for work between them. This thread waits for the
 * batch in read(2), not in cuStreamSynchronize: a waiter on the driver's
 * condition variable, there or not depending on when this thread got to
 * it, made the driver's thread wake it (a system call more) in some
 * batches and not others, whichever way they were launched. */
static void counted_cb_batch(const figure *f, const way *w)
{
    hold_stream(real_launch, stream);
    DRV(real_launch(stream, toggle_collect, NULL));
    for (int i = 0; i < CALLS; i++)
        DRV(w->launch(stream, f->fn, f->user));
    DRV(real_launch(stream, toggle_collect, NULL));
    DRV(real_launch(stream, batch_ran, NULL));
    pipe_put(gate_pipe[1]);
    pipe_take(ran_pipe[0]);
    DRV(cuStreamSynchronize(stream));
}

/* One counted batch, dumped as "<figure> <way> <batch>". The loop is the
 * same code for both ways, so what it costs itself cancels out. */
static void counted_batch(const figure *f, const way *w, int batch)
{
    char label[64];
    if (f->on_callback_thread) {
        counted_cb_batch(f, w);
        snprintf(label, sizeof label, "%s %s %d", f->name, w->name, batch);
        CALLGRIND_DUMP_STATS_AT(label);
        return;
    }
    if (f->fn)
        hold_stream(w->launch, stream);
    one_call(f, w); /* warm: caches filled */
    CALLGRIND_TOGGLE_COLLECT;
    for (int i = 0; i < CALLS; i++)
        one_call(f, w);
    CALLGRIND_TOGGLE_COLLECT;
    if (f->fn) {
        pipe_put(gate_pipe[1]);
        DRV(cuStreamSynchronize(stream));
    }
    snprintf(label, sizeof label, "%s %s %d", f->name, w->name, batch);
    CALLGRIND_DUMP_STATS_AT(label);
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 20;
    if (batches < 1)
        batches = 1;
    if (!RUNNING_ON_VALGRIND) {
        fprintf(stderr, "bench_callgrind: run it under valgrind --tool=callgrind "
                        "(bench/callgrind.sh does)\n");
        return 2;
    }
    if (pipe(gate_pipe) != 0 || pipe(held_pipe) != 0 || pipe(ran_pipe) != 0) {
        perror("bench_callgrind: pipe");
        return 1;
    }
    bench_context();
    stream = bench_stream();

    real_launch = (launch_fn)bench_driver_fn("cuLaunchHostFunc");
    ctx_get_fn real_ctx = (ctx_get_fn)bench_driver_fn("cuCtxGetCurrent");
    CUhostFn hcg_copy = (CUhostFn)dlsym(RTLD_DEFAULT, "hcguard_host_copy");
    if (!hcg_copy) {
        fprintf(stderr, "bench_callgrind: hcguard is not preloaded\n");
        return 1;
    }
    Dl_info info;
    if (dladdr((void *)real_launch, &info) && info.dli_fname)
        printf("driver %s\n", info.dli_fname);

    /* Packed by hand: hcguard's own functions are the preloaded library's
     * alone (the core archive linked here is for hcg_dynsym). */
    static unsigned char a[64], b[64];
    static hcguard_copy_record rec, rec8;
    rec = (hcguard_copy_record){(uintptr_t)a, (uintptr_t)b, sizeof a};
    rec8 = (hcguard_copy_record){(uintptr_t)a, (uintptr_t)b, 8};
    const figure figs[] = {
        {"plain", noop, NULL, 0},
        {"copy", hcg_copy, &rec, 0},
        {"thunk", NULL, NULL, 0},
        {"cb_plain", noop, NULL, 1},
        {"cb_copy", hcg_copy, &rec8, 1},
    };
    const way ways[2] = {{"driver", real_launch, real_ctx},
                         {"linked", cuLaunchHostFunc, cuCtxGetCurrent}};

    /* First calls of each path (lazy binding, pools, the oracle's first
     * look at the record) are not what a launch costs. */
    for (size_t f = 0; f < sizeof figs / sizeof figs[0]; f++)
        for (int w = 0; w < 2; w++)
            for (int i = 0; i < 3; i++)
                counted_batch(&figs[f], &ways[w], -1);
    CALLGRIND_ZERO_STATS;

    /* Batches alternate between the two ways, the order flipped every
     * round, as bench_hostfn does. */
    for (int r = 0; r < batches; r++)
        for (size_t f = 0; f < sizeof figs / sizeof figs[0]; f++)
            for (int k = 0; k < 2; k++)
                counted_batch(&figs[f], &ways[(r & 1) ^ k], r);
    printf("calls %d\nbatches %d\ndone\n", CALLS, batches);
    cuStreamDestroy(stream);
    return 0;
}
