/*
 * Minimal checks for the unit tests: a failed CHECK prints where and what,
 * counts, and carries on; check_done() turns the count into the exit code.
 */
#ifndef HCG_TEST_CHECK_H
#define HCG_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hcguard.h"

static int check_failures;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                  \
            check_failures++;                                                \
        }                                                                    \
    } while (0)

#define CHECK_EQ(got, want)                                                  \
    do {                                                                     \
        long long check_g_ = (long long)(got), check_w_ = (long long)(want); \
        if (check_g_ != check_w_) {                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (got %lld, want %lld)\n", \
                    __FILE__, __LINE__, #got, #want, check_g_, check_w_);    \
            check_failures++;                                                \
        }                                                                    \
    } while (0)

#define CHECK_STR(a, b)                                                      \
    do {                                                                     \
        const char *check_a_ = (a), *check_b_ = (b);                         \
        if (strcmp(check_a_, check_b_) != 0) {                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s ('%s' vs '%s')\n", \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_);         \
            check_failures++;                                                \
        }                                                                    \
    } while (0)

#define CHECK_HAS(hay, needle)                                               \
    do {                                                                     \
        const char *check_h_ = (hay), *check_n_ = (needle);                  \
        if (!strstr(check_h_, check_n_)) {                                   \
            fprintf(stderr, "%s:%d: CHECK failed: '%s' does not contain '%s'\n", \
                    __FILE__, __LINE__, check_h_, check_n_);                 \
            check_failures++;                                                \
        }                                                                    \
    } while (0)

/* Compare two hcguard_status values and print both names on failure. */
#define CHECK_STATUS(got, want)                                              \
    do {                                                                     \
        hcguard_status check_g_ = (got), check_w_ = (want);                  \
        if (check_g_ != check_w_) {                                          \
            fprintf(stderr, "%s:%d: %s: got %s, want %s\n", __FILE__,        \
                    __LINE__, #got, hcguard_status_name(check_g_),           \
                    hcguard_status_name(check_w_));                          \
            check_failures++;                                                \
        }                                                                    \
    } while (0)

static inline int check_done(const char *test)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", test, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", test);
    return 0;
}

#endif /* HCG_TEST_CHECK_H */
