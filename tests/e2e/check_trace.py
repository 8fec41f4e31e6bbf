"""Runs a command with HCGUARD_TRACE set, then checks the trace.

  check_trace.py DIR [--one-file] EXPECT... -- CMD ARGS...
The trace must be one JSON array of Chrome trace events: every event with
its fields and types, every slice's thread named by a metadata event.
EXPECT is PH=N or PH:CAT=N (PH X slice, i instant, M metadata; CAT the
category), or NAME@PH=N (events of phase PH named NAME): the trace must
hold exactly N such events. --one-file names the trace without %p. Exit 77
is passed on. HCG_CHILD_PRELOAD becomes the command's LD_PRELOAD.
"""
import glob
import json
import os
import subprocess
import sys
from collections import Counter

FIELDS = {"X": ("name", "cat", "ts", "dur", "pid", "tid", "args"),
          "i": ("name", "cat", "ts", "pid", "tid", "s", "args"),
          "M": ("name", "pid", "tid", "args")}


def problems(ev):
    ph = ev.get("ph")
    if ph not in FIELDS:
        return [f"unknown phase {ph!r}"]
    out = [f"lacks {k}" for k in FIELDS[ph] if k not in ev]
    for k in ("ts", "dur"):
        if k in ev and not (isinstance(ev[k], (int, float)) and ev[k] >= 0):
            out.append(f"{k} is {ev[k]!r}")
    return out


def main():
    sep = sys.argv.index("--")
    tdir, expects, cmd = sys.argv[1], sys.argv[2:sep], sys.argv[sep + 1:]
    name = "trace-%p.json"
    if expects and expects[0] == "--one-file":
        name, expects = "trace-all.json", expects[1:]
    os.makedirs(tdir, exist_ok=True)
    for old in glob.glob(os.path.join(tdir, "*.json")):
        os.unlink(old)
    env = dict(os.environ, HCGUARD_TRACE=os.path.join(tdir, name))
    if "HCG_CHILD_PRELOAD" in env:
        env["LD_PRELOAD"] = env.pop("HCG_CHILD_PRELOAD")
    rc = subprocess.call(cmd, env=env)
    if rc == 77:
        return 77
    traces = glob.glob(os.path.join(tdir, "trace-*.json"))
    if len(traces) != 1:
        print(f"check_trace: want one trace in {tdir}, found {traces}")
        return 1
    try:
        events = json.load(open(traces[0]))
    except ValueError as e:
        print(f"check_trace: {traces[0]} is not JSON: {e}")
        return 1
    bad, counts = 0, Counter()
    named = {(e["pid"], e["tid"]) for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for n, ev in enumerate(events):
        for p in problems(ev):
            print(f"check_trace: event {n} {p}: {ev}")
            bad += 1
        ph = ev.get("ph")
        counts[ph] += 1
        if "cat" in ev:
            counts[f"{ph}:{ev['cat']}"] += 1
        counts[f"{ev.get('name')}@{ph}"] += 1
        if ph == "X" and (ev.get("pid"), ev.get("tid")) not in named:
            print(f"check_trace: event {n}: its thread is not named")
            bad += 1
    for e in expects:
        key, want = e.rsplit("=", 1)
        if counts[key] != int(want):
            print(f"check_trace: {key}: {counts[key]} events, want {want}")
            bad += 1
    print(f"check_trace: {len(events)} events, {dict(counts)}")
    if rc != 0:
        print(f"check_trace: the command exited {rc}")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
