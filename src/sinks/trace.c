/* The trace (HCGUARD_TRACE / --trace): Chrome's trace event format, a JSON
 * array that Perfetto and chrome://tracing open. Every host function that
 * ran is a slice on its callback thread, named for the function, with its
 * stream (for a graph node's run, the stream the graph was launched on),
 * graph and node, how long it waited in the queue and, for copies, bytes
 * and GB/s; a copy skipped at run time is a slice too. Its enqueue is a
 * short slice on the thread that launched it, joined to the run's slice on
 * the callback thread by a flow arrow. The same run is also a slice on its
 * stream's track: a pseudo-thread per CUDA stream (docs/LOG.md, "The
 * trace"). Rejections and findings are instant events on the thread that
 * met them. Every process is named (program, pid, rank) and so is every
 * thread it uses. Times are CLOCK_MONOTONIC microseconds, written to the
 * nanosecond. A fork child writes a trace of its own only where the name
 * holds %p: two arrays cannot share a file.
 *
 * The formatting (hcg_trace_format) is shared with `hcguard report
 * --trace`, which gives it the events read back from logs. */
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/sinks.h"

/* ---- one process's tracks -------------------------------------------------- */

/* Threads already named in the file; the last run slice's end (ns) on each
 * callback thread. */
#define MAX_NAMED 256
#define MAX_TRACKS 64
/* Stream tracks: slots of an open-addressed table, twice the bound. */
#define STREAM_SLOTS (2 * HCG_TRACE_STREAM_TRACKS)
/* Where pseudo-threads' ids are spread above tid_base (2 reserved below). */
#define STREAM_TID_SPAN 0x20000000u

typedef struct stream_track {
    uintptr_t stream;
    uint32_t owner;     /* the per-thread default stream: its thread (0 unknown) */
    uint32_t tid;       /* 0: a free slot */
    uint64_t end;       /* its last slice's end (ns) */
    uint8_t per_thread; /* a per-thread default stream */
    uint8_t named;
} stream_track;

struct hcg_trace_proc {
    int pid;           /* the trace's pid */
    int live;          /* this process's own events: threads named from /proc */
    int process_named;
    uint64_t base_ns;  /* subtracted from every time */
    uint32_t tid_base; /* pseudo-threads' ids: tid_base and up */
    uint64_t flow_next;
    uint32_t named[MAX_NAMED];
    unsigned n_named;
    struct {
        uint32_t tid;
        uint64_t end;
    } last_end[MAX_TRACKS];
    stream_track streams[STREAM_SLOTS];
    unsigned n_streams;
    stream_track other, unknown; /* past the bound; a graph launch not seen */
};

static void proc_init(hcg_trace_proc *tp, int pid, int live, uint64_t base_ns, uint32_t tid_base,
                      uint64_t flow_first)
{
    memset(tp, 0, sizeof *tp);
    tp->pid = pid;
    tp->live = live;
    tp->base_ns = base_ns;
    tp->tid_base = tid_base;
    tp->flow_next = flow_first;
    tp->other.tid = tid_base;
    tp->unknown.tid = tid_base + 1;
}

hcg_trace_proc *hcg_trace_proc_new(int pid, uint64_t base_ns, uint32_t tid_base,
                                   uint64_t flow_first)
{
    hcg_trace_proc *tp = malloc(sizeof *tp);
    if (tp) {
        proc_init(tp, pid, 0, base_ns, tid_base, flow_first);
        tp->process_named = 1; /* the caller names it */
    }
    return tp;
}

void hcg_trace_proc_free(hcg_trace_proc *tp)
{
    free(tp);
}

/* ---- writing --------------------------------------------------------------- */

/* A name escaped once (at most TRACE_NAME_MAX bytes, whole characters;
 * a byte that is not valid UTF-8 becomes '?'), so that an event with its
 * name three times still fits HCG_SINK_EVENT_MAX. */
#define TRACE_NAME_MAX 400

static void escape_name(char out[TRACE_NAME_MAX + 1], const char *name)
{
    hcg_json_str(out, TRACE_NAME_MAX + 1, name);
}

/* A thread's own name (its comm), "" when it cannot be read: not this
 * process's (the launcher, a report), or a signal handler is writing. */
static void thread_comm(const hcg_trace_proc *tp, uint32_t tid, char *out, size_t len)
{
    char path[64];
    out[0] = '\0';
    if (!tp->live || tp->pid != getpid() || hcg_fn_names_cached())
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

/* "name":"prefix esc", esc a name escaped already. */
static void put_name(hcg_text *t, const char *prefix, const char *esc)
{
    hcg_text_lit(t, "\"name\":\"");
    hcg_text_str(t, prefix);
    hcg_text_str(t, esc);
    hcg_text_lit(t, "\"");
}

/* The same for a name not escaped yet. */
static void put_raw_name(hcg_text *t, const char *prefix, const char *name)
{
    char esc[TRACE_NAME_MAX + 1];
    escape_name(esc, name);
    put_name(t, prefix, esc);
}

static int name_once(hcg_trace_proc *tp, uint32_t tid)
{
    for (unsigned i = 0; i < tp->n_named; i++)
        if (tp->named[i] == tid)
            return 0;
    if (tp->n_named < MAX_NAMED)
        tp->named[tp->n_named++] = tid;
    return 1;
}

/* Metadata naming tid, the first time it is used: a callback thread by
 * its role, any other by its own name. */
static void name_thread(hcg_trace_proc *tp, hcg_text *t, uint32_t tid,
                        int callback)
{
    char comm[32], name[96];
    if (!tid || !name_once(tp, tid))
        return;
    thread_comm(tp, tid, comm, sizeof comm);
    if (callback)
        snprintf(name, sizeof name, "CUDA host functions (thread %u)", tid);
    else if (comm[0])
        snprintf(name, sizeof name, "%s (thread %u)", comm, tid);
    else
        snprintf(name, sizeof name, "thread %u", tid);
    hcg_text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{", tp->pid, tid);
    put_raw_name(t, "", name);
    hcg_text_lit(t, "},\"name\":\"thread_name\"},\n");
}

/* ---- stream tracks ------------------------------------------------------------ */

static uint64_t key_hash(uintptr_t stream, uint32_t owner)
{
    uint64_t h = ((uint64_t)stream * 0x9e3779b97f4a7c15ull) ^ owner;
    return (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
}

/* ---- continuing a program's trace (the launcher) ---------------------------
 * The events a program that died left in memory are written after those
 * it wrote itself, converted with the clock reference of its last drain;
 * the slices before them were converted with an earlier one, which may
 * disagree by a few ns. So that the two still follow one another on each
 * track, where each track's last slice in the file ends is read back from
 * the file's tail first (the program's own process only; what is further
 * back ended long before). */
static hcg_sinkfile trace_file = {.fd = -1}; /* this process's (the sink's, below) */
#define SEEDS 512
static struct {
    uint32_t tid;
    uint64_t end;
} seeds[SEEDS];
static unsigned n_seeds;
static int seed_pending; /* the file was continued: read its tail at the first event */

static uint64_t seeded_end(const hcg_trace_proc *tp, uint32_t tid)
{
    if (!tp->live)
        return 0;
    for (unsigned i = 0; i < n_seeds; i++)
        if (seeds[i].tid == tid)
            return seeds[i].end;
    return 0;
}

/* The number at *p in the trace's "%llu.%03u" microseconds, in ns; *p
 * moved past it. */
static uint64_t read_us(const char **p)
{
    char *q;
    uint64_t ns = strtoull(*p, &q, 10) * 1000;
    if (*q == '.' && q[1] >= '0' && q[1] <= '9' && q[2] >= '0' && q[2] <= '9' && q[3] >= '0' &&
        q[3] <= '9') {
        ns += (uint64_t)(q[1] - '0') * 100 + (uint64_t)(q[2] - '0') * 10 + (uint64_t)(q[3] - '0');
        q += 4;
    }
    *p = q;
    return ns;
}

static unsigned end_slot(const hcg_trace_proc *tp, uint32_t tid);

static void seed(hcg_trace_proc *tp, uint32_t tid, uint64_t end)
{
    if (tid < tp->tid_base) {
        unsigned i = end_slot(tp, tid);
        if (tp->last_end[i].tid != tid || tp->last_end[i].end < end)
            tp->last_end[i].tid = tid, tp->last_end[i].end = end;
        return;
    }
    stream_track *st = tid == tp->other.tid ? &tp->other : tid == tp->unknown.tid ? &tp->unknown : NULL;
    if (st) {
        st->end = end > st->end ? end : st->end;
        return;
    }
    unsigned i = 0;
    while (i < n_seeds && seeds[i].tid != tid)
        i++;
    if (i == n_seeds && n_seeds < SEEDS)
        seeds[n_seeds++].tid = tid;
    if (i < n_seeds && seeds[i].end < end)
        seeds[i].end = end;
}

/* Every slice ("ph":"X") of this process in the last MiB of the file. A
 * string cannot hold the text searched for: its quotes are escaped. */
static void seed_from_file(hcg_trace_proc *tp)
{
    static const char key[] = "\"ph\":\"X\",\"ts\":";
    size_t len = 1 << 20;
    char *tail = malloc(len + 1);
    off_t size;
    n_seeds = 0;
    if (!tail)
        return;
    size_t n = hcg_sinkfile_tail(&trace_file, tail, len, &size);
    tail[n] = '\0';
    for (const char *p = tail; (p = strstr(p, key)) != NULL;) {
        p += sizeof key - 1;
        uint64_t ts = read_us(&p), dur = 0;
        if (strncmp(p, ",\"dur\":", 7) != 0)
            continue;
        p += 7;
        dur = read_us(&p);
        char *q;
        if (strncmp(p, ",\"pid\":", 7) != 0 || strtol(p + 7, &q, 10) != tp->pid ||
            strncmp(q, ",\"tid\":", 7) != 0)
            continue;
        p = q + 7;
        seed(tp, (uint32_t)strtoul(p, &q, 10), ts + dur + tp->base_ns);
        p = q;
    }
    free(tail);
}

/* A new track's id: from the stream's hash, so that an image exec
 * continues the file with gives the same stream the same track; the next
 * free one if another stream of this image has it. */
static uint32_t track_tid(const hcg_trace_proc *tp, uint64_t h)
{
    uint32_t off = (uint32_t)(h >> 33) % STREAM_TID_SPAN;
    for (;;) {
        uint32_t tid = tp->tid_base + 2 + off;
        int taken = 0;
        for (unsigned i = 0; i < STREAM_SLOTS && !taken; i++)
            taken = tp->streams[i].tid == tid;
        if (!taken)
            return tid;
        off = (off + 1) % STREAM_TID_SPAN;
    }
}

/* Whether a run on stream 0 or CU_STREAM_PER_THREAD (2) was on the
 * per-thread default stream: its entry point's _ptsz variant said so. */
static int per_thread(const hcg_event *e)
{
    const char *api = hcg_api_name((hcg_api)e->api);
    size_t n = strlen(api);
    return e->stream == 2 || (e->stream == 0 && !e->graph && n > 5 && !strcmp(api + n - 5, "_ptsz"));
}

/* The track of e's stream, *fresh set when it is new (to be named). */
static stream_track *stream_of(hcg_trace_proc *tp, const hcg_event *e, uint32_t enq_tid,
                               int *fresh)
{
    stream_track *t = &tp->other;
    *fresh = 0;
    if (e->graph && e->stream == 0 && e->t_enqueue == e->t_start) { /* docs/LOG.md */
        t = &tp->unknown;
    } else {
        uint8_t pt = (uint8_t)per_thread(e);
        uint32_t owner = pt ? enq_tid : 0;
        uint64_t h = key_hash(e->stream, owner) + pt;
        for (unsigned i = 0; i < STREAM_SLOTS; i++) {
            stream_track *s = &tp->streams[(h + i) % STREAM_SLOTS];
            if (s->tid && s->stream == e->stream && s->owner == owner && s->per_thread == pt)
                return s;
            if (s->tid)
                continue;
            if (tp->n_streams == HCG_TRACE_STREAM_TRACKS)
                break; /* bounded: the rest share one track */
            tp->n_streams++;
            uint32_t tid = track_tid(tp, h);
            *s = (stream_track){e->stream, owner, tid, seeded_end(tp, tid), pt, 0};
            t = s;
            break;
        }
    }
    *fresh = !t->named;
    t->named = 1;
    return t;
}

/* A stream track's name, as the summary names the special handles. */
static void stream_track_name(const hcg_trace_proc *tp, const stream_track *t, char *out,
                              size_t len)
{
    if (t == &tp->other)
        snprintf(out, len, "other streams (past the first %d)", HCG_TRACE_STREAM_TRACKS);
    else if (t == &tp->unknown)
        snprintf(out, len, "graph launches not seen (stream unknown)");
    else if (t->per_thread && t->owner)
        snprintf(out, len, "stream 0x%" PRIxPTR " (per-thread default stream of thread %u)",
                 t->stream, t->owner);
    else if (t->per_thread)
        snprintf(out, len, "stream 0x%" PRIxPTR " (per-thread default stream)", t->stream);
    else if (t->stream <= 1)
        snprintf(out, len, "stream 0x%" PRIxPTR " (legacy default stream)", t->stream);
    else
        snprintf(out, len, "stream 0x%" PRIxPTR, t->stream);
}

/* Metadata naming a new stream track: its name and the stream it is (the
 * checker tells pseudo-threads by it), sorted after the real threads. */
static void name_stream(const hcg_trace_proc *tp, hcg_text *out, const stream_track *t)
{
    char name[128];
    stream_track_name(tp, t, name, sizeof name);
    hcg_text_printf(out, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"%s\",",
                    tp->pid, t->tid, name);
    if (t == &tp->other || t == &tp->unknown)
        hcg_text_printf(out, "\"stream\":\"%s\"", t == &tp->other ? "other" : "unknown");
    else
        hcg_text_printf(out, "\"stream\":\"0x%" PRIxPTR "\"", t->stream);
    hcg_text_printf(out, "},\"name\":\"thread_name\"},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
                    "\"args\":{\"sort_index\":%u},\"name\":\"thread_sort_index\"},\n",
                    tp->pid, t->tid, t->tid - tp->tid_base + 1000000u);
}

/* ---- slices ------------------------------------------------------------------ */

/* tid's slot of last_end: its own, else a free one, else (more callback
 * threads than slots) the one its id falls on, which then forgets the
 * thread that had it. Ids that fall on one slot (tid % MAX_TRACKS) do not
 * take each other's: the end a slice must begin after is its thread's. */
static unsigned end_slot(const hcg_trace_proc *tp, uint32_t tid)
{
    for (unsigned k = 0; k < MAX_TRACKS; k++) {
        unsigned i = (tid + k) % MAX_TRACKS;
        if (tp->last_end[i].tid == tid || tp->last_end[i].tid == 0)
            return i;
    }
    return tid % MAX_TRACKS;
}

/* A slice [*start, *end] written after one that ended at last, on a track
 * whose runs follow one another (a callback thread's, a stream's own),
 * begins no earlier than last. One that ends later begins at last (it may
 * hold the last: a host function run inside it); one that ends no later
 * is moved to begin at last, its duration kept: the two ran one after the
 * other, and the two drains' clock references that converted them
 * disagree (by a few ns, more than a short run lasts). */
static void begin_after(uint64_t last, uint64_t *start, uint64_t *end)
{
    if (*start >= last)
        return;
    if (*end <= last)
        *end = last + (*end - *start);
    *start = last;
}

/* On a track streams share (past the first 256, or unknown), runs of
 * different streams may have run at the same time: one that ends later
 * than the last begins when it ended, one that ends no earlier is left
 * nested in it. Never moved later as a whole, which would push every run
 * after it later still. */
static void clip_after(uint64_t last, uint64_t *start, const uint64_t *end)
{
    if (*start < last && *end > last)
        *start = last;
}

/* A run's slice [start, end] (ns) begins no earlier than the last one on
 * its callback thread, and on its stream's track, ended, so that slices
 * on each follow one another or nest. */
static uint64_t track_start(hcg_trace_proc *tp, uint32_t tid, stream_track *st, uint64_t start,
                            uint64_t *end)
{
    unsigned i = end_slot(tp, tid);
    if (*end < start)
        *end = start;
    if (tp->last_end[i].tid == tid)
        begin_after(tp->last_end[i].end, &start, end);
    if (st == &tp->other || st == &tp->unknown)
        clip_after(st->end, &start, end);
    else
        begin_after(st->end, &start, end);
    tp->last_end[i].tid = tid;
    tp->last_end[i].end = *end;
    if (*end > st->end) /* a run nested on a shared track ends inside the last */
        st->end = *end;
    return start;
}

static uint64_t rel(const hcg_trace_proc *tp, uint64_t t)
{
    return t > tp->base_ns ? t - tp->base_ns : 0;
}

/* ,"pid":P,"tid":T */
static void put_ids(hcg_text *t, const hcg_trace_proc *tp, uint32_t tid)
{
    hcg_text_lit(t, ",\"pid\":");
    hcg_text_i64(t, tp->pid);
    hcg_text_key_u64(t, "tid", tid);
}

/* "api":...,"stream":...,"seq":N: the args every event of a launch has. */
static void put_launch(hcg_text *t, const hcg_event *e)
{
    hcg_text_lit(t, "\"api\":\"");
    hcg_text_str(t, hcg_api_name((hcg_api)e->api));
    hcg_text_lit(t, "\"");
    hcg_text_key_hex(t, "stream", e->stream);
    hcg_text_key_u64(t, "seq", e->seq);
}

/* ,"args":{ and the launch's args (left open) */
static void put_args(hcg_text *t, const hcg_event *e)
{
    hcg_text_lit(t, ",\"args\":{");
    put_launch(t, e);
}

/* The run (or skipped copy) from start to end on track tid; esc: its
 * function's name, escaped. */
static void slice(const hcg_trace_proc *tp, hcg_text *t, const hcg_event *e, const char *esc,
                  uint32_t tid, uint64_t start, uint64_t end, uint32_t enq_tid)
{
    int copy = hcg_fnkind_is_copy((hcg_fnkind)e->fnkind);
    const char *cat = e->kind == HCG_EV_SKIP ? "skipped copy" : copy ? "host copy" : "host function";
    hcg_text_lit(t, "{");
    put_name(t, e->kind == HCG_EV_SKIP ? "skipped: " : "", esc);
    hcg_text_lit(t, ",\"cat\":\"");
    hcg_text_str(t, cat);
    hcg_text_lit(t, "\",\"ph\":\"X\",\"ts\":");
    hcg_text_us(t, rel(tp, start));
    hcg_text_lit(t, ",\"dur\":");
    hcg_text_us(t, end - start);
    put_ids(t, tp, tid);
    put_args(t, e);
    if (e->graph) {
        hcg_text_key_hex(t, "graph", e->graph);
        hcg_text_key_hex(t, "node", e->node);
    }
    if (e->t_start > e->t_enqueue) {
        hcg_text_lit(t, ",\"wait_us\":");
        hcg_text_us(t, e->t_start - e->t_enqueue);
    }
    if (enq_tid)
        hcg_text_key_u64(t, "enqueued_by", enq_tid);
    if (hcg_event_reject_seq(e))
        hcg_text_key_u64(t, "reject_seq", hcg_event_reject_seq(e));
    if (copy)
        hcg_text_key_u64(t, "bytes", e->bytes);
    if (copy && e->kind == HCG_EV_RUN && e->t_end > e->t_start)
        hcg_text_printf(t, ",\"gbps\":%.3f", (double)e->bytes / (double)(e->t_end - e->t_start));
    if (e->kind == HCG_EV_SKIP) {
        hcg_text_lit(t, ",\"reason\":\"");
        hcg_text_str(t, hcguard_status_name((hcguard_status)e->reason));
        hcg_text_lit(t, "\"");
    }
    hcg_text_lit(t, "}}");
}

/* One end of the flow id at ts on tid: ph "s", or "f" (bound to the
 * enclosing slice). */
static void flow(const hcg_trace_proc *tp, hcg_text *t, int finish, uint64_t id, uint64_t ts,
                 uint32_t tid)
{
    if (finish)
        hcg_text_lit(t, "{\"name\":\"host function\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":");
    else
        hcg_text_lit(t, "{\"name\":\"host function\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":");
    hcg_text_u64(t, id);
    hcg_text_lit(t, ",\"ts\":");
    hcg_text_us(t, ts);
    put_ids(t, tp, tid);
    hcg_text_lit(t, "},\n");
}

/* The enqueue: a 2 ns slice on the launching thread (its own length is
 * not measured: that would cost a clock read per launch), and a flow from
 * inside it to inside the run's slice on the callback thread. It begins at
 * an even nanosecond: two launches of one thread converted by two drains'
 * clock references (which disagree by tens of ns) may come out less than
 * 2 ns apart, in either order, and two such slices would overlap partly;
 * at even nanoseconds they are the same slice or do not overlap. */
static void enqueue(hcg_trace_proc *tp, hcg_text *t, const hcg_event *e, const char *esc,
                    uint64_t run_start, uint32_t enq_tid)
{
    uint64_t id = ++tp->flow_next, at = rel(tp, e->t_enqueue) & ~(uint64_t)1;
    hcg_text_lit(t, "{");
    put_name(t, e->graph ? "launch: " : "enqueue: ", esc);
    hcg_text_lit(t, ",\"cat\":\"enqueue\",\"ph\":\"X\",\"ts\":");
    hcg_text_us(t, at);
    hcg_text_lit(t, ",\"dur\":0.002");
    put_ids(t, tp, enq_tid);
    put_args(t, e);
    hcg_text_lit(t, "}},\n");
    flow(tp, t, 0, id, at + 1, enq_tid);
    flow(tp, t, 1, id, rel(tp, run_start), e->tid);
}

/* Rejections and findings (rare: printf is fine). */
static void instant(const hcg_trace_proc *tp, hcg_text *t, const hcg_event *e,
                    const char *fn_name)
{
    int reject = e->kind == HCG_EV_REJECT;
    const char *what = reject ? hcguard_status_name((hcguard_status)e->reason)
                              : hcg_finding_name((hcg_finding)e->reason);
    /* A slow run's finding marks its end, a hung one when it was seen. */
    uint64_t at = reject ? e->t_enqueue : e->kind == HCG_EV_FINDING ? e->t_end : e->t_start;
    char esc[TRACE_NAME_MAX + 1];
    escape_name(esc, fn_name);
    hcg_text_printf(t, "{\"name\":\"%s%s\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":",
                    reject ? "rejected: " : "", what, reject ? "rejected record" : "finding");
    hcg_text_us(t, rel(tp, at));
    put_ids(t, tp, e->tid);
    hcg_text_printf(t, ",\"args\":{\"fn\":\"%s\",", esc);
    put_launch(t, e);
    if (e->graph) {
        hcg_text_key_hex(t, "graph", e->graph);
        hcg_text_key_hex(t, "node", e->node);
    }
    if (e->kind == HCG_EV_FINDING && (e->reason == HCG_FIND_SLOW || e->reason == HCG_FIND_HANG)) {
        hcg_text_lit(t, ",\"running_us\":");
        hcg_text_us(t, e->t_end - e->t_start);
    }
    hcg_text_lit(t, "}}");
}

size_t hcg_trace_format(hcg_trace_proc *tp, const hcg_event *e, const char *fn_name,
                        uint32_t enq_tid, char *p, size_t room)
{
    hcg_text t = {p, 0, room};
    p[0] = '\0';
    int run = e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP;
    int on_callback = run || (e->kind == HCG_EV_FINDING &&
                              (e->reason == HCG_FIND_CUDA_CALL || e->reason == HCG_FIND_SLOW ||
                               e->reason == HCG_FIND_HANG));
    name_thread(tp, &t, e->tid, on_callback);
    if (!run) {
        instant(tp, &t, e, fn_name);
        return t.len;
    }
    int fresh;
    stream_track *st = stream_of(tp, e, enq_tid, &fresh);
    if (fresh)
        name_stream(tp, &t, st);
    char esc[TRACE_NAME_MAX + 1]; /* once for its three slices */
    escape_name(esc, fn_name);
    uint64_t end = e->t_end, start = track_start(tp, e->tid, st, e->t_start, &end);
    if (enq_tid && e->t_enqueue + 2 < start) {
        name_thread(tp, &t, enq_tid, 0);
        enqueue(tp, &t, e, esc, start + (end > start ? 1 : 0), enq_tid);
    }
    slice(tp, &t, e, esc, e->tid, start, end, enq_tid);
    hcg_text_lit(&t, ",\n");
    slice(tp, &t, e, esc, st->tid, start, end, enq_tid);
    return t.len;
}

/* ---- the sink: this process's trace file ------------------------------------- */

static hcg_trace_proc live;

/* Flow ids: unique in the file, across the images exec continues it with
 * (each starts from its own start time, in us, times 256). */
/* The trace closed as JSON at this size, before an exec, by this image or
 * the one before it (-1: not): the next event cuts the close off again. */
static int64_t sealed_at = -1;

static void restart(void)
{
    proc_init(&live, (int)getpid(), 1, 0, HCG_TRACE_TID_BASE, (hcg_now_ns() / 1000) << 8);
    sealed_at = -1;
}

/* A continued trace that the image before closed ("}\n]\n", or "[]\n"
 * with no event): closed where it was, until this image writes to it. */
static void find_seal(void)
{
    char tail[4];
    off_t size;
    size_t n = hcg_sinkfile_tail(&trace_file, tail, sizeof tail, &size);
    if (n == 3 && size == 3 && memcmp(tail, "[]\n", 3) == 0)
        sealed_at = 0;
    else if (n == 4 && memcmp(tail, "}\n]\n", 4) == 0)
        sealed_at = size - 3;
}

int hcg_trace_open(const char *path, const char *pattern)
{
    restart();
    int rc = hcg_sinkfile_open(&trace_file, "trace", path, pattern, 0, HCG_SINK_TRACE);
    if (rc == 0 && trace_file.fd >= 0 && trace_file.started)
        find_seal();
    return rc;
}

/* Before an exec: closed as JSON, whatever the next image does (hcguard
 * may not start there, or not be there at all); the descriptor stays
 * (the exec may fail). */
void hcg_trace_seal(void)
{
    if (trace_file.fd < 0 || sealed_at >= 0)
        return;
    hcg_sinkfile_flush(&trace_file);
    int64_t end = hcg_sinkfile_end(&trace_file);
    if (end < 0)
        return;
    hcg_sinkfile_put(&trace_file, trace_file.started ? "\n]\n" : "[]\n");
    sealed_at = end;
}

static void unseal(void)
{
    hcg_sinkfile_cut(&trace_file, (off_t)sealed_at, "the close written before an exec "
                                                    "taken off again: events follow");
    sealed_at = -1;
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
 * it (or the whole array begun anew, if it was the first). One the
 * program closed ("\n]\n", or "[]\n" with no event) before it died is
 * opened again: the events left in memory follow, then one "]". */
static void drop_half_event(void)
{
    char tail[HCG_SINK_EVENT_MAX * 2];
    off_t size;
    size_t n = hcg_sinkfile_tail(&trace_file, tail, sizeof tail, &size);
    if ((off_t)n == size && n == 3 && memcmp(tail, "[]\n", 3) == 0) {
        hcg_sinkfile_cut(&trace_file, 0, HCG_SINK_CUT_CLOSED);
        return;
    }
    if (n >= 4 && memcmp(tail + n - 4, "}\n]\n", 4) == 0) {
        hcg_sinkfile_cut(&trace_file, size - 3, HCG_SINK_CUT_CLOSED);
        return;
    }
    size_t k = n;
    while (k > 0 && tail[k - 1] != '\n')
        k--;
    if (n == 0 || k == n || whole_object(tail + k, n - k) || (k == 0 && (off_t)n != size))
        return; /* ends with a whole event (or a newline: closed, or nothing yet) */
    if (k >= 2 && tail[k - 2] == ',')
        hcg_sinkfile_cut(&trace_file, size - (off_t)(n - (k - 2)), HCG_SINK_CUT_HALF);
    else
        hcg_sinkfile_cut(&trace_file, 0, HCG_SINK_CUT_HALF); /* "[\n" and half the first */
}

int hcg_trace_reopen(const char *path, pid_t pid, const hcg_fileid *id)
{
    restart();
    int rc = hcg_sinkfile_reopen(&trace_file, "trace", path, pid, id);
    /* The program's lock went with it: another process may have the file
     * now, and started it anew. Its last events are then not written. */
    if (rc == 0 && hcg_sinkfile_take(&trace_file) != 0) {
        trace_file.replaced = 1; /* counted as not written */
        trace_file.err = EBUSY;
        rc = -1;
    }
    if (rc == 0)
        drop_half_event();
    seed_pending = rc == 0; /* read once hcg_trace_rewrite_from has cut it back */
    return rc;
}

/* The program died writing a batch of events begun at off: the trace is
 * cut back to off (no other process writes it) and the batch written
 * again from the ring. off must be where an event ended ("}" then the
 * ",\n{" of the batch's first), else it is not trusted: the record the
 * offset comes from is in the program's reach. */
void hcg_trace_rewrite_from(int64_t off)
{
    char at[4];
    int64_t size = hcg_sinkfile_end(&trace_file);
    if (off < 0 || off >= size)
        return;
    if (off > 0 && (hcg_sinkfile_pread(&trace_file, off - 1, at, 4) != 4 ||
                    memcmp(at, "},\n{", 4) != 0)) {
        hcg_msg("trace %s: the program died writing it, and its record of where it did is "
                "not where an event ended: left as it is", trace_file.path);
        return;
    }
    hcg_sinkfile_cut(&trace_file, off, "the program died writing events that are still in "
                                       "memory: cut back to where they began");
}

/* Sealed, where the next event goes: the close it takes off (a batch
 * begun there is written again from there after a death). */
int64_t hcg_trace_file_end(void)
{
    return sealed_at >= 0 ? sealed_at : hcg_sinkfile_end(&trace_file);
}

void hcg_trace_flush(void)
{
    hcg_sinkfile_flush(&trace_file);
}

char hcg_trace_exec_state(int forked)
{
    return hcg_sinkfile_exec_state(&trace_file, forked);
}

void hcg_trace_after_fork(void)
{
    hcg_sinkfile_after_fork(&trace_file);
    restart();
}

/* Metadata naming the process, once per image (exec names it anew). */
static void name_process(hcg_text *t)
{
    const hcg_config *c = hcg_config_get();
    char name[256];
    if (trace_file.pid != getpid())
        snprintf(name, sizeof name, "process %d (ended; written by hcguard run)",
                 (int)trace_file.pid);
    else
        snprintf(name, sizeof name, "%s (pid %d%s%s)", program_invocation_short_name,
                 (int)trace_file.pid, c->rank[0] ? ", rank " : "", c->rank);
    hcg_text_printf(t, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{",
        (int)trace_file.pid, (int)trace_file.pid);
    put_raw_name(t, "", name);
    hcg_text_lit(t, "},\"name\":\"process_name\"},\n");
    live.process_named = 1;
}

void hcg_trace_event(const hcg_event *e)
{
    char *p = hcg_sinkfile_reserve(&trace_file);
    if (!p)
        return;
    hcg_text t = {p, 0, HCG_SINK_EVENT_MAX};
    live.pid = (int)trace_file.pid; /* the launcher writes a program's that died */
    if (HCG_UNLIKELY(sealed_at >= 0))
        unseal();
    if (HCG_UNLIKELY(seed_pending)) {
        seed_pending = 0;
        seed_from_file(&live);
    }
    if (trace_file.started)
        hcg_text_lit(&t, ",\n");
    else
        hcg_text_lit(&t, "[\n");
    if (!live.process_named)
        name_process(&t);
    t.len += hcg_trace_format(&live, e, hcg_fn_name(e->fn), hcg_event_enqueuer(e), p + t.len,
                              t.room - t.len);
    hcg_sinkfile_commit(&trace_file, t.len);
}

void hcg_trace_close(void)
{
    const char *footer = trace_file.started ? "\n]\n" : "[]\n";
    hcg_sinkfile_close(&trace_file, sealed_at >= 0 ? NULL : footer);
}

void hcg_trace_summary(void)
{
    hcg_sinkfile_summary(&trace_file);
}

void hcg_trace_recovered_line(const char *path)
{
    hcg_sinkfile_recovered_line(&trace_file, path,
                                "the events left in memory appended, and closed");
}
