/*
 * Fuzz target for the configuration (src/config.c): hcg_config_parse over
 * every HCGUARD_* variable and hcg_expand_path over every % conversion.
 *
 * The input is split at NUL bytes: the first piece is a file-name pattern
 * expanded on its own (into a buffer whose size the second byte picks),
 * the following pieces are the values of the variables below, in order.
 * Whatever the values, the parser must leave every field in its documented
 * range, report an error exactly when it returns -1, and never write a
 * name holding a control character that the pattern did not hold, nor a
 * '/' or ".." brought in by a %q{VAR} value.
 */
#include <stdlib.h>
#include <string.h>

#include "hcg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "HCGUARD_MODE", "HCGUARD_LOG", "HCGUARD_TRACE", "HCGUARD_ERROR_EXITCODE",
    "HCGUARD_SUMMARY", "HCGUARD_DEBUG", "HCGUARD_RECHECK", "HCGUARD_DRIVER",
    "HCGUARD_COPY_FN", "HCGUARD_SLOW_MS", "HCGUARD_HANG_S", "HCGUARD_FILE_MODE",
    "HCGUARD_LOG_FILE", "HCGUARD_PRINT_LIMIT", "HCGUARD_COPY_THREADS", "HCGUARD_BACKTRACE",
    "HCGUARD_NO_FINDING", "HCGUARD_WARNINGS_AS_ERRORS", "HCGUARD_NVTX", "RANK", "A",
};
#define NVARS (sizeof names / sizeof names[0])
static const char *values[NVARS];

static const char *fuzz_getenv(const char *name)
{
    for (size_t i = 0; i < NVARS; i++)
        if (strcmp(names[i], name) == 0)
            return values[i];
    return NULL;
}

static void check_name(const char *s, size_t cap)
{
    if (!memchr(s, '\0', cap))
        abort();
}

static void check_config(const hcg_config *c, int rc, const char *err)
{
    if ((rc == 0) != (err[0] == '\0') || (rc != 0 && rc != -1))
        abort();
    if (c->mode > HCG_MODE_OFF || c->error_exitcode < 0 || c->error_exitcode > 255)
        abort();
    if ((c->summary | c->debug | c->recheck_always | c->warnings_as_errors | c->nvtx) & ~1)
        abort();
    /* slow_ms 0: slow host functions are not reported (the kind is off) */
    if (!(c->slow_ms >= 0 && c->slow_ms < 1e9 && c->hang_s > 0 && c->hang_s < 1e9))
        abort();
    if (c->slow_ms == 0 && HCG_FINDING_ON(c, HCG_FIND_SLOW))
        abort();
    if (c->copy_threads < 1 || c->copy_threads > HCG_COPY_THREADS_MAX ||
        c->backtrace > HCG_BACKTRACE_MAX)
        abort();
    if (c->no_finding & ~(((1u << HCG_FIND_COUNT) - 1) & ~1u))
        abort();
    if ((c->file_mode & ~0666u) || (c->file_mode & 0600) != 0600)
        abort();
    if (c->print_limit > 1000000000u || c->n_copy_fns > HCG_MAX_COPY_FNS)
        abort();
    for (size_t i = 0; i < c->n_copy_fns; i++) {
        const char *f = c->copy_fns[i];
        check_name(f, sizeof c->copy_fns[i]);
        if (!f[0] || strpbrk(f, " \t\n\r\v\f,"))
            abort();
    }
    check_name(c->log_path, sizeof c->log_path);
    check_name(c->trace_path, sizeof c->trace_path);
    check_name(c->report_path, sizeof c->report_path);
    check_name(c->driver_path, sizeof c->driver_path);
}

/* %q{A} alone: the value as one safe component, or an error if unset. */
static void check_component(void)
{
    char out[HCG_PATH_MAX], err[600];
    int rc = hcg_expand_path("%q{A}", out, sizeof out, fuzz_getenv, err, sizeof err);
    if (!values[NVARS - 1] && rc != -1) /* A unset */
        abort();
    if (rc != 0)
        return;
    if (strchr(out, '/') || strstr(out, "..") || strcmp(out, ".") == 0)
        abort();
    for (const char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            abort();
}

static void check_expand(const char *pattern, size_t outlen)
{
    char out[512], err[600];
    memset(out, 'x', sizeof out);
    int rc = hcg_expand_path(pattern, out, outlen, fuzz_getenv, err, sizeof err);
    if (rc != 0 && rc != -1)
        abort();
    if (outlen && !memchr(out, '\0', outlen))
        abort();
    if (outlen < sizeof out && out[outlen] != 'x') /* nothing past outlen */
        abort();
    if (rc == -1 && ((outlen && out[0]) || !err[0]))
        abort();
    if (rc == 0) {
        int pattern_ctl = 0;
        for (const char *p = pattern; *p; p++)
            pattern_ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
        for (const char *p = out; *p && !pattern_ctl; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    size_t outlen = data[0] % 2 ? (size_t)data[1] % 512 : 512;
    memcpy(copy, data + 2, size - 2);
    copy[size - 2] = '\0';
    /* pieces: pattern, then one value per name; a missing piece is unset */
    const char *end = copy + size - 2, *p = copy;
    const char *pattern = p;
    p += strlen(p) + 1;
    for (size_t i = 0; i < NVARS; i++) {
        values[i] = p < end ? p : NULL;
        if (p < end)
            p += strlen(p) + 1;
    }
    static hcg_config c;
    char err[4096];
    int rc = hcg_config_parse(&c, fuzz_getenv, err, sizeof err);
    check_config(&c, rc, err);
    check_expand(pattern, outlen);
    check_component();
    free(copy);
    return 0;
}
