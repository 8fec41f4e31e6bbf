#!/usr/bin/env python3
"""check_trace_shared.py LAUNCHER LIBHCGUARD HC_FORK DIR: processes of one
program at work at the same time, given one trace named without %p (a
preloaded shell's children, or `hcguard run`'s: torchrun's workers). A
trace is one JSON array: one of them writes it, whole, and each of the
others writes none and says so in its summary. Before, each started it
anew and wrote into it at once: no JSON, while every summary said its
events were written.

hc_fork overlap: OVERLAP_CHILDREN children, forked before hcguard
started, all with their files open at once. And hcguard run, writing a
killed program's last events, writes none into a trace another process
holds (hc_fork die-holding); and a trace named for the log's file is
refused (a tree's log waited for good behind its lock).
"""
import json
import os
import re
import shutil
import subprocess
import sys

from checklib import child_env, verdict

CHILDREN = 4  # hc_fork.c: OVERLAP_CHILDREN
WROTE = re.compile(r"\[pid (\d+)\] trace: (\S+) \((\d+) events\)")
NONE = re.compile(r"\[pid (\d+)\] trace: none for this process: (\S+) is being written by "
                  r"another process")


def check(how, argv, env, trace, bad):
    with open(trace, "w") as f:
        f.write("STALE an earlier run\n")
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        bad.append("%s: exit %d:\n%s" % (how, p.returncode, out[-3000:]))
        return
    wrote = WROTE.findall(out)
    none = NONE.findall(out)
    if len(wrote) != 1 or len(none) != CHILDREN - 1:
        bad.append("%s: %d summaries say they wrote the trace and %d that another process "
                   "writes it; want 1 and %d:\n%s" % (how, len(wrote), len(none), CHILDREN - 1,
                                                      out[-3000:]))
        return
    if any(path != trace for _, path in none) or wrote[0][1] != trace:
        bad.append("%s: the summaries name another file:\n%s" % (how, out[-3000:]))
    try:
        with open(trace) as f:
            events = json.load(f)
    except ValueError as e:
        bad.append("%s: the trace is not JSON: %s" % (how, e))
        return
    pids = {e.get("pid") for e in events}
    if pids != {int(wrote[0][0])}:
        bad.append("%s: the trace holds processes %s, not the writer's alone (%s)"
                   % (how, sorted(pids), wrote[0][0]))
    ran = [e for e in events if e.get("ph") == "X" and e.get("cat") == "host function"]
    if not ran:
        bad.append("%s: no host function's slice in the trace" % how)


def launcher_finds_it_held(launcher, exe, d, bad):
    """hcguard run, writing a killed program's last events, finds the trace
    held by another process (hc_fork die-holding: a child of the program
    keeps its lock): it writes none there, and says so."""
    trace = os.path.join(d, "held.json")
    p = subprocess.run([launcher, "run", "--trace", trace, "--", exe, "die-holding", trace],
                       env=child_env(), capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    said = re.search(r"trace: %s: the program's last \d+ events? not written \(another "
                     r"process writes it now\)" % re.escape(trace), out)
    if p.returncode not in (-9, 137) or not said:
        bad.append("hcguard run, the trace held: exit %d, want death by SIGKILL and the "
                   "program's last events said not written:\n%s" % (p.returncode, out[-3000:]))


def launcher_program_locked_out(launcher, lib, exe, d, bad):
    """A program under hcguard run that found the trace held from its start
    and was killed: hcguard run writes none of its events there either,
    and its summary says why (before, it said nothing of the trace)."""
    trace = os.path.join(d, "out.json")
    holder = subprocess.run([exe, "die-holding", trace], env=dict(child_env(lib),
                            HCGUARD_TRACE=trace), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, timeout=60)  # its child holds it 3 s
    p = subprocess.run([launcher, "run", "--trace", trace, "--", exe, "die"], env=child_env(),
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    said = "trace: none for the program: %s is being written by another process" % trace
    if holder.returncode != -9 or p.returncode not in (-9, 137) or said not in out:
        bad.append("hcguard run, the trace held from the program's start: holder exit %d, "
                   "exit %d, want both killed and '%s':\n%s"
                   % (holder.returncode, p.returncode, said, out[-3000:]))


def main():
    launcher, lib, exe, d = sys.argv[1:5]
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    bad = []
    trace = os.path.join(d, "pre.json")
    check("preloaded", [exe, "overlap"], dict(child_env(lib), HCGUARD_TRACE=trace), trace, bad)
    trace = os.path.join(d, "run.json")
    check("hcguard run", [launcher, "run", "--trace", trace, "--", exe, "overlap"],
          child_env(), trace, bad)
    launcher_finds_it_held(launcher, exe, d, bad)
    launcher_program_locked_out(launcher, lib, exe, d, bad)
    same = os.path.join(d, "same.out")
    try:  # a tree's log, and a trace of the same name: refused, no wait for good
        p = subprocess.run([exe, "overlap"], env=dict(child_env(lib), HCGUARD_LOG=same,
                                                       HCGUARD_TRACE=same),
                           capture_output=True, text=True, timeout=60)
        said = (p.stdout + p.stderr).count("ERROR: cannot write the trace %s: it is the file of the "
                                           "event log" % same)
        if p.returncode != 0 or said != CHILDREN:
            bad.append("log and trace one file: exit %d, the refusal said %d times, want %d"
                       % (p.returncode, said, CHILDREN))
    except subprocess.TimeoutExpired:
        bad.append("log and trace one file: the tree hung (60 s)")
    return verdict("trace shared", bad)


if __name__ == "__main__":
    sys.exit(main())
