/* The audit's findings (src/check/audit.c), on the collector's side: counted
 * by kind, printed once per (finding, function, what was called) under the
 * print limit, and listed in the summary; slow host functions also note
 * what waited behind them. And the copies skipped when they ran. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sinks/sinks.h"

/* The name of what was called: a thunk's entry point, or one of
 * hcguard's own wrappers (HCG_FIND_WRAPPER_BIT). */
static const char *called_name(uint64_t what, char *buf, size_t len)
{
    if (what & HCG_FIND_WRAPPER_BIT)
        return hcg_api_name((hcg_api)(what & 0xffff));
    const char *n = what ? hcg_thunk_name((unsigned)(what - 1)) : NULL;
    snprintf(buf, len, "%s", n ? n : "a driver function");
    return buf;
}

#define SEEN_SLOTS 1024
#define MAX_SLOW 16

typedef struct seen {
    uint8_t kind;
    uintptr_t fn;
    uint64_t what;
    uint64_t count;
} seen;

typedef struct slow_rec {
    uintptr_t fn, stream;
    uint32_t tid;
    uint64_t start, end, dur;
    uint64_t delayed, max_wait;
} slow_rec;

static struct {
    pthread_mutex_t lock;
    seen seen[SEEN_SLOTS]; /* counted exactly elsewhere (hcg_counts) */
    unsigned n_seen;
    slow_rec slow[MAX_SLOW];
    unsigned n_slow;
} A = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void describe(uintptr_t fn, char *buf, size_t len)
{
    char name[256], obj[HCG_PATH_MAX];
    const char *libc = hcg_audit_libc_name((const void *)fn);
    if (libc) /* an IFUNC's implementation has no symbol of its own */
        snprintf(name, sizeof name, "%s", libc);
    if (hcg_symbolize((const void *)fn, libc ? NULL : name, sizeof name, obj, sizeof obj) != 0 &&
        !libc)
        snprintf(name, sizeof name, "anonymous");
    const char *base = strrchr(obj, '/');
    snprintf(buf, len, "%p %s%s%s%s", (void *)fn, name, obj[0] ? " (in " : "",
             obj[0] ? (base ? base + 1 : obj) : "", obj[0] ? ")" : "");
}

/* 1 the first time this (kind, fn, what) is seen. */
static int first_time(uint8_t kind, uintptr_t fn, uint64_t what)
{
    for (unsigned i = 0; i < A.n_seen; i++)
        if (A.seen[i].kind == kind && A.seen[i].fn == fn && A.seen[i].what == what) {
            A.seen[i].count++;
            return 0;
        }
    if (A.n_seen < SEEN_SLOTS)
        A.seen[A.n_seen++] = (seen){kind, fn, what, 1};
    return 1;
}

static void print_finding(const hcg_event *e)
{
    char fbuf[HCG_PATH_MAX + 300], nbuf[80];
    describe(e->fn, fbuf, sizeof fbuf);
    int guard = hcg_config_get()->mode == HCG_MODE_GUARD;
    switch (e->reason) {
    case HCG_FIND_CUDA_CALL:
        hcg_msg("ERROR: %s: %s called inside host function %s", hcg_finding_name(e->reason),
                called_name(e->bytes, nbuf, sizeof nbuf), fbuf);
        hcg_msg("    CUDA calls are not allowed in host functions (they may deadlock); %s",
                guard ? "the call returned CUDA_ERROR_NOT_PERMITTED without reaching the driver"
                      : "the call was passed to the driver (audit mode)");
        hcg_msg("    thread %u, %s %p", e->tid, e->graph ? "graph" : "stream",
                (void *)(e->graph ? e->graph : e->stream));
        break;
    case HCG_FIND_LIBC_FN:
        hcg_msg("ERROR: %s: %s passed to %s as a host function", hcg_finding_name(e->reason),
                fbuf, hcg_api_name((hcg_api)e->api));
        hcg_msg("    it does not have CUhostFn's signature (void fn(void *)) and would be "
                "called with garbage; %s; use hcguard_host_copy or cuda.core's HOST_COPY_FN "
                "with a {dst, src, nbytes} record",
                guard ? "the launch returned CUDA_ERROR_INVALID_VALUE" : "passed through (audit mode)");
        break;
    case HCG_FIND_CLOSURE:
        hcg_msg("WARNING: %s: host function %p is code in anonymous memory (a ctypes, cffi "
                "or libffi closure)", hcg_finding_name(e->reason), (void *)e->fn);
        hcg_msg("    a Python callback takes the GIL on the driver's thread and holds up every "
                "other host function of the context; for copies use a host-copy function "
                "(cuda.core HOST_COPY_FN, hcguard_host_copy)");
        break;
    case HCG_FIND_ONESHOT_IN_GRAPH:
        hcg_msg("ERROR: %s: host function %s was captured into a graph through cuda.bindings' "
                "cuLaunchHostFunc", hcg_finding_name(e->reason), fbuf);
        hcg_msg("    its wrapper frees the wrapper's data after the first run, so a second "
                "replay of the graph would read freed memory; hcguard calls the function "
                "directly on every replay, and frees the data with the graph");
        break;
    case HCG_FIND_HANG:
        hcg_msg("WARNING: %s: host function %s has been running for %.1f s on thread %u",
                hcg_finding_name(e->reason), fbuf, (double)(e->t_end - e->t_start) / 1e9, e->tid);
        hcg_msg("    every host function of the context waits behind it; the program goes on");
        break;
    default:
        break;
    }
}

static void note_delays(const hcg_event *e)
{
    for (unsigned i = 0; i < A.n_slow; i++) {
        slow_rec *s = &A.slow[i];
        if (s->tid == e->tid && e->t_enqueue < s->end && e->t_start >= s->end) {
            s->delayed++;
            uint64_t wait = e->t_start - e->t_enqueue;
            if (wait > s->max_wait)
                s->max_wait = wait;
        }
    }
}

/* A host function ran (collector): slow ones are findings. */
static void check_slow(const hcg_event *e)
{
    double ms = (double)(e->t_end - e->t_start) / 1e6;
    if (ms <= hcg_config_get()->slow_ms)
        return;
    hcg_count_collector(HCG_FIND_SLOW);
    if (A.n_slow < MAX_SLOW)
        A.slow[A.n_slow++] =
            (slow_rec){e->fn, e->stream, e->tid, e->t_start, e->t_end, e->t_end - e->t_start, 0, 0};
}

void hcg_audit_event(const hcg_event *e)
{
    pthread_mutex_lock(&A.lock);
    if (e->kind == HCG_EV_FINDING) {
        if (first_time(e->reason, e->fn, e->bytes) && hcg_print_take())
            print_finding(e);
    } else if (e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP) {
        if (!e->graph)
            note_delays(e);
        if (e->kind == HCG_EV_RUN)
            check_slow(e);
    }
    pthread_mutex_unlock(&A.lock);
}

void hcg_audit_after_fork(void)
{
    memset(&A, 0, sizeof A);
    pthread_mutex_init(&A.lock, NULL);
}

/* CUDA calls, libc functions and one-shot wrappers in graphs would crash
 * or deadlock: errors. The rest cost time: warnings. */
uint64_t hcg_audit_errors(const hcg_counts *c)
{
    return c->v[HCG_CNT_FINDING + HCG_FIND_CUDA_CALL] + c->v[HCG_CNT_FINDING + HCG_FIND_LIBC_FN] +
           c->v[HCG_CNT_FINDING + HCG_FIND_ONESHOT_IN_GRAPH];
}

static const char *fmt_ms(uint64_t ns, char *buf, size_t len)
{
    snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
    return buf;
}

void hcg_audit_print(const hcg_counts *c)
{
    char fbuf[HCG_PATH_MAX + 300], a[32], b[32];
    const uint64_t *count = &c->v[HCG_CNT_FINDING];
    pthread_mutex_lock(&A.lock);
    uint64_t total = 0;
    for (int i = 1; i < HCG_FIND_COUNT; i++)
        total += count[i];
    hcg_msg("audit findings: %" PRIu64, total);
    unsigned limit = hcg_config_get()->print_limit;
    for (int i = 1; i < HCG_FIND_COUNT; i++) {
        if (!count[i])
            continue;
        hcg_msg("    %-26s %8" PRIu64, hcg_finding_name((hcg_finding)i), count[i]);
        unsigned listed = 0, unlisted = 0;
        for (unsigned k = 0; k < A.n_seen; k++) {
            if (A.seen[k].kind != i || i == HCG_FIND_SLOW)
                continue;
            if (limit && listed >= limit) {
                unlisted++;
                continue;
            }
            listed++;
            char nbuf[80];
            describe(A.seen[k].fn, fbuf, sizeof fbuf);
            if (i == HCG_FIND_CUDA_CALL)
                hcg_msg("        %s in %s: %" PRIu64 " call%s",
                        called_name(A.seen[k].what, nbuf, sizeof nbuf), fbuf, A.seen[k].count,
                        A.seen[k].count == 1 ? "" : "s");
            else
                hcg_msg("        %s: %" PRIu64 " time%s", fbuf, A.seen[k].count,
                        A.seen[k].count == 1 ? "" : "s");
        }
        if (unlisted)
            hcg_msg("        (%u more not printed: the print limit is %u)", unlisted, limit);
    }
    for (unsigned k = 0; k < A.n_slow; k++) {
        const slow_rec *s = &A.slow[k];
        describe(s->fn, fbuf, sizeof fbuf);
        hcg_msg("        slow: %s ran %s on thread %u (stream %p); %" PRIu64
                " host function%s waited behind it, the longest %s",
                fbuf, fmt_ms(s->dur, a, sizeof a), s->tid, (void *)s->stream, s->delayed,
                s->delayed == 1 ? "" : "s", fmt_ms(s->max_wait, b, sizeof b));
    }
    if (count[HCG_FIND_SLOW] > A.n_slow)
        hcg_msg("        (%" PRIu64 " more slow host functions not listed)",
                count[HCG_FIND_SLOW] - A.n_slow);
    pthread_mutex_unlock(&A.lock);
}

/* A copy skipped when it ran (collector thread): printed under the same
 * cap as the findings at enqueue. */
void hcg_report_skip(const hcg_event *e)
{
    if (!hcg_print_take())
        return;
    char where[96];
    if (e->graph)
        snprintf(where, sizeof where, "graph %p, node %p", (void *)e->graph, (void *)e->node);
    else
        snprintf(where, sizeof where, "stream %p", (void *)e->stream);
    hcg_msg("%s: host copy skipped when it ran: %s: %s", (e->flags & HCG_EVF_REPORTED) ? "WARNING" : "ERROR",
            hcguard_status_name((hcguard_status)e->reason),
            hcguard_status_string((hcguard_status)e->reason));
    hcg_msg("    record now: dst 0x%jx, src 0x%jx, nbytes %ju (%s%s)", (uintmax_t)e->dst,
            (uintmax_t)e->src, (uintmax_t)e->bytes, where,
            (e->flags & HCG_EVF_REPORTED)               ? ", reported at enqueue"
            : e->reason == HCGUARD_ERR_COPY_FAULTED ? ", as checked"
                                                    : ", changed since it was checked");
    if (e->reason == HCGUARD_ERR_COPY_FAULTED)
        hcg_msg("    fault: %s (%s) at address 0x%jx; contained, the program goes on",
                e->fault_sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                hcg_fault_code_name(e->fault_sig, e->fault_code), (uintmax_t)e->fault_addr);
}
