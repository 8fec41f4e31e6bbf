/*
 * The program closes hcguard's descriptors (closefrom(3)), renames its log
 * away and makes a file of its own at the log's path, then execs: the next
 * image must not continue hcguard's log into the program's file.
 *
 *   hc_replace exec LOG    (HCGUARD_LOG=LOG) five copies, then the above
 *   hc_replace check LOG   LOG holds exactly what the program wrote:
 *                          prints "replace: kept"
 */
#include <cuda.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hcguard.h"
#include "testutil.h"

static const char data[] = "PROGRAM DATA line 1\nPROGRAM DATA no newline";

static void copies(void)
{
    static unsigned char src[64], dst[64];
    hcguard_copy_record rec = {(uintptr_t)dst, (uintptr_t)src, sizeof src};
    CUstream s = test_context();
    CUhostFn fn = test_copy_fn(NULL);
    for (int i = 0; i < 5; i++)
        REQUIRE_OK(cuLaunchHostFunc(s, fn, &rec));
    REQUIRE_OK(cuStreamSynchronize(s));
}

static int replace_then_exec(const char *self, const char *log)
{
    copies();
    usleep(100000); /* drained */
    closefrom(3);
    char moved[4096];
    snprintf(moved, sizeof moved, "%s.moved", log);
    REQUIRE(rename(log, moved) == 0);
    int fd = open(log, O_CREAT | O_EXCL | O_WRONLY, 0600);
    REQUIRE(fd >= 0 && write(fd, data, sizeof data - 1) == (ssize_t)(sizeof data - 1));
    close(fd);
    execl(self, self, "image", log, (char *)0);
    perror("execl");
    return 1;
}

static int check(const char *log)
{
    char text[8192];
    int fd = open(log, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text) : -1;
    if (fd >= 0)
        close(fd);
    if (n != (ssize_t)(sizeof data - 1) || memcmp(text, data, sizeof data - 1) != 0) {
        printf("FAIL: %s holds %zd bytes, not only the program's %zu\n", log, n,
               sizeof data - 1);
        return 1;
    }
    printf("replace: kept\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "exec") == 0)
        return replace_then_exec(argv[0], argv[2]);
    if (argc == 3 && strcmp(argv[1], "image") == 0) {
        copies(); /* the next image's own events */
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "check") == 0)
        return check(argv[2]);
    fprintf(stderr, "usage: hc_replace exec|check LOG\n");
    return 2;
}
