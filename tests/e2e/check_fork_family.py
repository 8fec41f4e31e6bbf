#!/usr/bin/env python3
"""A process tree forked before hcguard started in its first process, into
one log named without %p: the log, left from an earlier run, is started
anew once, by the first of the tree to start, then holds every process's
header and every run (none of the earlier run's lines). And nothing else
changes: a tree that never launches leaves the files alone, and a child
of a process that had started, forking again, leaves its parent's whole.

  check_fork_family.py LIBHCGUARD HC_FORK

HCG_CHILD_PRELOAD, if set, goes ahead of LIBHCGUARD in the programs'
LD_PRELOAD (a sanitizer's runtime)."""

import json
import os
import subprocess
import sys
import tempfile

import checklib

CHILDREN, CHILD, PARENT = 4, 500, 300  # hc_fork.c: PRESTART_*
STALE = '{"event":"header","schema":1,"pid":1}\n{"event":"run","pid":1}\n'


def fail(msg):
    print("fork family: FAILED: " + msg)
    sys.exit(1)


def run(lib, d, argv, trace=False):
    log, tr = os.path.join(d, "log.jsonl"), os.path.join(d, "trace.json")
    env = dict(checklib.child_env(lib), HCGUARD_LOG=log)
    if trace:
        env["HCGUARD_TRACE"] = tr
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode != 0:
        fail("%s exited %d" % (" ".join(argv), p.returncode))
    return log, tr


def runs_by_pid(log):
    heads, runs = 0, {}
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            heads += r.get("event") == "header"
            if r.get("event") == "run":
                runs[r["pid"]] = runs.get(r["pid"], 0) + 1
    return heads, runs


def started(lib, exe, scenario, want, headers):
    """A started process passes its log on (exec, spawn); the new image's
    fork child, launching before the image does, appends too."""
    with tempfile.TemporaryDirectory() as d:
        log, _ = run(lib, d, [exe, scenario])
        heads, runs = runs_by_pid(log)
        starts = {}
        with open(log) as f:
            for line in f:
                r = json.loads(line)
                if r.get("event") == "header":
                    starts.setdefault(r["pid"], set()).add(r.get("proc_start"))
        # An image that exec starts is its process's: the same proc_start.
        if any(len(v) != 1 or None in v for v in starts.values()):
            fail("%s: proc_start by pid: %s; want one each" % (scenario, starts))
        if sorted(runs.values()) != sorted(want) or heads != headers:
            fail("%s: %d headers, runs %s; want %d headers, runs %s" %
                 (scenario, heads, runs, headers, sorted(want)))


def read_log(log):
    heads, runs = {}, {}
    with open(log) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError:
                fail("log line %d is not JSON: %r" % (n, line[:120]))
            if r.get("event") == "header":
                if r["pid"] in heads:
                    fail("pid %d has two headers" % r["pid"])
                heads[r["pid"]] = r
            elif r.get("event") == "run":
                runs[r["pid"]] = runs.get(r["pid"], 0) + 1
    return heads, runs


def tree(lib, exe, how, argv):
    """prestart: every process's header and runs, none of the earlier run's."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "log.jsonl"), "w") as f:
            f.write(STALE)
        log, _ = run(lib, d, argv)
        heads, runs = read_log(log)
        if 1 in heads or 1 in runs:
            fail("%s: the earlier run's lines are still in the log" % how)
        top = [pid for pid, h in heads.items() if h["ppid"] not in heads]
        if len(top) != 1:
            fail("%s: not one process at the top of the log: %s" % (how, top))
        want = {pid: CHILD for pid in heads if pid != top[0]}
        want[top[0]] = PARENT
        if len(heads) != CHILDREN + 1 or runs != want:
            fail("%s: headers of %d processes, runs %s; want %d processes, runs %s" %
                 (how, len(heads), runs, CHILDREN + 1, want))
        trees = {h.get("tree") for h in heads.values()}
        if len(trees) != 1 or None in trees:
            fail("%s: the headers do not name one tree: %s" % (how, trees))
        with open(log) as f:
            for line in f:  # near the start, where the next of the tree looks
                if '"header"' in line and line.find('"tree"') > 64:
                    fail("%s: the tree is not near the header's start: %s" % (how, line[:200]))


def idle(lib):
    """A preloaded tree that never launches leaves an earlier run's files."""
    with tempfile.TemporaryDirectory() as d:
        for name in ("log.jsonl", "trace.json"):
            with open(os.path.join(d, name), "w") as f:
                f.write(STALE)
        log, tr = run(lib, d, ["sh", "-c", "true; true; true"], trace=True)
        for path in (log, tr):
            if open(path).read() != STALE:
                fail("idle tree: %s changed" % os.path.basename(path))


def refork(lib, exe):
    """A started parent's child forks again: the parent's files stay whole."""
    with tempfile.TemporaryDirectory() as d:
        log, tr = run(lib, d, [exe, "refork"], trace=True)
        heads, runs = read_log(log)
        if len(heads) != 1 or list(runs.values()) != [11]:
            fail("refork: headers %s, runs %s; want the parent's alone, 11 runs" %
                 (sorted(heads), runs))
        try:
            json.load(open(tr))
        except (OSError, ValueError) as e:
            fail("refork: the trace is not whole: %s" % e)


def main():
    lib, exe = sys.argv[1], sys.argv[2]
    tree(lib, exe, "prestart", [exe, "prestart"])
    tree(lib, exe, "prestart exec", [exe, "prestart", "exec"])
    # The tree's first process a shell (preloaded too), which never starts:
    # hc_fork is its child's next image.
    tree(lib, exe, "under a shell", ["sh", "-c", '"$@"; true', "sh", exe, "prestart"])
    idle(lib)
    refork(lib, exe)
    # Headers: each image's, the worker's.
    started(lib, exe, "started-exec", [4, 2], 3)
    started(lib, exe, "started-spawn", [7, 2, 1], 3)
    print("fork family: passed")


if __name__ == "__main__":
    main()
