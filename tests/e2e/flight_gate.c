/* Test shim for e2e_mp_flight_race, preloaded after libhcguard: makes the
 * processes that share one HCGUARD_FLIGHT file (the ranks of `hcguard run
 * mpirun ...`) reach the flight recorder together. Its ftruncate of that
 * file waits until FLIGHT_GATE_N processes have come to it (at most 2 s:
 * one that waits alone goes on), and every writable MAP_SHARED mapping of the file
 * is recorded (the pid, one line) in FLIGHT_GATE_DIR/mappers. hcguard is
 * unchanged: only the order the scheduler may choose anyway is forced. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int is_flight(int fd)
{
    const char *flight = getenv("HCGUARD_FLIGHT");
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (!flight || n <= 0)
        return 0;
    path[n] = '\0';
    return strcmp(path, flight) == 0;
}

static void note(const char *name, const char *line)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", getenv("FLIGHT_GATE_DIR"), name);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        (void)!write(fd, line, strlen(line));
        close(fd);
    }
}

int ftruncate(int fd, off_t len)
{
    static int (*real)(int, off_t);
    if (!real)
        real = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
    if (getenv("FLIGHT_GATE_DIR") && is_flight(fd)) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/arrived", getenv("FLIGHT_GATE_DIR"));
        note("arrived", "x");
        long want = atol(getenv("FLIGHT_GATE_N") ? getenv("FLIGHT_GATE_N") : "2");
        for (int i = 0; i < 200; i++) {
            struct stat st;
            if (stat(path, &st) == 0 && st.st_size >= want)
                break;
            struct timespec d = {0, 10 * 1000 * 1000};
            nanosleep(&d, NULL);
        }
    }
    return real(fd, len);
}

void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    if (fd >= 0 && (flags & MAP_SHARED) && (prot & PROT_WRITE) && getenv("FLIGHT_GATE_DIR") && is_flight(fd)) {
        char line[32];
        snprintf(line, sizeof line, "%d\n", (int)getpid());
        note("mappers", line);
    }
    return real(a, len, prot, flags, fd, off);
}
