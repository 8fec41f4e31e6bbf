"""Runs hc_lost exec 300 7 (300 copies, then an exec of itself doing 7)
under `hcguard run` with a trace, the exec'd image killed (SIGKILL) right
after its first write to the trace by the preloaded DIE_IN_WRITE
(HCG_DIE_WRITE_EXECED: only in an image that an exec started). The trace,
which the image before closed as JSON before its exec and the exec'd one
reopened, must hold each of the 307 runs once, and be whole (before, the
batch the exec'd image died writing was written again: 314 runs, and the
launcher said its record of where the batch began was wrong).

  check_exec_kill.py HCGUARD HC_LOST DIE_IN_WRITE DIR
"""
import json
import os
import subprocess
import sys

import check_trace
from checklib import child_env, fresh, verdict


def main():
    hcguard, prog, shim, where = sys.argv[1:5]
    trace = os.path.join(where, "exec-kill.json")
    fresh(trace)
    env = child_env(shim)
    env.update(HCG_DIE_WRITE=trace + ":1", HCG_DIE_WRITE_EXECED="1")
    p = subprocess.run([hcguard, "run", "--trace", trace, "--slow-ms", "100000", "--", prog,
                        "exec", "300", "7"], capture_output=True, text=True, timeout=120,
                       env=env)
    sys.stdout.write(p.stderr[-4000:])
    bad = []
    if p.returncode != -9 and p.returncode != 137:
        bad.append("exit status %d, want death by SIGKILL" % p.returncode)
    if "not where an event ended" in p.stderr:
        bad.append("hcguard run found the batch's start where no event ended")
    with open(trace) as f:
        events = json.load(f)
    runs = len(check_trace.run_slices(events))
    print("runs in the trace: %d" % runs)
    if runs != 307:
        bad.append("the trace holds %d runs, want 307" % runs)
    strict = check_trace.Trace()
    strict.check(trace)
    if strict.bad:
        bad.append("the trace breaks the Trace Event Format (above)")
    return verdict("exec kill", bad)


if __name__ == "__main__":
    sys.exit(main())
