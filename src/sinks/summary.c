/* The exit summary: exact counts (hcg_counts_get, launches in the pools),
 * and histograms and per-thread use aggregated from events, which arrive
 * from the collector (one drainer at a time) and may have been dropped. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/sinks.h"

/* Log-linear histogram: 32 sub-buckets per power of two (about 3%). */
#define SUB_BITS 5
#define SUB (1u << SUB_BITS)
#define N_BUCKETS ((64 - SUB_BITS + 1) * SUB)

typedef struct hist {
    uint64_t n, min, max;
    double sum;
    uint32_t b[N_BUCKETS];
} hist;

static unsigned bucket_of(uint64_t v)
{
    if (v < SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* e >= SUB_BITS */
    unsigned shift = e - SUB_BITS;
    return (shift + 1) * SUB + (unsigned)((v >> shift) & (SUB - 1));
}

/* Middle of the bucket's range: what a percentile reports. */
static uint64_t bucket_value(unsigned i)
{
    if (i < SUB)
        return i;
    unsigned shift = i / SUB - 1;
    uint64_t lo = ((uint64_t)SUB | (i % SUB)) << shift;
    return lo + ((1ull << shift) >> 1);
}

static void hist_add(hist *h, uint64_t v)
{
    if (h->n == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->n++;
    h->sum += (double)v;
    h->b[bucket_of(v)]++;
}

static uint64_t hist_pct(const hist *h, double p)
{
    if (h->n == 0)
        return 0;
    uint64_t rank = (uint64_t)(p * (double)(h->n - 1) + 0.5), seen = 0;
    for (unsigned i = 0; i < N_BUCKETS; i++) {
        seen += h->b[i];
        if (seen > rank) {
            uint64_t v = bucket_value(i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

#define MAX_THREADS 64

typedef struct thread_use {
    uint32_t tid;
    uint64_t calls, busy_ns, first_ns, last_ns;
} thread_use;

/* Run time per function (collector): a table that grows, never loses a
 * function. */
typedef struct fn_use {
    uintptr_t fn;
    uint64_t runs, total_ns, max_ns;
} fn_use;

static struct {
    pthread_mutex_t lock;
    uint64_t bytes, copy_ns; /* of the copies drained: for the bandwidth */
    fn_use *fns;             /* open addressing, at most half full */
    size_t fns_cap, n_fns;
    hist fn_time, copy_time, copy_mbps, dispatch;
    uint64_t dispatch_unstamped; /* runs of launches not stamped (sampled) */
    thread_use threads[MAX_THREADS];
    unsigned n_threads;
    uint64_t other_threads;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void note_thread(uint32_t tid, uint64_t start, uint64_t end)
{
    for (unsigned i = 0; i < S.n_threads; i++)
        if (S.threads[i].tid == tid) {
            S.threads[i].calls++;
            S.threads[i].busy_ns += end - start;
            S.threads[i].last_ns = end;
            return;
        }
    if (S.n_threads == MAX_THREADS) {
        S.other_threads++;
        return;
    }
    S.threads[S.n_threads++] = (thread_use){tid, 1, end - start, start, end};
}

static int fns_grow(void)
{
    size_t cap = S.fns_cap ? S.fns_cap * 2 : 64;
    fn_use *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < S.fns_cap; i++)
        if (S.fns[i].runs) {
            size_t j = (size_t)((S.fns[i].fn * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
            while (t[j].runs)
                j = (j + 1) & (cap - 1);
            t[j] = S.fns[i];
        }
    free(S.fns);
    S.fns = t;
    S.fns_cap = cap;
    return 0;
}

static void note_fn(uintptr_t fn, uint64_t d)
{
    if ((S.n_fns + 1) * 2 > S.fns_cap && fns_grow() != 0)
        return;
    size_t j = (size_t)((fn * 0x9e3779b97f4a7c15ull) >> 20) & (S.fns_cap - 1);
    while (S.fns[j].runs && S.fns[j].fn != fn)
        j = (j + 1) & (S.fns_cap - 1);
    if (!S.fns[j].runs) {
        S.fns[j].fn = fn;
        S.n_fns++;
    }
    S.fns[j].runs++;
    S.fns[j].total_ns += d;
    if (d > S.fns[j].max_ns)
        S.fns[j].max_ns = d;
}

static void on_run(const hcg_event *e)
{
    uint64_t d = e->t_end - e->t_start;
    note_fn(e->fn, d);
    hist_add(&S.fn_time, d);
    /* A graph node's "enqueue" is its creation; a launch whose enqueue
     * was not stamped (sampled) has no wait to tell. */
    if (e->graph)
        ;
    else if (HCG_UNLIKELY(e->flags & HCG_EVF_NO_STAMP))
        S.dispatch_unstamped++;
    else
        hist_add(&S.dispatch, e->t_start > e->t_enqueue ? e->t_start - e->t_enqueue : 0);
    note_thread(e->tid, e->t_start, e->t_end);
    if (!hcg_fnkind_is_copy((hcg_fnkind)e->fnkind))
        return;
    hist_add(&S.copy_time, d);
    S.bytes += e->bytes;
    S.copy_ns += d;
    if (e->bytes > 0)
        hist_add(&S.copy_mbps, (uint64_t)((double)e->bytes * 1e3 / (double)(d ? d : 1)));
}

void hcg_summary_event(const hcg_event *e)
{
    pthread_mutex_lock(&S.lock);
    switch (e->kind) {
    case HCG_EV_RUN:
        on_run(e);
        break;
    case HCG_EV_SKIP:
        note_thread(e->tid, e->t_start, e->t_end);
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&S.lock);
}

static uint64_t launched_total(int copies_only)
{
    uint64_t t = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (!copies_only || hcg_fnkind_is_copy((hcg_fnkind)k))
            t += hcg_launched_of((hcg_fnkind)k);
    return t;
}

/* Everything the summary counts: of this process, or of a flight record. */
typedef struct totals {
    hcg_counts c;
    uint64_t launched[HCG_FN_KIND_COUNT];
    uint64_t nodes, dropped, captured;
    uint64_t unmeasured; /* live only: a flight record does not keep it */
    uint64_t ringless;   /* live only: of dropped, those of threads with no buffer */
    uint64_t undrained;  /* live only: events made after the last drain */
    int own_fns;         /* live: the copy functions this process recognised are its own */
} totals;

static uint64_t totals_launched(const totals *t, int copies_only)
{
    uint64_t n = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (!copies_only || hcg_fnkind_is_copy((hcg_fnkind)k))
            n += t->launched[k];
    return n;
}

/* The summary at exit, not at an exec (which may fail: the program goes
 * on, and its events are written after). */
static int at_exit;

void hcg_summary_at_exit(void)
{
    at_exit = 1;
}

static void totals_live(totals *t)
{
    /* Before the counts: every event these find is in them (a dropped
     * event is counted before it is called dropped), while the program's
     * threads go on making more. */
    t->ringless = hcg_events_ringless(); /* before dropped, which holds it */
    t->dropped = hcg_events_dropped();
    t->undrained = at_exit ? hcg_events_undrained() : 0;
    hcg_counts_get(&t->c);
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        t->launched[k] = hcg_launched_of((hcg_fnkind)k);
    t->nodes = hcg_nodes_made();
    t->captured = hcg_captured_launches();
    t->unmeasured = hcg_unmeasured();
    t->own_fns = 1;
}

static uint64_t ran_total(const hcg_counts *c, int copies_only)
{
    uint64_t t = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (!copies_only || hcg_fnkind_is_copy((hcg_fnkind)k))
            t += c->v[HCG_CNT_RAN + k];
    return t;
}

void hcg_summary_stats(hcguard_stats *o)
{
    hcg_counts c;
    memset(o, 0, sizeof *o);
    o->events_dropped = hcg_events_dropped(); /* before the counts, as totals_live */
    hcg_counts_get(&c);
    o->host_fns_launched = launched_total(0);
    o->copies_launched = launched_total(1);
    o->host_fns_ran = ran_total(&c, 0);
    o->copies_ran = ran_total(&c, 1);
    o->rejected = hcg_counts_sum(&c, HCG_CNT_REJECTED, HCGUARD_STATUS_COUNT);
    o->skipped = hcg_counts_sum(&c, HCG_CNT_SKIPPED, HCGUARD_STATUS_COUNT);
    o->bytes_copied = c.v[HCG_CNT_BYTES];
}

/* Bad records: rejected at enqueue, or skipped when run unless reported
 * at enqueue already. */
static uint64_t record_errors(const hcg_counts *c)
{
    return hcg_counts_sum(c, HCG_CNT_REJECTED, HCGUARD_STATUS_COUNT) +
           hcg_counts_sum(c, HCG_CNT_SKIPPED, HCGUARD_STATUS_COUNT) -
           c->v[HCG_CNT_SKIPPED_REPORTED];
}

/* What --error-exitcode counts: errors, and warnings too with
 * --warnings-as-errors. */
uint64_t hcg_summary_errors_of(const hcg_counts *c)
{
    uint64_t n = record_errors(c) + hcg_findings_of_severity(c, HCG_SEV_ERROR);
    if (hcg_config_get()->warnings_as_errors)
        n += hcg_findings_of_severity(c, HCG_SEV_WARNING);
    return n;
}

uint64_t hcg_summary_errors(void)
{
    hcg_counts c;
    hcg_counts_get(&c);
    return hcg_summary_errors_of(&c);
}

/* ---- printing ----------------------------------------------------------- */
static const char *fmt_ns(uint64_t ns, char *buf, size_t len)
{
    if (ns < 10000)
        snprintf(buf, len, "%" PRIu64 " ns", ns);
    else if (ns < 10000000)
        snprintf(buf, len, "%.1f us", (double)ns / 1e3);
    else if (ns < 10000000000ull)
        snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.2f s", (double)ns / 1e9);
    return buf;
}

static const char *fmt_bytes(uint64_t b, char *buf, size_t len)
{
    if (b < 10240)
        snprintf(buf, len, "%" PRIu64 " B", b);
    else if (b < 10ull << 20)
        snprintf(buf, len, "%.1f KiB", (double)b / 1024);
    else if (b < 10ull << 30)
        snprintf(buf, len, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, len, "%.2f GiB", (double)b / (1 << 30));
    return buf;
}

static void print_time_hist(const char *what, const hist *h)
{
    char a[32], b[32], c[32], d[32];
    if (h->n == 0)
        return;
    hcg_msg("%s: min %s, median %s, p99 %s, max %s (%" PRIu64 ")", what,
            fmt_ns(h->min, a, sizeof a), fmt_ns(hist_pct(h, 0.5), b, sizeof b),
            fmt_ns(hist_pct(h, 0.99), c, sizeof c), fmt_ns(h->max, d, sizeof d), h->n);
}

/* A count by reason, each reason with its groups (ev: their events' kind;
 * 0: none kept, a recovered summary). */
static void print_reasons(const char *what, const uint64_t *counts, uint8_t ev,
                          const char *note)
{
    uint64_t total = 0;
    for (int i = 0; i < HCGUARD_STATUS_COUNT; i++)
        total += counts[i];
    if (!total)
        return;
    hcg_msg("    %s: %" PRIu64, what, total);
    if (note[0])
        hcg_msg("        %s", note);
    for (int i = 1; i < HCGUARD_STATUS_COUNT; i++)
        if (counts[i]) {
            hcg_msg("        %-18s %8" PRIu64 "  %s", hcguard_status_name((hcguard_status)i),
                    counts[i], hcguard_status_string((hcguard_status)i));
            if (ev)
                hcg_findings_print_groups(ev, (unsigned)i);
        }
}

/* Which functions the launches of kind k went to, and how each was
 * recognised. Counts are kept per kind: a function line carries them when
 * it is the kind's only function. */
#define MAX_FNS_LISTED 8

static void print_copy_fns(hcg_fnkind k, uint64_t n_launched, uint64_t n_ran)
{
    uintptr_t fns[MAX_FNS_LISTED];
    size_t n = hcg_copy_fns_of(k, fns, MAX_FNS_LISTED);
    for (size_t i = 0; i < n && i < MAX_FNS_LISTED; i++) {
        char name[256], obj[HCG_PATH_MAX], counts[64] = "";
        /* "name+0x10" would say the function is inside another one: a
         * stripped module's static function has no name of its own. */
        if (hcg_symbolize((void *)fns[i], name, sizeof name, obj, sizeof obj) != 0 ||
            strchr(name, '+'))
            snprintf(name, sizeof name, "(no symbol)");
        if (n == 1)
            snprintf(counts, sizeof counts, ", %" PRIu64 " launched, %" PRIu64 " ran", n_launched,
                     n_ran);
        hcg_msg("        copy function %#lx %s (in %s): %s%s", (unsigned long)fns[i], name,
                obj[0] ? obj : "anonymous memory", hcg_copy_fn_how(fns[i], k), counts);
    }
    if (n > MAX_FNS_LISTED)
        hcg_msg("        (%zu more copy functions)", n - MAX_FNS_LISTED);
}

/* Set while a summary of logs is printed: the copy functions this
 * process saw are not those of the logs. */
static int from_logs;

static void print_copies(const totals *t)
{
    char a[32], b[32];
    const uint64_t *ran = &t->c.v[HCG_CNT_RAN];
    hcg_msg("host copies: %" PRIu64 " launched, %" PRIu64 " ran, %s copied",
            totals_launched(t, 1), ran_total(&t->c, 1),
            fmt_bytes(t->c.v[HCG_CNT_BYTES], a, sizeof a));
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (hcg_fnkind_is_copy((hcg_fnkind)k) && (t->launched[k] || ran[k])) {
            hcg_msg("    recognised as %s: %" PRIu64 " launched, %" PRIu64 " ran",
                    hcg_fnkind_name((hcg_fnkind)k), t->launched[k], ran[k]);
            if (t->own_fns && !from_logs)
                print_copy_fns((hcg_fnkind)k, t->launched[k], ran[k]);
        }
    print_time_hist("copy latency", &S.copy_time);
    if (S.copy_mbps.n) {
        hcg_msg("copy bandwidth: %.2f GB/s overall (%s in %s); per copy min %.2f, "
                "median %.2f, max %.2f GB/s",
                S.copy_ns ? (double)S.bytes / (double)S.copy_ns : 0.0,
                fmt_bytes(S.bytes, a, sizeof a), fmt_ns(S.copy_ns, b, sizeof b),
                (double)S.copy_mbps.min / 1e3, (double)hist_pct(&S.copy_mbps, 0.5) / 1e3,
                (double)S.copy_mbps.max / 1e3);
    }
}

static int by_total(const void *a, const void *b)
{
    const fn_use *x = a, *y = b;
    return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

/* Every function that ran, the most time first. */
static void print_fns(void)
{
    char a[32], b[32], c[32], name[256], obj[HCG_PATH_MAX];
    fn_use *list = S.n_fns ? malloc(S.n_fns * sizeof *list) : NULL;
    size_t n = 0;
    for (size_t i = 0; list && i < S.fns_cap; i++)
        if (S.fns[i].runs)
            list[n++] = S.fns[i];
    if (!n) {
        free(list);
        return;
    }
    qsort(list, n, sizeof *list, by_total);
    hcg_msg("host functions by run time: %zu (most time first)", n);
    for (size_t i = 0; i < n; i++) {
        if (hcg_symbolize((const void *)list[i].fn, name, sizeof name, obj, sizeof obj) != 0)
            snprintf(name, sizeof name, "anonymous");
        hcg_msg("    %#lx %s%s%s%s: %" PRIu64 " run%s, total %s, mean %s, max %s",
                (unsigned long)list[i].fn, name, obj[0] ? " (in " : "",
                hcg_file_name(obj), obj[0] ? ")" : "", list[i].runs,
                list[i].runs == 1 ? "" : "s", fmt_ns(list[i].total_ns, a, sizeof a),
                fmt_ns(list[i].total_ns / list[i].runs, b, sizeof b),
                fmt_ns(list[i].max_ns, c, sizeof c));
    }
    free(list);
}

static int by_busy(const void *a, const void *b)
{
    const thread_use *x = a, *y = b;
    return x->busy_ns < y->busy_ns ? 1 : x->busy_ns > y->busy_ns ? -1 : 0;
}

/* Busiest first. */
static void print_threads(void)
{
    char a[32], b[32];
    thread_use sorted[MAX_THREADS];
    memcpy(sorted, S.threads, S.n_threads * sizeof *sorted);
    qsort(sorted, S.n_threads, sizeof *sorted, by_busy);
    for (unsigned i = 0; i < S.n_threads; i++) {
        const thread_use *t = &sorted[i];
        uint64_t span = t->last_ns - t->first_ns;
        hcg_msg("    thread %u: %" PRIu64 " host functions, busy %s of %s (%.1f%%)", t->tid,
                t->calls, fmt_ns(t->busy_ns, a, sizeof a), fmt_ns(span, b, sizeof b),
                span ? 100.0 * (double)t->busy_ns / (double)span : 100.0);
    }
    if (S.other_threads)
        hcg_msg("    (%" PRIu64 " host functions on further threads)", S.other_threads);
}

static const char *mode_name(int m)
{
    static const char *modes[] = {"guard", "audit", "off"};
    return (unsigned)m < 3 ? modes[m] : "unknown";
}

static void print_findings(const hcg_counts *c, int sev, int live);

/* The counts: launched (on streams, captured into graphs, set on graph
 * nodes), ran, copies. */
static void print_counts(const totals *t)
{
    uint64_t ran = ran_total(&t->c, 0), all = totals_launched(t, 0);
    uint64_t captured = t->captured < all - t->nodes ? t->captured : all - t->nodes;
    if (t->nodes || captured)
        hcg_msg("host functions: %" PRIu64 " launched (%" PRIu64 " on streams, %" PRIu64
                " captured into graphs, %" PRIu64 " set on graph nodes), %" PRIu64 " ran",
                all, all - t->nodes - captured, captured, t->nodes, ran);
    else
        hcg_msg("host functions: %" PRIu64 " launched, %" PRIu64 " ran", all, ran);
    if (t->c.v[HCG_CNT_GRAPH_RUNS])
        hcg_msg("graph host node runs: %" PRIu64, t->c.v[HCG_CNT_GRAPH_RUNS]);
    if (t->unmeasured)
        hcg_msg("host functions passed to the driver unmeasured (not counted above): %" PRIu64
                " (see the configuration problems)", t->unmeasured);
    if (t->own_fns && hcg_copies_callless())
        hcg_msg("host copies refused for want of a call to guard them (not counted above): %" PRIu64
                " (see the configuration problems)", hcg_copies_callless());
    print_copies(t);
}

/* The errors: bad records by reason, then the findings that are errors,
 * each with its groups (function and call site). */
static void print_error_list(const totals *t, int mode, int live)
{
    const hcg_counts *c = &t->c;
    uint64_t errors = record_errors(c) + hcg_findings_of_severity(c, HCG_SEV_ERROR);
    uint64_t skipped = hcg_counts_sum(c, HCG_CNT_SKIPPED, HCGUARD_STATUS_COUNT);
    char note[160] = "";
    hcg_msg("errors: %" PRIu64, errors);
    print_reasons(mode == HCG_MODE_AUDIT ? "bad records reported at enqueue (passed through)"
                                         : "bad records rejected at enqueue",
                  &c->v[HCG_CNT_REJECTED], live ? HCG_EV_REJECT : 0, "");
    if (c->v[HCG_CNT_SKIPPED_REPORTED])
        snprintf(note, sizeof note,
                 "(%" PRIu64 " of them reported at enqueue already) not counted or listed "
                 "again",
                 c->v[HCG_CNT_SKIPPED_REPORTED]);
    if (skipped)
        print_reasons("copies skipped at run time", &c->v[HCG_CNT_SKIPPED],
                      live ? HCG_EV_SKIP : 0, note);
    print_findings(c, HCG_SEV_ERROR, live);
}

/* Per finding kind of severity sev: its count, and its groups. */
static void print_findings(const hcg_counts *c, int sev, int live)
{
    for (int f = 1; f < HCG_FIND_COUNT; f++) {
        uint64_t n = c->v[HCG_CNT_FINDING + f];
        if (!n || hcg_severity_of(HCG_EV_FINDING, (unsigned)f) != sev)
            continue;
        hcg_msg("    %-26s %8" PRIu64, hcg_finding_name((hcg_finding)f), n);
        if (live)
            hcg_findings_print_groups(HCG_EV_FINDING, (unsigned)f);
    }
}

static void print_dropped(const totals *t, size_t buffer_bytes)
{
    /* Live only: threads that could not map a buffer at all. */
    uint64_t ringless = t->own_fns ? t->ringless : 0;
    uint64_t full = t->dropped > ringless ? t->dropped - ringless : 0;
    if (full)
        hcg_msg("events dropped (full per-thread buffer): %" PRIu64 "; the counts above are "
                "exact, the times, histograms and files miss them; HCGUARD_BUFFER (--buffer) "
                "is %zu bytes per thread", full, buffer_bytes);
    if (ringless)
        hcg_msg("events dropped (no memory for a thread's buffer): %" PRIu64 "; the counts "
                "above are exact, the times, histograms and files miss them", ringless);
    if (t->own_fns && t->undrained)
        hcg_msg("events made after the last write, by threads that went on while the program "
                "ended: %" PRIu64 "; the counts above hold them (and any made while they were "
                "taken), the times, histograms and files do not", t->undrained);
    if (t->own_fns && hcg_collector_failed())
        hcg_msg("no collector thread ran (%s): events were written at exit only, and hung "
                "host functions were not watched", strerror(hcg_collector_failed()));
}

/* The warnings, and what the print limit left out. */
static void print_warning_list(const totals *t, int live)
{
    uint64_t warnings = hcg_findings_of_severity(&t->c, HCG_SEV_WARNING);
    hcg_msg("warnings: %" PRIu64, warnings);
    print_findings(&t->c, HCG_SEV_WARNING, live);
    uint64_t unprinted = live && !from_logs ? hcg_print_suppressed() : 0;
    if (unprinted)
        hcg_msg("findings not printed (print limit %u): %" PRIu64
                "; every one is in the lists above",
                hcg_config_get()->print_limit, unprinted);
}

/* The verdict, last: the words agree with the lists above. */
static void print_verdict(const totals *t)
{
    uint64_t errors = record_errors(&t->c) + hcg_findings_of_severity(&t->c, HCG_SEV_ERROR);
    uint64_t warnings = hcg_findings_of_severity(&t->c, HCG_SEV_WARNING);
    if (warnings)
        hcg_msg("ERROR SUMMARY: %" PRIu64 " error%s, %" PRIu64 " warning%s%s", errors,
                errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s",
                hcg_config_get()->warnings_as_errors ? " (warnings count as errors)" : "");
    else
        hcg_msg("ERROR SUMMARY: %" PRIu64 " error%s", errors, errors == 1 ? "" : "s");
}

#define HCG_STR_(x) #x
#define HCG_STR(x) HCG_STR_(x)
static const char *version_line(void)
{
    return "hcguard " HCG_STR(HCGUARD_VERSION_MAJOR) "." HCG_STR(HCGUARD_VERSION_MINOR) "." HCG_STR(
        HCGUARD_VERSION_PATCH);
}

/* Times, functions and callback threads, from the events (under S.lock). */
static void print_measures(void)
{
    print_time_hist("host function run time", &S.fn_time);
    if (S.dispatch_unstamped) {
        char what[128];
        snprintf(what, sizeof what,
                 "dispatch latency (enqueue to start; sampled, 1 launch in %d: %" PRIu64
                 " samples)", HCG_STAMP_EVERY, S.dispatch.n);
        print_time_hist(what, &S.dispatch);
    } else
        print_time_hist("dispatch latency (enqueue to start)", &S.dispatch);
    print_fns();
    if (S.n_threads) {
        hcg_msg("callback threads: %u (busiest first)", S.n_threads);
        print_threads();
    }
}

/* The summary, in its documented order: errors (by reason, with their
 * functions and call sites), warnings, measurements (counts, times, slow
 * functions and callback threads, worst first), where the outputs went
 * and what was misconfigured, the verdict. */
void hcg_summary_print(void)
{
    const hcg_config *cfg = hcg_config_get();
    totals t;
    totals_live(&t);
    hcg_copy_fns_check(1);
    hcg_msg("HCGUARD SUMMARY (pid %d, mode %s, %s)", (int)getpid(), mode_name(cfg->mode),
            version_line());
    print_error_list(&t, cfg->mode, 1);
    print_warning_list(&t, 1);
    pthread_mutex_lock(&S.lock);
    hcg_msg("measurements:");
    print_counts(&t);
    print_measures();
    print_dropped(&t, cfg->buffer_bytes);
    hcg_msg("outputs:");
    hcg_sinks_summary_lines();
    pthread_mutex_unlock(&S.lock);
    hcg_problems_print();
    print_verdict(&t);
}

/* One line when hcguard was there but saw no host function: the user can
 * tell it ran. */
void hcg_summary_print_idle(void)
{
    const hcg_config *cfg = hcg_config_get();
    hcg_msg("%s active (pid %d, mode %s): no host function was launched", version_line(),
            (int)getpid(), mode_name(cfg->mode));
    hcg_problems_print();
}

/* Written by the launcher from a flight record: the counts are exact; the
 * times and histograms died with the process. */
void hcg_summary_print_recovered(const hcg_flight *f, const hcg_counts *c, uint64_t dropped,
                                 pid_t pid, const char *how)
{
    totals t;
    t.c = *c;
    const void *store = (const char *)f + f->pools_off;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        t.launched[k] = hcg_pool_store_launched(store, (hcg_fnkind)k) +
                        atomic_load(&f->nodes_launched[k]);
    t.nodes = atomic_load(&f->nodes_made);
    t.dropped = dropped;
    t.captured = 0; /* not in the record: counted as on streams */
    t.unmeasured = 0;
    t.undrained = 0;
    t.own_fns = 0; /* the launcher's own table is not the program's */
    hcg_msg("HCGUARD SUMMARY (pid %d, mode %s, %s), written by hcguard run: the program "
            "ended by %s before hcguard could write it", (int)pid, mode_name(f->mode),
            version_line(), how);
    hcg_msg("(the counts are exact; which functions and call sites, the times and the "
            "histograms ended with the program)");
    print_error_list(&t, f->mode, 0);
    print_warning_list(&t, 0);
    hcg_msg("measurements:");
    print_counts(&t);
    print_dropped(&t, hcg_config_get()->buffer_bytes);
    hcg_msg("outputs:");
    /* Names not ended inside their field were written over: not shown. */
    if (f->log_path[0] && memchr(f->log_path, 0, sizeof f->log_path))
        hcg_jsonl_recovered_line(f->log_path);
    if (f->trace_path[0] && memchr(f->trace_path, 0, sizeof f->trace_path))
        hcg_trace_recovered_line(f->trace_path);
    print_verdict(&t);
}

/* Of events read back from logs (hcguard report): the counts made from
 * them, the groups, times and findings from what hcg_summary_event and
 * hcg_audit_event were given since they last started anew; in the order
 * of the exit summary. */
void hcg_summary_print_read(const char *title, const hcg_counts *c,
                            const uint64_t launched[HCG_FN_KIND_COUNT], uint64_t nodes, int mode)
{
    totals t;
    memset(&t, 0, sizeof t);
    t.c = *c;
    memcpy(t.launched, launched, sizeof t.launched);
    t.nodes = nodes;
    hcg_msg("%s", title);
    from_logs = 1;
    print_error_list(&t, mode, 1);
    print_warning_list(&t, 1);
    pthread_mutex_lock(&S.lock);
    hcg_msg("measurements:");
    print_counts(&t);
    print_measures();
    pthread_mutex_unlock(&S.lock);
    from_logs = 0;
    print_verdict(&t);
}

/* The parent's table, left as the fork found it: kept reachable, never
 * freed, as the fork may have come between the collector's free of the
 * old table and its store of the new one (a free here would be a second). */
static void *parent_fns;

void hcg_summary_after_fork(void)
{
    parent_fns = S.fns;
    memset(&S, 0, sizeof S);
    pthread_mutex_init(&S.lock, NULL);
}

int hcg_summary_active(void)
{
    hcg_counts c;
    hcg_counts_get(&c);
    return hcg_counts_sum(&c, 0, HCG_CNT_N) || launched_total(0);
}
