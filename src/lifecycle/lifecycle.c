/* exec and fatal signals: what hcguard holds in memory is written out
 * before the process image goes.
 *
 * exec: the exec family is interposed. Before the real call, the collector
 * is stopped (draining every ring), the log and the trace are written out,
 * and the summary of this image is printed if it did anything; the new
 * image gets HCGUARD_EXEC (see src/base/outfile.c) in its environment, so that
 * it appends to the same log and continues the same trace instead of
 * starting them anew. From then until the exec, no thread writes to the
 * files (one cut off by the exec would leave half an event). If exec
 * fails, the collector starts again and the program goes on as before. posix_spawn and posix_spawnp pass the variable
 * too: the new process, another pid, shares the files like a fork child.
 *
 * Fatal signals: hcg_lifecycle_flush_from_signal() is the hook for the
 * chained signal handlers (src/check/fault.c) to call. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lifecycle/lifecycle.h"

extern char **environ;

/* More than one process shares stderr (the messages' prefix gives the pid):
 * both sides of a fork, and a process started by one running hcguard that
 * had it (the variable is hcguard's mark; its value is not used). Set up
 * when the library is loaded, so that a fork before the first launch
 * counts too. Its own pthread_atfork, registered when the library is
 * loaded: the module hooks (base/fork.c) run only once hcguard has called
 * hcg_fork_register, before it first holds a lock. */
static void forked(void)
{
    hcg_report_set_shared();
}

/* A process tree forked before hcguard started (base.h: hcg_output_tree):
 * memory alone here. The child's handler runs before the module hooks
 * (registered later) make it a child that has not started: it still sees
 * its parent's start. */
static void fork_prepare(void)
{
    hcg_output_fork_prepare(hcg_start_begun());
}

static void forked_child(void)
{
    hcg_output_fork_child(hcg_start_begun());
    forked();
}

__attribute__((constructor)) static void watch_forks(void)
{
    if (getenv(HCG_SHARED_STDERR_VAR))
        hcg_report_set_shared();
    pthread_atfork(fork_prepare, forked, forked_child);
}

/* An array of n pointers, or NULL. Mapped, not malloc'd: exec may be
 * called where malloc may not (a child of _Fork or of vfork, whose
 * allocator's locks another thread may hold); given back by ptrs_free. */
static char **ptrs_new(size_t n)
{
    size_t bytes = (n + 1) * sizeof(char *);
    char **map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    map[0] = (char *)(uintptr_t)bytes;
    return map + 1;
}

static void ptrs_free(char **p)
{
    if (p)
        munmap(p - 1, (size_t)(uintptr_t)p[-1]);
}

/* envp with HCGUARD_EXEC=var in place of any it had, and
 * HCG_SHARED_STDERR_VAR when more than one process shares stderr (shared:
 * a spawned child, or this process once it has forked or spawned); NULL if
 * out of memory (then envp is passed as it is). */
static char **with_exec_var(char *const envp[], const char *var, int shared)
{
    static const size_t mark_len = sizeof HCG_SHARED_STDERR_VAR - 1;
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char **out = ptrs_new(n + 3);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], "HCGUARD_EXEC=", 13) != 0 &&
            (strncmp(envp[i], HCG_SHARED_STDERR_VAR, mark_len) != 0 || envp[i][mark_len] != '='))
            out[k++] = envp[i];
    out[k++] = (char *)var;
    if (shared)
        out[k++] = (char *)HCG_SHARED_STDERR_VAR "=1";
    out[k] = NULL;
    return out;
}

static void env_free(char **env)
{
    ptrs_free(env);
}

/* What this process hands its next image (or a spawned child). In a
 * child of vfork or _Fork (hcg_fork_foreign) the files are its parent's,
 * which goes on writing them: the new image takes them as it would after
 * fork and exec (appends to a shared log, writes no trace of its own
 * unless the name has %p, starts what the parent had not opened), never
 * continuing or closing one as its own. Written into the caller's buf (a
 * vfork child shares the parent's statics with it). */
static const char *make_exec_var(char *buf, size_t len)
{
    char states[HCG_SINK_SLOTS];
    memset(states, '-', sizeof states); /* '-': no file to continue */
    hcg_sinks_exec_states(states, hcg_fork_foreign());
    states[HCG_SINK_REPORT] = hcg_report_exec_state();
    int n = snprintf(buf, len, "HCGUARD_EXEC=%d:%c%c%c", (int)getpid(), states[0], states[1],
                     states[2]);
    /* A child of vfork (no fork handler ran) of a process that had not
     * started: a tree, as a fork makes (the parent shares this memory). */
    if (hcg_fork_foreign())
        hcg_output_fork_prepare(hcg_start_begun());
    /* A process that started passes on no token: its log is open, and its
     * descendants append to it ('c'). */
    uint64_t tree = hcg_start_begun() ? 0 : hcg_output_tree();
    if (tree && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ":t%016" PRIx64, tree);
    return buf;
}

/* Before the image goes: everything written out. Returns whether the
 * collector ran (to start it again if exec fails). A child of vfork or
 * _Fork leaves it all to its parent: stopping the collector there would
 * stop the parent's (vfork shares its memory), and the summary and the
 * flight record are the parent's. */
static int before_exec(void)
{
    if (!atomic_load(&hcg_g_started) || hcg_fork_foreign())
        return 0;
    hcg_copy_pool_stop(0);
    hcg_pool_exec_window(1);
    hcg_collector_stop();
    hcg_events_flush_files();
    hcg_events_seal_files();
    hcg_lifecycle_exec_summary();
    hcg_flight_finished(1); /* written out; the next image starts the record afresh */
    return 1;
}

/* Around each exec: exec_begin before it (returns the environment to
 * pass), exec_end after it failed (returns -1, errno kept). */
typedef struct exec_prep {
    int running; /* the collector ran: started again if exec fails */
    char **env;
    char var[64];
} exec_prep;

static char *const *exec_begin(exec_prep *p, char *const envp[])
{
    p->running = before_exec();
    p->env = with_exec_var(envp, make_exec_var(p->var, sizeof p->var),
                           hcg_report_shared() || hcg_fork_foreign());
    return p->env ? p->env : envp;
}

static int exec_end(exec_prep *p)
{
    int err = errno;
    env_free(p->env);
    if (p->running) {
        hcg_flight_finished(0);
        hcg_events_unseal_files();
        hcg_collector_resume();
        hcg_pool_exec_window(0);
    }
    errno = err;
    return -1;
}

/* An exec that execve would refuse before anything changes fails here
 * first, with execve's errno, as execve would at the time of this look:
 * nothing is stopped or written for it, so that a program that tries one
 * path after another (Python's os.execvp, a shell's PATH search) does not
 * print a summary at each. Refused: a name that resolves to nothing
 * (ENOENT, ENOTDIR), a directory on the way the caller may not search, a
 * file that is not a regular file, or one it may not execute (EACCES,
 * also for a file system mounted noexec). A file that may run goes the
 * whole way, whatever the exec then says (ENOEXEC, a missing #!
 * interpreter, ETXTBSY, ...); so does any error the look cannot be sure
 * of. Returns the errno, or 0. */
static int exec_refused(const char *path)
{
    struct stat st;
    if (!path[0])
        return ENOENT;
    if (stat(path, &st) != 0) /* the effective ids, as execve resolves it */
        return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? errno : 0;
    if (!S_ISREG(st.st_mode))
        return EACCES;
    if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) != 0 && errno == EACCES)
        return EACCES;
    return 0;
}

/* execvp's PATH search as glibc makes it (posix/execvpe.c): a PATH entry
 * whose file is missing or refused is passed over, EACCES remembered; when
 * no entry can run it, the search fails with EACCES if any entry said so,
 * else with the last entry's error. A file found early that is refused
 * does not end the search: if any entry's file may run, or says what the
 * look cannot be sure of (which ends glibc's search), libc searches, from
 * the start. Names longer than the buffer go to libc too. */
static int search_refused(const char *file)
{
    const char *path = getenv("PATH"); /* libc's search reads environ's, not envp's */
    if (!path)
        path = "/bin:/usr/bin"; /* glibc's _CS_PATH */
    size_t flen = strlen(file);
    int last = ENOENT, eacces = 0;
    for (const char *p = path;;) {
        char buf[PATH_MAX];
        size_t n = strcspn(p, ":");
        if (n + 1 + flen >= sizeof buf)
            return 0;
        memcpy(buf, p, n);
        buf[n] = '/';
        memcpy(buf + n + (n > 0), file, flen + 1); /* an empty entry: the current directory */
        last = exec_refused(buf);
        if (!last)
            return 0;
        eacces |= last == EACCES;
        if (!p[n])
            break;
        p += n + 1;
    }
    return eacces ? EACCES : last;
}

/* Sets errno and returns 1 if the exec would be refused (see exec_refused).
 * search: execvp's, along PATH for a name without a slash. */
static int exec_refused_early(const char *path, int search)
{
    int err = search && path[0] && !strchr(path, '/') ? search_refused(path) : exec_refused(path);
    if (err)
        errno = err;
    return err != 0;
}

static int do_execve(const char *path, char *const argv[], char *const envp[], int search)
{
    /* libc's own (driver/libc.def): no dlsym, as this may run in a fork
     * child or inside a sanitizer's interceptor. */
    hcg_libc_execve_fn real = search ? HCG_REAL(execvpe) : HCG_REAL(execve);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if (path && exec_refused_early(path, search))
        return -1;
    exec_prep p;
    real(path, argv, exec_begin(&p, envp));
    return exec_end(&p);
}

HCG_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return do_execve(path, argv, envp, 0);
}

HCG_EXPORT int execv(const char *path, char *const argv[])
{
    return do_execve(path, argv, environ, 0);
}

HCG_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    return do_execve(file, argv, envp, 1);
}

HCG_EXPORT int execvp(const char *file, char *const argv[])
{
    return do_execve(file, argv, environ, 1);
}

/* fexecve's file refused as exec_refused refuses a path: not a regular
 * file, or not executable by the caller (EACCES); anything else, a bad fd
 * or argument included, goes to libc. */
static int fd_refused(int fd, char *const argv[], char *const envp[])
{
    struct stat st;
    if (fd < 0 || !argv || !envp || fstat(fd, &st) != 0)
        return 0;
    if (!S_ISREG(st.st_mode) ||
        (faccessat(fd, "", X_OK, AT_EACCESS | AT_EMPTY_PATH) != 0 && errno == EACCES)) {
        errno = EACCES;
        return 1;
    }
    return 0;
}

HCG_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    hcg_libc_fexecve_fn real = HCG_REAL(fexecve);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if (fd_refused(fd, argv, envp))
        return -1;
    exec_prep p;
    real(fd, argv, exec_begin(&p, envp));
    return exec_end(&p);
}

#if __GLIBC_PREREQ(2, 34)
/* execveat (as fexecve, with no look of its own before: the file may be
 * relative to dirfd, or dirfd itself). */
HCG_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                        int flags)
{
    hcg_libc_execveat_fn real = HCG_REAL(execveat);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    exec_prep p;
    real(dirfd, path, argv, exec_begin(&p, envp), flags);
    return exec_end(&p);
}
#endif

/* execl, execlp, execle: the arguments up to the NULL as an array. */
static char **collect_args(const char *arg0, va_list ap, char ***envp_out)
{
    va_list count;
    va_copy(count, ap);
    size_t n = 1;
    while (va_arg(count, char *))
        n++;
    va_end(count);
    char **argv = ptrs_new(n + 1); /* not malloc: see ptrs_new */
    if (!argv)
        return NULL;
    argv[0] = (char *)arg0;
    for (size_t i = 1; i <= n; i++)
        argv[i] = va_arg(ap, char *); /* the last is the NULL */
    if (envp_out)
        *envp_out = va_arg(ap, char **);
    return argv;
}

static int execl_common(const char *path, const char *arg, va_list ap, int with_env, int search)
{
    char **envp = environ;
    char **argv = collect_args(arg, ap, with_env ? &envp : NULL);
    if (!argv) {
        errno = ENOMEM;
        return -1;
    }
    int r = do_execve(path, argv, envp, search);
    int err = errno;
    ptrs_free(argv);
    errno = err;
    return r;
}

HCG_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int r = execl_common(path, arg, ap, 0, 0);
    va_end(ap);
    return r;
}

HCG_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int r = execl_common(file, arg, ap, 0, 1);
    va_end(ap);
    return r;
}

HCG_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int r = execl_common(path, arg, ap, 1, 0);
    va_end(ap);
    return r;
}

static int do_spawn(hcg_libc_posix_spawn_fn real, pid_t *pid, const char *path,
                    const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                    char *const argv[], char *const envp[])
{
    if (!real)
        return ENOSYS;
    /* The child is another process: the files stay this one's, flushed so
     * that the child's lines come after what was written before (by their
     * owner only: see before_exec). */
    char var[64];
    if (atomic_load(&hcg_g_started) && !hcg_fork_foreign())
        hcg_events_flush_files();
    hcg_output_fork_prepare(hcg_start_begun()); /* a tree, as a fork makes */
    char **env = with_exec_var(envp, make_exec_var(var, sizeof var), 1);
    int r = real(pid, path, fa, attr, argv, env ? env : envp);
    env_free(env);
    if (r == 0)
        hcg_report_set_shared(); /* the child writes to the same stderr */
    return r;
}

HCG_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return do_spawn(HCG_REAL(posix_spawn), pid, path, fa, attr, argv, envp);
}

HCG_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return do_spawn(HCG_REAL(posix_spawnp), pid, file, fa, attr, argv, envp);
}

#if __GLIBC_PREREQ(2, 34)
/* _Fork runs no fork handler, and its child would record into its
 * parent's flight record, which is mapped shared: the child's events and
 * counts would be taken for the parent's. The child gets its private copy
 * at once, as a fork child's first hook does (async-signal-safe, as _Fork
 * is meant to be), and otherwise leaves hcguard's state alone
 * (hcg_fork_foreign): what it records stays in its own memory. */
HCG_EXPORT pid_t _Fork(void)
{
    hcg_libc_Fork_fn real = HCG_REAL(Fork);
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    pid_t pid = real();
    if (pid == 0)
        hcg_flight_after_fork();
    return pid;
}
#endif

/* The hook for the chained handlers of fatal signals (src/check/fault.c): the
 * events still in the rings go to the log and the trace, unless this thread
 * was interrupted draining them (another thread's drain is waited for while
 * it makes progress; see hcg_events_flush_from_signal). Takes no lock it
 * would wait on without bound and
 * allocates nothing; the sinks format with snprintf, which glibc does not
 * promise to be async-signal-safe but which allocates nothing for the
 * formats used. The summary is not printed here. */
void hcg_lifecycle_flush_from_signal(void)
{
    if (atomic_load(&hcg_g_started) && !hcg_fork_foreign())
        hcg_events_flush_from_signal();
}
