"""Attacks on hcguard's stand-in for the default action of death signals,
preloaded by hand (no flight recorder): each program of hc_sigattack dies
of a signal (or exits) in a way that tries to lose its events, corrupt the
log or change what the program sees; the log must hold every one of its
host functions in whole JSON lines, and the process end as it would have.

  check_sig_attack.py LIBHCGUARD HC_SIGATTACK DIR CASE
CASE: signalret, resethand, resethand-early, resethand-info, thread, stats,
fork, reraise, sysv, abort, flood, python-catch, python-uncaught; scribble runs
under `hcguard run` (HCG_LAUNCHER), which must not read the file names the
program wrote over in its flight record past their fields.
HCG_CHILD_PRELOAD, if set, goes ahead of LIBHCGUARD in LD_PRELOAD.
"""
import json
import os
import re
import signal
import subprocess
import sys

from checklib import child_env, fresh, verdict

# case: (argv after the program, how it ends, host functions in the log)
CASES = {
    "signalret": (["signalret"], -signal.SIGTERM, 100),
    "resethand": (["resethand"], -signal.SIGTERM, 101),
    "resethand-early": (["resethand", "early"], -signal.SIGTERM, 101),
    "resethand-info": (["resethand", "info"], -signal.SIGTERM, 101),
    "thread": (["thread"], -signal.SIGTERM, None),
    "stats": (["stats"], -signal.SIGINT, 100),
    "fork": (["fork"], 0, 300),
    "reraise": (["reraise"], -signal.SIGTERM, 101),
    "sysv": (["sysv"], -signal.SIGTERM, 101),
    "abort": (["abort"], -signal.SIGABRT, 100),
    "flood": (["flood", "200000"], -signal.SIGTERM, 200000),
}

PY = r'''
import ctypes, os, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
def ok(r):
    if r:
        print("FAIL: CUDA error", r)
        sys.exit(1)
ok(cuda.cuInit(0))
dev = ctypes.c_int()
ok(cuda.cuDeviceGet(ctypes.byref(dev), 0))
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
ok(cuda.cuCtxSetCurrent(ctx))
s = ctypes.c_void_p()
ok(cuda.cuStreamCreate(ctypes.byref(s), 1))
noop = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda p: None)
for i in range(100):
    ok(cuda.cuLaunchHostFunc(s, noop, None))
ok(cuda.cuStreamSynchronize(s))
try:
    os.kill(os.getpid(), 2)
    time.sleep(30)
    print("FAIL: no KeyboardInterrupt")
    sys.exit(1)
except KeyboardInterrupt:
    print("python: KeyboardInterrupt", flush=True)
    if sys.argv[1] == "uncaught":
        raise
sys.exit(5)
'''


def log_check(path):
    """The run events, and the lines that are not whole JSON (the last
    line may be cut only when the process died mid-write)."""
    runs, bad = 0, []
    with open(path) as f:
        lines = f.read().split("\n")
    last = len(lines) - 1  # after the final newline: empty, or a line cut short
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            runs += json.loads(line).get("event") == "run"
        except ValueError:
            if i != last:
                bad.append(i)
    return runs, bad


def scribble(prog, where):
    """hcguard run recovers a program that wrote over its record's names."""
    report = os.path.join(where, "attack-scribble.txt")
    log = os.path.join(where, "attack-scribble.jsonl")
    fresh(report, log)
    env = child_env()
    p = subprocess.run([env["HCG_LAUNCHER"], "run", "--log=" + log, "--log-file=" + report,
                        "--", prog, "scribble"], env=env, capture_output=True, text=True,
                       timeout=60)
    sys.stdout.write(p.stdout + p.stderr)
    with open(report) as f:
        text = f.read()
    sys.stdout.write(text)
    bad = []
    if p.returncode != -signal.SIGKILL:
        bad.append("hcguard run ended %d, want death by SIGKILL" % p.returncode)
    if "scribble: passed" not in p.stdout:
        bad.append("the program did not write over its record")
    if text.count("file name is not terminated") != 3:
        bad.append("not each of the three names was refused")
    if "AAAA" in text or "CCCC" in text or "host functions: 100 launched" not in text:
        bad.append("the names written over were used, or no summary")
    return bad


def main():
    lib, prog, where, case = sys.argv[1:5]
    if case == "scribble":
        return verdict("check_sig_attack", scribble(prog, where), case)
    log = os.path.join(where, "attack-%s.jsonl" % case)
    fresh(log)
    env = child_env(lib)
    env.update(HCGUARD_LOG=log, HCGUARD_SLOW_MS="100000")
    if case.startswith("python-"):
        argv, want, n = [sys.executable, "-c", PY, case[7:]], None, 100
        want = -signal.SIGINT if case == "python-uncaught" else 5
    else:
        argv, want, n = [prog] + CASES[case][0], CASES[case][1], CASES[case][2]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    bad = []
    if p.returncode != want:
        bad.append("exit status %d, want %d" % (p.returncode, want))
    if re.search(r"FAIL|CHECK failed|REQUIRE failed", p.stdout + p.stderr):
        bad.append("the program's own checks failed")
    if case.startswith("python-") and "python: KeyboardInterrupt" not in p.stdout:
        bad.append("no KeyboardInterrupt in Python")
    for line in p.stdout.splitlines():  # a count the program says it changed
        if line.startswith("expect-runs: "):
            n = int(line.split()[1])
    runs, torn = log_check(log)
    if n is not None and runs != n:
        bad.append("the log has %d run events, want %d" % (runs, n))
    if n is None and runs < 100:
        bad.append("the log has %d run events, want 100 or more" % runs)
    if torn:
        bad.append("lines %s of the log are not whole JSON" % torn[:5])
    return verdict("check_sig_attack", bad, case)


if __name__ == "__main__":
    sys.exit(main())
