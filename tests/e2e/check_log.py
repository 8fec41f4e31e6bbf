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
import glob
import json
import os
import subprocess
import sys
from collections import Counter

COMMON = ("event", "seq", "api", "fn", "fn_kind", "user_data", "stream", "tid", "t_enqueue_ns")


def main():
    sep = sys.argv.index("--")
    logdir, expects, cmd = sys.argv[1], sys.argv[2:sep], sys.argv[sep + 1:]
    name = "events-%p.jsonl"
    if expects and expects[0] == "--one-file":
        name, expects = "events-all.jsonl", expects[1:]
    os.makedirs(logdir, exist_ok=True)
    for old in glob.glob(os.path.join(logdir, "*.jsonl")):
        os.unlink(old)
    env = dict(os.environ, HCGUARD_LOG=os.path.join(logdir, name))
    # The preload is for the command only, not for this interpreter.
    if "HCG_CHILD_PRELOAD" in env:
        env["LD_PRELOAD"] = env.pop("HCG_CHILD_PRELOAD")
    rc = subprocess.call(cmd, env=env)
    if rc == 77:
        return 77
    logs = glob.glob(os.path.join(logdir, "events-*.jsonl"))
    if len(logs) != 1:
        print(f"check_log: want one log in {logdir}, found {logs}")
        return 1
    counts, bad, pids = Counter(), 0, set()
    with open(logs[0]) as f:
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
    for e in expects:
        key, want = e.rsplit("=", 1)
        if counts[key] != int(want):
            print(f"check_log: {key}: {counts[key]} events, want {want}")
            bad += 1
    print(f"check_log: {sum(1 for _ in open(logs[0]))} events, {dict(counts)}")
    if rc != 0:
        print(f"check_log: the command exited {rc}")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
