/* For tests that capture what hcguard says by pointing stderr elsewhere:
 * hcguard writes to its own duplicate of stderr, taken when it is loaded
 * (close-on-exec, above fd 2), so that a program reusing fd 2 never gets
 * its lines. A test that wants them must point that duplicate too: every
 * close-on-exec descriptor above 2 open on the same file as fd 2. */
#ifndef HCG_STDERR_REDIRECT_H
#define HCG_STDERR_REDIRECT_H

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void hcg_test_redirect_stderr(int fd)
{
    struct stat orig, st;
    if (fstat(STDERR_FILENO, &orig) == 0) {
        for (int i = 3; i < 1024; i++) {
            int fl = i == fd ? -1 : fcntl(i, F_GETFD);
            if (fl >= 0 && (fl & FD_CLOEXEC) && fstat(i, &st) == 0 &&
                st.st_dev == orig.st_dev && st.st_ino == orig.st_ino)
                dup3(fd, i, O_CLOEXEC);
        }
    }
    dup2(fd, STDERR_FILENO);
}

#endif
