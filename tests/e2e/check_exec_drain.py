"""Runs hc_lost execdrain N PATH under the preloaded hcguard, with a log
and a trace, ROUNDS times: the program execs PATH (no hcguard there) while
one of its threads launches without end and another takes hcguard's counts
without end, each count writing what the buffers hold. Each round's trace
must be whole JSON (check_trace.py's checks) holding the N copies made
before the exec, and each line of its log whole JSON: the exec must never
come in the middle of a write, whichever thread makes it.

  check_exec_drain.py LIBHCGUARD HC_LOST PATH DIR [N] [ROUNDS]
"""
import json
import os
import subprocess
import sys

from check_trace import Trace
from checklib import child_env, fresh, verdict


def log_problems(path):
    """The lines of the log at path that are not whole JSON objects."""
    bad = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                if not isinstance(json.loads(line), dict):
                    raise ValueError("not an object")
            except ValueError as e:
                bad.append("line %d: %s: %r" % (n, e, line[-80:]))
    return bad


def one(lib, prog, path, where, copies, i):
    trace = os.path.join(where, "execdrain.%d.json" % i)
    log = os.path.join(where, "execdrain.%d.jsonl" % i)
    fresh(trace, log)
    env = child_env(lib)
    env.update(HCGUARD_TRACE=trace, HCGUARD_LOG=log, HCGUARD_SLOW_MS="100000")
    p = subprocess.run([prog, "execdrain", str(copies), path], capture_output=True, text=True,
                       timeout=60, env=env)
    if p.returncode != 0:
        return ["round %d: exit status %d: %s" % (i, p.returncode, p.stderr[-2000:])]
    t = Trace()
    t.check(trace)
    bad = ["round %d: the trace is not whole (said above)" % i] if t.bad else []
    if t.counts["X:host copy"] != copies:
        bad.append("round %d: the trace holds %d copies, not %d"
                   % (i, t.counts["X:host copy"], copies))
    return bad + ["round %d: the log: %s" % (i, b) for b in log_problems(log)[:3]]


def main():
    lib, prog, path, where = sys.argv[1:5]
    copies = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 100
    bad = []
    for i in range(rounds):
        bad += one(lib, prog, path, where, copies, i)
    return verdict("exec drain", bad[:20])


if __name__ == "__main__":
    sys.exit(main())
