/* Aggregation of events into counters and histograms, and the exit
 * summary. Events arrive from the collector (one drainer at a time); the
 * launch counters are atomics bumped on application threads. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hcg.h"

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
    uint64_t ran[HCG_FN_KIND_COUNT];
    uint64_t rejected[HCGUARD_STATUS_COUNT];
    uint64_t skipped[HCGUARD_STATUS_COUNT];
    uint64_t skipped_reported; /* of skipped: already counted at enqueue */
    uint64_t graph_runs;       /* runs of graph host nodes (replays) */
    uint64_t bytes;
    uint64_t copy_ns;
    hist fn_time, copy_time, copy_mbps, dispatch;
    thread_use threads[MAX_THREADS];
    unsigned n_threads;
    uint64_t other_threads;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Host functions handed to the driver: launched on streams, or placed in
 * graphs as host nodes (made, or set on a node). */
static atomic_uint_fast64_t launched[HCG_FN_KIND_COUNT];
static atomic_uint_fast64_t nodes_made;

void hcg_count_launch(hcg_call *c, hcg_fnkind kind)
{
    hcg_pool_count(c, kind);
}

/* Launched on streams (counted in the pools) and set on graph nodes. */
static uint64_t launched_of(int k)
{
    return atomic_load_explicit(&launched[k], memory_order_relaxed) +
           hcg_pool_launched((hcg_fnkind)k);
}

void hcg_count_node(hcg_fnkind kind)
{
    atomic_fetch_add_explicit(&launched[kind], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&nodes_made, 1, memory_order_relaxed);
}

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
    S.ran[e->fnkind]++;
    hist_add(&S.fn_time, d);
    if (e->graph) /* a graph node's "enqueue" is its creation */
        S.graph_runs++;
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
        S.skipped[e->reason < HCGUARD_STATUS_COUNT ? e->reason : 0]++;
        if (e->flags & HCG_EVF_REPORTED)
            S.skipped_reported++;
        if (e->graph)
            S.graph_runs++;
        note_thread(e->tid, e->t_start, e->t_end);
        hcg_report_skip(e);
        break;
    case HCG_EV_REJECT:
        S.rejected[e->reason < HCGUARD_STATUS_COUNT ? e->reason : 0]++;
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&S.lock);
}

static uint64_t sum(const uint64_t *a, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += a[i];
    return t;
}

static uint64_t launched_total(int copies_only)
{
    uint64_t t = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (!copies_only || hcg_fnkind_is_copy((hcg_fnkind)k))
            t += launched_of(k);
    return t;
}

void hcg_summary_stats(hcguard_stats *o)
{
    memset(o, 0, sizeof *o);
    o->host_fns_launched = launched_total(0);
    o->copies_launched = launched_total(1);
    o->events_dropped = hcg_events_dropped();
    pthread_mutex_lock(&S.lock);
    o->host_fns_ran = sum(S.ran, HCG_FN_KIND_COUNT);
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        o->copies_ran += hcg_fnkind_is_copy((hcg_fnkind)k) ? S.ran[k] : 0;
    o->rejected = sum(S.rejected, HCGUARD_STATUS_COUNT);
    o->skipped = sum(S.skipped, HCGUARD_STATUS_COUNT);
    o->bytes_copied = S.bytes;
    pthread_mutex_unlock(&S.lock);
}

static uint64_t errors_locked(void)
{
    return sum(S.rejected, HCGUARD_STATUS_COUNT) + sum(S.skipped, HCGUARD_STATUS_COUNT) -
           S.skipped_reported;
}

/* Everything --error-exitcode counts: errors, and audit findings. */
uint64_t hcg_summary_errors(void)
{
    pthread_mutex_lock(&S.lock);
    uint64_t n = errors_locked();
    pthread_mutex_unlock(&S.lock);
    return n + hcg_audit_findings();
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
    uint64_t total = sum(counts, HCGUARD_STATUS_COUNT);
    hcg_msg("%s: %" PRIu64, what, total);
    for (int i = 1; i < HCGUARD_STATUS_COUNT; i++)
        if (counts[i])
            hcg_msg("    %-18s %8" PRIu64 "  %s", hcguard_status_name((hcguard_status)i),
                    counts[i], hcguard_status_string((hcguard_status)i));
}

static void print_copies(void)
{
    char a[32], b[32];
    uint64_t ran = 0;
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        ran += hcg_fnkind_is_copy((hcg_fnkind)k) ? S.ran[k] : 0;
    hcg_msg("host copies: %" PRIu64 " launched, %" PRIu64 " ran, %s copied",
            launched_total(1), ran, fmt_bytes(S.bytes, a, sizeof a));
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        if (hcg_fnkind_is_copy((hcg_fnkind)k) && (launched_of(k) || S.ran[k]))
            hcg_msg("    recognised as %s: %" PRIu64 " launched, %" PRIu64 " ran",
                    hcg_fnkind_name((hcg_fnkind)k), launched_of(k), S.ran[k]);
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

void hcg_summary_print(int fd)
{
    (void)fd;
    const hcg_config *cfg = hcg_config_get();
    static const char *modes[] = {"guard", "audit", "off"};
    pthread_mutex_lock(&S.lock);
    uint64_t errors = errors_locked();
    hcg_msg("HCGUARD SUMMARY (pid %d, mode %s)", (int)getpid(), modes[cfg->mode]);
    uint64_t nodes = atomic_load(&nodes_made);
    if (nodes)
        hcg_msg("host functions: %" PRIu64 " launched (%" PRIu64 " on streams, %" PRIu64
                " set on graph nodes), %" PRIu64 " ran",
                launched_total(0), launched_total(0) - nodes, nodes, sum(S.ran, HCG_FN_KIND_COUNT));
    else
        hcg_msg("host functions: %" PRIu64 " launched, %" PRIu64 " ran", launched_total(0),
                sum(S.ran, HCG_FN_KIND_COUNT));
    if (S.graph_runs)
        hcg_msg("graph host node runs: %" PRIu64, S.graph_runs);
    print_copies();
    print_reasons(cfg->mode == HCG_MODE_AUDIT ? "bad records reported at enqueue (passed through)"
                                              : "bad records rejected at enqueue",
                  S.rejected);
    print_reasons("copies skipped at run time", S.skipped);
    if (S.skipped_reported)
        hcg_msg("    (%" PRIu64 " of them reported at enqueue already)", S.skipped_reported);
    print_time_hist("host function run time", &S.fn_time);
    print_time_hist("dispatch latency (enqueue to start)", &S.dispatch);
    if (S.n_threads) {
        hcg_msg("callback threads: %u", S.n_threads);
        print_threads();
    }
    uint64_t dropped = hcg_events_dropped();
    if (dropped)
        hcg_msg("events dropped (full per-thread buffer): %" PRIu64, dropped);
    hcg_jsonl_summary();
    hcg_trace_summary();
    pthread_mutex_unlock(&S.lock);
    hcg_audit_print();
    uint64_t audit_errors = hcg_audit_errors();
    uint64_t warnings = hcg_audit_findings() - audit_errors;
    errors += audit_errors;
    hcg_copy_fns_check(1);
    hcg_problems_print();
    uint64_t unprinted = hcg_print_suppressed();
    if (unprinted)
        hcg_msg("findings not printed (print limit %u): %" PRIu64 "; they are counted above",
                cfg->print_limit, unprinted);
    if (warnings)
        hcg_msg("ERROR SUMMARY: %" PRIu64 " error%s, %" PRIu64 " warning%s", errors,
                errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
    else
        hcg_msg("ERROR SUMMARY: %" PRIu64 " error%s", errors, errors == 1 ? "" : "s");
}

void hcg_summary_after_fork(void)
{
    memset(&S, 0, sizeof S);
    pthread_mutex_init(&S.lock, NULL);
    for (int k = 0; k < HCG_FN_KIND_COUNT; k++)
        atomic_store(&launched[k], 0);
    atomic_store(&nodes_made, 0);
}

int hcg_summary_active(void)
{
    pthread_mutex_lock(&S.lock);
    uint64_t seen = sum(S.ran, HCG_FN_KIND_COUNT) + sum(S.rejected, HCGUARD_STATUS_COUNT) +
                    sum(S.skipped, HCGUARD_STATUS_COUNT);
    pthread_mutex_unlock(&S.lock);
    return seen || launched_total(0) || hcg_audit_findings();
}
