"""Runs hc_lost SCENARIO N PATH (execdrain by default) under the preloaded
hcguard, with a log and a trace, ROUNDS times: the program execs PATH (no
hcguard there) while one of its threads launches without end and another
takes hcguard's counts without end, each count writing what the buffers
hold (execrace: while a third makes execs that fail). Each round's trace
must be one whole JSON array holding the N copies made before the exec
(as slices on their threads and their streams' tracks), and each line of
its log whole JSON: the exec must never
come in the middle of a write, whichever thread makes it. The files that
execrace's failing execs are made of are left in DIR (TMPDIR) and removed.

  check_exec_drain.py LIBHCGUARD HC_LOST PATH DIR [N] [ROUNDS] [SCENARIO]
"""
import glob
import json
import os
import subprocess
import sys

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


def one(lib, prog, path, where, copies, i, scenario):
    trace = os.path.join(where, "%s.%d.json" % (scenario, i))
    log = os.path.join(where, "%s.%d.jsonl" % (scenario, i))
    fresh(trace, log)
    env = child_env(lib)
    env.update(HCGUARD_TRACE=trace, HCGUARD_LOG=log, HCGUARD_SLOW_MS="100000", TMPDIR=where)
    p = subprocess.run([prog, scenario, str(copies), path], capture_output=True, text=True,
                       timeout=60, env=env)
    for f in glob.glob(os.path.join(where, "hc_lost-noexec-*")):
        os.unlink(f)
    if p.returncode != 0:
        return ["round %d: exit status %d: %s" % (i, p.returncode, p.stderr[-2000:])]
    bad = ["round %d: the log: %s" % (i, b) for b in log_problems(log)[:3]]
    try:
        with open(trace) as f:
            events = json.load(f)
    except ValueError as e:
        return bad + ["round %d: the trace is not whole JSON: %s" % (i, str(e)[:100])]
    n = sum(isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") == "host copy"
            for ev in events) if isinstance(events, list) else -1
    if n != 2 * copies:
        bad.append("round %d: the trace holds %d copy slices, not %d" % (i, n, 2 * copies))
    return bad


def main():
    lib, prog, path, where = sys.argv[1:5]
    copies = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 100
    scenario = sys.argv[7] if len(sys.argv) > 7 else "execdrain"
    bad = []
    for i in range(rounds):
        bad += one(lib, prog, path, where, copies, i, scenario)
    return verdict("exec drain", bad[:20], scenario)


if __name__ == "__main__":
    sys.exit(main())
