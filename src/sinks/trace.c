/* The trace (HCGUARD_TRACE / --trace): Chrome's trace event format, a JSON
 * array that Perfetto and chrome://tracing open. Every host function that
 * ran is a slice on its callback thread, named for the function, with its
 * stream, how long it waited in the queue and, for copies, bytes and GB/s;
 * a copy skipped at run time is a slice too; rejections and findings are
 * instant events on the thread that met them. Times are CLOCK_MONOTONIC
 * microseconds. A fork child writes a trace of its own only where the name
 * holds %p: two arrays cannot share a file. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sinks/sinks.h"

static hcg_sinkfile trace_file = {.fd = -1};

/* Callback threads already named in this file. */
#define MAX_NAMED 64
static uint32_t named[MAX_NAMED];
static unsigned n_named;

int hcg_trace_open(const char *path, const char *pattern)
{
    return hcg_sinkfile_open(&trace_file, "trace", path, pattern, 0, HCG_SINK_TRACE);
}

int hcg_trace_reopen(const char *path, pid_t pid)
{
    return hcg_sinkfile_reopen(&trace_file, "trace", path, pid);
}

void hcg_trace_flush(void)
{
    hcg_sinkfile_flush(&trace_file);
}

char hcg_trace_exec_state(void)
{
    return hcg_sinkfile_exec_state(&trace_file);
}

void hcg_trace_after_fork(void)
{
    hcg_sinkfile_after_fork(&trace_file);
    n_named = 0;
}

static int name_once(uint32_t tid)
{
    for (unsigned i = 0; i < n_named; i++)
        if (named[i] == tid)
            return 0;
    if (n_named < MAX_NAMED)
        named[n_named++] = tid;
    return 1;
}

/* Appends to p at *len, bounded by room: the formats below are short. */
static void put(char *p, size_t *len, size_t room, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *p, size_t *len, size_t room, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p + *len, room - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < room ? *len + (size_t)n : room - 1;
}

static void put_name(char *p, size_t *len, size_t room, const char *prefix, const char *name)
{
    put(p, len, room, "\"name\":\"%s", prefix);
    *len += hcg_json_str(p + *len, room - *len - 2, name);
    put(p, len, room, "\"");
}

static void slice(char *p, size_t *len, size_t room, const hcg_event *e)
{
    int copy = hcg_fnkind_is_copy((hcg_fnkind)e->fnkind);
    const char *cat = e->kind == HCG_EV_SKIP ? "skipped copy" : copy ? "host copy" : "host function";
    put_name(p, len, room, e->kind == HCG_EV_SKIP ? "skipped: " : "", hcg_fn_name(e->fn));
    put(p, len, room,
        ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u,"
        "\"args\":{\"api\":\"%s\",\"stream\":\"0x%" PRIxPTR "\",\"seq\":%" PRIu64,
        cat, (double)e->t_start / 1e3, (double)(e->t_end - e->t_start) / 1e3,
        (int)trace_file.pid, e->tid, hcg_api_name((hcg_api)e->api), e->stream, e->seq);
    if (e->graph)
        put(p, len, room, ",\"graph\":\"0x%" PRIxPTR "\",\"node\":\"0x%" PRIxPTR "\"", e->graph,
            e->node);
    else if (e->t_start > e->t_enqueue)
        put(p, len, room, ",\"wait_us\":%.3f", (double)(e->t_start - e->t_enqueue) / 1e3);
    if (copy)
        put(p, len, room, ",\"bytes\":%" PRIu64, e->bytes);
    if (copy && e->kind == HCG_EV_RUN && e->t_end > e->t_start)
        put(p, len, room, ",\"gbps\":%.3f", (double)e->bytes / (double)(e->t_end - e->t_start));
    if (e->kind == HCG_EV_SKIP)
        put(p, len, room, ",\"reason\":\"%s\"", hcguard_status_name((hcguard_status)e->reason));
    put(p, len, room, "}");
}

static void instant(char *p, size_t *len, size_t room, const hcg_event *e)
{
    int reject = e->kind == HCG_EV_REJECT;
    const char *what = reject ? hcguard_status_name((hcguard_status)e->reason)
                              : hcg_finding_name((hcg_finding)e->reason);
    put(p, len, room, "\"name\":\"%s%s\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,"
        "\"pid\":%d,\"tid\":%u,\"args\":{\"fn\":\"",
        reject ? "rejected: " : "", what, reject ? "rejected record" : "finding",
        (double)(reject ? e->t_enqueue : e->t_start) / 1e3, (int)trace_file.pid, e->tid);
    *len += hcg_json_str(p + *len, room - *len - 2, hcg_fn_name(e->fn));
    put(p, len, room, "\",\"api\":\"%s\",\"stream\":\"0x%" PRIxPTR "\"}",
        hcg_api_name((hcg_api)e->api), e->stream);
}

void hcg_trace_event(const hcg_event *e)
{
    char *p = hcg_sinkfile_reserve(&trace_file);
    if (!p)
        return;
    size_t room = HCG_SINK_EVENT_MAX, len = 0;
    put(p, &len, room, "%s", trace_file.started ? ",\n" : "[\n");
    int run = e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP;
    if (run && name_once(e->tid))
        put(p, &len, room,
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
            "\"args\":{\"name\":\"CUDA host functions (thread %u)\"}},\n",
            (int)trace_file.pid, e->tid, e->tid);
    put(p, &len, room, "{");
    if (run)
        slice(p, &len, room, e);
    else
        instant(p, &len, room, e);
    put(p, &len, room, "}");
    hcg_sinkfile_commit(&trace_file, len);
}

void hcg_trace_close(void)
{
    hcg_sinkfile_close(&trace_file, trace_file.started ? "\n]\n" : "[]\n");
}

void hcg_trace_summary(void)
{
    hcg_sinkfile_summary(&trace_file);
}
