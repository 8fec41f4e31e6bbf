/* Findings, on the collector's side: bad records rejected at enqueue,
 * copies skipped when they ran, and the audit's findings (src/check/audit.c).
 * Each is an error or a warning (hcg_severity_of, the README's table).
 * Identical ones (kind, reason, function, call site and what was called)
 * are merged into one group: the first of a group is printed under the
 * print limit, the rest are counted, and the summary lists every group.
 * Slow host functions are aggregated the same way, with what waited
 * behind them. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/sinks.h"

const char *hcg_called_name(uint64_t what)
{
    if (what & HCG_FIND_WRAPPER_BIT)
        return hcg_api_name((hcg_api)(what & 0xffff));
    if (what & HCG_FIND_ENTRY_BIT)
        return hcg_entry_name((hcg_entry)(what & 0xffff));
    const char *n = what ? hcg_thunk_name((unsigned)(what - 1)) : NULL;
    return n ? n : "a driver function";
}

/* ---- severity: the README's table ------------------------------------------ */
int hcg_severity_of(uint8_t ev, unsigned reason)
{
    if (ev != HCG_EV_FINDING) /* bad records, guard or audit mode: they would crash */
        return HCG_SEV_ERROR;
    switch (reason) {
    case HCG_FIND_CUDA_CALL:        /* forbidden, often a deadlock */
    case HCG_FIND_LIBC_FN:          /* called with the wrong signature */
    case HCG_FIND_ONESHOT_IN_GRAPH: /* a second replay reads freed memory */
        return HCG_SEV_ERROR;
    default: /* closures, slow and hung functions cost time */
        return HCG_SEV_WARNING;
    }
}

uint64_t hcg_findings_of_severity(const hcg_counts *c, int sev)
{
    uint64_t n = 0;
    for (int f = 1; f < HCG_FIND_COUNT; f++)
        if (hcg_severity_of(HCG_EV_FINDING, (unsigned)f) == sev)
            n += c->v[HCG_CNT_FINDING + f];
    return n;
}

/* ---- the groups ---------------------------------------------------------- */
typedef struct group {
    uint8_t ev, reason, fnkind, api;
    uintptr_t fn, pc; /* pc: the call site's first frame */
    uint64_t what;    /* cuda-call-in-host-fn: what was called */
    uint64_t count;
    uint64_t total_ns, max_ns, delayed, max_wait; /* slow: run times, what waited */
    uintptr_t site;   /* the first event's site, with its frames */
    uintptr_t stream, graph;
} group;

#define MAX_HUNG 16
#define MAX_SLOW_THREADS 64

static struct {
    pthread_mutex_t lock;
    group *g; /* open addressing; cap a power of two, at most half full */
    size_t cap, n;
    /* Runs reported hung, so that they are not also slow. */
    struct { uint32_t tid; uintptr_t fn; uint64_t start; } hung[MAX_HUNG];
    unsigned n_hung;
    /* Each thread's last slow run: later runs enqueued before it ended
     * waited behind it. */
    struct { uint32_t tid; uint64_t end; size_t gi; } slow_last[MAX_SLOW_THREADS];
    unsigned n_slow_last;
    /* Runs whose launch took no enqueue stamp (sampled): what waited is
     * known only of the others. */
    uint64_t unstamped;
} A = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t group_hash(const group *k)
{
    uint64_t h = ((uint64_t)k->ev << 8 | k->reason) * 0x9e3779b97f4a7c15ull;
    h = (h ^ k->fn) * 0x9e3779b97f4a7c15ull;
    h = (h ^ k->pc) * 0x9e3779b97f4a7c15ull;
    return (h ^ k->what) * 0x9e3779b97f4a7c15ull;
}

static int group_same(const group *a, const group *b)
{
    return a->ev == b->ev && a->reason == b->reason && a->fn == b->fn && a->pc == b->pc &&
           a->what == b->what;
}

static int grow(void)
{
    size_t cap = A.cap ? A.cap * 2 : 256;
    group *g = calloc(cap, sizeof *g);
    if (!g)
        return -1;
    for (size_t i = 0; i < A.cap; i++) {
        if (!A.g[i].count)
            continue;
        size_t j = (size_t)group_hash(&A.g[i]) & (cap - 1);
        while (g[j].count)
            j = (j + 1) & (cap - 1);
        g[j] = A.g[i];
    }
    free(A.g);
    A.g = g;
    A.cap = cap;
    A.n_slow_last = 0; /* their indices moved */
    return 0;
}

/* The group of k, counted once more; *first: it is new. NULL if out of
 * memory (then counted only in the exact counters). */
static group *group_add(const group *k, int *first)
{
    *first = 0;
    if ((A.n + 1) * 2 > A.cap && grow() != 0)
        return NULL;
    size_t j = (size_t)group_hash(k) & (A.cap - 1);
    while (A.g[j].count && !group_same(&A.g[j], k))
        j = (j + 1) & (A.cap - 1);
    if (!A.g[j].count) {
        A.g[j] = *k;
        A.n++;
        *first = 1;
    }
    A.g[j].count++;
    return &A.g[j];
}

static group key_of(const hcg_event *e)
{
    group k;
    memset(&k, 0, sizeof k);
    k.ev = e->kind;
    k.reason = e->reason;
    k.fnkind = e->fnkind;
    k.api = e->api;
    k.fn = e->fn;
    k.site = e->caller;
    k.pc = hcg_callsite_pc(e->caller);
    /* What else tells identical ones apart: the entry point called, or
     * the signal a copy faulted with. */
    k.what = e->kind == HCG_EV_FINDING && e->reason == HCG_FIND_CUDA_CALL ? e->bytes
             : e->kind == HCG_EV_SKIP                                     ? e->fault_sig
                                                                          : 0;
    k.stream = e->stream;
    k.graph = e->graph;
    return k;
}

/* ---- words ---------------------------------------------------------------- */
static void describe(uintptr_t fn, char *buf, size_t len)
{
    char name[256], obj[HCG_PATH_MAX];
    const char *libc = hcg_audit_libc_name((const void *)fn);
    if (libc) /* an IFUNC's implementation has no symbol of its own */
        snprintf(name, sizeof name, "%s", libc);
    if (hcg_symbolize((const void *)fn, libc ? NULL : name, sizeof name, obj, sizeof obj) != 0 &&
        !libc)
        snprintf(name, sizeof name, "anonymous");
    snprintf(buf, len, "%p %s%s%s%s", (void *)fn, name, obj[0] ? " (in " : "",
             hcg_file_name(obj), obj[0] ? ")" : "");
}

/* "called from" (at enqueue) or "enqueued at" (run time): where; a graph
 * node's run names where the node was made or set (a captured launch: the
 * launch), or its graph when that is not known. */
static void print_site(const char *how, uintptr_t site, uintptr_t graph)
{
    if (!site && graph)
        hcg_msg("    %s: a host node of graph %p", how, (void *)graph);
    else
        hcg_callsite_print(graph ? "host node made at" : how, site);
}

static void print_skip(const hcg_event *e)
{
    char where[96];
    if (e->graph)
        snprintf(where, sizeof where, "graph %p, node %p", (void *)e->graph, (void *)e->node);
    else
        snprintf(where, sizeof where, "stream %p", (void *)e->stream);
    hcg_msg("ERROR: host copy skipped when it ran: %s: %s",
            hcguard_status_name((hcguard_status)e->reason),
            hcguard_status_string((hcguard_status)e->reason));
    hcg_msg("    record now: dst 0x%jx, src 0x%jx, nbytes %ju (%s%s)", (uintmax_t)e->dst,
            (uintmax_t)e->src, (uintmax_t)e->bytes, where,
            e->reason == HCGUARD_ERR_COPY_FAULTED ? ", as checked"
                                                  : ", changed since it was checked");
    if (e->reason == HCGUARD_ERR_COPY_FAULTED)
        hcg_msg("    fault: %s (%s) at address 0x%jx; contained, the program goes on",
                e->fault_sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                hcg_fault_code_name(e->fault_sig, e->fault_code), (uintmax_t)e->fault_addr);
    print_site("enqueued at", e->caller, e->graph);
}

static void print_finding(const hcg_event *e)
{
    char fbuf[HCG_PATH_MAX + 300];
    describe(e->fn, fbuf, sizeof fbuf);
    int guard = hcg_config_get()->mode == HCG_MODE_GUARD;
    const char *name = hcg_finding_name((hcg_finding)e->reason);
    switch (e->reason) {
    case HCG_FIND_CUDA_CALL:
        hcg_msg("ERROR: %s: %s called inside host function %s", name,
                hcg_called_name(e->bytes), fbuf);
        hcg_msg("    CUDA calls are not allowed in host functions (they may deadlock); %s",
                guard ? "the call returned CUDA_ERROR_NOT_PERMITTED without reaching the driver"
                      : "the call was passed to the driver (audit mode)");
        hcg_msg("    thread %u, %s %p", e->tid, e->graph ? "graph" : "stream",
                (void *)(e->graph ? e->graph : e->stream));
        print_site("the host function was enqueued at", e->caller, e->graph);
        break;
    case HCG_FIND_LIBC_FN:
        hcg_msg("ERROR: %s: %s passed to %s as a host function", name, fbuf,
                hcg_api_name((hcg_api)e->api));
        hcg_msg("    it does not have CUhostFn's signature (void fn(void *)) and would be "
                "called with garbage; %s; use hcguard_host_copy or cuda.core's HOST_COPY_FN "
                "with a {dst, src, nbytes} record",
                guard ? "the launch returned CUDA_ERROR_INVALID_VALUE" : "passed through (audit mode)");
        print_site("called from", e->caller, 0);
        break;
    case HCG_FIND_CLOSURE:
        hcg_msg("WARNING: %s: host function %p is code in anonymous memory (a ctypes, cffi "
                "or libffi closure)", name, (void *)e->fn);
        hcg_msg("    a Python callback takes the GIL on the driver's thread and holds up every "
                "other host function of the context; for copies use a host-copy function "
                "(cuda.core HOST_COPY_FN, hcguard_host_copy)");
        print_site("called from", e->caller, 0);
        break;
    case HCG_FIND_ONESHOT_IN_GRAPH:
        hcg_msg("ERROR: %s: host function %s was captured into a graph through cuda.bindings' "
                "cuLaunchHostFunc", name, fbuf);
        hcg_msg("    its wrapper frees the wrapper's data after the first run, so a second "
                "replay of the graph would read freed memory; hcguard calls the function "
                "directly on every replay, and frees the data with the graph");
        print_site("called from", e->caller, 0);
        break;
    case HCG_FIND_HANG:
        hcg_msg("WARNING: %s: host function %s has been running for %.1f s on thread %u",
                name, fbuf, (double)(e->t_end - e->t_start) / 1e9, e->tid);
        hcg_msg("    every host function of the context waits behind it; the program goes on");
        print_site("enqueued at", e->caller, 0);
        break;
    default:
        break;
    }
}

static void print_slow(const hcg_event *e)
{
    char fbuf[HCG_PATH_MAX + 300];
    describe(e->fn, fbuf, sizeof fbuf);
    hcg_msg("WARNING: %s: host function %s ran %.1f ms on thread %u (the threshold is %g ms)",
            hcg_finding_name(HCG_FIND_SLOW), fbuf, (double)(e->t_end - e->t_start) / 1e6,
            e->tid, hcg_config_get()->slow_ms);
    hcg_msg("    every host function of the context waits behind it; the summary says how "
            "many did");
    print_site("enqueued at", e->caller, e->graph);
}

/* The first of a group is printed (under the print limit), the rest
 * counted; the summary says how many. */
static void add_and_print(const hcg_event *e, void (*print)(const hcg_event *))
{
    group k = key_of(e);
    int first;
    group *g = group_add(&k, &first);
    if ((first || !g) && hcg_print_take())
        print(e);
}

/* ---- slow and hung --------------------------------------------------------- */
static void note_hung(const hcg_event *e)
{
    unsigned i = A.n_hung < MAX_HUNG ? A.n_hung++ : (unsigned)(e->t_start % MAX_HUNG);
    A.hung[i].tid = e->tid;
    A.hung[i].fn = e->fn;
    A.hung[i].start = e->t_start;
}

/* 1 if this run was reported hung (its clock reference may differ by a
 * little: within 1 ms); forgotten then. */
static int was_hung(const hcg_event *e)
{
    for (unsigned i = 0; i < A.n_hung; i++) {
        uint64_t d = A.hung[i].start > e->t_start ? A.hung[i].start - e->t_start
                                                  : e->t_start - A.hung[i].start;
        if (A.hung[i].tid == e->tid && A.hung[i].fn == e->fn && d < 1000000) {
            A.hung[i] = A.hung[--A.n_hung];
            return 1;
        }
    }
    return 0;
}

static void note_delays(const hcg_event *e)
{
    if (e->flags & HCG_EVF_NO_STAMP) {
        A.unstamped++;
        return;
    }
    for (unsigned i = 0; i < A.n_slow_last; i++) {
        if (A.slow_last[i].tid != e->tid)
            continue;
        uint64_t end = A.slow_last[i].end;
        if (e->t_enqueue < end && e->t_start >= end && A.slow_last[i].gi < A.cap) {
            group *g = &A.g[A.slow_last[i].gi];
            g->delayed++;
            if (e->t_start - e->t_enqueue > g->max_wait)
                g->max_wait = e->t_start - e->t_enqueue;
        }
    }
}

static void remember_slow(const hcg_event *e, const group *g)
{
    unsigned i = 0;
    while (i < A.n_slow_last && A.slow_last[i].tid != e->tid)
        i++;
    if (i == A.n_slow_last) {
        if (A.n_slow_last == MAX_SLOW_THREADS)
            return;
        A.n_slow_last++;
    }
    A.slow_last[i].tid = e->tid;
    A.slow_last[i].end = e->t_end;
    A.slow_last[i].gi = (size_t)(g - A.g);
}

/* A host function ran (collector): a slow one is a finding, unless it
 * was reported hung. */
static void check_slow(const hcg_event *e)
{
    const hcg_config *cfg = hcg_config_get();
    uint64_t d = e->t_end - e->t_start;
    if (!HCG_FINDING_ON(cfg, HCG_FIND_SLOW) || cfg->slow_ms <= 0 ||
        (double)d / 1e6 <= cfg->slow_ms || was_hung(e))
        return;
    hcg_count_collector(HCG_FIND_SLOW);
    hcg_event f = *e;
    f.kind = HCG_EV_FINDING;
    f.reason = HCG_FIND_SLOW;
    group k = key_of(&f);
    int first;
    group *g = group_add(&k, &first);
    if (!g)
        return;
    g->total_ns += d;
    if (d > g->max_ns)
        g->max_ns = d;
    remember_slow(e, g);
    if (first && hcg_print_take())
        print_slow(&f);
}

void hcg_audit_event(const hcg_event *e)
{
    pthread_mutex_lock(&A.lock);
    switch (e->kind) {
    case HCG_EV_FINDING:
        if (e->reason == HCG_FIND_HANG)
            note_hung(e);
        add_and_print(e, print_finding);
        break;
    case HCG_EV_REJECT: { /* printed at enqueue (src/check/reject.c) */
        group k = key_of(e);
        int first;
        group_add(&k, &first);
        break;
    }
    case HCG_EV_SKIP:
        /* One reported at enqueue is that error, said there already. */
        if (!(e->flags & HCG_EVF_REPORTED))
            add_and_print(e, print_skip);
        /* fall through */
    case HCG_EV_RUN:
        if (!e->graph)
            note_delays(e);
        if (e->kind == HCG_EV_RUN)
            check_slow(e);
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&A.lock);
}

/* The parent's table, left as the fork found it: kept reachable, never
 * freed, as the fork may have come between the collector's free of the
 * old table and its store of the new one (a free here would be a second). */
static void *parent_groups;

void hcg_audit_after_fork(void)
{
    parent_groups = A.g;
    memset(&A, 0, sizeof A);
    pthread_mutex_init(&A.lock, NULL);
}

/* ---- the summary's lists --------------------------------------------------- */
static int by_count(const void *a, const void *b)
{
    const group *x = *(const group *const *)a, *y = *(const group *const *)b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    uint64_t tx = x->total_ns, ty = y->total_ns;
    return tx < ty ? 1 : tx > ty ? -1 : 0;
}

static void print_group(const group *g)
{
    char fbuf[HCG_PATH_MAX + 300], where[HCG_PATH_MAX + 600];
    describe(g->fn, fbuf, sizeof fbuf);
    if (g->site || !g->graph)
        hcg_callsite_name(g->site, where, sizeof where);
    else
        snprintf(where, sizeof where, "a host node of graph %p", (void *)g->graph);
    const char *how = g->ev == HCG_EV_REJECT ||
                              (g->ev == HCG_EV_FINDING && g->reason != HCG_FIND_CUDA_CALL &&
                               g->reason != HCG_FIND_SLOW && g->reason != HCG_FIND_HANG)
                          ? "called from"
                      : g->graph ? "host node made at"
                                 : "enqueued at";
    if (g->ev == HCG_EV_FINDING && g->reason == HCG_FIND_SLOW) {
        char a[32], b[32], c[32];
        snprintf(a, sizeof a, "%.1f ms", (double)g->total_ns / 1e6);
        snprintf(b, sizeof b, "%.1f ms", (double)g->max_ns / 1e6);
        snprintf(c, sizeof c, "%.1f ms", (double)g->max_wait / 1e6);
        char sampled[64] = "";
        if (A.unstamped)
            snprintf(sampled, sizeof sampled, " (of the launches stamped: 1 in %d)",
                     HCG_STAMP_EVERY);
        hcg_msg("        %8" PRIu64 "  %s, %s %s: total %s, max %s; %" PRIu64
                " host function%s waited behind them%s, the longest %s",
                g->count, fbuf, how, where, a, b, g->delayed, g->delayed == 1 ? "" : "s",
                sampled, c);
    } else if (g->ev == HCG_EV_FINDING && g->reason == HCG_FIND_CUDA_CALL) {
        hcg_msg("        %8" PRIu64 "  %s in %s, %s %s", g->count,
                hcg_called_name(g->what), fbuf, how, where);
    } else {
        hcg_msg("        %8" PRIu64 "  %s, %s %s", g->count, fbuf, how, where);
    }
}

/* Every group of (ev, reason), most frequent first. */
void hcg_findings_print_groups(uint8_t ev, unsigned reason)
{
    pthread_mutex_lock(&A.lock);
    size_t n = 0;
    for (size_t i = 0; i < A.cap; i++)
        n += A.g[i].count && A.g[i].ev == ev && A.g[i].reason == reason;
    const group **list = n ? malloc(n * sizeof *list) : NULL;
    size_t k = 0;
    for (size_t i = 0; list && i < A.cap; i++)
        if (A.g[i].count && A.g[i].ev == ev && A.g[i].reason == reason)
            list[k++] = &A.g[i];
    if (list)
        qsort(list, k, sizeof *list, by_count);
    for (size_t i = 0; i < k; i++)
        print_group(list[i]);
    free(list);
    pthread_mutex_unlock(&A.lock);
}
