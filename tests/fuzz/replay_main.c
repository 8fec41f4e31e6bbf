/*
 * The main() of a fuzz target's replay twin: the target built as a plain
 * program, for CTest under any compiler. It feeds COUNT pseudo-random
 * inputs from a fixed seed, then every FILE named (a directory: each file
 * in it, e.g. the target's committed corpus), each as one input.
 *
 *   fuzz_<target>_replay [-n COUNT] [FILE|DIR...]
 */
#include <stdio.h>

#include "replay.h"

int main(int argc, char **argv)
{
    unsigned long count = 100000, files = 0;
    int i = replay_count_arg(argc, argv, &count);
    replay_random(count, 0x68636775617264u, 512, 1);
    int named = argc - i;
    for (; i < argc; i++)
        if (replay_path(argv[i], &files) != 0)
            return 2;
    printf("%lu random inputs, %lu corpus files\n", count, files);
    /* a corpus named but empty proves nothing */
    return named > 0 && files == 0 ? 1 : 0;
}
