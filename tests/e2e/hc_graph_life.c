/*
 * Graph host nodes: lifetimes and counts under less common use, on the test
 * driver.
 *
 *   hc_graph_life capture-exec-set
 *       a call set on an executable graph's node, copied into a capture by
 *       a launch of that graph, then replaced and the graph launched again:
 *       the captured graph still runs it (hcguard must not free it); where
 *       the driver refuses the launch into the capture (driver 580), the
 *       capture is invalidated and only the second call runs
 *   hc_graph_life capture-attr
 *       a graph launched into a capture (captured or refused), then three
 *       times on a stream: the three runs in the event log are all on that
 *       stream (checked by check_run_streams.sh)
 *   hc_graph_life capture-in-marked-launch
 *       a begin, and a wait once another thread opened a capture, from a
 *       signal handler inside a launch that read "no capture open": both
 *       refused, the launch runs once (test driver only: FAKECUDA_LAUNCH_YIELD)
 *   hc_graph_life capture-join-race-waiter
 *       the same, the stream joined by another thread's waits made at any
 *       time, with no capture open too (the test driver yields inside a
 *       wait: FAKECUDA_WAIT_YIELD=1)
 *   hc_graph_life capture-join-race-fresh-waiter
 *       the same, the waiting thread never launching a host function
 *       (hcguard marks its waits without a call pool)
 *   hc_graph_life capture-after-jump
 *       a launch left by siglongjmp from a handler inside it: begins on that
 *       thread are refused for 2 s, then work (test driver only)
 *   hc_graph_life capture-to-graph
 *       launches captured into the program's own graph after a node of it
 *       (cuStreamBeginCaptureToGraph, and _ptsz): each runs at every replay
 *   hc_graph_life capture-join-race
 *       another thread launches on a stream that joins captures (waits for
 *       an event recorded in one) time after time: each launch ran once,
 *       or once a replay, never a freed call
 *   hc_graph_life refused
 *       host parameters the driver refuses (added with a bad dependency,
 *       set on an empty node of a graph and of an executable graph, each
 *       10000 times): none is counted as launched, none is kept
 *   hc_graph_life update-flat-wide
 *       the same, 2000 times, between two graphs of 300 host nodes each
 *   hc_graph_life update-flat
 *       an executable graph updated 400000 times back and forth between
 *       two graphs that stay: memory stays flat
 *   hc_graph_life handle-reuse
 *       a node's graph destroyed (a clone still runs its host function),
 *       its handles reused by an unrelated graph and by a node of a clone
 *       of the clone: a call set on that node lives as long as the clone,
 *       not as the unrelated graph (run with
 *       GLIBC_TUNABLES=glibc.malloc.tcache_count=0 for the reuse; 77 when
 *       the allocator did not reuse them)
 *   hc_graph_life bindings-refused
 *       cuda.bindings' cuLaunchHostFunc (the stand-in HC_E2E_BINDINGS_MODULE)
 *       into a capture invalidated before: the driver refuses each launch,
 *       nothing is captured, so no finding (checked by the caller)
 *   hc_graph_life update-dead-root
 *       2000 times: an executable graph whose graph is destroyed, updated
 *       from another graph (the update lets go of the old root, which may
 *       be freed at once), launched, destroyed: nothing is kept after
 *   hc_graph_life capture-race
 *       one thread launches a host function on a stream 10000 times while
 *       another begins and ends relaxed captures of that stream, and runs
 *       each capture's graph 3 times on a stream of its own: every launch
 *       ran once or was captured and ran 3 times, and hcguard freed none
 *       while a graph still held it (before, the launch's question "does
 *       the stream capture?" and the driver's taking it were not one step)
 *   hc_graph_life exec-child-set
 *       300 times: an executable graph's child graph node set to another
 *       child graph (cuGraphExecChildGraphNodeSetParams) after a set on its
 *       other host node (every other round by cuGraphExecNodeSetParams),
 *       every graph destroyed, the executable graph
 *       launched twice: the new child's host function and the set one run,
 *       nothing is freed under them, nothing is kept after, and every run
 *       is on the launch stream (checked by check_run_streams.sh)
 *   hc_graph_life capture-race-signal
 *       a launch interrupted by a signal whose handler launches too, while
 *       another thread begins a capture of its stream: the interrupted
 *       launch is waited for (test driver only)
 *   hc_graph_life capture-calls-in-launch
 *       a signal handler inside a launch made while a capture is open
 *       destroys a stream, begins and ends a capture: none waits for its
 *       own thread's hold of the captures' lock, the destroy is made, the
 *       begin and end refused (test driver only: it yields inside the
 *       launch, where the signal is raised)
 *   hc_graph_life capture-nested-refused
 *       a begin, then an end, of the stream a launch is on, from a signal
 *       handler inside that launch: refused (the launch runs once; the
 *       captured one at each of three replays, with 300 launches between)
 *   hc_graph_life capture-fork-in-launch-open
 *       capture-fork-in-launch while a capture is open (the launch holds
 *       the captures' lock, which the child's fresh lock must match)
 *   hc_graph_life capture-fork-in-launch
 *       a fork from a signal handler inside a launch: the child's begin of
 *       a capture does not wait for the launch it resumed (test driver
 *       only: it yields inside the launch, where the signal is raised)
 *   hc_graph_life child-set-update
 *       a child set after cuGraphExecUpdate (the node named by the
 *       instantiation graph's handle), with an exec set, the graphs
 *       destroyed: what runs lives, the old child's calls are dropped, not
 *       credited with the exec's launches, nothing is kept (runs' streams
 *       checked by check_run_streams.sh)
 *   hc_graph_life child-set-plain
 *       child sets with no host nodes either side, launched; sets the
 *       driver refuses: nothing freed twice, nothing kept
 *   hc_graph_life capture-destroy
 *       streams destroyed while they capture (one captured a host
 *       function), one while another still does, a stream that captures
 *       nothing, the per-thread stream's capture, a stream made after
 *       (perhaps with the first one's handle), a stream destroyed after
 *       its capture ended while another is open (whose host function
 *       then runs at each of two replays): launches stop asking
 *       whether their stream captures exactly when no capture is left
 *       (hcguard's --debug lines among the scenario's marks, on stderr,
 *       checked by check_sequence.sh with capture_destroy.seq; where the
 *       driver refuses to destroy a capturing stream, the scenario ends
 *       the capture first: capture_destroy_refused.seq)
 *   hc_graph_life host-node-disable
 *       a host node of an executable graph cannot be disabled
 *       (cuGraphNodeSetEnabled refused), and runs at each launch
 *   hc_graph_life capture-ctx-destroy
 *       a context destroyed, then the primary context reset, then
 *       released for the last time, while a stream of theirs captures a
 *       host function, the first while a
 *       stream of another context captures too: the same, with
 *       capture_ctx_destroy.seq (capture_ctx_destroy_refused.seq)
 *   hc_graph_life capture-race-graph
 *       the same with graph launches: an executable graph of one host
 *       node, its host function set anew before each of 5000 launches
 *       (the call it replaces freed once the launches before are done,
 *       unless a capture graph copied it); a launch the driver refuses
 *       because its stream captures (driver 580) neither runs nor counts
 *
 * Exit 0 passed, 1 failed, 77 not applicable (no device).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

static atomic_int hits[4];
static unsigned char life_src[8], life_dst[8];
static hcguard_copy_record life_rec = {(uintptr_t)life_dst, (uintptr_t)life_src, 8};
static CUstream life_stream; /* test_context()'s, made by setup */
static void fn0(void *p) { (void)p; atomic_fetch_add(&hits[0], 1); }
static void fn1(void *p) { (void)p; atomic_fetch_add(&hits[1], 1); }
static void fn2(void *p) { (void)p; atomic_fetch_add(&hits[2], 1); }
static void fn3(void *p) { (void)p; atomic_fetch_add(&hits[3], 1); }

/* fn handles sig from now on. */
static void on_signal(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    REQUIRE(sigaction(sig, &sa, NULL) == 0);
}

/* graph_calls_live back to want within 10 s (destructors are asynchronous). */
static unsigned long long calls_live_settled(test_stats_fn get, unsigned long long want)
{
    unsigned long long n = 0;
    for (int i = 0; i < 1000; i++) {
        n = test_stats(get).graph_calls_live;
        if (n == want)
            break;
        usleep(10000);
    }
    return n;
}

/* e launched into a new capture of cap: the captured graph (1), or NULL
 * when the driver refuses a graph launch into a capture (driver 580 does, in
 * every mode: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture
 * invalidated). Says which, for the test's --expect. */
static CUgraph launch_into_capture(CUgraphExec e, CUstream cap)
{
    CUgraph gc = NULL;
    REQUIRE_OK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUresult r = cuGraphLaunch(e, cap);
    if (r == CUDA_SUCCESS) {
        REQUIRE_OK(cuStreamEndCapture(cap, &gc));
        printf("graph launch into a capture: captured\n");
        return gc;
    }
    CHECK_EQ(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_EQ(cuStreamEndCapture(cap, &gc), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(gc == NULL);
    printf("graph launch into a capture: refused\n");
    return NULL;
}

static void capture_exec_set(void)
{
    CUstream s = life_stream;
    CUstream cap;
    CUgraph g, gc;
    CUgraphNode n;
    CUgraphExec e, ec;
    REQUIRE_OK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS p0 = {fn0, NULL}, p1 = {fn1, NULL}, p2 = {fn2, NULL};
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p0));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    REQUIRE_OK(cuGraphExecHostNodeSetParams(e, n, &p1));
    gc = launch_into_capture(e, cap);
    if (gc)
        REQUIRE_OK(cuGraphInstantiateWithFlags(&ec, gc, 0));
    REQUIRE_OK(cuGraphExecHostNodeSetParams(e, n, &p2)); /* replaces p1's call */
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    if (gc) {
        REQUIRE_OK(cuGraphLaunch(ec, s)); /* the captured copy: p1 */
        REQUIRE_OK(cuStreamSynchronize(s));
    }
    CHECK_EQ(atomic_load(&hits[0]), 0);
    CHECK_EQ(atomic_load(&hits[1]), gc ? 1 : 0);
    CHECK_EQ(atomic_load(&hits[2]), 1);
    REQUIRE_OK(cuGraphExecDestroy(e));
    if (gc) {
        REQUIRE_OK(cuGraphExecDestroy(ec));
        REQUIRE_OK(cuGraphDestroy(gc));
    }
    REQUIRE_OK(cuGraphDestroy(g));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
}

/* For check_run_streams.sh: how many runs the log must hold, all on s,
 * as the log writes the stream. */
static void print_runs(int n, CUstream s)
{
    printf("runs %d launch stream \"0x%llx\"\n", n, (unsigned long long)(uintptr_t)s);
}

static void capture_attr(void)
{
    CUstream s = life_stream;
    CUstream cap;
    CUgraph g, gc;
    CUgraphNode n;
    CUgraphExec e;
    REQUIRE_OK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS p0 = {fn0, NULL};
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p0));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    gc = launch_into_capture(e, cap);
    if (gc)
        REQUIRE_OK(cuGraphDestroy(gc)); /* never run */
    for (int i = 0; i < 3; i++)
        REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_EQ(atomic_load(&hits[0]), 3);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
    print_runs(3, s); /* none on the capture stream */
}

static void refused(void)
{
    CUstream s = life_stream;
    test_stats_fn get = test_require_hcguard(NULL);
    hcguard_stats before = test_stats(get);
    CUgraph g, other;
    CUgraphNode empty, foreign, h;
    CUgraphExec e;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphCreate(&other, 0));
    REQUIRE_OK(cuGraphAddEmptyNode(&empty, g, NULL, 0));
    REQUIRE_OK(cuGraphAddEmptyNode(&foreign, other, NULL, 0));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    CUDA_HOST_NODE_PARAMS p = {fn0, NULL};
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = fn0;
    int ok = 0;
    for (int i = 0; i < 10000; i++) {
        ok += cuGraphAddHostNode(&h, g, &foreign, 1, &p) == CUDA_SUCCESS;
        ok += cuGraphAddNode(&h, g, &foreign, NULL, 1, &np) == CUDA_SUCCESS;
        ok += cuGraphHostNodeSetParams(empty, &p) == CUDA_SUCCESS;
        ok += cuGraphNodeSetParams(empty, &np) == CUDA_SUCCESS;
        ok += cuGraphExecHostNodeSetParams(e, empty, &p) == CUDA_SUCCESS;
        ok += cuGraphExecNodeSetParams(e, empty, &np) == CUDA_SUCCESS;
    }
    CHECK_EQ(ok, 0);
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    hcguard_stats after = test_stats(get);
    CHECK_EQ(after.host_fns_launched - before.host_fns_launched, 0ull);
    /* While the graphs live: nothing kept for what was refused. */
    CHECK_EQ(calls_live_settled(get, 0), 0ull);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuGraphDestroy(other));
    CHECK_EQ(calls_live_settled(get, 0), 0ull);
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* An executable graph updated back and forth between two graphs of n host
 * nodes each, 2 * rounds times after a warm-up: memory stays flat (each
 * update chains the graph's calls onto the exec's root once, not again). */
static void update_back_and_forth(int n, int rounds)
{
    CUstream s = life_stream;
    CUgraph ga, gb;
    CUgraphNode na, nb;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS pa = {fn0, NULL}, pb = {fn1, NULL};
    REQUIRE_OK(cuGraphCreate(&ga, 0));
    REQUIRE_OK(cuGraphCreate(&gb, 0));
    for (int i = 0; i < n; i++) {
        REQUIRE_OK(cuGraphAddHostNode(&na, ga, NULL, 0, &pa));
        REQUIRE_OK(cuGraphAddHostNode(&nb, gb, NULL, 0, &pb));
    }
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, ga, 0));
    CUgraphExecUpdateResultInfo info;
    for (int i = 0; i < rounds / 200 + 1; i++) { /* warm up */
        REQUIRE_OK(cuGraphExecUpdate(e, gb, &info));
        REQUIRE_OK(cuGraphExecUpdate(e, ga, &info));
    }
    long before = max_rss_kib();
    for (int i = 0; i < rounds; i++) {
        REQUIRE_OK(cuGraphExecUpdate(e, gb, &info));
        REQUIRE_OK(cuGraphExecUpdate(e, ga, &info));
    }
    long grown = max_rss_kib() - before;
    printf("max RSS grew %ld KiB over %d updates of %d host nodes\n", grown, 2 * rounds, n);
    CHECK_MSG(grown < 4096, "memory grows with updates");
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_EQ(atomic_load(&hits[0]), n);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(ga));
    REQUIRE_OK(cuGraphDestroy(gb));
}

static void update_flat(void)
{
    update_back_and_forth(1, 200000);
}

/* Graphs wide enough that the set of calls already chained (chain_set,
 * src/wrap/graph.c) grows past its first size. */
static void update_flat_wide(void)
{
    update_back_and_forth(300, 1000);
}

/* A node's host function set anew, then the executable graph updated
 * from its graph, time after time (a graph re-parameterised each step):
 * each update gives the exec the graph's calls, and the call set before
 * is let go once no launch can run it; before, every call set was kept
 * until the graph and the exec were both destroyed (memory grew with each
 * update, the updates slowed with the chain). Each launch runs the call
 * set last. */
static void update_set_loop(void)
{
    CUstream s = life_stream;
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS p0 = {fn0, NULL}, p1 = {fn1, NULL};
    test_stats_fn get = test_require_hcguard(NULL);
    memset(hits, 0, sizeof hits);
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p0));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    enum { ROUNDS = 4000 };
    for (int i = 0; i < ROUNDS; i++) {
        REQUIRE_OK(cuGraphHostNodeSetParams(n, i % 2 ? &p0 : &p1));
        CUgraphExecUpdateResultInfo info;
        REQUIRE_OK(cuGraphExecUpdate(e, g, &info));
        if (i % 64 == 0) {
            REQUIRE_OK(cuGraphLaunch(e, s));
            REQUIRE_OK(cuStreamSynchronize(s));
        }
    }
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    /* Launched at rounds 0, 64, ... (even: fn1) and once at the end (the
     * last set, round ROUNDS - 1, is odd: fn0). */
    CHECK_EQ(atomic_load(&hits[1]), (ROUNDS + 63) / 64);
    CHECK_EQ(atomic_load(&hits[0]), 1);
    /* The node's first call (the root, held by g and e) and the one set
     * last; a few more while destructors are on their way. */
    unsigned long long live = calls_live_settled(get, 2);
    printf("update-set-loop: %d sets and updates, %llu calls live\n", ROUNDS, live);
    CHECK_MSG(live <= 2, "%llu calls kept after %d sets and updates", live, ROUNDS);
    /* Set anew on the graph, not updated: the graph lets go of the call
     * the exec runs, which the exec's own reference keeps. */
    REQUIRE_OK(cuGraphHostNodeSetParams(n, &p1));
    usleep(100000); /* a user object's destructor would have run */
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_EQ(atomic_load(&hits[0]), 2);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    CHECK_EQ(calls_live_settled(get, 0), 0ull);
}

static void handle_reuse(void)
{
    CUstream s = life_stream;
    CUgraph g, g1, x, g2, d1, d2;
    CUgraphNode n, n2;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS p0 = {fn0, NULL}, p1 = {fn1, NULL};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p0));
    REQUIRE_OK(cuGraphClone(&g1, g));
    REQUIRE_OK(cuGraphDestroy(g)); /* the node's root lives on in g1 */
    /* The test driver's graphs and nodes are blocks of one size, handed
     * back last freed first: x takes g's; d1 takes n's and gives it back
     * on top of d2's, so that the clone takes d2's and its node n's. */
    REQUIRE_OK(cuGraphCreate(&x, 0));
    REQUIRE_OK(cuGraphCreate(&d1, 0));
    REQUIRE_OK(cuGraphCreate(&d2, 0));
    REQUIRE_OK(cuGraphDestroy(d1));
    REQUIRE_OK(cuGraphDestroy(d2));
    REQUIRE_OK(cuGraphClone(&g2, g1));
    size_t k = 1;
    REQUIRE_OK(cuGraphGetNodes(g2, &n2, &k));
    if (x != g || n2 != n) {
        printf("SKIP: the handles were not reused\n");
        exit(77);
    }
    REQUIRE_OK(cuGraphHostNodeSetParams(n2, &p1));
    REQUIRE_OK(cuGraphDestroy(x));
    usleep(100000); /* a user object's destructor would have run */
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g2, 0));
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_EQ(atomic_load(&hits[0]), 0);
    CHECK_EQ(atomic_load(&hits[1]), 1);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g2));
    REQUIRE_OK(cuGraphDestroy(g1));
}

typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);

static void bindings_refused(void)
{
    CUstream s = life_stream;
    const char *path = getenv("HC_E2E_BINDINGS_MODULE");
    void *mod = path ? dlopen(path, RTLD_NOW) : NULL;
    launch_fn launch = mod ? (launch_fn)dlsym(mod, "fake_bindings_launch") : NULL;
    REQUIRE(launch != NULL);
    for (int i = 0; i < 100; i++) {
        CUgraph g = NULL;
        REQUIRE_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CHECK(cuStreamSynchronize(s) != CUDA_SUCCESS); /* invalidates the capture */
        CHECK(launch(s, fn0, NULL) != CUDA_SUCCESS);
        CHECK(cuStreamEndCapture(s, &g) != CUDA_SUCCESS);
    }
    CHECK_EQ(atomic_load(&hits[0]), 0);
}

static void update_dead_root(void)
{
    CUstream s = life_stream;
    test_stats_fn get = test_require_hcguard(NULL);
    for (int i = 0; i < 2000; i++) {
        CUgraph g1, g2;
        CUgraphNode n1, n2;
        CUgraphExec e;
        CUDA_HOST_NODE_PARAMS p0 = {fn0, NULL}, p1 = {fn1, NULL};
        CUgraphExecUpdateResultInfo info;
        REQUIRE_OK(cuGraphCreate(&g1, 0));
        REQUIRE_OK(cuGraphAddHostNode(&n1, g1, NULL, 0, &p0));
        REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g1, 0));
        REQUIRE_OK(cuGraphDestroy(g1));
        REQUIRE_OK(cuGraphCreate(&g2, 0));
        REQUIRE_OK(cuGraphAddHostNode(&n2, g2, NULL, 0, &p1));
        REQUIRE_OK(cuGraphExecUpdate(e, g2, &info));
        REQUIRE_OK(cuGraphLaunch(e, s));
        REQUIRE_OK(cuStreamSynchronize(s));
        REQUIRE_OK(cuGraphExecDestroy(e));
        REQUIRE_OK(cuGraphDestroy(g2));
    }
    CHECK_EQ(atomic_load(&hits[1]), 2000);
    CHECK_EQ(calls_live_settled(get, 0), 0ull);
}

/* A graph of one host node running fn. */
static CUgraph one_host_graph(CUhostFn fn)
{
    CUgraph g;
    CUgraphNode n;
    CUDA_HOST_NODE_PARAMS p = {fn, NULL};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p));
    return g;
}

enum { CHILD_SET_ROUNDS = 300, CHILD_SET_LAUNCHES = 2 };

/* Child graph node c of e set to k's nodes: by cuGraphExecNodeSetParams
 * (generic), else by cuGraphExecChildGraphNodeSetParams. */
static CUresult set_child(CUgraphExec e, CUgraphNode c, CUgraph k, int generic)
{
    if (!generic)
        return cuGraphExecChildGraphNodeSetParams(e, c, k);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.graph = k;
    return cuGraphExecNodeSetParams(e, c, &np);
}

/* An executable graph whose only host node at first is in a child graph
 * (so hcguard's hold on the executable graph is that node's), its other
 * host node set on the executable graph, then the child graph node set to
 * another child graph and every graph destroyed: what the child ran before
 * may be freed, and what the executable graph runs now must not be. */
static void exec_child_set(void)
{
    CUstream s = life_stream;
    for (int i = 0; i < CHILD_SET_ROUNDS; i++) {
        CUgraph p, k1 = one_host_graph(fn0), k2 = one_host_graph(fn1);
        CUgraphNode c, h;
        CUgraphExec e;
        CUDA_HOST_NODE_PARAMS ph = {fn0, NULL}, ps = {fn2, NULL};
        REQUIRE_OK(cuGraphCreate(&p, 0));
        REQUIRE_OK(cuGraphAddChildGraphNode(&c, p, NULL, 0, k1));
        REQUIRE_OK(cuGraphAddHostNode(&h, p, &c, 1, &ph));
        REQUIRE_OK(cuGraphInstantiateWithFlags(&e, p, 0));
        REQUIRE_OK(cuGraphExecHostNodeSetParams(e, h, &ps));
        REQUIRE_OK(set_child(e, c, k2, i & 1));
        REQUIRE_OK(cuGraphDestroy(p));
        REQUIRE_OK(cuGraphDestroy(k1));
        REQUIRE_OK(cuCtxSynchronize()); /* the test driver's destructors */
        if (i < 10)
            usleep(2000); /* a real driver's */
        for (int k = 0; k < CHILD_SET_LAUNCHES; k++)
            REQUIRE_OK(cuGraphLaunch(e, s));
        REQUIRE_OK(cuStreamSynchronize(s));
        REQUIRE_OK(cuGraphExecDestroy(e));
        REQUIRE_OK(cuGraphDestroy(k2));
    }
    CHECK_EQ(atomic_load(&hits[0]), 0);
    CHECK_EQ(atomic_load(&hits[1]), CHILD_SET_ROUNDS * CHILD_SET_LAUNCHES);
    CHECK_EQ(atomic_load(&hits[2]), CHILD_SET_ROUNDS * CHILD_SET_LAUNCHES);
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
    print_runs(2 * CHILD_SET_ROUNDS * CHILD_SET_LAUNCHES, s);
}

/* A child set after an update from another graph, naming the child node
 * by the instantiation graph's handle (as documented; hcguard pairs the
 * update's nodes with it by position), an exec set, every graph but one
 * destroyed: what the exec runs lives, the old child's calls are neither
 * kept nor credited with its launches (another exec runs one of them on a
 * stream of its own), nothing is kept after. */
static void child_set_update(void)
{
    CUstream s = life_stream, s2;
    REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUgraph k1 = one_host_graph(fn0), k1b = one_host_graph(fn3), k2 = one_host_graph(fn1);
    CUgraph p1, p2;
    CUgraphNode c1, h1, c2, h2;
    CUgraphExec e, ek;
    CUDA_HOST_NODE_PARAMS ph = {fn0, NULL}, ps = {fn2, NULL};
    CUgraphExecUpdateResultInfo info;
    REQUIRE_OK(cuGraphCreate(&p1, 0));
    REQUIRE_OK(cuGraphAddChildGraphNode(&c1, p1, NULL, 0, k1));
    REQUIRE_OK(cuGraphAddHostNode(&h1, p1, &c1, 1, &ph));
    REQUIRE_OK(cuGraphCreate(&p2, 0));
    REQUIRE_OK(cuGraphAddChildGraphNode(&c2, p2, NULL, 0, k1b));
    REQUIRE_OK(cuGraphAddHostNode(&h2, p2, &c2, 1, &ph));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, p1, 0));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&ek, k1b, 0));
    REQUIRE_OK(cuGraphExecUpdate(e, p2, &info));
    REQUIRE_OK(cuGraphExecChildGraphNodeSetParams(e, c1, k2));
    REQUIRE_OK(cuGraphExecHostNodeSetParams(e, h1, &ps));
    REQUIRE_OK(cuGraphDestroy(p2));
    REQUIRE_OK(cuGraphDestroy(k1));
    REQUIRE_OK(cuGraphDestroy(p1));
    REQUIRE_OK(cuCtxSynchronize());
    usleep(2000);
    for (int k = 0; k < 2; k++) {
        REQUIRE_OK(cuGraphLaunch(e, s));
        REQUIRE_OK(cuGraphLaunch(ek, s2));
    }
    REQUIRE_OK(cuStreamSynchronize(s));
    REQUIRE_OK(cuStreamSynchronize(s2));
    CHECK_EQ(atomic_load(&hits[0]), 0);
    CHECK_EQ(atomic_load(&hits[1]), 2);
    CHECK_EQ(atomic_load(&hits[2]), 2);
    CHECK_EQ(atomic_load(&hits[3]), 2);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphExecDestroy(ek));
    REQUIRE_OK(cuGraphDestroy(k1b));
    REQUIRE_OK(cuGraphDestroy(k2));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
    print_runs(4, s);
    print_runs(2, s2);
}

/* A graph of one empty node (a kernel, on a GPU). */
static CUgraph one_empty_graph(void)
{
    CUgraph g;
    CUgraphNode n;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddEmptyNode(&n, g, NULL, 0));
    return g;
}

/* Child sets with no host node on either side (in a process that made
 * one): set back and forth, launched each time; and sets the driver
 * refuses (another node type) of a child that holds the executable
 * graph's only host call: it still runs, nothing is kept after. */
static void child_set_plain(void)
{
    CUstream s = life_stream;
    CUgraph other = one_host_graph(fn1), p, k1 = one_empty_graph(), k2 = one_empty_graph();
    CUgraphNode c;
    CUgraphExec e;
    REQUIRE_OK(cuGraphCreate(&p, 0));
    REQUIRE_OK(cuGraphAddChildGraphNode(&c, p, NULL, 0, k1));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, p, 0));
    for (int i = 0; i < 6; i++) {
        REQUIRE_OK(set_child(e, c, i & 1 ? k1 : k2, i & 2));
        REQUIRE_OK(cuGraphLaunch(e, s));
    }
    REQUIRE_OK(cuStreamSynchronize(s));
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(p));
    CUgraph k = one_host_graph(fn0);
    REQUIRE_OK(cuGraphCreate(&p, 0));
    REQUIRE_OK(cuGraphAddChildGraphNode(&c, p, NULL, 0, k));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, p, 0));
    CHECK(set_child(e, c, k2, 0) != CUDA_SUCCESS); /* an empty node for a host node */
    CHECK(set_child(e, c, k2, 1) != CUDA_SUCCESS);
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_EQ(atomic_load(&hits[0]), 1);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(p));
    REQUIRE_OK(cuGraphDestroy(k));
    REQUIRE_OK(cuGraphDestroy(k1));
    REQUIRE_OK(cuGraphDestroy(k2));
    REQUIRE_OK(cuGraphDestroy(other));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
}

enum { RACE_LAUNCHES = 10000, RACE_GRAPH_LAUNCHES = 5000, RACE_REPLAYS = 3 };
static CUcontext race_ctx;
static atomic_int race_done;
static atomic_int race_launched; /* launches made: race_launcher stops early past RACE_BUDGET_NS */

/* The launching threads stop early once this long has passed (the race
 * takes 0.4-2 s on an idle machine; where CPUs are oversubscribed each
 * sched_yield the test driver makes inside a call (FAKECUDA_*_YIELD) costs
 * a scheduler period, ~10 ms, and 10000 launches would take minutes). */
#define RACE_BUDGET_NS (20ull * 1000000000ull)
static uint64_t race_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static atomic_int race_refused; /* graph launches the driver refused */

static void fn3b(void *p) { (void)p; atomic_fetch_add(&hits[3], 1); }

/* What the launching thread launches: host functions on s, or (e set)
 * e, its host node n set anew before each launch. */
typedef struct race_arg {
    CUstream s;
    CUgraphExec e;
    CUgraphNode n;
    int launches;
} race_arg;

static void *race_launcher(void *p)
{
    const race_arg *a = p;
    REQUIRE_OK(cuCtxSetCurrent(race_ctx));
    uint64_t end = race_now_ns() + RACE_BUDGET_NS;
    int i;
    for (i = 0; i < a->launches && race_now_ns() < end; i++) {
        if (!a->e) {
            REQUIRE_OK(cuLaunchHostFunc(a->s, fn3, NULL));
            continue;
        }
        CUDA_HOST_NODE_PARAMS hp = {i & 1 ? fn3 : fn3b, NULL};
        REQUIRE_OK(cuGraphExecHostNodeSetParams(a->e, a->n, &hp));
        CUresult r = cuGraphLaunch(a->e, a->s);
        if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
            atomic_fetch_add(&race_refused, 1); /* into a capture (see launch_into_capture) */
        else
            REQUIRE_OK(r);
    }
    atomic_store(&race_launched, i);
    atomic_store(&race_done, 1);
    return NULL;
}

/* g instantiated, launched RACE_REPLAYS times on own and waited for,
 * then destroyed with its executable graph. */
static void replay_and_destroy(CUgraph g, CUstream own)
{
    CUgraphExec e;
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int r = 0; r < RACE_REPLAYS; r++)
        REQUIRE_OK(cuGraphLaunch(e, own));
    REQUIRE_OK(cuStreamSynchronize(own));
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* The end of a capture of s (whatever the other thread launched into it
 * meanwhile), run RACE_REPLAYS times on own: the number of host nodes it
 * had (race_capture: begun and ended). graphs:
 * the other thread launches graphs, and a refused one may have invalidated
 * the capture (see launch_into_capture). */
static long race_capture_end(CUstream s, CUstream own, int graphs)
{
    CUgraph g;
    size_t n = 0;
    CUresult ended = cuStreamEndCapture(s, &g);
    if (ended == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && graphs)
        return 0; /* a graph launch the driver refused invalidated it */
    REQUIRE_OK(ended);
    REQUIRE_OK(cuGraphGetNodes(g, NULL, &n));
    if (n)
        replay_and_destroy(g, own);
    else
        REQUIRE_OK(cuGraphDestroy(g));
    return (long)n;
}

static long race_capture(CUstream s, CUstream own, int graphs)
{
    REQUIRE_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    return race_capture_end(s, own, graphs);
}

/* Launches by another thread (a) into captures of a.s made meanwhile:
 * each ran once, or was captured (one node: a host node, or the child
 * graph node of a graph launch) and ran once a replay. */
static void capture_race_with(race_arg a)
{
    CUstream own;
    pthread_t t;
    long captured = 0, captures = 0;
    REQUIRE_OK(cuCtxGetCurrent(&race_ctx));
    REQUIRE_OK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    /* A capture begun first: from here on every launch asks. */
    captured += race_capture(a.s, own, a.e != NULL);
    if (pthread_create(&t, NULL, race_launcher, &a) != 0)
        abort();
    while (!atomic_load(&race_done)) {
        captured += race_capture(a.s, own, a.e != NULL);
        captures++;
    }
    pthread_join(t, NULL);
    REQUIRE_OK(cuStreamSynchronize(a.s));
    int refused = atomic_load(&race_refused), launched = atomic_load(&race_launched);
    printf("capture race: %ld captures took %ld of %d launches (of %d), %d refused\n", captures,
           captured, launched, a.launches, refused);
    CHECK_EQ(atomic_load(&hits[3]),
             (int)(launched - refused - captured + captured * RACE_REPLAYS));
}

static void capture_race(void)
{
    race_arg a = {.launches = RACE_LAUNCHES};
    REQUIRE_OK(cuStreamCreate(&a.s, CU_STREAM_NON_BLOCKING));
    capture_race_with(a);
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
}

static void capture_race_graph(void)
{
    CUgraph g;
    race_arg a = {.launches = RACE_GRAPH_LAUNCHES};
    CUDA_HOST_NODE_PARAMS hp = {fn3, NULL};
    REQUIRE_OK(cuStreamCreate(&a.s, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&a.n, g, NULL, 0, &hp));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&a.e, g, 0));
    capture_race_with(a);
    REQUIRE_OK(cuGraphExecDestroy(a.e));
    REQUIRE_OK(cuGraphDestroy(g));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
}

/* ---- capture-join-race ------------------------------------------------- */
static atomic_int join_runs[RACE_LAUNCHES];
static atomic_char join_refused[RACE_LAUNCHES]; /* the driver refused the launch */
static atomic_int join_done;
static int join_launched; /* launches made (read after the join) */
static void fn_join(void *p) { atomic_fetch_add(&join_runs[(intptr_t)p], 1); }

/* One of the stream-capture errors (CUDA_ERROR_STREAM_CAPTURE_*). */
static int capture_error(CUresult r)
{
    return r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

static void *join_launcher(void *p)
{
    CUstream b = p;
    REQUIRE_OK(cuCtxSetCurrent(race_ctx));
    uint64_t end = race_now_ns() + RACE_BUDGET_NS;
    intptr_t i;
    for (i = 0; i < RACE_LAUNCHES && race_now_ns() < end; i++) {
        CUresult r = cuLaunchHostFunc(b, fn_join, (void *)i);
        if (capture_error(r)) /* b in a capture the driver gave up on */
            atomic_store(&join_refused[i], 1);
        else
            REQUIRE_OK(r);
        if (i % 8 == 7) /* quiet spells: captures that b rejoined and that end */
            usleep(20);
    }
    join_launched = (int)i;
    atomic_store(&join_done, 1);
    return NULL;
}

/* One capture of a that b joins (an event recorded in a waited for by b)
 * and rejoins: replayed RACE_REPLAYS times on own. 0, or 1 if the driver
 * would not have it (b took a launch after it rejoined: unjoined). */
/* b rejoins a's capture (eb recorded on b, waited for by a), if rejoin
 * and r says nothing failed yet, and the capture ends: 0 with *g its graph,
 * or 1 if it failed, as a capture may (checked; no graph left). */
static int rejoin_and_end(CUstream a, CUstream b, CUevent eb, int rejoin, CUresult r, CUgraph *g)
{
    if (rejoin && r == CUDA_SUCCESS)
        r = cuEventRecord(eb, b);
    if (rejoin && r == CUDA_SUCCESS)
        r = cuStreamWaitEvent(a, eb, 0);
    *g = NULL;
    CUresult ended = cuStreamEndCapture(a, g);
    if (r == CUDA_SUCCESS && ended == CUDA_SUCCESS)
        return 0;
    CHECK_MSG(capture_error(r) || capture_error(ended), "capture: %d, end: %d", (int)r,
              (int)ended);
    if (*g)
        REQUIRE_OK(cuGraphDestroy(*g));
    return 1;
}

static int join_capture(CUstream a, CUstream b, CUstream own, CUevent ea, CUevent eb)
{
    CUgraph g;
    REQUIRE_OK(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUresult r = cuEventRecord(ea, a);
    if (r == CUDA_SUCCESS)
        r = cuStreamWaitEvent(b, ea, 0);
    for (int k = 0; k < 4 && r == CUDA_SUCCESS; k++)
        sched_yield(); /* room for the other thread's launches while b is joined */
    if (rejoin_and_end(a, b, eb, 1, r, &g)) {
        static atomic_int said; /* what the driver leaves b in (once) */
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        CUresult q = cuStreamIsCapturing(b, &st);
        if (!atomic_exchange(&said, 1))
            printf("a capture not ended: b then captures: %d (query %d)\n", (int)st, (int)q);
        return 1;
    }
    replay_and_destroy(g, own);
    return 0;
}

/* Another thread launches on b while b joins captures of a, time after
 * time, through cuStreamWaitEvent: a launch found not capturing must not
 * be captured (hcguard would free its call after one run, and a replay
 * would run a freed call, or another launch's). Each launch ran once, or
 * RACE_REPLAYS times (captured), or never (refused, or captured into a
 * capture the driver would not end). */
static void capture_join_race(void)
{
    CUstream a, b, own;
    CUevent ea, eb;
    pthread_t t;
    int captures = 0, unended = 0, refused = 0, counts[RACE_REPLAYS + 1] = {0};
    REQUIRE_OK(cuCtxGetCurrent(&race_ctx));
    REQUIRE_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    unended += join_capture(a, b, own, ea, eb); /* from here on every launch asks */
    REQUIRE(pthread_create(&t, NULL, join_launcher, b) == 0);
    while (!atomic_load(&join_done)) {
        unended += join_capture(a, b, own, ea, eb);
        captures++;
    }
    pthread_join(t, NULL);
    REQUIRE_OK(cuStreamSynchronize(b));
    for (int i = 0; i < join_launched; i++) {
        int n = atomic_load(&join_runs[i]), no = atomic_load(&join_refused[i]);
        CHECK_MSG(n == 1 || n == RACE_REPLAYS || (n == 0 && (unended || no)),
                  "launch %d ran %d times", i, n);
        counts[n >= 0 && n <= RACE_REPLAYS ? n : 0]++;
        refused += no;
    }
    printf("capture join race: %d captures, %d not ended; launches run once %d, %d times %d, "
           "never %d (%d refused)\n",
           captures, unended, counts[1], RACE_REPLAYS, counts[RACE_REPLAYS], counts[0], refused);
    /* The race took place: some launches were captured, and replayed or,
     * in a capture the driver would not end, never run (driver 580, and
     * the test driver as it does, refuse an end once b took a launch
     * after it rejoined: CUDA_ERROR_STREAM_CAPTURE_UNJOINED). */
    CHECK(counts[RACE_REPLAYS] > 0 || counts[0] > refused);
    REQUIRE_OK(cuEventDestroy(ea));
    REQUIRE_OK(cuEventDestroy(eb));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
}

/* ---- capture-race-signal ------------------------------------------------ */
enum { SIGNAL_ROUNDS = 400 };
static CUstream sig_s, sig_s2;
static atomic_int sig_launched, sig_stop, sig_go, sig_done, sig_round;

/* A launch from a signal handler, on the launching thread, inside its
 * launch of fn3 (the driver refuses a NULL function before it takes any
 * lock of its own); then it holds the thread there until the capture
 * began (5 ms at most). */
static void sig_launch(int sig)
{
    (void)sig;
    (void)cuLaunchHostFunc(sig_s2, NULL, NULL);
    int round = atomic_load(&sig_round);
    atomic_store(&sig_go, round);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t1);
    while (atomic_load(&sig_done) != round &&
           (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 5000000L);
}

static void *sig_launcher(void *p)
{
    (void)p;
    REQUIRE_OK(cuCtxSetCurrent(race_ctx));
    while (!atomic_load(&sig_stop)) {
        REQUIRE_OK(cuLaunchHostFunc(sig_s, fn3, NULL));
        atomic_fetch_add(&sig_launched, 1);
    }
    return NULL;
}

/* A launch interrupted by a signal whose handler launches too, a capture
 * of its stream begun meanwhile by another thread: the handler's launch
 * must not take the interrupted one's mark with its own, or the begin
 * does not wait for it (it read "no capture open"), and the driver
 * captures what hcguard took for a one-shot launch. Test driver only: no
 * real driver may be called from a signal handler. */
static void capture_race_signal(void)
{
    CUstream own;
    pthread_t t;
    long captured = 0;
    REQUIRE_OK(cuCtxGetCurrent(&race_ctx));
    REQUIRE_OK(cuStreamCreate(&sig_s, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&sig_s2, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    on_signal(SIGUSR1, sig_launch);
    REQUIRE(pthread_create(&t, NULL, sig_launcher, NULL) == 0);
    for (int i = 1; i <= SIGNAL_ROUNDS; i++) {
        atomic_store(&sig_round, i);
        REQUIRE(pthread_kill(t, SIGUSR1) == 0);
        while (atomic_load(&sig_go) != i)
            sched_yield();
        REQUIRE_OK(cuStreamBeginCapture(sig_s, CU_STREAM_CAPTURE_MODE_RELAXED));
        int before = atomic_load(&sig_launched);
        atomic_store(&sig_done, i);
        while (atomic_load(&sig_launched) < before + 2)
            sched_yield();
        captured += race_capture_end(sig_s, own, 0);
    }
    atomic_store(&sig_stop, 1);
    pthread_join(t, NULL);
    REQUIRE_OK(cuCtxSynchronize());
    int launched = atomic_load(&sig_launched);
    printf("capture race, signal: %d rounds, %ld of %d launches captured\n", SIGNAL_ROUNDS,
           captured, launched);
    CHECK_EQ(atomic_load(&hits[3]), (int)(launched - captured + captured * RACE_REPLAYS));
}

/* ---- capture-fork-in-launch ---------------------------------------------- */
/* The test driver yields inside a launch (FAKECUDA_LAUNCH_YIELD=1): this
 * program's sched_yield, armed, raises SIGUSR1 there, whose handler forks. */
static __thread int fork_armed;
static volatile sig_atomic_t fork_child;
static volatile int fork_status = -1;

static __thread int nested_armed; /* capture-calls-in-launch: SIGUSR2 */

int sched_yield(void)
{
    if (fork_armed) {
        fork_armed = 0;
        raise(SIGUSR1);
    }
    if (nested_armed) {
        nested_armed = 0;
        raise(SIGUSR2);
    }
    return (int)syscall(SYS_sched_yield);
}

static void fork_in_handler(int sig)
{
    (void)sig;
    int st = 0;
    pid_t p = fork();
    if (p == 0)
        fork_child = 1;
    else if (p > 0 && waitpid(p, &st, 0) == p)
        fork_status = st;
}

static void *timed_capture(void *v)
{
    CUstream c;
    CUgraph g;
    struct timespec t0, t1;
    REQUIRE_OK(cuCtxSetCurrent(race_ctx));
    REQUIRE_OK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    REQUIRE_OK(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuStreamEndCapture(c, &g));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    REQUIRE_OK(cuGraphDestroy(g));
    *(double *)v = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return NULL;
}

/* A fork from a signal handler inside a launch: in the child, the launch
 * resumes and takes off its mark (hcg_launch_mark), which the child kept
 * (it was reset, and the count wrapped: every begin then waited 2 s). */
static void capture_fork_in_launch(void)
{
    CUstream s = life_stream;
    REQUIRE_OK(cuCtxGetCurrent(&race_ctx));
    on_signal(SIGUSR1, fork_in_handler);
    REQUIRE_OK(cuLaunchHostFunc(s, fn0, NULL)); /* the thread's pool */
    fork_armed = 1;
    CUresult r = cuLaunchHostFunc(s, fn0, NULL); /* forks inside */
    fork_armed = 0;
    if (fork_child) {
        double took = 10;
        pthread_t t;
        if (r != CUDA_SUCCESS || cuLaunchHostFunc(s, fn0, NULL) != CUDA_SUCCESS ||
            pthread_create(&t, NULL, timed_capture, &took) != 0 || pthread_join(t, NULL) != 0)
            _exit(2);
        printf("child: a capture begun and ended in %.3f s\n", took);
        fflush(stdout);
        _exit(took < 1 ? 0 : 1);
    }
    REQUIRE_OK(r);
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_MSG(fork_status == 0, "the child's begin waited (status %d)", fork_status);
}

/* The driver frees the graphs' calls later, on its own thread: let it
 * before the exit's leak check. */
static void settle(void)
{
    (void)calls_live_settled(test_require_hcguard(NULL), 0);
}

/* A capture ended (the refusal may have invalidated it), then its stream
 * destroyed. */
static void end_then_destroy(CUstream s)
{
    CUgraph g = NULL;
    CUresult r = cuStreamEndCapture(s, &g);
    CHECK_MSG(r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
              "end after a refused destroy: %d", (int)r);
    if (g)
        REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuStreamDestroy(s));
}

static void capture_destroy(void)
{
    CUstream s1, s2, s3, s4;
    CUgraph g;
    REQUIRE_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuLaunchHostFunc(s1, fn0, NULL)); /* a node of s1's capture */
    CUresult r = cuStreamDestroy(s1);
    fprintf(stderr, "capture-destroy: s1 destroyed while it captured: %d\n", (int)r);
    if (r != CUDA_SUCCESS) /* a driver that refuses: the capture ended first */
        end_then_destroy(s1);
    REQUIRE_OK(cuStreamDestroy(s3)); /* captures nothing: changes nothing */
    fprintf(stderr, "capture-destroy: one open\n");
    REQUIRE_OK(cuStreamEndCapture(s2, &g));
    fprintf(stderr, "capture-destroy: none open\n");
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    REQUIRE_OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
    fprintf(stderr, "capture-destroy: the per-thread stream's capture ended\n");
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuStreamCreate(&s4, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(s4, CU_STREAM_CAPTURE_MODE_RELAXED));
    r = cuStreamDestroy_v2(s4);
    fprintf(stderr, "capture-destroy: s4 destroyed while it captured: %d\n", (int)r);
    if (r != CUDA_SUCCESS)
        end_then_destroy(s4);
    /* An ended capture's stream is no origin any more: destroying it ends
     * none (a stale one would end s6's count, and the launch into s6 would
     * be taken for a one-shot launch, freed after the first replay). */
    CUstream s5, s6;
    CUgraphExec e;
    REQUIRE_OK(cuStreamCreate(&s5, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&s6, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(s5, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuStreamEndCapture(s5, &g));
    REQUIRE_OK(cuGraphDestroy(g));
    fprintf(stderr, "capture-destroy: s5's capture ended\n");
    REQUIRE_OK(cuStreamBeginCapture(s6, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuStreamDestroy(s5));
    fprintf(stderr, "capture-destroy: s5 destroyed after its capture\n");
    REQUIRE_OK(cuLaunchHostFunc(s6, fn2, NULL));
    REQUIRE_OK(cuStreamEndCapture(s6, &g));
    fprintf(stderr, "capture-destroy: s6's capture ended\n");
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    REQUIRE_OK(cuGraphLaunch(e, s2));
    REQUIRE_OK(cuGraphLaunch(e, s2));
    /* Launches go on, not captured. */
    REQUIRE_OK(cuLaunchHostFunc(s2, fn1, NULL));
    REQUIRE_OK(cuStreamSynchronize(s2));
    CHECK_EQ(atomic_load(&hits[2]), 2);
    CHECK_EQ(atomic_load(&hits[1]), 1);
    CHECK_EQ(atomic_load(&hits[0]), 0);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuStreamDestroy(s6));
    REQUIRE_OK(cuStreamDestroy(s2));
}

/* ---- capture-ctx-destroy -------------------------------------------------- */
/* A context destroyed, and the primary context reset, while a stream of
 * theirs captures: the capture can never end, and is counted as ended,
 * while the capture of another context's stream stays open until its
 * end. A driver that refuses either has it ended first. */
static CUstream capturing_with_node(void)
{
    CUstream s;
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuLaunchHostFunc(s, fn0, NULL));
    return s;
}

/* A capture into the program's own graph outlives its stream, not its
 * context: a context destroyed while one of its streams captures so ends
 * it as well. Driver 580 takes the graph with it (made before the
 * context, in another): its handle then answers CUDA_ERROR_INVALID_VALUE,
 * and the node's call is let go with it. A driver that leaves the graph
 * has it destroyed here. Either way no call is kept. */
static void capture_to_graph_ctx_destroy(CUcontext primary)
{
    CUcontext mine;
    CUstream s;
    CUgraph g;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuCtxCreate(&mine, NULL, 0, 0));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuLaunchHostFunc(s, fn0, NULL));
    CUresult r = cuCtxDestroy(mine);
    fprintf(stderr, "capture-ctx-destroy: a context destroyed while its stream captured into "
            "the program's graph: %d\n", (int)r);
    if (r != CUDA_SUCCESS) {
        end_then_destroy(s);
        REQUIRE_OK(cuCtxDestroy(mine));
    }
    REQUIRE_OK(cuCtxSetCurrent(primary));
    size_t n;
    if (r == CUDA_SUCCESS && cuGraphGetNodes(g, NULL, &n) == CUDA_ERROR_INVALID_VALUE)
        fprintf(stderr, "capture-ctx-destroy: the program's graph went with the context\n");
    else
        REQUIRE_OK(cuGraphDestroy(g));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
    CHECK_EQ(atomic_load(&hits[0]), 0);
}

static void capture_ctx_destroy(void)
{
    CUcontext primary, mine;
    CUstream other, d;
    CUgraph g;
    REQUIRE_OK(cuCtxGetCurrent(&primary));
    REQUIRE_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(other, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuCtxCreate(&mine, NULL, 0, 0));
    CUstream s = capturing_with_node();
    CUresult r = cuCtxDestroy(mine);
    fprintf(stderr, "capture-ctx-destroy: a context destroyed while its stream captured: %d\n",
            (int)r);
    if (r != CUDA_SUCCESS) {
        end_then_destroy(s);
        REQUIRE_OK(cuCtxDestroy(mine));
    }
    REQUIRE_OK(cuCtxSetCurrent(primary));
    fprintf(stderr, "capture-ctx-destroy: one open\n");
    REQUIRE_OK(cuStreamEndCapture(other, &g));
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuStreamDestroy(other));
    fprintf(stderr, "capture-ctx-destroy: none open\n");
    s = capturing_with_node();
    r = cuDevicePrimaryCtxReset(0);
    fprintf(stderr, "capture-ctx-destroy: the primary context reset while its stream captured: "
            "%d\n", (int)r);
    if (r != CUDA_SUCCESS) {
        end_then_destroy(s);
        REQUIRE_OK(cuDevicePrimaryCtxReset(0));
    }
    /* Driver 580 destroys the primary context at its reset: retained
     * again (twice: test_context's reference, and this one), then
     * released for the last time while a stream of it captures. */
    REQUIRE_OK(cuDevicePrimaryCtxRetain(&primary, 0));
    REQUIRE_OK(cuCtxSetCurrent(primary));
    s = capturing_with_node();
    REQUIRE_OK(cuDevicePrimaryCtxRelease(0));
    r = cuDevicePrimaryCtxRelease(0);
    fprintf(stderr, "capture-ctx-destroy: the primary context released for the last time while "
            "its stream captured: %d\n", (int)r);
    if (r != CUDA_SUCCESS) {
        end_then_destroy(s);
        REQUIRE_OK(cuDevicePrimaryCtxRelease(0));
    }
    /* Launches go on in the context made again, not captured. */
    REQUIRE_OK(cuDevicePrimaryCtxRetain(&primary, 0));
    REQUIRE_OK(cuCtxSetCurrent(primary));
    REQUIRE_OK(cuStreamCreate(&d, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuLaunchHostFunc(d, fn1, NULL));
    REQUIRE_OK(cuStreamSynchronize(d));
    CHECK_EQ(atomic_load(&hits[1]), 1);
    CHECK_EQ(atomic_load(&hits[0]), 0);
    REQUIRE_OK(cuStreamDestroy(d));
    capture_to_graph_ctx_destroy(primary);
}

/* ---- host-node-disable ---------------------------------------------------- */
/* A graph launch records, in each host node's call, that it will run it
 * once (its replay: seq, stream, wait); a node that could be disabled in
 * the executable graph would leave a recorded launch without its run, and
 * every later run would be named by an earlier launch. The driver
 * documents that only kernel, memset and memcpy nodes can be disabled
 * (and that conditional bodies hold no host node): a driver that lets a
 * host node be disabled fails this. */
static void host_node_disable(void)
{
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS p0 = {fn0, NULL};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p0));
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    CUresult r = cuGraphNodeSetEnabled(e, n, 0);
    fprintf(stderr, "host-node-disable: a host node disabled: %d\n", (int)r);
    CHECK_MSG(r != CUDA_SUCCESS, "the driver disabled a host node");
    REQUIRE_OK(cuGraphLaunch(e, life_stream));
    REQUIRE_OK(cuGraphLaunch(e, life_stream));
    REQUIRE_OK(cuStreamSynchronize(life_stream));
    CHECK_EQ(atomic_load(&hits[0]), 2);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* ---- capture-calls-in-launch ---------------------------------------------- */
/* While a capture is open, a launch holds the captures' lock to read; a
 * signal handler inside it (the test driver yields in the launch, where
 * sched_yield raises SIGUSR2) destroys a stream and begins and ends a
 * capture, each of which takes that lock to write: they must not wait for
 * their own thread (they did, for ever). The destroy is made; the begin
 * and the end are refused (see capture-nested-refused). */
static CUstream nested_victim, nested_cap;
static CUresult nested_r[3] = {-1, -1, -1};

static void capture_calls(int sig)
{
    (void)sig;
    CUgraph g = NULL;
    nested_r[0] = cuStreamDestroy(nested_victim);
    nested_r[1] = cuStreamBeginCapture(nested_cap, CU_STREAM_CAPTURE_MODE_RELAXED);
    nested_r[2] = cuStreamEndCapture(nested_cap, &g);
    if (g)
        cuGraphDestroy(g);
}

static void capture_calls_in_launch(void)
{
    CUstream cap, s;
    CUgraph g;
    REQUIRE_OK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&nested_victim, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&nested_cap, CU_STREAM_NON_BLOCKING));
    on_signal(SIGUSR2, capture_calls);
    REQUIRE_OK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED)); /* launches ask */
    nested_armed = 1;
    REQUIRE_OK(cuLaunchHostFunc(s, fn1, NULL));
    CHECK_EQ(nested_armed, 0); /* the handler ran inside the launch */
    CHECK_EQ(nested_r[0], CUDA_SUCCESS); /* the destroy: made, counting nothing */
    CHECK_EQ(nested_r[1], CUDA_ERROR_NOT_PERMITTED); /* (capture-nested-refused) */
    CHECK_EQ(nested_r[2], CUDA_ERROR_NOT_PERMITTED);
    REQUIRE_OK(cuLaunchHostFunc(cap, fn2, NULL)); /* captured: runs at each replay */
    REQUIRE_OK(cuStreamEndCapture(cap, &g));
    CUgraphExec e;
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
    CHECK_EQ(atomic_load(&hits[1]), 1);
    CHECK_EQ(atomic_load(&hits[2]), 2);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    printf("capture calls in a launch: returned\n");
}

/* ---- capture-nested-refused ----------------------------------------------- */
/* A begin or an end of the very stream a launch is on, from a signal
 * handler inside that launch (after hcguard asked whether the stream
 * captures): hcguard refuses them. Run, the end freed the call the driver
 * then ran (abort: a host node ran after hcguard freed it); the begin made
 * the driver capture a call hcguard freed after its first run. */
static CUstream nested_same;

static void begin_same(int sig)
{
    (void)sig;
    nested_r[1] = cuStreamBeginCapture(nested_same, CU_STREAM_CAPTURE_MODE_RELAXED);
}

static void end_same(int sig)
{
    (void)sig;
    CUgraph g = NULL;
    nested_r[2] = cuStreamEndCapture(nested_same, &g);
    if (g)
        cuGraphDestroy(g);
}

/* e launched n times on s, then synchronized. */
static void replay(CUgraphExec e, CUstream s, int n)
{
    for (int i = 0; i < n; i++)
        REQUIRE_OK(cuGraphLaunch(e, s));
    REQUIRE_OK(cuStreamSynchronize(s));
}

/* Captures into the program's own graph (cuStreamBeginCaptureToGraph,
 * and its per-thread variant got through cuGetProcAddress), after a host
 * node of it: the captured launches run at each replay, as the node does,
 * and are freed with the graph. */
typedef CUresult (*to_graph_fn)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *,
                                size_t, CUstreamCaptureMode);

static void capture_to_graph_with(to_graph_fn begin, CUstream cap, CUstream own)
{
    CUgraph g, got;
    CUgraphNode n0;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS p = {fn0, NULL};
    memset(hits, 0, sizeof hits);
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&n0, g, NULL, 0, &p));
    REQUIRE_OK(begin(cap, g, &n0, NULL, 1, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuLaunchHostFunc(cap, fn1, NULL));
    REQUIRE_OK(cuLaunchHostFunc(cap, test_copy_fn(NULL), &life_rec));
    REQUIRE_OK(cuStreamEndCapture(cap, &got));
    CHECK(got == g);
    REQUIRE_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    replay(e, own, 3);
    CHECK_EQ(atomic_load(&hits[0]), 3);
    CHECK_EQ(atomic_load(&hits[1]), 3);
    CHECK_EQ(life_dst[7], 7);
    /* The node's and the two captured launches': kept with the graph, not
     * freed after a run (which a replay could not tell from kept while
     * nothing reuses them). */
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 3), 3ull);
    REQUIRE_OK(cuGraphExecDestroy(e));
    /* A capture into it that a joined stream does not rejoin: the driver
     * (580, and the test driver as it does) refuses the end and frees the
     * graph itself (its handle refused after; a destroy would crash
     * driver 580); the launches never run, and every call of the graph,
     * its node's and the captured ones, goes with it. */
    CUstream side;
    CUevent ev;
    REQUIRE_OK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(begin(cap, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuLaunchHostFunc(cap, fn2, NULL));
    REQUIRE_OK(cuEventRecord(ev, cap));
    REQUIRE_OK(cuStreamWaitEvent(side, ev, 0));
    REQUIRE_OK(cuLaunchHostFunc(side, fn3, NULL));
    got = NULL;
    CHECK_EQ(cuStreamEndCapture(cap, &got), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    CHECK(got == NULL);
    size_t n = 0;
    CHECK_EQ(cuGraphGetNodes(g, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    REQUIRE_OK(cuStreamSynchronize(side));
    REQUIRE_OK(cuStreamSynchronize(own));
    CHECK_EQ(atomic_load(&hits[2]) + atomic_load(&hits[3]), 0);
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
    REQUIRE_OK(cuEventDestroy(ev));
    REQUIRE_OK(cuStreamDestroy(side));
}

static void capture_to_graph(void)
{
    CUstream cap, own;
    to_graph_fn ptsz = NULL;
    CUdriverProcAddressQueryResult found;
    REQUIRE_OK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 8; i++)
        life_src[i] = (unsigned char)i;
    capture_to_graph_with(cuStreamBeginCaptureToGraph, cap, own);
    REQUIRE_OK(cuGetProcAddress("cuStreamBeginCaptureToGraph", (void **)&ptsz, 12030,
                                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &found));
    REQUIRE(ptsz != NULL);
    capture_to_graph_with(ptsz, CU_STREAM_PER_THREAD, own);
    printf("capture-to-graph: replays ran the captured launches\n");
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
    REQUIRE_OK(cuStreamDestroy(cap));
    REQUIRE_OK(cuStreamDestroy(own));
}

static void capture_nested_refused(void)
{
    CUstream cap, other;
    CUgraph g;
    CUgraphExec e;
    REQUIRE_OK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&nested_same, CU_STREAM_NON_BLOCKING));
    on_signal(SIGUSR2, begin_same);
    REQUIRE_OK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED)); /* launches ask */
    nested_armed = 1;
    REQUIRE_OK(cuLaunchHostFunc(nested_same, fn1, NULL)); /* not captured: runs once */
    CHECK_EQ(nested_armed, 0);
    CHECK_EQ(nested_r[1], CUDA_ERROR_NOT_PERMITTED);
    REQUIRE_OK(cuStreamSynchronize(nested_same));
    CHECK_EQ(atomic_load(&hits[1]), 1);
    on_signal(SIGUSR2, end_same);
    REQUIRE_OK(cuStreamBeginCapture(nested_same, CU_STREAM_CAPTURE_MODE_RELAXED));
    nested_armed = 1;
    REQUIRE_OK(cuLaunchHostFunc(nested_same, fn2, NULL)); /* captured: runs at each replay */
    CHECK_EQ(nested_armed, 0);
    CHECK_EQ(nested_r[2], CUDA_ERROR_NOT_PERMITTED);
    REQUIRE_OK(cuStreamEndCapture(nested_same, &g));
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    replay(e, other, 2);
    for (int i = 0; i < 300; i++) /* would take a freed call's place */
        REQUIRE_OK(cuLaunchHostFunc(other, fn0, NULL));
    replay(e, other, 1);
    CHECK_EQ(atomic_load(&hits[2]), 3);
    CHECK_EQ(atomic_load(&hits[0]), 300);
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuStreamEndCapture(cap, &g));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* capture-fork-in-launch with a capture open: the forking launch holds the
 * captures' lock to read, which the child, resuming it, lets go of (the
 * child's lock is a fresh one, taken again for it: a begin in the child
 * waited for ever). */
static void capture_fork_in_launch_open(void)
{
    CUstream cap;
    CUgraph g;
    REQUIRE_OK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
    capture_fork_in_launch();
    REQUIRE_OK(cuStreamEndCapture(cap, &g));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* ---- capture-join-race-waiter ------------------------------------------ */
static atomic_int waiter_stop;
static CUevent waiter_ev;
static int waiter_launches = 1; /* 0: the waiter never launches */

/* b waits for the event the captures record, time after time: one made
 * while no capture is open (marked, not holding the lock) may still look
 * at the event after another thread's begin and record (the test driver
 * yields there: FAKECUDA_WAIT_YIELD=1), and join b to that capture. */
static void *join_waiter(void *p)
{
    CUstream b = p, mine;
    REQUIRE_OK(cuCtxSetCurrent(race_ctx));
    /* A launch first: this thread has a pool, whose mark its waits use
     * while no capture is open (without, a marker of its own). */
    REQUIRE_OK(cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING));
    if (waiter_launches) {
        REQUIRE_OK(cuLaunchHostFunc(mine, fn1, NULL));
        REQUIRE_OK(cuStreamSynchronize(mine));
    }
    while (!atomic_load(&waiter_stop)) {
        CUresult r = cuStreamWaitEvent(b, waiter_ev, 0);
        /* An event of a capture that is over: CUDA_ERROR_INVALID_VALUE
         * (driver 580, and the test driver as it does). */
        if (!capture_error(r) && r != CUDA_ERROR_INVALID_VALUE)
            REQUIRE_OK(r);
    }
    REQUIRE_OK(cuStreamDestroy(mine));
    return NULL;
}

/* As capture-join-race, but b joins the captures through another thread's
 * waits, made at any time: a begin must wait for a wait that read "no
 * capture open", as for a launch. A capture that b joined rejoins it; one
 * whose b took a launch after that is not ended (unjoined), and that
 * launch never runs. */
static void capture_join_race_waiter(void)
{
    CUstream a, b, own;
    CUevent eb;
    pthread_t l, w;
    int captures = 0, joined = 0, unended = 0, counts[RACE_REPLAYS + 1] = {0};
    REQUIRE_OK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuCtxGetCurrent(&race_ctx));
    REQUIRE_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuEventCreate(&waiter_ev, CU_EVENT_DISABLE_TIMING));
    REQUIRE(pthread_create(&l, NULL, join_launcher, b) == 0);
    REQUIRE(pthread_create(&w, NULL, join_waiter, b) == 0);
    while (!atomic_load(&join_done)) {
        CUgraph g;
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        REQUIRE_OK(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED));
        REQUIRE_OK(cuEventRecord(waiter_ev, a));
        /* Open until the waiter joined b (for a while at most). */
        for (int k = 0; k < 200 && st == CU_STREAM_CAPTURE_STATUS_NONE; k++) {
            sched_yield();
            REQUIRE_OK(cuStreamIsCapturing(b, &st));
        }
        joined += st != CU_STREAM_CAPTURE_STATUS_NONE;
        if (rejoin_and_end(a, b, eb, st != CU_STREAM_CAPTURE_STATUS_NONE, CUDA_SUCCESS, &g))
            unended++;
        else
            replay_and_destroy(g, own);
        captures++;
    }
    atomic_store(&waiter_stop, 1);
    pthread_join(l, NULL);
    pthread_join(w, NULL);
    REQUIRE_OK(cuStreamSynchronize(b));
    for (int i = 0; i < join_launched; i++) {
        int n = atomic_load(&join_runs[i]), no = atomic_load(&join_refused[i]);
        CHECK_MSG(n == 1 || n == RACE_REPLAYS || (n == 0 && (unended || no)),
                  "launch %d ran %d times", i, n);
        counts[n >= 0 && n <= RACE_REPLAYS ? n : 0]++;
    }
    printf("capture join race, waiter: %d captures, %d joined, %d not ended; launches run once "
           "%d, %d times %d, never %d\n",
           captures, joined, unended, counts[1], RACE_REPLAYS, counts[RACE_REPLAYS], counts[0]);
    CHECK(joined > 0);
    REQUIRE_OK(cuEventDestroy(waiter_ev));
    REQUIRE_OK(cuEventDestroy(eb));
    CHECK_EQ(calls_live_settled(test_require_hcguard(NULL), 0), 0ull);
}

static void capture_join_race_fresh_waiter(void)
{
    waiter_launches = 0;
    capture_join_race_waiter();
}

/* ---- capture-in-marked-launch ------------------------------------------ */
/* The test driver's launch yields (FAKECUDA_LAUNCH_YIELD=1) after hcguard
 * read "no capture open" and before the driver looks at the stream; this
 * program's sched_yield, armed (nested_armed), raises SIGUSR2 there, so
 * that the handler runs inside that launch's window. */
static CUstream mk_a, mk_b;
static CUevent mk_ea, mk_plain;
static CUresult mk_r[3];
static atomic_int mk_go, mk_refused_after_ms = -1;

/* Part 1: a begin of a's capture, an event recorded in it and b's wait
 * for it, from inside a launch on b that read "no capture open". */
static void mk_begin_handler(int sig)
{
    (void)sig;
    mk_r[0] = cuStreamBeginCapture(mk_a, CU_STREAM_CAPTURE_MODE_RELAXED);
    mk_r[1] = cuEventRecord(mk_ea, mk_a);
    mk_r[2] = cuStreamWaitEvent(mk_b, mk_ea, 0);
}

/* Part 2: another thread's begin is let go, then waits from inside the
 * launch until one is refused (at most 1.5 s). */
static void mk_wait_handler(int sig)
{
    (void)sig;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&mk_go, 1);
    for (;;) {
        CUresult r = cuStreamWaitEvent(mk_b, mk_plain, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (r == CUDA_ERROR_NOT_PERMITTED) {
            atomic_store(&mk_refused_after_ms, (int)ms);
            return;
        }
        if (ms > 1500)
            return;
    }
}

static void *mk_beginner(void *p)
{
    CUstream x = p;
    CUgraph g;
    REQUIRE_OK(cuCtxSetCurrent(race_ctx));
    while (!atomic_load(&mk_go))
        usleep(100);
    REQUIRE_OK(cuStreamBeginCapture(x, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuStreamEndCapture(x, &g));
    REQUIRE_OK(cuGraphDestroy(g));
    return NULL;
}

/* Signal handlers inside a launch that read "no capture open" (marked,
 * not holding the captures' lock): a begin there is refused (it would not
 * wait for that launch, which the driver would then capture as a launch
 * hcguard frees after one run), and so is a wait once another thread's
 * begin has opened a capture (it would wait for the lock behind that
 * begin, which waits for this very launch). */
static void capture_in_marked_launch(void)
{
    CUstream x;
    pthread_t t;
    REQUIRE_OK(cuCtxGetCurrent(&race_ctx));
    REQUIRE_OK(cuStreamCreate(&mk_a, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&mk_b, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuEventCreate(&mk_ea, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventCreate(&mk_plain, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventRecord(mk_plain, x));
    memset(hits, 0, sizeof hits);
    on_signal(SIGUSR2, mk_begin_handler);
    nested_armed = 1;
    REQUIRE_OK(cuLaunchHostFunc(mk_b, fn0, NULL));
    CHECK_MSG(!nested_armed, "the launch did not yield (FAKECUDA_LAUNCH_YIELD=1?)");
    printf("in a marked launch: begin %d, record %d, wait %d\n", (int)mk_r[0], (int)mk_r[1],
           (int)mk_r[2]);
    CHECK_EQ(mk_r[0], CUDA_ERROR_NOT_PERMITTED);
    CHECK_EQ(mk_r[1], CUDA_SUCCESS); /* a not capturing: a plain record */
    CHECK_EQ(mk_r[2], CUDA_SUCCESS);
    REQUIRE_OK(cuStreamSynchronize(mk_b));
    CHECK_EQ(atomic_load(&hits[0]), 1);
    on_signal(SIGUSR2, mk_wait_handler);
    REQUIRE(pthread_create(&t, NULL, mk_beginner, x) == 0);
    nested_armed = 1;
    REQUIRE_OK(cuLaunchHostFunc(mk_b, fn0, NULL));
    pthread_join(t, NULL);
    printf("in a marked launch, a capture opened meanwhile: wait refused after %d ms\n",
           atomic_load(&mk_refused_after_ms));
    CHECK(atomic_load(&mk_refused_after_ms) >= 0);
    REQUIRE_OK(cuStreamSynchronize(mk_b));
    CHECK_EQ(atomic_load(&hits[0]), 2);
    REQUIRE_OK(cuEventDestroy(mk_ea));
    REQUIRE_OK(cuEventDestroy(mk_plain));
}

/* ---- capture-after-jump --------------------------------------------------- */
static sigjmp_buf jump_env;
static void jump_out(int sig)
{
    (void)sig;
    siglongjmp(jump_env, 1);
}

/* A launch left by siglongjmp from a signal handler inside it (the test
 * driver yields there: FAKECUDA_LAUNCH_YIELD=1) leaves its mark: begins on
 * that thread are refused as from inside it, for 2 s; then the mark is
 * taken to be left behind (said), and captures work again. */
static void capture_after_jump(void)
{
    CUstream a;
    CUgraph g;
    REQUIRE_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuLaunchHostFunc(a, fn0, NULL)); /* this thread's pool */
    REQUIRE_OK(cuStreamSynchronize(a));
    on_signal(SIGUSR2, jump_out);
    if (!sigsetjmp(jump_env, 1)) {
        nested_armed = 1;
        (void)cuLaunchHostFunc(a, fn0, NULL);
        CHECK_MSG(0, "the launch did not yield (FAKECUDA_LAUNCH_YIELD=1?)");
        return;
    }
    CUresult early = cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED);
    usleep(2100000);
    CUresult late = cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED);
    printf("after a jump out of a launch: begin %d, 2.1 s later %d\n", (int)early, (int)late);
    CHECK_EQ(early, CUDA_ERROR_NOT_PERMITTED);
    CHECK_EQ(late, CUDA_SUCCESS);
    REQUIRE_OK(cuLaunchHostFunc(a, fn1, NULL));
    REQUIRE_OK(cuStreamEndCapture(a, &g));
    replay_and_destroy(g, a);
    CHECK_EQ(atomic_load(&hits[1]), RACE_REPLAYS);
    REQUIRE_OK(cuStreamDestroy(a));
}

static void setup(void)
{
    life_stream = test_context();
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("capture-exec-set", capture_exec_set),
    CHECK_SCENARIO("capture-attr", capture_attr),
    CHECK_SCENARIO("refused", refused),
    CHECK_SCENARIO("update-flat", update_flat),
    CHECK_SCENARIO("update-flat-wide", update_flat_wide),
    CHECK_SCENARIO("update-set-loop", update_set_loop),
    CHECK_SCENARIO("handle-reuse", handle_reuse),
    CHECK_SCENARIO("bindings-refused", bindings_refused),
    CHECK_SCENARIO("update-dead-root", update_dead_root),
    CHECK_SCENARIO("capture-race", capture_race),
    CHECK_SCENARIO("capture-race-graph", capture_race_graph),
    CHECK_SCENARIO("capture-join-race", capture_join_race),
    CHECK_SCENARIO("capture-join-race-waiter", capture_join_race_waiter),
    CHECK_SCENARIO("capture-join-race-fresh-waiter", capture_join_race_fresh_waiter),
    CHECK_SCENARIO("capture-to-graph", capture_to_graph),
    CHECK_SCENARIO("capture-in-marked-launch", capture_in_marked_launch),
    CHECK_SCENARIO("capture-after-jump", capture_after_jump),
    CHECK_SCENARIO("capture-destroy", capture_destroy),
    CHECK_SCENARIO("capture-ctx-destroy", capture_ctx_destroy),
    CHECK_SCENARIO("host-node-disable", host_node_disable),
    CHECK_SCENARIO("exec-child-set", exec_child_set),
    CHECK_SCENARIO("capture-race-signal", capture_race_signal),
    CHECK_SCENARIO("capture-fork-in-launch", capture_fork_in_launch),
    CHECK_SCENARIO("capture-calls-in-launch", capture_calls_in_launch),
    CHECK_SCENARIO("capture-nested-refused", capture_nested_refused),
    CHECK_SCENARIO("capture-fork-in-launch-open", capture_fork_in_launch_open),
    CHECK_SCENARIO("child-set-update", child_set_update),
    CHECK_SCENARIO("child-set-plain", child_set_plain),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_graph_life", "graph life %s", CHECK_CASES(scenarios), argc,
                               argv, setup, settle);
}
