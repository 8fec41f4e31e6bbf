"""Runs hc_lost die HOW under `hcguard run` with a log and a trace, and
checks what is left: every one of the 100 host functions in the log (run
events) and in the trace (slices, the JSON array whole), one summary on
stderr with the exact counts, and hcguard run's exit status the program's
own (its exit code, or death by its signal).

  check_die.py HCGUARD HC_LOST DIR HOW EXPECTED_STATUS [EXITCODE]
  check_die.py --kill-at-write DIE_IN_WRITE FILE:N[:half] HCGUARD HC_LOST DIR HOW
EXPECTED_STATUS is a number, or -N for death by signal N. With EXITCODE,
the program first launches a bad record (rejected: one error), and hcguard
run is given --error-exitcode EXITCODE. HCG_CHILD_PRELOAD,
if set, becomes the command's LD_PRELOAD (a sanitizer's runtime, which
hcguard run keeps ahead of libhcguard.so).

With --kill-at-write, the program is killed (SIGKILL) right after its Nth
write to FILE (log or trace), or halfway through it (half), by the
preloaded DIE_IN_WRITE (tests/e2e/die_in_write.c): a batch of events then
is in the file and still in memory, and must be in each file once.
"""
import json
import os
import re
import subprocess
import sys

import check_log
import check_trace
from checklib import child_env, fresh, skip_no_gpu, verdict


def main():
    if skip_no_gpu(os.environ.get("HCG_REQUIRE_GPU")):
        return 77
    args, shim, kill_at = sys.argv[1:], [], None
    if args[0] == "--kill-at-write":
        shim, kill_at, args = [args[1]], args[2], args[3:] + ["-9"]
    hcguard, prog, where, how, want = args[:5]
    exitcode = args[5] if len(args) > 5 else None
    opts = ["--error-exitcode", exitcode] if exitcode else []
    errors = "1 error" if exitcode else "0 errors"
    tag = how + ("-bad" if exitcode else "")
    if kill_at:
        tag += "-killed-" + re.sub(r"[^A-Za-z0-9]", "-", kill_at)
    log = os.path.join(where, "die-%s.jsonl" % tag)
    trace = os.path.join(where, "die-%s.json" % tag)
    fresh(log, trace)
    env = child_env(*shim)
    if kill_at:
        which, _, rest = kill_at.partition(":")
        env["HCG_DIE_WRITE"] = "%s:%s" % ({"log": log, "trace": trace}[which], rest)
    p = subprocess.run([hcguard, "run", "--log", log, "--trace", trace, "--slow-ms", "100000"]
                       + opts + ["--", prog, "die", how] + (["bad"] if exitcode else []),
                       capture_output=True, text=True, timeout=120, env=env)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    bad = []
    m = re.search(r"host functions: (\d+) launched, (\d+) ran", p.stderr)
    launched, ran = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    if not kill_at and (launched, ran) != (100, 100):
        bad.append("the summary says %d launched, %d ran, want 100 and 100" % (launched, ran))
    # Killed wherever its write fell, perhaps before all 100 ran: as many
    # runs in each file as the summary counts.
    if ran < 0 or launched < ran:
        bad.append("the summary's counts (%d launched, %d ran) are missing or wrong"
                   % (launched, ran))
    if p.returncode != int(want):
        bad.append("exit status %d, want %s" % (p.returncode, want))
    runs = 0
    with open(log) as f:
        for line in f:
            ev = json.loads(line)
            runs += ev["event"] == "run" and ev["fn_name"] in ("noop", "unknown")
    if runs != ran:
        bad.append("the log has %d run events, want %d" % (runs, ran))
    with open(trace) as f:
        slices = check_trace.run_slices(json.load(f))
    if len(slices) != ran:
        bad.append("the trace has %d slices, want %d" % (len(slices), ran))
    # What the program wrote and what hcguard run wrote for it, together:
    # the log's schema (a header first), the Trace Event Format.
    strict = check_trace.Trace()
    strict.check(trace)
    if strict.bad:
        bad.append("the trace breaks the Trace Event Format (above)")
    logc = check_log.check_file(log, check_log.load_fields())
    if logc.bad or logc.counts["header"] != 1:
        bad.append("the log breaks docs/LOG.md (above), or has %d headers, want 1"
                   % logc.counts["header"])
    if p.stderr.count("ERROR SUMMARY: %s" % errors) != 1:
        bad.append("want one summary saying 'ERROR SUMMARY: %s'" % errors)
    return verdict("check_die", bad, tag)


if __name__ == "__main__":
    sys.exit(main())
