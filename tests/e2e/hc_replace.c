/*
 * The program closes hcguard's descriptors (closefrom(3)), renames its log
 * away and makes a file of its own at the log's path, then execs: the next
 * image must not continue hcguard's log into the program's file.
 *
 *   hc_replace exec LOG [REPORT]  (HCGUARD_LOG=LOG, HCGUARD_LOG_FILE=REPORT)
 *                          five copies and a bad record, then the above
 *                          for each file; the next image does the same
 *                          (and dies of SIGKILL with HC_REPLACE_IMAGE=
 *                          image-dies: hcguard run, left its events, must
 *                          not write them into the program's files)
 *   hc_replace check LOG   LOG holds exactly what the program wrote:
 *                          prints "replace: kept"
 *
 * Or it dies (SIGKILL) under hcguard run after moving its log, trace and
 * report file away and making files of its own at their paths: hcguard
 * run, continuing them for the program, must not write into the program's
 * files.
 *
 *   hc_replace die KEEP|CLOSE PATH...   (hcguard run --log PATH1 ...) five
 *                          copies, [closefrom(3),] each PATH moved to
 *                          PATH.moved and made anew with the program's
 *                          data, five more copies, SIGKILL
 *   hc_replace spawn PATH...  five copies and a bad record, each PATH moved
 *                          away and made anew (no descriptor closed), then
 *                          a child started by posix_spawn does the same:
 *                          it must not append to the program's files either
 *   hc_replace check PATH...  each PATH holds exactly the program's data
 */
#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
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

/* path moved away, and a file of the program's own made there. */
static void replace(const char *path)
{
    char moved[4096];
    snprintf(moved, sizeof moved, "%s.moved", path);
    REQUIRE(rename(path, moved) == 0);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    REQUIRE(fd >= 0 && write(fd, data, sizeof data - 1) == (ssize_t)(sizeof data - 1));
    close(fd);
}

/* A bad record: its message opens the report file. */
static void bad_launch(void)
{
    static unsigned char src[64];
    hcguard_copy_record bad = {0, (uintptr_t)src, sizeof src};
    REQUIRE(cuLaunchHostFunc(test_context(), test_copy_fn(NULL), &bad) == CUDA_ERROR_INVALID_VALUE);
}

static int replace_then_exec(const char *self, char **paths, int n)
{
    copies();
    bad_launch();
    usleep(100000); /* drained */
    closefrom(3);
    for (int i = 0; i < n; i++)
        replace(paths[i]);
    execl(self, self, getenv("HC_REPLACE_IMAGE") ? getenv("HC_REPLACE_IMAGE") : "image",
          paths[0], (char *)0);
    perror("execl");
    return 1;
}

static int replace_then_die(int close_first, char **paths, int n)
{
    copies();
    bad_launch();
    usleep(100000); /* drained */
    if (close_first)
        closefrom(3);
    for (int i = 0; i < n; i++)
        replace(paths[i]);
    copies(); /* their events may still be in the record's rings */
    raise(SIGKILL);
    return 1;
}

static int replace_then_spawn(const char *self, char **paths, int n)
{
    copies();
    bad_launch();
    usleep(100000); /* drained */
    for (int i = 0; i < n; i++)
        replace(paths[i]);
    extern char **environ;
    char *argv[] = {(char *)self, "image", paths[0], NULL};
    pid_t pid;
    int st;
    REQUIRE(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
    REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return 0;
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
    if (argc >= 3 && strcmp(argv[1], "exec") == 0)
        return replace_then_exec(argv[0], argv + 2, argc - 2);
    if (argc == 3 && strncmp(argv[1], "image", 5) == 0) {
        copies(); /* the next image's own events */
        bad_launch(); /* and a message */
        if (strcmp(argv[1], "image-dies") == 0)
            raise(SIGKILL); /* its events are left to hcguard run */
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "spawn") == 0)
        return replace_then_spawn(argv[0], argv + 2, argc - 2);
    if (argc >= 4 && strcmp(argv[1], "die") == 0)
        return replace_then_die(strcmp(argv[2], "CLOSE") == 0, argv + 3, argc - 3);
    if (argc >= 3 && strcmp(argv[1], "check") == 0) {
        int bad = 0;
        for (int i = 2; i < argc; i++)
            bad |= check(argv[i]);
        return bad;
    }
    fprintf(stderr, "usage: hc_replace exec PATH... | spawn PATH... | die KEEP|CLOSE PATH... | check PATH...\n");
    return 2;
}
