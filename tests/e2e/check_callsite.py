"""Call sites, merged findings, errors and warnings, and the message
prefix, each case one CTest test (e2e_callsite_<case>).

  check_callsite.py --list
  check_callsite.py --case NAME --prog hc_callsite --audit hc_audit --lib LIB
                    --preload LIBHCGUARD --fake-dir DIR --launcher HCGUARD

The programs run under the preloaded library on the test driver, started
from here (not from a preloaded shell), so that they are the first process
running hcguard: their prefix is "==hcguard== " until they fork.
"""
import os
import re
import subprocess
import sys

from checklib import Cases, case_args, expect, preload_env, run_case, run_preloaded as run

CASES = Cases()
case = CASES
P = "==hcguard== "


def rejected(err):
    return err.count("ERROR: bad host-copy record rejected")


GROUP = r"^==hcguard== +(\d+)  0x[0-9a-f]+ hcguard_host_copy \(in libhcguard\.so[.0-9]*\), called from (\S+) \(in (\S+)\)$"


@case
def three_sites(args):
    rc, out, err = run(args, ["sites"])
    expect(rc == 0 and "callsite sites: passed" in out, f"exit status {rc}", out + err)
    expect(rejected(err) == 3, "one message per call site", err)
    sites = re.findall(r"^==hcguard==     called from (three_sites\+0x[0-9a-f]+) \(in hc_callsite\)$",
                       err, re.M)
    expect(len(set(sites)) == 3, f"3 distinct call sites in three_sites: {sites}", err)
    groups = re.findall(GROUP, err, re.M)
    expect(len(groups) == 3 and all(g[0] == "1" and g[1].startswith("three_sites+") and
                                    g[2] == "hc_callsite" for g in groups),
           f"3 groups of 1 in the summary: {groups}", err)
    expect("ERROR SUMMARY: 3 errors" in err, "3 errors", err)


@case
def flood(args):
    rc, out, err = run(args, ["flood", "10000"], {"HCGUARD_PRINT_LIMIT": "2"})
    expect(rc == 0 and "callsite flood: passed" in out, f"exit status {rc}", out + err)
    expect(rejected(err) == 2, f"{rejected(err)} printed, want 2 (the print limit)", err)
    groups = re.findall(GROUP, err, re.M)
    counts = sorted(int(g[0]) for g in groups)
    expect(counts == [1, 1, 1, 10000], f"every group listed with its count: {groups}", err)
    expect([g[1].split("+")[0] for g in groups].count("flood_site") == 1, "flood_site once", err)
    expect("bad records rejected at enqueue: 10003" in err, "all counted", err)
    expect("findings not printed (print limit 2): 2" in err, "the 2 groups not printed", err)
    expect("more not printed" not in err and "not listed" not in err, "no line left out", err)
    expect("ERROR SUMMARY: 10003 errors" in err, "10003 errors", err)


@case
def backtrace(args):
    rc, out, err = run(args, ["sites"], {"HCGUARD_BACKTRACE": "2"})
    expect(rc == 0, f"exit status {rc}", out + err)
    expect(len(re.findall(r"^==hcguard==         #0 three_sites\+0x[0-9a-f]+ \(in hc_callsite\)$",
                          err, re.M)) == 3, "frame 0: the caller", err)
    expect(len(re.findall(r"^==hcguard==         #1 s_sites\+0x[0-9a-f]+ \(in hc_callsite\)$",
                          err, re.M)) == 3, "frame 1: the scenario's function", err)
    expect(not re.search(r"#2 ", err), "at most 2 frames", err)
    rc, out, err = run(args, ["sites"], {"HCGUARD_BACKTRACE": "65"})
    expect("HCGUARD_BACKTRACE='65' is not a number of frames from 0 to 64" in err, "65 refused",
           err)


@case
def dlopen_library(args):
    rc, out, err = run(args, ["dlopen", args.lib])
    expect(rc == 0 and "callsite dlopen: passed" in out, f"exit status {rc}", out + err)
    lib = os.path.basename(args.lib)
    expect(re.search(r"^==hcguard==     called from site_in_library\+0x[0-9a-f]+ \(in "
                     + re.escape(lib) + r"\)$", err, re.M),
           "the library's static function named from its .symtab", err)


def two_summaries(err, child=True):
    """The child's summary (3 errors: its own, where child) and the
    parent's (2 errors), each with its pid."""
    if child:
        expect(re.search(r"^==hcguard== \[pid \d+\] ERROR SUMMARY: 3 errors$", err, re.M),
               "the child's summary", err)
    expect(re.search(r"^==hcguard== \[pid \d+\] ERROR SUMMARY: 2 errors$", err, re.M),
           "the parent's summary", err)


@case
def fork_prefix(args):
    # ThreadSanitizer cannot follow the collector a busy child starts after
    # a multi-threaded fork: there the child stays quiet, and the parent's
    # lines after the fork are checked alone
    quiet = "thread" in (args.sanitize or "")
    rc, out, err = run(args, ["fork"] + (["quiet"] if quiet else []))
    expect(rc == 0 and "callsite fork: passed" in out, f"exit status {rc}", out + err)
    lines = err.splitlines()
    first = next(i for i, l in enumerate(lines) if "ERROR: bad host-copy record" in l)
    expect(lines[first].startswith(P + "ERROR:"), "before the fork: no pid", err)
    pids = set(re.findall(r"^==hcguard== \[pid (\d+)\] ", err, re.M))
    expect(len(pids) == (1 if quiet else 2), f"after the fork: the processes' pids ({pids})", err)
    expect(all(l.startswith(P + "[pid ") for l in lines[first + 6:] if l.startswith(P)),
           "every line after the fork has a pid", err)
    two_summaries(err, child=not quiet)


@case
def spawn_prefix(args):
    rc, out, err = run(args, ["spawn"])
    expect(rc == 0 and "callsite spawn: passed" in out, f"exit status {rc}", out + err)
    lines = err.splitlines()
    expect(lines[0] == P + "ERROR: bad host-copy record rejected", "before the spawn: no pid", err)
    pids = set(re.findall(r"^==hcguard== \[pid (\d+)\] ", err, re.M))
    expect(len(pids) == 2, f"the spawned child (marked in its environment) and the parent "
           f"after it: both with their pid ({pids})", err)
    two_summaries(err)


@case
def rank_prefix(args):
    rc, out, err = run(args, ["sites"], {"OMPI_COMM_WORLD_RANK": "3"})
    expect(rc == 0, f"exit status {rc}", out + err)
    lines = [l for l in err.splitlines() if l.startswith("==hcguard==")]
    expect(lines and all(re.match(r"==hcguard== \[pid \d+ rank 3\] ", l) for l in lines),
           "every line with pid and rank", err)


@case
def idle(args):
    rc, out, err = run(args, ["idle"])
    expect(rc == 0, f"exit status {rc}", out + err)
    expect(re.fullmatch(r"==hcguard== hcguard \d+\.\d+\.\d+ active \(pid \d+, mode guard\): "
                        r"no host function was launched\n", err),
           "one line saying hcguard was active", err)
    rc, out, err = run(args, ["idle"], {"HCGUARD_MODE": "off"})
    expect("==hcguard==" not in err, "mode off says nothing", err)
    rc, out, err = run(args, ["idle"], {"HCGUARD_SUMMARY": "0"})
    expect("==hcguard==" not in err, "--no-summary says nothing", err)


@case
def no_finding(args):
    rc, out, err = run(args, ["closure"], {"HCGUARD_NO_FINDING": "closure"}, prog=args.audit)
    expect(rc == 0, f"exit status {rc}", out + err)
    expect("closure-host-fn" not in err and "ERROR SUMMARY: 0 errors" in err,
           "closures not reported", err)
    rc, out, err = run(args, ["closure"], {"HCGUARD_NO_FINDING": " slow-host-fn , closure-host-fn"},
                       prog=args.audit)
    expect("closure-host-fn" not in err, "full names, blanks around them", err)
    rc, out, err = run(args, ["closure"], {"HCGUARD_NO_FINDING": "closure,bogus"},
                       prog=args.audit)
    expect("HCGUARD_NO_FINDING='closure,bogus': 'bogus' is not a finding kind; the kinds are "
           "cuda-call-in-host-fn, libc-function-as-host-fn, closure-host-fn, slow-host-fn, "
           "hung-host-fn, oneshot-host-fn-in-graph" in err, "the unknown kind and the kinds", err)
    p = subprocess.run([args.launcher, "run", "--no-finding", "closure", "--no-finding", "bogus",
                        "true"], capture_output=True, text=True, env=preload_env(args))
    expect(p.returncode == 2 and "'bogus' is not a finding kind" in p.stderr,
           f"the launcher refuses it (exit {p.returncode})", p.stderr)
    p = subprocess.run([args.launcher, "run", "--no-finding", "closure", "--no-finding", "slow",
                        args.audit, "closure"], capture_output=True, text=True,
                       env=preload_env(args))
    expect(p.returncode == 0 and "closure-host-fn" not in p.stderr,
           f"repeated --no-finding (exit {p.returncode})", p.stderr)


@case
def slow_off(args):
    for extra in ({"HCGUARD_SLOW_MS": "0"}, {"HCGUARD_SLOW_MS": "20", "HCGUARD_NO_FINDING": "slow"}):
        rc, out, err = run(args, ["slow"], extra, prog=args.audit)
        expect(rc == 0 and "slow-host-fn" not in err and "ERROR SUMMARY: 0 errors" in err,
               f"{extra}: no slow finding", err)


@case
def hung_not_slow(args):
    rc, out, err = run(args, ["hang"], {"HCGUARD_SLOW_MS": "1", "HCGUARD_HANG_S": "0.2"},
                       prog=args.audit)
    expect(rc == 0, f"exit status {rc}", out + err)
    expect(re.search(r"hung-host-fn +1$", err, re.M), "hung once", err)
    expect(not re.search(r"slow-host-fn .*sleep_500ms", err) and
           not re.search(r"^==hcguard== +\d+  .*sleep_500ms.*total", err, re.M),
           "the hung function is not also slow", err)
    expect(re.search(r"^==hcguard==     enqueued at \w+\+0x[0-9a-f]+ \(in hc_audit\)$", err,
                     re.M), "the hung function's enqueue site", err)


@case
def warnings_exitcode(args):
    rc, out, err = run(args, ["slow"], {"HCGUARD_SLOW_MS": "20", "HCGUARD_ERROR_EXITCODE": "5"},
                       prog=args.audit)
    expect(rc == 0 and "ERROR SUMMARY: 0 errors, 1 warning" in err,
           f"a warning alone leaves the exit status (got {rc})", err)
    rc, out, err = run(args, ["slow"], {"HCGUARD_SLOW_MS": "20", "HCGUARD_ERROR_EXITCODE": "5",
                                        "HCGUARD_WARNINGS_AS_ERRORS": "1"}, prog=args.audit)
    expect(rc == 5, f"--warnings-as-errors: exit status {rc}, want 5", err)


def main():
    return run_case("callsite", CASES, case_args("--audit", "--lib", "--launcher", "--sanitize",
                                                 gpu=True))


if __name__ == "__main__":
    sys.exit(main())
