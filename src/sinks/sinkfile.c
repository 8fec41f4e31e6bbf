/* Output files of the sinks (the event log, the trace): buffered writes
 * from the collector, write errors counted and reported, and what a fork
 * child does with its parent's file. Also the names the sinks give host
 * functions. Collector side only: drains are serialised. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "sinks/sinks.h"

/* The program closed f's descriptor (closefrom(3), a daemon's start) and
 * may have opened a file of its own under the number: it is forgotten,
 * never written or closed. The same file is opened again and appended to,
 * as an image after exec continues it, if the path still names it; else
 * the file ends here, said now (an exec may come next) and in the
 * summary. Not said by a death signal's handler flushing (hcg_self.dying):
 * its thread may hold the message lock, or be stuck writing to stderr. */
static void fd_lost(hcg_sinkfile *f)
{
    f->fd = hcg_reopen_same(f->path, &f->id);
    /* A file one process writes lost its lock with the descriptor: another
     * process may have taken it since (open_own_file). */
    if (f->fd >= 0 && (f->shared_ok || hcg_sinkfile_take(f) == 0))
        return;
    f->err = EBADF;
    f->replaced = 1; /* no file, but its events still counted, as lost */
    if (!hcg_self.dying)
        hcg_msg("ERROR: the %s %s: the program closed hcguard's descriptor of it and %s: "
                "%" PRIu64 " event%s written, none from now on", f->what, f->path,
                f->busy ? "another process writes the file now"
                        : "the path no longer names that file",
                f->written, f->written == 1 ? "" : "s");
}

/* Whether f's descriptor is still its file: one fstat a batch, never one
 * an event. */
static int fd_ours(hcg_sinkfile *f)
{
    if (f->fd >= 0 && !hcg_fileid_is(f->fd, &f->id))
        fd_lost(f);
    return f->fd >= 0;
}

static void flush_buf(hcg_sinkfile *f)
{
    if (!f->err && f->used)
        fd_ours(f);
    size_t done = 0;
    unsigned whole = 0;
    if (!f->err && f->used)
        f->err = hcg_write_all_done(f->fd, f->buf, f->used, &done);
    if (!f->err)
        done = f->used;
    while (whole < f->buf_events && f->ends[whole] <= done)
        whole++;
    f->written += whole;
    f->lost += f->buf_events - whole;
    f->used = 0;
    f->buf_events = 0;
}

/* The file f has open (path) is not one f may write: closed, said (not
 * by a death signal's handler: hcg_self.dying), -1. */
static int refuse(hcg_sinkfile *f, const char *path, const char *why)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (!hcg_self.dying)
        hcg_problem("cannot write the %s %s: %s; none will be written", f->what, path, why);
    return -1;
}

/* f's file, just opened, started anew: 0, or -1 (refused: said). */
static int start_anew(hcg_sinkfile *f, const char *path)
{
    char why[200];
    if (hcg_output_start_anew(f->fd, why, sizeof why) == 0)
        return 0;
    hcg_fileid none = {0, 0};
    hcg_output_id_note(f->slot, &none);
    return refuse(f, path, why);
}

/* keep: append to what is there (a continuation), else start it anew.
 * Why it failed is said, but not by a death signal's handler flushing
 * (hcg_self.dying: its thread may hold the message lock): a fork child's
 * own file is opened at its first event, which may be in that handler. */
static int open_file(hcg_sinkfile *f, const char *path, int keep)
{
    char why[HCG_PATH_MAX + 200];
    f->fd = hcg_open_slot_file(f->slot, path, keep, &f->id, why, sizeof why);
    if (f->fd < 0)
        return refuse(f, path, why);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->pid = getpid();
    /* A continued file already holds events (the trace: its opening '['). */
    f->started = keep && lseek(f->fd, 0, SEEK_END) > 0;
    return 0;
}

/* The first line of f's file into head (len bytes): 0, or -1 if it cannot
 * be read. Through a descriptor of its own of the very file (the log's is
 * opened to write only), else by path if that is the same file. */
static int first_line(const hcg_sinkfile *f, const char *path, char *head, size_t len)
{
    char self[64];
    struct stat st;
    snprintf(self, sizeof self, "/proc/self/fd/%d", f->fd);
    int rd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (rd < 0)
        rd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
    if (rd >= 0 && (fstat(rd, &st) != 0 || st.st_dev != f->id.dev || st.st_ino != f->id.ino)) {
        close(rd);
        rd = -1;
    }
    ssize_t n = rd >= 0 ? pread(rd, head, len - 1, 0) : -1;
    if (rd >= 0)
        close(rd);
    if (n < 0)
        return -1;
    head[n] = '\0';
    head[strcspn(head, "\n")] = '\0';
    return 0;
}

/* A log of a process tree (hcg_exec_inherited's 'k'): started anew, as
 * any process's start would, unless its first line is a header of this
 * tree (another of its processes started first): then appended to. Held
 * locked (flock) from the look until the caller wrote its header
 * (hcg_sinkfile_unlock), so that two of the tree starting at once do not
 * both start it anew; where the lock is refused (some network file
 * systems), it is looked at unlocked. A first line that cannot be read
 * is appended to, never started anew (said once unlocked). */
static int open_tree_file(hcg_sinkfile *f, const char *path)
{
    if (open_file(f, path, HCG_OPEN_APPEND) != 0)
        return -1;
    int r;
    while ((r = flock(f->fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    f->locked = r == 0;
    char head[HCG_SINK_EVENT_MAX], mark[40];
    snprintf(mark, sizeof mark, "\"tree\":\"%016" PRIx64 "\"", hcg_output_tree());
    if (first_line(f, path, head, sizeof head) != 0)
        f->claim_err = errno ? errno : EIO;
    else if (!strstr(head, mark) && ftruncate(f->fd, 0) != 0)
        f->claim_err = errno;
    f->started = lseek(f->fd, 0, SEEK_END) > 0;
    return 0;
}

int hcg_sinkfile_take(hcg_sinkfile *f)
{
    int r;
    while ((r = flock(f->fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR)
        ;
    if (r == 0 || errno != EWOULDBLOCK)
        return 0;
    close(f->fd);
    f->fd = -1;
    f->busy = 1;
    f->continued = 0;
    return -1;
}

/* A file one process writes (the trace: one JSON array), opened for this
 * process: kept whole while another live process writes it, rather than
 * written into at once by both (the processes of a program started by a
 * preloaded shell or launcher, several at once). The writer holds a lock
 * (flock) on it for as long as its descriptor is open; this process takes
 * it, or writes none (f->busy, said in its summary). Started anew once
 * locked, unless keep (an image after exec continues it). Where the lock
 * is refused for another reason (some network file systems), it is
 * written as before, unlocked. */
static int open_own_file(hcg_sinkfile *f, const char *path, int keep)
{
    if (open_file(f, path, HCG_OPEN_APPEND) != 0)
        return -1;
    if (hcg_sinkfile_take(f) != 0) {
        hcg_output_id_busy(f->slot); /* hcguard run writes none there for it either */
        return 0;
    }
    if (!keep && start_anew(f, path) != 0)
        return -1;
    if (!keep)
        f->started = 0; /* open_file's look was before the start anew */
    return 0;
}

static const char *secure_env(const char *name)
{
    return secure_getenv(name);
}

/* ---- exec ------------------------------------------------------------------
 * What the next image does with this sink's file (HCGUARD_EXEC, see
 * src/base/outfile.c). */
char hcg_sinkfile_exec_state(const hcg_sinkfile *f, int forked)
{
    if (forked && f->fd >= 0 && !f->open_pending && strstr(f->pattern, "%p"))
        return '-'; /* as hcg_sinkfile_after_fork leaves it: a file of its own */
    if (f->open_pending)
        return '-'; /* a fork child's own file (%p), not opened yet */
    if (f->busy)
        return 'n'; /* another process writes it: none for the next image either */
    /* The next image opens the path: only if it still names the file. */
    if (f->fd >= 0 && !hcg_path_is(f->path, &f->id))
        return 'x';
    if (forked && f->fd >= 0)
        return f->shared_ok ? 'c' : 'n';
    if (f->fd >= 0)
        return 'c';
    return f->replaced ? 'x' : f->unshared ? 'n' : '-';
}

int hcg_sinkfile_open(hcg_sinkfile *f, const char *what, const char *path, const char *pattern,
                      int shared_ok, int slot)
{
    f->what = what;
    f->slot = slot;
    f->shared_ok = shared_ok;
    snprintf(f->pattern, sizeof f->pattern, "%s", pattern ? pattern : "");
    char st = hcg_exec_inherited(slot, f->pattern, shared_ok);
    if (st == 'n' || st == 'x') {
        f->unshared = st == 'n';
        f->replaced = f->elsewhere = st == 'x'; /* the program's file is there: none written */
        f->err = st == 'x' ? EBADF : 0;
        if (st == 'x')
            hcg_output_id_elsewhere(slot);
        snprintf(f->path, sizeof f->path, "%s", path);
        return 0;
    }
    if (st == 'k')
        return open_tree_file(f, path);
    if (!shared_ok)
        return open_own_file(f, path, st == 'c');
    return open_file(f, path, st == 'c' || hcg_run_appends(f->pattern));
}

void hcg_sinkfile_unlock(hcg_sinkfile *f)
{
    if (f->locked && f->fd >= 0)
        flock(f->fd, LOCK_UN);
    f->locked = 0;
    if (f->claim_err) /* said unlocked: stderr may be a pipe another of the tree reads */
        hcg_problem("the %s %s, shared by the processes of a tree, could not be started anew "
                    "(%s): appended to", f->what, f->path, strerror(f->claim_err));
    f->claim_err = 0;
}

/* The launcher, after the program at pid died: its file continued. */
int hcg_sinkfile_reopen(hcg_sinkfile *f, const char *what, const char *path, pid_t pid,
                        const hcg_fileid *id)
{
    if (f->fd >= 0 && hcg_fileid_is(f->fd, &f->id)) /* one continued before: done with */
        close(f->fd);
    f->fd = -1;
    f->what = what;
    f->pid = pid;
    f->elsewhere = f->replaced = f->continued = f->busy = 0;
    f->err = 0;
    f->path[0] = '\0';
    if (hcg_output_id_is_busy(id)) { /* the program wrote none: another process does */
        snprintf(f->path, sizeof f->path, "%s", path);
        f->busy = 1;
        return -1;
    }
    if (!id->ino) { /* none was open (refused, or not this image's to write) */
        f->err = EBADF;
        return -1;
    }
    f->fd = hcg_reopen_same(path, id);
    snprintf(f->path, sizeof f->path, "%s", path);
    if (f->fd < 0) {
        f->err = EBADF;
        f->elsewhere = f->replaced = 1; /* its events counted as not written */
        hcg_msg("ERROR: the %s %s is not the file the program wrote (it was moved away or "
                "replaced while the program ran): hcguard run writes none of its last events "
                "there", what, path);
        return -1;
    }
    f->id = *id;
    f->started = lseek(f->fd, 0, SEEK_END) > 0;
    f->continued = 1;
    return 0;
}

int64_t hcg_sinkfile_end(const hcg_sinkfile *f)
{
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) != 0 || st.st_dev != f->id.dev || st.st_ino != f->id.ino)
        return -1;
    return st.st_size;
}

ssize_t hcg_sinkfile_pread(const hcg_sinkfile *f, off_t off, char *buf, size_t len)
{
    struct stat rst;
    if (f->fd < 0)
        return -1;
    /* The file is open for writing only: read it through a descriptor of
     * its own, checked to be the same file. */
    int rfd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (rfd < 0)
        return -1;
    ssize_t r = -1;
    if (fstat(rfd, &rst) == 0 && rst.st_dev == f->id.dev && rst.st_ino == f->id.ino)
        r = pread(rfd, buf, len, off);
    close(rfd);
    return r;
}

size_t hcg_sinkfile_tail(const hcg_sinkfile *f, char *buf, size_t len, off_t *size)
{
    int64_t end = hcg_sinkfile_end(f);
    *size = 0;
    if (end <= 0)
        return 0;
    size_t n = (uint64_t)end < len ? (size_t)end : len;
    if (hcg_sinkfile_pread(f, end - (off_t)n, buf, n) != (ssize_t)n)
        return 0;
    *size = end;
    return n;
}

void hcg_sinkfile_cut(hcg_sinkfile *f, off_t size, const char *why)
{
    if (fd_ours(f) && ftruncate(f->fd, size) == 0) {
        f->started = size > 0;
        hcg_debug("%s %s: %s", f->what, f->path, why);
    }
}

void hcg_sinkfile_flush(hcg_sinkfile *f)
{
    if ((f->fd >= 0 || f->replaced) && f->used)
        flush_buf(f);
}

/* A fork child's first event: a file of its own, named for its own pid. */
static void open_child_file(hcg_sinkfile *f)
{
    char path[HCG_PATH_MAX], why[600];
    f->open_pending = 0;
    if (hcg_expand_path(f->pattern, path, sizeof path, secure_env, why, sizeof why) != 0) {
        if (!hcg_self.dying)
            hcg_msg("%s of process %d: %s; none will be written", f->what, (int)getpid(), why);
        return;
    }
    if (f->shared_ok)
        open_file(f, path, 0);
    else
        open_own_file(f, path, 0);
}

void hcg_sinkfile_after_fork(hcg_sinkfile *f)
{
    f->used = 0;
    f->buf_events = 0;
    f->written = f->lost = 0;
    f->err = f->replaced ? EBADF : 0;
    f->pid = getpid();
    if (f->fd < 0)
        return;
    int own = strstr(f->pattern, "%p") != NULL;
    if (own || !f->shared_ok) {
        if (hcg_fileid_is(f->fd, &f->id)) /* else the number is the program's */
            close(f->fd);
        f->fd = -1;
        f->open_pending = own;
        f->unshared = !own;
    }
}

char *hcg_sinkfile_reserve(hcg_sinkfile *f)
{
    if (HCG_UNLIKELY(f->open_pending))
        open_child_file(f);
    if (f->fd < 0 && !f->replaced)
        return NULL;
    if (sizeof f->buf - f->used < HCG_SINK_EVENT_MAX || f->buf_events == HCG_SINK_BUF_EVENTS)
        flush_buf(f);
    return f->buf + f->used;
}

void hcg_sinkfile_commit(hcg_sinkfile *f, size_t len)
{
    f->used += len;
    f->ends[f->buf_events++] = (uint32_t)f->used;
    f->started = 1;
}

void hcg_sinkfile_commit_uncounted(hcg_sinkfile *f, size_t len)
{
    f->used += len;
}

void hcg_sinkfile_put(hcg_sinkfile *f, const char *text)
{
    if (f->fd < 0 && !f->replaced)
        return;
    if (text) {
        size_t n = strlen(text);
        if (sizeof f->buf - f->used < n)
            flush_buf(f);
        memcpy(f->buf + f->used, text, n);
        f->used += n;
    }
    flush_buf(f);
}

void hcg_sinkfile_close(hcg_sinkfile *f, const char *footer)
{
    if (f->fd < 0 && !f->replaced)
        return;
    hcg_sinkfile_put(f, footer);
    int cancel = hcg_nocancel_begin(); /* under the drain lock */
    if (fd_ours(f) && close(f->fd) != 0 && !f->err)
        f->err = errno;
    hcg_nocancel_end(cancel);
    f->fd = -1;
    /* Said even without a summary: a file that looks whole but is not
     * would mislead whoever reads it (a lost descriptor: said when found). */
    if (f->err && !f->replaced)
        hcg_msg("ERROR: writing the %s %s failed: %s; %" PRIu64 " event%s written, %" PRIu64
                " lost: the %s is incomplete", f->what, f->path, strerror(f->err), f->written,
                f->written == 1 ? "" : "s", f->lost, f->what);
}

/* Why f's process (who: "this process", "the program") wrote none. */
static void say_busy(const hcg_sinkfile *f, const char *who, const char *path)
{
    hcg_msg("%s: none for %s: %s is being written by another process (a %s is one process's): "
            "put %%p in its name for one file per process", f->what, who, path, f->what);
}

void hcg_sinkfile_summary(const hcg_sinkfile *f)
{
    if (f->unshared)
        hcg_msg("%s: none for this process (a fork child, or the image exec'd by a process "
                "that wrote none): put %%p in its name for one file per process", f->what);
    else if (f->busy && !f->replaced)
        say_busy(f, "this process", f->path);
    else if (f->path[0] && !f->err)
        hcg_msg("%s: %s (%" PRIu64 " events)", f->what, f->path, f->written);
    else if (f->path[0] && f->replaced && !f->lost) /* whole: nothing came after */
        hcg_msg("%s: %s (%" PRIu64 " events; then the program closed hcguard's descriptor of "
                "it)", f->what, f->path, f->written);
    else if (f->path[0])
        hcg_msg("%s: %s: incomplete, %" PRIu64 " events written, %" PRIu64 " not written (%s)",
                f->what, f->path, f->written, f->lost,
                f->elsewhere  ? "the path names another file now"
                : f->replaced ? "the program closed hcguard's descriptor of it"
                              : strerror(f->err));
}

void hcg_sinkfile_recovered_line(const hcg_sinkfile *f, const char *path, const char *done)
{
    if (f->continued)
        hcg_msg("%s: %s (%s)", f->what, path, done);
    else if (f->busy && !f->replaced)
        say_busy(f, "the program", path);
    else if (f->elsewhere || f->busy)
        hcg_msg("%s: %s: the program's last %" PRIu64 " event%s not written (%s)", f->what,
                path, f->lost, f->lost == 1 ? "" : "s",
                f->busy ? "another process writes it now" : "the path names another file now");
}

/* ---- names ---------------------------------------------------------------- */
#define NAME_SLOTS 512
static struct {
    uintptr_t fn;
    char name[256]; /* a longer symbol (a C++ one) cut: the sinks cut whole characters */
} names[NAME_SLOTS];

/* Set in the launcher: the functions of a program that ended are not in its
 * address space to be named. */
static int names_gone;

void hcg_fn_names_gone(void)
{
    names_gone = 1;
}

/* Set while the events are written from a signal handler (under the
 * drain lock): no lookup, which may take locks or allocate. */
static int names_cached_only;

void hcg_fn_names_cached_only(int on)
{
    names_cached_only = on;
}

int hcg_fn_names_cached(void)
{
    return names_cached_only || names_gone;
}

/* A name that filled its buffer (len bytes) may end inside a character:
 * cut before it. */
static void cut_whole(char *s, size_t len)
{
    size_t n = strlen(s), i = n;
    if (n + 1 < len)
        return;
    while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
        i--;
    if (i > 0 && (unsigned char)s[i - 1] >= 0xc0 &&
        hcg_utf8_len((const unsigned char *)s + i - 1) != n - (i - 1))
        s[i - 1] = '\0';
}

const char *hcg_fn_name(uintptr_t fn)
{
    if (!fn)
        return "";
    if (names_gone)
        return "unknown";
    unsigned h = (unsigned)((fn * 0x9e3779b97f4a7c15ull) >> 55) % NAME_SLOTS;
    if (names[h].fn != fn) {
        if (names_cached_only)
            return "unknown";
        char obj[8];
        names[h].fn = fn;
        /* As the messages name it: an IFUNC's implementation (memcpy's)
         * has no symbol of its own. */
        const char *libc = hcg_audit_libc_name((const void *)fn);
        if (libc)
            snprintf(names[h].name, sizeof names[h].name, "%s", libc);
        else if (hcg_symbolize((const void *)fn, names[h].name, sizeof names[h].name, obj,
                          sizeof obj) != 0)
            snprintf(names[h].name, sizeof names[h].name, "anonymous");
        cut_whole(names[h].name, sizeof names[h].name);
    }
    return names[h].name;
}

static struct {
    uintptr_t site;
    char name[320];
} sites[NAME_SLOTS];

const char *hcg_caller_name(uintptr_t site)
{
    if (!site)
        return "";
    if (names_gone)
        return "unknown";
    unsigned h = (unsigned)((site * 0x9e3779b97f4a7c15ull) >> 55) % NAME_SLOTS;
    if (sites[h].site != site) {
        if (names_cached_only)
            return "unknown";
        sites[h].site = site;
        hcg_callsite_name(site, sites[h].name, sizeof sites[h].name);
    }
    return sites[h].name;
}

uint32_t hcg_event_enqueuer(const hcg_event *e)
{
    if (e->kind != HCG_EV_RUN && e->kind != HCG_EV_SKIP)
        return 0;
    if (e->enq_tid || e->graph)
        return e->enq_tid; /* a graph replay's: from its launch */
    return hcg_seq_launcher_tid(e->seq);
}

uint64_t hcg_event_reject_seq(const hcg_event *e)
{
    int run = e->kind == HCG_EV_RUN || e->kind == HCG_EV_SKIP;
    return run && (e->flags & HCG_EVF_REPORTED) ? e->reject_seq : 0;
}

size_t hcg_json_str(char *out, size_t room, const char *s)
{
    size_t n = 0;
    if (!room)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t k = hcg_utf8_len(p), w;
        char ch[8];
        if (k == 0 || *p == 0x7f)
            w = 1, ch[0] = '?';
        else if (*p == '"' || *p == '\\')
            w = 2, ch[0] = '\\', ch[1] = (char)*p;
        else if (*p < 0x20)
            w = (size_t)snprintf(ch, sizeof ch, "\\u%04x", *p);
        else
            w = k, memcpy(ch, p, k);
        if (n + w >= room)
            break;
        memcpy(out + n, ch, w);
        n += w;
        p += k ? k : 1;
    }
    out[n] = '\0';
    return n;
}

void hcg_text_mem(hcg_text *t, const char *s, size_t n)
{
    size_t k = t->room - 1 - t->len;
    if (n < k)
        k = n;
    memcpy(t->p + t->len, s, k);
    t->len += k;
    t->p[t->len] = '\0';
}

void hcg_text_str(hcg_text *t, const char *s)
{
    hcg_text_mem(t, s, strlen(s));
}

/* v's digits, base 10 or 16, written backwards from the end of a buffer. */
static char *digits(char *end, uint64_t v, unsigned base)
{
    do {
        *--end = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    return end;
}

void hcg_text_u64(hcg_text *t, uint64_t v)
{
    char b[24], *s = digits(b + sizeof b, v, 10);
    hcg_text_mem(t, s, (size_t)(b + sizeof b - s));
}

void hcg_text_i64(hcg_text *t, int64_t v)
{
    if (v < 0)
        hcg_text_lit(t, "-");
    hcg_text_u64(t, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void hcg_text_hex(hcg_text *t, uint64_t v)
{
    char b[24], *s = digits(b + sizeof b, v, 16);
    *--s = 'x';
    *--s = '0';
    hcg_text_mem(t, s, (size_t)(b + sizeof b - s));
}

void hcg_text_us(hcg_text *t, uint64_t ns)
{
    char b[32], *end = b + sizeof b;
    unsigned frac = (unsigned)(ns % 1000);
    end[-1] = (char)('0' + frac % 10);
    end[-2] = (char)('0' + frac / 10 % 10);
    end[-3] = (char)('0' + frac / 100);
    end[-4] = '.';
    char *s = digits(end - 4, ns / 1000, 10);
    hcg_text_mem(t, s, (size_t)(end - s));
}

static void key(hcg_text *t, const char *k)
{
    hcg_text_lit(t, ",\"");
    hcg_text_str(t, k);
    hcg_text_lit(t, "\":");
}

void hcg_text_key_u64(hcg_text *t, const char *k, uint64_t v)
{
    key(t, k);
    hcg_text_u64(t, v);
}

void hcg_text_key_hex(hcg_text *t, const char *k, uint64_t v)
{
    key(t, k);
    hcg_text_lit(t, "\"");
    hcg_text_hex(t, v);
    hcg_text_lit(t, "\"");
}

void hcg_text_printf(hcg_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->room - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < t->room ? t->len + (size_t)n : t->room - 1;
}
