/* Messages: on hcguard's own stderr or the HCGUARD_LOG_FILE file, the
 * configuration problems kept for the summary, and the print limit. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

#define HCG_PREFIX "==hcguard== "

static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- where messages go -----------------------------------------------------
 * A private duplicate of stderr, taken when the library is loaded: a
 * program that closes fd 2 and opens its data file there must never find
 * hcguard's lines in its data. Above fd 10 where possible, out of the way
 * of programs that expect the low numbers free; close-on-exec, as the exec'd
 * image takes its own. With HCGUARD_LOG_FILE, a file instead. Each known
 * by its file (ownfd.c), checked before every message: one the program
 * closed (closefrom(3)) and whose number it reused is never written. */
static int stderr_fd = -1;
static hcg_fileid stderr_id;
static int report_fd = -1;
static hcg_fileid report_id;
static char report_path[HCG_PATH_MAX];
static atomic_int report_elsewhere; /* its path names another file now: never written */
static atomic_int report_broken; /* writing it failed (a full disk): messages to stderr */
static pthread_once_t report_once = PTHREAD_ONCE_INIT;

/* ---- the prefix: with the pid when more than one process shares stderr --- */
static atomic_int shared;
static atomic_int prefix_pid; /* 0: getpid() */

void hcg_report_set_shared(void)
{
    atomic_store(&shared, 1);
}

int hcg_report_shared(void)
{
    return atomic_load(&shared);
}

void hcg_report_set_pid(pid_t pid)
{
    atomic_store(&prefix_pid, (int)pid);
}

/* "==hcguard== " or "==hcguard== [pid N rank R] " into buf; its length. */
static size_t make_prefix(char *buf, size_t len)
{
    const char *rank = atomic_load_explicit(&hcg_g_config_ready, memory_order_acquire)
                           ? hcg_g_config.rank
                           : "";
    if (!rank[0] && !atomic_load(&shared))
        return (size_t)snprintf(buf, len, "%s", HCG_PREFIX);
    int pid = atomic_load(&prefix_pid);
    int n = snprintf(buf, len, "==hcguard== [pid %d%s%s] ", pid ? pid : (int)getpid(),
                     rank[0] ? " rank " : "", rank);
    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

__attribute__((constructor)) static void take_stderr(void)
{
    stderr_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
    if (stderr_fd < 0)
        stderr_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    hcg_fileid_of(stderr_fd, &stderr_id);
}

/* Fork hook (src/lifecycle/fork.c): a child forked while another thread printed
 * must not inherit the lock held. Not taken before the fork: a write to a
 * full pipe could hold the fork up for ever. */
void hcg_report_after_fork(void)
{
    pthread_mutex_init(&msg_lock, NULL);
}

static void add_problem(const char *line);
static void add_problem_locked(const char *line);

/* Where stderr messages go: hcguard's duplicate while it is the file it
 * was taken of, or the file fd 2 is now (the program pointed its stderr
 * elsewhere and the duplicate with it, as tests do); else fd 2 while that
 * is still the file the duplicate was: the program closed the duplicate
 * (its number may be the program's file now: never written, never
 * closed). -1 (nothing written) if neither: a program that closed both
 * may keep its data at either number, and if fd 2 was closed at start. */
static int stderr_now(void)
{
    if (stderr_fd >= 0 &&
        (hcg_fileid_is(stderr_fd, &stderr_id) || hcg_fileid_same(stderr_fd, STDERR_FILENO)))
        return stderr_fd;
    return hcg_fileid_is(STDERR_FILENO, &stderr_id) ? STDERR_FILENO : -1;
}

/* The report file's descriptor was closed by the program: the file is
 * opened again (appended to) if its path still names it, as an image after
 * exec continues it; else messages go to stderr from now on, and say so. */
/* Out of line, its buffers static (under msg_lock, or once): messages are
 * printed on the program's threads, whose stacks may be small. */
__attribute__((noinline, cold)) static void report_lost_locked(void)
{
    int fd = hcg_reopen_same(report_path, &report_id);
    report_fd = fd;
    if (fd >= 0)
        return;
    report_elsewhere = 1;
    static char line[HCG_PATH_MAX + 300], out[sizeof line + 80];
    snprintf(line, sizeof line,
             "ERROR: the report file (HCGUARD_LOG_FILE) %s: the program closed hcguard's "
             "descriptor of it and the path no longer names that file; messages go to stderr",
             report_path);
    add_problem_locked(line + 7);
    size_t pre = make_prefix(out, 64);
    int n = snprintf(out + pre, sizeof out - pre, "%s\n", line);
    if (n > 0)
        hcg_write_all(stderr_now(), out, pre + ((size_t)n < sizeof out - pre ? (size_t)n : 0));
}

/* Writing to the report file failed (err: a full disk, the file size
 * limit): the file ends there; said on stderr, where this message and the
 * rest go from now on, and in the summary's configuration problems. */
/* Out of line, its buffers static (under msg_lock, or once): messages are
 * printed on the program's threads, whose stacks may be small. */
__attribute__((noinline, cold)) static void report_failed_locked(int err)
{
    report_broken = 1;
    static char line[HCG_PATH_MAX + 300], out[sizeof line + 80];
    snprintf(line, sizeof line,
             "ERROR: writing the report file (HCGUARD_LOG_FILE) %s failed: %s; it is "
             "incomplete, messages go to stderr",
             report_path, strerror(err));
    add_problem_locked(line + 7);
    size_t pre = make_prefix(out, 64);
    int n = snprintf(out + pre, sizeof out - pre, "%s\n", line);
    if (n > 0)
        hcg_write_all(stderr_now(), out, pre + ((size_t)n < sizeof out - pre ? (size_t)n : 0));
}

/* Where the next message goes, under msg_lock. */
static int message_fd_locked(void)
{
    if (report_fd >= 0 && !hcg_fileid_is(report_fd, &report_id))
        report_lost_locked();
    return report_fd >= 0 && !report_broken ? report_fd : stderr_now();
}

/* text to stderr (never the report file), serialised with messages. */
static void say_stderr(const char *text, size_t len)
{
    int cancel = hcg_nocancel_begin();
    pthread_mutex_lock(&msg_lock);
    hcg_write_all(stderr_now(), text, len);
    pthread_mutex_unlock(&msg_lock);
    hcg_nocancel_end(cancel);
}

/* The report file at path not written: why, said on stderr and kept for
 * the summary. */
/* Out of line, its buffers static (under msg_lock, or once): messages are
 * printed on the program's threads, whose stacks may be small. */
__attribute__((noinline, cold)) static void report_refused(const char *path, const char *why)
{
    static char line[2 * HCG_PATH_MAX + 300];
    int n = snprintf(line, sizeof line,
                     "ERROR: cannot write the report file (HCGUARD_LOG_FILE) %s: %s; "
                     "messages go to stderr", path, why);
    add_problem(line);
    static char out[sizeof line + 80];
    char pre[64];
    make_prefix(pre, sizeof pre);
    n = snprintf(out, sizeof out, "%s%s\n", pre, line);
    say_stderr(out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
}

static void report_is(const char *path, int fd)
{
    snprintf(report_path, sizeof report_path, "%s", path);
    hcg_fileid_of(fd, &report_id);
    hcg_output_id_note(HCG_SINK_REPORT, &report_id);
    report_fd = fd;
    report_broken = 0;
}

/* path opened as the report file; flags: HCG_OPEN_APPEND to continue it. */
/* Out of line, its buffers static (under msg_lock, or once): messages are
 * printed on the program's threads, whose stacks may be small. */
__attribute__((noinline, cold)) static void open_report_file(const char *path, int flags)
{
    static char why[HCG_PATH_MAX + 200];
    hcg_fileid id;
    int fd = hcg_open_slot_file(HCG_SINK_REPORT, path, flags & HCG_OPEN_APPEND, &id, why,
                                sizeof why);
    if (fd >= 0)
        report_is(path, fd);
    else
        report_refused(path, why);
}

/* The path names another file than the one the process before wrote. */
static const char elsewhere[] = "it is not the file the program wrote (it was moved away or "
                                "replaced while the program ran)";

/* HCGUARD_LOG_FILE, opened at the first message after the configuration
 * is read (a message about the configuration itself goes to stderr). An
 * image started by exec continues the file the image before it wrote, as
 * does a process started by one with the same file (src/base/outfile.c). */
/* Out of line, its buffers static (under msg_lock, or once): messages are
 * printed on the program's threads, whose stacks may be small. */
__attribute__((noinline, cold)) static void open_report(void)
{
    const hcg_config *c = &hcg_g_config;
    if (!c->report_path[0])
        return;
    char st = hcg_exec_inherited(HCG_SINK_REPORT, c->report_pattern, 1);
    if (st == 'x') {
        report_elsewhere = 1;
        hcg_output_id_elsewhere(HCG_SINK_REPORT);
        report_refused(c->report_path, elsewhere);
    }
    else
        open_report_file(c->report_path,
                         st == 'c' || hcg_run_appends(c->report_pattern) ? HCG_OPEN_APPEND : 0);
}

/* What the next image does with the report file: continue it only if its
 * path still names it ('x': the program's own file is there now). No
 * lock: a vfork child asks too; the file changes only when opened. */
char hcg_report_exec_state(void)
{
    if (report_elsewhere)
        return 'x';
    if (report_fd < 0 || !report_path[0])
        return '-';
    return hcg_path_is(report_path, &report_id) ? 'c' : 'x';
}

static void no_report(void)
{
}

void hcg_report_continue(const char *path, const hcg_fileid *id)
{
    pthread_once(&report_once, no_report); /* not the launcher's own */
    if (report_fd >= 0 && hcg_fileid_is(report_fd, &report_id))
        close(report_fd);
    report_fd = -1;
    if (!id->ino) { /* the program wrote no message: the file the user named */
        open_report_file(path, HCG_OPEN_APPEND);
        return;
    }
    int fd = hcg_reopen_same(path, id);
    if (fd >= 0)
        report_is(path, fd);
    else
        report_refused(path, elsewhere);
}

void hcg_report_to_fd(int fd)
{
    pthread_once(&report_once, no_report); /* not HCGUARD_LOG_FILE's */
    hcg_fileid_of(fd, &report_id);
    report_path[0] = '\0'; /* not reopened: a descriptor, no path */
    report_fd = fd;
}

static void open_report_once(void)
{
    if (atomic_load_explicit(&hcg_g_config_ready, memory_order_acquire))
        pthread_once(&report_once, open_report);
}

/* Without the lock: the paths that use it are about to abort. */
void hcg_write_raw(const char *text, size_t len)
{
    int fd = report_fd;
    if (fd < 0 || report_broken || !hcg_fileid_is(fd, &report_id))
        fd = stderr_now();
    if (fd >= 0)
        hcg_write_all(fd, text, len);
}

size_t hcg_utf8_len(const unsigned char *s)
{
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range (RFC 3629) */
    size_t n;
    if (s[0] < 0x80)
        return 1;
    if (s[0] < 0xc2 || s[0] > 0xf4)
        return 0;
    if (s[0] < 0xe0) {
        n = 2;
    } else if (s[0] < 0xf0) {
        n = 3;
        lo = s[0] == 0xe0 ? 0xa0 : lo; /* not overlong */
        hi = s[0] == 0xed ? 0x9f : hi; /* not a surrogate */
    } else {
        n = 4;
        lo = s[0] == 0xf0 ? 0x90 : lo; /* not overlong */
        hi = s[0] == 0xf4 ? 0x8f : hi; /* not past U+10FFFF */
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++) /* stops at a NUL, which is no continuation */
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

static void vmsg(const char *fmt, va_list ap)
{
    char buf[1024];
    size_t pre = make_prefix(buf, 64);
    int n = vsnprintf(buf + pre, sizeof buf - pre - 1, fmt, ap);
    if (n < 0)
        return;
    size_t len = pre + ((size_t)n < sizeof buf - pre - 1 ? (size_t)n : sizeof buf - pre - 2);
    buf[len] = '\0';
    /* One line of text: a name with a newline (or a terminal's escape, or
     * bytes that are not UTF-8) in it cannot start a line of its own, act
     * on the terminal or garble what reads it. */
    for (size_t i = pre, k; i < len; i += k ? k : 1) {
        k = hcg_utf8_len((const unsigned char *)buf + i);
        if (k == 0 || (unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = '?';
    }
    buf[len++] = '\n';
    open_report_once();
    /* No cancellation point under the lock: a thread cancelled in the
     * write would leave it held, and every later message hang. */
    int cancel = hcg_nocancel_begin();
    pthread_mutex_lock(&msg_lock);
    int fd = message_fd_locked();
    int err = hcg_write_all(fd, buf, len);
    if (err && fd >= 0 && fd == report_fd && !report_broken) {
        report_failed_locked(err);
        hcg_write_all(stderr_now(), buf, len);
    }
    pthread_mutex_unlock(&msg_lock);
    hcg_nocancel_end(cancel);
}

void hcg_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

/* ---- problems: misconfiguration, said when known and again at exit ------- */
#define MAX_PROBLEMS 16
static struct {
    char line[MAX_PROBLEMS][512];
    unsigned n, more;
} problems;

static void add_problem(const char *line)
{
    pthread_mutex_lock(&msg_lock);
    add_problem_locked(line);
    pthread_mutex_unlock(&msg_lock);
}

static void add_problem_locked(const char *line)
{
    if (problems.n < MAX_PROBLEMS) {
        /* Cut to the slot (a problem line is a sentence: 512 is plenty). */
        char *to = problems.line[problems.n++];
        size_t n = strnlen(line, sizeof problems.line[0] - 1);
        memcpy(to, line, n);
        to[n] = '\0';
    } else
        problems.more++;
}

static void vproblem(int say, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    add_problem(line);
    if (say)
        hcg_msg("ERROR: %s", line);
}

void hcg_problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(1, fmt, ap);
    va_end(ap);
}

void hcg_problem_keep(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(0, fmt, ap);
    va_end(ap);
}

void hcg_problems_print(void)
{
    pthread_mutex_lock(&msg_lock);
    unsigned n = problems.n, more = problems.more;
    pthread_mutex_unlock(&msg_lock);
    if (!n)
        return;
    hcg_msg("configuration problems: %u", n + more);
    for (unsigned i = 0; i < n; i++)
        hcg_msg("    %s", problems.line[i]);
    if (more)
        hcg_msg("    (%u more not printed)", more);
}

/* ---- the print limit (HCGUARD_PRINT_LIMIT), shared by every finding ------- */
static atomic_ulong printed, not_printed;

int hcg_print_take(void)
{
    unsigned limit = hcg_config_get()->print_limit;
    unsigned long n = atomic_fetch_add(&printed, 1);
    if (!limit || n < limit)
        return 1;
    if (n == limit)
        hcg_msg("(%u findings printed, the print limit: further ones are counted, not printed; "
                "--print-limit N or HCGUARD_PRINT_LIMIT=N changes it, 0 prints all)", limit);
    atomic_fetch_add(&not_printed, 1);
    return 0;
}

uint64_t hcg_print_suppressed(void)
{
    return atomic_load(&not_printed);
}

void hcg_debug(const char *fmt, ...)
{
    if (!hcg_config_get()->debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}
