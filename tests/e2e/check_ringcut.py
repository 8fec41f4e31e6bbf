"""Runs hc_lost ringcut N under `hcguard run` with a log and a trace, the
program killed (SIGKILL, by the preloaded DIE_IN_WRITE) right after it
wrote the batch holding its host function hc_lost_marker to the trace: a
batch of its second ring, written first, while its first ring still holds
the N rejections made meanwhile. hcguard run writes the rings' events;
each rejection must be in the log and in the trace once, the trace whole.

  check_ringcut.py DIE_IN_WRITE HCGUARD HC_LOST DIR N
"""
import json
import os
import re
import subprocess
import sys

import check_trace
from checklib import child_env, fresh, verdict


def main():
    shim, hcguard, prog, where, n = sys.argv[1:6]
    want = int(n) + 1
    log = os.path.join(where, "ringcut.jsonl")
    trace = os.path.join(where, "ringcut.json")
    fresh(log, trace)
    env = child_env(shim)
    env["HCG_DIE_WRITE"] = trace + ":@hc_lost_marker"
    p = subprocess.run([hcguard, "run", "--log", log, "--trace", trace, "--slow-ms", "100000",
                        "--", prog, "ringcut", n], capture_output=True, text=True, timeout=120,
                       env=env)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    bad = []
    m = re.search(r"bad records rejected at enqueue: (\d+)", p.stderr)
    if not m or int(m.group(1)) != want:
        bad.append("the summary does not count %d rejections" % want)
    if p.returncode != -9:
        bad.append("exit status %d, want -9 (killed)" % p.returncode)
    with open(log) as f:
        logged = sum(json.loads(line)["event"] == "reject" for line in f)
    if logged != want:
        bad.append("the log has %d rejections, want %d" % (logged, want))
    with open(trace) as f:
        traced = sum(ev.get("cat") == "rejected record" for ev in json.load(f))
    if traced != want:
        bad.append("the trace has %d rejections, want %d" % (traced, want))
    strict = check_trace.Trace()
    strict.check(trace)
    if strict.bad:
        bad.append("the trace breaks the Trace Event Format (above)")
    return verdict("check_ringcut", bad, n)


if __name__ == "__main__":
    sys.exit(main())
