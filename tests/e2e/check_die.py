"""Runs hc_lost die HOW under `hcguard run` with a log and a trace, and
checks what is left: every one of the 100 host functions in the log (run
events) and in the trace (slices, the JSON array whole), one summary on
stderr with the exact counts, and hcguard run's exit status the program's
own (its exit code, or death by its signal).

  check_die.py HCGUARD HC_LOST DIR HOW EXPECTED_STATUS
EXPECTED_STATUS is a number, or -N for death by signal N. HCG_CHILD_PRELOAD,
if set, becomes the command's LD_PRELOAD (a sanitizer's runtime, which
hcguard run keeps ahead of libhcguard.so).
"""
import json
import os
import subprocess
import sys


def main():
    hcguard, prog, where, how, want = sys.argv[1:6]
    os.makedirs(where, exist_ok=True)
    log = os.path.join(where, "die-%s.jsonl" % how)
    trace = os.path.join(where, "die-%s.json" % how)
    for f in (log, trace):
        if os.path.exists(f):
            os.unlink(f)
    env = dict(os.environ)
    pre = env.pop("HCG_CHILD_PRELOAD", "").rstrip(":")
    if pre:
        env["LD_PRELOAD"] = pre
    p = subprocess.run([hcguard, "run", "--log", log, "--trace", trace, "--slow-ms", "100000",
                        "--", prog, "die", how], capture_output=True, text=True, timeout=120,
                       env=env)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    bad = []
    if p.returncode != int(want):
        bad.append("exit status %d, want %s" % (p.returncode, want))
    runs = 0
    with open(log) as f:
        for line in f:
            ev = json.loads(line)
            runs += ev["event"] == "run" and ev["fn_name"] in ("noop", "unknown")
    if runs != 100:
        bad.append("the log has %d run events, want 100" % runs)
    with open(trace) as f:
        slices = [e for e in json.load(f) if e.get("ph") == "X"]
    if len(slices) != 100:
        bad.append("the trace has %d slices, want 100" % len(slices))
    if p.stderr.count("ERROR SUMMARY: 0 errors") != 1:
        bad.append("want one summary saying 'ERROR SUMMARY: 0 errors'")
    if "host functions: 100 launched, 100 ran" not in p.stderr:
        bad.append("the summary lacks 'host functions: 100 launched, 100 ran'")
    for b in bad:
        print("check_die: " + b)
    print("check_die %s: %s" % (how, "failed" if bad else "passed"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
