/*
 * The one assertion style of hcguard's C tests: unit tests, end-to-end
 * programs and the test driver's self-test.
 *
 * A failed check prints one line on stderr,
 *     FILE:LINE: CHECK failed: WHAT[ (got G, want W)][: DETAILS]
 * counts, and the program goes on, so that one run shows every failure.
 * REQUIRE_* is for what a test cannot go on without: it prints the same
 * line with "REQUIRE failed" and exits 1.
 *
 * A program made of cases lists them once in a table and hands it to
 * check_main(): no argument runs every case in table order; "--list"
 * prints their names; names run just those cases.
 *
 * Header only, for programs built in very different ways (static, under
 * LD_PRELOAD, against the real driver). The failure count is one object
 * per program even when several files include this (a weak definition).
 * Include it after hcguard.h and cuda.h for CHECK_STATUS and the CHECK_CU
 * family.
 */
#ifndef HCG_TEST_CHECK_H
#define HCG_TEST_CHECK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Failed checks so far. Atomic updates: host functions check on the
 * driver's thread while the main thread checks too. */
int check_failures __attribute__((weak));

/* Prints "FILE:LINE: CHECK failed: ..." and counts; every macro below
 * ends here, so every failure reads the same. */
__attribute__((format(printf, 3, 4))) static inline void
check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: CHECK failed: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    __atomic_fetch_add(&check_failures, 1, __ATOMIC_RELAXED);
}

/* The same line as "REQUIRE failed", then exit: the test cannot go on. */
__attribute__((format(printf, 3, 4), noreturn)) static inline void
check_require_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: REQUIRE failed: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

#define CHECK(cond)                                                          \
    ((cond) ? (void)0 : check_fail(__FILE__, __LINE__, "%s", #cond))

/* CHECK with a printf-style account of what was got. */
#define CHECK_MSG(cond, ...)                                                 \
    ((cond) ? (void)0 : check_fail_msg(__FILE__, __LINE__, #cond, __VA_ARGS__))

#define REQUIRE(cond)                                                        \
    ((cond) ? (void)0 : check_require_fail(__FILE__, __LINE__, "%s", #cond))

__attribute__((format(printf, 4, 5))) static inline void
check_fail_msg(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    check_fail(file, line, "%s: %s", cond, msg);
}

#define CHECK_EQ(got, want)                                                  \
    do {                                                                     \
        long long check_g_ = (long long)(got), check_w_ = (long long)(want); \
        if (check_g_ != check_w_)                                            \
            check_fail(__FILE__, __LINE__, "%s == %s (got %lld, want %lld)", \
                       #got, #want, check_g_, check_w_);                     \
    } while (0)

#define CHECK_STR(got, want)                                                 \
    do {                                                                     \
        const char *check_g_ = (got), *check_w_ = (want);                    \
        if (strcmp(check_g_, check_w_) != 0)                                 \
            check_fail(__FILE__, __LINE__, "%s == %s (got '%s', want '%s')", \
                       #got, #want, check_g_, check_w_);                     \
    } while (0)

#define CHECK_HAS(hay, needle)                                               \
    do {                                                                     \
        const char *check_h_ = (hay), *check_n_ = (needle);                  \
        if (!strstr(check_h_, check_n_))                                     \
            check_fail(__FILE__, __LINE__, "%s contains %s ('%s' lacks '%s')", \
                       #hay, #needle, check_h_, check_n_);                   \
    } while (0)

#ifdef HCGUARD_H
/* hcguard_status values, printed by name. */
#define CHECK_STATUS(got, want)                                              \
    do {                                                                     \
        hcguard_status check_g_ = (got), check_w_ = (want);                  \
        if (check_g_ != check_w_)                                            \
            check_fail(__FILE__, __LINE__, "%s == %s (got %s, want %s)",     \
                       #got, #want, hcguard_status_name(check_g_),           \
                       hcguard_status_name(check_w_));                       \
    } while (0)
#endif

#ifdef CUDA_VERSION
#include <dlfcn.h>

/* A CUresult's name, through whatever driver the process has: found at run
 * time, so that programs that reach the driver by dlopen, or through the
 * CUDA runtime, need no libcuda at link time. */
static inline const char *check_cu_name(CUresult r)
{
    typedef CUresult (*name_fn)(CUresult, const char **);
    name_fn fn = (name_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cuGetErrorName");
    const char *s = NULL;
    if (!fn || fn(r, &s) != CUDA_SUCCESS || !s)
        return "?";
    return s;
}

/* got != want: "WHAT returned NAME (N), want NAME (N)". */
#define CHECK_CU_LINE_(fail, call, got, want)                                \
    fail(__FILE__, __LINE__, "%s returned %s (%d), want %s (%d)", call,      \
         check_cu_name(got), (int)(got), check_cu_name(want), (int)(want))

/* A driver call's result, counted when it is not want. */
#define CHECK_CU(call, want)                                                 \
    do {                                                                     \
        CUresult check_g_ = (call), check_w_ = (want);                       \
        if (check_g_ != check_w_)                                            \
            CHECK_CU_LINE_(check_fail, #call, check_g_, check_w_);           \
    } while (0)
#define CHECK_OK(call) CHECK_CU(call, CUDA_SUCCESS)

/* A driver call that must succeed, or the test cannot go on. */
#define REQUIRE_OK(call)                                                     \
    do {                                                                     \
        CUresult check_g_ = (call);                                          \
        if (check_g_ != CUDA_SUCCESS)                                        \
            CHECK_CU_LINE_(check_require_fail, #call, check_g_, CUDA_SUCCESS); \
    } while (0)
#endif

/* ---- cases, registered by name ----------------------------------------- */

typedef struct check_case {
    const char *name;
    void (*run)(void);
    int named_only; /* needs an environment of its own: run only when named */
} check_case;

/* A case "NAME" is the function test_NAME. */
#define CHECK_CASE(name) {#name, test_##name, 0}
#define CHECK_CASE_NAMED_ONLY(name) {#name, test_##name, 1}
#define CHECK_CASES(table) (table), (sizeof(table) / sizeof((table)[0]))

static inline int check_run_case(const char *program, const check_case *c)
{
    int before = __atomic_load_n(&check_failures, __ATOMIC_RELAXED);
    c->run();
    int failed = __atomic_load_n(&check_failures, __ATOMIC_RELAXED) - before;
    if (failed)
        fprintf(stderr, "%s: case %s: %d check(s) failed\n", program, c->name, failed);
    return failed;
}

static inline const check_case *check_find_case(const check_case *cases, size_t n,
                                                const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    return NULL;
}

/* The whole main of a program of cases: "--list" prints one name a line
 * ("NAME named-only" for those the plain run leaves out); no argument runs
 * every other case; names run those. The exit status is 0 when no check
 * failed, 1 when one did, 2 for an unknown name. */
static inline int check_main(const char *program, const check_case *cases, size_t n,
                             int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s%s\n", cases[i].name, cases[i].named_only ? " named-only" : "");
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (!check_find_case(cases, n, argv[i])) {
            fprintf(stderr, "%s: no case named '%s' (--list lists them)\n", program, argv[i]);
            return 2;
        }
    if (argc > 1)
        for (int i = 1; i < argc; i++)
            check_run_case(program, check_find_case(cases, n, argv[i]));
    else
        for (size_t i = 0; i < n; i++)
            if (!cases[i].named_only)
                check_run_case(program, &cases[i]);
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", program, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", program);
    return 0;
}

#endif /* HCG_TEST_CHECK_H */
