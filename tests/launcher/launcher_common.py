"""What the launcher's and the package's test scripts share: arguments, a
hermetic environment, running a command, and the case registry."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

CASES = {}


def case(fn):
    CASES[fn.__name__[len("case_"):]] = fn
    return fn


class Failure(Exception):
    pass


class Skip(Exception):
    """Not applicable here (a tool is missing): exit 77, "SKIP: why"."""


def expect(cond, what, proc=None):
    if cond:
        return
    if proc is not None:
        what += "\n  command: %s\n  exit status: %r\n  stdout: %r\n  stderr: %r" % (
            " ".join(map(str, proc.args)), proc.returncode, proc.stdout, proc.stderr)
    raise Failure(what)


def expect_eq(got, want, what, proc=None):
    expect(got == want, "%s: got %r, want %r" % (what, got, want), proc)


def clean_env(drop=(), **extra):
    """The caller's environment without anything hcguard reads or sets, nor
    the variables named in drop; then extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HCGUARD_")
           and k not in ("LD_PRELOAD", "PYTHONPATH", "PYTHONSTARTUP") + tuple(drop)}
    env.update(extra)
    return env


def run(argv, env=None, cwd=None, timeout=30):
    return subprocess.run(argv, env=clean_env() if env is None else env,
                          cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


LAUNCHER_ARGS = ("hcguard", "library", "dummy", "stub", "lose-child", "printenv", "hook-dir",
                 "build-dir", "cmake", "version", "sanitizer-runtime",
                 "fakecuda-dir", "pymod-stripped", "bindings-module")


def parse_args(names):
    p = argparse.ArgumentParser()
    p.add_argument("--list", action="store_true")
    p.add_argument("--case")
    for name in names:
        p.add_argument("--" + name, default="")
    return p.parse_args()


def main(arg_names=LAUNCHER_ARGS, prefix="hcg-launcher-"):
    """Runs the registered cases (--case NAME: that one), each in a fresh
    temporary directory; exit 1 if any failed, 77 if the one asked for was
    skipped."""
    args = parse_args(arg_names)
    if args.list:
        print("\n".join(CASES))
        return 0
    names = [args.case] if args.case else list(CASES)
    failed = skipped = 0
    for name in names:
        if name not in CASES:
            print("no such case: %s" % name, file=sys.stderr)
            return 2
        tmp = tempfile.mkdtemp(prefix=prefix)
        try:
            CASES[name](args, tmp)
            print("ok   %s" % name)
        except Skip as exc:
            skipped += 1
            print("SKIP: %s: %s" % (name, exc))
        except Failure as exc:
            failed += 1
            print("FAIL %s: %s" % (name, exc))
        except Exception:
            failed += 1
            print("FAIL %s: %s" % (name, traceback.format_exc()))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        return 1
    return 77 if skipped and len(names) == 1 else 0
