/* Checks shared by the end-to-end and GPU test programs. */
#ifndef HCG_TESTUTIL_H
#define HCG_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>

static int failures;

/* A failed check is printed and counted; the program goes on. */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failures++;                                                        \
        }                                                                      \
    } while (0)

/* A driver call that must succeed, or the test cannot go on. */
#define DRV(call)                                                              \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, \
                    (int)r_);                                                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* An address no mapping can ever have: past the largest user address
 * space of the architecture (below the top byte that aarch64 may ignore). */
#if defined(__aarch64__)
#define NEVER_MAPPED ((uintptr_t)1 << 55)
#else
#define NEVER_MAPPED ((uintptr_t)1 << 56)
#endif

#endif
