/*
 * A strict reader of the event log's lines (the writer is src/sinks/jsonl.c).
 *
 * Strict where a mistake would mislead a reader of the log: numbers are
 * JSON's grammar and must fit, addresses are "0x" hex strings, a key may
 * appear once, every field an event of its kind carries must be there,
 * and nothing nests. Lenient only where a newer writer may add: an unknown
 * key with a scalar value is skipped.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/jsonl_read.h"

typedef struct cursor {
    const char *p, *end;
    char *err;
    size_t errlen;
} cursor;

static int fail(cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(cursor *c, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int expect(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p != ch)
        return fail(c, "expected '%c'", ch);
    c->p++;
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The code point of \uXXXX as UTF-8 into out (room >= 3); returns bytes. */
static int put_utf8(unsigned cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

static int escape(cursor *c, char *buf, int *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char ch = *c->p++;
    const char *k = ch ? strchr(from, ch) : NULL;
    if (k) {
        buf[0] = to[k - from];
        *n = 1;
        return 0;
    }
    if (ch != 'u' || c->end - c->p < 4)
        return fail(c, "bad escape in a string");
    unsigned cp = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(*c->p++);
        if (h < 0)
            return fail(c, "bad \\u escape in a string");
        cp = cp << 4 | (unsigned)h;
    }
    if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
        return fail(c, "\\u%04x is not allowed in a string", cp);
    *n = put_utf8(cp, buf);
    return 0;
}

/* A string into out (cap bytes with its NUL; out may be NULL to skip). */
static int string(cursor *c, char *out, size_t cap)
{
    size_t len = 0;
    if (expect(c, '"') != 0)
        return -1;
    while (c->p < c->end && *c->p != '"') {
        char buf[4];
        int n = 1;
        unsigned char ch = (unsigned char)*c->p;
        if (ch < 0x20)
            return fail(c, "a control character in a string");
        if (ch == '\\') {
            c->p++;
            if (c->p >= c->end || escape(c, buf, &n) != 0)
                return fail(c, "bad escape in a string");
        } else {
            buf[0] = (char)ch;
            c->p++;
        }
        if (out && len + (size_t)n >= cap)
            return fail(c, "a string longer than %zu bytes", cap - 1);
        if (out)
            memcpy(out + len, buf, (size_t)n);
        len += (size_t)n;
    }
    if (c->p >= c->end)
        return fail(c, "an unterminated string");
    c->p++;
    if (out)
        out[len] = '\0';
    return 0;
}

/* JSON's number grammar; [start, end) of it in *b, *e. */
static int number_span(cursor *c, const char **b, int *integral)
{
    const char *p = c->p;
    *b = p;
    *integral = 1;
    if (p < c->end && *p == '-')
        p++;
    if (p >= c->end || *p < '0' || *p > '9')
        return fail(c, "not a number");
    if (*p == '0' && p + 1 < c->end && p[1] >= '0' && p[1] <= '9')
        return fail(c, "a number with a leading zero");
    while (p < c->end && *p >= '0' && *p <= '9')
        p++;
    if (p < c->end && *p == '.') {
        *integral = 0;
        if (++p >= c->end || *p < '0' || *p > '9')
            return fail(c, "a number with no digits after '.'");
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        *integral = 0;
        p++;
        if (p < c->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return fail(c, "a number with an empty exponent");
        while (p < c->end && *p >= '0' && *p <= '9')
            p++;
    }
    c->p = p;
    return 0;
}

static int uint_value(cursor *c, uint64_t *out)
{
    const char *b;
    int integral;
    skip_ws(c);
    if (number_span(c, &b, &integral) != 0)
        return -1;
    if (!integral || *b == '-')
        return fail(c, "not a non-negative integer");
    uint64_t v = 0;
    for (const char *p = b; p < c->p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return fail(c, "an integer too large");
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int double_value(cursor *c, double *out)
{
    const char *b;
    int integral;
    char buf[64];
    skip_ws(c);
    if (number_span(c, &b, &integral) != 0)
        return -1;
    size_t n = (size_t)(c->p - b);
    if (n >= sizeof buf || *b == '-')
        return fail(c, "not a non-negative number");
    memcpy(buf, b, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    if (!isfinite(*out))
        return fail(c, "a number out of range");
    return 0;
}

/* "0x" and 1 to 16 hex digits. */
static int hex_value(cursor *c, uint64_t *out)
{
    char s[24];
    if (string(c, s, sizeof s) != 0)
        return fail(c, "not an address (\"0x...\")");
    size_t n = strlen(s);
    if (n < 3 || n > 18 || s[0] != '0' || s[1] != 'x')
        return fail(c, "'%s' is not an address (\"0x\" and 1 to 16 hex digits)", s);
    uint64_t v = 0;
    for (size_t i = 2; i < n; i++) {
        int h = hexval(s[i]);
        if (h < 0)
            return fail(c, "'%s' is not an address (\"0x\" and 1 to 16 hex digits)", s);
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 0;
}

/* The value of a key the reader does not know: a scalar, skipped. */
static int skip_value(cursor *c)
{
    skip_ws(c);
    if (c->p >= c->end)
        return fail(c, "a key with no value");
    if (*c->p == '"')
        return string(c, NULL, 0);
    static const char *const words[] = {"true", "false", "null"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(c->end - c->p) >= n && memcmp(c->p, words[i], n) == 0) {
            c->p += n;
            return 0;
        }
    }
    if (*c->p == '{' || *c->p == '[')
        return fail(c, "a nested value");
    const char *b;
    int integral;
    return number_span(c, &b, &integral);
}

/* ---- fields ---------------------------------------------------------------- */

typedef enum ftype { F_STR, F_HEX, F_UINT, F_PID, F_TID, F_DBL, F_EVENT } ftype;

typedef struct field {
    const char *key;
    ftype type;
    size_t off, cap;
    uint64_t bit;
} field;

/* The fields a header record has (hcg_loghdr_parse reads only these). */
#define HEADER_BITS                                                                          \
    (HCG_LR_EVENT | HCG_LR_PID | HCG_LR_SCHEMA | HCG_LR_VERSION | HCG_LR_PPID | HCG_LR_HOST | \
     HCG_LR_RANK | HCG_LR_MODE | HCG_LR_DRIVER_VERSION | HCG_LR_EXE | HCG_LR_T0 |            \
     HCG_LR_PROC_START)

#define AT(m) offsetof(hcg_logrec, m)
#define STR(k, m, bit) {k, F_STR, AT(m), sizeof(((hcg_logrec *)0)->m), bit}
static const field fields[] = {
    {"event", F_EVENT, AT(kind), 0, HCG_LR_EVENT},
    {"pid", F_PID, AT(pid), 0, HCG_LR_PID},
    {"seq", F_UINT, AT(seq), 0, HCG_LR_SEQ},
    STR("api", api, HCG_LR_API),
    {"fn", F_HEX, AT(fn), 0, HCG_LR_FN},
    STR("fn_name", fn_name, HCG_LR_FN_NAME),
    STR("fn_kind", fn_kind, HCG_LR_FN_KIND),
    {"user_data", F_HEX, AT(user_data), 0, HCG_LR_USER},
    {"stream", F_HEX, AT(stream), 0, HCG_LR_STREAM},
    {"tid", F_TID, AT(tid), 0, HCG_LR_TID},
    {"t_enqueue_ns", F_UINT, AT(t_enqueue_ns), 0, HCG_LR_T_ENQUEUE},
    {"t_start_ns", F_UINT, AT(t_start_ns), 0, HCG_LR_T_START},
    {"t_end_ns", F_UINT, AT(t_end_ns), 0, HCG_LR_T_END},
    {"duration_ns", F_UINT, AT(duration_ns), 0, HCG_LR_DURATION},
    {"dst", F_HEX, AT(dst), 0, HCG_LR_DST},
    {"src", F_HEX, AT(src), 0, HCG_LR_SRC},
    {"bytes", F_UINT, AT(bytes), 0, HCG_LR_BYTES},
    {"gbps", F_DBL, AT(gbps), 0, HCG_LR_GBPS},
    {"graph", F_HEX, AT(graph), 0, HCG_LR_GRAPH},
    {"node", F_HEX, AT(node), 0, HCG_LR_NODE},
    STR("reason", reason, HCG_LR_REASON),
    STR("finding", finding, HCG_LR_FINDING),
    STR("called", called, HCG_LR_CALLED),
    STR("caller", caller, HCG_LR_CALLER),
    {"enqueue_tid", F_TID, AT(enqueue_tid), 0, HCG_LR_ENQUEUE_TID},
    {"reject_seq", F_UINT, AT(reject_seq), 0, HCG_LR_REJECT_SEQ},
    STR("fault", fault, HCG_LR_FAULT),
    STR("fault_code", fault_code, HCG_LR_FAULT_CODE),
    {"fault_addr", F_HEX, AT(fault_addr), 0, HCG_LR_FAULT_ADDR},
    {"schema", F_UINT, AT(schema), 0, HCG_LR_SCHEMA},
    STR("hcguard", version, HCG_LR_VERSION),
    {"ppid", F_UINT, AT(ppid), 0, HCG_LR_PPID},
    STR("host", host, HCG_LR_HOST),
    STR("rank", rank, HCG_LR_RANK),
    STR("mode", mode, HCG_LR_MODE),
    {"driver_version", F_UINT, AT(driver_version), 0, HCG_LR_DRIVER_VERSION},
    STR("exe", exe, HCG_LR_EXE),
    {"t0_ns", F_UINT, AT(t0_ns), 0, HCG_LR_T0},
    {"proc_start", F_UINT, AT(proc_start), 0, HCG_LR_PROC_START},
};

/* A kind a newer writer added is HCG_LOGREC_OTHER (docs/LOG.md: readers
 * skip it); a name that is no kind at all is refused. */
static int event_value(cursor *c, hcg_logrec *r)
{
    static const char *const names[] = {"run", "skip", "reject", "finding", "header"};
    char s[32];
    if (string(c, s, sizeof s) != 0 || !s[0])
        return fail(c, "\"event\" is not a record kind");
    r->kind = HCG_LOGREC_OTHER;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            r->kind = (hcg_logrec_kind)(HCG_LOGREC_RUN + i);
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '-' || *p == '_'))
            return fail(c, "\"event\":\"%s\" is not a record kind", s);
    return 0;
}

static int pid_value(cursor *c, int64_t *out)
{
    uint64_t v;
    if (uint_value(c, &v) != 0 || v == 0 || v > INT32_MAX)
        return fail(c, "\"pid\" is not a process id");
    *out = (int64_t)v;
    return 0;
}

/* A thread id is a pid_t: a trace's pseudo-threads are above them all. */
static int tid_value(cursor *c, uint64_t *out)
{
    if (uint_value(c, out) != 0 || *out > INT32_MAX)
        return fail(c, "not a thread id");
    return 0;
}

static int field_value(cursor *c, const field *f, hcg_logrec *r)
{
    char *at = (char *)r + f->off;
    int rc;
    switch (f->type) {
    case F_STR: rc = string(c, at, f->cap); break;
    case F_HEX: rc = hex_value(c, (uint64_t *)(void *)at); break;
    case F_UINT: rc = uint_value(c, (uint64_t *)(void *)at); break;
    case F_PID: rc = pid_value(c, &r->pid); break;
    case F_TID: rc = tid_value(c, (uint64_t *)(void *)at); break;
    case F_DBL: rc = double_value(c, &r->gbps); break;
    default: rc = event_value(c, r); break;
    }
    if (rc != 0 && c->err && c->errlen) {
        char why[200];
        snprintf(why, sizeof why, "%s", c->err);
        fail(c, "\"%s\": %s", f->key, why);
    }
    return rc;
}

/* One member into r: a field of the table (only among want), or a key
 * skipped as unknown. */
static int member(cursor *c, hcg_logrec *r, uint64_t want)
{
    char key[64];
    if (string(c, key, sizeof key) != 0 || expect(c, ':') != 0)
        return -1;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!(want & fields[i].bit) || strcmp(key, fields[i].key) != 0)
            continue;
        if (r->have & fields[i].bit)
            return fail(c, "\"%s\" appears twice", key);
        r->have |= fields[i].bit;
        return field_value(c, &fields[i], r);
    }
    return skip_value(c);
}

/* What a header must hold. */
static int complete_header(cursor *c, const hcg_logrec *r)
{
    const uint64_t need = HCG_LR_EVENT | HCG_LR_SCHEMA | HCG_LR_VERSION | HCG_LR_PID |
                          HCG_LR_PPID | HCG_LR_HOST | HCG_LR_MODE | HCG_LR_DRIVER_VERSION |
                          HCG_LR_EXE | HCG_LR_T0;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((need & fields[i].bit) && !(r->have & fields[i].bit))
            return fail(c, "no \"%s\"", fields[i].key);
    if (r->schema == 0)
        return fail(c, "\"schema\" is 0");
    return 0;
}

/* The fields every event has, and those its kind adds. */
static int complete(cursor *c, const hcg_logrec *r)
{
    if (strlen(r->rank) >= HCG_LOGREC_RANK_MAX) /* the writer's bound */
        return fail(c, "\"rank\": a string longer than %d bytes", HCG_LOGREC_RANK_MAX - 1);
    if (r->kind == HCG_LOGREC_HEADER)
        return complete_header(c, r);
    if (r->kind == HCG_LOGREC_OTHER)
        return r->have & HCG_LR_PID ? 0 : fail(c, "no \"pid\"");
    const uint64_t all = HCG_LR_EVENT | HCG_LR_PID | HCG_LR_SEQ | HCG_LR_API | HCG_LR_FN |
                         HCG_LR_FN_KIND | HCG_LR_USER | HCG_LR_STREAM | HCG_LR_TID |
                         HCG_LR_T_ENQUEUE;
    const uint64_t times = HCG_LR_T_START | HCG_LR_T_END | HCG_LR_DURATION;
    uint64_t need = all;
    if (r->kind == HCG_LOGREC_RUN || r->kind == HCG_LOGREC_SKIP)
        need |= times;
    if (r->kind == HCG_LOGREC_SKIP || r->kind == HCG_LOGREC_REJECT)
        need |= HCG_LR_REASON;
    if (r->kind == HCG_LOGREC_FINDING)
        need |= HCG_LR_FINDING;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((need & fields[i].bit) && !(r->have & fields[i].bit))
            return fail(c, "no \"%s\"", fields[i].key);
    if ((r->have & times) == times && r->duration_ns != r->t_end_ns - r->t_start_ns)
        return fail(c, "\"duration_ns\" is not t_end_ns - t_start_ns");
    static const struct { uint64_t bits; const char *what; } together[] = {
        {HCG_LR_GRAPH | HCG_LR_NODE, "\"graph\" and \"node\" come together"},
        {HCG_LR_DST | HCG_LR_SRC | HCG_LR_BYTES, "\"dst\", \"src\" and \"bytes\" come together"},
        {HCG_LR_T_START | HCG_LR_T_END | HCG_LR_DURATION,
         "\"t_start_ns\", \"t_end_ns\" and \"duration_ns\" come together"},
    };
    for (size_t i = 0; i < sizeof together / sizeof together[0]; i++)
        if ((r->have & together[i].bits) && (r->have & together[i].bits) != together[i].bits)
            return fail(c, "%s", together[i].what);
    if ((r->have & HCG_LR_GBPS) && r->kind != HCG_LOGREC_RUN)
        return fail(c, "\"gbps\" on an event that did not run");
    if ((r->have & HCG_LR_REJECT_SEQ) && r->kind != HCG_LOGREC_RUN && r->kind != HCG_LOGREC_SKIP)
        return fail(c, "\"reject_seq\" on an event that was not to run");
    if ((r->have & HCG_LR_REJECT_SEQ) && r->reject_seq == 0)
        return fail(c, "\"reject_seq\" is 0");
    return 0;
}

/* One object's members into r (only the fields among want, the rest
 * skipped as unknown), nothing after it. */
static int object(cursor *c, hcg_logrec *r, uint64_t want)
{
    if (expect(c, '{') != 0)
        return fail(c, "not a JSON object");
    skip_ws(c);
    if (c->p < c->end && *c->p == '}')
        return fail(c, "an empty object");
    for (;;) {
        if (member(c, r, want) != 0)
            return -1;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (expect(c, '}') != 0)
            return fail(c, "expected ',' or '}' after a value");
        break;
    }
    skip_ws(c);
    if (c->p != c->end)
        return fail(c, "text after the object");
    return 0;
}

int hcg_logrec_parse(const char *line, size_t len, hcg_logrec *out, char *err, size_t errlen)
{
    cursor c = {line, line + len, err, errlen};
    if (err && errlen)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    if (len > HCG_LOGREC_LINE_MAX)
        return fail(&c, "a line longer than %d bytes", HCG_LOGREC_LINE_MAX);
    if (memchr(line, '\0', len) || memchr(line, '\n', len))
        return fail(&c, "a NUL or newline inside a line");
    if (object(&c, out, ~0ull) != 0)
        return -1;
    return complete(&c, out);
}

/* ---- files ------------------------------------------------------------------ */

typedef struct reader {
    int fd;
    char buf[HCG_LOGREC_LINE_MAX * 2];
    size_t used;
    int eof;
} reader;

static int fill(reader *rd)
{
    while (!rd->eof && rd->used < sizeof rd->buf) {
        ssize_t n = read(rd->fd, rd->buf + rd->used, sizeof rd->buf - rd->used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            rd->eof = 1;
        rd->used += (size_t)n;
        if (memchr(rd->buf, '\n', rd->used))
            break;
    }
    return 0;
}

/* The lines of rd's file, each given to cb. */
static long read_lines(reader *rd, hcg_logrec_cb cb, void *ctx, char *err, size_t errlen)
{
    char why[256];
    long line = 0;
    for (;;) {
        if (fill(rd) != 0) {
            snprintf(err, errlen, "reading the log: %s", strerror(errno));
            return -1;
        }
        if (rd->used == 0)
            return line;
        line++;
        char *nl = memchr(rd->buf, '\n', rd->used);
        if (!nl) {
            snprintf(err, errlen, "line %ld: %s", line,
                     rd->used > HCG_LOGREC_LINE_MAX ? "longer than the limit"
                                                    : "no newline at its end (the log was cut short)");
            return -1;
        }
        hcg_logrec r;
        if (hcg_logrec_parse(rd->buf, (size_t)(nl - rd->buf), &r, why, sizeof why) != 0) {
            snprintf(err, errlen, "line %ld: %s", line, why);
            return -1;
        }
        size_t rest = rd->used - (size_t)(nl + 1 - rd->buf);
        memmove(rd->buf, nl + 1, rest);
        rd->used = rest;
        if (r.kind == HCG_LOGREC_HEADER && r.schema > HCG_LOGREC_SCHEMA) {
            snprintf(err, errlen, "line %ld: a log of schema %llu, newer than this reader's (%d)",
                     line, (unsigned long long)r.schema, HCG_LOGREC_SCHEMA);
            return -1;
        }
        if (r.kind == HCG_LOGREC_OTHER)
            continue;
        if (cb && cb(&r, ctx) != 0)
            return line;
    }
}

/* The reader's 16 KiB on the heap, not in thread-local storage: the
 * library's TLS must fit glibc's small surplus when it is dlopen'd
 * (base/thread.c). */
long hcg_logrec_read_fd(int fd, hcg_logrec_cb cb, void *ctx, char *err, size_t errlen)
{
    reader *rd = malloc(sizeof *rd);
    if (!rd) {
        snprintf(err, errlen, "reading the log: out of memory");
        return -1;
    }
    rd->fd = fd;
    rd->used = 0;
    rd->eof = 0;
    long n = read_lines(rd, cb, ctx, err, errlen);
    free(rd);
    return n;
}

/* ---- the header ----------------------------------------------------------- */

/* The record parser over the header's fields alone (others are skipped as
 * unknown keys), with a header's own rules: "schema" and "pid" needed, no
 * newer schema. A line is a header once its "event" says so: an error
 * before that is "not a header" (1), after it a header refused (-1). */
int hcg_loghdr_parse(const char *line, size_t len, hcg_loghdr *out, char *err, size_t errlen)
{
    cursor c = {line, line + len, err, errlen};
    hcg_logrec r;
    if (err && errlen)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    memset(&r, 0, sizeof r);
    if (len > HCG_LOGREC_LINE_MAX || memchr(line, '\0', len))
        return 1;
    int rc = object(&c, &r, HEADER_BITS);
    if (r.kind != HCG_LOGREC_HEADER)
        return 1;
    if (rc != 0)
        return -1;
    if (!(r.have & HCG_LR_SCHEMA))
        return fail(&c, "a header with no \"schema\"");
    if (r.have & HCG_LR_PID) /* whose header it is, even where it cannot be used */
        out->pid = r.pid;
    out->proc_start = r.proc_start; /* and which process of that pid (0: not said) */
    if (r.schema > HCG_LOGHDR_SCHEMA)
        return fail(&c, "schema %llu is newer than this hcguard reads (%d): read it with a newer "
                    "hcguard", (unsigned long long)r.schema, HCG_LOGHDR_SCHEMA);
    if (!(r.have & HCG_LR_PID))
        return fail(&c, "a header with no \"pid\"");
    if (strlen(r.exe) >= sizeof out->exe)
        return fail(&c, "\"exe\": a string longer than %zu bytes", sizeof out->exe - 1);
    out->schema = r.schema;
    out->ppid = r.ppid;
    out->driver_version = r.driver_version;
    out->t0_ns = r.t0_ns;
    out->proc_start = r.proc_start;
    out->pid = r.pid;
#define SAME_ROOM(m) _Static_assert(sizeof out->m == sizeof r.m, "hcg_loghdr and hcg_logrec: " #m)
    SAME_ROOM(version);
    SAME_ROOM(host);
    SAME_ROOM(rank);
    SAME_ROOM(mode);
#undef SAME_ROOM
    memcpy(out->version, r.version, sizeof out->version);
    memcpy(out->host, r.host, sizeof out->host);
    memcpy(out->rank, r.rank, sizeof out->rank);
    memcpy(out->mode, r.mode, sizeof out->mode);
    memcpy(out->exe, r.exe, strlen(r.exe) + 1); /* shorter than out->exe: above */
    return 0;
}
