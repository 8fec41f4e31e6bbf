/* Output files of the sinks (the event log, the trace): buffered writes
 * from the collector, write errors counted and reported, and what a fork
 * child does with its parent's file. Also the names the sinks give host
 * functions. Collector side only: drains are serialised. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "hcg.h"

/* ---- opening an output file safely ----------------------------------------
 * hcguard runs inside other people's programs, often as root, with files in
 * shared directories such as /tmp: an output file is created new (0600
 * unless HCGUARD_FILE_MODE says otherwise), or an existing one replaced only
 * if it is a regular file of the effective user. A symbolic link is never
 * followed, and a FIFO or device at the path is refused without being
 * opened for writing, so that nothing blocks and nothing else is written. */

static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

static const char *file_type(mode_t m)
{
    if (S_ISLNK(m))
        return "a symbolic link (hcguard never follows one)";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

/* Why creating path failed, as one clause. */
static void create_error(const char *path, int err, char *why, size_t len)
{
    char dir[HCG_PATH_MAX];
    dir_of(path, dir, sizeof dir);
    if (err == ENOENT)
        snprintf(why, len, "the directory %s does not exist", dir);
    else if (err == EACCES || err == EPERM || err == EROFS)
        snprintf(why, len, "the directory %s is not writable by this user (%s)", dir,
                 strerror(err));
    else if (err == ENOTDIR)
        snprintf(why, len, "a part of the directory %s is not a directory", dir);
    else
        snprintf(why, len, "%s", strerror(err));
}

/* An existing path: opened only if it is a regular file of this user,
 * the same one lstat saw; then truncated, or kept with HCG_OPEN_APPEND. */
static int open_existing(const char *path, int flags, char *why, size_t len)
{
    struct stat before, st;
    if (lstat(path, &before) != 0) {
        create_error(path, errno, why, len);
        return errno == ENOENT ? -2 : -1; /* -2: gone meanwhile, create it */
    }
    if (!S_ISREG(before.st_mode)) {
        snprintf(why, len, "it exists and is %s", file_type(before.st_mode));
        return -1;
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, len, "%s", errno == ELOOP ? file_type(S_IFLNK) : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || st.st_dev != before.st_dev || st.st_ino != before.st_ino ||
        !S_ISREG(st.st_mode)) {
        snprintf(why, len, "it was replaced while being opened");
    } else if (st.st_uid != geteuid()) {
        snprintf(why, len, "it exists and belongs to another user (uid %u; hcguard "
                 "replaces only files of the user it runs as)", (unsigned)st.st_uid);
    } else if (!(flags & HCG_OPEN_APPEND) && ftruncate(fd, 0) != 0) {
        snprintf(why, len, "cannot truncate it: %s", strerror(errno));
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

int hcg_open_output_why(const char *path, int flags, char *why, size_t len)
{
    mode_t mode = (mode_t)hcg_config_get()->file_mode;
    for (int tries = 0; tries < 3; tries++) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
                                O_NONBLOCK | O_NOCTTY, mode);
        if (fd < 0 && errno == EEXIST)
            fd = open_existing(path, flags, why, len);
        else if (fd < 0)
            create_error(path, errno, why, len);
        else
            (void)!fchmod(fd, mode); /* the umask may have taken bits asked for */
        if (fd == -2)
            continue;
        if (fd >= 0)
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
    }
    snprintf(why, len, "it keeps appearing and disappearing");
    return -1;
}

int hcg_open_output(const char *path, const char *what, int flags)
{
    char why[HCG_PATH_MAX + 200];
    int fd = hcg_open_output_why(path, flags, why, sizeof why);
    if (fd < 0)
        hcg_problem("cannot write the %s %s: %s; none will be written", what, path, why);
    return fd;
}

static void flush_buf(hcg_sinkfile *f)
{
    size_t off = 0;
    while (off < f->used && !f->err) {
        ssize_t w = write(f->fd, f->buf + off, f->used - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            f->err = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    if (f->err)
        f->lost += f->buf_events;
    else
        f->written += f->buf_events;
    f->used = 0;
    f->buf_events = 0;
}

/* keep: append to what is there (a continuation), else start it anew. */
static int open_file(hcg_sinkfile *f, const char *path, int keep)
{
    f->fd = hcg_open_output(path, f->what, keep ? HCG_OPEN_APPEND : 0);
    if (f->fd < 0)
        return -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    f->pid = getpid();
    /* A continued file already holds events (the trace: its opening '['). */
    f->started = keep && lseek(f->fd, 0, SEEK_END) > 0;
    return 0;
}

static const char *secure_env(const char *name)
{
    return secure_getenv(name);
}

/* ---- exec ------------------------------------------------------------------
 * An image started by exec finds HCGUARD_EXEC=PID:STATES, set by the exec
 * wrappers of the image before it (src/lifecycle.c): one state per sink
 * (HCG_SINK_LOG, HCG_SINK_TRACE, HCG_SINK_REPORT): 'c' the file was open,
 * continue it; 'n'
 * that process wrote none (a fork child without %p); '-' none was open.
 * The same pid is the same process after exec. Another pid is a descendant
 * that inherited the variable (a child started by posix_spawn, or by
 * system()): it shares the files of the process before it like a fork
 * child does, and never truncates them. Without the variable a file is
 * started anew. */
char hcg_sinkfile_exec_state(const hcg_sinkfile *f)
{
    if (f->open_pending)
        return '-'; /* a fork child's own file (%p), not opened yet */
    if (f->fd >= 0)
        return 'c';
    return f->unshared ? 'n' : '-';
}

char hcg_exec_inherited(int slot, const char *pattern, int shared_ok)
{
    const char *v = secure_getenv("HCGUARD_EXEC");
    char *end = NULL;
    long pid = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end != ':' || strlen(end + 1) <= (size_t)slot)
        return '-';
    if (pid == (long)getpid())
        return end[1 + slot];
    if (strstr(pattern, "%p"))
        return '-'; /* a file of its own */
    return shared_ok ? 'c' : 'n';
}

int hcg_sinkfile_open(hcg_sinkfile *f, const char *what, const char *path, const char *pattern,
                      int shared_ok, int slot)
{
    f->what = what;
    f->shared_ok = shared_ok;
    snprintf(f->pattern, sizeof f->pattern, "%s", pattern ? pattern : "");
    char st = hcg_exec_inherited(slot, f->pattern, shared_ok);
    if (st == 'n') {
        f->unshared = 1;
        snprintf(f->path, sizeof f->path, "%s", path);
        return 0;
    }
    return open_file(f, path, st == 'c');
}

/* The launcher, after the program at pid died: its file continued. */
int hcg_sinkfile_reopen(hcg_sinkfile *f, const char *what, const char *path, pid_t pid)
{
    f->what = what;
    if (open_file(f, path, 1) != 0)
        return -1;
    f->pid = pid;
    return 0;
}

void hcg_sinkfile_flush(hcg_sinkfile *f)
{
    if (f->fd >= 0 && f->used)
        flush_buf(f);
}

/* A fork child's first event: a file of its own, named for its own pid. */
static void open_child_file(hcg_sinkfile *f)
{
    char path[HCG_PATH_MAX], why[600];
    f->open_pending = 0;
    if (hcg_expand_path(f->pattern, path, sizeof path, secure_env, why, sizeof why) != 0) {
        hcg_msg("%s of process %d: %s; none will be written", f->what, (int)getpid(), why);
        return;
    }
    open_file(f, path, 0);
}

void hcg_sinkfile_after_fork(hcg_sinkfile *f)
{
    f->used = 0;
    f->buf_events = 0;
    f->written = f->lost = 0;
    f->err = 0;
    f->pid = getpid();
    if (f->fd < 0)
        return;
    int own = strstr(f->pattern, "%p") != NULL;
    if (own || !f->shared_ok) {
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
    if (f->fd < 0)
        return NULL;
    if (sizeof f->buf - f->used < HCG_SINK_EVENT_MAX)
        flush_buf(f);
    return f->buf + f->used;
}

void hcg_sinkfile_commit(hcg_sinkfile *f, size_t len)
{
    f->used += len;
    f->buf_events++;
    f->started = 1;
}

void hcg_sinkfile_close(hcg_sinkfile *f, const char *footer)
{
    if (f->fd < 0)
        return;
    if (footer) {
        size_t n = strlen(footer);
        if (sizeof f->buf - f->used < n)
            flush_buf(f);
        memcpy(f->buf + f->used, footer, n);
        f->used += n;
    }
    flush_buf(f);
    if (close(f->fd) != 0 && !f->err)
        f->err = errno;
    f->fd = -1;
    /* Said even without a summary: a file that looks whole but is not
     * would mislead whoever reads it. */
    if (f->err)
        hcg_msg("ERROR: writing the %s %s failed: %s; %" PRIu64 " event%s written, %" PRIu64
                " lost: the %s is incomplete", f->what, f->path, strerror(f->err), f->written,
                f->written == 1 ? "" : "s", f->lost, f->what);
}

void hcg_sinkfile_summary(const hcg_sinkfile *f)
{
    if (f->unshared)
        hcg_msg("%s: none for this process (a fork child): put %%p in its name for one file "
                "per process", f->what);
    else if (f->path[0] && !f->err)
        hcg_msg("%s: %s (%" PRIu64 " events)", f->what, f->path, f->written);
}

/* ---- names ---------------------------------------------------------------- */
#define NAME_SLOTS 512
static struct {
    uintptr_t fn;
    char name[120];
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
        if (hcg_symbolize((const void *)fn, names[h].name, sizeof names[h].name, obj,
                          sizeof obj) != 0)
            snprintf(names[h].name, sizeof names[h].name, "anonymous");
    }
    return names[h].name;
}

size_t hcg_json_str(char *out, size_t room, const char *s)
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
