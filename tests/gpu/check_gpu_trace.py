"""On the GPU: a CUDA runtime program (tests/gpu/cudart_hostfn.c: host
functions and copies on a stream, bad records, host functions captured
into a graph and replayed) under `hcguard run --log --trace`; its trace
must pass the strict Trace Event Format checker (tests/e2e/check_trace.py)
and its log docs/LOG.md's schema (tests/e2e/check_log.py), with a header
naming the real driver, flows from enqueue to run, every graph replay
on the stream it was launched on, with its own seq, and a track for each
of the program's three streams (two made, the NULL stream).

  check_gpu_trace.py HCGUARD PROGRAM DIR
Exit 0 passed, 1 failed, 77 no GPU (the program's own skip).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import check_log  # noqa: E402
import check_trace  # noqa: E402
from checklib import fresh, skip_no_gpu  # noqa: E402


def main():
    if skip_no_gpu(True):
        return 77
    hcguard, prog, where = sys.argv[1:4]
    log, trace = os.path.join(where, "gpu-trace.jsonl"), os.path.join(where, "gpu-trace.json")
    fresh(log, trace)
    p = subprocess.run([hcguard, "run", "--log", log, "--trace", trace, "--", prog],
                       capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode == 77:
        return 77
    bad = []
    if p.returncode != 0:
        bad.append(f"exit status {p.returncode}")
    t = check_trace.Trace()
    t.check(trace)
    if t.bad:
        bad.append("the trace breaks the Trace Event Format (above)")
    lg = check_log.check_file(log, check_log.load_fields())
    if lg.bad:
        bad.append("the log breaks docs/LOG.md (above)")
    header = json.loads(open(log).readline())
    events = json.load(open(trace))
    graph_runs = [e for e in events if e.get("ph") == "X" and "graph" in e.get("args", {})]
    on_stream = [e for e in graph_runs if e["args"].get("stream") != "0x0"]
    tracks = sorted(e["args"]["name"] for e in events if e.get("ph") == "M" and
                    e.get("name") == "thread_name" and "stream" in e.get("args", {}))
    print(f"gpu trace: {len(tracks)} stream tracks: {', '.join(tracks)}")
    c = t.counts
    print(f"gpu trace: {c['X']} slices ({c['X:enqueue']} enqueues), {c['s']} flows, "
          f"{len(graph_runs)} graph node runs, {len(on_stream)} on their launch stream, "
          f"{c['process_name@M']} process named, {c['thread_name@M']} threads named")
    print(f"gpu log: header driver_version {header.get('driver_version')}, mode "
          f"{header.get('mode')}, {lg.counts['run']} runs, {lg.counts['reject']} rejections, "
          f"{lg.counts['graph-runs:stream0']} graph runs with no launch stream")
    if header.get("event") != "header" or not header.get("driver_version"):
        bad.append("the log's first line is not a header naming the driver's version")
    if c["s"] == 0 or c["s"] != c["f"]:
        bad.append("no flows from enqueue to run")
    if len(tracks) != 3 or not any("legacy default stream" in n for n in tracks):
        bad.append("not three stream tracks, one the NULL stream's")
    if not graph_runs or len(on_stream) != len(graph_runs):
        bad.append("graph replays without their launch stream")
    for b in bad:
        print("check_gpu_trace: " + b)
    print("gpu trace: " + ("FAILED" if bad else "passed"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
