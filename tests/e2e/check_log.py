"""Runs a command with HCGUARD_LOG set, then checks the JSON Lines log.

  check_log.py LOGDIR [--one-file] EXPECT... -- CMD ARGS...
--one-file names the log without %p, so that every process of the command
writes to one file.
EXPECT is KIND=N, KIND:REASON=N (KIND one of run, skip, reject, finding;
REASON the reason or finding name), finding:FINDING:CALLED=N (CALLED the
driver function a cuda-call-in-host-fn finding names) or KIND@NAME=N
(events of KIND whose host function is named NAME, fn_name), or pids=N
(the processes that wrote): the log must hold exactly N such events. Every line must be a JSON object with the
common keys. Exit 77 is passed on (not applicable). HCG_CHILD_PRELOAD
becomes the command's LD_PRELOAD.
"""
import json
import sys
from collections import Counter

import sinkrun

COMMON = ("event", "pid", "seq", "api", "fn", "fn_kind", "user_data", "stream", "tid", "t_enqueue_ns")


def main():
    rc, log, expects = sinkrun.run(sys.argv, "HCGUARD_LOG", "events", "jsonl", "check_log")
    if rc == 77:
        return 77
    if log is None:
        return 1
    counts, bad, pids = Counter(), 0, set()
    with open(log) as f:
        for n, line in enumerate(f, 1):
            try:
                ev = json.loads(line)
            except ValueError as e:
                print(f"check_log: line {n} is not JSON: {e}: {line[:200]}")
                bad += 1
                continue
            missing = [k for k in COMMON if k not in ev]
            if ev.get("fn", "0x0") != "0x0" and not ev.get("fn_name"):
                missing.append("fn_name")
            if missing:
                print(f"check_log: line {n} lacks {missing}")
                bad += 1
            counts[ev["event"]] += 1
            pids.add(ev.get("pid"))
            if ev.get("fn_name"):
                counts[f"{ev['event']}@{ev['fn_name']}"] += 1
            why = ev.get("reason") or ev.get("finding")
            if why:
                counts[f"{ev['event']}:{why}"] += 1
                if ev.get("called"):
                    counts[f"{ev['event']}:{why}:{ev['called']}"] += 1
    counts["pids"] = len(pids)
    return sinkrun.verdict(bad, counts, expects, rc, sum(1 for _ in open(log)), "check_log")


if __name__ == "__main__":
    sys.exit(main())
