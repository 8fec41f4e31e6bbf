/*
 * What the replay twins of the fuzz targets share (each target built as a
 * plain program, for CTest under any compiler): the -n COUNT option, a
 * fixed pseudo-random sequence of inputs, and files (or every file in a
 * directory, e.g. a committed corpus) fed as one input each. replay_main.c
 * is the whole main() of the targets that need no more; fuzz_validate.c
 * and fuzz_oracle.c have their own (what they count and check after).
 */
#ifndef HCG_FUZZ_REPLAY_H
#define HCG_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* -n COUNT, if first, into *count (left as it is otherwise): the index of
 * the first FILE argument. */
int replay_count_arg(int argc, char **argv, unsigned long *count);

/* COUNT inputs from seed: each of a pseudo-random length below size
 * (vary_len), or of size bytes; size at most REPLAY_MAX_RANDOM. */
enum { REPLAY_MAX_RANDOM = 512 };
void replay_random(unsigned long count, uint64_t seed, size_t size, int vary_len);

/* path as one input (its first MiB), or each file in it if a directory
 * (recursively, dot files left out), counted in *files; -1 (said) if one
 * cannot be read. */
int replay_path(const char *path, unsigned long *files);

#endif
