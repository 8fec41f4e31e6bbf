/* The trace (HCGUARD_TRACE / --trace): Chrome's trace event format, a JSON
 * array that Perfetto and chrome://tracing open. Every host function that
 * ran is a slice on its callback thread, named for the function, with its
 * stream (for a graph node's run, the stream the graph was launched on),
 * graph and node, how long it waited in the queue and, for copies, bytes
 * and GB/s; a copy skipped at run time is a slice too. Its enqueue is a
 * short slice on the thread that launched it, joined to the run by a flow
 * arrow. Rejections and findings are instant events on the thread that
 * met them. Every process is named (program, pid, rank) and so is every
 * thread it uses. Times are CLOCK_MONOTONIC microseconds, written to the
 * nanosecond. A fork child writes a trace of its own only where the name
 * holds %p: two arrays cannot share a file. */
#include <inttypes.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sinks/sinks.h"

static hcg_sinkfile trace_file = {.fd = -1};

/* Threads already named in this file, and whether the process is. */
#define MAX_NAMED 256
static uint32_t named[MAX_NAMED];
static unsigned n_named;
static int process_named;
/* Flow ids: unique in the file, across the images exec continues it with
 * (each starts from its own start time, in us, times 256). */
static uint64_t flow_next;
/* The last run slice's end on each callback thread (ns): a slice is never
 * made to begin before it (two drains' clock references may disagree by a
 * few ns), so that slices nest. */
#define MAX_TRACKS 64
static struct {
    uint32_t tid;
    uint64_t end;
} last_end[MAX_TRACKS];

static void restart(void)
{
    n_named = 0;
    process_named = 0;
    memset(last_end, 0, sizeof last_end);
    flow_next = (hcg_now_ns() / 1000) << 8;
}

int hcg_trace_open(const char *path, const char *pattern)
{
    restart();
    return hcg_sinkfile_open(&trace_file, "trace", path, pattern, 0, HCG_SINK_TRACE);
}

/* Whether s (n bytes) is one whole JSON object: braces and brackets
 * balanced outside strings (events hold no newline: strings escape it). */
static int whole_object(const char *s, size_t n)
{
    int depth = 0, in_str = 0;
    if (n == 0 || s[0] != '{')
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            if (s[i] == '\\')
                i++;
            else if (s[i] == '"')
                in_str = 0;
        } else if (s[i] == '"') {
            in_str = 1;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
        } else if ((s[i] == '}' || s[i] == ']') && --depth == 0) {
            return i == n - 1;
        }
    }
    return 0;
}

/* A trace left by a program that died: events are "[\n{...}" then
 * ",\n{...}"; a last event cut short is removed with the ",\n" before
 * it (or the whole array begun anew, if it was the first). */
static void drop_half_event(void)
{
    char tail[HCG_SINK_EVENT_MAX * 2];
    off_t size;
    size_t n = hcg_sinkfile_tail(&trace_file, tail, sizeof tail, &size);
    size_t k = n;
    while (k > 0 && tail[k - 1] != '\n')
        k--;
    if (n == 0 || k == n || whole_object(tail + k, n - k) || (k == 0 && (off_t)n != size))
        return; /* ends with a whole event (or a newline: closed, or nothing yet) */
    if (k >= 2 && tail[k - 2] == ',')
        hcg_sinkfile_cut(&trace_file, size - (off_t)(n - (k - 2)));
    else
        hcg_sinkfile_cut(&trace_file, 0); /* "[\n" and half the first event */
}

int hcg_trace_reopen(const char *path, pid_t pid)
{
    restart();
    int rc = hcg_sinkfile_reopen(&trace_file, "trace", path, pid);
    if (rc == 0)
        drop_half_event();
    return rc;
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
    restart();
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

/* A run slice on tid from start to *end (ns): begins no earlier than the
 * last one there ended; returns its start. */
static uint64_t track_start(uint32_t tid, uint64_t start, uint64_t *end)
{
    unsigned i = tid % MAX_TRACKS;
    if (last_end[i].tid == tid && start < last_end[i].end && *end > last_end[i].end)
        start = last_end[i].end;
    if (*end < start)
        *end = start;
    last_end[i].tid = tid;
    last_end[i].end = *end;
    return start;
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

/* ns as microseconds with three decimals: exact, no floating point. */
#define US_FMT "%" PRIu64 ".%03u"
#define US(ns) (uint64_t)((ns) / 1000), (unsigned)((ns) % 1000)

/* A thread's own name (its comm), "" when it cannot be read: the program
 * is gone (the launcher), or a signal handler is writing. */
static void thread_comm(uint32_t tid, char *out, size_t len)
{
    char path[64];
    out[0] = '\0';
    if (trace_file.pid != getpid() || hcg_fn_names_cached())
        return;
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
}

static void put_name(char *p, size_t *len, size_t room, const char *prefix, const char *name);

/* Metadata naming the process, once per image (exec names it anew). */
static void name_process(char *p, size_t *len, size_t room)
{
    const hcg_config *c = hcg_config_get();
    char name[256];
    if (trace_file.pid != getpid())
        snprintf(name, sizeof name, "process %d (ended; written by hcguard run)",
                 (int)trace_file.pid);
    else
        snprintf(name, sizeof name, "%s (pid %d%s%s)", program_invocation_short_name,
                 (int)trace_file.pid, c->rank[0] ? ", rank " : "", c->rank);
    put(p, len, room, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{",
        (int)trace_file.pid, (int)trace_file.pid);
    put_name(p, len, room, "", name);
    put(p, len, room, "},\"name\":\"process_name\"},\n");
    process_named = 1;
}

/* Metadata naming tid, the first time it is used: a callback thread by
 * its role, any other by its own name. */
static void name_thread(char *p, size_t *len, size_t room, uint32_t tid, int callback)
{
    char comm[32], name[96];
    if (!tid || !name_once(tid))
        return;
    thread_comm(tid, comm, sizeof comm);
    if (callback)
        snprintf(name, sizeof name, "CUDA host functions (thread %u)", tid);
    else if (comm[0])
        snprintf(name, sizeof name, "%s (thread %u)", comm, tid);
    else
        snprintf(name, sizeof name, "thread %u", tid);
    put(p, len, room, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{", (int)trace_file.pid,
        tid);
    put_name(p, len, room, "", name);
    put(p, len, room, "},\"name\":\"thread_name\"},\n");
}

static void put_name(char *p, size_t *len, size_t room, const char *prefix, const char *name)
{
    put(p, len, room, "\"name\":\"%s", prefix);
    *len += hcg_json_str(p + *len, room - *len - 2, name);
    put(p, len, room, "\"");
}

/* The run (or skipped copy) on its callback thread, from start to end. */
static void slice(char *p, size_t *len, size_t room, const hcg_event *e, uint64_t start,
                  uint64_t end, uint32_t enq_tid)
{
    int copy = hcg_fnkind_is_copy((hcg_fnkind)e->fnkind);
    const char *cat = e->kind == HCG_EV_SKIP ? "skipped copy" : copy ? "host copy" : "host function";
    put(p, len, room, "{");
    put_name(p, len, room, e->kind == HCG_EV_SKIP ? "skipped: " : "", hcg_fn_name(e->fn));
    put(p, len, room,
        ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":" US_FMT ",\"dur\":" US_FMT ",\"pid\":%d,"
        "\"tid\":%u,\"args\":{\"api\":\"%s\",\"stream\":\"0x%" PRIxPTR "\",\"seq\":%" PRIu64,
        cat, US(start), US(end - start), (int)trace_file.pid, e->tid,
        hcg_api_name((hcg_api)e->api), e->stream, e->seq);
    if (e->graph)
        put(p, len, room, ",\"graph\":\"0x%" PRIxPTR "\",\"node\":\"0x%" PRIxPTR "\"", e->graph,
            e->node);
    if (e->t_start > e->t_enqueue)
        put(p, len, room, ",\"wait_us\":" US_FMT, US(e->t_start - e->t_enqueue));
    if (enq_tid)
        put(p, len, room, ",\"enqueued_by\":%u", enq_tid);
    if (copy)
        put(p, len, room, ",\"bytes\":%" PRIu64, e->bytes);
    if (copy && e->kind == HCG_EV_RUN && e->t_end > e->t_start)
        put(p, len, room, ",\"gbps\":%.3f", (double)e->bytes / (double)(e->t_end - e->t_start));
    if (e->kind == HCG_EV_SKIP)
        put(p, len, room, ",\"reason\":\"%s\"", hcguard_status_name((hcguard_status)e->reason));
    put(p, len, room, "}}");
}

/* The enqueue: a 2 ns slice on the launching thread (its own length is
 * not measured: that would cost a clock read per launch), and a flow from
 * inside it to inside the run's slice. */
static void enqueue(char *p, size_t *len, size_t room, const hcg_event *e, uint64_t run_start,
                    uint32_t enq_tid)
{
    uint64_t id = ++flow_next, t = e->t_enqueue;
    put(p, len, room, "{");
    put_name(p, len, room, e->graph ? "launch: " : "enqueue: ", hcg_fn_name(e->fn));
    put(p, len, room,
        ",\"cat\":\"enqueue\",\"ph\":\"X\",\"ts\":" US_FMT ",\"dur\":0.002,\"pid\":%d,"
        "\"tid\":%u,\"args\":{\"api\":\"%s\",\"stream\":\"0x%" PRIxPTR "\",\"seq\":%" PRIu64
        "}},\n",
        US(t), (int)trace_file.pid, enq_tid, hcg_api_name((hcg_api)e->api), e->stream, e->seq);
    put(p, len, room,
        "{\"name\":\"host function\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%" PRIu64
        ",\"ts\":" US_FMT ",\"pid\":%d,\"tid\":%u},\n",
        id, US(t + 1), (int)trace_file.pid, enq_tid);
    put(p, len, room,
        "{\"name\":\"host function\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%" PRIu64
        ",\"ts\":" US_FMT ",\"pid\":%d,\"tid\":%u},\n",
        id, US(run_start), (int)trace_file.pid, e->tid);
}

static void instant(char *p, size_t *len, size_t room, const hcg_event *e)
{
    int reject = e->kind == HCG_EV_REJECT;
    const char *what = reject ? hcguard_status_name((hcguard_status)e->reason)
                              : hcg_finding_name((hcg_finding)e->reason);
    /* A slow run's finding marks its end, a hung one when it was seen. */
    uint64_t t = reject ? e->t_enqueue : e->kind == HCG_EV_FINDING ? e->t_end : e->t_start;
    put(p, len, room, "{\"name\":\"%s%s\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":" US_FMT
        ",\"pid\":%d,\"tid\":%u,\"args\":{\"fn\":\"",
        reject ? "rejected: " : "", what, reject ? "rejected record" : "finding", US(t),
        (int)trace_file.pid, e->tid);
    *len += hcg_json_str(p + *len, room - *len - 2, hcg_fn_name(e->fn));
    put(p, len, room, "\",\"api\":\"%s\",\"stream\":\"0x%" PRIxPTR "\",\"seq\":%" PRIu64,
        hcg_api_name((hcg_api)e->api), e->stream, e->seq);
    if (e->graph)
        put(p, len, room, ",\"graph\":\"0x%" PRIxPTR "\",\"node\":\"0x%" PRIxPTR "\"", e->graph,
            e->node);
    if (e->kind == HCG_EV_FINDING && (e->reason == HCG_FIND_SLOW || e->reason == HCG_FIND_HANG))
        put(p, len, room, ",\"running_us\":" US_FMT, US(e->t_end - e->t_start));
    put(p, len, room, "}}");
}

void hcg_trace_event(const hcg_event *e)
{
    char *p = hcg_sinkfile_reserve(&trace_file);
    if (!p)
        return;
    size_t room = HCG_SINK_EVENT_MAX, len = 0;
    put(p, &len, room, "%s", trace_file.started ? ",\n" : "[\n");
    if (!process_named)
        name_process(p, &len, room);
    int run = e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP;
    int on_callback = run || (e->kind == HCG_EV_FINDING &&
                              (e->reason == HCG_FIND_CUDA_CALL || e->reason == HCG_FIND_SLOW ||
                               e->reason == HCG_FIND_HANG));
    name_thread(p, &len, room, e->tid, on_callback);
    if (run) {
        uint64_t end = e->t_end, start = track_start(e->tid, e->t_start, &end);
        uint32_t enq_tid = hcg_event_enqueuer(e);
        if (enq_tid && e->t_enqueue + 2 < start) {
            name_thread(p, &len, room, enq_tid, 0);
            enqueue(p, &len, room, e, start + (end > start ? 1 : 0), enq_tid);
        }
        slice(p, &len, room, e, start, end, enq_tid);
    } else {
        instant(p, &len, room, e);
    }
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
