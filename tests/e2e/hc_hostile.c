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
 *   hc_hostile launch-in-hostfn    a host function that launches a graph
 *   hc_hostile closures N          N distinct host functions in anonymous
 *                                  memory (closure findings)
 *
 * The set-params floods print the maximum resident set size at 10% and at
 * 100% of the calls, and check that every call hcguard made is freed once
 * the graphs are gone (hcguard_stats.graph_calls_live back to where it
 * was). Bounds on memory are asserted by the test that runs them.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static CUresult inner_result = CUDA_SUCCESS;

static void CUDA_CB launches_graph(void *arg)
{
    (void)arg;
    inner_result = cuGraphLaunch(inner_exec, stream);
}

/* cuGraphLaunch, wrapped by hcguard, is still a call hcguard sees inside a
 * host function. */
static void launch_in_hostfn(void)
{
    CUgraph g;
    CUgraphNode node;
    CUDA_HOST_NODE_PARAMS p = {copy_fn(), &rec};
    REQUIRE_OK(cuGraphCreate(&g, 0));
    REQUIRE_OK(cuGraphAddHostNode(&node, g, NULL, 0, &p));
    REQUIRE_OK(cuGraphInstantiate(&inner_exec, g, 0));
    REQUIRE_OK(cuLaunchHostFunc(stream, launches_graph, NULL));
    REQUIRE_OK(cuStreamSynchronize(stream));
    printf("cuGraphLaunch inside a host function returned %d\n", (int)inner_result);
    REQUIRE_OK(cuGraphExecDestroy(inner_exec));
    REQUIRE_OK(cuGraphDestroy(g));
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
    CHECK_SCENARIO_ARGS("closures", s_closures, 0, 1, "[N]"),
    CHECK_SCENARIO("good", good),
};

int main(int argc, char **argv)
{
    return check_scenario_main("hc_hostile", "%s", CHECK_CASES(scenarios), argc, argv, setup,
                               drain);
}
