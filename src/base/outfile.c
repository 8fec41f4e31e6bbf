/* Output files: opened safely, and which of them an image started by exec
 * continues. For the report file here, and the sinks' files (src/sinks). */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

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

static int open_output(const char *path, int flags, char *why, size_t len);

/* Opened under locks (the drain's, the report's once): open is a
 * cancellation point that must not act there. */
int hcg_open_output_why(const char *path, int flags, char *why, size_t len)
{
    int cancel = hcg_nocancel_begin();
    int fd = open_output(path, flags, why, len);
    hcg_nocancel_end(cancel);
    return fd;
}

static int open_output(const char *path, int flags, char *why, size_t len)
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

/* ---- the files opened, for the flight record ------------------------------
 * Noted here until the record is mapped (the report file may be opened by
 * a message before start-up), then there too. A note and the move may
 * meet only at start-up; the fences make one of them see the other: a
 * note that still finds ids_at here was made before the move copies. */
static hcg_fileid ids_here[HCG_SINK_SLOTS];
static hcg_fileid *_Atomic ids_at = ids_here;

void hcg_output_id_note(int slot, const hcg_fileid *id)
{
    if (slot < 0 || slot >= HCG_SINK_SLOTS)
        return;
    ids_here[slot] = *id;
    atomic_thread_fence(memory_order_seq_cst);
    hcg_fileid *at = atomic_load_explicit(&ids_at, memory_order_relaxed);
    if (at != ids_here)
        at[slot] = *id;
}

int hcg_output_id_other(int slot, const hcg_fileid *id)
{
    for (int i = 0; i < HCG_SINK_SLOTS; i++)
        if (i != slot && ids_here[i].dev && ids_here[i].ino &&
            ids_here[i].dev == id->dev && ids_here[i].ino == id->ino)
            return i;
    return -1;
}

const char *hcg_output_slot_name(int slot)
{
    static const char *const names[HCG_SINK_SLOTS] = {"event log", "trace", "report file"};
    return slot >= 0 && slot < HCG_SINK_SLOTS ? names[slot] : "output";
}

int hcg_output_start_anew(int fd, char *why, size_t len)
{
    if (ftruncate(fd, 0) == 0)
        return 0;
    snprintf(why, len, "cannot truncate it: %s", strerror(errno));
    return -1;
}

/* Opened to append, and started anew only once it is known to be no other
 * output's file: two names for one file would write into each other, and
 * a trace's lock would hold up a process tree's log for good. */
int hcg_open_slot_file(int slot, const char *path, int keep, hcg_fileid *id, char *why,
                       size_t len)
{
    int fd = hcg_open_output_why(path, HCG_OPEN_APPEND, why, len);
    if (fd < 0)
        return -1;
    hcg_fileid_of(fd, id);
    int other = hcg_output_id_other(slot, id);
    hcg_fileid none = {0, 0};
    if (other >= 0)
        snprintf(why, len, "it is the file of the %s", hcg_output_slot_name(other));
    else if (!keep && hcg_output_start_anew(fd, why, len) != 0)
        hcg_output_id_note(slot, &none); /* none of slot's, whatever was before */
    else {
        hcg_output_id_note(slot, id);
        return fd;
    }
    close(fd);
    return -1;
}

void hcg_output_id_busy(int slot)
{
    hcg_fileid busy = {0, (ino_t)-2}; /* as elsewhere, and hcguard run says why */
    hcg_output_id_note(slot, &busy);
}

void hcg_output_id_elsewhere(int slot)
{
    hcg_fileid none = {0, (ino_t)-1}; /* no file's: a reopen by path is refused */
    hcg_output_id_note(slot, &none);
}

void hcg_output_ids_keep_in(hcg_fileid ids[HCG_SINK_SLOTS])
{
    atomic_store_explicit(&ids_at, ids, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    memcpy(ids, ids_here, sizeof ids_here);
}

/* ---- files shared under hcguard run ------------------------------------- */
int hcg_run_appends(const char *pattern)
{
    const char *flight = secure_getenv("HCGUARD_FLIGHT");
    return flight && flight[0] && !hcg_pattern_per_process(pattern);
}

int hcg_pattern_per_process(const char *pattern)
{
    return strstr(pattern, "%p") || strstr(pattern, "%q") || strstr(pattern, "%h");
}

/* ---- exec ------------------------------------------------------------------
 * An image started by exec finds HCGUARD_EXEC=PID:STATES, set by the exec
 * wrappers of the image before it (src/lifecycle/lifecycle.c): one state per sink
 * (HCG_SINK_LOG, HCG_SINK_TRACE, HCG_SINK_REPORT): 'c' the file was open,
 * continue it; 'n'
 * that process wrote none (a fork child without %p); 'x' its path names
 * another file now (the program moved it away, or closed hcguard's
 * descriptor, and put a file of its own there): none is written, by the
 * next image or by a descendant; '-' none was open.
 * The same pid is the same process after exec. Another pid is a descendant
 * that inherited the variable (a child started by posix_spawn, or by
 * system()): it shares the files of the process before it like a fork
 * child does, and never truncates them. Without the variable a file is
 * started anew. */
/* HCGUARD_EXEC's pid into *pid, and what follows "PID:" (the states, then
 * a tree's token); NULL where it is not set, or not of that form. */
static const char *exec_var(long *pid)
{
    const char *v = secure_getenv("HCGUARD_EXEC");
    char *end = NULL;
    *pid = v ? strtol(v, &end, 10) : 0;
    return v && end != v && *end == ':' && *pid > 0 && *pid <= INT_MAX ? end + 1 : NULL;
}

/* What HCGUARD_EXEC says of slot's file; *descendant: said by another
 * process. */
static char exec_var_state(int slot, const char *pattern, int shared_ok, int *descendant)
{
    long pid;
    const char *states = exec_var(&pid);
    *descendant = 0;
    if (!states || strlen(states) <= (size_t)slot)
        return '-';
    if (pid == (long)getpid())
        return states[slot];
    *descendant = 1;
    if (strstr(pattern, "%p"))
        return '-'; /* a file of its own */
    if (states[slot] == 'x')
        return 'x'; /* the program's own file is at the path now */
    return shared_ok ? 'c' : 'n';
}

static int tree_passed(void);

/* A name that gives each process a file of its own (%p, %q{VAR}). Not %h,
 * as hcg_pattern_per_process counts it: a tree on one host shares a
 * per-host name. */
static int own_file(const char *pattern)
{
    return strstr(pattern, "%p") || strstr(pattern, "%q");
}

char hcg_exec_inherited(int slot, const char *pattern, int shared_ok)
{
    int descendant;
    char st = exec_var_state(slot, pattern, shared_ok, &descendant);
    /* A process of a tree: one started by exec from a process of it that
     * had not opened the log (a descendant's 'c' says only that) claims it
     * as a fork child does. */
    if ((st == '-' || (descendant && st == 'c' && tree_passed())) && slot == HCG_SINK_LOG &&
        !own_file(pattern) && !hcg_run_appends(pattern) && hcg_output_tree())
        return 'k';
    return st;
}

/* ---- a process tree forked before hcguard started ------------------------
 * (base.h: hcg_output_tree.) The token rides in HCGUARD_EXEC after the
 * states (":t" and 16 hex digits), to the next image and to a process
 * started by posix_spawn or by an exec in a vfork child. */
static _Atomic uint64_t tree_token;
static atomic_int tree_none; /* a child of a process that had started */
static atomic_int tree_read; /* HCGUARD_EXEC looked at */

/* The token HCGUARD_EXEC carries (0: none); *continues: it says this
 * process goes on with a log another started (its own image before, or an
 * ancestor that started), which is never started anew. */
static uint64_t tree_from_exec(int *continues)
{
    long pid;
    const char *states = exec_var(&pid);
    *continues = 0;
    if (!states)
        return 0;
    const char *t = strstr(states, ":t");
    uint64_t token = t ? strtoull(t + 2, NULL, 16) : 0;
    /* A descendant of a process that started passes on no token: it
     * appends ('c'), as does the next image of one whose log was open. */
    *continues = !token && (pid != (long)getpid() || states[HCG_SINK_LOG] == 'c');
    return token;
}

static atomic_int tree_inherited; /* the token came in HCGUARD_EXEC */

uint64_t hcg_output_tree(void)
{
    if (!atomic_load(&tree_read)) {
        int continues;
        uint64_t t = tree_from_exec(&continues), none = 0;
        if (continues)
            atomic_store(&tree_none, 1);
        else if (t && atomic_compare_exchange_strong(&tree_token, &none, t))
            atomic_store(&tree_inherited, 1);
        atomic_store(&tree_read, 1);
    }
    return atomic_load(&tree_none) ? 0 : atomic_load(&tree_token);
}

/* The token came from the process before (not made here). */
static int tree_passed(void)
{
    return hcg_output_tree() && atomic_load(&tree_inherited);
}

void hcg_output_fork_prepare(int started)
{
    if (started || hcg_output_tree() || atomic_load(&tree_none))
        return;
    /* getrandom and clock_gettime: async-signal-safe, as a fork handler
     * must be. */
    uint64_t t = 0;
    if (syscall(SYS_getrandom, &t, sizeof t, 1 /* GRND_NONBLOCK */) != (long)sizeof t || !t) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t = (uint64_t)getpid() << 40 ^ (uint64_t)ts.tv_sec * 1000000000ull ^ (uint64_t)ts.tv_nsec;
    }
    atomic_store(&tree_token, t ? t : 1);
}

void hcg_output_fork_child(int parent_started)
{
    if (parent_started) {
        atomic_store(&tree_none, 1);
        atomic_store(&tree_token, 0);
    }
}
