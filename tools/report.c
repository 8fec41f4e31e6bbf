/*
 * hcguard report [--trace FILE] [--svg FILE] LOG...
 *
 * Merges the event logs (--log, JSON Lines) of many processes, e.g. one per
 * MPI rank: one summary per process and one of them all, made by the
 * library's own summary and findings sinks from the events read back (so
 * they have the exit summary's layout); one Chrome trace with a named
 * process per process; an SVG plot of host-function run times and queue
 * waits (cumulative distributions, one series per process, log time axis).
 *
 * A process is a pid in a log: a fork child sharing its parent's file is a
 * process of its own, and so is a later process given the same pid (its
 * header's proc_start differs: life_of). Logs of processes that died are read too: a last
 * line cut short is skipped and said, as is any other line that is not an
 * event. A file that cannot be read, is empty or is not an event log is
 * an error (exit status 1) and the others are still reported.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hcg.h"
#include "report.h"
#include "sinks/jsonl_read.h"

/* ---- small growable maps: three 64-bit keys to two counters ---------------- */
typedef struct map_slot {
    uint64_t k[3];
    uint64_t a, b;
    int used;
    char *name; /* the names map: fn -> its name */
} map_slot;

typedef struct map {
    map_slot *s;
    size_t n, used;
} map;

static size_t map_hash(const uint64_t k[3], size_t n)
{
    uint64_t h = k[0] * 0x9e3779b97f4a7c15ull ^ k[1] * 0xc2b2ae3d27d4eb4full ^ k[2];
    h ^= h >> 29;
    return (size_t)(h * 0x165667b19e3779f9ull >> 17) & (n - 1);
}

static map_slot *map_find(map *m, uint64_t k0, uint64_t k1, uint64_t k2);

static int map_grow(map *m)
{
    map old = *m;
    size_t n = old.n ? old.n * 2 : 64;
    m->s = calloc(n, sizeof *m->s);
    if (!m->s) {
        *m = old;
        return -1;
    }
    m->n = n;
    m->used = 0;
    for (size_t i = 0; i < old.n; i++)
        if (old.s[i].used) {
            map_slot *d = map_find(m, old.s[i].k[0], old.s[i].k[1], old.s[i].k[2]);
            d->a = old.s[i].a;
            d->b = old.s[i].b;
            d->name = old.s[i].name;
        }
    free(old.s);
    return 0;
}

/* The slot of the key, added (zeroed) if new. Exits if out of memory: a
 * report that silently dropped events would mislead. */
static map_slot *map_find(map *m, uint64_t k0, uint64_t k1, uint64_t k2)
{
    if (2 * (m->used + 1) > m->n && map_grow(m) != 0) {
        fprintf(stderr, "hcguard report: out of memory\n");
        exit(1);
    }
    uint64_t k[3] = {k0, k1, k2};
    size_t i = map_hash(k, m->n);
    while (m->s[i].used && memcmp(m->s[i].k, k, sizeof k) != 0)
        i = (i + 1) & (m->n - 1);
    if (!m->s[i].used) {
        m->s[i].used = 1;
        memcpy(m->s[i].k, k, sizeof k);
        m->used++;
    }
    return &m->s[i];
}

static const map_slot *map_get(const map *m, uint64_t k0, uint64_t k1, uint64_t k2)
{
    if (!m->n)
        return NULL;
    uint64_t k[3] = {k0, k1, k2};
    size_t i = map_hash(k, m->n);
    while (m->s[i].used) {
        if (memcmp(m->s[i].k, k, sizeof k) == 0)
            return &m->s[i];
        i = (i + 1) & (m->n - 1);
    }
    return NULL;
}

static void map_free(map *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->s[i].name);
    free(m->s);
    memset(m, 0, sizeof *m);
}

/* ---- what is read ---------------------------------------------------------- */

/* Latency plot bins: 10 a decade from 10 ns (10^1) to 10^4 s (10^13 ns). */
#define LAT_DEC_LO 1
#define LAT_DEC_HI 13
#define LAT_PER_DEC 10
#define LAT_BINS ((LAT_DEC_HI - LAT_DEC_LO) * LAT_PER_DEC + 2) /* + below, above */

typedef struct lat {
    uint64_t n, b[LAT_BINS];
    uint64_t min, max;
} lat;

typedef struct logfile {
    const char *path;
    int bad;                /* unusable: said */
    uint64_t lines, bad_lines;
    long first_bad_line;
    char first_bad[512];
    int cut_short;          /* the last line had no newline */
    uint64_t over_max;      /* lines of processes past the bounds */
} logfile;

typedef struct proc {
    int file;
    int64_t pid;
    unsigned life; /* the pid's process in its file, from 0 (life_of) */
    int has_header;
    hcg_loghdr hdr;
    char name[320];
    hcg_counts c;
    uint64_t launched[HCG_FN_KIND_COUNT];
    uint64_t nodes, events, slow_logged;
    int audit_seen;        /* no header: a rejected record that ran anyway */
    int linked;            /* its runs name their rejections (reject_seq) */
    long refused_line;     /* a header of it this hcguard cannot use (line), 0 */
    char refused_why[512];
    map node_set, matched; /* graph nodes seen; (fn, record, reason): rejects, skips */
    uint64_t t_min, tid_max; /* the earliest time; the highest thread id */
    lat run, wait;
} proc;

static struct {
    logfile *files;
    size_t n_files;
    proc *procs;
    size_t n_procs, cap_procs;
    map names;      /* fn -> name, over every process */
    map host_base;  /* hash of a host name -> the earliest time seen there */
    map known;      /* (file, pid, life) of every process reported */
    map lives;      /* the lives of pids in the file being read (life_of) */
    FILE *trace;
    int trace_started;
} R;

/* ---- names of the log's strings --------------------------------------------- */

static int kind_of(const char *name, const char *(*fn)(int), int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(fn(i), name) == 0)
            return i;
    return -1;
}

static const char *fnkind_n(int i) { return hcg_fnkind_name((hcg_fnkind)i); }
static const char *status_n(int i) { return hcguard_status_name((hcguard_status)i); }
static const char *finding_n(int i) { return i ? hcg_finding_name((hcg_finding)i) : ""; }
static const char *api_n(int i) { return hcg_api_name((hcg_api)i); }

/* The audit names the driver function a host function called by its
 * thunk's index (hcg_thunk_name). The launcher hands out no thunks, so it
 * makes one for each name a log gives, never called: its "real" function
 * is a byte of this table, a key no driver function can have. */
static char called_keys[HCG_THUNK_MAX];
static unsigned n_called_keys;

static uint64_t thunk_code(const char *called)
{
    for (unsigned i = 0; i < hcg_thunk_count(); i++) {
        const char *n = hcg_thunk_name(i);
        if (n && strcmp(n, called) == 0)
            return i + 1;
    }
    return 0;
}

/* What a cuda-call finding's "called" names, as the audit encodes it. */
static uint64_t called_code(const char *called)
{
    int a = called[0] ? kind_of(called, api_n, HCG_API_COUNT) : -1;
    if (a >= 0)
        return HCG_FIND_WRAPPER_BIT | (uint64_t)a;
    uint64_t code = called[0] ? thunk_code(called) : 0;
    if (!code && called[0] && n_called_keys < HCG_THUNK_MAX) {
        hcg_thunk_for(called, &called_keys[n_called_keys++]);
        code = thunk_code(called);
    }
    return code;
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Functions are named from the logs, never from this address space. */
static int name_from_logs(const void *fn, char *buf, size_t len, char *obj, size_t objlen)
{
    if (obj && objlen)
        obj[0] = '\0';
    const map_slot *s = map_get(&R.names, (uint64_t)(uintptr_t)fn, 0, 0);
    if (!s || !s->name || !buf || !len)
        return -1;
    snprintf(buf, len, "%s", s->name);
    return 0;
}

/* Call sites as the logs name them, numbered from 1 in the order first
 * seen: an event's caller is its number here. */
#define MAX_CALLERS 4096
static char *callers[MAX_CALLERS];
static unsigned n_callers;

static uintptr_t caller_of(const hcg_logrec *r)
{
    if (!(r->have & HCG_LR_CALLER) || !r->caller[0])
        return 0;
    for (unsigned i = 0; i < n_callers; i++)
        if (!strcmp(callers[i], r->caller))
            return i + 1;
    if (n_callers == MAX_CALLERS || !(callers[n_callers] = strdup(r->caller)))
        return 0; /* past the bound: the site goes unnamed */
    return ++n_callers;
}

static int caller_name_from_logs(uintptr_t site, char *buf, size_t len)
{
    snprintf(buf, len, "%s", site && site <= n_callers ? callers[site - 1] : "unknown");
    return 0;
}

static void note_name(const hcg_logrec *r)
{
    if (!(r->have & HCG_LR_FN_NAME) || !r->fn_name[0] || !strcmp(r->fn_name, "anonymous") ||
        !strcmp(r->fn_name, "unknown"))
        return;
    map_slot *s = map_find(&R.names, r->fn, 0, 0);
    if (!s->name)
        s->name = strdup(r->fn_name);
}

/* ---- reading a log ------------------------------------------------------------ */

/* A line of lf: an event r or a header h, of the process (pid, life). */
typedef int (*line_cb)(logfile *lf, const hcg_logrec *r, const hcg_loghdr *h, unsigned life,
                       void *ctx);

static void bad_line(logfile *lf, long line, const char *why)
{
    if (!lf->bad_lines++) {
        lf->first_bad_line = line;
        snprintf(lf->first_bad, sizeof lf->first_bad, "%s", why);
    }
}

/* A string read from a log, made safe to print, and to write into JSON
 * and XML: a byte that is not part of valid UTF-8, or a control
 * character, becomes '?'. */
static void clean(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        unsigned n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3
                                 : (*p & 0xf8) == 0xf0 ? 4 : 0;
        unsigned ok = n && !(n == 2 && *p < 0xc2) && !(n == 4 && *p > 0xf4);
        for (unsigned i = 1; ok && i < n; i++)
            ok = (p[i] & 0xc0) == 0x80;
        if (!ok || *p < 0x20 || *p == 0x7f) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

static void clean_rec(hcg_logrec *r)
{
    clean(r->api);
    clean(r->fn_name);
    clean(r->fn_kind);
    clean(r->reason);
    clean(r->finding);
    clean(r->called);
    clean(r->caller);
}

static void clean_hdr(hcg_loghdr *h)
{
    clean(h->version);
    clean(h->host);
    clean(h->rank);
    clean(h->mode);
    clean(h->exe);
}

/* ---- lives: one pid, several processes ------------------------------------
 * A pid names another process from a header whose proc_start (and host)
 * is not that of an earlier header of the pid in the file (a pid reused:
 * a log that a long-lived process tree shares collects all of its
 * processes; or two hosts' processes of one pid in one file); a header of
 * one seen before (an image exec started, after another's lines) goes
 * back to that process. A header without proc_start (no /proc, an older
 * hcguard) changes nothing. Records name no host: each is the current
 * process's of its pid. Counted anew at the start of each read of a file,
 * so that each pass gives a line the same life. */
static unsigned life_of(int64_t pid, const hcg_loghdr *h)
{
    /* a: the pid's current life; b: how many it has had */
    map_slot *cur = map_find(&R.lives, (uint64_t)pid, 0, 0);
    if (h && h->proc_start) {
        /* a: that process's life; b: seen. Its add may move cur's slot,
         * found again after (there then, so added no more: k stays). */
        map_slot *k = map_find(&R.lives, (uint64_t)pid, str_hash(h->host) | 1, h->proc_start);
        cur = map_find(&R.lives, (uint64_t)pid, 0, 0);
        if (!k->b) {
            k->b = 1;
            k->a = cur->b++;
        }
        cur->a = k->a;
    }
    return (unsigned)cur->a;
}

/* One line to cb, as an event or a header. -1: not a line of a log, -2: a
 * header that cannot be used (why). */
static int one_line(logfile *lf, const char *p, size_t n, line_cb cb, void *ctx, char *why,
                    size_t whylen)
{
    hcg_logrec r;
    hcg_loghdr h;
    char herr[256];
    if (hcg_logrec_parse(p, n, &r, why, whylen) == 0 && r.kind != HCG_LOGREC_HEADER) {
        clean_rec(&r);
        return cb(lf, &r, NULL, life_of(r.pid, NULL), ctx);
    }
    int hr = hcg_loghdr_parse(p, n, &h, herr, sizeof herr);
    if (hr == 0) {
        clean_hdr(&h);
        return cb(lf, NULL, &h, life_of(h.pid, &h), ctx);
    }
    if (hr < 0) {
        if (h.pid) /* another process of the pid from here too (refuse_proc) */
            life_of(h.pid, &h);
        snprintf(why, whylen, "%s", herr);
        return -2;
    }
    return -1;
}

/* Processes that share a log append whole lines, but one killed while
 * writing leaves its line cut short, and the next process's line goes on
 * from there, on the same line. That line, the last record begun in it
 * (a JSON string in a record holds no unescaped quote, so the pattern
 * begins a record), is read as its own: 0 if it is one. */
static int glued_tail(logfile *lf, const char *p, size_t n, line_cb cb, void *ctx)
{
    static const char start[] = "{\"event\":\"";
    const char *last = NULL;
    for (const char *q = p + 1; (q = memmem(q, n - (size_t)(q - p), start, sizeof start - 1));
         q++)
        last = q;
    char why[512];
    return last ? one_line(lf, last, n - (size_t)(last - p), cb, ctx, why, sizeof why) : -1;
}

static proc *proc_of(int file, int64_t pid, unsigned life);
static int file_index(const logfile *lf);

/* A header after the first line that this hcguard cannot use (a newer
 * schema): the process it names is not reported, none of its records
 * (those before it included) counted. */
static void refuse_proc(logfile *lf, const char *p, size_t n, long no, const char *why)
{
    hcg_loghdr h;
    char err[8];
    proc *pr;
    if (hcg_loghdr_parse(p, n, &h, err, sizeof err) < 0 && h.pid &&
        (pr = proc_of(file_index(lf), h.pid, life_of(h.pid, NULL))) && !pr->refused_line) {
        pr->refused_line = no;
        snprintf(pr->refused_why, sizeof pr->refused_why, "%s", why);
    }
}

/* The next line of f into buf (cap bytes): its length without the
 * newline, or -1 at the end. A longer line is read to its end, its head
 * kept (*long_line: not an event); *cut: it had no newline. A hostile file
 * costs no more memory than a line of the log's bound. */
static long next_line(FILE *f, char *buf, size_t cap, int *cut, int *long_line)
{
    size_t n = 0;
    int ch;
    *long_line = 0;
    while ((ch = getc_unlocked(f)) != EOF && ch != '\n') {
        if (n < cap - 1)
            buf[n++] = (char)ch;
        else
            *long_line = 1;
    }
    if (ch == EOF && n == 0)
        return -1;
    *cut = ch == EOF;
    return (long)n;
}

/* Every line of lf to cb. survey: count and say what is skipped (the first
 * pass); later passes skip the same lines quietly. 0, or -1 if the file
 * cannot be read (said, lf->bad set). */
static int read_log(logfile *lf, int survey, line_cb cb, void *ctx)
{
    FILE *f = fopen(lf->path, "re");
    map_free(&R.lives);
    if (!f) {
        fprintf(stderr, "hcguard report: cannot read %s: %s\n", lf->path, strerror(errno));
        lf->bad = 1;
        return -1;
    }
    static char line[HCG_LOGREC_LINE_MAX + 1];
    char why[512];
    long n, no = 0;
    int rc = 0, last, long_line;
    while ((n = next_line(f, line, sizeof line, &last, &long_line)) >= 0) {
        no++;
        if (survey)
            lf->lines++;
        int got = long_line ? -1 : one_line(lf, line, (size_t)n, cb, ctx, why, sizeof why);
        if (long_line)
            snprintf(why, sizeof why, "a line longer than %d bytes", HCG_LOGREC_LINE_MAX);
        if (got == 0)
            continue;
        if (got == -1 && no > 1 && glued_tail(lf, line, (size_t)n, cb, ctx) == 0) {
            if (survey) /* the head, cut short */
                bad_line(lf, no, "a line cut short (a process died writing it), and the "
                                 "next written on after it: that one read");
            continue;
        }
        if (survey && no == 1 && last) {
            fprintf(stderr, "hcguard report: %s holds one line, cut short: no events (the "
                    "process died writing its first)\n", lf->path);
            lf->bad = 1;
            rc = -1;
            break;
        }
        if (survey && no == 1) {
            fprintf(stderr, "hcguard report: %s %s (line 1: %s)\n", lf->path,
                    got == -2 ? "has a header this hcguard cannot use"
                              : "is not an hcguard event log", why);
            lf->bad = 1;
            rc = -1;
            break;
        }
        if (survey && last)
            lf->cut_short = 1;
        else if (survey)
            bad_line(lf, no, why);
        if (survey && got == -2)
            refuse_proc(lf, line, (size_t)n, no, why);
    }
    if (ferror(f) && !lf->bad) {
        fprintf(stderr, "hcguard report: cannot read %s: %s\n", lf->path, strerror(errno));
        lf->bad = 1;
        rc = -1;
    }
    fclose(f);
    return rc;
}

/* ---- the first pass: processes, counts, names, the time bases ---------------- */

/* Each process costs a few KiB, and a pass over its log: bounds, so that a
 * hostile log of a million pids is cut short rather than thrashed over
 * (a file is read once for each of its processes). */
#define REPORT_MAX_PROCS 16384
#define REPORT_MAX_PROCS_PER_FILE 256

/* Processes are few per file, and a file's lines mostly one process's: the
 * last one found is tried first, then the file's own, newest first. */
static int is_proc(const proc *p, int file, int64_t pid, unsigned life)
{
    return p->file == file && p->pid == pid && p->life == life;
}

static proc *proc_of(int file, int64_t pid, unsigned life)
{
    static size_t last;
    if (last < R.n_procs && is_proc(&R.procs[last], file, pid, life))
        return &R.procs[last];
    size_t in_file = 0;
    for (size_t i = R.n_procs; i-- > 0 && R.procs[i].file == file; in_file++)
        if (is_proc(&R.procs[i], file, pid, life))
            return &R.procs[last = i];
    last = R.n_procs;
    if (R.n_procs == REPORT_MAX_PROCS || in_file == REPORT_MAX_PROCS_PER_FILE)
        return NULL;
    if (R.n_procs == R.cap_procs) {
        size_t cap = R.cap_procs ? 2 * R.cap_procs : 16;
        proc *p = realloc(R.procs, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "hcguard report: out of memory\n");
            exit(1);
        }
        R.procs = p;
        R.cap_procs = cap;
    }
    proc *p = &R.procs[R.n_procs++];
    memset(p, 0, sizeof *p);
    p->file = file;
    p->pid = pid;
    p->life = life;
    p->t_min = UINT64_MAX;
    return p;
}

static int file_index(const logfile *lf)
{
    return (int)(lf - R.files);
}

/* The earliest time of an event. */
static uint64_t first_time(const hcg_logrec *r)
{
    uint64_t t = r->t_enqueue_ns;
    if ((r->have & HCG_LR_T_START) && r->t_start_ns < t)
        t = r->t_start_ns;
    return t;
}

static void count_event(proc *p, const hcg_logrec *r)
{
    int k = kind_of(r->fn_kind, fnkind_n, HCG_FN_KIND_COUNT);
    int graph = (r->have & HCG_LR_GRAPH) && r->graph;
    if (k < 0)
        k = HCG_FN_ORDINARY;
    if (r->have & HCG_LR_REJECT_SEQ)
        p->linked = p->audit_seen = 1; /* only audit mode writes it */
    if (r->kind == HCG_LOGREC_RUN || r->kind == HCG_LOGREC_SKIP) {
        if (graph) {
            map_slot *s = map_find(&p->node_set, r->graph, r->node, 0);
            if (!s->a++) {
                p->nodes++;
                p->launched[k]++;
            }
            p->c.v[HCG_CNT_GRAPH_RUNS]++;
        } else {
            p->launched[k]++;
        }
    }
    int why = r->kind == HCG_LOGREC_FINDING ? kind_of(r->finding, finding_n, HCG_FIND_COUNT)
                                            : kind_of(r->reason, status_n, HCGUARD_STATUS_COUNT);
    if (why < 0)
        why = 0;
    switch (r->kind) {
    case HCG_LOGREC_RUN:
        p->c.v[HCG_CNT_RAN + k]++;
        if (hcg_fnkind_is_copy((hcg_fnkind)k))
            p->c.v[HCG_CNT_BYTES] += r->bytes;
        break;
    case HCG_LOGREC_SKIP:
        p->c.v[HCG_CNT_SKIPPED + why]++;
        map_find(&p->matched, r->fn, r->user_data, (uint64_t)why)->b++;
        p->c.v[HCG_CNT_SKIPPED_REPORTED] += (r->have & HCG_LR_REJECT_SEQ) != 0;
        break;
    case HCG_LOGREC_REJECT:
        p->c.v[HCG_CNT_REJECTED + why]++;
        map_find(&p->matched, r->fn, r->user_data, (uint64_t)why)->a++;
        break;
    default:
        p->c.v[HCG_CNT_FINDING + why]++;
        p->slow_logged += why == HCG_FIND_SLOW;
        break;
    }
}

static int survey_line(logfile *lf, const hcg_logrec *r, const hcg_loghdr *h, unsigned life,
                       void *ctx)
{
    (void)ctx;
    proc *p = proc_of(file_index(lf), h ? h->pid : r->pid, life);
    if (!p) {
        lf->over_max++;
        return 0;
    }
    if (h) {
        if (!p->has_header) {
            p->has_header = 1;
            p->hdr = *h;
        }
        return 0;
    }
    p->events++;
    if (r->tid > p->tid_max)
        p->tid_max = r->tid;
    if ((r->have & HCG_LR_ENQUEUE_TID) && r->enqueue_tid > p->tid_max)
        p->tid_max = r->enqueue_tid;
    note_name(r);
    count_event(p, r);
    uint64_t t = first_time(r);
    if (t < p->t_min)
        p->t_min = t;
    return 0;
}

/* A record skipped when it ran, reported at enqueue already (audit mode:
 * the launch went through): one error, as the live summary counts it.
 * A log that names each skip's rejection (reject_seq) was counted as
 * read; an older one is matched by function, record and reason. */
static void count_reported_skips(proc *p)
{
    int audit = !p->linked && (!p->has_header || strcmp(p->hdr.mode, "audit") == 0);
    for (size_t i = 0; audit && i < p->matched.n; i++) {
        const map_slot *s = &p->matched.s[i];
        uint64_t both = s->a < s->b ? s->a : s->b;
        p->c.v[HCG_CNT_SKIPPED_REPORTED] += s->used ? both : 0;
        p->audit_seen |= s->used && both; /* passed through: audit mode */
    }
}

static void name_proc(proc *p)
{
    const hcg_loghdr *h = &p->hdr;
    if (p->has_header && h->rank[0])
        snprintf(p->name, sizeof p->name, "rank %s", h->rank);
    else if (p->has_header && h->host[0])
        snprintf(p->name, sizeof p->name, "%s:%" PRId64, h->host, p->pid);
    else
        snprintf(p->name, sizeof p->name, "pid %" PRId64, p->pid);
}

/* Ranks in numeric order first, then the rest as read. */
static int proc_order(const void *a, const void *b)
{
    const proc *x = a, *y = b;
    int xr = x->has_header && x->hdr.rank[0], yr = y->has_header && y->hdr.rank[0];
    if (xr != yr)
        return yr - xr;
    if (xr) {
        long long rx = strtoll(x->hdr.rank, NULL, 10), ry = strtoll(y->hdr.rank, NULL, 10);
        if (rx != ry)
            return rx < ry ? -1 : 1;
    }
    if (x->file != y->file)
        return x->file - y->file;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->life < y->life ? -1 : x->life > y->life;
}

static const char *host_of(const proc *p)
{
    return p->has_header ? p->hdr.host : "";
}

/* Each host's CLOCK_MONOTONIC is its own: a trace's times start at the
 * host's earliest event (processes without a header share one base). */
static void note_host_base(const proc *p)
{
    map_slot *s = map_find(&R.host_base, str_hash(host_of(p)), 0, 0);
    if (!s->b || p->t_min < s->a) {
        s->a = p->t_min;
        s->b = 1;
    }
}

static uint64_t host_base(const proc *p)
{
    const map_slot *s = map_get(&R.host_base, str_hash(host_of(p)), 0, 0);
    return s ? s->a : 0;
}

/* ---- the trace --------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    char buf[1024];
    buf[hcg_json_str(buf, sizeof buf - 1, s)] = '\0';
    fputs(buf, f);
}

static void trace_sep(void)
{
    fputs(R.trace_started ? ",\n" : "[\n", R.trace);
    R.trace_started = 1;
}

/* Pseudo-threads (stream tracks) from HCG_TRACE_TID_BASE, or above the
 * process's highest thread id if a log has one that high (the reader
 * takes none above INT32_MAX: they stay below 2^32). */
static uint32_t trace_tid_base(const proc *p)
{
    return p->tid_max < HCG_TRACE_TID_BASE ? HCG_TRACE_TID_BASE : (uint32_t)p->tid_max + 1;
}

static void trace_process(const proc *p, int tpid)
{
    trace_sep();
    fprintf(R.trace, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"name\":\"", tpid);
    json_str(R.trace, p->name);
    fprintf(R.trace, "\",\"pid\":%" PRId64 ",\"host\":\"", p->pid);
    json_str(R.trace, host_of(p));
    fprintf(R.trace, "\",\"log\":\"");
    char path[HCG_PATH_MAX];
    snprintf(path, sizeof path, "%s", R.files[p->file].path);
    clean(path);
    json_str(R.trace, path);
    fprintf(R.trace, "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
            "\"tid\":0,\"args\":{\"sort_index\":%d}}", tpid, tpid);
}

/* A record's trace events, formatted as the trace sink formats its own
 * (stream tracks, flows from enqueue to run, instants). */
static void trace_event(hcg_trace_proc *tp, const hcg_logrec *r, const hcg_event *e)
{
    static char buf[HCG_SINK_EVENT_MAX];
    const char *name = (r->have & HCG_LR_FN_NAME) ? r->fn_name : r->fn ? "unknown" : "";
    uint32_t enq = (r->have & HCG_LR_ENQUEUE_TID) ? (uint32_t)r->enqueue_tid : 0;
    size_t n = hcg_sinks_trace_event(tp, e, name, enq, buf, sizeof buf);
    trace_sep();
    fwrite(buf, 1, n, R.trace);
}

/* ---- the events back into the sinks ------------------------------------------ */

static hcg_event event_of(const hcg_logrec *r)
{
    hcg_event e;
    memset(&e, 0, sizeof e);
    static const uint8_t kinds[] = {0, HCG_EV_RUN, HCG_EV_SKIP, HCG_EV_REJECT, HCG_EV_FINDING};
    e.kind = kinds[r->kind];
    int k = kind_of(r->fn_kind, fnkind_n, HCG_FN_KIND_COUNT);
    e.fnkind = (uint8_t)(k < 0 ? HCG_FN_ORDINARY : k);
    int why = r->kind == HCG_LOGREC_FINDING ? kind_of(r->finding, finding_n, HCG_FIND_COUNT)
                                            : kind_of(r->reason, status_n, HCGUARD_STATUS_COUNT);
    e.reason = (uint8_t)(why < 0 ? 0 : why);
    int a = kind_of(r->api, api_n, HCG_API_COUNT);
    e.api = (uint8_t)(a < 0 ? 0 : a);
    e.tid = (uint32_t)r->tid;
    e.seq = r->seq;
    e.t_enqueue = r->t_enqueue_ns;
    e.t_start = (r->have & HCG_LR_T_START) ? r->t_start_ns : r->t_enqueue_ns;
    e.t_end = (r->have & HCG_LR_T_END) ? r->t_end_ns : e.t_start;
    e.bytes = r->kind == HCG_LOGREC_FINDING ? called_code(r->called) : r->bytes;
    e.fn = (uintptr_t)r->fn;
    e.user = (uintptr_t)r->user_data;
    e.stream = (uintptr_t)r->stream;
    e.dst = (uintptr_t)r->dst;
    e.src = (uintptr_t)r->src;
    e.graph = (uintptr_t)r->graph;
    e.node = (uintptr_t)r->node;
    e.caller = caller_of(r);
    if (r->have & HCG_LR_REJECT_SEQ) { /* the rejection that reported it (audit mode) */
        e.flags |= HCG_EVF_REPORTED;
        e.reject_seq = r->reject_seq;
    }
    return e;
}

static unsigned lat_bin(uint64_t ns)
{
    if (ns < 10)
        return 0;
    double d = log10((double)ns);
    if (d >= LAT_DEC_HI)
        return LAT_BINS - 1;
    return 1 + (unsigned)((d - LAT_DEC_LO) * LAT_PER_DEC);
}

static void lat_add(lat *l, uint64_t ns)
{
    if (!l->n || ns < l->min)
        l->min = ns;
    if (ns > l->max)
        l->max = ns;
    l->n++;
    l->b[lat_bin(ns)]++;
}

typedef struct feed {
    proc *p;            /* NULL: every process (the totals) */
    hcg_trace_proc *tp; /* p's tracks in the trace; NULL: no trace */
} feed;

static int mode_of(const proc *p)
{
    int audit = p->has_header ? strcmp(p->hdr.mode, "audit") == 0 : p->audit_seen;
    return audit ? HCG_MODE_AUDIT : HCG_MODE_GUARD;
}

/* A skip in audit mode whose record was reported at enqueue (the same
 * function, record and reason), as the process itself marked it. p: the
 * process being fed, or NULL (the totals' pass: looked up). */
static int reported_at_enqueue(const proc *p, int file, const hcg_logrec *r, unsigned life)
{
    for (size_t i = 0; !p && i < R.n_procs; i++)
        if (is_proc(&R.procs[i], file, r->pid, life))
            p = &R.procs[i];
    int why = kind_of(r->reason, status_n, HCGUARD_STATUS_COUNT);
    if (!p || why < 0 || p->linked)
        return 0; /* a linked log says it with reject_seq (event_of) */
    const map_slot *m = map_get(&p->matched, r->fn, r->user_data, (uint64_t)why);
    return mode_of(p) == HCG_MODE_AUDIT && m && m->a > 0;
}

static int feed_line(logfile *lf, const hcg_logrec *r, const hcg_loghdr *h, unsigned life,
                     void *ctx)
{
    feed *fd = ctx;
    if (h || (fd->p && !is_proc(fd->p, file_index(lf), r->pid, life)))
        return 0;
    if (!fd->p && !map_get(&R.known, (uint64_t)file_index(lf), (uint64_t)r->pid, life))
        return 0; /* past the bounds: skipped */
    hcg_event e = event_of(r);
    if (e.kind == HCG_EV_SKIP && reported_at_enqueue(fd->p, file_index(lf), r, life))
        e.flags |= HCG_EVF_REPORTED; /* that error, listed with the rejections */
    hcg_sinks_read_event(&e);
    if (!fd->p)
        return 0;
    if (r->kind == HCG_LOGREC_RUN) {
        lat_add(&fd->p->run, r->duration_ns);
        if (!(r->have & HCG_LR_GRAPH)) /* a node's "enqueue" is its creation */
            lat_add(&fd->p->wait, r->t_start_ns > r->t_enqueue_ns ? r->t_start_ns - r->t_enqueue_ns : 0);
    }
    if (fd->tp)
        trace_event(fd->tp, r, &e);
    return 0;
}


/* Messages of the sinks while they are fed (each finding, each skipped
 * copy) go nowhere: the report is the summaries. */
static int out_fd, null_fd;

/* Slow host functions: as logged, or as the findings sink judged the runs
 * fed to it (logs that do not log them), by HCGUARD_SLOW_MS here. */
static void fix_slow(hcg_counts *c, uint64_t logged, uint64_t judged)
{
    c->v[HCG_CNT_FINDING + HCG_FIND_SLOW] = logged ? logged : judged;
}

static uint64_t slow_judged(void)
{
    hcg_counts c;
    hcg_counts_get(&c);
    return c.v[HCG_CNT_FINDING + HCG_FIND_SLOW];
}

static void start_sinks(void)
{
    hcg_sinks_read_start();
    hcg_report_to_fd(null_fd);
}

/* Why a log's last line has no end: a shared log's line is not known to
 * be the process's whose summary says it. */
#define CUT_WHY "a process died writing it, or a full disk or the file size limit stopped it"

static void describe_log(const proc *p)
{
    const logfile *lf = &R.files[p->file];
    char extra[600] = "";
    size_t n = 0;
    if (lf->cut_short)
        n += (size_t)snprintf(extra + n, sizeof extra - n,
                              "; the file's last line was cut short (%s): skipped", CUT_WHY);
    if (lf->bad_lines && n < sizeof extra)
        snprintf(extra + n, sizeof extra - n, "; %" PRIu64 " line%s not events, skipped "
                 "(first: line %ld: %s)", lf->bad_lines, lf->bad_lines == 1 ? "" : "s",
                 lf->first_bad_line, lf->first_bad);
    hcg_msg("log: %s, %" PRIu64 " events%s%s", lf->path, p->events,
            p->has_header ? "" : " (no header: an older log)", extra);
}

static void report_proc(proc *p, int tpid, hcg_counts *sum, uint64_t *launched, uint64_t *nodes)
{
    feed fd = {.p = p};
    start_sinks();
    uint64_t before = slow_judged();
    if (R.trace) {
        trace_process(p, tpid);
        fd.tp = hcg_sinks_trace_start(tpid, host_base(p), trace_tid_base(p), (uint64_t)tpid << 32);
        if (!fd.tp) {
            fprintf(stderr, "hcguard report: out of memory\n");
            exit(1);
        }
    }
    read_log(&R.files[p->file], 0, feed_line, &fd);
    hcg_sinks_trace_end(fd.tp);
    fix_slow(&p->c, p->slow_logged, slow_judged() - before);
    hcg_report_to_fd(out_fd);
    char title[HCG_PATH_MAX + 600];
    const hcg_loghdr *h = &p->hdr;
    if (p->has_header)
        snprintf(title, sizeof title, "HCGUARD SUMMARY of %s (pid %" PRId64 ", host %s, mode %s, "
                 "hcguard %s%s%s)", p->name, p->pid, h->host[0] ? h->host : "unknown",
                 h->mode[0] ? h->mode : "unknown", h->version[0] ? h->version : "unknown",
                 h->exe[0] ? ", " : "", h->exe);
    else
        snprintf(title, sizeof title, "HCGUARD SUMMARY of %s (mode %s: the log has no header)",
                 p->name, p->audit_seen ? "audit" : "unknown");
    hcg_sinks_report_read(title, &p->c, p->launched, p->nodes, mode_of(p));
    describe_log(p);
    for (unsigned i = 0; i < HCG_CNT_N; i++)
        sum->v[i] += p->c.v[i];
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        launched[k] += p->launched[k];
    *nodes += p->nodes;
}

static void report_totals(const hcg_counts *sum, const uint64_t *launched, uint64_t nodes,
                          size_t n_logs)
{
    feed fd = {0};
    int audit = 0;
    start_sinks();
    for (size_t i = 0; i < R.n_files; i++)
        if (!R.files[i].bad)
            read_log(&R.files[i], 0, feed_line, &fd);
    for (size_t i = 0; i < R.n_procs; i++)
        audit |= mode_of(&R.procs[i]) == HCG_MODE_AUDIT;
    hcg_report_to_fd(out_fd);
    char title[200];
    snprintf(title, sizeof title, "HCGUARD SUMMARY of all %zu processes (%zu log%s)", R.n_procs,
             n_logs, n_logs == 1 ? "" : "s");
    hcg_sinks_report_read(title, sum, launched, nodes, audit ? HCG_MODE_AUDIT : HCG_MODE_GUARD);
}

/* ---- the latency plot (SVG) -------------------------------------------------- */

#define SVG_W 1000
#define PANEL_H 330
#define M_LEFT 80
#define M_RIGHT 30
#define M_TOP 50
#define M_BOTTOM 60
#define LEGEND_ROW 22
#define LEGEND_COLS 3

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_COLORS (sizeof palette / sizeof palette[0])

static void xml_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '&')
            fputs("&amp;", f);
        else if (ch == '<')
            fputs("&lt;", f);
        else if (ch == '>')
            fputs("&gt;", f);
        else if (ch == '"')
            fputs("&quot;", f);
        else if (ch < 0x20) /* not allowed in XML 1.0 */
            fputc(' ', f);
        else
            fputc(ch, f);
    }
}

/* A dash pattern for the second round of colours and after. */
static const char *dash_of(size_t i)
{
    static const char *const dashes[] = {"", "6,3", "2,2", "8,3,2,3"};
    return dashes[(i / N_COLORS) % 4];
}

static const char *decade_label(int d)
{
    static const char *const labels[] = {"1 ns",   "10 ns", "100 ns", "1 us",   "10 us",
                                         "100 us", "1 ms",  "10 ms",  "100 ms", "1 s",
                                         "10 s",   "100 s", "1000 s", "10000 s"};
    return d >= 0 && d <= 13 ? labels[d] : "?";
}

typedef struct panel {
    const char *id, *title;
    size_t off; /* of the lat in proc */
    int lo, hi; /* decades of the axis */
    int y0;
} panel;

static const lat *lat_of(const proc *p, const panel *pn)
{
    return (const lat *)(const void *)((const char *)p + pn->off);
}

/* The decades that hold every sample of the panel (at least one). */
static void panel_range(panel *pn)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < R.n_procs; i++) {
        const lat *l = lat_of(&R.procs[i], pn);
        if (!l->n)
            continue;
        lo = l->min < lo ? l->min : lo;
        hi = l->max > hi ? l->max : hi;
    }
    pn->lo = lo == UINT64_MAX || lo < 10 ? LAT_DEC_LO : (int)floor(log10((double)lo));
    pn->hi = hi < 10 ? pn->lo + 1 : (int)ceil(log10((double)hi) + 1e-9);
    if (pn->hi > LAT_DEC_HI)
        pn->hi = LAT_DEC_HI;
    if (pn->lo < LAT_DEC_LO)
        pn->lo = LAT_DEC_LO;
    if (pn->hi <= pn->lo)
        pn->hi = pn->lo + 1;
}

static double px_x(const panel *pn, double decade)
{
    double w = SVG_W - M_LEFT - M_RIGHT;
    double f = (decade - pn->lo) / (pn->hi - pn->lo);
    return M_LEFT + w * (f < 0 ? 0 : f > 1 ? 1 : f);
}

static double px_y(const panel *pn, double frac)
{
    return pn->y0 + M_TOP + (PANEL_H - M_TOP - M_BOTTOM) * (1.0 - frac);
}

static void svg_axes(FILE *f, const panel *pn)
{
    double top = px_y(pn, 1), bottom = px_y(pn, 0);
    fprintf(f, "<text class=\"title\" x=\"%d\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">",
            M_LEFT, pn->y0 + 28);
    xml_str(f, pn->title);
    fputs("</text>\n", f);
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n", M_LEFT, top, SVG_W - M_LEFT - M_RIGHT, bottom - top);
    for (int q = 0; q <= 4; q++) {
        double y = px_y(pn, q / 4.0);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%d%%</text>\n",
                M_LEFT, y, SVG_W - M_RIGHT, y, M_LEFT - 6, y + 4, q * 25);
    }
    for (int d = pn->lo; d <= pn->hi; d++) {
        double x = px_x(pn, d);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n",
                x, top, x, bottom, x, bottom + 16, decade_label(d));
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">time "
            "(log scale)</text>\n", (SVG_W + M_LEFT - M_RIGHT) / 2, bottom + 38);
    fprintf(f, "<text x=\"18\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 18 %.1f)\">host functions at or below (%%)</text>\n",
            (top + bottom) / 2, (top + bottom) / 2);
}

/* A cumulative distribution from the bins: at each bin's upper edge, the
 * fraction of samples at or below it. */
static void svg_series(FILE *f, const panel *pn, const proc *p, size_t i)
{
    const lat *l = lat_of(p, pn);
    fprintf(f, "<g class=\"series\" data-process=\"");
    xml_str(f, p->name);
    fprintf(f, "\" data-n=\"%" PRIu64 "\">", l->n);
    if (l->n) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                "stroke-dasharray=\"%s\" points=\"", palette[i % N_COLORS], dash_of(i));
        uint64_t cum = 0;
        int started = 0;
        for (unsigned b = 0; b < LAT_BINS; b++) {
            if (!l->b[b] && !started)
                continue;
            double lo_edge = b == 0 ? LAT_DEC_LO - 0.1 : LAT_DEC_LO + (double)(b - 1) / LAT_PER_DEC;
            if (!started)
                fprintf(f, "%.1f,%.1f ", px_x(pn, lo_edge), px_y(pn, 0));
            started = 1;
            cum += l->b[b];
            fprintf(f, "%.1f,%.1f ", px_x(pn, lo_edge + 1.0 / LAT_PER_DEC),
                    px_y(pn, (double)cum / (double)l->n));
            if (cum == l->n)
                break;
        }
        fputs("\"/>", f);
    }
    fputs("</g>\n", f);
}

static void svg_legend(FILE *f, int y0)
{
    fprintf(f, "<g class=\"legend\">\n");
    for (size_t i = 0; i < R.n_procs; i++) {
        const proc *p = &R.procs[i];
        int x = M_LEFT + (int)(i % LEGEND_COLS) * ((SVG_W - M_LEFT) / LEGEND_COLS);
        int y = y0 + (int)(i / LEGEND_COLS) * LEGEND_ROW;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                "stroke-width=\"3\" stroke-dasharray=\"%s\"/>"
                "<text x=\"%d\" y=\"%d\" font-size=\"12\">", x, y, x + 24, y,
                palette[i % N_COLORS], dash_of(i), x + 30, y + 4);
        xml_str(f, p->name);
        fprintf(f, " (%" PRIu64 " run%s)</text>\n", p->run.n, p->run.n == 1 ? "" : "s");
    }
    fputs("</g>\n", f);
}

static void write_svg(FILE *f)
{
    panel panels[] = {
        {"run-time", "Host function run time (t_end - t_start), cumulative", offsetof(proc, run),
         0, 0, 0},
        {"queue-wait", "Queue wait (t_start - t_enqueue, stream launches), cumulative",
         offsetof(proc, wait), 0, 0, PANEL_H},
    };
    int rows = (int)((R.n_procs + LEGEND_COLS - 1) / LEGEND_COLS);
    int height = 2 * PANEL_H + 30 + rows * LEGEND_ROW + 10;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<title>hcguard report: host function latency, %zu process%s</title>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_W, height, SVG_W, height, R.n_procs, R.n_procs == 1 ? "" : "es");
    for (size_t k = 0; k < 2; k++) {
        panel *pn = &panels[k];
        panel_range(pn);
        fprintf(f, "<g class=\"panel\" id=\"%s\">\n", pn->id);
        svg_axes(f, pn);
        for (size_t i = 0; i < R.n_procs; i++)
            svg_series(f, pn, &R.procs[i], i);
        fputs("</g>\n", f);
    }
    svg_legend(f, 2 * PANEL_H + 20);
    fputs("</svg>\n", f);
}

/* ---- the command ------------------------------------------------------------- */

static const char report_help[] =
    "Usage: hcguard report [--trace FILE] [--svg FILE] [--] LOG...\n"
    "\n"
    "Merges the event logs (hcguard run --log) of many processes, e.g. one per\n"
    "MPI rank (--log 'hcguard.%q{OMPI_COMM_WORLD_RANK}.jsonl'), and prints on\n"
    "stdout a summary of each process and of them all, in the layout of the\n"
    "exit summary. Logs of processes that died are read too: a last line cut\n"
    "short, or any line that is not an event, is skipped and said.\n"
    "\n"
    "  --trace FILE   one Chrome trace (Perfetto, chrome://tracing) with a\n"
    "                 named process per process\n"
    "  --svg FILE     a plot of host-function run times and queue waits, one\n"
    "                 curve per process (cumulative, log time axis)\n"
    "  -h, --help     print this help\n"
    "\n"
    "Exit status: 0; 1 if a log could not be read, was empty or was not an\n"
    "event log (the others are reported), or an output could not be written;\n"
    "2 for a usage error.\n";

static int report_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int report_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hcguard report: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'hcguard report --help')\n", stderr);
    va_end(ap);
    return 2;
}

typedef struct report_opts {
    const char *trace, *svg;
} report_opts;

static int same_file(const char *a, const char *b)
{
    struct stat x, y;
    if (strcmp(a, b) == 0)
        return 1;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* A log named twice (a path again, a link to it, overlapping globs) is
 * read once: each of its processes would be counted twice. */
static void drop_repeated_logs(void)
{
    size_t n = 0;
    for (size_t i = 0; i < R.n_files; i++) {
        size_t j = 0;
        while (j < n && !same_file(R.files[i].path, R.files[j].path))
            j++;
        if (j < n)
            fprintf(stderr, "hcguard report: %s is the same file as %s: read once\n",
                    R.files[i].path, R.files[j].path);
        else
            R.files[n++] = R.files[i];
    }
    R.n_files = n;
}

/* Options (anywhere before "--") and logs, into R.files. 0, -1 (help
 * printed) or an exit status. */
static int parse_report(int argc, char **argv, report_opts *o)
{
    int only_logs = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!only_logs && strcmp(a, "--") == 0) {
            only_logs = 1;
            continue;
        }
        if (only_logs || a[0] != '-' || a[1] == '\0') {
            R.files[R.n_files++].path = a;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(report_help, stdout);
            return -1;
        }
        const char **to = !strncmp(a, "--trace", 7) && (a[7] == '\0' || a[7] == '=') ? &o->trace
                          : !strncmp(a, "--svg", 5) && (a[5] == '\0' || a[5] == '=') ? &o->svg
                                                                                      : NULL;
        if (!to)
            return report_usage("unknown option '%s'", a);
        const char *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v || !*v)
            return report_usage("option '%.*s' needs a file name", (int)strcspn(a, "="), a);
        *to = v;
    }
    if (!R.n_files)
        return report_usage("no log given");
    drop_repeated_logs();
    if (o->trace && o->svg && same_file(o->trace, o->svg))
        return report_usage("--trace and --svg name the same file '%s'", o->svg);
    return 0;
}


/* An output file, opened as hcguard opens its own (no symlink followed,
 * only the user's own regular file replaced). NULL, said, if not. */
static FILE *open_out(const char *path, const char *what)
{
    char why[HCG_PATH_MAX + 200];
    for (size_t i = 0; i < R.n_files; i++)
        if (same_file(path, R.files[i].path)) {
            fprintf(stderr, "hcguard report: the %s %s is one of the logs: not written\n", what,
                    path);
            return NULL;
        }
    int fd = hcg_open_output_why(path, 0, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        fprintf(stderr, "hcguard report: cannot write the %s %s: %s\n", what, path,
                fd >= 0 ? strerror(errno) : why);
    }
    return f;
}

static int close_out(FILE *f, const char *path, const char *what)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "hcguard report: writing the %s %s failed: %s\n", what, path,
                strerror(errno ? errno : EIO));
        return 1;
    }
    return 0;
}

/* The first pass over one log. 0 if it can be reported. */
static int survey(logfile *lf)
{
    struct stat st;
    if (stat(lf->path, &st) != 0) {
        fprintf(stderr, "hcguard report: cannot read %s: %s\n", lf->path, strerror(errno));
        lf->bad = 1;
    } else if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "hcguard report: %s is a directory, not a log\n", lf->path);
        lf->bad = 1;
    } else if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "hcguard report: %s is not a regular file (a log is read more than "
                "once)\n", lf->path);
        lf->bad = 1;
    } else if (read_log(lf, 1, survey_line, NULL) == 0 && lf->lines == 0) {
        fprintf(stderr, "hcguard report: %s is empty: no events (the process wrote none, or "
                "died before its first was written)\n", lf->path);
        lf->bad = 1;
    }
    if (!lf->bad && lf->cut_short)
        fprintf(stderr, "hcguard report: %s: the last line was cut short (%s): skipped\n",
                lf->path, CUT_WHY);
    if (!lf->bad && lf->over_max)
        fprintf(stderr, "hcguard report: %s: %" PRIu64 " lines of processes past the first %d "
                "of a log (or %d in all): skipped\n", lf->path, lf->over_max,
                REPORT_MAX_PROCS_PER_FILE, REPORT_MAX_PROCS);
    if (!lf->bad && lf->bad_lines)
        fprintf(stderr, "hcguard report: %s: %" PRIu64 " other line%s not events, skipped "
                "(first: line %ld: %s)\n", lf->path, lf->bad_lines,
                lf->bad_lines == 1 ? "" : "s", lf->first_bad_line, lf->first_bad);
    return lf->bad ? -1 : 0;
}

/* The processes refuse_proc found, said and taken out: 1 if any. */
static int drop_refused(void)
{
    size_t n = 0;
    for (size_t i = 0; i < R.n_procs; i++) {
        proc *p = &R.procs[i];
        if (!p->refused_line) {
            R.procs[n++] = *p;
            continue;
        }
        fprintf(stderr, "hcguard report: %s: pid %" PRId64 " has a header this hcguard cannot "
                "use (line %ld: %s): its %" PRIu64 " events not reported\n",
                R.files[p->file].path, p->pid, p->refused_line, p->refused_why, p->events);
        map_free(&p->node_set);
        map_free(&p->matched);
    }
    int any = n < R.n_procs;
    R.n_procs = n;
    return any;
}

/* Two processes of one name (the same rank in two runs): told apart. */
static void unique_names(void)
{
    for (size_t i = R.n_procs; i-- > 0;) { /* those before i are not changed yet */
        unsigned same = 1;
        for (size_t j = 0; j < i; j++)
            same += strcmp(R.procs[i].name, R.procs[j].name) == 0;
        if (same > 1) {
            size_t n = strlen(R.procs[i].name);
            snprintf(R.procs[i].name + n, sizeof R.procs[i].name - n, " #%u", same);
        }
    }
}

/* Every process's summary, the trace as they go; then the totals. */
static void report_all(size_t n_logs)
{
    hcg_counts sum;
    uint64_t launched[HCG_FN_KIND_COUNT] = {0}, nodes = 0;
    memset(&sum, 0, sizeof sum);
    for (size_t i = 0; i < R.n_procs; i++)
        report_proc(&R.procs[i], (int)i + 1, &sum, launched, &nodes);
    if (R.n_procs > 1)
        report_totals(&sum, launched, nodes, n_logs);
}

static int run_report(const report_opts *o, size_t n_logs)
{
    int status = 0;
    size_t usable = 0;
    for (size_t i = 0; i < R.n_files; i++)
        usable += survey(&R.files[i]) == 0;
    status |= usable < R.n_files;
    if (!usable || !R.n_procs) {
        fprintf(stderr, "hcguard report: no log to report\n");
        return 1;
    }
    status |= drop_refused();
    if (!R.n_procs) {
        fprintf(stderr, "hcguard report: no log to report\n");
        return 1;
    }
    for (size_t i = 0; i < R.n_procs; i++) {
        map_find(&R.known, (uint64_t)R.procs[i].file, (uint64_t)R.procs[i].pid,
                 R.procs[i].life);
        count_reported_skips(&R.procs[i]);
        name_proc(&R.procs[i]);
        note_host_base(&R.procs[i]);
    }
    qsort(R.procs, R.n_procs, sizeof *R.procs, proc_order);
    unique_names();
    FILE *svg = o->svg ? open_out(o->svg, "plot") : NULL;
    R.trace = o->trace ? open_out(o->trace, "trace") : NULL;
    status |= (o->svg && !svg) || (o->trace && !R.trace);
    report_all(n_logs);
    if (R.trace) {
        fputs(R.trace_started ? "\n]\n" : "[]\n", R.trace);
        status |= close_out(R.trace, o->trace, "trace");
        hcg_msg("trace: %s (%zu processes)", o->trace, R.n_procs);
    }
    if (svg) {
        write_svg(svg);
        status |= close_out(svg, o->svg, "plot");
        hcg_msg("latency plot: %s (%zu processes)", o->svg, R.n_procs);
    }
    return status;
}

int hcg_report_main(int argc, char **argv)
{
    report_opts o = {0};
    R.files = calloc((size_t)argc + 1, sizeof *R.files);
    if (!R.files) {
        fprintf(stderr, "hcguard report: out of memory\n");
        return 1;
    }
    int rc = parse_report(argc, argv, &o);
    if (rc) {
        free(R.files);
        return rc < 0 ? 0 : rc;
    }
    out_fd = dup(STDOUT_FILENO);
    null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (out_fd < 0 || null_fd < 0) {
        fprintf(stderr, "hcguard report: cannot start: %s\n", strerror(errno));
        return 1;
    }
    hcg_symbolize_from = name_from_logs;
    hcg_callsite_name_from = caller_name_from_logs;
    hcg_report_to_fd(out_fd);
    rc = run_report(&o, R.n_files);
    for (size_t i = 0; i < R.n_procs; i++) {
        map_free(&R.procs[i].node_set);
        map_free(&R.procs[i].matched);
    }
    map_free(&R.names);
    map_free(&R.host_base);
    map_free(&R.known);
    map_free(&R.lives);
    free(R.procs);
    free(R.files);
    return rc;
}
