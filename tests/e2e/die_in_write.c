/* Preloaded (ahead of hcguard) into hc_lost under `hcguard run`: kills the
 * process with SIGKILL right after its Nth write to a file, or halfway
 * through it, as another thread's exit or a SIGKILL can: the moment when a
 * batch of events is in the file and still in the ring.
 *
 *   HCG_DIE_WRITE=PATH:N[:half]
 *   HCG_DIE_WRITE=PATH:@TEXT   after the first write to PATH holding TEXT
 *                              (in which \n stands for a newline)
 *   HCG_DIE_WRITE_EXECED=1     only in an image an exec started (one
 *                              whose environment holds HCGUARD_EXEC)
 *
 * Only in hc_lost: `hcguard run`, preloaded with it too, writes the same
 * file afterwards. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static char path[4096];
static long nth;
static int half;
static const char *mark; /* @TEXT */
static atomic_long writes;

__attribute__((constructor)) static void init(void)
{
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *spec = getenv("HCG_DIE_WRITE");
    if (!spec || strcmp(program_invocation_short_name, "hc_lost") != 0)
        return;
    if (getenv("HCG_DIE_WRITE_EXECED") && !getenv("HCGUARD_EXEC"))
        return;
    snprintf(path, sizeof path, "%s", spec);
    char *c = strchr(path, ':');
    if (!c) {
        fprintf(stderr, "die_in_write: HCG_DIE_WRITE=%s: want PATH:N[:half]\n", spec);
        abort();
    }
    *c++ = 0;
    if (*c == '@') {
        char *to = c;
        mark = to;
        for (const char *from = c + 1; *from; from++)
            if (from[0] == '\\' && from[1] == 'n') {
                *to++ = '\n';
                from++;
            } else {
                *to++ = *from;
            }
        *to = 0;
        return;
    }
    nth = strtol(c, &c, 10);
    half = !strcmp(c, ":half");
}

static int the_file(int fd)
{
    struct stat a, b;
    return path[0] && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (!real_write) {
        errno = ENOSYS;
        return -1;
    }
    if (!the_file(fd))
        return real_write(fd, buf, n);
    if (mark ? !memmem(buf, n, mark, strlen(mark)) : atomic_fetch_add(&writes, 1) + 1 != nth)
        return real_write(fd, buf, n);
    real_write(fd, buf, half ? n / 2 : n);
    kill(getpid(), SIGKILL);
    pause();
    return -1;
}
