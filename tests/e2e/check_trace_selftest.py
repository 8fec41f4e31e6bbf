"""The trace checker (check_trace.py) against traces made to break each of
its rules once, and one good trace: it must pass the good one and find
exactly the one fault in each bad one."""
import json
import os
import sys
import tempfile

import check_trace

PROC = {"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "p"}}
T1 = {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "app"}}
T2 = {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "cb"}}
ST = 1 << 30  # a stream track's tid (a pseudo-thread)


def stream_name(tid, stream="0x10", name=None):
    return {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
            "args": {"name": name or f"stream {stream}", "stream": stream}}


def x(tid, ts, dur, name="f", cat="host function", stream="0x10"):
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": {"stream": stream}}


def flow(ph, tid, ts, fid=7):
    ev = {"name": "host function", "cat": "flow", "ph": ph, "id": fid, "ts": ts, "pid": 1,
          "tid": tid}
    if ph == "f":
        ev["bp"] = "e"
    return ev


GOOD = [PROC, T1, T2, x(1, 10.0, 0.002, cat="enqueue"), flow("s", 1, 10.001),
        x(2, 20.0, 5.0), flow("f", 2, 20.001), x(2, 21.0, 1.0, name="nested"),
        {"name": "finding", "cat": "finding", "ph": "i", "s": "t", "ts": 30.0, "pid": 1,
         "tid": 2, "args": {}},
        stream_name(ST), x(ST, 20.0, 5.0), x(ST, 21.0, 1.0, name="nested")]


def without(i):
    return GOOD[:i] + GOOD[i + 1:]


def many_streams(n):
    """n streams, each with a track and one run."""
    out = [PROC, T2]
    for i in range(n):
        stream = hex(0x1000 + i)
        out += [stream_name(ST + 2 + i, stream), x(2, 10.0 + i, 0.5, stream=stream),
                x(ST + 2 + i, 10.0 + i, 0.5, stream=stream)]
    return out


BAD = {
    "no process name": without(0),
    "no thread name": without(2),
    "a flow with no finish": without(6),
    "a flow with no start": without(4),
    "a start in no slice": GOOD[:4] + [flow("s", 1, 11.0)] + GOOD[5:],
    "a finish before its start": GOOD[:6] + [flow("f", 2, 9.0)] + GOOD[7:],
    "a finish in no slice": GOOD[:6] + [flow("f", 2, 26.0)] + GOOD[7:],
    "slices overlapping partly": GOOD + [x(2, 24.0, 2.0), x(ST, 24.0, 2.0)],
    "an unknown phase": GOOD + [{"ph": "Q", "name": "q", "pid": 1, "tid": 1, "ts": 1}],
    "a slice without dur": GOOD + [{k: v for k, v in x(2, 40.0, 1.0).items() if k != "dur"}],
    "a negative time": GOOD + [x(2, -1.0, 0.5)],
    "an instant of no scope": GOOD + [dict(GOOD[8], s="z")],
    "a flow id twice": GOOD + [flow("s", 1, 10.001), flow("f", 2, 20.001)],
    # stream tracks
    "a run with no twin on a stream track": GOOD[:-1],
    "a twin of another length": GOOD[:-1] + [x(ST, 21.0, 1.5, name="nested")],
    "a stream-track slice that is no run's": GOOD + [x(ST, 40.0, 1.0, name="ghost")],
    "a stream track not named": without(9),
    "two streams on one tid": GOOD + [stream_name(ST, "0x20")],
    "a stream track's tid named as a thread too": GOOD + [dict(T1, tid=ST)],
    "a stream track's tid used by a real thread": GOOD + [dict(GOOD[8], tid=ST)],
    "a flow ending on a stream track": GOOD[:6] + [flow("f", ST, 20.001)] + GOOD[7:],
    "a run on another stream's track": GOOD + [x(2, 40.0, 1.0, stream="0x20"),
                                               x(ST, 40.0, 1.0, stream="0x20")],
    "more stream tracks than the bound": many_streams(257),
}


def check(events, raw=None):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(raw if raw is not None else json.dumps(events))
    t = check_trace.Trace()
    t.check(f.name)
    os.unlink(f.name)
    return t.bad


def main():
    failed = 0
    for name, good in (("the good trace", GOOD), ("256 streams", many_streams(256)),
                       ("a shared track", GOOD + [stream_name(ST + 1, "other"),
                                                  x(2, 40.0, 1.0, stream="0x99"),
                                                  x(ST + 1, 40.0, 1.0, stream="0x99")])):
        if check(good):
            print(f"check_trace_selftest: {name} was refused")
            failed += 1
    cases = dict((k, (v, None)) for k, v in BAD.items())
    cases["not JSON"] = (None, json.dumps(GOOD)[:-1])
    cases["not an array"] = (None, json.dumps({"traceEvents": GOOD}))
    for name, (events, raw) in cases.items():
        if check(events, raw) == 0:
            print(f"check_trace_selftest: not found: {name}")
            failed += 1
    print("check_trace_selftest: %s" % ("failed" if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
