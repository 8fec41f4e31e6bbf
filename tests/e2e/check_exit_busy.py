"""Runs hc_lost exitbusy T under the preloaded hcguard with a log, a few
times: threads launch without end while the program exits, so host
functions run after hcguard's last write. The summary must account for
the runs it counts that the log lacks: it says how many events were made
after the last write, and how many were dropped (a full buffer) (before, thousands were counted and missing from the
log without a word). The threads go on while the summary is taken, so a
few more may be counted than it names: over all rounds, what it names
must be at least 90% of the gap, and never more than the gap. Exit 77 if
no round left a gap (the threads never outran the last write).

  check_exit_busy.py LIBHCGUARD HC_LOST DIR [ROUNDS]
"""
import os
import re
import subprocess
import sys

from checklib import child_env, fresh, verdict


def one(lib, prog, log):
    fresh(log)
    env = child_env(lib)
    env.update(HCGUARD_LOG=log, HCGUARD_SLOW_MS="100000")
    p = subprocess.run([prog, "exitbusy", "4"], capture_output=True, text=True, timeout=60,
                       env=env)
    ran = re.search(r"host functions: \d+ launched, (\d+) ran", p.stderr)
    after = re.search(r"events made after the last write, by threads that went on while the "
                      r"program ended: (\d+)", p.stderr)
    with open(log) as f:
        runs = sum('"event":"run"' in line for line in f)
    dropped = re.search(r"events dropped \(full per-thread buffer\): (\d+)", p.stderr)
    late = (int(after.group(1)) if after else 0) + (int(dropped.group(1)) if dropped else 0)
    if p.returncode != 0 or not ran or "exitbusy: passed" not in p.stdout:
        return "exit status %d, summary %s" % (p.returncode, bool(ran)), late, 0
    gap = int(ran.group(1)) - runs
    if late > gap:
        return ("the summary counts %s ran; the log holds %d, and it says %d were made after "
                "the last write" % (ran.group(1), runs, late)), late, gap
    return None, late, gap


def main():
    lib, prog, where = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    bad, lates, gaps = [], [], []
    for i in range(rounds):
        err, late, gap = one(lib, prog, os.path.join(where, "exitbusy.%d.jsonl" % i))
        lates.append(late)
        gaps.append(gap)
        if err:
            bad.append("round %d: %s" % (i, err))
    print("runs counted and not in the log, by round: %s" % gaps)
    print("events the summary says were made after the last write or dropped: %s" % lates)
    if not bad and sum(gaps) == 0:
        print("SKIP: no round's threads outran the last write")
        return 77
    if sum(lates) < 0.9 * sum(gaps):
        bad.append("the summary names %d of the %d runs missing from the logs"
                   % (sum(lates), sum(gaps)))
    return verdict("exit busy", bad)


if __name__ == "__main__":
    sys.exit(main())
