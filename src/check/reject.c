/* The report of each bad record found at enqueue, on the application's
 * thread while the stack exists: an event with the call site, and the
 * first of each identical kind (reason, function, call site) printed now,
 * under the print limit, so that it is said even if the process dies
 * next. The collector counts the rest and the summary lists them all
 * (src/sinks/findings.c). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check/check.h"

#define SEEN_SLOTS 4096

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen {
    uintptr_t fn, pc;
    unsigned reason; /* 0: free */
} seen[SEEN_SLOTS];
static unsigned n_seen;

void hcg_reject_after_fork(void)
{
    pthread_mutex_init(&seen_lock, NULL);
    memset(seen, 0, sizeof seen);
    n_seen = 0;
}

/* 1 the first time (reason, fn, pc) is seen (and once the set is full). */
static int first_time(unsigned reason, uintptr_t fn, uintptr_t pc)
{
    uint64_t h = ((reason * 0x9e3779b97f4a7c15ull) ^ fn) * 0x9e3779b97f4a7c15ull;
    h = (h ^ pc) * 0x9e3779b97f4a7c15ull;
    int first = 1;
    pthread_mutex_lock(&seen_lock);
    for (unsigned i = 0; i < SEEN_SLOTS; i++) {
        struct seen *s = &seen[(h + i) % SEEN_SLOTS];
        if (s->reason == reason && s->fn == fn && s->pc == pc) {
            first = 0;
            break;
        }
        if (s->reason == 0) {
            if (n_seen < SEEN_SLOTS * 3 / 4) {
                *s = (struct seen){fn, pc, reason};
                n_seen++;
            }
            break;
        }
    }
    pthread_mutex_unlock(&seen_lock);
    return first;
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
    snprintf(buf, len, "%p %s (%s%s%s)", fn, name, hcg_fnkind_name(kind),
             obj[0] ? ", in " : "", hcg_file_name(obj));
}

static void print_reject(hcg_api api, CUstream s, void *fn, void *user, hcg_fnkind kind,
                         const hcguard_copy_record *r, hcguard_status why, int refused,
                         uintptr_t site)
{
    char sbuf[32], fbuf[HCG_PATH_MAX + 300];
    describe_fn(fn, kind, fbuf, sizeof fbuf);
    hcg_msg("ERROR: bad host-copy record %s",
            refused ? "rejected" : "passed through (audit mode)");
    hcg_msg("    reason: %s: %s", hcguard_status_name(why), hcguard_status_string(why));
    if (r)
        hcg_msg("    record %p: dst 0x%jx, src 0x%jx, nbytes %zu", user, (uintmax_t)r->dst,
                (uintmax_t)r->src, r->nbytes);
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
    hcg_callsite_print("called from", site);
}

void hcg_report_reject(hcg_api api, CUstream s, void *fn, void *user,
                       hcg_fnkind kind, const hcguard_copy_record *r,
                       hcguard_status why, int refused)
{
    hcg_event e = hcg_event_make(HCG_EV_REJECT, why, api, (uintptr_t)s, (uintptr_t)fn,
                                 (uintptr_t)user);
    e.fnkind = (uint8_t)kind;
    if (!refused)
        e.flags |= HCG_EVF_PASSED;
    if (r) {
        e.dst = r->dst;
        e.src = r->src;
        e.bytes = r->nbytes;
        e.flags |= HCG_EVF_HAVE_RECORD;
    }
    e.caller = hcg_callsite_here();
    hcg_self.reject_seq = e.seq; /* the launch's runs name it (audit mode) */
    hcg_event_push_app(&e);
    if (first_time(why, (uintptr_t)fn, hcg_callsite_pc(e.caller)) && hcg_print_take()) {
        /* Naming the function and call site reads files: no cancellation
         * point added to a launch, which has none of its own. */
        int cancel = hcg_nocancel_begin();
        print_reject(api, s, fn, user, kind, r, why, refused, e.caller);
        hcg_nocancel_end(cancel);
    }
}
