/*
 * Hostile programs, run under the preloaded libhcguard on the test driver
 * (and, labelled gpu, on the real one):
 *
 *   hc_hostile setparams-graph N   N set-params on one graph's host node
 *   hc_hostile setparams-exec N    N set-params on one executable graph's
 *                                  node, a launch after every 7th
 *   hc_hostile reuse-fd2 FILE      closes fd 2, opens FILE (it gets fd 2),
 *                                  makes hcguard report, and checks FILE
 *   hc_hostile flood N             N bad host-copy records, each refused
 *   hc_hostile good                one good host copy (for output files)
 *   hc_hostile many-execs N        N executable graphs alive at once, each
 *                                  set and launched, then all destroyed
 *   hc_hostile launch-in-hostfn    a host function that launches a graph,
 *                                  begins and ends a capture
 *   hc_hostile graph-api-in-hostfn a host function that calls each graph
 *                                  entry point hcguard wraps, and prints
 *                                  what each returned
 *   hc_hostile closures N          N distinct host functions in anonymous
 *                                  memory (closure findings)
 *   hc_hostile closefrom DIR [MOVE [LOCK]]
 *                                  after some launches, closes every fd
 *                                  above 2 (closefrom(3)), renames MOVE
 *                                  away if given (not "-"), locks the file
 *                                  LOCK (flock) if given, as another
 *                                  process taking hcguard's trace would,
 *                                  opens 16 data files
 *                                  DIR/data<i> (kept open to the end),
 *                                  then a bad launch and 100 good ones
 *   hc_hostile cancel-msg FILE     a thread cancelled while hcguard writes
 *                                  its message to a full stderr pipe; then
 *                                  a rejection of the main thread (results
 *                                  in FILE: stdout and stderr are the pipe)
 *   hc_hostile cancel-flow         a thread cancelled before it makes 120
 *                                  launches behind a host function that
 *                                  does not return: the launches wait in
 *                                  hcguard's flow control
 *
 * The set-params floods print the maximum resident set size at 10% and at
 * 100% of the calls, and check that every call hcguard made is freed once
 * the graphs are gone (hcguard_stats.graph_calls_live back to where it
 * was). Bounds on memory are asserted by the test that runs them.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

static CUstream stream;
static unsigned char src[256], dst[256];
static hcguard_copy_record rec = {0, 0, 64};

static hcguard_stats stats(void)
{
    return test_stats((test_stats_fn)dlsym(RTLD_DEFAULT, "hcguard_get_stats"));
}

static CUhostFn copy_fn(void)
{
    return test_copy_fn(NULL);
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* graph calls alive once the driver has run what it holds */
static uint64_t live_now(void)
{
    cuCtxSynchronize();
    uint64_t live = stats().graph_calls_live;
    for (int i = 0; i < 400 && live; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        live = stats().graph_calls_live;
    }
    return live;
}

/* The driver runs user-object destructors on its own thread, later: let it
 * catch up now and then, so that its backlog is not taken for hcguard's. */
static void let_destructors_run(uint64_t want)
{
    for (int i = 0; i < 200 && stats().graph_calls_live > want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void report_rss(long n, long i, long *at10)
{
    if (i == n / 10)
        *at10 = max_rss_kib();
}

/* A graph of one host node of p: what a set-params flood sets again. */
static void one_host_node(CUgraph *g, CUgraphNode *node, const CUDA_HOST_NODE_PARAMS *p)
{
    REQUIRE_OK(cuGraphCreate(g, 0));
    REQUIRE_OK(cuGraphAddHostNode(node, *g, NULL, 0, p));
}

/* The end of a set-params flood: what it cost (for check_hostile.py), the
 * graphs destroyed, and every graph call hcguard kept for them gone too. */
static void flood_done(const char *what, long n, long at10, uint64_t base, CUgraph g,
                       CUgraphExec e)
{
    printf("%s: %ld calls, max RSS %ld KiB at 10%%, %ld KiB at 100%%; %llu graph calls alive\n",
           what, n, at10, max_rss_kib(), (unsigned long long)(stats().graph_calls_live - base));
    REQUIRE_OK(cuGraphExecDestroy(e));
    REQUIRE_OK(cuGraphDestroy(g));
    uint64_t live = live_now();
    CHECK_MSG(live == base, "%llu graph calls alive after the graphs went (was %llu)",
          (unsigned long long)live, (unsigned long long)base);
}

static void setparams_graph(long n)
{
    uint64_t base = live_now();
    CUgraph g;
    CUgraphNode node;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec};
    one_host_node(&g, &node, &p);
    long at10 = 0;
    for (long i = 0; i < n; i++) {
        report_rss(n, i, &at10);
        REQUIRE_OK(cuGraphHostNodeSetParams(node, &p));
        if (i % 4096 == 0)
            let_destructors_run(base + 3); /* the root, the exec's, the current */
        if (i == n / 20) { /* one executable graph keeps the call of its day */
            REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
            REQUIRE_OK(cuGraphLaunch(e, stream));
        }
    }
    REQUIRE_OK(cuGraphLaunch(e, stream));
    REQUIRE_OK(cuStreamSynchronize(stream));
    flood_done("setparams-graph", n, at10, base, g, e);
}

static void setparams_exec(long n)
{
    uint64_t base = live_now();
    CUgraph g;
    CUgraphNode node;
    CUgraphExec e;
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec};
    one_host_node(&g, &node, &p);
    REQUIRE_OK(cuGraphInstantiate(&e, g, 0));
    long at10 = 0;
    for (long i = 0; i < n; i++) {
        report_rss(n, i, &at10);
        REQUIRE_OK(cuGraphExecHostNodeSetParams(e, node, &p));
        if (i % 7 == 0)
            REQUIRE_OK(cuGraphLaunch(e, stream));
        if (i % 4096 == 0)
            REQUIRE_OK(cuStreamSynchronize(stream));
    }
    REQUIRE_OK(cuStreamSynchronize(stream));
    flood_done("setparams-exec", n, at10, base, g, e);
}

static void bad_launch(void)
{
    hcguard_copy_record bad = {(uintptr_t)dst, (uintptr_t)dst + 8, 64}; /* overlap */
    CUresult r = cuLaunchHostFunc(stream, copy_fn(), &bad);
    CHECK_MSG(r == CUDA_ERROR_INVALID_VALUE, "a bad record was not refused (%d)", (int)r);
}

static void reuse_fd2(const char *path)
{
    close(2);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK_MSG(fd == 2, "the data file got fd %d, not 2", fd);
    const char data[] = "the program's own data\n";
    CHECK_MSG(write(fd, data, sizeof data - 1) == (ssize_t)(sizeof data - 1), "write");
    bad_launch();
    REQUIRE_OK(cuStreamSynchronize(stream));
    char text[4096] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    CHECK_MSG(strcmp(text, data) == 0, "the data file holds more than the program wrote: %s", text);
    /* fd 1 to report: stderr is the data file now */
    printf("data file: %zd bytes, %s\n", n, strstr(text, "==hcguard==") ? "hcguard's lines in it"
                                                                        : "only the program's");
}

static void many_execs(long n)
{
    uint64_t base = live_now();
    CUgraph g;
    CUgraphNode node;
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec};
    CUgraphExec *e = calloc((size_t)n, sizeof *e);
    CHECK_MSG(e != NULL, "calloc");
    if (!e)
        return;
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&node, g, NULL, 0, &p));
    for (long i = 0; i < n; i++) {
        REQUIRE_OK(cuGraphInstantiate(&e[i], g, 0));
        REQUIRE_OK(cuGraphExecHostNodeSetParams(e[i], node, &p));
        REQUIRE_OK(cuGraphLaunch(e[i], stream));
        REQUIRE_OK(cuGraphExecHostNodeSetParams(e[i], node, &p)); /* retired: launched since */
    }
    REQUIRE_OK(cuStreamSynchronize(stream));
    for (long i = 0; i < n; i++)
        REQUIRE_OK(cuGraphLaunch(e[i], stream)); /* frees what each retired */
    REQUIRE_OK(cuStreamSynchronize(stream));
    printf("many-execs: %ld executable graphs, %llu graph calls alive\n", n,
           (unsigned long long)(stats().graph_calls_live - base));
    for (long i = 0; i < n; i++)
        REQUIRE_OK(cuGraphExecDestroy(e[i]));
    REQUIRE_OK(cuGraphDestroy(g));
    free(e);
    uint64_t live = live_now();
    CHECK_MSG(live == base, "%llu graph calls alive after the graphs went (was %llu)",
          (unsigned long long)live, (unsigned long long)base);
}

static CUgraphExec inner_exec;
static CUstream side, doomed;
static CUresult inner_result = CUDA_SUCCESS, begin_result, end_result, destroy_result;

static void CUDA_CB launches_graph(void *arg)
{
    (void)arg;
    CUgraph g;
    inner_result = cuGraphLaunch(inner_exec, stream);
    begin_result = cuStreamBeginCapture(side, CU_STREAM_CAPTURE_MODE_RELAXED);
    end_result = cuStreamEndCapture(side, &g);
    destroy_result = cuStreamDestroy(doomed);
}

/* cuGraphLaunch, cuStreamBeginCapture, cuStreamEndCapture and
 * cuStreamDestroy, wrapped by hcguard, are still calls hcguard sees inside
 * a host function; in a process that has captured before (its captures'
 * lock in use). */
static void launch_in_hostfn(void)
{
    CUgraph g;
    CUgraphNode node;
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec};
    REQUIRE_OK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamCreate(&doomed, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuStreamBeginCapture(side, CU_STREAM_CAPTURE_MODE_RELAXED));
    REQUIRE_OK(cuStreamEndCapture(side, &g));
    REQUIRE_OK(cuGraphDestroy(g));
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&node, g, NULL, 0, &p));
    REQUIRE_OK(cuGraphInstantiate(&inner_exec, g, 0));
    REQUIRE_OK(cuLaunchHostFunc(stream, launches_graph, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    printf("cuGraphLaunch inside a host function returned %d\n", (int)inner_result);
    printf("cuStreamBeginCapture inside a host function returned %d\n", (int)begin_result);
    printf("cuStreamEndCapture inside a host function returned %d\n", (int)end_result);
    printf("cuStreamDestroy inside a host function returned %d\n", (int)destroy_result);
    REQUIRE_OK(cuStreamDestroy(doomed)); /* still there: the call was refused */
    REQUIRE_OK(cuGraphExecDestroy(inner_exec));
    REQUIRE_OK(cuGraphDestroy(g));
    /* The driver frees the node's call later, on its own thread: before
     * the exit's leak check. */
    CHECK_EQ(live_now(), 0ull);
}

/* Every graph entry point hcguard wraps, called inside a host function
 * on objects made for it (destroyed last: in audit mode the calls reach
 * the driver), each printed as the entry point the program binds to
 * (cuda.h renames some). */
static CUgraph api_g;
static CUgraphNode api_n;
static CUgraphExec api_e;
#define CALLED(name, call)                                                     \
    printf("%s inside a host function returned %d\n", name, (int)(call))

static CUstream api_s;
static CUevent api_ev;

/* name's entry point at version (flags: per-thread variant), or says why
 * not; 1 if found. */
static int proc(const char *name, int version, cuuint64_t flags, void **fn)
{
    CUdriverProcAddressQueryResult found;
    *fn = NULL;
    if (cuGetProcAddress(name, fn, version, flags, &found) == CUDA_SUCCESS && *fn)
        return 1;
    printf("%s at %d: not in this driver\n", name, version);
    return 0;
}

static void CUDA_CB calls_graph_api(void *arg)
{
    (void)arg;
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec}, q;
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = {copy_fn(), &rec}}, nq;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {0};
    CUgraphExecUpdateResultInfo info;
    CUgraphNode n;
    CUgraphExec e;
    CALLED("cuGraphAddHostNode", cuGraphAddHostNode(&n, api_g, NULL, 0, &p));
    CALLED("cuGraphAddNode_v2", cuGraphAddNode(&n, api_g, NULL, NULL, 0, &np));
    CALLED("cuGraphHostNodeSetParams", cuGraphHostNodeSetParams(api_n, &p));
    CALLED("cuGraphNodeSetParams", cuGraphNodeSetParams(api_n, &np));
    CALLED("cuGraphHostNodeGetParams", cuGraphHostNodeGetParams(api_n, &q));
    /* (CUDA 13.2's: looked up, as cuda.h 13.0 has no prototype.) */
    CUresult (*node_get)(CUgraphNode, CUgraphNodeParams *) = NULL;
    CUdriverProcAddressQueryResult found;
    if (cuGetProcAddress("cuGraphNodeGetParams", (void **)&node_get, 13020,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found) == CUDA_SUCCESS && node_get)
        CALLED("cuGraphNodeGetParams", node_get(api_n, &nq));
    else
        printf("cuGraphNodeGetParams: not in this driver\n");
    CALLED("cuGraphExecHostNodeSetParams", cuGraphExecHostNodeSetParams(api_e, api_n, &p));
    CALLED("cuGraphExecNodeSetParams", cuGraphExecNodeSetParams(api_e, api_n, &np));
    CALLED("cuGraphInstantiateWithFlags", cuGraphInstantiate(&e, api_g, 0));
    CALLED("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams(&e, api_g, &ip));
    CALLED("cuGraphExecUpdate_v2", cuGraphExecUpdate(api_e, api_g, &info));
    CALLED("cuGraphExecChildGraphNodeSetParams",
           cuGraphExecChildGraphNodeSetParams(api_e, api_n, api_g));
    /* Older versions and per-thread variants, as cudart and the bindings
     * get them (cuGetProcAddress by version, and with the per-thread flag). */
    CUresult (*inst)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
    if (proc("cuGraphInstantiate", 10000, 0, (void **)&inst))
        CALLED("cuGraphInstantiate", inst(&e, api_g, NULL, NULL, 0));
    if (proc("cuGraphInstantiate", 11000, 0, (void **)&inst))
        CALLED("cuGraphInstantiate_v2", inst(&e, api_g, NULL, NULL, 0));
    CUresult (*upd)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
    CUgraphNode err;
    CUgraphExecUpdateResult res;
    if (proc("cuGraphExecUpdate", 10020, 0, (void **)&upd))
        CALLED("cuGraphExecUpdate", upd(api_e, api_g, &err, &res));
    CUresult (*launch)(CUgraphExec, CUstream);
    if (proc("cuGraphLaunch", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
             (void **)&launch))
        CALLED("cuGraphLaunch_ptsz", launch(api_e, NULL));
    CUresult (*end)(CUstream, CUgraph *);
    CUgraph g;
    if (proc("cuStreamEndCapture", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
             (void **)&end))
        CALLED("cuStreamEndCapture_ptsz", end(NULL, &g));
    CALLED("cuStreamWaitEvent", cuStreamWaitEvent(api_s, api_ev, 0));
    CUresult (*wait)(CUstream, CUevent, unsigned int);
    if (proc("cuStreamWaitEvent", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
             (void **)&wait))
        CALLED("cuStreamWaitEvent_ptsz", wait(NULL, api_ev, 0));
    CUresult (*destroy)(CUstream);
    if (proc("cuStreamDestroy", 2000, 0, (void **)&destroy))
        CALLED("cuStreamDestroy", destroy(api_s));
    CALLED("cuGraphDestroyNode", cuGraphDestroyNode(api_n));
    CALLED("cuGraphExecDestroy", cuGraphExecDestroy(api_e));
    CALLED("cuGraphDestroy", cuGraphDestroy(api_g));
}

static void graph_api_in_hostfn(void)
{
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec};
    REQUIRE_OK(cuGraphCreate(&api_g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&api_n, api_g, NULL, 0, &p));
    REQUIRE_OK(cuGraphInstantiate(&api_e, api_g, 0));
    REQUIRE_OK(cuStreamCreate(&api_s, CU_STREAM_NON_BLOCKING));
    REQUIRE_OK(cuEventCreate(&api_ev, CU_EVENT_DISABLE_TIMING));
    REQUIRE_OK(cuEventRecord(api_ev, api_s));
    REQUIRE_OK(cuLaunchHostFunc(stream, calls_graph_api, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    /* Still there: the calls were refused. */
    REQUIRE_OK(cuEventDestroy(api_ev));
    REQUIRE_OK(cuStreamDestroy(api_s));
    REQUIRE_OK(cuGraphExecDestroy(api_e));
    REQUIRE_OK(cuGraphDestroy(api_g));
}

/* n host functions that only return, in anonymous executable memory: what
 * a ctypes or cffi closure looks like to hcguard. */
static void closures(long n)
{
    unsigned char *code = test_closures((size_t)n);
    for (long i = 0; i < n; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, (CUhostFn)(void *)(code + i * 16), NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
}

/* The scenarios' argument: a count, 0 if not given. */
static long count_arg(int argc, char **argv)
{
    return argc > 0 ? atol(argv[0]) : 0;
}

static void s_setparams_graph(int argc, char **argv) { setparams_graph(count_arg(argc, argv)); }
static void s_setparams_exec(int argc, char **argv) { setparams_exec(count_arg(argc, argv)); }
static void s_reuse_fd2(int argc, char **argv) { (void)argc; reuse_fd2(argv[0]); }
static void s_many_execs(int argc, char **argv) { many_execs(count_arg(argc, argv)); }
static void s_closures(int argc, char **argv) { closures(count_arg(argc, argv)); }

static void s_flood(int argc, char **argv)
{
    for (long i = 0, n = count_arg(argc, argv); i < n; i++)
        bad_launch();
}

/* A daemon's start: every descriptor above 2 closed, the program's own
 * files opened, getting the numbers hcguard's had. */
static void closefrom3(int argc, char **argv)
{
    for (int i = 0; i < 20; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn(), &rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
    stats(); /* the log and the trace written, and open */
    closefrom(3);
    if (argc > 1 && strcmp(argv[1], "-") != 0) {
        char moved[4096];
        snprintf(moved, sizeof moved, "%s.moved", argv[1]);
        CHECK_MSG(rename(argv[1], moved) == 0, "rename %s", argv[1]);
    }
    int lock = argc > 2 ? open(argv[2], O_WRONLY | O_CLOEXEC) : -1;
    CHECK_MSG(argc <= 2 || (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0), "lock %s",
              argc > 2 ? argv[2] : "");
    int fds[16];
    for (int i = 0; i < 16; i++) {
        char name[4096];
        snprintf(name, sizeof name, "%s/data%d", argv[0], i);
        fds[i] = open(name, O_CREAT | O_TRUNC | O_RDWR, 0600);
        CHECK_MSG(fds[i] >= 0, "open %s", name);
    }
    bad_launch();
    for (int i = 0; i < 100; i++)
        REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn(), &rec));
    REQUIRE_OK(cuStreamSynchronize(stream));
    stats();
    for (int i = 0; i < 16; i++) /* open to the end: the summary comes after */
        CHECK_MSG(write(fds[i], "DATA\n", 5) == 5, "write data%d", i);
    printf("closefrom: data files on fds %d..%d\n", fds[0], fds[15]);
}

/* ---- cancellation ----------------------------------------------------------- */
static void *fill_stdout(void *arg)
{
    (void)arg;
    static char junk[1 << 17];
    memset(junk, 'x', sizeof junk);
    (void)!write(1, junk, sizeof junk); /* fills the pipe, blocks until it is read */
    return NULL;
}

static void *bad_launcher(void *arg)
{
    (void)arg;
    bad_launch(); /* its message blocks on the full pipe */
    return NULL;
}

static void cancel_msg(const char *path)
{
    FILE *out = fopen(path, "w");
    CHECK_MSG(out != NULL, "fopen %s", path);
    if (!out)
        return;
    pthread_t filler, t;
    pthread_create(&filler, NULL, fill_stdout, NULL);
    usleep(200000);
    pthread_create(&t, NULL, bad_launcher, NULL);
    usleep(300000);
    pthread_cancel(t);
    pthread_join(t, NULL);
    fprintf(out, "cancelled and joined\n");
    fflush(out);
    hcguard_copy_record null_dst = {0, (uintptr_t)src, 32};
    CUresult r = cuLaunchHostFunc(stream, copy_fn(), &null_dst);
    fprintf(out, "main's bad launch returned %d\n", (int)r);
    pthread_join(filler, NULL);
    fclose(out);
}

static atomic_int flow_go, flow_release, flow_launched, flow_cancelled_at = -1;

static void CUDA_CB wait_for_release(void *arg)
{
    (void)arg;
    while (!atomic_load(&flow_release))
        usleep(1000);
}

static void CUDA_CB nothing(void *arg)
{
    (void)arg;
}

static void note_cancel(void *arg)
{
    (void)arg;
    atomic_store(&flow_cancelled_at, atomic_load(&flow_launched));
}

/* Launches that wait in flow control, the cancel request already there:
 * no cancellation point among them (the loop has none of its own), so the
 * thread is cancelled at pthread_testcancel after all of them. */
static void *flow_launcher(void *arg)
{
    (void)arg;
    pthread_cleanup_push(note_cancel, NULL);
    REQUIRE_OK(cuLaunchHostFunc(stream, nothing, NULL)); /* first-time work done */
    REQUIRE_OK(cuStreamSynchronize(stream));
    atomic_store(&flow_launched, 1);
    while (!atomic_load(&flow_go))
        ;
    REQUIRE_OK(cuLaunchHostFunc(stream, wait_for_release, NULL));
    for (int i = 0; i < 120; i++) {
        REQUIRE_OK(cuLaunchHostFunc(stream, nothing, NULL));
        atomic_fetch_add(&flow_launched, 1);
    }
    pthread_testcancel();
    pthread_cleanup_pop(0);
    return NULL;
}

static void cancel_flow(void)
{
    pthread_t t;
    pthread_create(&t, NULL, flow_launcher, NULL);
    while (!atomic_load(&flow_launched))
        usleep(1000);
    pthread_cancel(t);
    atomic_store(&flow_go, 1);
    void *ret = NULL;
    pthread_join(t, &ret);
    atomic_store(&flow_release, 1);
    REQUIRE_OK(cuStreamSynchronize(stream));
    CHECK_MSG(ret == PTHREAD_CANCELED, "the thread was not cancelled");
    printf("cancel-flow: %d launches returned, cancelled after %d\n",
           atomic_load(&flow_launched) - 1, atomic_load(&flow_cancelled_at) - 1);
}

static void s_closefrom(int argc, char **argv) { closefrom3(argc, argv); }
static void s_cancel_msg(int argc, char **argv) { (void)argc; cancel_msg(argv[0]); }

static void good(void)
{
    REQUIRE_OK(cuLaunchHostFunc(stream, copy_fn(), &rec));
}

static void setup(void)
{
    stream = test_context();
    rec.dst = (uintptr_t)dst;
    rec.src = (uintptr_t)src;
}

static void drain(void)
{
    REQUIRE_OK(cuStreamSynchronize(stream));
}

static const check_scenario scenarios[] = {
    CHECK_SCENARIO_ARGS("setparams-graph", s_setparams_graph, 0, 1, "[N]"),
    CHECK_SCENARIO_ARGS("setparams-exec", s_setparams_exec, 0, 1, "[N]"),
    CHECK_SCENARIO_ARGS("reuse-fd2", s_reuse_fd2, 1, 1, "PATH"),
    CHECK_SCENARIO_ARGS("flood", s_flood, 0, 1, "[N]"),
    CHECK_SCENARIO_ARGS("many-execs", s_many_execs, 0, 1, "[N]"),
    CHECK_SCENARIO("launch-in-hostfn", launch_in_hostfn),
    CHECK_SCENARIO("graph-api-in-hostfn", graph_api_in_hostfn),
    CHECK_SCENARIO_ARGS("closures", s_closures, 0, 1, "[N]"),
    CHECK_SCENARIO("good", good),
    CHECK_SCENARIO_ARGS("closefrom", s_closefrom, 1, 3, "DIR [MOVE [LOCK]]"),
    CHECK_SCENARIO_ARGS("cancel-msg", s_cancel_msg, 1, 1, "FILE"),
    CHECK_SCENARIO("cancel-flow", cancel_flow),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_hostile", "%s", CHECK_CASES(scenarios), argc, argv, setup,
                               drain);
}
