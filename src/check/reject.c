/* The report of each bad record found at enqueue: an event, and (under the
 * print limit) a message that says what was done about it. */
#include <stdio.h>
#include <string.h>

#include "check/check.h"

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
    hcg_event e = hcg_event_make(HCG_EV_REJECT, why, api, (uintptr_t)s, (uintptr_t)fn,
                                 (uintptr_t)user);
    e.fnkind = (uint8_t)kind;
    if (r) {
        e.dst = r->dst;
        e.src = r->src;
        e.bytes = r->nbytes;
    }
    hcg_event_push(&e);

    if (!hcg_print_take())
        return;
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
