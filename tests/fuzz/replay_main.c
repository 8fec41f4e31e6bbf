/*
 * The main() of a fuzz target's replay twin: the target built as a plain
 * program, for CTest under any compiler. It feeds COUNT pseudo-random
 * inputs from a fixed seed, then every FILE named (a directory: each file
 * in it, e.g. the target's committed corpus), each as one input.
 *
 *   fuzz_<target>_replay [-n COUNT] [FILE|DIR...]
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
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

static int replay_path(const char *path, unsigned long *files)
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

int main(int argc, char **argv)
{
    unsigned long count = 100000, files = 0;
    uint64_t seed = 0x68636775617264u;
    static uint8_t buf[512];
    int i = 1;
    if (argc > 2 && strcmp(argv[1], "-n") == 0) {
        count = strtoul(argv[2], NULL, 10);
        i = 3;
    }
    for (unsigned long k = 0; k < count; k++) {
        size_t len = (size_t)(splitmix(&seed) % sizeof buf);
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)splitmix(&seed);
        LLVMFuzzerTestOneInput(buf, len);
    }
    int named = argc - i;
    for (; i < argc; i++)
        if (replay_path(argv[i], &files) != 0)
            return 2;
    printf("%lu random inputs, %lu corpus files\n", count, files);
    /* a corpus named but empty proves nothing */
    return named > 0 && files == 0 ? 1 : 0;
}
