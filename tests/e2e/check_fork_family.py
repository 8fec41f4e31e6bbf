#!/usr/bin/env python3
"""Forks before hcguard started in the parent, into one log and one trace
named without %p (hc_fork prestart [exec]): the log, left from an earlier
run, is started anew once, then holds every process's header and every
run (none of the earlier run's lines); the trace, also left from before,
is written by one process of them alone (the first to start), whole
JSON, and each of the others says it writes none.

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
    # Started by this (preloaded) checker, hc_fork inherits HCGUARD_EXEC
    # from its exec: its children share as descendants of it do (the trace:
    # the parent's, which starts last; an image a child execs is of the
    # tree, below). Started with none (by a shell that hcguard is not loaded
    # in), the first of its processes to start makes the trace.
    check([exe], extra, "trace: none for this process (")
    bare = ["sh", "-c", 'unset HCGUARD_EXEC; LD_PRELOAD="$HCG_FF_PRELOAD" exec "$@"', "sh", exe]
    check(bare, extra, "trace: none for this process (another process of the program, "
          "forked before hcguard started")
    print("fork family: passed")


def check(cmd, extra, none_line):
    with tempfile.TemporaryDirectory() as d:
        log, trace = os.path.join(d, "log.jsonl"), os.path.join(d, "trace.json")
        with open(log, "w") as f:
            f.write('{"event":"header","schema":1,"pid":1}\n{"event":"run","pid":1}\n')
        with open(trace, "w") as f:
            f.write("[not this run's\n")
        env = dict(os.environ, HCGUARD_LOG=log, HCGUARD_TRACE=trace)
        if cmd[0] == "sh":
            env["HCG_FF_PRELOAD"] = env.pop("LD_PRELOAD", "")
        p = subprocess.run(cmd + ["prestart"] + extra, env=env, capture_output=True, text=True,
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
        with open(trace) as f:
            try:
                t = json.load(f)
            except ValueError as e:
                fail("the trace is not JSON: %s" % e)
        events = t if isinstance(t, list) else t.get("traceEvents", [])
        pids = {e.get("pid") for e in events}
        if len(pids) != 1 or not pids <= set(heads):
            fail("trace: events of processes %s, want one process of the log's" % pids)
        writer = pids.pop()
        # Each run: a slice on its callback thread's track and on its stream's.
        slices = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") != "enqueue")
        if slices != 2 * want[writer]:
            fail("trace: %d host function slices, want two for each of pid %d's %d runs" %
                 (slices, writer, want[writer]))
        said = (p.stdout + p.stderr).count(none_line)
        if said != CHILDREN:
            fail("%s: %d processes said they write no trace, want %d" %
                 (" ".join(cmd), said, CHILDREN))


def p_pid(heads):
    """The parent: the one process whose parent is not in the log."""
    top = [pid for pid, h in heads.items() if h["ppid"] not in heads]
    if len(top) != 1:
        fail("not one process at the top of the log: %s" % top)
    return top[0]


if __name__ == "__main__":
    main()
