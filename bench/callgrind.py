#!/usr/bin/env python3
"""Instructions hcguard adds per call on the application's thread, and per
host function run on the driver's callback thread (cb_*), counted by
callgrind on the test driver: a figure that does not move with the
machine's load, so CI can hold it.

  bench/callgrind.py BUILD_DIR [--batches N] [--check LIMITS]

Runs BUILD_DIR/bench/bench_callgrind under
`valgrind --tool=callgrind --collect-atstart=no` with BUILD_DIR's
libhcguard preloaded and the test driver (BUILD_DIR/fakecuda) as
libcuda.so.1, reads one callgrind dump per batch ("<figure> <way>
<batch>"), and prints per figure the instructions per call through the
driver's own entry point, through hcguard, and the difference: hcguard's
cost. The figure is taken from each way's median batch (a batch that
refills hcguard's call pool costs a few instructions a call more); the
spread over hcguard's batches is printed beside it, and is 0 on the
callback thread. The count does not depend on the machine's speed or
load: the same figures on every run (bench_callgrind.c says what makes
them so).

With --check, each figure's added instructions must not exceed the limit
of that figure in LIMITS (lines "figure limit", # comments): a regression
fails (exit 1). Exit 2: the run itself failed."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

FIGURES = ("plain", "copy", "thunk", "cb_plain", "cb_copy")
WHAT = {
    "plain": "cuLaunchHostFunc, ordinary host function",
    "copy": "cuLaunchHostFunc, hcguard_host_copy record validated",
    "thunk": "cuCtxGetCurrent through hcguard's exported thunk",
    "cb_plain": "callback thread: an ordinary host function run",
    "cb_copy": "callback thread: hcguard_host_copy of 8 bytes run",
}
# The targets (instructions added per call), printed for reference;
# the callback thread's have none in instructions (its budget is 50 ns).
TARGETS = {"plain": 120, "copy": 180, "thunk": 8, "cb_plain": 0, "cb_copy": 0}


def fail(msg):
    print("callgrind: " + msg, file=sys.stderr)
    sys.exit(2)


def run_bench(build, batches, out_dir):
    exe = os.path.join(build, "bench", "bench_callgrind")
    lib = os.path.join(build, "lib", "libhcguard.so")
    fake = os.path.join(build, "fakecuda")
    for path in (exe, lib, os.path.join(fake, "libcuda.so.1")):
        if not os.path.exists(path):
            fail("%s is missing (build with valgrind/callgrind.h installed: "
                 "tools/deps.sh)" % path)
    if not shutil.which("valgrind"):
        fail("valgrind not found (tools/deps.sh installs it)")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HCGUARD_") and k != "LD_PRELOAD"}
    env.update(LD_PRELOAD=lib, LD_LIBRARY_PATH=fake, HCGUARD_SUMMARY="0",
               HCGUARD_SLOW_MS="100000", HCGUARD_HANG_S="100000")
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           "--callgrind-out-file=" + os.path.join(out_dir, "cg.out"),
           exe, str(batches)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0 or "\ndone\n" not in "\n" + p.stdout:
        fail("%s exited %d\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout,
                                        p.stderr[-4000:]))
    return p.stdout


def read_dumps(out_dir):
    """{(figure, way): [instructions of each counted batch]}"""
    counts = {}
    for name in os.listdir(out_dir):
        if not re.fullmatch(r"cg\.out\.\d+", name):
            continue
        with open(os.path.join(out_dir, name)) as f:
            text = f.read()
        label = re.search(r"^desc: Trigger: Client Request: (\S+) (\S+) (-?\d+)$",
                          text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M) or \
            re.search(r"^summary: (\d+)", text, re.M)
        if not label or not total or int(label.group(3)) < 0:
            continue
        counts.setdefault((label.group(1), label.group(2)), []).append(int(total.group(1)))
    return counts


def figures(counts, calls):
    out = {}
    for fig in FIGURES:
        row = {}
        for way in ("driver", "linked"):
            v = sorted(counts.get((fig, way), []))
            if not v:
                fail("no batches counted for %s %s" % (fig, way))
            row[way] = (v[0] / calls, v[len(v) // 2] / calls, v[-1] / calls,
                        sum(v) / len(v) / calls)
        row["added"] = row["linked"][1] - row["driver"][1]
        row["added_min"] = row["linked"][0] - row["driver"][0]
        row["added_mean"] = row["linked"][3] - row["driver"][3]
        out[fig] = row
    return out


def read_limits(path):
    limits = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or parts[0] not in FIGURES:
                fail("%s:%d: want 'figure limit' with figure one of %s" %
                     (path, n, ", ".join(FIGURES)))
            limits[parts[0]] = float(parts[1])
    missing = [f for f in FIGURES if f not in limits]
    if missing:
        fail("%s: no limit for %s" % (path, ", ".join(missing)))
    return limits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--check", metavar="LIMITS")
    args = ap.parse_args()
    limits = read_limits(args.check) if args.check else None
    tmp = tempfile.mkdtemp(prefix="hcg-callgrind-")
    try:
        stdout = run_bench(args.build, args.batches, tmp)
        counts = read_dumps(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    info = dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)
    calls = int(info.get("calls", "0"))
    if calls <= 0:
        fail("the benchmark printed no call count")
    res = figures(counts, calls)
    print("instructions per call on the application's thread, and per host function on "
          "the callback thread (cb_*) (callgrind, test driver %s)"
          % info.get("driver", "?"))
    print("%-8s %9s %9s %8s %8s %7s %s" % ("figure", "driver", "hcguard", "added",
                                          "spread", "target", "what"))
    for fig in FIGURES:
        r = res[fig]
        spread = r["linked"][2] - r["linked"][0]
        print("%-8s %9.1f %9.1f %8.1f %8.1f %7d %s" % (
            fig, r["driver"][1], r["linked"][1], r["added"], spread, TARGETS[fig], WHAT[fig]))
    print("(target 0: none in instructions)")
    print("(%d calls a batch, %s batches each way; driver and hcguard: the median "
          "batch; spread: hcguard's dearest batch minus its cheapest; added from the "
          "cheapest batches: %s; from the means: %s)" % (
              calls, info.get("batches", "?"),
              ", ".join("%s %.1f" % (f, res[f]["added_min"]) for f in FIGURES),
              ", ".join("%s %.1f" % (f, res[f]["added_mean"]) for f in FIGURES)))
    if limits is None:
        return 0
    bad = [f for f in FIGURES if res[f]["added"] > limits[f]]
    for f in FIGURES:
        print("check %-6s added %8.1f  limit %8.1f  %s" % (
            f, res[f]["added"], limits[f], "FAIL" if f in bad else "ok"))
    if bad:
        print("callgrind: hcguard's cost per call went over the limit of %s "
              "(bench/callgrind-limits.txt)" % ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
