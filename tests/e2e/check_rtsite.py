"""Run-time findings of launches made through a CUDA runtime name the
program's function, on stderr and as `caller` in the log; each case one
CTest test (e2e_rtsite_<case>).

  check_rtsite.py --list
  check_rtsite.py --case NAME --prog hc_rtsite --runtime libcudart.so.99
                  --preload LIBHCGUARD --fake-dir DIR

hc_rtsite (tests/e2e/hc_rtsite.c) runs under the preloaded library on the
test driver and calls the stand-in runtime (fake_cudart.c, built as
libcudart.so.99) from static functions named site_*; every run-time
finding must name one of those (from the executable's .symtab), never the
runtime's own functions.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from checklib import (Cases, Skipped, case_args, expect, preload_env, run_case,
                      run_preloaded)

CASES = Cases()
case = CASES
PROG = "hc_rtsite"


def run(args, argv, extra):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        rc, stdout, stderr = run_preloaded(args, argv, dict({"HCGUARD_LOG": log}, **extra),
                                           timeout=120)
        records = []
        if os.path.exists(log):
            with open(log) as f:
                records = [json.loads(line) for line in f if line.strip()]
    if rc == 77:
        raise Skipped(stdout.strip())
    scenario = argv[0]
    expect(rc == 0 and f"rtsite {scenario}: passed" in stdout, f"exit status {rc}",
           stdout + stderr)
    return stderr, records


# A summary line of one merged group: count, function, how, where.
GROUP = re.compile(r"^==hcguard== +(\d+)  (?:\S+ in )?0x[0-9a-f]+ (\S+) \(in [^)]+\), "
                   r"(enqueued at|host node made at|called from) (\S+) \(in ([^)]+)\)", re.M)


def groups(err, how):
    """{function name: count} of the summary's groups listed with how."""
    got = {}
    for count, fn, h, where, obj in GROUP.findall(err):
        if h != how:
            continue
        # a compiler's clone of the function is the function
        name = re.sub(r"\.(isra|constprop|part)\.\d+$", "", where.split("+")[0])
        key = name if obj == PROG else f"{name} (in {obj})"
        got[key] = got.get(key, 0) + int(count)
    return got


def no_runtime(err, records):
    """The runtime's own code is named nowhere."""
    expect("(in libcudart" not in err, "the runtime named on stderr", err)
    for r in records:
        expect("libcudart" not in r.get("caller", ""), f"the runtime named in the log: {r}", err)


# A log record's caller: a function (a compiler's clone of it is it) and its object.
CALLER = re.compile(r"(\w+)(?:\.\w+\.\d+)?\+0x[0-9a-f]+ \(in (.*)\)$")


def caller_of(r):
    """(function, object) the record's caller names; (the caller as
    written, None) where it names no function."""
    m = CALLER.match(r.get("caller", ""))
    return (m.group(1), m.group(2)) if m else (r.get("caller"), None)


def callers(records, event, finding=None):
    """{function name: count} of the log's callers of event records."""
    got = {}
    for r in records:
        if r.get("event") != event or (finding and r.get("finding") != finding):
            continue
        if event == "run" and "caller" not in r:
            continue
        fn, obj = caller_of(r)
        key = fn if obj and os.path.basename(obj) == PROG else r.get("caller")
        got[key] = got.get(key, 0) + 1
    return got


def audit_skips(args, argv, want, what):
    """The skips of argv in audit mode, {site: count} as want both in the
    summary's groups (what: how they are told apart) and in the log; the
    runtime named nowhere."""
    err, log = run(args, argv, {"HCGUARD_MODE": "audit"})
    expect(groups(err, "enqueued at") == want, f"{what}: {groups(err, 'enqueued at')}", err)
    expect(callers(log, "skip") == want, f"the log: {callers(log, 'skip')}", err)
    no_runtime(err, log)


@case
def skip(args):
    err, log = run(args, ["skip", args.runtime], {"HCGUARD_MODE": "audit"})
    want = {"site_entry_a": 6, "site_entry_b": 4, "site_alloca_small": 4, "site_alloca_big": 4,
            "site_direct": 2}
    expect(groups(err, "enqueued at") == want,
           f"skips by enqueue site: {groups(err, 'enqueued at')}, want {want}", err)
    expect("bad records reported at enqueue" not in err, "good at enqueue", err)
    expect(callers(log, "skip") == want, f"the log's skips: {callers(log, 'skip')}", err)
    expect(re.search(r"^==hcguard==     enqueued at site_entry_b\+0x[0-9a-f]+ \(in "
                     + re.escape(PROG) + r"\)$", err, re.M),
           "the skip's own message names the site", err)
    no_runtime(err, log)


@case
def slow(args):
    err, log = run(args, ["slow", args.runtime], {"HCGUARD_SLOW_MS": "5"})
    want = {"site_slow_rt": 1, "site_slow_cb": 1, "site_slow_direct": 1}
    expect(groups(err, "enqueued at") == want, f"slow by site: {groups(err, 'enqueued at')}",
           err)
    expect(callers(log, "finding", "slow-host-fn") == want,
           f"the log's slow findings: {callers(log, 'finding', 'slow-host-fn')}", err)
    expect(callers(log, "run") == want, f"the log's slow runs: {callers(log, 'run')}", err)
    no_runtime(err, log)


@case
def cudacall(args):
    err, log = run(args, ["cudacall", args.runtime], {})
    expect(re.search(r"^==hcguard==     the host function was enqueued at site_cudacall\+0x"
                     r"[0-9a-f]+ \(in hc_rtsite\)$", err, re.M), "the finding's site", err)
    expect(groups(err, "enqueued at") == {"site_cudacall": 1},
           f"the summary: {groups(err, 'enqueued at')}", err)
    expect(callers(log, "finding", "cuda-call-in-host-fn") == {"site_cudacall": 1},
           f"the log: {callers(log, 'finding', 'cuda-call-in-host-fn')}", err)
    no_runtime(err, log)


@case
def graph(args):
    err, log = run(args, ["graph", args.runtime], {"HCGUARD_SLOW_MS": "5"})
    want = {"site_node_direct": 1, "site_node_rt": 1, "site_node_set": 1, "site_node_generic": 1,
            "site_exec_set": 1, "site_captured": 1}
    expect(groups(err, "host node made at") == want,
           f"slow nodes by where they were made: {groups(err, 'host node made at')}", err)
    expect(callers(log, "finding", "slow-host-fn") == want,
           f"the log: {callers(log, 'finding', 'slow-host-fn')}", err)
    expect(re.search(r"^==hcguard==     host node made at site_node_\w+\+0x[0-9a-f]+ "
                     r"\(in hc_rtsite\)$", err, re.M), "the finding's own message", err)
    no_runtime(err, log)


@case
def hang(args):
    err, log = run(args, ["hang", args.runtime], {"HCGUARD_HANG_S": "0.2"})
    expect(re.search(r"WARNING: hung-host-fn: host function 0x[0-9a-f]+ sleep_500ms", err),
           "the hung function", err)
    expect(re.search(r"^==hcguard==     enqueued at site_hang\+0x[0-9a-f]+ \(in hc_rtsite\)$",
                     err, re.M), "its enqueue site", err)
    expect(callers(log, "finding", "hung-host-fn") == {"site_hang": 1},
           f"the log: {callers(log, 'finding', 'hung-host-fn')}", err)
    no_runtime(err, log)


def late_case(args, how):
    err, log = run(args, ["late", args.runtime] + ([how] if how else []), {"HCGUARD_SLOW_MS": "5"})
    expect(groups(err, "enqueued at") == {"site_late": 2},
           f"found after start-up ({how or 'as libcudart'}): {groups(err, 'enqueued at')}", err)
    no_runtime(err, log)


@case
def late(args):
    late_case(args, None)


@case
def late_dlsym(args):
    late_case(args, "dlsym")


@case
def late_gpa(args):
    late_case(args, "given")


@case
def threads(args):
    audit_skips(args, ["threads", args.runtime], {"site_thread_a": 50, "site_thread_b": 50},
                "per thread")


@case
def sizes(args):
    # A frame of another size every launch: a new slot each time. The first
    # ones are learned and named; once 64 unwinds for the runtime's return
    # address taught nothing that could be kept, the rest name the runtime's
    # launcher (the documented limit), never another function.
    n = 100
    err, log = run(args, ["sizes", args.runtime, str(n)], {"HCGUARD_MODE": "audit"})
    got = groups(err, "enqueued at")
    named = got.get("site_sizes", 0)
    rest = {k: v for k, v in got.items() if k != "site_sizes"}
    expect(named >= 64, f"at least 64 named by the program's function: {got}", err)
    expect(all(re.fullmatch(r"launcher \(in libcudart\.so\.99\)", k) for k in rest),
           f"the others name the runtime's launcher: {got}", err)
    expect(named + sum(rest.values()) == n, f"{n} skips: {got}", err)


@case
def unwinds(args):
    # The stack is unwound once per path through the runtime and call site
    # (and per thread), not at every launch: 18 launches through the
    # runtime on 4 paths, then 100 from 2 threads on 2 paths. HCGUARD_DEBUG
    # says each unwind (and takes the general launch path: named the same).
    for scenario, launches, most in (("skip", 18, 4), ("threads", 100, 2)):
        err, log = run(args, [scenario, args.runtime], {"HCGUARD_MODE": "audit",
                                                         "HCGUARD_DEBUG": "1"})
        n = len(re.findall(r"call site: stack unwound above 0x[0-9a-f]+ \(in the CUDA "
                           r"libraries\): the program's frame 0x", err))
        expect(1 <= n <= most, f"{scenario}: {n} unwinds for {launches} launches, want at "
               f"most {most}", err)
        expect(all(k.startswith("site_") for k in groups(err, "enqueued at")),
               f"{scenario}: named {groups(err, 'enqueued at')}", err)
        no_runtime(err, log)


@case
def fibers(args):
    audit_skips(args, ["fibers", args.runtime], {"site_fiber": 3, "site_main_stack": 3},
                "by stack")


@case
def altstack(args):
    # A distance learned through a 12 KiB frame on the thread's stack lies in
    # the inaccessible region above a small alternate signal stack: never
    # read there (the process lives), and every launch named by its own
    # function (a handler's on either stack too).
    audit_skips(args, ["altstack", args.runtime],
                {"site_deep_main": 6, "site_main_a": 3, "site_sig_alt": 6, "site_sig_own": 3},
                "by stack")


@case
def fiberguard(args):
    audit_skips(args, ["fiberguard", args.runtime],
                {"site_deep_main": 8, "site_guarded_fiber": 8}, "by stack")


@case
def smallstacks(args):
    audit_skips(args, ["smallstacks", args.runtime],
                {"site_deep_main": 1, "site_small_deep": 2, "site_small_shallow": 2,
                 "site_small_alloca": 2}, "by thread")


@case
def forks(args):
    # The children finish (no lock left held by a learn at the fork); the
    # watchdog in the program turns a hang into a dump and a failure.
    err, log = run(args, ["forks", args.runtime], {})
    expect("watchdog" not in err, "a hang", err)


@case
def stale(args):
    # Each skip names its own launch's function (told apart by the record,
    # the log's user data) or the runtime's launcher, never the other one.
    err, log = run(args, ["stale", args.runtime], {"HCGUARD_MODE": "audit"})
    out = err
    per = {}
    for r in log:
        if r.get("event") != "skip":
            continue
        who = caller_of(r)[0]
        key = (r.get("user_data"), who)
        per[key] = per.get(key, 0) + 1
    users = sorted({u for u, _ in per})
    expect(len(users) == 2, f"two records: {per}", out)
    wrong = {}
    for u in users:
        named = {w: c for (uu, w), c in per.items() if uu == u and w != "launcher"}
        expect(len(named) == 1, f"record {u} named by more than one function: {named}", out)
        wrong.update(named)
    expect(set(wrong) == {"site_stale_p", "site_stale_q"}, f"each its own: {per}", out)
    expect(sum(per.values()) == 6 * 512, f"{6 * 512} skips: {per}", out)


@case
def race(args):
    # Four threads learning at once: each launch named by its own function
    # (told by its record, which one thread and one function use) or the
    # runtime's launcher, never another.
    env = {"HCGUARD_MODE": "audit"}
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([args.prog, "race", args.runtime],
                           env=preload_env(args, {"HCGUARD_LOG": os.path.join(d, "log.jsonl"),
                                                  **env}),
                           capture_output=True, text=True, timeout=120, errors="replace")
        out = p.stdout + p.stderr
        expect(p.returncode == 0 and "rtsite race: passed" in p.stdout,
               f"exit status {p.returncode}", out)
        with open(os.path.join(d, "log.jsonl")) as f:
            log = [json.loads(line) for line in f if line.strip()]
    owner = dict(re.findall(r"^record (0x[0-9a-f]+) (site_race_\w)$", p.stdout, re.M))
    expect(len(owner) == 12, f"12 records: {owner}", out)
    named = {}
    for r in log:
        if r.get("event") != "skip":
            continue
        who = caller_of(r)[0]
        want = owner.get(r.get("user_data"))
        ok = (want, "launcher")
        if "names: any of the three" in p.stdout:  # see hc_rtsite.c, s_race
            ok = ("site_race_a", "site_race_b", "site_race_n", "launcher")
        expect(want and who in ok, f"record of {want} named {r.get('caller')}", out)
        named[who] = named.get(who, 0) + 1
        if who not in (want, "launcher"):
            named["(another racer's)"] = named.get("(another racer's)", 0) + 1
    print(f"race: names {named}")
    expect(sum(v for k, v in named.items() if not k.startswith("(")) == 4 * 3 * 40,
           f"{4 * 3 * 40} skips: {named}", out)
    # the first launches, at least, are learned and named
    expect(sum(v for k, v in named.items() if k != "launcher") >= 4, f"named: {named}", out)


@case
def two_runtimes(args):
    # libcudart.so.98 is built beside the .99 (tests/e2e/CMakeLists.txt).
    rt98 = os.path.join(os.path.dirname(args.runtime), "libcudart.so.98")
    audit_skips(args, ["two", args.runtime, rt98],
                {"site_two_first": 6, "site_two_second": 6, "site_two_again": 6}, "by site")


def main():
    args = case_args("--runtime")
    global PROG  # the program's name in the findings (hc_rtsite, hc_rtsite_bare)
    if args.prog:
        PROG = os.path.basename(args.prog)
    return run_case("rtsite", CASES, args)


if __name__ == "__main__":
    sys.exit(main())
