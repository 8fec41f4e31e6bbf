/* The exit summary: exact counts (hcg_counts_get, launches in the pools),
 * and histograms and per-thread use aggregated from events, which arrive
 * from the collector (one drainer at a time) and may have been dropped. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
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

static struct {
    pthread_mutex_t lock;
    uint64_t bytes, copy_ns; /* of the copies drained: for the bandwidth */
    hist fn_time, copy_time, copy_mbps, dispatch;
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

static void on_run(const hcg_event *e)
{
    uint64_t d = e->t_end - e->t_start;
    hist_add(&S.fn_time, d);
    if (!e->graph) /* a graph node's "enqueue" is its creation */
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
        hcg_report_skip(e);
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
    uint64_t nodes, dropped;
} totals;

static uint64_t totals_launched(const totals *t, int copies_only)
{
    uint64_t n = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (!copies_only || hcg_fnkind_is_copy((hcg_fnkind)k))
            n += t->launched[k];
    return n;
}

static void totals_live(totals *t)
{
    hcg_counts_get(&t->c);
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        t->launched[k] = hcg_launched_of((hcg_fnkind)k);
    t->nodes = hcg_nodes_made();
    t->dropped = hcg_events_dropped();
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
    hcg_counts_get(&c);
    o->host_fns_launched = launched_total(0);
    o->copies_launched = launched_total(1);
    o->events_dropped = hcg_events_dropped();
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

/* Everything --error-exitcode counts: errors, and audit findings. */
uint64_t hcg_summary_errors(void)
{
    hcg_counts c;
    hcg_counts_get(&c);
    return record_errors(&c) + hcg_counts_sum(&c, HCG_CNT_FINDING, HCG_FIND_COUNT);
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

static void print_reasons(const char *what, const uint64_t *counts)
{
    uint64_t total = 0;
    for (int i = 0; i < HCGUARD_STATUS_COUNT; i++)
        total += counts[i];
    hcg_msg("%s: %" PRIu64, what, total);
    for (int i = 1; i < HCGUARD_STATUS_COUNT; i++)
        if (counts[i])
            hcg_msg("    %-18s %8" PRIu64 "  %s", hcguard_status_name((hcguard_status)i),
                    counts[i], hcguard_status_string((hcguard_status)i));
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
            if (!from_logs)
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

static void print_threads(void)
{
    char a[32], b[32];
    for (unsigned i = 0; i < S.n_threads; i++) {
        const thread_use *t = &S.threads[i];
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

/* The counts: launched, ran, copies, rejected, skipped. */
static void print_counts(const totals *t, int mode)
{
    uint64_t ran = ran_total(&t->c, 0), all = totals_launched(t, 0);
    if (t->nodes)
        hcg_msg("host functions: %" PRIu64 " launched (%" PRIu64 " on streams, %" PRIu64
                " set on graph nodes), %" PRIu64 " ran",
                all, all - t->nodes, t->nodes, ran);
    else
        hcg_msg("host functions: %" PRIu64 " launched, %" PRIu64 " ran", all, ran);
    if (t->c.v[HCG_CNT_GRAPH_RUNS])
        hcg_msg("graph host node runs: %" PRIu64, t->c.v[HCG_CNT_GRAPH_RUNS]);
    print_copies(t);
    print_reasons(mode == HCG_MODE_AUDIT ? "bad records reported at enqueue (passed through)"
                                         : "bad records rejected at enqueue",
                  &t->c.v[HCG_CNT_REJECTED]);
    print_reasons("copies skipped at run time", &t->c.v[HCG_CNT_SKIPPED]);
    if (t->c.v[HCG_CNT_SKIPPED_REPORTED])
        hcg_msg("    (%" PRIu64 " of them reported at enqueue already)",
                t->c.v[HCG_CNT_SKIPPED_REPORTED]);
}

static void print_dropped(const totals *t, size_t buffer_bytes)
{
    if (t->dropped)
        hcg_msg("events dropped (full per-thread buffer): %" PRIu64 "; the counts above are "
                "exact, the times, histograms and files miss them; HCGUARD_BUFFER (--buffer) "
                "is %zu bytes per thread", t->dropped, buffer_bytes);
}

/* The findings, and the verdict. live: this process's own summary (a
 * recovered one has no configuration problems or print limit of its own). */
static void print_errors(const totals *t, int live)
{
    hcg_audit_print(&t->c);
    uint64_t errors = record_errors(&t->c) + hcg_audit_errors(&t->c);
    uint64_t warnings =
        hcg_counts_sum(&t->c, HCG_CNT_FINDING, HCG_FIND_COUNT) - hcg_audit_errors(&t->c);
    if (live) {
        hcg_copy_fns_check(1);
        hcg_problems_print();
        uint64_t unprinted = hcg_print_suppressed();
        if (unprinted)
            hcg_msg("findings not printed (print limit %u): %" PRIu64 "; they are counted above",
                    hcg_config_get()->print_limit, unprinted);
    }
    if (warnings)
        hcg_msg("ERROR SUMMARY: %" PRIu64 " error%s, %" PRIu64 " warning%s", errors,
                errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
    else
        hcg_msg("ERROR SUMMARY: %" PRIu64 " error%s", errors, errors == 1 ? "" : "s");
}

/* Times and threads, from the events (under S.lock). */
static void print_measures(void)
{
    print_time_hist("host function run time", &S.fn_time);
    print_time_hist("dispatch latency (enqueue to start)", &S.dispatch);
    if (S.n_threads) {
        hcg_msg("callback threads: %u", S.n_threads);
        print_threads();
    }
}

void hcg_summary_print(void)
{
    const hcg_config *cfg = hcg_config_get();
    totals t;
    totals_live(&t);
    pthread_mutex_lock(&S.lock);
    hcg_msg("HCGUARD SUMMARY (pid %d, mode %s)", (int)getpid(), mode_name(cfg->mode));
    print_counts(&t, cfg->mode);
    print_measures();
    print_dropped(&t, cfg->buffer_bytes);
    hcg_jsonl_summary();
    hcg_trace_summary();
    pthread_mutex_unlock(&S.lock);
    print_errors(&t, 1);
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
    hcg_msg("HCGUARD SUMMARY (pid %d, mode %s), written by hcguard run: the program ended "
            "by %s before hcguard could write it", (int)pid, mode_name(f->mode), how);
    print_counts(&t, f->mode);
    hcg_msg("(times and histograms ended with the program; the counts are exact)");
    print_dropped(&t, hcg_config_get()->buffer_bytes);
    /* Names not ended inside their field were written over: not shown. */
    if (f->log_path[0] && memchr(f->log_path, 0, sizeof f->log_path))
        hcg_msg("event log: %s (the events left in memory appended)", f->log_path);
    if (f->trace_path[0] && memchr(f->trace_path, 0, sizeof f->trace_path))
        hcg_msg("trace: %s (the events left in memory appended, and closed)", f->trace_path);
    print_errors(&t, 0);
}

/* Of events read back from logs (hcguard report): the counts made from
 * them, the times and findings from what hcg_summary_event and
 * hcg_audit_event were given since they last started anew. */
void hcg_summary_print_read(const char *title, const hcg_counts *c,
                            const uint64_t launched[HCG_FN_KIND_COUNT], uint64_t nodes, int mode)
{
    totals t;
    t.c = *c;
    memcpy(t.launched, launched, sizeof t.launched);
    t.nodes = nodes;
    t.dropped = 0;
    pthread_mutex_lock(&S.lock);
    hcg_msg("%s", title);
    from_logs = 1;
    print_counts(&t, mode);
    from_logs = 0;
    print_measures();
    pthread_mutex_unlock(&S.lock);
    print_errors(&t, 0);
}

/* --error-exitcode's count from a flight record's counts. */
uint64_t hcg_summary_errors_of(const hcg_counts *c)
{
    return record_errors(c) + hcg_counts_sum(c, HCG_CNT_FINDING, HCG_FIND_COUNT);
}

void hcg_summary_after_fork(void)
{
    memset(&S, 0, sizeof S);
    pthread_mutex_init(&S.lock, NULL);
}

int hcg_summary_active(void)
{
    hcg_counts c;
    hcg_counts_get(&c);
    return hcg_counts_sum(&c, 0, HCG_CNT_N) || launched_total(0);
}
