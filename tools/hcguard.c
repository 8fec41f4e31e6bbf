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

/* The launcher's own options; the others are the rows of
 * src/base/options.def (hcg_options[]), each setting a variable. */
typedef enum own_opt { OWN_NONE, OWN_HELP, OWN_VERSION } own_opt;
static const struct {
    const char *name;
    own_opt id;
} own_opts[] = {{"--help", OWN_HELP}, {"-h", OWN_HELP}, {"--version", OWN_VERSION}};

typedef struct run_opts {
    char *value[HCG_OPT_COUNT]; /* the value to set; a LIST's values joined */
    own_opt own;                /* --help or --version was given */
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

static int name_is(const char *name, const char *arg, size_t namelen)
{
    return strlen(name) == namelen && strncmp(name, arg, namelen) == 0;
}

/* The row of the option arg[0, namelen), or NULL (*own then says if it is
 * one of the launcher's own). */
static const hcg_option *find_opt(const char *arg, size_t namelen, own_opt *own)
{
    *own = OWN_NONE;
    for (size_t i = 0; i < HCG_OPT_COUNT; i++)
        if (name_is(hcg_options[i].option, arg, namelen))
            return &hcg_options[i];
    for (size_t i = 0; i < sizeof own_opts / sizeof own_opts[0]; i++)
        if (name_is(own_opts[i].name, arg, namelen))
            *own = own_opts[i].id;
    return NULL;
}

static const char *plain_getenv(const char *name)
{
    return getenv(name);
}

/* v checked by the library's own parser of the option's variable. */
static int check_value(const hcg_option *d, const char *v)
{
    char why[1024];
    if (hcg_option_check(d, v, plain_getenv, why, sizeof why) == 0)
        return 0;
    return usage_error("bad value for %s: %s", d->option, why);
}

/* The value to set: a LIST's values joined with ','. */
static int keep_value(run_opts *o, const hcg_option *d, const char *v)
{
    char *old = o->value[d - hcg_options];
    size_t len = old && d->kind == HCG_OPT_KIND_LIST ? strlen(old) + 1 : 0;
    char *joined = malloc(len + strlen(v) + 1);
    if (!joined) {
        msg("out of memory");
        return EXIT_SETUP;
    }
    if (len) {
        memcpy(joined, old, len - 1);
        joined[len - 1] = ',';
    }
    strcpy(joined + len, v);
    free(old);
    o->value[d - hcg_options] = joined;
    return 0;
}

/* One option at argv[*i]; *i moves past its value. */
static int parse_one(run_opts *o, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t namelen = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
    own_opt own;
    const hcg_option *d = find_opt(arg, namelen, &own);
    if (!d && own == OWN_NONE)
        return usage_error("unknown option '%.*s'", (int)namelen, arg);
    const char *v = NULL;
    if (d && d->kind != HCG_OPT_KIND_FLAG) {
        if (namelen < strlen(arg))
            v = arg + namelen + 1;
        else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0)
            v = argv[++*i];
        if (!v || !*v)
            return usage_error("option '%s' needs a value", d->option);
    } else if (namelen < strlen(arg)) {
        return usage_error("option '%.*s' takes no value", (int)namelen, arg);
    }
    if (!d) {
        o->own = own;
        return 0;
    }
    int rc = v ? check_value(d, v) : 0;
    return rc ? rc : keep_value(o, d, v ? v : d->arg);
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
        if (o->own != OWN_NONE)
            return -1;
    }
    if (i >= argc)
        return usage_error("no program given");
    *prog = i;
    /* Each value of a repeated option was good alone; together they may
     * be too many. */
    for (size_t k = 0; k < HCG_OPT_COUNT; k++)
        if (o->value[k] && hcg_options[k].kind == HCG_OPT_KIND_LIST) {
            int rc = check_value(&hcg_options[k], o->value[k]);
            if (rc)
                return rc;
        }
    return 0;
}

/* Options given override the environment; the rest is inherited. */
static int apply_options(const run_opts *o)
{
    int rc = 0;
    for (size_t i = 0; i < HCG_OPT_COUNT; i++)
        if (o->value[i])
            rc |= setenv(hcg_options[i].var, o->value[i], 1);
    if (rc)
        msg("cannot set the environment: %s", strerror(ENOMEM));
    return rc ? -1 : 0;
}

static void free_opts(run_opts *o)
{
    for (size_t i = 0; i < HCG_OPT_COUNT; i++)
        free(o->value[i]);
}

/* ---- help ------------------------------------------------------------ */

static const char help_head[] =
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
    "Options of run:\n";

static const char help_own_options[] =
    "  -h, --help          print this help\n"
    "  --                  end of options; needed only if the program's name\n"
    "                      starts with '-'\n"
    "Options taking a value also accept the form --option=VALUE. Everything\n"
    "after the program's name is the program's own.\n"
    "\n"
    "Environment: each option sets a variable, and overrides it if it is\n"
    "already set; a variable set without its option is used as it is.\n";

static const char help_tail[] =
    "hcguard puts libhcguard.so first in LD_PRELOAD, keeping what was there,\n"
    "and its Python hook, which tells hcguard about cuda.core's host-copy\n"
    "function, first on PYTHONPATH.\n"
    "\n"
    "Exit status: the program's own, or N of --error-exitcode; 2 for a usage\n"
    "error (a bad option or HCGUARD_* value, a %q{VAR} not set, a --driver\n"
    "path that is not there), 125 if hcguard itself cannot start (library\n"
    "missing), 126 if the program cannot be executed, 127 if it is not found.\n"
    "\n"
    "Examples:\n"
    "  hcguard run ./my_app --size 1024\n"
    "  hcguard run --mode audit --log hcguard.%p.jsonl -- python3 train.py\n"
    "  hcguard report --trace all.json --svg latency.svg hcguard.*.jsonl\n"
    "  nsys profile hcguard run --nvtx ./my_app\n";

/* Help text starts at this column, and is wrapped at HELP_WIDTH columns. */
#define HELP_INDENT 22
#define HELP_WIDTH 50

/* One line of text at most HELP_WIDTH wide, from *p: up to a '\n', or
 * broken at the last space that fits; *p moves past it. Printed without
 * its newline; returns its length. */
static size_t help_line(const char **p)
{
    const char *s = *p;
    size_t n = strcspn(s, "\n");
    if (n > HELP_WIDTH) {
        n = HELP_WIDTH;
        while (n > 0 && s[n] != ' ')
            n--;
        if (n == 0)
            n = strcspn(s, " \n");
    }
    printf("%.*s", (int)n, s);
    s += n;
    if (*s == '\n' || *s == ' ')
        s++;
    *p = s;
    return n;
}

/* An option's entry: its name and value, then its help, wrapped, each
 * line after the first indented to HELP_INDENT; its default ends the last
 * line if it fits there whole, else it has a line of its own. */
static void help_option(const hcg_option *o)
{
    char head[64], dflt[128];
    int n = o->kind == HCG_OPT_KIND_FLAG
                ? snprintf(head, sizeof head, "  %s", o->option)
                : snprintf(head, sizeof head, "  %s %s", o->option, o->arg);
    printf("%-*s", HELP_INDENT, head);
    if (n >= HELP_INDENT)
        printf("\n%*s", HELP_INDENT, "");
    size_t last = 0;
    for (const char *p = o->help; *p;) {
        last = help_line(&p);
        if (*p)
            printf("\n%*s", HELP_INDENT, "");
    }
    if (o->shown_default) {
        int len = snprintf(dflt, sizeof dflt, "(default: %s)", o->shown_default);
        if (last + 1 + (size_t)len <= HELP_WIDTH)
            printf(" %s", dflt);
        else
            printf("\n%*s%s", HELP_INDENT, "", dflt);
    }
    putchar('\n');
}

/* "  HCGUARD_MODE            --mode": the variable each option sets. */
static void help_variable(const hcg_option *o)
{
    char var[64];
    if (o->kind == HCG_OPT_KIND_FLAG)
        snprintf(var, sizeof var, "%s=%s", o->var, o->arg);
    else
        snprintf(var, sizeof var, "%s", o->var);
    printf("  %-22s  %s%s\n", var, o->option,
           o->kind == HCG_OPT_KIND_LIST ? " (values separated by commas)" : "");
}

static int print_help(void)
{
    char prefix[PATH_MAX], lib[PATH_MAX + sizeof LIB_FROM_PREFIX];
    if (find_prefix(prefix, sizeof prefix) == 0)
        snprintf(lib, sizeof lib, "%s%s", prefix, LIB_FROM_PREFIX);
    else
        snprintf(lib, sizeof lib, "<prefix>%s", LIB_FROM_PREFIX);
    fputs(help_head, stdout);
    for (size_t i = 0; i < HCG_OPT_COUNT; i++)
        help_option(&hcg_options[i]);
    fputs(help_own_options, stdout);
    for (size_t i = 0; i < HCG_OPT_COUNT; i++)
        help_variable(&hcg_options[i]);
    printf("  HCGUARD_LIBRARY         the libhcguard.so to preload (default: the\n"
           "                          one installed with this launcher:\n"
           "    %s)\n", lib);
    fputs(help_tail, stdout);
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
    if (!prog[0])
        hint = " (the program's name is empty)"; /* on_path would find a directory */
    else if (err == ENOENT && exists)
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

/* Forward what comes until the child has ended; its wait status, or -1
 * with errno set if it could not be known. */
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

/* The library's configuration, as the program got it, without a word: the
 * program has said what was wrong with it already. */
static void load_config_quietly(void)
{
    hcg_config_parse(&hcg_g_config, plain_getenv, NULL, 0);
    atomic_store(&hcg_g_config_ready, 1);
}

/* The program's end could not be learnt (waitpid failed): said as it is,
 * never taken for a death by a signal. ECHILD: the program is gone (someone
 * else reaped it), so what it left in its flight record is reported. */
static int lost_child(const char *prog, pid_t pid, int err, const char *flight)
{
    msg("lost track of '%s' (pid %d): %s; its exit status is unknown", prog, (int)pid,
        strerror(err));
    if (flight[0]) {
        uint64_t errors;
        char how[128];
        snprintf(how, sizeof how, "a way hcguard run could not learn (waitpid: %s)",
                 strerror(err));
        if (err == ECHILD)
            hcg_flight_recover(flight, pid, how, &errors);
        unlink(flight);
    }
    return EXIT_SETUP;
}

/* A log or report file the program's processes share (a fixed name):
 * each of them appends to it (hcg_run_appends), so an earlier run's is
 * started anew here, once, before the program. Only one that exists: a
 * program that launches nothing makes none. */
static void start_shared_file(const char *path, const char *pattern)
{
    struct stat st;
    if (!path[0] || hcg_pattern_per_process(pattern) || lstat(path, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return;
    char why[PATH_MAX + 200];
    int fd = hcg_open_output_why(path, 0, why, sizeof why);
    if (fd >= 0)
        close(fd);
}

static int run_child(char **argv)
{
    char flight[PATH_MAX];
    load_config_quietly();
    hcg_clock_init(); /* the tick rate, for the events left in the record */
    make_flight_file(flight, sizeof flight);
    if (flight[0]) { /* its processes then append (hcg_run_appends) */
        start_shared_file(hcg_g_config.log_path, hcg_g_config.log_pattern);
        start_shared_file(hcg_g_config.report_path, hcg_g_config.report_pattern);
    }
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaddset(&set, forwarded[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    /* SIGCHLD ignored (inherited across exec from a daemon or a job runner)
     * makes the kernel reap the child and send no SIGCHLD: the launcher
     * would wait for ever. It takes the default for itself; the program
     * gets back the disposition it would have had without hcguard. */
    struct sigaction chld_dfl = {.sa_handler = SIG_DFL}, chld_inherited;
    sigemptyset(&chld_dfl.sa_mask);
    sigaction(SIGCHLD, &chld_dfl, &chld_inherited);
    pid_t pid = fork();
    if (pid == 0) {
        sigaction(SIGCHLD, &chld_inherited, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (flight[0]) { /* the record is this process's, not a helper's it starts */
            char me[24];
            snprintf(me, sizeof me, "%ld", (long)getpid());
            setenv("HCGUARD_FLIGHT_PID", me, 1);
        }
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
    int wait_err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (st == -1)
        return lost_child(argv[0], pid, wait_err, flight);
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
    if (WIFSIGNALED(st))
        return die_of(WTERMSIG(st));
    /* The program left without its exit handler: --error-exitcode is
     * applied here, as the program would have. */
    int code = hcg_config_get()->error_exitcode;
    return code && errors ? code : WEXITSTATUS(st);
}

static int cmd_run(int argc, char **argv)
{
    run_opts o = {0};
    int prog = 0;
    int rc = parse_run(&o, argc, argv, &prog);
    if (rc == 0)
        rc = setup_environment(&o);
    free_opts(&o);
    if (rc == -1)
        return o.own == OWN_HELP ? print_help() : print_version();
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
    own_opt own;
    if (find_opt(arg, n, &own))
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
