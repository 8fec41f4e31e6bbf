"""The hcguard launcher: its command line, its errors, and the environment,
exit status and signals of the program it runs.

Most cases preload an empty stand-in library (HCGUARD_LIBRARY=dummy) so
that only the launcher is under test; the layout cases load the real
libhcguard.so, under --mode off."""

import os
import re
import shutil
import signal
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_common import (case, clean_env, expect, expect_eq,  # noqa: E402
                             main, run)

OPTIONS = ("--mode", "--log", "--trace", "--error-exitcode", "--copy-fn",
           "--no-summary", "--driver", "--debug", "--slow-ms", "--hang-s",
           "--recheck", "--buffer", "--help")
VARIABLES = ("HCGUARD_MODE", "HCGUARD_LOG", "HCGUARD_TRACE", "HCGUARD_ERROR_EXITCODE",
             "HCGUARD_COPY_FN", "HCGUARD_SUMMARY=0", "HCGUARD_DRIVER",
             "HCGUARD_DEBUG=1", "HCGUARD_SLOW_MS", "HCGUARD_HANG_S",
             "HCGUARD_RECHECK", "HCGUARD_BUFFER", "HCGUARD_LIBRARY")
SEE_RUN_HELP = " (see 'hcguard run --help')\n"


def child_env(args, argv, env=None, exe=None, cwd=None):
    """Run a static env(1) under `hcguard run argv` and return (proc, the
    environment it printed). ld.so leaves a static program alone, so what
    LD_PRELOAD names is shown, never loaded."""
    p = run([exe or args.hcguard, "run"] + argv + ["--", args.printenv],
            env=env, cwd=cwd)
    seen = dict(line.split("=", 1) for line in p.stdout.splitlines()
                if "=" in line)
    return p, seen


def dummy_env(args, **extra):
    return clean_env(HCGUARD_LIBRARY=args.dummy, **extra)


def real(path):
    return os.path.realpath(path)


def preload_path(path):
    """The directory resolved, the file name kept: the launcher preloads
    libhcguard.so, a link to the versioned file (libhcguard.so.0.x.y)."""
    return os.path.join(real(os.path.dirname(path)), os.path.basename(path))


def expect_usage_error(args, argv, message, env=None):
    p = run([args.hcguard] + argv, env=env if env else dummy_env(args))
    expect_eq(p.returncode, 2, "exit status of %r" % argv, p)
    expect_eq(p.stderr, "hcguard: " + message, "message of %r" % argv, p)
    expect_eq(p.stdout, "", "stdout of %r" % argv, p)


# ---- command line -------------------------------------------------------

@case
def case_help(args, tmp):
    p = run([args.hcguard, "--help"])
    expect_eq(p.returncode, 0, "exit status", p)
    expect_eq(p.stderr, "", "stderr", p)
    for word in OPTIONS + VARIABLES + ("Usage: hcguard run [options] [--] "
                                       "program [args...]", "Example"):
        expect(word in p.stdout, "--help does not mention %s" % word, p)
    # Each option line with a value gives its default.
    expect(p.stdout.count("(default: ") >= 7, "defaults missing", p)
    expect(preload_path(args.library) in p.stdout, "library default path missing", p)
    # The library's path is as long as the install prefix: it stands alone
    # on its line, which is the only one allowed past 80 columns.
    long_lines = [l for l in p.stdout.splitlines()
                  if len(l) > 80 and l.strip() != preload_path(args.library) + ")"]
    expect(not long_lines, "lines over 80: %r" % long_lines, p)
    for other in (["run", "--help"], ["run", "-h"], ["-h"], ["help"],
                  ["run", "--mode", "off", "--help"]):
        q = run([args.hcguard] + other)
        expect_eq(q.returncode, 0, "exit status of %r" % other, q)
        expect_eq(q.stdout, p.stdout, "help text of %r" % other, q)


@case
def case_help_write_error(args, tmp):
    if not os.path.exists("/dev/full"):
        return
    with open("/dev/full", "w") as full:
        rc = subprocess.run([args.hcguard, "--help"], stdout=full,
                            stderr=subprocess.DEVNULL).returncode
    expect(rc != 0, "--help into a full device exited 0")


@case
def case_version(args, tmp):
    for argv in (["--version"], ["run", "--version"]):
        p = run([args.hcguard] + argv)
        expect_eq(p.returncode, 0, "exit status of %r" % argv, p)
        expect_eq(p.stdout, "hcguard %s\n" % args.version, "version", p)
        expect_eq(p.stderr, "", "stderr", p)


@case
def case_unknown_option(args, tmp):
    expect_usage_error(args, ["run", "--bogus", "true"],
                       "unknown option '--bogus'" + SEE_RUN_HELP)
    expect_usage_error(args, ["run", "--bogus=3", "true"],
                       "unknown option '--bogus'" + SEE_RUN_HELP)
    expect_usage_error(args, ["run", "-x", "true"],
                       "unknown option '-x'" + SEE_RUN_HELP)
    expect_usage_error(args, ["--bogus"],
                       "unknown option '--bogus' (see 'hcguard --help')\n")
    expect_usage_error(args, ["--mode", "audit", "true"],
                       "'--mode' is an option of run: write 'hcguard run "
                       "--mode ...' (see 'hcguard run --help')\n")


@case
def case_missing_value(args, tmp):
    for opt in ("--mode", "--log", "--error-exitcode", "--copy-fn",
                "--driver"):
        want = "option '%s' needs a value" % opt + SEE_RUN_HELP
        expect_usage_error(args, ["run", opt], want)
        expect_usage_error(args, ["run", opt + "=", "true"], want)
        # The next option is not taken for the value.
        expect_usage_error(args, ["run", opt, "--debug", "true"], want)
    for flag in ("--no-summary", "--debug", "--nvtx"):
        expect_usage_error(args, ["run", flag + "=1", "true"],
                           "option '%s' takes no value" % flag + SEE_RUN_HELP)


@case
def case_bad_mode(args, tmp):
    for value in ("fast", "GUARD", "guard ", "0"):
        want = ("bad value for --mode: '%s' is not one of guard, audit, off"
                % value + SEE_RUN_HELP)
        expect_usage_error(args, ["run", "--mode", value, "true"], want)
        expect_usage_error(args, ["run", "--mode=" + value, "true"], want)


@case
def case_bad_exitcode(args, tmp):
    for value in ("256", "x", "-1", "+5", " 5", "1x", "0x10", "1000",
                  "99999999999999999999"):
        want = ("bad value for --error-exitcode: '%s' is not an integer from "
                "1 to 255 (0 leaves the exit status alone)" % value + SEE_RUN_HELP)
        expect_usage_error(args, ["run", "--error-exitcode", value, "true"],
                           want)
    for value in ("0", "1", "255", "007"):
        p = run([args.hcguard, "run", "--mode", "off", "--error-exitcode",
                 value, "true"], env=dummy_env(args))
        expect_eq(p.returncode, 0, "--error-exitcode %s" % value, p)


@case
def case_bad_thresholds(args, tmp):
    for opt in ("--slow-ms", "--hang-s"):
        for value in ("0", "-1", "x", "1x", "1e9", "nan", "inf", "0x", "18446744073709551615"):
            if value == "0" and opt == "--slow-ms":
                continue  # switches slow host functions off: below
            want = ("bad value for %s: '%s' is not a positive number below 1000000000"
                    % (opt, value) + SEE_RUN_HELP)
            expect_usage_error(args, ["run", opt, value, "true"], want)
            expect_usage_error(args, ["run", opt + "=" + value, "true"], want)
        for value in ("0.5", "20", "1e3") + (("0",) if opt == "--slow-ms" else ()):
            p = run([args.hcguard, "run", "--mode", "off", opt, value, "true"],
                    env=dummy_env(args))
            expect_eq(p.returncode, 0, "%s %s" % (opt, value), p)
    for value in ("never", "Always", ""):
        if value:
            want = ("bad value for --recheck: '%s' is not one of changed, always"
                    % value + SEE_RUN_HELP)
        else:
            want = "option '--recheck' needs a value" + SEE_RUN_HELP
        expect_usage_error(args, ["run", "--recheck=" + value, "true"], want)


@case
def case_bad_buffer(args, tmp):
    for value in ("0", "63K", "2G", "4MB", "-1", "x", "4M5", "0x100000", "1e6"):
        want = ("bad value for --buffer: '%s' is not a size from 64K to 1G "
                "(bytes, or a number with K, M or G)" % value + SEE_RUN_HELP)
        expect_usage_error(args, ["run", "--buffer", value, "true"], want)
        expect_usage_error(args, ["run", "--buffer=" + value, "true"], want)
    for value in ("64K", "4M", "1g", "65536"):
        p = run([args.hcguard, "run", "--mode", "off", "--buffer", value, "true"],
                env=dummy_env(args))
        expect_eq(p.returncode, 0, "--buffer %s" % value, p)


@case
def case_bad_copy_fn(args, tmp):
    """The library's parser and message, for each value and for all the
    values of repeated options together."""
    tail = ("; it takes comma-separated symbol names, at most 32, each shorter "
            "than 128 bytes, without spaces" + SEE_RUN_HELP)

    def want(value, reason):
        return "bad value for --copy-fn: '%s' has %s" % (value, reason) + tail
    for value, reason in (("a,,b", "an empty name"), (",a", "an empty name"),
                          ("a,", "an empty name"), (" , ", "an empty name"),
                          ("my fn", "a name with a space or control character in it"),
                          ("a\tb", "a name with a space or control character in it"),
                          ("x" * 128, "a name of 128 bytes or more")):
        expect_usage_error(args, ["run", "--copy-fn", value, "true"],
                           want(value, reason))
    names = ",".join("f%d" % i for i in range(33))
    expect_usage_error(args, ["run", "--copy-fn", names, "true"],
                       want(names, "more than 32 names"))
    split = ["--copy-fn=f%d" % i for i in range(33)]
    expect_usage_error(args, ["run"] + split + ["true"],
                       want(names, "more than 32 names"))
    ok = ",".join("f%d" % i for i in range(31))
    p, seen = child_env(args, ["--mode", "off", "--copy-fn", ok,
                               "--copy-fn", "y" * 127], dummy_env(args))
    expect_eq(seen.get("HCGUARD_COPY_FN"), ok + "," + "y" * 127,
              "32 names, one of 127 characters, are not accepted", p)


@case
def case_bad_environment(args, tmp):
    """An inherited HCGUARD_* value the library would ignore, or a %q{VAR}
    that is not set, stops the launch with the library's own message."""
    cases = [
        ({"HCGUARD_MODE": "fast"}, "HCGUARD_MODE='fast' is not one of guard, audit, off"),
        ({"HCGUARD_PRINT_LIMIT": "lots"},
         "HCGUARD_PRINT_LIMIT='lots' is not an integer from 0 (no limit) to 1000000000"),
        ({"HCGUARD_FILE_MODE": "0777"}, "HCGUARD_FILE_MODE='0777' is not an octal mode"),
        ({"HCGUARD_LOG": "x.%q{HCG_NO_SUCH_RANK}"},
         "HCGUARD_LOG='x.%q{HCG_NO_SUCH_RANK}': %q{HCG_NO_SUCH_RANK}: HCG_NO_SUCH_RANK is not set"),
        ({"HCGUARD_LOG_FILE": "r.%z"}, "HCGUARD_LOG_FILE='r.%z': unknown conversion '%z'"),
    ]
    for env, message in cases:
        p = run([args.hcguard, "run", "true"], env=dummy_env(args, **env))
        expect_eq(p.returncode, 2, "exit status with %r" % env, p)
        expect(p.stderr.startswith("hcguard: " + message), "message with %r" % env, p)
        expect("bad values (see above)" in p.stderr, "the summing-up line", p)
    p = run([args.hcguard, "run", "--log", "x.%q{HCG_NO_SUCH_RANK}", "true"],
            env=dummy_env(args))
    expect_eq(p.returncode, 2, "exit status with an unset %q in --log", p)


@case
def case_bad_driver(args, tmp):
    missing = os.path.join(tmp, "no-such-libcuda.so.1")
    expect_usage_error(args, ["run", "--driver", missing, "true"],
                       "cannot use the driver '%s' (--driver, HCGUARD_DRIVER): No such file "
                       "or directory" % missing + SEE_RUN_HELP)
    text = os.path.join(tmp, "libcuda.so.1")
    with open(text, "w") as f:
        f.write("not a library\n")
    expect_usage_error(args, ["run", "--driver=" + text, "true"],
                       "cannot use the driver '%s' (--driver, HCGUARD_DRIVER): not an ELF shared "
                       "library" % text + SEE_RUN_HELP)
    p = run([args.hcguard, "run", "true"], env=dummy_env(args, HCGUARD_DRIVER=missing))
    expect_eq(p.returncode, 2, "exit status with a missing HCGUARD_DRIVER", p)
    # a bare name is searched for as the program would: not checked here
    p = run([args.hcguard, "run", "--driver", "libcuda-none.so.1", "true"], env=dummy_env(args))
    expect_eq(p.returncode, 0, "a bare driver name", p)


@case
def case_no_program(args, tmp):
    for argv in (["run"], ["run", "--mode", "off"], ["run", "--"],
                 ["run", "--debug", "--"]):
        expect_usage_error(args, argv, "no program given" + SEE_RUN_HELP)


@case
def case_unknown_command(args, tmp):
    expect_usage_error(args, ["frobnicate", "x"],
                       "unknown command 'frobnicate': to run a program, "
                       "write 'hcguard run frobnicate ...' (see 'hcguard "
                       "--help')\n")
    expect_usage_error(args, [],
                       "no command given: use 'hcguard run [options] "
                       "program [args...]' (see 'hcguard --help')\n")


# ---- programs that cannot run -------------------------------------------

def expect_exec_error(args, prog, status, message, env=None):
    p = run([args.hcguard, "run", "--mode", "off", prog],
            env=env if env else dummy_env(args))
    expect_eq(p.returncode, status, "exit status for %r" % prog, p)
    expect_eq(p.stderr, "hcguard: cannot run '%s': %s\n" % (prog, message),
              "message for %r" % prog, p)


@case
def case_program_not_found(args, tmp):
    expect_exec_error(args, "hcg-no-such-program", 127,
                      "No such file or directory (not found in PATH)")
    missing = os.path.join(tmp, "missing", "prog")
    expect_exec_error(args, missing, 127, "No such file or directory")
    # PATH is searched as execvp searches it.
    env = dummy_env(args, PATH=tmp)
    expect_exec_error(args, "env", 127,
                      "No such file or directory (not found in PATH)", env)
    # An empty name names no file (it was said to be a file whose
    # interpreter is missing: each PATH directory + "/" is there).
    expect_exec_error(args, "", 127,
                      "No such file or directory (the program's name is empty)")


@case
def case_program_not_executable(args, tmp):
    path = os.path.join(tmp, "data.txt")
    with open(path, "w") as f:
        f.write("not a program\n")
    os.chmod(path, 0o644)
    if os.access(path, os.X_OK):
        return  # root may be allowed everything on some file systems
    expect_exec_error(args, path, 126, "Permission denied (not executable)")
    expect_exec_error(args, tmp, 126, "Permission denied (it is a directory)")
    env = dummy_env(args, PATH=tmp)
    expect_exec_error(args, "data.txt", 126,
                      "Permission denied (not executable)", env)


@case
def case_program_interpreter_missing(args, tmp):
    path = os.path.join(tmp, "script")
    with open(path, "w") as f:
        f.write("#!/hcg/no/such/interpreter\necho hello\n")
    os.chmod(path, 0o755)
    msg = ("No such file or directory (its interpreter, on the #! line or "
           "the ELF loader, is missing)")
    expect_exec_error(args, path, 127, msg)
    expect_exec_error(args, "script", 127, msg, dummy_env(args, PATH=tmp))


@case
def case_library_unusable(args, tmp):
    def expect_setup_error(lib, reason):
        env = clean_env(HCGUARD_LIBRARY=lib)
        p = run([args.hcguard, "run", "--mode", "off", "true"], env=env)
        expect_eq(p.returncode, 125, "exit status for library %r" % lib, p)
        expect_eq(p.stderr, "hcguard: cannot use the library '%s' (from "
                  "HCGUARD_LIBRARY): %s\n" % (lib, reason),
                  "message for library %r" % lib, p)
    expect_setup_error(os.path.join(tmp, "none.so"),
                       "No such file or directory")
    text = os.path.join(tmp, "text.so")
    with open(text, "w") as f:
        f.write("hello\n")
    expect_setup_error(text, "not an ELF shared library")
    expect_setup_error(tmp, "Is a directory")
    spaced = os.path.join(tmp, "a dir")
    os.mkdir(spaced)
    lib = os.path.join(spaced, "libhcguard.so")
    shutil.copy(args.dummy, lib)
    p = run([args.hcguard, "run", "--mode", "off", "true"],
            env=clean_env(HCGUARD_LIBRARY=lib))
    expect_eq(p.returncode, 125, "exit status for a path with a space", p)
    expect_eq(p.stderr, "hcguard: cannot use the library '%s' (from "
              "HCGUARD_LIBRARY): LD_PRELOAD cannot hold a path with a space "
              "or ':' (HCGUARD_LIBRARY may name a link to it)\n" % lib,
              "message for a path with a space", p)
    # ... which a link without one brings in; a relative path is made
    # absolute, against the current directory.
    os.symlink(lib, os.path.join(tmp, "link.so"))
    for name in (os.path.join(tmp, "link.so"), "link.so", "./link.so"):
        p, seen = child_env(args, ["--mode", "off"],
                            clean_env(HCGUARD_LIBRARY=name), cwd=tmp)
        expect_eq(seen.get("LD_PRELOAD"), os.path.join(tmp, "link.so"),
                  "LD_PRELOAD for HCGUARD_LIBRARY=%s" % name, p)


# ---- what the program sees ----------------------------------------------

@case
def case_child_env(args, tmp):
    p, seen = child_env(args, [
        "--mode", "off", "--log", "run.%p.%h.%q{RANK}.%%.jsonl",
        "--trace", "run.%p.json",
        "--error-exitcode", "7", "--copy-fn", "my_copy",
        "--copy-fn", "a_copy,b_copy", "--no-summary",
        "--driver", args.dummy, "--debug", "--slow-ms", "2.5",
        "--hang-s", "30", "--recheck", "always", "--buffer", "8M", "--log-file", "report.%p.txt",
        "--file-mode", "0644", "--print-limit", "5", "--nvtx"], dummy_env(args, RANK="3"))
    expect_eq(p.returncode, 0, "exit status", p)
    want = {
        "LD_PRELOAD": os.path.abspath(args.dummy),
        "PYTHONPATH": real(args.hook_dir),
        "HCGUARD_MODE": "off",
        "HCGUARD_LOG": "run.%p.%h.%q{RANK}.%%.jsonl",
        "HCGUARD_TRACE": "run.%p.json",
        "HCGUARD_ERROR_EXITCODE": "7",
        "HCGUARD_COPY_FN": "my_copy,a_copy,b_copy",
        "HCGUARD_SUMMARY": "0",
        "HCGUARD_DRIVER": args.dummy,
        "HCGUARD_LOG_FILE": "report.%p.txt",
        "HCGUARD_FILE_MODE": "0644",
        "HCGUARD_PRINT_LIMIT": "5",
        "HCGUARD_DEBUG": "1",
        "HCGUARD_BUFFER": "8M",
        "HCGUARD_SLOW_MS": "2.5",
        "HCGUARD_HANG_S": "30",
        "HCGUARD_RECHECK": "always",
        "HCGUARD_NVTX": "1",
    }
    for k, v in want.items():
        expect_eq(seen.get(k), v, k, p)
    # --debug says what it set up, on stderr only.
    expect_eq(p.stderr, "==hcguard== LD_PRELOAD=%s\n==hcguard== PYTHONPATH=%s"
              "\n" % (os.path.abspath(args.dummy), real(args.hook_dir)),
              "stderr", p)


@case
def case_child_env_equals_form(args, tmp):
    p, seen = child_env(args, [
        "--mode=audit", "--log=x.jsonl", "--error-exitcode=9",
        "--copy-fn=f,g", "--driver=libcuda.so.1", "--mode=off"],
        dummy_env(args))
    expect_eq(p.returncode, 0, "exit status", p)
    expect_eq(p.stderr, "", "stderr without --debug", p)
    for k, v in (("HCGUARD_MODE", "off"), ("HCGUARD_LOG", "x.jsonl"),
                 ("HCGUARD_ERROR_EXITCODE", "9"), ("HCGUARD_COPY_FN", "f,g"),
                 ("HCGUARD_DRIVER", "libcuda.so.1")):
        expect_eq(seen.get(k), v, k, p)
    for k in ("HCGUARD_SUMMARY", "HCGUARD_DEBUG"):
        expect(k not in seen, "%s set without its option" % k, p)


@case
def case_child_env_inherits(args, tmp):
    env = dummy_env(args, HCGUARD_MODE="audit", HCGUARD_LOG="old.jsonl",
                    HCGUARD_COPY_FN="old_fn", HCGUARD_SUMMARY="1",
                    HCGUARD_ERROR_EXITCODE="4")
    p, seen = child_env(args, ["--mode", "off", "--copy-fn", "new_fn"], env)
    expect_eq(p.returncode, 0, "exit status", p)
    for k, v in (("HCGUARD_MODE", "off"), ("HCGUARD_COPY_FN", "new_fn"),
                 ("HCGUARD_LOG", "old.jsonl"), ("HCGUARD_SUMMARY", "1"),
                 ("HCGUARD_ERROR_EXITCODE", "4")):
        expect_eq(seen.get(k), v, k, p)
    p, seen = child_env(args, ["--mode", "off"],
                        dummy_env(args, HCGUARD_MODE="audit"))
    expect_eq(seen.get("HCGUARD_MODE"), "off", "HCGUARD_MODE", p)
    p, seen = child_env(args, [], dummy_env(args, HCGUARD_MODE="off"))
    expect_eq(seen.get("HCGUARD_MODE"), "off", "inherited HCGUARD_MODE", p)


def preload_env(args, value):
    # The launcher itself starts with this LD_PRELOAD; a sanitizer-built
    # launcher must be told not to mind a library ahead of its runtime.
    return dummy_env(args, LD_PRELOAD=value,
                     ASAN_OPTIONS="verify_asan_link_order=0")


@case
def case_ld_preload_kept(args, tmp):
    other = os.path.join(tmp, "libother.so")
    san = os.path.join(tmp, "libasan.so.99")  # named like the runtime
    shutil.copy(args.dummy, other)
    shutil.copy(args.dummy, san)
    ours = os.path.abspath(args.dummy)
    for before, after in (
            (other, ours + ":" + other),
            (other + " " + other, ours + ":" + other + ":" + other),
            (":" + other + ":", ours + ":" + other),
            (other + ":" + ours, ours + ":" + other),  # not twice
            (ours, ours),
            (other + " " + os.path.dirname(args.dummy) + "/./"
             + os.path.basename(args.dummy),
             ours + ":" + other),  # the same file by another name
            (san + ":" + other, san + ":" + ours + ":" + other),
            ("", ours)):
        p, seen = child_env(args, ["--mode", "off"],
                            preload_env(args, before))
        expect_eq(p.returncode, 0, "exit status", p)
        expect_eq(seen.get("LD_PRELOAD"), after,
                  "LD_PRELOAD from %r" % before, p)


@case
def case_pythonpath_kept(args, tmp):
    hook = real(args.hook_dir)
    for before, after in (("/a:/b", hook + ":/a:/b"),
                          ("/a::/b", hook + ":/a::/b"),
                          (":/a", hook + "::/a"),
                          ("/a:" + hook, hook + ":/a"),
                          (hook, hook),
                          ("", hook)):
        p, seen = child_env(args, ["--mode", "off"],
                            dummy_env(args, PYTHONPATH=before))
        expect_eq(seen.get("PYTHONPATH"), after,
                  "PYTHONPATH from %r" % before, p)


@case
def case_arguments_pass_through(args, tmp):
    script = 'printf "[%s]" "$0" "$@"'
    p = run([args.hcguard, "run", "--mode", "off", "sh", "-c", script,
             "zero", "--mode", "x y", "--", ""], env=dummy_env(args))
    expect_eq(p.returncode, 0, "exit status", p)
    expect_eq(p.stdout, "[zero][--mode][x y][--][]", "arguments", p)
    # After --, a program whose name starts with '-' is the program.
    os.symlink(shutil.which("true"), os.path.join(tmp, "-dash"))
    p = run([args.hcguard, "run", "--", "-dash"],
            env=dummy_env(args, PATH=tmp, HCGUARD_MODE="off"))
    expect_eq(p.returncode, 0, "exit status of -dash", p)


@case
def case_exit_status_and_signals(args, tmp):
    env = dummy_env(args)
    for code in (0, 1, 3, 125, 255):
        p = run([args.hcguard, "run", "--mode", "off", "sh", "-c",
                 "exit %d" % code], env=env)
        expect_eq(p.returncode, code, "exit status", p)
    p = run([args.hcguard, "run", "--mode", "off", "sh", "-c",
             "kill -TERM $$"], env=env)
    expect_eq(p.returncode, -signal.SIGTERM, "death by SIGTERM", p)
    # hcguard run stays the program's parent.
    proc = subprocess.Popen([args.hcguard, "run", "--mode", "off", "sh",
                             "-c", "echo $PPID"], env=env,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    expect_eq(int(out), proc.pid, "the program's parent")
    # Signals sent to hcguard run reach the program, which decides.
    for sig, code in ((signal.SIGTERM, 7), (signal.SIGINT, 8), (signal.SIGHUP, 9),
                      (signal.SIGUSR1, 10)):
        name = signal.Signals(sig).name[3:]
        p = run([args.hcguard, "run", "--mode", "off", "sh", "-c",
                 "trap 'exit %d' %s; kill -%s $PPID; sleep 5 & wait" % (code, name, name)],
                env=env)
        expect_eq(p.returncode, code, "%s forwarded to the program" % name, p)
    # Death by a signal hcguard run did not see: it dies of it too.
    p = run([args.hcguard, "run", "--mode", "off", "sh", "-c", "kill -KILL $$"], env=env)
    expect_eq(p.returncode, -signal.SIGKILL, "death by SIGKILL", p)
    left = [f for f in os.listdir(tmp) if f.startswith("hcguard-flight-")]
    p = run([args.hcguard, "run", "--mode", "off", "true"], env=dict(env, TMPDIR=tmp))
    expect_eq(p.returncode, 0, "exit status with TMPDIR", p)
    left = [f for f in os.listdir(tmp) if f.startswith("hcguard-flight-")]
    expect_eq(left, [], "flight recorder files left in TMPDIR")


# A program that exits 7 if it was started with SIGCHLD ignored, 3 if not.
SIGCHLD_PROBE = """
import sys
ign = [l for l in open("/proc/self/status") if l.startswith("SigIgn:")][0]
sys.exit(7 if int(ign.split()[1], 16) & (1 << (%d - 1)) else 3)
""" % signal.SIGCHLD


@case
def case_sigchld_ignored(args, tmp):
    """Started with SIGCHLD ignored (inherited across exec from a daemon or
    a job runner), the launcher still learns how the program ended (it
    waited for ever: the kernel reaped the child and sent no SIGCHLD), and
    the program still starts with SIGCHLD ignored, as without hcguard."""
    def ignore_sigchld():
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    argv = [args.hcguard, "run", "--mode", "off", sys.executable, "-c", SIGCHLD_PROBE]
    p = subprocess.run(argv, env=dummy_env(args), capture_output=True, text=True,
                       timeout=20, preexec_fn=ignore_sigchld)
    expect_eq(p.returncode, 7, "exit status, SIGCHLD ignored (3: not ignored in the program)",
              p)
    expect_eq(p.stderr, "", "stderr, SIGCHLD ignored", p)
    p = run(argv, env=dummy_env(args))
    expect_eq(p.returncode, 3, "exit status, SIGCHLD at its default", p)


@case
def case_child_lost(args, tmp):
    """waitpid failing (ECHILD: something else reaped the program) is said
    as it is, exit 125, never taken for a death by a signal (a wait status
    of -1 read as 'signal 127')."""
    env = dummy_env(args)
    env["LD_PRELOAD"] = ":".join(x for x in (args.sanitizer_runtime, args.lose_child) if x)
    if args.sanitizer_runtime:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    p = run([args.hcguard, "run", "--mode", "off", "sh", "-c", "exit 7"], env=env)
    expect_eq(p.returncode, 125, "exit status when the program's end is unknown", p)
    expect(re.fullmatch(r"hcguard: lost track of 'sh' \(pid [0-9]+\): No child processes; "
                        r"its exit status is unknown\n", p.stderr),
           "the message when waitpid fails", p)


# ---- where the library is found -----------------------------------------

def expect_layout(args, exe, lib, hook):
    p, seen = child_env(args, ["--mode", "off"], clean_env(), exe)
    expect_eq(p.returncode, 0, "exit status via %s" % exe, p)
    expect_eq(seen.get("LD_PRELOAD"), preload_path(lib), "LD_PRELOAD via %s" % exe, p)
    expect_eq(seen.get("PYTHONPATH"), real(hook), "PYTHONPATH via %s" % exe, p)
    expect_eq(p.stderr, "", "stderr", p)


def make_prefix(args, tmp, with_python=True):
    prefix = os.path.join(tmp, "prefix")
    for d in ("bin", "lib", "share/hcguard/python"):
        os.makedirs(os.path.join(prefix, d))
    shutil.copy(args.hcguard, os.path.join(prefix, "bin", "hcguard"))
    shutil.copy(args.dummy, os.path.join(prefix, "lib", "libhcguard.so"))
    if not with_python:
        os.rmdir(os.path.join(prefix, "share/hcguard/python"))
    return prefix


@case
def case_found_beside_executable(args, tmp):
    prefix = make_prefix(args, tmp)
    os.makedirs(os.path.join(tmp, "elsewhere"))
    link = os.path.join(tmp, "elsewhere", "hcguard")
    os.symlink(os.path.join(prefix, "bin", "hcguard"), link)
    for exe in (os.path.join(prefix, "bin", "hcguard"), link):
        expect_layout(args, exe, os.path.join(prefix, "lib", "libhcguard.so"),
                      os.path.join(prefix, "share/hcguard/python"))


@case
def case_found_without_python_hook(args, tmp):
    prefix = make_prefix(args, tmp, with_python=False)
    p, seen = child_env(args, ["--mode", "off"], clean_env(PYTHONPATH="/a"),
                        os.path.join(prefix, "bin", "hcguard"))
    expect_eq(p.returncode, 0, "exit status", p)
    expect_eq(seen.get("PYTHONPATH"), "/a", "PYTHONPATH left alone", p)
    expect_eq(p.stderr, "", "stderr", p)


@case
def case_library_missing_beside_executable(args, tmp):
    prefix = make_prefix(args, tmp)
    lib = os.path.join(real(prefix), "lib", "libhcguard.so")
    os.unlink(lib)
    p = run([os.path.join(prefix, "bin", "hcguard"), "run", "--mode", "off",
             "true"], env=clean_env())
    expect_eq(p.returncode, 125, "exit status", p)
    expect_eq(p.stderr, "hcguard: cannot use the library '%s': No such "
              "file or directory (is hcguard fully installed? HCGUARD_LIBRARY "
              "names another copy)\n" % lib, "message", p)


@case
def case_build_tree_layout(args, tmp):
    expect_eq(real(os.path.dirname(args.hcguard)),
              real(os.path.join(args.build_dir, "bin")), "launcher dir")
    expect_layout(args, args.hcguard, args.library, args.hook_dir)


@case
def case_installed_layout(args, tmp):
    prefix = os.path.join(tmp, "inst")
    p = run([args.cmake, "--install", args.build_dir, "--prefix", prefix],
            timeout=120)
    expect_eq(p.returncode, 0, "cmake --install", p)
    for path in ("bin/hcguard", "lib/libhcguard.so",
                 "share/hcguard/python/sitecustomize.py",
                 "share/hcguard/python/_hcguard_register.py"):
        expect(os.path.isfile(os.path.join(prefix, path)),
               "not installed: %s" % path)
    mode = os.stat(os.path.join(prefix, "bin/hcguard")).st_mode
    expect(mode & stat.S_IXUSR, "bin/hcguard not executable")
    expect_layout(args, os.path.join(prefix, "bin", "hcguard"),
                  os.path.join(prefix, "lib", "libhcguard.so"),
                  os.path.join(prefix, "share", "hcguard", "python"))


@case
def case_real_library_passive(args, tmp):
    """The real libhcguard.so under --mode off --no-summary: the program
    runs as it would alone. A sanitizer-built library needs its runtime
    first (the launcher keeps it there); the uninstrumented program's own
    leaks are not ours to report."""
    env = clean_env()
    if args.sanitizer_runtime:
        env.update(LD_PRELOAD=args.sanitizer_runtime,
                   ASAN_OPTIONS="detect_leaks=0")
    p = run([args.hcguard, "run", "--mode", "off", "--no-summary", "sh", "-c",
             'printf "%s" "$LD_PRELOAD"; exit 3'], env=env)
    want = preload_path(args.library)
    if args.sanitizer_runtime:
        want = args.sanitizer_runtime + ":" + want
    expect_eq(p.returncode, 3, "exit status under the real library", p)
    expect_eq(p.stdout, want, "LD_PRELOAD", p)
    expect_eq(p.stderr, "", "stderr under --mode off --no-summary", p)


if __name__ == "__main__":
    sys.exit(main())
