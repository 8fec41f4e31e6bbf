#!/usr/bin/env python3
"""check_mp_files.py LAUNCHER HC_LOST DIR: one log and report file (no %p)
for the processes of one `hcguard run`: a shell that runs two programs one
after the other (a launcher that itself never opens the files, as a job
script, mpirun or torchrun). The log must hold both processes, the report
file both summaries, and nothing of an earlier run (before, the second
program started both files anew: the first one's events and summary were
gone, while its own summary had said they were written). A log named with
%q{VAR}, which the launcher cannot expand as its processes do, is each
process's own, started anew.
"""
import json
import os
import shutil
import subprocess
import sys

from checklib import child_env


def lines(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace").splitlines()


def log_counts(path):
    heads, runs = 0, {}
    for line in lines(path):
        e = json.loads(line)  # every line one object: nothing torn
        if e["event"] == "header":
            heads += 1
        elif e["event"] == "run":
            runs[e["pid"]] = runs.get(e["pid"], 0) + 1
    return heads, runs


def main():
    launcher, lost, d = sys.argv[1:4]
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log, rep = os.path.join(d, "run.jsonl"), os.path.join(d, "run.txt")
    for p in (log, rep):
        with open(p, "w") as f:
            f.write("STALE an earlier run\n")
    env = dict(child_env(), HCGUARD_SLOW_MS="100000")
    sh = '"$0" copies 200; "$0" copies 10; true'
    p = subprocess.run([launcher, "run", "--log", log, "--log-file", rep, "--",
                        "sh", "-c", sh, lost], env=env, capture_output=True, text=True)
    bad = []
    if p.returncode != 0:
        bad.append("exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    heads, runs = log_counts(log)
    if heads != 2 or sorted(runs.values()) != [10, 200]:
        bad.append("the log holds %d headers and runs %s, not 2 and [10, 200]"
                   % (heads, sorted(runs.values())))
    text = lines(rep)
    sums = [l for l in text if "HCGUARD SUMMARY" in l]
    if len(sums) != 2:
        bad.append("the report file holds %d summaries, not 2:\n%s" % (len(sums), "\n".join(text)))
    if any("STALE" in l for l in lines(log) + text):
        bad.append("an earlier run's file was appended to, not started anew")
    # A name that may expand otherwise in each process (%q{VAR}, %h) is
    # each process's own, started anew by it: hcguard run cannot empty it.
    tagged = os.path.join(d, "b.y.jsonl")
    with open(tagged, "w") as f:
        f.write("STALE an earlier run\n")
    p = subprocess.run([launcher, "run", "--log", os.path.join(d, "b.%q{TAG}.jsonl"), "--",
                        "sh", "-c", 'TAG=y "$0" copies 10', lost],
                       env=dict(env, TAG="x"), capture_output=True, text=True)
    if p.returncode != 0:
        bad.append("%%q: exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    elif any("STALE" in l for l in lines(tagged)):
        bad.append("%%q: %s holds an earlier run's line" % tagged)
    elif log_counts(tagged)[0] != 1 or list(log_counts(tagged)[1].values()) != [10]:
        bad.append("%%q: %s holds %s, not one process's 10 runs" % (tagged, log_counts(tagged)))
    for b in bad:
        print("FAIL:", b)
    print("mp files sequential: %s" % ("FAILED" if bad else "passed"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
