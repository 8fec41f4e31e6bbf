/* hcguard's own descriptors inside the program: which file each one is, so
 * that one the program closed and whose number it reused is never written;
 * and writes to them that neither raise SIGPIPE in the program nor let a
 * cancellation request act (a lock held around them would stay held). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

int hcg_fileid_of(int fd, hcg_fileid *id)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        id->dev = 0;
        id->ino = 0;
        return -1;
    }
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return 0;
}

int hcg_fileid_is(int fd, const hcg_fileid *id)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino &&
           (id->dev || id->ino);
}

int hcg_fileid_same(int a, int b)
{
    hcg_fileid id;
    return hcg_fileid_of(b, &id) == 0 && hcg_fileid_is(a, &id);
}

int hcg_path_is(const char *path, const hcg_fileid *id)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == id->dev &&
           st.st_ino == id->ino && (id->dev || id->ino);
}

int hcg_reopen_same(const char *path, const hcg_fileid *id)
{
    int old = hcg_nocancel_begin();
    /* As hcg_open_output_why opens an existing file: no link followed, nothing
     * that could block; then only the very file that was there before. */
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0 && !hcg_fileid_is(fd, id)) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    hcg_nocancel_end(old);
    return fd;
}

/* Not in POSIX's list of async-signal-safe functions, but glibc's only
 * changes a word of the thread's own: the signal paths use it too. */
int hcg_nocancel_begin(void)
{
    int old = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}

void hcg_nocancel_end(int old)
{
    if (old != PTHREAD_CANCEL_DISABLE)
        pthread_setcancelstate(old, NULL);
}

/* SIGPIPE for a write to a pipe nobody reads is the writer's: hcguard's
 * must not kill the program (exit status 141) nor reach its handler. Held
 * back around the write; one the write raised is taken off again, unless
 * one was pending already (the program's, left to it). Every call here is
 * async-signal-safe: messages are written from signal handlers too. */
int hcg_write_all(int fd, const void *buf, size_t n)
{
    return hcg_write_all_done(fd, buf, n, NULL);
}

int hcg_write_all_done(int fd, const void *buf, size_t n, size_t *done)
{
    if (done)
        *done = 0;
    if (fd < 0)
        return EBADF;
    int saved_errno = errno, err = 0, cancel = hcg_nocancel_begin();
    sigset_t pipe_set, xfsz_set, both, old_mask, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    /* SIGXFSZ likewise: a write past RLIMIT_FSIZE (the log, the trace, the
     * --log-file report) fails with EFBIG, and its signal, whose default
     * action kills the process, is hcguard's, not the program's. */
    sigemptyset(&xfsz_set);
    sigaddset(&xfsz_set, SIGXFSZ);
    both = pipe_set;
    sigaddset(&both, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &both, &old_mask);
    int got = sigpending(&pending) == 0;
    int was_pending = got && sigismember(&pending, SIGPIPE) == 1;
    int xfsz_was_pending = got && sigismember(&pending, SIGXFSZ) == 1;
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        p += w;
        n -= (size_t)w;
        if (done)
            *done += (size_t)w;
    }
    if (err == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    if (err == EFBIG && !xfsz_was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&xfsz_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    hcg_nocancel_end(cancel);
    errno = saved_errno;
    return err;
}
