/*
 * HCGUARD_* configuration. Read once, with secure_getenv so that a set-id
 * program never takes its log path or driver from the environment.
 *
 * An empty variable counts as unset. A bad value keeps that field at its
 * default and adds one line to the error text; every variable is parsed
 * even after an error, so a user sees all the mistakes at once.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/names.h"

/* Long values are cut in messages so that one line stays readable. */
#define SHOW_MAX 160

static void err_add(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void err_add(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    size_t used = strnlen(err, errlen);
    if (used + 1 >= errlen)
        return;
    if (used > 0) {
        err[used++] = '\n';
        err[used] = '\0';
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + used, errlen - used, fmt, ap);
    va_end(ap);
}

static const char *env(hcg_getenv_fn getenv_fn, const char *name)
{
    const char *v = getenv_fn(name);
    return v && v[0] ? v : NULL;
}

/* ---- the parsers of options.def ----------------------------------------
 * Each: (config, the row's field, value, getenv, why, whylen); 0, or -1
 * with why = the value, quoted and cut at SHOW_MAX bytes, and what is
 * wrong with it ("'fast' is not one of guard, audit, off"), which the
 * library puts after "VARIABLE=" and the launcher after its option. */

static int bad(char *why, size_t whylen, const char *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(char *why, size_t whylen, const char *v, const char *fmt, ...)
{
    if (!why || whylen == 0)
        return -1;
    size_t n = strlen(v);
    int shown = snprintf(why, whylen, "'%.*s%s'", n > SHOW_MAX ? SHOW_MAX : (int)n, v,
                         n > SHOW_MAX ? "..." : "");
    if (shown > 0 && (size_t)shown < whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why + shown, whylen - (size_t)shown, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Every parser has this signature; field is where its row's field is. */
#define PARSER(name)                                                                   \
    static int parse_##name(hcg_config *c, void *field, const char *v,                \
                            hcg_getenv_fn getenv_fn, char *why, size_t whylen)

/* The type of the field each parser writes, checked against each row. */
#define FIELD_TYPE_mode hcg_mode
#define FIELD_TYPE_bool int
#define FIELD_TYPE_exitcode int
#define FIELD_TYPE_recheck int
#define FIELD_TYPE_output char *
#define FIELD_TYPE_driver char *
#define FIELD_TYPE_copy_fns char(*)[128]
#define FIELD_TYPE_buffer size_t
#define FIELD_TYPE_file_mode unsigned
#define FIELD_TYPE_print_limit unsigned
#define FIELD_TYPE_positive double
#define FIELD_TYPE_slow_ms double
#define FIELD_TYPE_copy_threads unsigned
#define FIELD_TYPE_backtrace unsigned
#define FIELD_TYPE_no_finding unsigned

PARSER(mode)
{
    static const struct { const char *name; hcg_mode mode; } modes[] = {
        {"guard", HCG_MODE_GUARD}, {"audit", HCG_MODE_AUDIT}, {"off", HCG_MODE_OFF},
    };
    (void)c, (void)getenv_fn;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(v, modes[i].name) == 0) {
            *(hcg_mode *)field = modes[i].mode;
            return 0;
        }
    }
    return bad(why, whylen, v, " is not one of guard, audit, off");
}

/* "0" or "1". */
PARSER(bool)
{
    (void)c, (void)getenv_fn;
    if ((v[0] == '0' || v[0] == '1') && v[1] == '\0') {
        *(int *)field = v[0] - '0';
        return 0;
    }
    return bad(why, whylen, v, " is not one of 0, 1");
}

PARSER(exitcode)
{
    (void)c, (void)getenv_fn;
    size_t n = strlen(v);
    int ok = n > 0 && n <= 3;
    for (size_t i = 0; ok && i < n; i++)
        ok = isdigit((unsigned char)v[i]);
    long code = ok ? strtol(v, NULL, 10) : -1;
    if (code >= 0 && code <= 255) {
        *(int *)field = (int)code;
        return 0;
    }
    return bad(why, whylen, v,
               " is not an integer from 1 to 255 (0 leaves the exit status alone)");
}

PARSER(recheck)
{
    (void)c, (void)getenv_fn;
    if (strcmp(v, "changed") == 0 || strcmp(v, "always") == 0) {
        *(int *)field = strcmp(v, "always") == 0;
        return 0;
    }
    return bad(why, whylen, v, " is not one of changed, always");
}

/* An output file's name (HCGUARD_LOG, HCGUARD_TRACE, HCGUARD_LOG_FILE):
 * expanded into the field, and kept as given in the pattern that follows
 * it, for a fork child's own %p. */
#define PATTERN_FOLLOWS(path, pattern)                                                 \
    _Static_assert(offsetof(hcg_config, pattern) ==                                    \
                       offsetof(hcg_config, path) + HCG_PATH_MAX, #pattern " after " #path)
PATTERN_FOLLOWS(log_path, log_pattern);
PATTERN_FOLLOWS(trace_path, trace_pattern);
PATTERN_FOLLOWS(report_path, report_pattern);

PARSER(output)
{
    char *path = field, *pattern = path + HCG_PATH_MAX, reason[600];
    (void)c;
    if (hcg_expand_path(v, path, HCG_PATH_MAX, getenv_fn, reason, sizeof reason) == 0) {
        /* One too long to keep is only used as expanded, by every process. */
        if (strlen(v) < HCG_PATH_MAX)
            memcpy(pattern, v, strlen(v) + 1);
        return 0;
    }
    path[0] = '\0';
    return bad(why, whylen, v, ": %s", reason);
}

PARSER(driver)
{
    (void)c, (void)getenv_fn;
    size_t n = strlen(v);
    if (n < HCG_PATH_MAX) {
        memcpy(field, v, n + 1);
        return 0;
    }
    return bad(why, whylen, v, " is not a path shorter than %d bytes", HCG_PATH_MAX);
}

/* One comma-separated item, [b, e), trimmed into the next slot. */
static int copy_fn_item(hcg_config *c, const char *b, const char *e,
                        const char **reason)
{
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    size_t n = (size_t)(e - b);
    int blank = 0;
    for (const char *q = b; q < e; q++)
        blank |= isspace((unsigned char)*q) || iscntrl((unsigned char)*q);
    if (n == 0)
        *reason = "an empty name";
    else if (blank)
        *reason = "a name with a space or control character in it";
    else if (n >= sizeof c->copy_fns[0])
        *reason = "a name of 128 bytes or more";
    else if (c->n_copy_fns >= HCG_MAX_COPY_FNS)
        *reason = "more than 32 names";
    else {
        memcpy(c->copy_fns[c->n_copy_fns], b, n);
        c->copy_fns[c->n_copy_fns++][n] = '\0';
        return 0;
    }
    return -1;
}

/* The names and their count: the field is copy_fns, the count beside it. */
PARSER(copy_fns)
{
    _Static_assert(HCG_MAX_COPY_FNS == 32, "message below says 32");
    (void)field, (void)getenv_fn;
    const char *reason = NULL;
    for (const char *b = v;;) {
        const char *e = strchr(b, ',');
        if (!e)
            e = b + strlen(b);
        if (copy_fn_item(c, b, e, &reason) != 0)
            break;
        if (*e == '\0')
            return 0;
        b = e + 1;
    }
    c->n_copy_fns = 0;
    memset(c->copy_fns, 0, sizeof c->copy_fns);
    return bad(why, whylen, v,
               " has %s; it takes comma-separated symbol names, at most 32, each "
               "shorter than 128 bytes, without spaces",
               reason);
}

/* A size in bytes, with an optional K, M or G (binary: KiB, MiB, GiB),
 * from HCG_BUFFER_MIN to HCG_BUFFER_MAX. */
int hcg_parse_buffer_size(const char *v, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long n = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
    unsigned shift = 0;
    if (end && end != v && *end && !end[1]) {
        const char *units = "KMG";
        const char *u = strchr(units, toupper((unsigned char)*end));
        shift = u && *end ? 10u * (unsigned)(u - units + 1) : 64;
        end++;
    }
    if (errno != 0 || !end || end == v || *end != '\0' || shift >= 64 ||
        n > (HCG_BUFFER_MAX >> shift) || (n << shift) < HCG_BUFFER_MIN)
        return -1;
    *out = (size_t)(n << shift);
    return 0;
}

PARSER(buffer)
{
    (void)c, (void)getenv_fn;
    if (hcg_parse_buffer_size(v, field) == 0)
        return 0;
    return bad(why, whylen, v, " is not %s", HCG_BUFFER_EXPECTED);
}

/* An octal file mode for created files: read and write for the owner,
 * nothing executable or special ("0600", "0644", "640"). */
PARSER(file_mode)
{
    (void)c, (void)getenv_fn;
    size_t n = strlen(v);
    int ok = n >= 3 && n <= 4 && strspn(v, "01234567") == n;
    unsigned long m = ok ? strtoul(v, NULL, 8) : 0;
    if (ok && (m & ~0666ul) == 0 && (m & 0600) == 0600) {
        *(unsigned *)field = (unsigned)m;
        return 0;
    }
    return bad(why, whylen, v,
               " is not an octal mode with read and write for the owner and nothing "
               "executable, from 0600 to 0666 (e.g. 0600, 0644)");
}

/* How many findings are printed: 0 (no limit) to 1e9. */
PARSER(print_limit)
{
    (void)c, (void)getenv_fn;
    size_t n = strlen(v);
    if (n > 0 && n <= 10 && strspn(v, "0123456789") == n) {
        unsigned long long l = strtoull(v, NULL, 10);
        if (l <= 1000000000ull) {
            *(unsigned *)field = (unsigned)l;
            return 0;
        }
    }
    return bad(why, whylen, v, " is not an integer from 0 (no limit) to 1000000000");
}

/* A positive number (milliseconds or seconds), e.g. "1", "0.5", "50",
 * below 1e9 (the limit said: a huge one is positive, only too large). */
PARSER(positive)
{
    (void)c, (void)getenv_fn;
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno == 0 && end && end != v && *end == '\0' && d > 0 && d < 1e9) {
        *(double *)field = d;
        return 0;
    }
    return bad(why, whylen, v, " is not a positive number below 1000000000");
}

/* HCGUARD_SLOW_MS: a positive number of milliseconds, or 0: no slow
 * host function is reported (as HCGUARD_NO_FINDING=slow, which
 * hcg_config_parse adds). */
PARSER(slow_ms)
{
    if (strcmp(v, "0") == 0) {
        *(double *)field = 0;
        return 0;
    }
    return parse_positive(c, field, v, getenv_fn, why, whylen);
}

/* How many threads a large copy is split across: 1 (not split) to
 * HCG_COPY_THREADS_MAX. */
PARSER(copy_threads)
{
    (void)c, (void)getenv_fn;
    size_t n = strlen(v);
    if (n > 0 && n <= 3 && strspn(v, "0123456789") == n) {
        unsigned long t = strtoul(v, NULL, 10);
        if (t >= 1 && t <= HCG_COPY_THREADS_MAX) {
            *(unsigned *)field = (unsigned)t;
            return 0;
        }
    }
    return bad(why, whylen, v, " is not an integer from 1 (copies not split) to %d",
               HCG_COPY_THREADS_MAX);
}

/* HCGUARD_BACKTRACE: frames printed under each finding, 0 to 64. */
PARSER(backtrace)
{
    (void)c, (void)getenv_fn;
    size_t n = strlen(v);
    if (n > 0 && n <= 2 && strspn(v, "0123456789") == n && atoi(v) <= HCG_BACKTRACE_MAX) {
        *(unsigned *)field = (unsigned)atoi(v);
        return 0;
    }
    return bad(why, whylen, v, " is not a number of frames from 0 to %d", HCG_BACKTRACE_MAX);
}

int hcg_finding_by_name(const char *name, size_t len)
{
    /* Short names: the stable name without what every kind says. */
    static const char *const short_names[HCG_FIND_COUNT] = {
        [HCG_FIND_CUDA_CALL] = "cuda-call", [HCG_FIND_LIBC_FN] = "libc-function",
        [HCG_FIND_CLOSURE] = "closure",     [HCG_FIND_SLOW] = "slow",
        [HCG_FIND_HANG] = "hung",           [HCG_FIND_ONESHOT_IN_GRAPH] = "oneshot-in-graph",
    };
    for (int f = 1; f < HCG_FIND_COUNT; f++) {
        const char *full = hcg_finding_name((hcg_finding)f), *sh = short_names[f];
        if ((strlen(full) == len && strncmp(full, name, len) == 0) ||
            (sh && strlen(sh) == len && strncmp(sh, name, len) == 0))
            return f;
    }
    return 0;
}

/* HCGUARD_NO_FINDING: finding kinds separated by commas (blanks around
 * a name dropped). */
PARSER(no_finding)
{
    (void)c, (void)getenv_fn;
    unsigned mask = 0;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, ",");
        size_t k = n;
        while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t'))
            k--;
        int f = k ? hcg_finding_by_name(p, k) : 0;
        if (!f) {
            char kinds[512] = "";
            for (int i = 1; i < HCG_FIND_COUNT; i++)
                snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s",
                         i > 1 ? ", " : "", hcg_finding_name((hcg_finding)i));
            return bad(why, whylen, v,
                       ": '%.*s' is not a finding kind; the kinds are %s (or the first word "
                       "or two: cuda-call, libc-function, closure, slow, hung, "
                       "oneshot-in-graph)",
                       (int)(k < 64 ? k : 64), p, kinds);
        }
        mask |= 1u << f;
        if (!p[n])
            break;
        p += n + 1;
    }
    *(unsigned *)field = mask;
    return 0;
}

/* ---- the table ---------------------------------------------------------- */

#define HCG_OPTION(id, var, opt, kind, arg, parser, field, dflt, help)                 \
    _Static_assert(_Generic(((hcg_config *)0)->field, FIELD_TYPE_##parser: 1, default: 0), \
                   var ": parse_" #parser " does not write a field of this type");
#include "base/options.def"
#undef HCG_OPTION

const hcg_option hcg_options[HCG_OPT_COUNT] = {
#define HCG_OPTION(id, var, opt, kind, arg, parser, field, dflt, help)                 \
    [HCG_OPT_##id] = {var, opt, HCG_OPT_KIND_##kind, arg, dflt, help, parse_##parser,   \
                      offsetof(hcg_config, field)},
#include "base/options.def"
#undef HCG_OPTION
};

static void config_defaults(hcg_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = HCG_MODE_GUARD;
    c->summary = 1;
    c->slow_ms = 10.0;
    c->hang_s = 10.0;
    c->buffer_bytes = HCG_BUFFER_DEFAULT;
    c->file_mode = 0600;
    c->print_limit = HCG_PRINT_LIMIT_DEFAULT;
    c->copy_threads = HCG_COPY_THREADS_DEFAULT;
}

static int option_parse(hcg_config *c, const hcg_option *o, const char *v,
                        hcg_getenv_fn getenv_fn, char *why, size_t whylen)
{
    return o->parse(c, (char *)c + o->field_offset, v, getenv_fn, why, whylen);
}

int hcg_option_check(const hcg_option *o, const char *v, hcg_getenv_fn getenv_fn,
                     char *why, size_t whylen)
{
    static hcg_config scratch; /* 40 KiB: not on the stack */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    config_defaults(&scratch);
    int rc = option_parse(&scratch, o, v, getenv_fn, why, whylen);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The process's rank, as MPI launchers and Slurm export it: the first of
 * these that is set and a plain decimal number. Not an error when none
 * is: most programs are not ranks. */
static void read_rank(hcg_config *c, hcg_getenv_fn getenv_fn)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "MV2_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = env(getenv_fn, vars[i]);
        size_t n = v ? strspn(v, "0123456789") : 0;
        if (n > 0 && v[n] == '\0' && n < sizeof c->rank) {
            memcpy(c->rank, v, n + 1);
            return;
        }
    }
}

int hcg_config_parse(hcg_config *c, hcg_getenv_fn getenv_fn, char *err,
                     size_t errlen)
{
    int bad_values = 0;
    if (err && errlen)
        err[0] = '\0';
    config_defaults(c);
    for (size_t i = 0; i < HCG_OPT_COUNT; i++) {
        const hcg_option *o = &hcg_options[i];
        const char *v = env(getenv_fn, o->var);
        char why[SHOW_MAX + 800];
        if (v && option_parse(c, o, v, getenv_fn, why, sizeof why) != 0) {
            err_add(err, errlen, "%s=%s", o->var, why);
            bad_values = 1;
        }
    }
    /* HCGUARD_SLOW_MS=0: no slow host function is reported. */
    if (c->slow_ms == 0)
        c->no_finding |= 1u << HCG_FIND_SLOW;
    read_rank(c, getenv_fn);
    return bad_values ? -1 : 0;
}

/* ---- %-expansion of file names ----------------------------------------- */

typedef struct outbuf {
    char *p;
    size_t len, cap;
    int overflow;
} outbuf;

static void out_put(outbuf *o, const char *s, size_t n)
{
    if (n >= o->cap - o->len) {
        o->overflow = 1;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void out_putnum(outbuf *o, long v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%ld", v);
    out_put(o, num, (size_t)n);
}

static void out_host(outbuf *o)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown-host");
    host[sizeof host - 1] = '\0';
    out_put(o, host, strlen(host));
}

/* A variable's value as one safe file-name component: '/', control
 * characters and every '.' next to another '.' become '_', so that no
 * value can leave the directory the name gives, climb with "..", or
 * forge a line in anything that prints the name. */
static void out_component(outbuf *o, const char *v)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        int dots = ch == '.' && ((i > 0 && v[i - 1] == '.') || v[i + 1] == '.');
        char safe = (ch == '/' || ch < 0x20 || ch == 0x7f || dots || (ch == '.' && n == 1))
                        ? '_' : (char)ch;
        out_put(o, &safe, 1);
    }
}

/* %q{VAR} at *pp (just past "%q"); advances *pp past the '}'. */
static int out_var(outbuf *o, const char **pp, hcg_getenv_fn getenv_fn,
                   char *err, size_t errlen)
{
    const char *p = *pp;
    if (*p != '{') {
        snprintf(err, errlen, "%%q must be followed by {VAR}");
        return -1;
    }
    const char *end = strchr(p, '}');
    if (!end) {
        snprintf(err, errlen, "unterminated %%q{ (no closing '}')");
        return -1;
    }
    char name[256];
    size_t n = (size_t)(end - p - 1);
    if (n == 0 || n >= sizeof name) {
        snprintf(err, errlen, "%%q{} needs a variable name of 1 to 255 bytes");
        return -1;
    }
    memcpy(name, p + 1, n);
    name[n] = '\0';
    const char *v = getenv_fn ? getenv_fn(name) : NULL;
    if (!v) {
        snprintf(err, errlen, "%%q{%s}: %s is not set", name, name);
        return -1;
    }
    out_component(o, v);
    *pp = end + 1;
    return 0;
}

static void bad_conversion(char c, char *err, size_t errlen)
{
    char shown[8];
    if (c == '\0')
        snprintf(shown, sizeof shown, "%%");
    else if (isprint((unsigned char)c))
        snprintf(shown, sizeof shown, "%%%c", c);
    else
        snprintf(shown, sizeof shown, "%%\\x%02x", (unsigned char)c);
    snprintf(err, errlen,
             "unknown conversion '%s'; accepted are %%p (pid), %%h (host name), "
             "%%q{VAR} (environment variable), %%%%",
             shown);
}

/* One conversion at *pp (just past the '%'). */
static int out_conv(outbuf *o, const char **pp, hcg_getenv_fn getenv_fn,
                    char *err, size_t errlen)
{
    char c = **pp;
    if (c != '\0')
        (*pp)++;
    switch (c) {
    case 'p': out_putnum(o, (long)getpid()); return 0;
    case 'h': out_host(o); return 0;
    case '%': out_put(o, "%", 1); return 0;
    case 'q': return out_var(o, pp, getenv_fn, err, errlen);
    default: bad_conversion(c, err, errlen); return -1;
    }
}

int hcg_expand_path(const char *pattern, char *out, size_t outlen,
                    hcg_getenv_fn getenv_fn, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!out || outlen == 0) {
        snprintf(err, errlen, "no room for the expanded name");
        return -1;
    }
    outbuf o = {out, 0, outlen, 0};
    out[0] = '\0';
    for (const char *p = pattern; *p && !o.overflow;) {
        const char *pct = strchr(p, '%');
        size_t lit = pct ? (size_t)(pct - p) : strlen(p);
        out_put(&o, p, lit);
        p += lit;
        if (!pct)
            break;
        p++;
        if (out_conv(&o, &p, getenv_fn, err, errlen) != 0) {
            out[0] = '\0';
            return -1;
        }
    }
    if (o.overflow) {
        out[0] = '\0';
        snprintf(err, errlen, "expands to more than %zu bytes", outlen - 1);
        return -1;
    }
    return 0;
}

/* ---- the process configuration ----------------------------------------- */

hcg_config hcg_g_config;
static pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

static const char *secure_env(const char *name)
{
    return secure_getenv(name);
}

static void config_load(void)
{
    char err[4096];
    if (hcg_config_parse(&hcg_g_config, secure_env, err, sizeof err) == 0)
        return;
    for (char *line = err; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        hcg_msg("%s; the default is used", line);
        hcg_problem_keep("%s; the default is used", line); /* for the summary */
        line = nl ? nl + 1 : NULL;
    }
}

atomic_int hcg_g_config_ready;

static void config_load_once(void)
{
    hcg_fork_register();
    config_load();
    atomic_store_explicit(&hcg_g_config_ready, 1, memory_order_release);
}

const hcg_config *hcg_config_load(void)
{
    pthread_once(&g_config_once, config_load_once);
    return &hcg_g_config;
}
