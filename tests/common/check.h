/*
 * The one assertion style of hcguard's C tests: unit tests, end-to-end
 * programs and the test driver's self-test.
 *
 * A failed check prints one line on stderr,
 *     FILE:LINE: CHECK failed: WHAT[ (got G, want W)][: DETAILS]
 * where WHAT is the condition, or "GOT == WANT" as written in the source.
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

/* "FILE:LINE: KIND failed: " and the message, one line on stderr. */
static inline void check_vreport(const char *kind, const char *file, int line,
                                 const char *fmt, va_list ap)
{
    fprintf(stderr, "%s:%d: %s failed: ", file, line, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

/* Prints "FILE:LINE: CHECK failed: ..." and counts; every macro below
 * ends here, so every failure reads the same. */
__attribute__((format(printf, 3, 4))) static inline void
check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_vreport("CHECK", file, line, fmt, ap);
    va_end(ap);
    __atomic_fetch_add(&check_failures, 1, __ATOMIC_RELAXED);
}

/* The same line as "REQUIRE failed", then exit: the test cannot go on. */
__attribute__((format(printf, 3, 4), noreturn)) static inline void
check_require_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_vreport("REQUIRE", file, line, fmt, ap);
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

/* The comparisons: got and want are evaluated once, converted by conv (a
 * cast, or nothing) to type; they differ when differ (over check_g_ and
 * check_w_) holds; then fail() gets "GOT == WANT (got G, want W)", each
 * value printed with fmt through show (which may expand to several
 * arguments). */
#define CHECK_BY_(fail, type, conv, differ, fmt, show, got, want)           \
    do {                                                                     \
        type check_g_ = conv(got);                                           \
        type check_w_ = conv(want);                                          \
        if (differ)                                                          \
            fail(__FILE__, __LINE__, "%s == %s (got " fmt ", want " fmt ")", \
                 #got, #want, show(check_g_), show(check_w_));               \
    } while (0)
#define CHECK_AS_IS_(x) x

#define CHECK_EQ(got, want)                                                  \
    CHECK_BY_(check_fail, long long, (long long), check_g_ != check_w_,      \
              "%lld", CHECK_AS_IS_, got, want)
#define CHECK_STR(got, want)                                                 \
    CHECK_BY_(check_fail, const char *, , strcmp(check_g_, check_w_) != 0,     \
              "'%s'", CHECK_AS_IS_, got, want)

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
    CHECK_BY_(check_fail, hcguard_status, , check_g_ != check_w_, "%s",      \
              hcguard_status_name, got, want)
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
#define CHECK_CU_SHOW_(r) check_cu_name(r), (int)(r)

/* A driver call's result, printed by name and number. */
#define CHECK_CU(call, want)                                                 \
    CHECK_BY_(check_fail, CUresult, , check_g_ != check_w_, "%s (%d)",       \
              CHECK_CU_SHOW_, call, want)
#define CHECK_OK(call) CHECK_CU(call, CUDA_SUCCESS)

/* A driver call that must succeed, or the test cannot go on. */
#define REQUIRE_OK(call)                                                     \
    CHECK_BY_(check_require_fail, CUresult, , check_g_ != check_w_, "%s (%d)", \
              CHECK_CU_SHOW_, call, CUDA_SUCCESS)
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

/* ---- scenarios: the end-to-end programs ---------------------------------
 * An end-to-end program (tests/e2e/hc_*.c) runs one scenario a process,
 * named on its command line with the scenario's own arguments
 * ("hc_lost flood 1000"), since each needs an environment of its own (a
 * preload, a driver, files, a signal to die of). They are listed once in
 * a table too; "--list" prints their names. */
typedef struct check_scenario {
    const char *name;
    void (*run)(void);                  /* a scenario without arguments */
    void (*run_args)(int argc, char **argv); /* or with min..max of them */
    int min_args, max_args;
    const char *usage;                  /* of its arguments */
} check_scenario;

#define CHECK_SCENARIO(name, fn) {name, fn, NULL, 0, 0, ""}
#define CHECK_SCENARIO_ARGS(name, fn, min, max, usage) {name, NULL, fn, min, max, usage}

static inline int check_scenario_usage(const char *program, const check_scenario *s, size_t n)
{
    fprintf(stderr, "usage: %s SCENARIO [ARGS], the scenarios:\n", program);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  %s%s%s\n", s[i].name, s[i].usage[0] ? " " : "", s[i].usage);
    return 2;
}

/* The whole main of such a program: argv[1] names the scenario, the rest
 * are its arguments. setup (may be NULL) runs before it, teardown (may
 * be NULL) after it; then one line, done ("audit %s", the scenario's name
 * for %s, or a fixed "fork") followed by ": passed" or ": FAILED". Exit
 * status 0, 1 if a check failed, 2 for a usage error. */
static inline int check_scenario_main(const char *program, const char *done,
                                      const check_scenario *s, size_t n, int argc,
                                      char **argv, void (*setup)(void),
                                      void (*teardown)(void))
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", s[i].name);
        return 0;
    }
    const check_scenario *c = NULL;
    for (size_t i = 0; argc >= 2 && i < n && !c; i++)
        if (strcmp(s[i].name, argv[1]) == 0)
            c = &s[i];
    if (!c || argc - 2 < c->min_args || argc - 2 > c->max_args)
        return check_scenario_usage(program, s, n);
    if (setup)
        setup();
    if (c->run)
        c->run();
    else
        c->run_args(argc - 2, argv + 2);
    if (teardown)
        teardown();
    printf(done, c->name);
    printf(": %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}

#endif /* HCG_TEST_CHECK_H */
