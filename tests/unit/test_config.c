/*
 * HCGUARD_* parsing: defaults, every variable with good and bad values,
 * error messages that name the variable, the value and what is accepted,
 * all errors reported at once, and %-expansion of file names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hcg.h"
#include "../common/stderr_redirect.h"
#include "../common/check.h"

/* ---- a fake environment ------------------------------------------------- */

#define MAX_VARS 16
static struct { const char *name, *value; } g_env[MAX_VARS];
static size_t g_nenv;

static void env_clear(void) { g_nenv = 0; }

static void env_set(const char *name, const char *value)
{
    if (g_nenv < MAX_VARS) {
        g_env[g_nenv].name = name;
        g_env[g_nenv++].value = value;
    }
}

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < g_nenv; i++) {
        if (strcmp(g_env[i].name, name) == 0)
            return g_env[i].value;
    }
    return NULL;
}

static hcg_config g_cfg;
static char g_err[4096];

/* Parse the fake environment holding just name=value. */
static int parse1(const char *name, const char *value)
{
    env_clear();
    env_set(name, value);
    return hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err);
}

static int is_default(const hcg_config *c)
{
    return c->mode == HCG_MODE_GUARD && c->log_path[0] == '\0' && c->trace_path[0] == '\0' &&
           c->error_exitcode == 0 && c->summary == 1 && c->debug == 0 &&
           c->recheck_always == 0 && c->driver_path[0] == '\0' &&
           c->n_copy_fns == 0;
}

/* A bad value: -1, the defaults kept, and a message naming it. */
static void check_bad(const char *name, const char *value, const char *accepted)
{
    int rc = parse1(name, value);
    CHECK(rc == -1);
    CHECK(is_default(&g_cfg));
    char quoted[600];
    snprintf(quoted, sizeof quoted, "%s='%.*s", name, 100, value);
    CHECK_HAS(g_err, quoted);
    CHECK_HAS(g_err, accepted);
    CHECK(strchr(g_err, '\n') == NULL); /* one error, one line */
}

static void test_defaults(void)
{
    env_clear();
    strcpy(g_err, "stale");
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err) == 0);
    CHECK(is_default(&g_cfg));
    CHECK_STR(g_err, "");
    /* An empty value counts as unset. */
    const char *vars[] = {"HCGUARD_MODE", "HCGUARD_LOG", "HCGUARD_TRACE", "HCGUARD_ERROR_EXITCODE",
                          "HCGUARD_SUMMARY", "HCGUARD_DEBUG", "HCGUARD_RECHECK",
                          "HCGUARD_DRIVER", "HCGUARD_COPY_FN"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        CHECK(parse1(vars[i], "") == 0);
        CHECK(is_default(&g_cfg));
    }
}

static void test_mode(void)
{
    CHECK(parse1("HCGUARD_MODE", "audit") == 0 && g_cfg.mode == HCG_MODE_AUDIT);
    CHECK(parse1("HCGUARD_MODE", "off") == 0 && g_cfg.mode == HCG_MODE_OFF);
    CHECK(parse1("HCGUARD_MODE", "guard") == 0 && g_cfg.mode == HCG_MODE_GUARD);
    CHECK(parse1("HCGUARD_MODE", "fast") == -1);
    CHECK_STR(g_err, "HCGUARD_MODE='fast' is not one of guard, audit, off");
    check_bad("HCGUARD_MODE", "GUARD", "guard, audit, off");
    check_bad("HCGUARD_MODE", "guard ", "guard, audit, off");
}

static void test_exitcode(void)
{
    CHECK(parse1("HCGUARD_ERROR_EXITCODE", "1") == 0 && g_cfg.error_exitcode == 1);
    CHECK(parse1("HCGUARD_ERROR_EXITCODE", "255") == 0 && g_cfg.error_exitcode == 255);
    CHECK(parse1("HCGUARD_ERROR_EXITCODE", "0") == 0 && g_cfg.error_exitcode == 0);
    CHECK(parse1("HCGUARD_ERROR_EXITCODE", "042") == 0 && g_cfg.error_exitcode == 42);
    const char *bad[] = {"256", "-1", "abc", "1x", " 1", "1000", "+3", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_bad("HCGUARD_ERROR_EXITCODE", bad[i], "integer from 1 to 255");
}

static void test_bools(void)
{
    CHECK(parse1("HCGUARD_SUMMARY", "0") == 0 && g_cfg.summary == 0);
    CHECK(parse1("HCGUARD_SUMMARY", "1") == 0 && g_cfg.summary == 1);
    CHECK(parse1("HCGUARD_DEBUG", "1") == 0 && g_cfg.debug == 1);
    CHECK(parse1("HCGUARD_DEBUG", "0") == 0 && g_cfg.debug == 0);
    check_bad("HCGUARD_SUMMARY", "2", "not one of 0, 1");
    check_bad("HCGUARD_SUMMARY", "yes", "not one of 0, 1");
    check_bad("HCGUARD_DEBUG", "true", "not one of 0, 1");
    check_bad("HCGUARD_DEBUG", "10", "not one of 0, 1");
    CHECK(parse1("HCGUARD_NVTX", "1") == 0 && g_cfg.nvtx == 1);
    CHECK(parse1("HCGUARD_NVTX", "0") == 0 && g_cfg.nvtx == 0);
    check_bad("HCGUARD_NVTX", "yes", "not one of 0, 1");
}

static void test_recheck(void)
{
    CHECK(parse1("HCGUARD_RECHECK", "always") == 0 && g_cfg.recheck_always == 1);
    CHECK(parse1("HCGUARD_RECHECK", "changed") == 0 && g_cfg.recheck_always == 0);
    check_bad("HCGUARD_RECHECK", "sometimes", "not one of changed, always");
}

static void test_buffer(void)
{
    CHECK(parse1("HCGUARD_BUFFER", "4M") == 0 && g_cfg.buffer_bytes == 4u << 20);
    CHECK(parse1("HCGUARD_BUFFER", "64k") == 0 && g_cfg.buffer_bytes == 64u << 10);
    CHECK(parse1("HCGUARD_BUFFER", "1G") == 0 && g_cfg.buffer_bytes == 1u << 30);
    CHECK(parse1("HCGUARD_BUFFER", "100000") == 0 && g_cfg.buffer_bytes == 100000);
    CHECK(parse1("HCGUARD_MODE", "audit") == 0 && g_cfg.buffer_bytes == HCG_BUFFER_DEFAULT);
    const char *bad[] = {"0", "63K", "65535", "2G", "1025M", "-4M", "+4M", "4MB", "4 M", " 4M",
                         "4M ", "0x100000", "M", "4Q", "1e6", "99999999999999999999999K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_bad("HCGUARD_BUFFER", bad[i], "not a size from 64K to 1G (bytes, or a number with K, M or G)");
}

static void test_driver(void)
{
    CHECK(parse1("HCGUARD_DRIVER", "/opt/nvidia/libcuda.so.1") == 0);
    CHECK_STR(g_cfg.driver_path, "/opt/nvidia/libcuda.so.1");
    static char longpath[HCG_PATH_MAX + 10];
    memset(longpath, 'a', sizeof longpath - 1);
    check_bad("HCGUARD_DRIVER", longpath, "shorter than 4096 bytes");
    /* The value in the message is cut, not the whole 4 KiB. */
    CHECK(strlen(g_err) < 400);
    longpath[HCG_PATH_MAX - 1] = '\0'; /* 4095 bytes: fits */
    CHECK(parse1("HCGUARD_DRIVER", longpath) == 0);
    CHECK(strlen(g_cfg.driver_path) == HCG_PATH_MAX - 1);
}

static void test_copy_fn(void)
{
    CHECK(parse1("HCGUARD_COPY_FN", " my_copy ,\tother_copy,z ") == 0);
    CHECK(g_cfg.n_copy_fns == 3);
    CHECK_STR(g_cfg.copy_fns[0], "my_copy");
    CHECK_STR(g_cfg.copy_fns[1], "other_copy");
    CHECK_STR(g_cfg.copy_fns[2], "z");
    CHECK(parse1("HCGUARD_COPY_FN", "only") == 0 && g_cfg.n_copy_fns == 1);

    char list[32 * 4 + 8] = "";
    for (int i = 0; i < HCG_MAX_COPY_FNS; i++)
        sprintf(list + strlen(list), "%sf%02d", i ? "," : "", i);
    CHECK(parse1("HCGUARD_COPY_FN", list) == 0);
    CHECK(g_cfg.n_copy_fns == HCG_MAX_COPY_FNS);
    CHECK_STR(g_cfg.copy_fns[31], "f31");
    strcat(list, ",f32");
    check_bad("HCGUARD_COPY_FN", list, "more than 32 names");

    char name[140];
    memset(name, 'n', 127);
    name[127] = '\0';
    CHECK(parse1("HCGUARD_COPY_FN", name) == 0 && strlen(g_cfg.copy_fns[0]) == 127);
    strcat(name, "n");
    check_bad("HCGUARD_COPY_FN", name, "128 bytes or more");

    const char *empties[] = {"a,,b", ",", "a,", ",a", " , x", "  "};
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++)
        check_bad("HCGUARD_COPY_FN", empties[i], "an empty name");
    CHECK_HAS(g_err, "comma-separated symbol names");
}

static void test_log(void)
{
    char want[64];
    CHECK(parse1("HCGUARD_LOG", "/tmp/hcg.jsonl") == 0);
    CHECK_STR(g_cfg.log_path, "/tmp/hcg.jsonl");
    CHECK(parse1("HCGUARD_LOG", "/tmp/hcg.%p.jsonl") == 0);
    snprintf(want, sizeof want, "/tmp/hcg.%ld.jsonl", (long)getpid());
    CHECK_STR(g_cfg.log_path, want);
    check_bad("HCGUARD_LOG", "/tmp/x.%z", "unknown conversion '%z'");
    CHECK_HAS(g_err, "%p (pid), %h (host name), %q{VAR}");
    check_bad("HCGUARD_LOG", "/tmp/%q{HCG_NO_SUCH_RANK}", "HCG_NO_SUCH_RANK is not set");
    /* The pattern is kept for a fork child, which expands its own %p. */
    CHECK(parse1("HCGUARD_LOG", "/tmp/hcg.%p.jsonl") == 0);
    CHECK_STR(g_cfg.log_pattern, "/tmp/hcg.%p.jsonl");
}

static void test_trace(void)
{
    char want[64];
    CHECK(parse1("HCGUARD_TRACE", "/tmp/hcg.%p.json") == 0);
    snprintf(want, sizeof want, "/tmp/hcg.%ld.json", (long)getpid());
    CHECK_STR(g_cfg.trace_path, want);
    CHECK_STR(g_cfg.trace_pattern, "/tmp/hcg.%p.json");
    CHECK_STR(g_cfg.log_path, "");
    check_bad("HCGUARD_TRACE", "/tmp/x.%z", "unknown conversion '%z'");
    CHECK_HAS(g_err, "HCGUARD_TRACE='/tmp/x.%z'");
}

static void test_multiple_errors(void)
{
    env_clear();
    env_set("HCGUARD_MODE", "fast");
    env_set("HCGUARD_SUMMARY", "maybe");
    env_set("HCGUARD_DEBUG", "1");          /* good: still applied */
    env_set("HCGUARD_COPY_FN", "a,,b");
    env_set("HCGUARD_RECHECK", "always");   /* good, after the bad ones */
    env_set("HCGUARD_LOG", "/tmp/%x");
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err) == -1);
    CHECK(g_cfg.debug == 1 && g_cfg.recheck_always == 1);
    CHECK(g_cfg.mode == HCG_MODE_GUARD && g_cfg.summary == 1 && g_cfg.n_copy_fns == 0);
    CHECK(g_cfg.log_path[0] == '\0');
    CHECK_HAS(g_err, "HCGUARD_MODE='fast' is not one of guard, audit, off\n");
    CHECK_HAS(g_err, "HCGUARD_SUMMARY='maybe' is not one of 0, 1");
    CHECK_HAS(g_err, "HCGUARD_COPY_FN='a,,b' has an empty name");
    CHECK_HAS(g_err, "HCGUARD_LOG='/tmp/%x'");
    int lines = 1;
    for (const char *p = g_err; *p; p++)
        lines += *p == '\n';
    CHECK(lines == 4);

    /* A small buffer is filled, cut and terminated; NULL is allowed. */
    char small[16];
    memset(small, 'X', sizeof small);
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, small, sizeof small) == -1);
    CHECK(memchr(small, '\0', sizeof small) != NULL);
    CHECK(strncmp(small, "HCGUARD_MODE=", 13) == 0);
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, NULL, 0) == -1);
    CHECK(g_cfg.debug == 1);
}

/* ---- hcg_expand_path ----------------------------------------------------- */

static char g_out[256];

static int expand(const char *pattern)
{
    return hcg_expand_path(pattern, g_out, sizeof g_out, fake_getenv, g_err,
                           sizeof g_err);
}

static void test_expand_good(void)
{
    char want[512], host[256];
    env_clear();
    env_set("RANK", "7");
    env_set("EMPTY", "");
    CHECK(expand("plain/name.log") == 0);
    CHECK_STR(g_out, "plain/name.log");
    CHECK(expand("") == 0 && g_out[0] == '\0');
    CHECK(expand("a%pb") == 0);
    snprintf(want, sizeof want, "a%ldb", (long)getpid());
    CHECK_STR(g_out, want);
    CHECK(gethostname(host, sizeof host) == 0);
    host[sizeof host - 1] = '\0';
    CHECK(expand("%h.log") == 0);
    snprintf(want, sizeof want, "%s.log", host);
    CHECK_STR(g_out, want);
    CHECK(expand("r%q{RANK}-%q{RANK}") == 0);
    CHECK_STR(g_out, "r7-7");
    CHECK(expand("e%q{EMPTY}e") == 0);
    CHECK_STR(g_out, "ee");
    CHECK(expand("100%%.%%p") == 0);
    CHECK_STR(g_out, "100%.%p");
    /* Exactly fitting: 7 bytes and the NUL in 8. */
    CHECK(hcg_expand_path("abcdefg", g_out, 8, fake_getenv, g_err, sizeof g_err) == 0);
    CHECK_STR(g_out, "abcdefg");
}

static void check_expand_bad(const char *pattern, const char *why)
{
    strcpy(g_out, "stale");
    CHECK(expand(pattern) == -1);
    CHECK_HAS(g_err, why);
    CHECK(g_out[0] == '\0');
}

static void test_expand_bad(void)
{
    env_clear();
    env_set("RANK", "7");
    check_expand_bad("x%z", "unknown conversion '%z'");
    check_expand_bad("x%", "unknown conversion '%'");
    check_expand_bad("x%\001", "unknown conversion '%\\x01'");
    check_expand_bad("%q{SLURM_PROCID}.log", "SLURM_PROCID is not set");
    check_expand_bad("%q{RANK", "unterminated %q{");
    check_expand_bad("%qRANK", "%q must be followed by {VAR}");
    check_expand_bad("%q{}", "needs a variable name");
    CHECK(hcg_expand_path("abcdefgh", g_out, 8, fake_getenv, g_err, sizeof g_err) == -1);
    CHECK_HAS(g_err, "expands to more than 7 bytes");
    CHECK(hcg_expand_path("%p%p%p%p", g_out, 4, fake_getenv, g_err, sizeof g_err) == -1);
    CHECK_HAS(g_err, "more than 3 bytes");
    CHECK(hcg_expand_path("x", g_out, 0, fake_getenv, g_err, sizeof g_err) == -1);
    CHECK(hcg_expand_path("%q{RANK}", g_out, sizeof g_out, NULL, g_err, sizeof g_err) == -1);
    CHECK(hcg_expand_path("%z", g_out, sizeof g_out, fake_getenv, NULL, 0) == -1);
}

/* ---- hcg_config_get: the real environment, errors printed once ---------- */

static void test_config_get(void)
{
    const char *others[] = {"HCGUARD_LOG", "HCGUARD_ERROR_EXITCODE", "HCGUARD_DEBUG",
                            "HCGUARD_DRIVER", "HCGUARD_COPY_FN"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        unsetenv(others[i]);
    setenv("HCGUARD_MODE", "audit", 1);
    setenv("HCGUARD_SUMMARY", "7", 1);
    setenv("HCGUARD_RECHECK", "bogus", 1);
    char path[] = "/tmp/hcg_test_config_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    int saved = dup(2);
    hcg_test_redirect_stderr(fd);
    const hcg_config *c = hcg_config_get();
    const hcg_config *again = hcg_config_get();
    hcg_test_redirect_stderr(saved);
    close(saved);
    CHECK(c == again);
    CHECK(c->mode == HCG_MODE_AUDIT && c->summary == 1 && c->recheck_always == 0);

    char text[4096] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    CHECK(n > 0);
    text[n > 0 ? n : 0] = '\0';
    const char *want[] = {
        "==hcguard== HCGUARD_SUMMARY='7' is not one of 0, 1; the default is used\n",
        "==hcguard== HCGUARD_RECHECK='bogus' is not one of changed, always; "
        "the default is used\n",
    };
    for (size_t i = 0; i < 2; i++) {
        const char *at = strstr(text, want[i]);
        CHECK(at != NULL);
        CHECK(!at || !strstr(at + 1, want[i])); /* once only */
    }
    size_t total = strlen(want[0]) + strlen(want[1]);
    CHECK((size_t)n == total);
}

/* HCGUARD_COPY_THREADS: 1 (the default, not split) to 64 (empty: unset). */
static void test_copy_threads(void)
{
    env_clear();
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err) == 0);
    CHECK_EQ(g_cfg.copy_threads, HCG_COPY_THREADS_DEFAULT);
    CHECK(parse1("HCGUARD_COPY_THREADS", "1") == 0 && g_cfg.copy_threads == 1);
    CHECK(parse1("HCGUARD_COPY_THREADS", "8") == 0 && g_cfg.copy_threads == 8);
    CHECK(parse1("HCGUARD_COPY_THREADS", "64") == 0 && g_cfg.copy_threads == 64);
    const char *bad[] = {"0", "65", "-1", "4x", " 4", "1e1", "0x4", "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(parse1("HCGUARD_COPY_THREADS", bad[i]) == -1);
        CHECK_EQ(g_cfg.copy_threads, HCG_COPY_THREADS_DEFAULT);
        CHECK_HAS(g_err, "is not an integer from 1 (copies not split) to 64");
    }
}

/* HCGUARD_FILE_MODE, HCGUARD_LOG_FILE, HCGUARD_PRINT_LIMIT. */
static void test_hostile_vars(void)
{
    env_clear();
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err) == 0);
    CHECK(g_cfg.file_mode == 0600 && g_cfg.print_limit == 100 && g_cfg.report_path[0] == '\0');
    CHECK(parse1("HCGUARD_FILE_MODE", "0644") == 0 && g_cfg.file_mode == 0644);
    CHECK(parse1("HCGUARD_FILE_MODE", "640") == 0 && g_cfg.file_mode == 0640);
    const char *bad_modes[] = {"0755", "0400", "644x", "7", "06000", "0o644", "-644", "0200"};
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        CHECK(parse1("HCGUARD_FILE_MODE", bad_modes[i]) == -1 && g_cfg.file_mode == 0600);
        CHECK_HAS(g_err, "is not an octal mode with read and write for the owner");
    }
    CHECK(parse1("HCGUARD_PRINT_LIMIT", "0") == 0 && g_cfg.print_limit == 0);
    CHECK(parse1("HCGUARD_PRINT_LIMIT", "1000000000") == 0 && g_cfg.print_limit == 1000000000u);
    const char *bad_limits[] = {"-1", "1000000001", "x", "1e3", " 5", "99999999999"};
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        CHECK(parse1("HCGUARD_PRINT_LIMIT", bad_limits[i]) == -1 && g_cfg.print_limit == 100);
        CHECK_HAS(g_err, "is not an integer from 0 (no limit) to 1000000000");
    }
    CHECK(parse1("HCGUARD_LOG_FILE", "/tmp/report.%p") == 0);
    CHECK(strncmp(g_cfg.report_path, "/tmp/report.", 12) == 0);
    CHECK_STR(g_cfg.report_pattern, "/tmp/report.%p");
    CHECK(parse1("HCGUARD_LOG_FILE", "/tmp/%q{HCG_NO_SUCH}") == -1);
    CHECK_HAS(g_err, "HCG_NO_SUCH is not set");
    CHECK(g_cfg.report_path[0] == '\0');
    /* names: blanks around are dropped, inside refused, as the launcher does */
    CHECK(parse1("HCGUARD_COPY_FN", " a , b ") == 0 && g_cfg.n_copy_fns == 2);
    CHECK_STR(g_cfg.copy_fns[1], "b");
    CHECK(parse1("HCGUARD_COPY_FN", "my fn") == -1);
    CHECK_HAS(g_err, "a name with a space or control character in it");
    CHECK(parse1("HCGUARD_COPY_FN", "a\nb") == -1);
}

/* %q{VAR}: one safe file-name component, whatever the value. */
static void test_expand_sanitised(void)
{
    static const struct { const char *value, *want; } cases[] = {
        {"../../etc/passwd", "log.______etc_passwd"},
        {"..", "log.__"},
        {".", "log._"},
        {"a.b", "log.a.b"},
        {"a..b", "log.a__b"},
        {"rank\n==hcguard== forged", "log.rank_==hcguard== forged"},
        {"tab\there\x7f", "log.tab_here_"},
        {"/abs", "log._abs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        env_clear();
        env_set("R", cases[i].value);
        CHECK(expand("log.%q{R}") == 0);
        CHECK_STR(g_out, cases[i].want);
    }
    /* the pattern's own '/' and ".." are the user's, kept */
    env_clear();
    env_set("R", "3");
    CHECK(expand("../logs/%q{R}/x") == 0);
    CHECK_STR(g_out, "../logs/3/x");
}

/* The rank: the first launcher variable that is a plain number; others
 * (empty, signed, with text, too long) are passed over, never an error. */
static void test_rank(void)
{
    CHECK(parse1("HCGUARD_MODE", "audit") == 0 && g_cfg.rank[0] == '\0');
    CHECK(parse1("SLURM_PROCID", "12") == 0);
    CHECK_STR(g_cfg.rank, "12");
    static const char *const ignored[] = {"-1", "1x", " 3", "3 ", "0x10",
                                          "12345678901234567890"};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        CHECK(parse1("OMPI_COMM_WORLD_RANK", ignored[i]) == 0);
        CHECK_STR(g_cfg.rank, "");
    }
    /* Open MPI's own variable wins over Slurm's; a bad one falls through */
    env_clear();
    env_set("SLURM_PROCID", "7");
    env_set("OMPI_COMM_WORLD_RANK", "3");
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err) == 0);
    CHECK_STR(g_cfg.rank, "3");
    env_clear();
    env_set("SLURM_PROCID", "7");
    env_set("PMI_RANK", "x");
    CHECK(hcg_config_parse(&g_cfg, fake_getenv, g_err, sizeof g_err) == 0);
    CHECK_STR(g_cfg.rank, "7");
}

/* The launcher checks an option's value with hcg_option_check; the
 * library parses the variable with hcg_config_parse. Both come from the
 * same row of options.def: for every row and every value here they must
 * accept and refuse alike, with the same words after "VARIABLE=". */
static void test_option_table_agrees(void)
{
    static const char *const values[] = {
        "0", "1", "2", "guard", "audit", "off", "always", "changed", "x", "0.5", "-1",
        "64K", "4M", "2G", "0644", "0777", "255", "256", "a,b", "a,,b", "lib.so",
        "out.%p", "out.%z", "1000000001", " 5", "nan", "cuda-call", "slow, hung", "65",
    };
    CHECK_EQ((int)HCG_OPT_COUNT, 20);
    for (size_t i = 0; i < HCG_OPT_COUNT; i++) {
        const hcg_option *o = &hcg_options[i];
        CHECK(strncmp(o->var, "HCGUARD_", 8) == 0 && strncmp(o->option, "--", 2) == 0);
        CHECK(o->help && o->help[0] && o->arg && o->arg[0] && o->parse);
        CHECK(o->field_offset < sizeof(hcg_config));
        for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
            char why[1024], want[1200];
            int lib = parse1(o->var, values[k]);
            int launcher = hcg_option_check(o, values[k], fake_getenv, why, sizeof why);
            CHECK_MSG(lib == launcher, "%s=%s: library %d, launcher %d", o->var, values[k],
                      lib, launcher);
            if (lib != 0 && launcher != 0) {
                snprintf(want, sizeof want, "%s=%s", o->var, why);
                CHECK_STR(g_err, want);
            }
        }
    }
    /* A flag's fixed value is one its parser takes. */
    for (size_t i = 0; i < HCG_OPT_COUNT; i++)
        if (hcg_options[i].kind == HCG_OPT_KIND_FLAG)
            CHECK(hcg_option_check(&hcg_options[i], hcg_options[i].arg, fake_getenv, NULL,
                                   0) == 0);
}

static const check_case cases[] = {
    CHECK_CASE(rank),
    CHECK_CASE(hostile_vars),
    CHECK_CASE(expand_sanitised),
    CHECK_CASE(defaults),
    CHECK_CASE(mode),
    CHECK_CASE(exitcode),
    CHECK_CASE(bools),
    CHECK_CASE(recheck),
    CHECK_CASE(buffer),
    CHECK_CASE(driver),
    CHECK_CASE(copy_fn),
    CHECK_CASE(log),
    CHECK_CASE(trace),
    CHECK_CASE(multiple_errors),
    CHECK_CASE(expand_good),
    CHECK_CASE(expand_bad),
    CHECK_CASE(config_get),
    CHECK_CASE(option_table_agrees),
    CHECK_CASE(copy_threads),
};

int main(int argc, char **argv)
{
    return check_main("test_config", CHECK_CASES(cases), argc, argv);
}
