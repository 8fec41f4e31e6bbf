"""Runs hc_lost under `hcguard run` with a log and a trace, the program
killed (SIGKILL, by the preloaded DIE_IN_WRITE) right after the first write
to the trace that names one of its host functions, and checks that what
the program wrote and what hcguard run wrote for it hold each event once,
the trace whole.

  check_ringcut.py DIE_IN_WRITE HCGUARD HC_LOST DIR ringcut N
      killed after writing the batch holding hc_lost_marker, a batch of
      its second ring, written first, while its first ring still holds the
      N rejections made meanwhile: each rejection in the log and the trace
  check_ringcut.py DIE_IN_WRITE HCGUARD HC_LOST DIR hangcut
      killed after writing the collector's report that hc_lost_hung hangs
      (held in the trace's buffer until the next batch is written, with
      it): the hang in the summary, the log and the trace, once
"""
import json
import os
import re
import subprocess
import sys

import check_trace
from checklib import child_env, fresh, verdict


def main():
    shim, hcguard, prog, where, how = sys.argv[1:6]
    args = sys.argv[6:]
    log = os.path.join(where, "%s.jsonl" % how)
    trace = os.path.join(where, "%s.json" % how)
    fresh(log, trace)
    env = child_env(shim)
    env["HCG_DIE_WRITE"] = trace + (":@hc_lost_marker" if how == "ringcut" else ":@hc_lost_hung")
    env["HCGUARD_HANG_S"] = "0.2"
    p = subprocess.run([hcguard, "run", "--log", log, "--trace", trace, "--slow-ms", "100000",
                        "--", prog, how] + args, capture_output=True, text=True, timeout=120,
                       env=env)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    bad = []
    if p.returncode != -9:
        bad.append("exit status %d, want -9 (killed)" % p.returncode)
    with open(log) as f:
        lines = [json.loads(line) for line in f]
    with open(trace) as f:
        events = json.load(f)
    if how == "ringcut":
        want = int(args[0]) + 1
        m = re.search(r"bad records rejected at enqueue: (\d+)", p.stderr)
        if not m or int(m.group(1)) != want:
            bad.append("the summary does not count %d rejections" % want)
        logged = sum(ev["event"] == "reject" for ev in lines)
        traced = sum(ev.get("cat") == "rejected record" for ev in events)
        what = "rejections"
    else:
        want = 1
        if not re.search(r"hung-host-fn +1$", p.stderr, re.M):
            bad.append("the summary does not count one hung host function")
        logged = sum(ev["event"] == "finding" and ev.get("finding") == "hung-host-fn"
                     for ev in lines)
        traced = sum(ev.get("name") == "hung-host-fn" for ev in events)
        what = "hangs"
    if logged != want:
        bad.append("the log has %d %s, want %d" % (logged, what, want))
    if traced != want:
        bad.append("the trace has %d %s, want %d" % (traced, what, want))
    strict = check_trace.Trace()
    strict.check(trace)
    if strict.bad:
        bad.append("the trace breaks the Trace Event Format (above)")
    return verdict("check_ringcut", bad, how)


if __name__ == "__main__":
    sys.exit(main())
