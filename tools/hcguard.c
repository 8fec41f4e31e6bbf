/*
 * hcguard: the launcher.
 *
 *   hcguard run [options] [--] program [args...]
 *
 * turns its options into HCGUARD_* variables, puts libhcguard.so first in
 * LD_PRELOAD and the Python hook first on PYTHONPATH, then runs the program
 * as its child and stays its parent, as compute-sanitizer and nsys do: it
 * forwards the signals sent to it, and returns the program's exit status
 * or dies of the program's signal. The program records into a flight
 * recorder (src/events/flight.c), a file the kernel keeps however the program
 * dies: afterwards the launcher writes what the program had not written
 * (the events left in memory, the summary).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcg.h"
#include "report.h"

#ifndef HCGUARD_VERSION_STRING
#error "HCGUARD_VERSION_STRING must be defined by the build"
#endif

/* GNU env's convention: 125 for the launcher's own failure, 126 and 127 as
 * the shell has them; usage errors are 2, as getopt tools have them. */
enum {
    EXIT_USAGE = 2,
    EXIT_SETUP = 125,
    EXIT_CANNOT_EXEC = 126,
    EXIT_NOT_FOUND = 127
};

/* Both the build tree and the installed tree put these beside bin/. */
#define LIB_FROM_PREFIX "/lib/libhcguard.so"
#define PY_FROM_PREFIX "/share/hcguard/python"

#define COPY_FN_NAME_MAX (sizeof(((hcg_config *)0)->copy_fns[0]) - 1)

typedef enum opt_id {
    OPT_MODE,
    OPT_LOG,
    OPT_TRACE,
    OPT_ERROR_EXITCODE,
    OPT_COPY_FN,
    OPT_NO_SUMMARY,
    OPT_DRIVER,
    OPT_DEBUG,
    OPT_SLOW_MS,
    OPT_HANG_S,
    OPT_RECHECK,
    OPT_BUFFER,
    OPT_LOG_FILE,
    OPT_FILE_MODE,
    OPT_PRINT_LIMIT,
    OPT_COPY_THREADS,
    OPT_BACKTRACE,
    OPT_NO_FINDING,
    OPT_WARNINGS_AS_ERRORS,
    OPT_NVTX,
    OPT_HELP,
    OPT_VERSION,
    OPT_COUNT
} opt_id;

typedef struct opt_def {
    const char *name;
    int takes_value;
    opt_id id;
} opt_def;

static const opt_def opt_table[] = {
    {"--mode", 1, OPT_MODE},
    {"--log", 1, OPT_LOG},
    {"--trace", 1, OPT_TRACE},
    {"--error-exitcode", 1, OPT_ERROR_EXITCODE},
    {"--copy-fn", 1, OPT_COPY_FN},
    {"--no-summary", 0, OPT_NO_SUMMARY},
    {"--driver", 1, OPT_DRIVER},
    {"--debug", 0, OPT_DEBUG},
    {"--nvtx", 0, OPT_NVTX},
    {"--slow-ms", 1, OPT_SLOW_MS},
    {"--hang-s", 1, OPT_HANG_S},
    {"--recheck", 1, OPT_RECHECK},
    {"--buffer", 1, OPT_BUFFER},
    {"--log-file", 1, OPT_LOG_FILE},
    {"--file-mode", 1, OPT_FILE_MODE},
    {"--print-limit", 1, OPT_PRINT_LIMIT},
    {"--copy-threads", 1, OPT_COPY_THREADS},
    {"--backtrace", 1, OPT_BACKTRACE},
    {"--no-finding", 1, OPT_NO_FINDING},
    {"--warnings-as-errors", 0, OPT_WARNINGS_AS_ERRORS},
    {"--help", 0, OPT_HELP},
    {"-h", 0, OPT_HELP},
    {"--version", 0, OPT_VERSION},
};

typedef struct run_opts {
    const char *value[OPT_COUNT]; /* last value given, or NULL */
    int given[OPT_COUNT];
    const char **copy_fns; /* every --copy-fn value, in order */
    size_t n_copy_fns;
    char no_finding[1024]; /* every --no-finding value, joined with commas */
} run_opts;

typedef struct locations {
    char prefix[PATH_MAX]; /* "" if the executable's place is unknown */
    char library[PATH_MAX];
    char python[PATH_MAX]; /* "" if there is no Python hook directory */
} locations;

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hcguard: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Every usage error says where the usage is written down. */
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hcguard: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'hcguard run --help')\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int env_flag_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* ---- where things are ------------------------------------------------ */

/* The directory above the one holding the executable, symlinks resolved,
 * so that a link to bin/hcguard elsewhere still finds lib/ and share/. */
static int find_prefix(char *out, size_t len)
{
    char exe[PATH_MAX], up[PATH_MAX + 4];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    snprintf(up, sizeof up, "%s/..", exe);
    char *real = realpath(up, NULL);
    if (!real)
        return -1;
    int ok = strlen(real) < len;
    if (ok)
        strcpy(out, real);
    free(real);
    return ok ? 0 : -1;
}

/* from_env: the path came from HCGUARD_LIBRARY, not from where the
 * launcher is, so an incomplete install is not the likely cause. */
static int library_error(const char *path, int from_env, const char *why)
{
    if (from_env)
        msg("cannot use the library '%s' (from HCGUARD_LIBRARY): %s", path,
            why);
    else
        msg("cannot use the library '%s': %s (is hcguard fully installed? "
            "HCGUARD_LIBRARY names another copy)", path, why);
    return -1;
}

/* ld.so only preloads an ELF object; anything else it skips with a warning
 * the user may not see, and the program would then run unguarded. */
static int check_library(const char *path, int from_env)
{
    unsigned char magic[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = -1;
    if (fd >= 0) {
        n = read(fd, magic, sizeof magic);
        int saved = errno;
        close(fd);
        errno = saved;
    }
    if (n < 0)
        return library_error(path, from_env, strerror(errno));
    if (n != 4 || memcmp(magic, "\177ELF", 4) != 0)
        return library_error(path, from_env, "not an ELF shared library");
    if (strpbrk(path, " :"))
        return library_error(path, from_env,
                             "LD_PRELOAD cannot hold a path with a space or "
                             "':' (HCGUARD_LIBRARY may name a link to it)");
    return 0;
}

/* Absolute, with symlinks kept: a link is how a library whose real path
 * has a space reaches LD_PRELOAD. */
static int absolute_path(const char *path, char *out, size_t len)
{
    char cwd[PATH_MAX];
    int n;
    if (path[0] == '/') {
        n = snprintf(out, len, "%s", path);
    } else {
        if (!getcwd(cwd, sizeof cwd))
            return -1;
        while (path[0] == '.' && path[1] == '/')
            path += 2;
        n = snprintf(out, len, "%s/%s", cwd, path);
    }
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static int find_library(locations *loc)
{
    const char *path = getenv("HCGUARD_LIBRARY");
    int from_env = path && *path;
    char guess[PATH_MAX + sizeof LIB_FROM_PREFIX];
    if (!from_env) {
        if (!loc->prefix[0]) {
            msg("cannot find libhcguard.so: the launcher's own location is "
                "unknown (/proc/self/exe); set HCGUARD_LIBRARY to its path");
            return -1;
        }
        int n = snprintf(guess, sizeof guess, "%s%s", loc->prefix, LIB_FROM_PREFIX);
        if (n < 0 || (size_t)n >= sizeof guess)
            return library_error(loc->prefix, from_env, "path too long");
        path = guess;
    }
    if (absolute_path(path, loc->library, sizeof loc->library) != 0)
        return library_error(path, from_env, strerror(errno));
    return check_library(loc->library, from_env);
}

/* The Python hook is optional: without it only Python programs lose the
 * way in for stripped cuda.core modules, so a problem is a warning. */
static void find_python_dir(locations *loc)
{
    struct stat st;
    loc->python[0] = '\0';
    if (!loc->prefix[0])
        return;
    int n = snprintf(loc->python, sizeof loc->python, "%s%s", loc->prefix,
                     PY_FROM_PREFIX);
    if (n < 0 || (size_t)n >= sizeof loc->python || stat(loc->python, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        if (env_flag_on("HCGUARD_DEBUG"))
            fprintf(stderr, "==hcguard== no Python hook at %s\n",
                    loc->python);
        loc->python[0] = '\0';
    } else if (strchr(loc->python, ':')) {
        msg("warning: the Python hook '%s' is not put on PYTHONPATH: its "
            "path holds a ':'", loc->python);
        loc->python[0] = '\0';
    }
}

/* ---- LD_PRELOAD and PYTHONPATH --------------------------------------- */

/* A bare LD_PRELOAD name is looked up in the library path, not in the
 * current directory, so it is never taken for item. */
static int same_file(const char *entry, const char *item, int for_preload)
{
    struct stat a, b;
    if (strcmp(entry, item) == 0)
        return 1;
    if (for_preload && !strchr(entry, '/'))
        return 0;
    return stat(entry, &a) == 0 && stat(item, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* A sanitizer runtime must stay first in the link map, or it refuses to
 * start ("ASan runtime does not come first"). */
static int is_sanitizer_runtime(const char *entry)
{
    static const char *const names[] = {"libasan.", "libtsan.", "libubsan.",
                                        "liblsan.", "libhwasan.",
                                        "libclang_rt."};
    const char *base = strrchr(entry, '/');
    base = base ? base + 1 : entry;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(base, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

/* out is never empty when entry is: item is placed before any empty one. */
static void append_entry(char *out, const char *entry)
{
    if (*out)
        strcat(out, ":");
    strcat(out, entry);
}

/*
 * item, then the entries of old (split at any of seps) that are not item
 * itself, joined with ':'. With for_preload, empty entries are dropped
 * (ld.so ignores them) and leading sanitizer runtimes stay ahead of item;
 * otherwise empty entries are kept (on PYTHONPATH they mean something).
 */
static char *list_with_first(const char *item, const char *old,
                             const char *seps, int for_preload)
{
    size_t oldlen = old ? strlen(old) : 0;
    char *copy = strdup(old ? old : "");
    char *out = malloc(strlen(item) + oldlen + 3);
    if (!copy || !out) {
        free(copy);
        free(out);
        return NULL;
    }
    *out = '\0';
    int placed = 0;
    char *rest = copy, *tok;
    while (oldlen && (tok = strsep(&rest, seps))) {
        if (for_preload && !*tok)
            continue;
        if (!placed && !(for_preload && is_sanitizer_runtime(tok))) {
            append_entry(out, item);
            placed = 1;
        }
        if (!*tok || !same_file(tok, item, for_preload))
            append_entry(out, tok);
    }
    if (!placed)
        append_entry(out, item);
    free(copy);
    return out;
}

static int set_list(const char *var, const char *item, const char *seps,
                    int for_preload)
{
    char *v = list_with_first(item, getenv(var), seps, for_preload);
    if (!v || setenv(var, v, 1) != 0) {
        free(v);
        msg("cannot set %s: %s", var, strerror(ENOMEM));
        return -1;
    }
    free(v);
    return 0;
}

/* ---- options --------------------------------------------------------- */

static const opt_def *find_opt(const char *arg, size_t namelen)
{
    for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++)
        if (strlen(opt_table[i].name) == namelen &&
            strncmp(opt_table[i].name, arg, namelen) == 0)
            return &opt_table[i];
    return NULL;
}

static int check_mode(const char *v)
{
    if (strcmp(v, "guard") == 0 || strcmp(v, "audit") == 0 ||
        strcmp(v, "off") == 0)
        return 0;
    return usage_error("bad value '%s' for --mode: expected guard, audit "
                       "or off", v);
}

/* As the library: 0 leaves the exit status alone. */
static int check_exitcode(const char *v)
{
    size_t n = strspn(v, "0123456789");
    if (n > 0 && n <= 3 && v[n] == '\0') {
        int code = atoi(v);
        if (code >= 0 && code <= 255)
            return 0;
    }
    return usage_error("bad value '%s' for --error-exitcode: expected a "
                       "number from 1 to 255 (0 leaves the exit status alone)", v);
}

/* The library accepts a positive number below 1e9, in strtod's forms. */
static int check_positive(const char *opt, const char *v)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno == 0 && end != v && *end == '\0' && d > 0 && d < 1e9)
        return 0;
    return usage_error("bad value '%s' for %s: expected a positive number", v, opt);
}

static int check_recheck(const char *v)
{
    if (strcmp(v, "changed") == 0 || strcmp(v, "always") == 0)
        return 0;
    return usage_error("bad value '%s' for --recheck: expected changed or always", v);
}

/* Each comma-separated name must fit the library's table, else the
 * library would refuse the whole list at start-up. */
static int check_copy_fns(const run_opts *o, size_t *total)
{
    for (size_t i = 0; i < o->n_copy_fns; i++) {
        const char *v = o->copy_fns[i];
        do {
            size_t n = strcspn(v, ",");
            /* as the library: blanks around a name are dropped, not inside */
            const char *b = v, *e = v + n;
            while (b < e && isspace((unsigned char)*b))
                b++;
            while (e > b && isspace((unsigned char)e[-1]))
                e--;
            int inner = 0;
            for (const char *q = b; q < e; q++)
                inner |= isspace((unsigned char)*q) || iscntrl((unsigned char)*q);
            if (e == b || (size_t)(e - b) > COPY_FN_NAME_MAX || inner)
                return usage_error("bad value '%s' for --copy-fn: expected "
                                   "function names of 1 to %zu characters, "
                                   "separated by commas",
                                   o->copy_fns[i], COPY_FN_NAME_MAX);
            if (++*total > HCG_MAX_COPY_FNS)
                return usage_error("too many --copy-fn names: at most %d",
                                   HCG_MAX_COPY_FNS);
            v += n;
        } while (*v++ == ',');
    }
    return 0;
}

static int check_value(const opt_def *d, const char *v)
{
    if (d->id == OPT_MODE)
        return check_mode(v);
    if (d->id == OPT_ERROR_EXITCODE)
        return check_exitcode(v);
    if (d->id == OPT_SLOW_MS && strcmp(v, "0") == 0)
        return 0; /* slow host functions not reported */
    if (d->id == OPT_SLOW_MS || d->id == OPT_HANG_S)
        return check_positive(d->name, v);
    if (d->id == OPT_RECHECK)
        return check_recheck(v);
    size_t size;
    if (d->id == OPT_BUFFER && hcg_parse_buffer_size(v, &size) != 0)
        return usage_error("bad value '%s' for --buffer: expected %s", v, HCG_BUFFER_EXPECTED);
    return 0;
}

/* One option at argv[*i]; *i moves past its value. */
static int parse_one(run_opts *o, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t namelen = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
    const opt_def *d = find_opt(arg, namelen);
    if (!d)
        return usage_error("unknown option '%.*s'", (int)namelen, arg);
    const char *v = NULL;
    if (d->takes_value) {
        if (namelen < strlen(arg))
            v = arg + namelen + 1;
        else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0)
            v = argv[++*i];
        if (!v || !*v)
            return usage_error("option '%s' needs a value", d->name);
    } else if (namelen < strlen(arg)) {
        return usage_error("option '%s' takes no value", d->name);
    }
    int rc = v ? check_value(d, v) : 0;
    if (rc)
        return rc;
    o->given[d->id] = 1;
    o->value[d->id] = v;
    if (d->id == OPT_COPY_FN)
        o->copy_fns[o->n_copy_fns++] = v;
    if (d->id == OPT_NO_FINDING) { /* repeatable; checked by the library's parser */
        size_t used = strlen(o->no_finding);
        if (used + strlen(v) + 2 > sizeof o->no_finding)
            return usage_error("too many --no-finding kinds");
        snprintf(o->no_finding + used, sizeof o->no_finding - used, "%s%s", used ? "," : "", v);
    }
    return 0;
}

/* Options up to the program; returns 0 with *prog set, or an exit code
 * (-1 for "exit 0": help or version was printed). */
static int parse_run(run_opts *o, int argc, char **argv, int *prog)
{
    int i = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (argv[i][0] != '-' || argv[i][1] == '\0')
            break;
        int rc = parse_one(o, argc, argv, &i);
        if (rc)
            return rc;
        if (o->given[OPT_HELP] || o->given[OPT_VERSION])
            return -1;
    }
    if (i >= argc)
        return usage_error("no program given");
    size_t total = 0;
    *prog = i;
    return check_copy_fns(o, &total);
}

static char *join_copy_fns(const run_opts *o)
{
    size_t len = 1;
    for (size_t i = 0; i < o->n_copy_fns; i++)
        len += strlen(o->copy_fns[i]) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    *s = '\0';
    for (size_t i = 0; i < o->n_copy_fns; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, o->copy_fns[i]);
    }
    return s;
}

/* Options given override the environment; the rest is inherited. */
static int apply_options(const run_opts *o)
{
    static const struct {
        opt_id id;
        const char *var;
        const char *fixed; /* value of a flag option */
    } map[] = {
        {OPT_MODE, "HCGUARD_MODE", NULL},
        {OPT_LOG, "HCGUARD_LOG", NULL},
        {OPT_TRACE, "HCGUARD_TRACE", NULL},
        {OPT_ERROR_EXITCODE, "HCGUARD_ERROR_EXITCODE", NULL},
        {OPT_NO_SUMMARY, "HCGUARD_SUMMARY", "0"},
        {OPT_DRIVER, "HCGUARD_DRIVER", NULL},
        {OPT_DEBUG, "HCGUARD_DEBUG", "1"},
        {OPT_NVTX, "HCGUARD_NVTX", "1"},
        {OPT_SLOW_MS, "HCGUARD_SLOW_MS", NULL},
        {OPT_HANG_S, "HCGUARD_HANG_S", NULL},
        {OPT_RECHECK, "HCGUARD_RECHECK", NULL},
        {OPT_BUFFER, "HCGUARD_BUFFER", NULL},
        {OPT_LOG_FILE, "HCGUARD_LOG_FILE", NULL},
        {OPT_FILE_MODE, "HCGUARD_FILE_MODE", NULL},
        {OPT_PRINT_LIMIT, "HCGUARD_PRINT_LIMIT", NULL},
        {OPT_COPY_THREADS, "HCGUARD_COPY_THREADS", NULL},
        {OPT_BACKTRACE, "HCGUARD_BACKTRACE", NULL},
        {OPT_WARNINGS_AS_ERRORS, "HCGUARD_WARNINGS_AS_ERRORS", "1"},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (o->given[map[i].id])
            rc |= setenv(map[i].var,
                         map[i].fixed ? map[i].fixed : o->value[map[i].id],
                         1);
    if (o->given[OPT_NO_FINDING])
        rc |= setenv("HCGUARD_NO_FINDING", o->no_finding, 1);
    if (o->n_copy_fns) {
        char *fns = join_copy_fns(o);
        rc |= fns ? setenv("HCGUARD_COPY_FN", fns, 1) : -1;
        free(fns);
    }
    if (rc)
        msg("cannot set the environment: %s", strerror(ENOMEM));
    return rc ? -1 : 0;
}

/* ---- help ------------------------------------------------------------ */

static const char help_text[] =
    "Usage: hcguard run [options] [--] program [args...]\n"
    "       hcguard report [--trace FILE] [--svg FILE] LOG...\n"
    "       hcguard --help | --version\n"
    "\n"
    "Runs a CUDA program under hcguard. hcguard watches the host functions\n"
    "the program hands to the CUDA driver (cuLaunchHostFunc, graph host\n"
    "nodes): it checks every host-copy record (destination, source, size)\n"
    "before the driver runs it, reports host-callback misuse, and prints a\n"
    "summary on stderr when the program exits. The program needs no change\n"
    "or rebuild. hcguard runs it as its child and stays its parent: signals\n"
    "sent to hcguard go on to the program, hcguard's exit status is the\n"
    "program's, and if the program dies of a signal, hcguard dies of it too.\n"
    "However the program ends (a crash, SIGKILL, _exit), hcguard then writes\n"
    "to the log and trace the events the program had not written, and the\n"
    "summary, from a flight recorder in $TMPDIR (removed at the end).\n"
    "\n"
    "hcguard report merges the event logs (--log) of many processes, e.g. one\n"
    "per MPI rank, into a summary of each and of them all, one trace\n"
    "(--trace FILE) and a latency plot (--svg FILE): see 'hcguard report --help'.\n"
    "\n"
    "Options of run:\n"
    "  --mode MODE         guard  refuse a bad host copy: the launch returns\n"
    "                             CUDA_ERROR_INVALID_VALUE, nothing is copied\n"
    "                      audit  report a bad host copy and let it run\n"
    "                      off    check and report nothing\n"
    "                      (default: guard)\n"
    "  --log FILE          write one JSON line per event to FILE; FILE may\n"
    "                      hold %%p (pid), %%h (host name), %%q{VAR} (the\n"
    "                      value of variable VAR, e.g. a rank) and %%%%\n"
    "                      (default: no log)\n"
    "  --trace FILE        write a timeline of the host functions to FILE in\n"
    "                      Chrome's trace format, for Perfetto or\n"
    "                      chrome://tracing; FILE as for --log\n"
    "                      (default: no trace)\n"
    "  --error-exitcode N  exit with N (1-255) if hcguard found errors\n"
    "                      (default, or 0: the program's own exit status)\n"
    "  --copy-fn NAME      treat function NAME as a host copy too; repeat it\n"
    "                      or give names separated by commas (default: none)\n"
    "  --no-summary        print no summary at exit (default: print one)\n"
    "  --driver PATH       the CUDA driver library to wrap\n"
    "                      (default: libcuda.so.1, found as the program would)\n"
    "  --debug             explain on stderr what hcguard intercepts and why\n"
    "                      (default: off)\n"
    "  --slow-ms MS        report host functions that run longer than MS\n"
    "                      milliseconds (default: 10; 0: none)\n"
    "  --hang-s S          report a host function still running after S\n"
    "                      seconds, while the program goes on (default: 10)\n"
    "  --recheck WHEN      re-check a copy record when it runs: changed (only\n"
    "                      if it differs from what was checked at enqueue) or\n"
    "                      always (default: changed)\n"
    "  --buffer SIZE       each thread's event buffer, e.g. 4M; from 64K to\n"
    "                      1G; K, M, G are KiB, MiB, GiB (default: 4M)\n"
    "  --log-file FILE     write hcguard's messages and summary to FILE\n"
    "                      instead of stderr; FILE as for --log\n"
    "  --file-mode MODE    the mode of files hcguard creates, octal, from\n"
    "                      0600 to 0666 (default: 0600); it never follows a\n"
    "                      symlink, and replaces an existing file only if it\n"
    "                      is a regular file of the user it runs as\n"
    "  --print-limit N     print at most N findings, count the rest\n"
    "                      (default: 100; 0: no limit)\n"
    "  --copy-threads N    split each large host copy hcguard makes (1 MiB\n"
    "                      and more a thread) across N threads, 1 to 64\n"
    "                      (default: 1, not split)\n"
    "  --backtrace N       print N frames of the call site under each finding\n"
    "                      (default: 0, the caller alone; at most 64)\n"
    "  --no-finding KIND   report no finding of KIND: cuda-call-in-host-fn,\n"
    "                      libc-function-as-host-fn, closure-host-fn,\n"
    "                      slow-host-fn, hung-host-fn, oneshot-host-fn-in-graph\n"
    "                      (or cuda-call, libc-function, closure, slow, hung,\n"
    "                      oneshot-in-graph); repeat it or separate with commas\n"
    "  --warnings-as-errors  --error-exitcode counts warnings too\n"
    "                      (default: errors only)\n"
    "  --nvtx              mark each host function as an NVTX range in an\n"
    "                      'hcguard' domain on its callback thread, for\n"
    "                      Nsight Systems (nsys profile hcguard run --nvtx\n"
    "                      ...); copies carry their bytes (default: off)\n"
    "  -h, --help          print this help\n"
    "  --                  end of options; needed only if the program's name\n"
    "                      starts with '-'\n"
    "Options taking a value also accept the form --option=VALUE. Everything\n"
    "after the program's name is the program's own.\n"
    "\n"
    "Environment: each option sets a variable, and overrides it if it is\n"
    "already set; a variable set without its option is used as it is.\n"
    "  HCGUARD_MODE            --mode\n"
    "  HCGUARD_LOG             --log\n"
    "  HCGUARD_TRACE           --trace\n"
    "  HCGUARD_ERROR_EXITCODE  --error-exitcode\n"
    "  HCGUARD_COPY_FN         --copy-fn (names separated by commas)\n"
    "  HCGUARD_SUMMARY=0       --no-summary\n"
    "  HCGUARD_DRIVER          --driver\n"
    "  HCGUARD_DEBUG=1         --debug\n"
    "  HCGUARD_SLOW_MS         --slow-ms\n"
    "  HCGUARD_HANG_S          --hang-s\n"
    "  HCGUARD_RECHECK         --recheck\n"
    "  HCGUARD_BUFFER          --buffer\n"
    "  HCGUARD_LOG_FILE        --log-file\n"
    "  HCGUARD_FILE_MODE       --file-mode\n"
    "  HCGUARD_PRINT_LIMIT     --print-limit\n"
    "  HCGUARD_COPY_THREADS    --copy-threads\n"
    "  HCGUARD_BACKTRACE       --backtrace\n"
    "  HCGUARD_NO_FINDING      --no-finding (kinds separated by commas)\n"
    "  HCGUARD_WARNINGS_AS_ERRORS=1  --warnings-as-errors\n"
    "  HCGUARD_NVTX=1          --nvtx\n"
    "  HCGUARD_LIBRARY         the libhcguard.so to preload (default: the\n"
    "                          one installed with this launcher:\n"
    "    %s)\n"
    "hcguard puts libhcguard.so first in LD_PRELOAD, keeping what was there,\n"
    "and its Python hook, which tells hcguard about cuda.core's host-copy\n"
    "function, first on PYTHONPATH.\n"
    "\n"
    "Exit status: the program's own, or N of --error-exitcode; 2 for a usage\n"
    "error (a bad option or HCGUARD_* value, a %%q{VAR} not set, a --driver\n"
    "path that is not there), 125 if hcguard itself cannot start (library\n"
    "missing), 126 if the program cannot be executed, 127 if it is not found.\n"
    "\n"
    "Examples:\n"
    "  hcguard run ./my_app --size 1024\n"
    "  hcguard run --mode audit --log hcguard.%%p.jsonl -- python3 train.py\n"
    "  hcguard report --trace all.json --svg latency.svg hcguard.*.jsonl\n"
    "  nsys profile hcguard run --nvtx ./my_app\n";

static int print_help(void)
{
    char prefix[PATH_MAX], lib[PATH_MAX + sizeof LIB_FROM_PREFIX];
    if (find_prefix(prefix, sizeof prefix) == 0)
        snprintf(lib, sizeof lib, "%s%s", prefix, LIB_FROM_PREFIX);
    else
        snprintf(lib, sizeof lib, "<prefix>%s", LIB_FROM_PREFIX);
    printf(help_text, lib);
    /* Longer than stdio's buffer: a failed write may come before the flush. */
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_SETUP;
}

static int print_version(void)
{
    puts("hcguard " HCGUARD_VERSION_STRING);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : EXIT_SETUP;
}

/* ---- running --------------------------------------------------------- */

/* execvp says ENOENT both when the name is not on PATH and when the file
 * is there but its #! interpreter or ELF loader is not: tell them apart. */
static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    if (!path)
        path = "/bin:/usr/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)(n ? n : 1),
                 n ? path : ".", name);
        if (access(buf, F_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

static int exec_failed(const char *prog, int err)
{
    const char *hint = "";
    struct stat st = {0};
    int has_slash = strchr(prog, '/') != NULL;
    int exists = has_slash ? stat(prog, &st) == 0 : on_path(prog);
    if (err == ENOENT && exists)
        hint = " (its interpreter, on the #! line or the ELF loader, is "
               "missing)";
    else if (err == ENOENT && !has_slash)
        hint = " (not found in PATH)";
    else if (err == EACCES && has_slash && exists && S_ISDIR(st.st_mode))
        hint = " (it is a directory)";
    else if (err == EACCES)
        hint = " (not executable)";
    msg("cannot run '%s': %s%s", prog, strerror(err), hint);
    return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND
                                           : EXIT_CANNOT_EXEC;
}

static const char *plain_getenv(const char *name)
{
    return getenv(name);
}

/* The environment the program will see, as the library will read it (the
 * same parser, compiled in): a value it would ignore, or a %q{VAR} that
 * is not set, stops the launch here, where the user is looking. */
static int check_environment(void)
{
    static hcg_config c;
    char err[4096];
    if (hcg_config_parse(&c, plain_getenv, err, sizeof err) != 0) {
        for (char *line = err, *nl; line && *line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            msg("%s", line);
        }
        return usage_error("hcguard's environment has bad values (see above)");
    }
    /* A driver named by path must be there; a bare name is searched for
     * as the program would, and only the library can say. */
    if (strchr(c.driver_path, '/')) {
        unsigned char magic[4];
        int fd = open(c.driver_path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, magic, sizeof magic) : -1;
        int saved = errno;
        if (fd >= 0)
            close(fd);
        if (n < 0)
            return usage_error("cannot use the driver '%s' (--driver, HCGUARD_DRIVER): %s",
                               c.driver_path, strerror(saved));
        if (n != 4 || memcmp(magic, "\177ELF", 4) != 0)
            return usage_error("cannot use the driver '%s' (--driver, HCGUARD_DRIVER): not an "
                               "ELF shared library", c.driver_path);
    }
    return 0;
}

static int setup_environment(const run_opts *o)
{
    locations loc;
    if (find_prefix(loc.prefix, sizeof loc.prefix) != 0)
        loc.prefix[0] = '\0';
    if (apply_options(o) != 0)
        return EXIT_SETUP;
    int rc = check_environment();
    if (rc)
        return rc;
    if (find_library(&loc) != 0)
        return EXIT_SETUP;
    find_python_dir(&loc);
    if (set_list("LD_PRELOAD", loc.library, " :", 1) != 0)
        return EXIT_SETUP;
    if (loc.python[0] && set_list("PYTHONPATH", loc.python, ":", 0) != 0)
        return EXIT_SETUP;
    if (env_flag_on("HCGUARD_DEBUG")) {
        const char *pp = getenv("PYTHONPATH");
        fprintf(stderr, "==hcguard== LD_PRELOAD=%s\n==hcguard== PYTHONPATH=%s\n",
                getenv("LD_PRELOAD"), pp ? pp : "");
    }
    return 0;
}

/* ---- the program as a child ---------------------------------------------- */
/* Signals sent to the launcher go on to the program. One the terminal sent
 * (Ctrl-C, Ctrl-\\, a window size change) reached the whole foreground
 * process group, the program included, and is not sent twice. They are
 * taken with sigwaitinfo, not handlers: the launcher waits for nothing
 * else, and no handler runs in the middle of anything. */
static const int forwarded[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM,
                                SIGCONT, SIGWINCH};
#define N_FORWARDED (sizeof forwarded / sizeof forwarded[0])

static int from_terminal(int sig, const siginfo_t *si)
{
    return si->si_code > 0 && (sig == SIGINT || sig == SIGQUIT || sig == SIGWINCH);
}

/* Forward what comes until the child has ended; its wait status, or -1. */
static int wait_forwarding(pid_t pid, const sigset_t *set)
{
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(set, &si);
        if (sig < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (sig != SIGCHLD) {
            if (!from_terminal(sig, &si))
                kill(pid, sig);
            continue;
        }
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* The flight recorder's file, named in HCGUARD_FLIGHT; "" if none could be
 * made (the program then runs without one). */
static void make_flight_file(char *path, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, len, "%s/hcguard-flight-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0 || setenv("HCGUARD_FLIGHT", path, 1) != 0) {
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        path[0] = '\0';
        unsetenv("HCGUARD_FLIGHT");
        return;
    }
    close(fd);
}

/* Dies of sig as the program did (without a core of its own), or returns
 * 128 + sig if it cannot. */
static int die_of(int sig)
{
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig;
}

static const char *plain_env(const char *name)
{
    return getenv(name);
}

/* The library's configuration, as the program got it, without a word: the
 * program has said what was wrong with it already. */
static void load_config_quietly(void)
{
    hcg_config_parse(&hcg_g_config, plain_env, NULL, 0);
    atomic_store(&hcg_g_config_ready, 1);
}

static int run_child(char **argv)
{
    char flight[PATH_MAX];
    load_config_quietly();
    hcg_clock_init(); /* the tick rate, for the events left in the record */
    make_flight_file(flight, sizeof flight);
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaddset(&set, forwarded[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    pid_t pid = fork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(argv[0], argv);
        _exit(exec_failed(argv[0], errno));
    }
    if (pid < 0) {
        msg("cannot start '%s': %s", argv[0], strerror(errno));
        if (flight[0])
            unlink(flight);
        return EXIT_SETUP;
    }
    int st = wait_forwarding(pid, &set);
    sigprocmask(SIG_SETMASK, &old, NULL);
    char how[128];
    if (WIFSIGNALED(st))
        snprintf(how, sizeof how, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(how, sizeof how, "exiting with status %d without hcguard's exit handler "
                 "(_exit, or a crash in exit handlers)", WEXITSTATUS(st));
    uint64_t errors = 0;
    if (flight[0]) {
        hcg_flight_recover(flight, pid, how, &errors);
        unlink(flight);
    }
    if (st == -1)
        return EXIT_SETUP;
    if (WIFSIGNALED(st))
        return die_of(WTERMSIG(st));
    /* The program left without its exit handler: --error-exitcode is
     * applied here, as the program would have. */
    int code = hcg_config_get()->error_exitcode;
    return code && errors ? code : WEXITSTATUS(st);
}

static int cmd_run(int argc, char **argv)
{
    run_opts o = {.copy_fns = calloc((size_t)argc + 1, sizeof(char *))};
    int prog = 0;
    if (!o.copy_fns) {
        msg("out of memory");
        return EXIT_SETUP;
    }
    int rc = parse_run(&o, argc, argv, &prog);
    if (rc == 0)
        rc = setup_environment(&o);
    free(o.copy_fns);
    if (rc == -1)
        return o.given[OPT_HELP] ? print_help() : print_version();
    if (rc)
        return rc;
    return run_child(argv + prog);
}

static int top_level_option(const char *arg)
{
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        return print_help();
    if (strcmp(arg, "--version") == 0)
        return print_version();
    size_t n = strcspn(arg, "=");
    if (find_opt(arg, n))
        msg("'%.*s' is an option of run: write 'hcguard run %.*s ...' (see "
            "'hcguard run --help')", (int)n, arg, (int)strlen(arg), arg);
    else
        msg("unknown option '%.*s' (see 'hcguard --help')", (int)n, arg);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        msg("no command given: use 'hcguard run [options] program "
            "[args...]' (see 'hcguard --help')");
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "report") == 0)
        return hcg_report_main(argc - 2, argv + 2);
    if (strcmp(cmd, "help") == 0)
        return print_help();
    if (cmd[0] == '-')
        return top_level_option(cmd);
    msg("unknown command '%s': to run a program, write 'hcguard run %s ...' "
        "(see 'hcguard --help')", cmd, cmd);
    return EXIT_USAGE;
}
