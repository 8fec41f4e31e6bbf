#!/usr/bin/env python3
"""Forks before hcguard started in the parent, into one log named without
%p (hc_fork prestart [exec]): the log, left from an earlier run, is
started anew once, then holds every process's header and every run (none
of the earlier run's lines).

  check_fork_family.py HC_FORK [exec]

hcguard is preloaded by the caller's environment."""

import json
import os
import subprocess
import sys
import tempfile

CHILDREN, CHILD, PARENT = 4, 500, 300  # hc_fork.c: PRESTART_*


def fail(msg):
    print("fork family: FAILED: " + msg)
    sys.exit(1)


def main():
    exe, extra = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        with open(log, "w") as f:
            f.write('{"event":"header","schema":1,"pid":1}\n{"event":"run","pid":1}\n')
        env = dict(os.environ, HCGUARD_LOG=log)
        p = subprocess.run([exe, "prestart"] + extra, env=env, capture_output=True, text=True,
                           timeout=300)
        sys.stdout.write(p.stdout)
        sys.stdout.write(p.stderr)
        if p.returncode != 0:
            fail("hc_fork exited %d" % p.returncode)
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
        if 1 in heads or 1 in runs:
            fail("the earlier run's lines are still in the log")
        want = {pid: CHILD for pid, h in heads.items() if h["ppid"] == p_pid(heads)}
        parent = p_pid(heads)
        want[parent] = PARENT
        if len(heads) != CHILDREN + 1 or runs != want:
            fail("log: headers of %d processes, runs %s; want %d processes, runs %s" %
                 (len(heads), runs, CHILDREN + 1, want))
    print("fork family: passed")


def p_pid(heads):
    """The parent: the one process whose parent is not in the log."""
    top = [pid for pid, h in heads.items() if h["ppid"] not in heads]
    if len(top) != 1:
        fail("not one process at the top of the log: %s" % top)
    return top[0]


if __name__ == "__main__":
    main()
