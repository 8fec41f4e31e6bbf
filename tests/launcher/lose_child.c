/* Preloaded into the launcher: waitpid reaps the child, then says it has
 * none (ECHILD), as when something else in the process reaped it. The
 * launcher must say so, never make up how the program ended. (_GNU_SOURCE,
 * for RTLD_NEXT, comes from the build.) */
#include <dlfcn.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/wait.h>

pid_t waitpid(pid_t pid, int *status, int options)
{
    pid_t (*real)(pid_t, int *, int) = (pid_t(*)(pid_t, int *, int))dlsym(RTLD_NEXT, "waitpid");
    int st;
    pid_t r = real(pid, &st, options);
    if (r <= 0)
        return r;
    (void)status;
    errno = ECHILD;
    return -1;
}
