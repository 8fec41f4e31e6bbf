/* The JSON Lines event log (HCGUARD_LOG / --log): one object per event.
 * Written only while the rings are drained, which is serialised.
 *
 * A fork child writes its own events only: to a file of its own if the
 * log's name holds %p (opened at its first event, so that children that
 * do nothing leave no file), else to the same file, which is opened for
 * appending so that the two processes' writes do not overwrite each
 * other; every line names its process. */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/sinks.h"

#ifndef HCG_VERSION
#define HCG_VERSION "unknown"
#endif

static hcg_sinkfile log_file = {.fd = -1};

/* ---- the header: the first line each process (and image) writes --------
 * What does not change in a fork child is found once, at open: the child
 * may write its header from a fatal signal's handler. */
static struct {
    int pending; /* the next line this process writes is the header */
    int driver_version;
    uint64_t proc_start; /* proc_start_ticks() of start_pid, 0 unknown */
    pid_t start_pid;
    char host[256];
    char exe[HCG_PATH_MAX];
} H;

static int driver_version(void)
{
    hcg_driver *d = hcg_driver_peek();
    int v = 0;
    CUresult (*get)(int *) = d && d->handle ? (CUresult(*)(int *))hcg_real_dlsym(
                                                  d->handle, "cuDriverGetVersion")
                                            : NULL;
    if (!get || get(&v) != CUDA_SUCCESS)
        v = 0;
    return v;
}

/* When this process started, in clock ticks since boot (field 22 of
 * /proc/self/stat), 0 if unknown: the same in each image an exec starts,
 * another for a later process given the same pid, which a log shared by a
 * long-lived process tree can hold (hcguard report tells them apart).
 * Read when the header is written, which a fork child may do in a death
 * signal's handler: system calls and digits only. */
static uint64_t proc_start_ticks(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* after the command's name, which may hold anything */
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    uint64_t v = 0;
    while (p && *++p >= '0' && *p <= '9')
        v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

static void header_facts(void)
{
    H.driver_version = driver_version();
    if (gethostname(H.host, sizeof H.host - 1) != 0)
        snprintf(H.host, sizeof H.host, "unknown");
    ssize_t n = readlink("/proc/self/exe", H.exe, sizeof H.exe - 1);
    H.exe[n > 0 ? n : 0] = '\0';
}

static const char *mode_name(hcg_mode m)
{
    return m == HCG_MODE_GUARD ? "guard" : m == HCG_MODE_AUDIT ? "audit" : "off";
}

/* Appends s as a JSON string field ,"key":"s". */
static void put_str(hcg_text *t, const char *key, const char *s)
{
    hcg_text_lit(t, ",\"");
    hcg_text_str(t, key);
    hcg_text_lit(t, "\":\"");
    if (t->len + 2 >= t->room)
        return;
    t->len += hcg_json_str(t->p + t->len, t->room - t->len - 2, s);
    hcg_text_lit(t, "\"");
}

/* A line written whole, not cut short by the room: it ends with its
 * newline, the only one in it (string fields escape theirs). */
static int line_whole(const hcg_text *t)
{
    return t->len > 0 && t->p[t->len - 1] == '\n';
}

static void write_header(void)
{
    H.pending = 0;
    char *p = hcg_sinkfile_reserve(&log_file);
    if (!p)
        return;
    const hcg_config *c = hcg_config_get();
    hcg_text t = {p, 0, HCG_SINK_EVENT_MAX};
    hcg_text_printf(&t, "{\"event\":\"header\",\"schema\":%d", HCG_LOG_SCHEMA);
    /* A process tree's log (its processes append: outfile.c), near the
     * start of the line, where the next of the tree looks for it. */
    if (hcg_output_tree())
        hcg_text_printf(&t, ",\"tree\":\"%016" PRIx64 "\"", hcg_output_tree());
    hcg_text_printf(&t, ",\"hcguard\":\"%s\",\"pid\":%d,\"ppid\":%d", HCG_VERSION,
                    (int)getpid(), (int)getppid());
    if (H.start_pid != getpid()) { /* a fork child's own */
        H.proc_start = proc_start_ticks();
        H.start_pid = getpid();
    }
    if (H.proc_start)
        hcg_text_key_u64(&t, "proc_start", H.proc_start);
    put_str(&t, "host", H.host);
    if (c->rank[0])
        put_str(&t, "rank", c->rank);
    put_str(&t, "mode", mode_name(c->mode));
    hcg_text_printf(&t, ",\"driver_version\":%d", H.driver_version);
    put_str(&t, "exe", H.exe);
    hcg_text_printf(&t, ",\"t0_ns\":%" PRIu64 "}\n", hcg_now_ns());
    if (line_whole(&t))
        hcg_sinkfile_commit_uncounted(&log_file, t.len);
}

int hcg_jsonl_open(const char *path, const char *pattern)
{
    int rc = hcg_sinkfile_open(&log_file, "event log", path, pattern, 1, HCG_SINK_LOG);
    header_facts();
    if (rc == 0 && log_file.fd >= 0) {
        /* Written at once: a process that dies early still names itself. */
        write_header();
        hcg_sinkfile_flush(&log_file);
    }
    hcg_sinkfile_unlock(&log_file);
    return rc;
}

/* A log left by a program that died ends with a whole line, or is cut
 * back to its last one (the half line's event is still in memory). */
static void drop_half_line(void)
{
    char tail[HCG_SINK_EVENT_MAX * 2];
    off_t size;
    size_t n = hcg_sinkfile_tail(&log_file, tail, sizeof tail, &size);
    if (n == 0 || tail[n - 1] == '\n')
        return;
    size_t k = n;
    while (k > 0 && tail[k - 1] != '\n')
        k--;
    if (k > 0 || (off_t)n == size) /* else a line longer than any written */
        hcg_sinkfile_cut(&log_file, size - (off_t)(n - k), HCG_SINK_CUT_HALF);
}

/* ---- a batch the program died writing (the launcher) ----------------------
 * Each line it holds of the batch, known by the line's start (its event,
 * process and seq, LOG_KEY), skips its event once when the batch comes
 * again from the ring. Lines another process appended in between (a fork
 * child sharing the log) name another process and never match; the file
 * is not cut, as they may follow. */
#define LOG_KEY_END ",\"api\":\""

/* A line's start up to LOG_KEY_END: {"event":KIND,"pid":P,"seq":N */
static void put_key(hcg_text *t, const hcg_event *e)
{
    hcg_text_lit(t, "{\"event\":\"");
    hcg_text_str(t, hcg_evkind_name((hcg_evkind)e->kind));
    hcg_text_lit(t, "\",\"pid\":");
    hcg_text_i64(t, log_file.pid);
    hcg_text_key_u64(t, "seq", e->seq);
}

static struct {
    uint64_t *key;
    size_t n, cap;
} had;

static uint64_t key_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t event_key(const hcg_event *e)
{
    char k[160];
    hcg_text t = {k, 0, sizeof k};
    put_key(&t, e);
    return key_hash(k, t.len);
}

static void had_line(const char *line, size_t len, const char *ours)
{
    static const char start[] = "{\"event\":\"";
    const char *end = memmem(line, len, LOG_KEY_END, sizeof LOG_KEY_END - 1);
    if (len < sizeof start - 1 || memcmp(line, start, sizeof start - 1) != 0 || !end ||
        !memmem(line, (size_t)(end - line), ours, strlen(ours)))
        return;
    if (had.n == had.cap) {
        size_t cap = had.cap ? 2 * had.cap : 256;
        uint64_t *k = realloc(had.key, cap * sizeof *k);
        if (!k)
            return; /* then written twice rather than not at all */
        had.key = k;
        had.cap = cap;
    }
    had.key[had.n++] = key_hash(line, (size_t)(end - line));
}

/* Whether e's line is in the file already (once: then forgotten). */
static int had_event(const hcg_event *e)
{
    uint64_t k = event_key(e);
    for (size_t i = 0; i < had.n; i++)
        if (had.key[i] == k) {
            had.key[i] = had.key[--had.n];
            return 1;
        }
    return 0;
}

void hcg_jsonl_rewrite_from(int64_t off)
{
    char buf[1 << 16], ours[32];
    size_t have = 0;
    snprintf(ours, sizeof ours, ",\"pid\":%d,", (int)log_file.pid);
    for (ssize_t r; off >= 0; off += r) {
        r = hcg_sinkfile_pread(&log_file, off, buf + have, sizeof buf - have);
        if (r <= 0)
            break;
        size_t n = have + (size_t)r, from = 0;
        for (char *nl; (nl = memchr(buf + from, '\n', n - from)); from = (size_t)(nl - buf) + 1)
            had_line(buf + from, (size_t)(nl - buf) - from, ours);
        have = from ? n - from : 0; /* a line longer than buf: not one of ours */
        memmove(buf, buf + from, have);
    }
}

int hcg_jsonl_reopen(const char *path, pid_t pid, const hcg_fileid *id)
{
    int rc = hcg_sinkfile_reopen(&log_file, "event log", path, pid, id);
    if (rc == 0)
        drop_half_line();
    return rc;
}

int64_t hcg_jsonl_file_end(void)
{
    return hcg_sinkfile_end(&log_file);
}

void hcg_jsonl_flush(void)
{
    hcg_sinkfile_flush(&log_file);
}

char hcg_jsonl_exec_state(int forked)
{
    return hcg_sinkfile_exec_state(&log_file, forked);
}

void hcg_jsonl_after_fork(void)
{
    hcg_sinkfile_after_fork(&log_file);
    H.pending = 1; /* the child's first line, in its own file or the shared one */
}

void hcg_jsonl_event(const hcg_event *e)
{
    if (HCG_UNLIKELY(had.n) && had_event(e))
        return;
    if (HCG_UNLIKELY(H.pending))
        write_header();
    char *p = hcg_sinkfile_reserve(&log_file);
    if (!p)
        return;
    hcg_text t = {p, 0, HCG_SINK_EVENT_MAX};
    put_key(&t, e);
    hcg_text_lit(&t, LOG_KEY_END);
    hcg_text_str(&t, hcg_api_name((hcg_api)e->api));
    hcg_text_lit(&t, "\"");
    hcg_text_key_hex(&t, "fn", e->fn);
    put_str(&t, "fn_kind", hcg_fnkind_name((hcg_fnkind)e->fnkind));
    hcg_text_key_hex(&t, "user_data", e->user);
    hcg_text_key_hex(&t, "stream", e->stream);
    hcg_text_key_u64(&t, "tid", e->tid);
    hcg_text_key_u64(&t, "t_enqueue_ns", e->t_enqueue);
    if (e->fn)
        put_str(&t, "fn_name", hcg_fn_name(e->fn));
    if (e->caller)
        put_str(&t, "caller", hcg_caller_name(e->caller));
    if (e->graph) {
        hcg_text_key_hex(&t, "graph", e->graph);
        hcg_text_key_hex(&t, "node", e->node);
    }
    uint32_t enq_tid = hcg_event_enqueuer(e);
    if (enq_tid)
        hcg_text_key_u64(&t, "enqueue_tid", enq_tid);
    if (hcg_event_reject_seq(e))
        hcg_text_key_u64(&t, "reject_seq", e->reject_seq);
    if ((e->kind != HCG_EV_REJECT && e->kind != HCG_EV_FINDING) ||
        (e->kind == HCG_EV_FINDING && (e->reason == HCG_FIND_SLOW || e->reason == HCG_FIND_HANG))) {
        hcg_text_key_u64(&t, "t_start_ns", e->t_start);
        hcg_text_key_u64(&t, "t_end_ns", e->t_end);
        hcg_text_key_u64(&t, "duration_ns", e->t_end - e->t_start);
    }
    if (hcg_fnkind_is_copy((hcg_fnkind)e->fnkind)) {
        hcg_text_key_hex(&t, "dst", e->dst);
        hcg_text_key_hex(&t, "src", e->src);
        hcg_text_key_u64(&t, "bytes", e->bytes);
        if (e->kind == HCG_EV_RUN && e->t_end > e->t_start)
            hcg_text_printf(&t, ",\"gbps\":%.3f",
                            (double)e->bytes / (double)(e->t_end - e->t_start));
    }
    if (e->kind == HCG_EV_FINDING) {
        hcg_text_printf(&t, ",\"finding\":\"%s\"", hcg_finding_name((hcg_finding)e->reason));
        if (e->reason == HCG_FIND_CUDA_CALL && e->bytes) {
            hcg_text_printf(&t, ",\"called\":\"%s\"", hcg_called_name(e->bytes));
        }
    } else if (e->kind != HCG_EV_RUN) {
        hcg_text_printf(&t, ",\"reason\":\"%s\"",
                        hcguard_status_name((hcguard_status)e->reason));
        if (e->reason == HCGUARD_ERR_COPY_FAULTED)
            hcg_text_printf(&t,
                            ",\"fault\":\"%s\",\"fault_code\":\"%s\",\"fault_addr\":\"0x%" PRIxPTR
                            "\"",
                            e->fault_sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
                            hcg_fault_code_name(e->fault_sig, e->fault_code), e->fault_addr);
    }
    hcg_text_lit(&t, "}\n");
    if (line_whole(&t))
        hcg_sinkfile_commit(&log_file, t.len);
}

void hcg_jsonl_close(void)
{
    hcg_sinkfile_close(&log_file, NULL);
}

void hcg_jsonl_summary(void)
{
    hcg_sinkfile_summary(&log_file);
}

void hcg_jsonl_recovered_line(const char *path)
{
    hcg_sinkfile_recovered_line(&log_file, path, "the events left in memory appended");
}
