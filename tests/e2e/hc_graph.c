/*
 * Graph host nodes under hcguard, against the test driver (CI) or the real
 * driver (GPU machines).
 *
 *   hc_graph replay     a host-copy node replayed 1000 times, its record
 *                       (at an integer address) made bad for 10 replays in
 *                       the middle: those are skipped, the rest copy
 *   hc_graph bad        bad records refused (guard) or passed (audit) by
 *                       cuGraphAddHostNode, cuGraphAddNode (v1 and v2) and
 *                       the set-params entry points; the node is unchanged
 *   hc_graph getparams  the getters return what the user set
 *   hc_graph lifetime   thousands of graphs created, cloned, nested,
 *                       instantiated, updated and destroyed in every order:
 *                       what hcguard keeps for them returns to zero
 *   hc_graph capture    host functions captured from a stream replay
 *   hc_graph fork-launch
 *                       a thread launches a graph without pause while the
 *                       main thread forks 200 times: no fork hangs (the
 *                       driver's fork handler and hcguard's take their
 *                       locks in one order)
 *   hc_graph flood N    a graph of 64 host nodes replayed N times without a
 *                       pause: every run counted, dropped events or not
 *   hc_graph capture-bindings
 *                       the same, enqueued through a stand-in of cuda.bindings'
 *                       wrapper, which frees its data after one run: every
 *                       replay still runs (ASan builds see any use after free)
 *
 * Exit 0 passed, 1 failed, 77 not applicable (no device).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

typedef CUresult (*add_node_v1_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                   CUgraphNodeParams *);
typedef CUresult (*node_params_fn)(CUgraphNode, CUgraphNodeParams *);

static CUhostFn copy_fn;
static test_stats_fn get_stats;
static int audit;
static CUstream stream;

static atomic_int ticks;
static void tick(void *p)
{
    (void)p;
    atomic_fetch_add(&ticks, 1);
}

static hcguard_stats stats(void)
{
    return test_stats(get_stats);
}

static void setup(void)
{
    stream = test_context();
    get_stats = test_require_hcguard(&copy_fn);
    audit = test_mode_is("audit");
}

/* An address that is never mapped. */
static unsigned char *hole(void)
{
    return (unsigned char *)NEVER_MAPPED;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 7 + i);
}

static uint64_t live_after_drain(uint64_t want);

/* ---- replay ------------------------------------------------------------ */
static void replay(void)
{
    enum { N = 4096, REPLAYS = 1000, BAD_FROM = 500, BAD_N = 10 };
    unsigned char *src = malloc(N), *dst = malloc(N), *gone = hole();
    hcguard_copy_record *rec = malloc(sizeof *rec); /* "an integer address" */
    *rec = (hcguard_copy_record){(uintptr_t)dst, (uintptr_t)src, N};
    CUgraph g;
    CUgraphNode a, b;
    CUgraphExec e;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS pc = {copy_fn, rec}, pt = {tick, NULL};
    REQUIRE_OK(cuGraphAddHostNode(&a, g, NULL, 0, &pc));
    REQUIRE_OK(cuGraphAddHostNode(&b, g, &a, 1, &pt));
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    hcguard_stats before = stats();
    int wrong = 0;
    for (int i = 0; i < REPLAYS; i++) {
        int bad = i >= BAD_FROM && i < BAD_FROM + BAD_N;
        fill(src, N, (unsigned)i);
        memset(dst, 0xee, N);
        rec->dst = bad ? (uintptr_t)gone : (uintptr_t)dst;
        REQUIRE_OK(cuGraphLaunch(e, stream));
        REQUIRE_OK(cuStreamSynchronize(stream));
        if (!bad && memcmp(src, dst, N) != 0)
            wrong++;
        if (bad && dst[0] != 0xee)
            wrong++;
    }
    CHECK_MSG(wrong == 0, "%d replays copied wrongly", wrong);
    CHECK_MSG(atomic_load(&ticks) == REPLAYS, "the ordinary node ran %d times", atomic_load(&ticks));
    hcguard_stats s = stats();
    CHECK_MSG(s.skipped - before.skipped == BAD_N, "skipped %llu, want %d",
          (unsigned long long)(s.skipped - before.skipped), BAD_N);
    CHECK_MSG(s.copies_ran - before.copies_ran == REPLAYS - BAD_N, "copies ran %llu",
          (unsigned long long)(s.copies_ran - before.copies_ran));
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* ---- bad records at node creation and update ----------------------------- */
static void bad(void)
{
    unsigned char src[64], dst[64];
    unsigned char *gone = hole();
    hcguard_copy_record good = {(uintptr_t)dst, (uintptr_t)src, 64};
    hcguard_copy_record overlap = {(uintptr_t)dst, (uintptr_t)dst + 8, 32};
    hcguard_copy_record unmapped = {(uintptr_t)gone, (uintptr_t)src, 64};
    CUresult want = audit ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    CUgraph g;
    CUgraphNode n, n2 = NULL, n3 = NULL;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    hcguard_stats before = stats();

    CUDA_HOST_NODE_PARAMS p = {copy_fn, &overlap};
    CHECK_MSG(cuGraphAddHostNode(&n, g, NULL, 0, &p) == want, "cuGraphAddHostNode(overlap)");
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = copy_fn;
    np.host.userData = &unmapped;
    CHECK_MSG(cuGraphAddNode(&n2, g, NULL, NULL, 0, &np) == want, "cuGraphAddNode_v2(unmapped)");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    add_node_v1_fn v1 = h ? (add_node_v1_fn)dlsym(h, "cuGraphAddNode") : NULL;
    if (v1)
        CHECK_MSG(v1(&n3, g, NULL, 0, &np) == want, "cuGraphAddNode (v1)(unmapped)");

    /* A good node, then bad updates: refused, the node keeps its record. */
    CUgraphNode ok;
    p.userData = &good;
    REQUIRE_OK(cuGraphAddHostNode(&ok, g, NULL, 0, &p));
    CUgraphExec e;
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    p.userData = &overlap;
    CHECK_MSG(cuGraphHostNodeSetParams(ok, &p) == want, "cuGraphHostNodeSetParams(overlap)");
    np.host.userData = &unmapped;
    CHECK_MSG(cuGraphNodeSetParams(ok, &np) == want, "cuGraphNodeSetParams(unmapped)");
    CHECK_MSG(cuGraphExecHostNodeSetParams(e, ok, &p) == want, "cuGraphExecHostNodeSetParams");
    CHECK_MSG(cuGraphExecNodeSetParams(e, ok, &np) == want, "cuGraphExecNodeSetParams");
    CUDA_HOST_NODE_PARAMS got;
    REQUIRE_OK(cuGraphHostNodeGetParams(ok, &got));
    if (!audit)
        CHECK_MSG(got.fn == copy_fn && got.userData == &good, "a refused update changed the node");
    int expect = v1 ? 7 : 6;
    hcguard_stats s = stats();
    CHECK_MSG(s.rejected - before.rejected == (uint64_t)expect, "rejected %llu, want %d",
          (unsigned long long)(s.rejected - before.rejected), expect);
    /* Launch: in guard mode only good copies exist; in audit mode the bad
     * ones are skipped when they run, and the process lives on. */
    memset(dst, 0, sizeof dst);
    fill(src, sizeof src, 3);
    REQUIRE_OK(cuGraphLaunch(e, stream));
    REQUIRE_OK(cuStreamSynchronize(stream));
    if (!audit)
        CHECK_MSG(memcmp(src, dst, sizeof src) == 0, "the good node did not copy");
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* ---- getters ---------------------------------------------------------------- */
static void getparams(void)
{
    unsigned char src[64], dst[64];
    hcguard_copy_record r1 = {(uintptr_t)dst, (uintptr_t)src, 64}, r2 = r1;
    CUgraph g, clone;
    CUgraphNode n, cn;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS p = {copy_fn, &r1}, got;
    REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p));
    REQUIRE_OK(cuGraphHostNodeGetParams(n, &got));
    CHECK_MSG(got.fn == copy_fn && got.userData == &r1, "cuGraphHostNodeGetParams after add");
    p.userData = &r2;
    REQUIRE_OK(cuGraphHostNodeSetParams(n, &p));
    REQUIRE_OK(cuGraphHostNodeGetParams(n, &got));
    CHECK_MSG(got.fn == copy_fn && got.userData == &r2, "cuGraphHostNodeGetParams after set");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    node_params_fn gnp = h ? (node_params_fn)dlsym(h, "cuGraphNodeGetParams") : NULL;
    if (gnp) {
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        CUresult r = gnp(n, &np);
        if (r != CUDA_ERROR_NOT_FOUND)
            CHECK_MSG(r == CUDA_SUCCESS && np.type == CU_GRAPH_NODE_TYPE_HOST &&
                      np.host.fn == copy_fn && np.host.userData == &r2,
                  "cuGraphNodeGetParams: %d", (int)r);
    }
    REQUIRE_OK(cuGraphClone(&clone, g));
    REQUIRE_OK(cuGraphNodeFindInClone(&cn, n, clone));
    REQUIRE_OK(cuGraphHostNodeGetParams(cn, &got));
    CHECK_MSG(got.fn == copy_fn && got.userData == &r2, "cuGraphHostNodeGetParams on a clone");
    char path[] = "/tmp/hc_graph_dot_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        close(fd);
        CHECK_MSG(cuGraphDebugDotPrint(g, path, 0) == CUDA_SUCCESS, "cuGraphDebugDotPrint");
        unlink(path);
    }
    REQUIRE_OK(cuGraphDestroy(clone));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* ---- lifetime ------------------------------------------------------------- */
static uint64_t live_after_drain(uint64_t want)
{
    /* User objects' destructors run asynchronously on a driver thread. */
    uint64_t live = 0;
    cuCtxSynchronize();
    for (int i = 0; i < 400; i++) {
        live = stats().graph_calls_live;
        if (live <= want)
            break;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return live;
}

static void lifetime(void)
{
    enum { ROUNDS = 2000 };
    unsigned char src[256], dst[256];
    hcguard_copy_record r1 = {(uintptr_t)dst, (uintptr_t)src, 256};
    hcguard_copy_record r2 = {(uintptr_t)dst, (uintptr_t)src, 128};
    uint64_t base = live_after_drain(0);
    for (int i = 0; i < ROUNDS; i++) {
        CUgraph g, clone, parent, g2;
        CUgraphNode n, child, n2;
        CUgraphExec e, ec;
        CUDA_HOST_NODE_PARAMS p = {copy_fn, &r1};
        REQUIRE_OK(cuGraphCreate(&g, 0));
        REQUIRE_OK(cuGraphAddHostNode(&n, g, NULL, 0, &p));
        REQUIRE_OK(cuGraphClone(&clone, g));
        REQUIRE_OK(cuGraphCreate(&parent, 0));
        REQUIRE_OK(cuGraphAddChildGraphNode(&child, parent, NULL, 0, g));
        REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
        REQUIRE_OK(cuGraphInstantiate(&ec, parent, 0));
        p.userData = &r2;
        REQUIRE_OK(cuGraphHostNodeSetParams(n, &p));
        REQUIRE_OK(cuGraphExecHostNodeSetParams(e, n, &p));
        /* An update from another graph of the same shape. */
        REQUIRE_OK(cuGraphCreate(&g2, 0));
        REQUIRE_OK(cuGraphAddHostNode(&n2, g2, NULL, 0, &p));
        CUgraphExecUpdateResultInfo info;
        REQUIRE_OK(cuGraphExecUpdate(e, g2, &info));
        /* Set after the update: must outlive both graphs while e lives. */
        p.userData = &r1;
        REQUIRE_OK(cuGraphExecHostNodeSetParams(e, n, &p));
        /* Destroy in an order that depends on the round. */
        switch (i % 4) {
        case 0:
            REQUIRE_OK(cuGraphDestroy(g));
            REQUIRE_OK(cuGraphDestroy(g2));
            REQUIRE_OK(cuGraphLaunch(e, stream));
            REQUIRE_OK(cuGraphLaunch(ec, stream));
            break;
        case 1:
            REQUIRE_OK(cuGraphLaunch(e, stream));
            REQUIRE_OK(cuGraphExecDestroy(e));
            REQUIRE_OK(cuGraphDestroy(g2));
            REQUIRE_OK(cuGraphLaunch(ec, stream));
            REQUIRE_OK(cuGraphDestroy(g));
            e = NULL;
            break;
        case 2:
            REQUIRE_OK(cuGraphDestroy(parent));
            REQUIRE_OK(cuGraphLaunch(ec, stream));
            REQUIRE_OK(cuGraphDestroy(g));
            REQUIRE_OK(cuGraphDestroy(g2));
            REQUIRE_OK(cuGraphLaunch(e, stream));
            parent = NULL;
            break;
        default:
            REQUIRE_OK(cuGraphDestroy(g2));
            REQUIRE_OK(cuGraphLaunch(e, stream));
            REQUIRE_OK(cuGraphDestroy(g));
            break;
        }
        if (e)
            REQUIRE_OK(cuGraphExecDestroy(e));
        REQUIRE_OK(cuGraphExecDestroy(ec));
        if (parent)
            REQUIRE_OK(cuGraphDestroy(parent));
        REQUIRE_OK(cuGraphDestroy(clone));
        if (i % 256 == 0)
            REQUIRE_OK(cuStreamSynchronize(stream));
    }
    REQUIRE_OK(cuStreamSynchronize(stream));
    uint64_t live = live_after_drain(base);
    CHECK_MSG(live == base, "%llu graph calls still alive after every graph was destroyed (was %llu)",
          (unsigned long long)live, (unsigned long long)base);
    printf("lifetime: %d rounds, graph calls alive at the end: %llu\n", ROUNDS,
           (unsigned long long)live);
}

/* ---- capture ---------------------------------------------------------------- */
typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);

/* A host copy and an ordinary host function enqueued through launch while
 * the stream captures, replayed: each replay copies and ticks, and the
 * calls are gone with the executable graph. */
static void capture_with(launch_fn launch, int replays, const char *what)
{
    enum { N = 1024 };
    unsigned char src[N], dst[N];
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, N};
    uint64_t base = live_after_drain(0);
    int ticks_before = atomic_load(&ticks);
    CUgraph g;
    CUgraphExec e;
    REQUIRE_OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    REQUIRE_OK(launch(stream, copy_fn, &rec));
    REQUIRE_OK(launch(stream, tick, NULL));
    REQUIRE_OK(cuStreamEndCapture(stream, &g));
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    REQUIRE_OK(cuGraphDestroy(g)); /* the executable graph keeps the calls alive */
    int wrong = 0;
    for (int i = 0; i < replays; i++) {
        fill(src, N, (unsigned)i + 7);
        REQUIRE_OK(cuGraphLaunch(e, stream));
        REQUIRE_OK(cuStreamSynchronize(stream));
        wrong += memcmp(src, dst, N) != 0;
    }
    CHECK_MSG(wrong == 0, "%d %s replays copied wrongly", wrong, what);
    CHECK_MSG(atomic_load(&ticks) - ticks_before == replays, "%s ordinary node ran %d times", what,
          atomic_load(&ticks) - ticks_before);
    REQUIRE_OK(cuGraphExecDestroy(e));
    uint64_t live = live_after_drain(base);
    CHECK_MSG(live == base, "%llu %s calls alive after the graph was destroyed",
          (unsigned long long)(live - base), what);
}

static void capture(void)
{
    capture_with(cuLaunchHostFunc, 100, "captured");
}

static void capture_bindings(void)
{
    const char *path = getenv("HC_E2E_BINDINGS_MODULE");
    void *mod = path ? dlopen(path, RTLD_NOW) : NULL;
    launch_fn launch = mod ? (launch_fn)dlsym(mod, "fake_bindings_launch") : NULL;
    CHECK_MSG(launch != NULL, "no cuda.bindings stand-in (HC_E2E_BINDINGS_MODULE=%s)",
          path ? path : "");
    if (launch)
        capture_with(launch, 5, "wrapped");
}

/* ---- fork while a graph is launched ---------------------------------------- */
static atomic_int stop_launching;
static CUgraphExec fork_exec;

static void *launch_loop(void *ctx)
{
    CUstream s;
    REQUIRE_OK(cuCtxSetCurrent(ctx));
    REQUIRE_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; !atomic_load(&stop_launching); i++) {
        REQUIRE_OK(cuGraphLaunch(fork_exec, s));
        if (i % 64 == 63)
            REQUIRE_OK(cuStreamSynchronize(s));
    }
    REQUIRE_OK(cuStreamSynchronize(s));
    REQUIRE_OK(cuStreamDestroy(s));
    return NULL;
}

static void fork_launch(void)
{
    enum { FORKS = 200 };
    test_watchdog(90); /* a deadlock in fork is reported, not left to the timeout */
    CUgraph g;
    CUgraphNode a;
    CUDA_HOST_NODE_PARAMS pt = {tick, NULL};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&a, g, NULL, 0, &pt));
    REQUIRE_OK(cuGraphInstantiate(&fork_exec, g, 0));
    pthread_t t;
    CUcontext ctx;
    REQUIRE_OK(cuCtxGetCurrent(&ctx));
    REQUIRE(pthread_create(&t, NULL, launch_loop, ctx) == 0);
    int failed = 0;
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    }
    atomic_store(&stop_launching, 1);
    pthread_join(t, NULL);
    CHECK_MSG(failed == 0, "%d of %d forks failed", failed, FORKS);
    CHECK_MSG(atomic_load(&ticks) > 0, "the graph never ran");
    printf("%d forks while launching %d graph replays\n", FORKS, atomic_load(&ticks));
    REQUIRE_OK(cuGraphExecDestroy(fork_exec));
    REQUIRE_OK(cuGraphDestroy(g));
}

/* Every graph is gone: so is everything hcguard kept for them. */
static void none_alive(void)
{
    uint64_t live = live_after_drain(0);
    CHECK_MSG(live == 0, "%llu graph calls alive at exit", (unsigned long long)live);
}

/* ---- flood ------------------------------------------------------------- */
/* Graph replays are not held back by flow control (README): a graph of 64
 * host nodes launched REPLAYS times without a pause may fill a ring faster
 * than the collector drains it. Every run is still counted, each once,
 * whatever was dropped. */
static void flood(int argc, char **argv)
{
    enum { NODES = 64 };
    (void)argc;
    const int REPLAYS = atoi(argv[0]);
    REQUIRE(REPLAYS > 0);
    CUgraph g;
    CUgraphExec e;
    CUgraphNode prev = NULL, n;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS pt = {tick, NULL};
    for (int i = 0; i < NODES; i++) {
        REQUIRE_OK(cuGraphAddHostNode(&n, g, prev ? &prev : NULL, prev ? 1 : 0, &pt));
        prev = n;
    }
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    hcguard_stats before = stats();
    for (int i = 0; i < REPLAYS; i++)
        REQUIRE_OK(cuGraphLaunch(e, stream));
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(atomic_load(&ticks) == REPLAYS * NODES, "ran %d", atomic_load(&ticks));
    hcguard_stats s = stats();
    CHECK_MSG(s.host_fns_ran - before.host_fns_ran == (uint64_t)REPLAYS * NODES,
              "hcguard counted %llu runs, want %d (%llu events dropped)",
              (unsigned long long)(s.host_fns_ran - before.host_fns_ran), REPLAYS * NODES,
              (unsigned long long)(s.events_dropped - before.events_dropped));
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO("replay", replay),
    CHECK_SCENARIO("bad", bad),
    CHECK_SCENARIO("getparams", getparams),
    CHECK_SCENARIO("lifetime", lifetime),
    CHECK_SCENARIO("capture", capture),
    CHECK_SCENARIO("capture-bindings", capture_bindings),
    CHECK_SCENARIO("fork-launch", fork_launch),
    CHECK_SCENARIO_ARGS("flood", flood, 1, 1, "REPLAYS"),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_graph", "graph %s", CHECK_CASES(scenarios), argc, argv,
                               setup, none_alive);
}
