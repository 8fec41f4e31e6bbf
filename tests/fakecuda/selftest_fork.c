/* Self-test: fork while another thread is inside the driver, before any
 * host function was launched. The child must find the driver's lock free
 * (its pthread_atfork handlers make it so), however early in the process
 * the fork comes. Run in a process of its own ("--fork-while-locked"), so
 * that no earlier case has launched anything. */
#include "selftest.h"

static char fifo[PATH_MAX];
static CUgraph graph;
static atomic_int holder_tid, main_tid, forking, released;
static atomic_int dot_result = -1; /* the holder's CUresult, once it has one */

/* 'S' when thread tid sleeps (a blocking call), as /proc says. */
static char thread_state(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the name may hold anything */
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* Waits (up to 10 s) until thread tid sleeps; 0 once it does. */
static int wait_asleep(int tid)
{
    for (int i = 0; i < 10000; i++) {
        if (thread_state(tid) == 'S')
            return 0;
        sleep_ms(1);
    }
    return -1;
}

/* The driver's lock is held while the graph is written out: writing it to
 * a FIFO blocks in the open, with the lock held, until a reader comes. */
static void *holder(void *arg)
{
    (void)arg;
    atomic_store(&holder_tid, (int)gettid());
    atomic_store(&dot_result, (int)cuGraphDebugDotPrint(graph, fifo, 0));
    return NULL;
}

/* The reader comes once the forking thread sleeps: in the driver's fork
 * handler, waiting for the lock (then the fork comes after the holder
 * leaves the driver), or, with no handler, in waitpid after the fork. */
static void *releaser(void *arg)
{
    (void)arg;
    while (!atomic_load(&forking))
        sleep_ms(1);
    wait_asleep(atomic_load(&main_tid));
    int fd = open(fifo, O_RDONLY);
    char buf[256];
    while (fd >= 0 && read(fd, buf, sizeof buf) > 0)
        ;
    if (fd >= 0)
        close(fd);
    atomic_store(&released, 1);
    return NULL;
}

/* The child: calls that take the driver's lock, then a launch and a wait
 * (not under ThreadSanitizer, which cannot follow the callback thread a
 * child of a multi-threaded process starts). */
static int child(void)
{
    alarm(5); /* the driver's lock held for ever: killed, the parent fails */
    if (cuStreamQuery(NULL) || cuCtxSynchronize())
        return 1;
#if !defined(__SANITIZE_THREAD__)
    runs_reset();
    if (cuLaunchHostFunc(NULL, record, (void *)7) || cuStreamSynchronize(NULL))
        return 1;
    return runs_are((const intptr_t[]){7}, 1) ? 0 : 1;
#else
    return 0;
#endif
}

/* Detached: a child copies no thread of the parent's to be joined (which
 * ThreadSanitizer would report as leaked at the child's exit). */
static int start_detached(void *(*fn)(void *))
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, fn, NULL);
    pthread_attr_destroy(&a);
    return rc;
}

/* The fork while the holder is inside the driver; its exit code, 0 if
 * the child could use the driver. */
static int fork_child_of(void)
{
    if (start_detached(holder) != 0)
        return 10;
    while (!atomic_load(&holder_tid))
        sleep_ms(1);
    if (wait_asleep(atomic_load(&holder_tid)) != 0 || start_detached(releaser) != 0)
        return 11;
    atomic_store(&forking, 1);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int status = 0;
    int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    for (int i = 0; i < 10000 && (!atomic_load(&released) || atomic_load(&dot_result) < 0); i++)
        sleep_ms(1);
    if (!waited || atomic_load(&dot_result) != CUDA_SUCCESS)
        return 12;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 13;
}

int fork_while_locked_main(void)
{
    CUcontext c;
    alarm(20); /* a hang in the fork itself fails the case too */
    atomic_store(&main_tid, (int)gettid());
    const char *tmp = getenv("TMPDIR");
    snprintf(fifo, sizeof fifo, "%s/fakecuda_fork.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) ||
        cuGraphCreate(&graph, 0) || mkfifo(fifo, 0600) != 0)
        return 2;
    int rc = fork_child_of();
    unlink(fifo);
    return rc;
}

void test_fork_while_locked(void)
{
    char *argv[] = {"fakecuda_selftest", "--fork-while-locked", NULL};
    pid_t pid;
    int status = 0;
    CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) == 0);
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "fork while locked: %s %d\n",
                WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
