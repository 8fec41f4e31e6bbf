/* The JSON Lines event log (HCGUARD_LOG / --log): one object per event.
 * Written only while the rings are drained, which is serialised.
 *
 * A fork child writes its own events only: to a file of its own if the
 * log's name holds %p (opened at its first event, so that children that
 * do nothing leave no file), else to the same file, which is opened for
 * appending so that the two processes' writes do not overwrite each
 * other; every line names its process. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hcg.h"

static int log_fd = -1;
static char log_path[HCG_PATH_MAX];
static char log_pattern[HCG_PATH_MAX];
static int open_pending; /* a fork child's own log, not opened yet */
static pid_t log_pid;
static char buf[1 << 16];
static size_t used;
static unsigned buf_events;     /* events in buf, not yet written */
static uint64_t events_written;
static int write_errno;         /* the first write error; 0 if none */
static uint64_t events_lost;    /* not written, after that error */

static void flush_buf(void)
{
    size_t off = 0;
    while (off < used && !write_errno) {
        ssize_t w = write(log_fd, buf + off, used - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            write_errno = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    if (write_errno)
        events_lost += buf_events;
    else
        events_written += buf_events;
    used = 0;
    buf_events = 0;
}

static int open_log(const char *path)
{
    log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        hcg_msg("cannot open the event log %s: %s; no log will be written", path,
                strerror(errno));
        return -1;
    }
    snprintf(log_path, sizeof log_path, "%s", path);
    log_pid = getpid();
    return 0;
}

int hcg_jsonl_open(const char *path, const char *pattern)
{
    snprintf(log_pattern, sizeof log_pattern, "%s", pattern ? pattern : "");
    return open_log(path);
}

static const char *secure_env(const char *name)
{
    return secure_getenv(name);
}

/* A fork child's first event: its own file, named for its own pid. */
static void open_child_log(void)
{
    char path[HCG_PATH_MAX], why[600];
    open_pending = 0;
    if (hcg_expand_path(log_pattern, path, sizeof path, secure_env, why, sizeof why) != 0) {
        hcg_msg("event log of process %d: %s; no log will be written", (int)getpid(), why);
        return;
    }
    open_log(path);
}

void hcg_jsonl_after_fork(void)
{
    used = 0;
    buf_events = 0;
    events_written = events_lost = 0;
    write_errno = 0;
    log_pid = getpid();
    if (log_fd >= 0 && strstr(log_pattern, "%p")) {
        close(log_fd);
        log_fd = -1;
        log_path[0] = '\0';
        open_pending = 1;
    }
}

/* The name of fn, looked up once per function: the log is read by people
 * and scripts that cannot resolve addresses of a process that is gone. */
#define NAME_SLOTS 512
static struct {
    uintptr_t fn;
    char name[120];
} names[NAME_SLOTS];

static const char *fn_name(uintptr_t fn)
{
    if (!fn)
        return "";
    unsigned h = (unsigned)((fn * 0x9e3779b97f4a7c15ull) >> 55) % NAME_SLOTS;
    if (names[h].fn != fn) {
        char obj[8];
        names[h].fn = fn;
        if (hcg_symbolize((const void *)fn, names[h].name, sizeof names[h].name, obj,
                          sizeof obj) != 0)
            snprintf(names[h].name, sizeof names[h].name, "anonymous");
    }
    return names[h].name;
}

/* name as a JSON string body: quotes, backslashes and controls escaped. */
static size_t json_str(char *out, size_t room, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < room; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[n++] = '\\';
            out[n++] = (char)ch;
        } else if (ch < 0x20) {
            n += (size_t)snprintf(out + n, room - n, "\\u%04x", ch);
        } else {
            out[n++] = (char)ch;
        }
    }
    return n;
}

static const char *kind_name(uint8_t k)
{
    switch (k) {
    case HCG_EV_RUN: return "run";
    case HCG_EV_SKIP: return "skip";
    case HCG_EV_REJECT: return "reject";
    case HCG_EV_FINDING: return "finding";
    default: return "unknown";
    }
}

void hcg_jsonl_event(const hcg_event *e)
{
    if (HCG_UNLIKELY(open_pending))
        open_child_log();
    if (log_fd < 0)
        return;
    if (sizeof buf - used < 1024)
        flush_buf();
    char *p = buf + used;
    size_t room = sizeof buf - used;
    int n = snprintf(p, room,
                     "{\"event\":\"%s\",\"pid\":%d,\"seq\":%" PRIu64 ",\"api\":\"%s\",\"fn\":\"0x%" PRIxPTR
                     "\",\"fn_kind\":\"%s\",\"user_data\":\"0x%" PRIxPTR "\",\"stream\":\"0x%" PRIxPTR
                     "\",\"tid\":%u,\"t_enqueue_ns\":%" PRIu64,
                     kind_name(e->kind), (int)log_pid, e->seq, hcg_api_name((hcg_api)e->api), e->fn,
                     hcg_fnkind_name((hcg_fnkind)e->fnkind), e->user, e->stream, e->tid,
                     e->t_enqueue);
    if (n < 0 || (size_t)n >= room)
        return;
    size_t len = (size_t)n;
    if (e->fn) {
        n = snprintf(p + len, room - len, ",\"fn_name\":\"");
        len += n > 0 ? (size_t)n : 0;
        len += json_str(p + len, room - len - 1, fn_name(e->fn)); /* 1 left for '"' */
        p[len++] = '"';
    }
    if (e->graph) {
        n = snprintf(p + len, room - len, ",\"graph\":\"0x%" PRIxPTR "\",\"node\":\"0x%" PRIxPTR "\"",
                     e->graph, e->node);
        len += n > 0 ? (size_t)n : 0;
    }
    if (e->kind != HCG_EV_REJECT && e->kind != HCG_EV_FINDING) {
        n = snprintf(p + len, room - len, ",\"t_start_ns\":%" PRIu64 ",\"t_end_ns\":%" PRIu64
                     ",\"duration_ns\":%" PRIu64, e->t_start, e->t_end, e->t_end - e->t_start);
        len += n > 0 ? (size_t)n : 0;
    }
    if (hcg_fnkind_is_copy((hcg_fnkind)e->fnkind)) {
        n = snprintf(p + len, room - len,
                     ",\"dst\":\"0x%" PRIxPTR "\",\"src\":\"0x%" PRIxPTR "\",\"bytes\":%" PRIu64,
                     e->dst, e->src, e->bytes);
        len += n > 0 ? (size_t)n : 0;
        if (e->kind == HCG_EV_RUN && e->t_end > e->t_start) {
            n = snprintf(p + len, room - len, ",\"gbps\":%.3f",
                         (double)e->bytes / (double)(e->t_end - e->t_start));
            len += n > 0 ? (size_t)n : 0;
        }
    }
    if (e->kind == HCG_EV_FINDING) {
        n = snprintf(p + len, room - len, ",\"finding\":\"%s\"",
                     hcg_finding_name((hcg_finding)e->reason));
        len += n > 0 ? (size_t)n : 0;
        if (e->reason == HCG_FIND_CUDA_CALL && e->bytes && !(e->bytes >> 32)) {
            const char *called = hcg_thunk_name((unsigned)(e->bytes - 1));
            n = snprintf(p + len, room - len, ",\"called\":\"%s\"", called ? called : "?");
            len += n > 0 ? (size_t)n : 0;
        }
    } else if (e->kind != HCG_EV_RUN) {
        n = snprintf(p + len, room - len, ",\"reason\":\"%s\"",
                     hcguard_status_name((hcguard_status)e->reason));
        len += n > 0 ? (size_t)n : 0;
    }
    if (len + 2 < room) {
        p[len++] = '}';
        p[len++] = '\n';
        used += len;
        buf_events++;
    }
}

void hcg_jsonl_close(void)
{
    if (log_fd < 0)
        return;
    flush_buf();
    if (close(log_fd) != 0 && !write_errno)
        write_errno = errno;
    log_fd = -1;
    /* Said even without a summary: a log that looks whole but is not
     * would mislead whoever reads it. */
    if (write_errno)
        hcg_msg("ERROR: writing the event log %s failed: %s; %" PRIu64 " events written, %" PRIu64
                " lost: the log is incomplete", log_path, strerror(write_errno), events_written,
                events_lost);
}

void hcg_jsonl_summary(void)
{
    if (log_path[0] && !write_errno)
        hcg_msg("event log: %s (%" PRIu64 " events)", log_path, events_written);
}
