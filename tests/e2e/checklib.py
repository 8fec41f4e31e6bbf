"""What the end-to-end checkers (tests/e2e/check_*.py, tests/gpu/
check_gpu_trace.py) share, written once:

- the cases of a case-per-test checker (check_callsite.py, check_hostile.py,
  check_rtsite.py; each case one CTest test e2e_SUITE_CASE): the table and
  its @case decorator, Failed and Skipped, expect(), the options (--list,
  --case, --prog, --preload, --fake-dir, more by name, --gpu) and main;
- a program run under the preloaded library on the test driver;
- for the checkers given their arguments in order (check_die.py, ...): the
  skip without a GPU, the command's environment (HCG_CHILD_PRELOAD as its
  LD_PRELOAD), output files removed before a run, the verdict;
- a command run with one of hcguard's output files named by an environment
  variable, and its counts held to KEY=N expectations (check_log.py,
  check_trace.py).
"""
import argparse
import glob
import os
import subprocess
import tempfile

# How much of a program's output a failed expect() shows: its end.
OUTPUT_TAIL = 8000
# What an MPI launcher sets to give a process its rank (hcguard's prefix
# names it): none of it from the caller's environment.
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK",
             "SLURM_PROCID")


class Failed(Exception):
    """A check of a case failed: exit 1."""


class Skipped(Exception):
    """The case does not apply here: its message said, exit 77."""


class Cases(dict):
    """A checker's cases by name, in the order written; the table is also
    the decorator that adds one (CASES = Cases(); case = CASES; @case)."""

    def __call__(self, fn):
        self[fn.__name__] = fn
        return fn


def expect(cond, what, out=""):
    """Fails the case with what, and the end of the output out, unless cond."""
    if not cond:
        raise Failed(f"{what}\n--- output ---\n{out[-OUTPUT_TAIL:]}")


def no_gpu():
    """True where there is no GPU or no CUDA driver (nvidia-smi -L fails)."""
    return subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode != 0


def skip_no_gpu(required):
    """True, said, where a GPU is required and there is none: the checker
    then exits 77."""
    if required and no_gpu():
        print("SKIP: no GPU or no CUDA driver on this machine")
        return True
    return False


# ---- case-per-test checkers -------------------------------------------------

def case_args(*options, gpu=False):
    """The options of a case-per-test checker: --list, --case NAME, --prog,
    --preload LIB, --fake-dir DIR (the test driver's folder) and each of
    options (--sanitize is "" when not given); --gpu (on the real driver,
    skipping without one) where gpu, else args.gpu is False."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true")
    for a in ("--case", "--prog", "--preload", "--fake-dir") + options:
        ap.add_argument(a, default="" if a == "--sanitize" else None)
    if gpu:
        ap.add_argument("--gpu", action="store_true", help="on the real driver (skip without one)")
    else:
        ap.set_defaults(gpu=False)
    return ap.parse_args()


def run_case(suite, cases, args, tmp_prefix=None):
    """--list: prints the case names. Else runs the case args.case (given
    a fresh temporary folder too where tmp_prefix names one) and says
    e2e_SUITE_CASE: passed, or FAILED and why. Returns the exit status: 0,
    1, or 77 (the case skipped, or --gpu without a GPU)."""
    if args.list:
        print("\n".join(cases))
        return 0
    if skip_no_gpu(args.gpu):
        return 77
    name = f"e2e_{suite}_{args.case}"
    try:
        if tmp_prefix:
            with tempfile.TemporaryDirectory(prefix=tmp_prefix) as tmp:
                cases[args.case](args, tmp)
        else:
            cases[args.case](args)
    except Failed as e:
        print(f"{name}: FAILED: {e}")
        return 1
    except subprocess.TimeoutExpired:
        print(f"{name}: FAILED: the program hung")
        return 1
    except Skipped as e:
        print(e)
        return 77
    print(f"{name}: passed")
    return 0


def preload_env(args, extra=None):
    """The environment of a program under the preloaded library
    (args.preload) on the test driver (args.fake_dir; with --gpu the real
    driver): none of the caller's HCGUARD_* settings or MPI rank, host
    functions slow only past 10 s (not what these checks are about), then
    extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HCGUARD_") and k not in RANK_VARS}
    env["LD_PRELOAD"] = args.preload
    if not args.gpu:
        env["LD_LIBRARY_PATH"] = args.fake_dir
    env["HCGUARD_SLOW_MS"] = "10000"
    env.update(extra or {})
    return env


def run_preloaded(args, argv, extra=None, prog=None, timeout=60):
    """Runs prog (args.prog) with argv in preload_env(args, extra), started
    from here, not from a preloaded shell: (exit status, stdout, stderr)."""
    p = subprocess.run([prog or args.prog] + argv, env=preload_env(args, extra),
                       capture_output=True, text=True, timeout=timeout, errors="replace")
    return p.returncode, p.stdout, p.stderr


# ---- checkers given their arguments in order ------------------------------

def child_env(*libs):
    """This process's environment for a command: HCG_CHILD_PRELOAD (a
    sanitizer's runtime, which must come first) then libs become its
    LD_PRELOAD; an inherited LD_PRELOAD stays where both are empty. The
    preload is for the command only, never this interpreter or a shell."""
    env = dict(os.environ)
    preload = [p for p in env.pop("HCG_CHILD_PRELOAD", "").split(":") + list(libs) if p]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    return env


def fresh(*paths):
    """Makes each path's folder and removes the path, so that what a check
    reads was written by this run."""
    for path in paths:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)


def verdict(who, bad, tag=None):
    """Says each failed check of bad, then "WHO [TAG]: passed" or failed;
    returns the exit status, 1 if any failed, else 0."""
    for b in bad:
        print(f"{who}: {b}")
    print(f"{who}{' ' + tag if tag else ''}: {'failed' if bad else 'passed'}")
    return 1 if bad else 0


# ---- output files named by a variable (check_log.py, check_trace.py) ------

def run_sink(argv, var, prefix, suffix, who, many=False):
    """argv: DIR [--one-file] EXPECT... -- CMD ARGS... Runs CMD with var set
    to DIR/prefix-%p.suffix (DIR/prefix-all.suffix with --one-file), in
    child_env(). Returns (rc, path, expects); rc 77 is not applicable, and
    path is None (said why) unless there is exactly one such file. many:
    the command may write several (%p); path is None."""
    if "--" not in argv[2:]:
        raise SystemExit(f"usage: {who}.py DIR [--one-file] EXPECT... -- CMD ARGS...")
    sep = argv.index("--", 2)
    where, expects, cmd = argv[1], argv[2:sep], argv[sep + 1:]
    name = f"{prefix}-%p.{suffix}"
    if expects and expects[0] == "--one-file":
        name, expects = f"{prefix}-all.{suffix}", expects[1:]
    os.makedirs(where, exist_ok=True)
    for old in glob.glob(os.path.join(where, f"*.{suffix}")):
        os.unlink(old)
    env = child_env()
    env[var] = os.path.join(where, name)
    rc = subprocess.call(cmd, env=env)
    if many:
        return rc, None, expects
    found = glob.glob(os.path.join(where, f"{prefix}-*.{suffix}"))
    if rc != 77 and len(found) != 1:
        print(f"{who}: want one file in {where}, found {found}")
        return rc, None, expects
    return rc, found[0] if found else None, expects


def count_verdict(bad, counts, expects, rc, events, who):
    """The exit status: 1 if any check failed (bad), counts miss a KEY=N
    expectation or the command failed (rc), each said; else 0."""
    for e in expects:
        key, want = e.rsplit("=", 1)
        if counts[key] != int(want):
            print(f"{who}: {key}: {counts[key]} events, want {want}")
            bad += 1
    print(f"{who}: {events} events, {dict(counts)}")
    if rc != 0:
        print(f"{who}: the command exited {rc}")
        bad += 1
    return 1 if bad else 0
