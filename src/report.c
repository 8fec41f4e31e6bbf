/* Messages on stderr, and the report of each finding at enqueue. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hcg.h"

#define HCG_PREFIX "==hcguard== "
/* Past this many findings printed, keep counting but stop printing. */
#define HCG_MAX_PRINTED 100

static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint printed;

/* Fork hook (src/fork.c): a child forked while another thread printed
 * must not inherit the lock held. Not taken before the fork: a write to a
 * full pipe could hold the fork up for ever. */
void hcg_report_after_fork(void)
{
    pthread_mutex_init(&msg_lock, NULL);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void vmsg(const char *fmt, va_list ap)
{
    char buf[1024];
    size_t pre = strlen(HCG_PREFIX);
    memcpy(buf, HCG_PREFIX, pre);
    int n = vsnprintf(buf + pre, sizeof buf - pre - 1, fmt, ap);
    if (n < 0)
        return;
    size_t len = pre + ((size_t)n < sizeof buf - pre - 1 ? (size_t)n : sizeof buf - pre - 2);
    buf[len++] = '\n';
    pthread_mutex_lock(&msg_lock);
    write_all(STDERR_FILENO, buf, len);
    pthread_mutex_unlock(&msg_lock);
}

void hcg_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

void hcg_debug(const char *fmt, ...)
{
    if (!hcg_config_get()->debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

static const char *stream_name(CUstream s, char *buf, size_t len)
{
    if (s == NULL)
        return "0 (default stream)";
    if (s == CU_STREAM_LEGACY)
        return "CU_STREAM_LEGACY";
    if (s == CU_STREAM_PER_THREAD)
        return "CU_STREAM_PER_THREAD";
    snprintf(buf, len, "%p", (void *)s);
    return buf;
}

static void describe_fn(void *fn, hcg_fnkind kind, char *buf, size_t len)
{
    char name[256], obj[HCG_PATH_MAX];
    if (hcg_symbolize(fn, name, sizeof name, obj, sizeof obj) != 0)
        snprintf(name, sizeof name, "anonymous");
    const char *base = strrchr(obj, '/');
    snprintf(buf, len, "%p %s (%s%s%s)", fn, name, hcg_fnkind_name(kind),
             obj[0] ? ", in " : "", obj[0] ? (base ? base + 1 : obj) : "");
}

void hcg_report_reject(hcg_api api, CUstream s, void *fn, void *user,
                       hcg_fnkind kind, const hcguard_copy_record *r,
                       hcguard_status why, int refused)
{
    hcg_event e = {0};
    e.kind = HCG_EV_REJECT;
    e.fnkind = (uint8_t)kind;
    e.reason = (uint8_t)why;
    e.api = (uint8_t)api;
    e.tid = hcg_gettid();
    e.seq = hcg_next_seq();
    e.t_enqueue = hcg_ticks();
    e.fn = (uintptr_t)fn;
    e.user = (uintptr_t)user;
    e.stream = (uintptr_t)s;
    if (r) {
        e.dst = r->dst;
        e.src = r->src;
        e.bytes = r->nbytes;
    }
    hcg_event_push(&e);

    unsigned n = atomic_fetch_add(&printed, 1);
    if (n > HCG_MAX_PRINTED)
        return;
    if (n == HCG_MAX_PRINTED) {
        hcg_msg("(more than %d findings: further ones are counted, not printed)",
                HCG_MAX_PRINTED);
        return;
    }
    char sbuf[32], fbuf[HCG_PATH_MAX + 300];
    describe_fn(fn, kind, fbuf, sizeof fbuf);
    hcg_msg("%s: bad host-copy record %s", refused ? "ERROR" : "WARNING",
            refused ? "rejected" : "passed through (audit mode)");
    hcg_msg("    reason: %s: %s", hcguard_status_name(why), hcguard_status_string(why));
    if (r)
        hcg_msg("    record %p: dst 0x%jx, src 0x%jx, nbytes %zu", user,
                (uintmax_t)r->dst, (uintmax_t)r->src, r->nbytes);
    else
        hcg_msg("    record %p", user);
    hcg_msg("    host function %s", fbuf);
    if (api >= HCG_API_GRAPH_ADD_HOST_NODE)
        hcg_msg("    %s %s", hcg_api_name(api),
                refused ? "returned CUDA_ERROR_INVALID_VALUE; the graph was not changed"
                        : "went through; the copy will be skipped whenever the node runs");
    else
        hcg_msg("    %s on stream %s %s", hcg_api_name(api), stream_name(s, sbuf, sizeof sbuf),
                refused ? "returned CUDA_ERROR_INVALID_VALUE; nothing was enqueued"
                        : "was passed to the driver; the copy will be skipped when it runs");
}

/* A copy skipped when it ran (collector thread): printed under the same
 * cap as the findings at enqueue. */
void hcg_report_skip(const hcg_event *e)
{
    unsigned n = atomic_fetch_add(&printed, 1);
    if (n >= HCG_MAX_PRINTED) {
        if (n == HCG_MAX_PRINTED)
            hcg_msg("(more than %d findings: further ones are counted, not printed)",
                    HCG_MAX_PRINTED);
        return;
    }
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
