/* Self-test of the test driver: the cases, and the exit with work queued. */
#include "selftest.h"

/* ---- exit with work still queued -------------------------------------- */
static gate g_forever;

static int exit_child(void)
{
    CUcontext c;
    alarm(20); /* a hang at exit fails the parent's check */
    gate_init(&g_forever);
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 2;
    if (cuLaunchHostFunc(NULL, gated, &g_forever) ||
        cuLaunchHostFunc(NULL, record, (void *)1))
        return 3;
    gate_wait_started(&g_forever); /* the callback thread is now stuck */
    return 0;
}

static void test_exit_with_pending_work(void)
{
    char *argv[] = {"fakecuda_selftest", "--exit-with-pending-work", NULL};
    pid_t pid;
    int status = 0;
    double t0 = now_s();
    CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) == 0);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(now_s() - t0 < 10.0);
}

static const check_case cases[] = {
    CHECK_CASE(before_init),
    CHECK_CASE(init_and_context),
    CHECK_CASE(error_names),
    CHECK_CASE(order_and_thread),
    CHECK_CASE(synchronize_waits),
    CHECK_CASE(launch_variants),
    CHECK_CASE(calls_inside_host_fn),
    CHECK_CASE(proc_address),
    CHECK_CASE(exports),
    CHECK_CASE(device_memory),
    CHECK_CASE(host_memory),
    CHECK_CASE(graphs),
    CHECK_CASE(capture),
    CHECK_CASE(graph_params),
    CHECK_CASE(uobj_bad_input),
    CHECK_CASE(uobj_caller_refs),
    CHECK_CASE(uobj_graph),
    CHECK_CASE(uobj_clone),
    CHECK_CASE(uobj_exec),
    CHECK_CASE(uobj_child),
    CHECK_CASE(uobj_capture),
    CHECK_CASE(uobj_queued_launch),
    CHECK_CASE(uobj_update),
    CHECK_CASE(exit_with_pending_work),
    CHECK_CASE(fork_while_locked),
};

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--exit-with-pending-work") == 0)
        return exit_child();
    if (argc > 1 && strcmp(argv[1], "--fork-while-locked") == 0)
        return fork_while_locked_main();
    /* LD_LIBRARY_PATH outranks the run path: on a GPU machine it may name
     * the real driver's directory. This tests the test driver only. */
    Dl_info self;
    if (!dladdr((void *)cuInit, &self) || !self.dli_fname ||
        !strstr(self.dli_fname, "fakecuda")) {
        printf("SKIP: libcuda.so.1 here is %s, not the test driver\n",
               self.dli_fname ? self.dli_fname : "unknown");
        return 77;
    }
    return check_main("fakecuda_selftest", CHECK_CASES(cases), argc, argv);
}

