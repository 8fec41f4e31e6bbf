"""Runs a command with HCGUARD_TRACE set, then checks the trace.

  check_trace.py DIR [--one-file] EXPECT... -- CMD ARGS...
The trace must be one JSON array of Chrome trace events: every event with
its fields and types, every slice's thread named by a metadata event.
EXPECT is PH=N or PH:CAT=N (PH X slice, i instant, M metadata; CAT the
category), or NAME@PH=N (events of phase PH named NAME): the trace must
hold exactly N such events. --one-file names the trace without %p. Exit 77
is passed on. HCG_CHILD_PRELOAD becomes the command's LD_PRELOAD.
"""
import json
import sys
from collections import Counter

import sinkrun

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
    rc, trace, expects = sinkrun.run(sys.argv, "HCGUARD_TRACE", "trace", "json", "check_trace")
    if rc == 77:
        return 77
    if trace is None:
        return 1
    try:
        events = json.load(open(trace))
    except ValueError as e:
        print(f"check_trace: {trace} is not JSON: {e}")
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
    return sinkrun.verdict(bad, counts, expects, rc, len(events), "check_trace")


if __name__ == "__main__":
    sys.exit(main())
