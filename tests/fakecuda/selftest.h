/*
 * Self-test of the test driver in tests/fakecuda (a libcuda.so.1 for CI
 * machines without a GPU). It checks the behaviour hcguard's tests rely
 * on, so that a wrong model fails here rather than passing them silently.
 * It always runs against the test driver (its build RPATH points there).
 *
 * One file a concern, as the driver is split; this header joins them.
 * Cases are named in selftest_main.c: no argument runs them all, --list
 * lists them, names run those (tests/common/check.h). Every case also runs
 * alone (CTest fakecuda_selftest_cases). "--exit-with-pending-work" and
 * "--fork-while-locked" are the child modes of the exit and fork tests.
 */
#ifndef HCG_SELFTEST_H
#define HCG_SELFTEST_H

#define __CUDA_API_VERSION_INTERNAL 1 /* plain, unrenamed driver prototypes */
#include <cuda.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CUDA 13.2 entry points, absent from the 13.0 cuda.h. */
CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn,
                                     void *userData, unsigned int syncMode);
CUresult CUDAAPI cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn,
                                          void *userData, unsigned int syncMode);
CUresult CUDAAPI cuGraphNodeGetParams(CUgraphNode hNode,
                                      CUgraphNodeParams *nodeParams);

extern char **environ;

#include "../common/check.h"

/* What host functions did: written on the callback thread, read after a
 * synchronize. */
#define MAX_RUNS 512
typedef struct runs_seen {
    int n;
    intptr_t ids[MAX_RUNS];
    pthread_t thread[MAX_RUNS];
} runs_seen;

#define RUNS_ARE(...)                                                   \
    runs_are((const intptr_t[]){__VA_ARGS__},                           \
             (int)(sizeof((const intptr_t[]){__VA_ARGS__}) / sizeof(intptr_t)))

/* A host function that blocks until the gate opens, then takes 50 ms. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, started;
    atomic_int done;
} gate;

/* What one user object's destructor saw. Written on the callback thread;
 * runs is the last write, and the reader waits for it. */
typedef struct uo {
    atomic_int runs;
    pthread_t thread;
    CUresult inner;   /* a CUDA call from the destructor */
    gate *after;      /* if set: a host function that must have finished */
    int after_done;
} uo;

/* What the last stream callback was given. */
typedef struct cb_record {
    CUstream stream;
    CUresult status;
    void *user;
} cb_record;
extern cb_record cb_seen;

/* The case test_NAME: NAME_on(s) on a stream of its own. */
#define ON_A_STREAM(name)                                                    \
    void test_##name(void)                                                   \
    {                                                                        \
        CUstream s;                                                          \
        need_context();                                                      \
        CHECK_OK(cuStreamCreate(&s, 0));                                     \
        name##_on(s);                                                        \
        CHECK_OK(cuStreamDestroy_v2(s));                                     \
    }

/* ---- helpers (selftest_util.c, and where named) ---------------------- */
extern runs_seen runs;   /* what record() saw: selftest_util.c */
extern cb_record cb_seen; /* what stream_cb() saw: selftest_hostfn.c */
extern CUcontext g_ctx;   /* device 0's primary context: selftest_context.c */
void need_context(void);
void CUDA_CB record(void *p);
void runs_reset(void);
int runs_are(const intptr_t *ids, int n);
void gate_init(gate *g);
void gate_open(gate *g);
void gate_wait_started(gate *g);
void CUDA_CB gated(void *p);
void sleep_ms(long ms);
double now_s(void);
void CUDA_CB stream_cb(CUstream s, CUresult status, void *user);
CUgraphExec instantiate(CUgraph gr);            /* selftest_graph.c */
void launch_and_wait(CUgraphExec e, CUstream s); /* selftest_graph.c */
CUuserObject uo_create(uo *u, gate *after, unsigned refs); /* selftest_uobj.c */
int uo_runs_are(uo *u, int n);
pthread_t callback_thread(void);
CUgraph one_node_graph(CUhostFn fn, void *user);

/* ---- the cases, in the order selftest_main.c runs them ---------------- */
void test_before_init(void);
void test_init_and_context(void);
void test_error_names(void);
void test_order_and_thread(void);
void test_synchronize_waits(void);
void test_launch_variants(void);
void test_calls_inside_host_fn(void);
void test_proc_address(void);
void test_exports(void);
void test_device_memory(void);
void test_host_memory(void);
void test_graphs(void);
void test_capture(void);
void test_graph_params(void);
void test_uobj_bad_input(void);
void test_uobj_caller_refs(void);
void test_uobj_graph(void);
void test_uobj_clone(void);
void test_uobj_exec(void);
void test_uobj_child(void);
void test_uobj_capture(void);
void test_uobj_queued_launch(void);
void test_uobj_update(void);
void test_fork_while_locked(void);                  /* selftest_fork.c */
int fork_while_locked_main(void); /* its process: "--fork-while-locked" */

#endif /* HCG_SELFTEST_H */
