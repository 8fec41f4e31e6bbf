/* The replay twins' shared parts (replay.h). */
#include "replay.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int replay_count_arg(int argc, char **argv, unsigned long *count)
{
    if (argc > 2 && strcmp(argv[1], "-n") == 0) {
        *count = strtoul(argv[2], NULL, 10);
        return 3;
    }
    return 1;
}

/* splitmix64: one fixed sequence from a seed, the same on every machine. */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void replay_random(unsigned long count, uint64_t seed, size_t size, int vary_len)
{
    static uint8_t buf[REPLAY_MAX_RANDOM];
    if (size > sizeof buf)
        abort();
    for (unsigned long k = 0; k < count; k++) {
        size_t len = vary_len ? (size_t)(splitmix(&seed) % size) : size; /* some run dry */
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)splitmix(&seed);
        LLVMFuzzerTestOneInput(buf, len);
    }
}

static int replay_file(const char *path)
{
    static uint8_t buf[1 << 20];
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

int replay_path(const char *path, unsigned long *files)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        ++*files;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    struct dirent *e;
    char sub[4096];
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        rc = replay_path(sub, files);
    }
    closedir(d);
    return rc;
}
