"""Runs hc_lost die HOW under `hcguard run` with a log and a trace, and
checks what is left: every one of the 100 host functions in the log (run
events) and in the trace (slices, the JSON array whole), one summary on
stderr with the exact counts, and hcguard run's exit status the program's
own (its exit code, or death by its signal).

  check_die.py HCGUARD HC_LOST DIR HOW EXPECTED_STATUS [EXITCODE]
EXPECTED_STATUS is a number, or -N for death by signal N. With EXITCODE,
the program first launches a bad record (rejected: one error), and hcguard
run is given --error-exitcode EXITCODE. HCG_CHILD_PRELOAD,
if set, becomes the command's LD_PRELOAD (a sanitizer's runtime, which
hcguard run keeps ahead of libhcguard.so).
"""
import json
import os
import subprocess
import sys

import check_log
import check_trace
from checklib import child_env, fresh, skip_no_gpu, verdict


def main():
    if skip_no_gpu(os.environ.get("HCG_REQUIRE_GPU")):
        return 77
    hcguard, prog, where, how, want = sys.argv[1:6]
    exitcode = sys.argv[6] if len(sys.argv) > 6 else None
    opts = ["--error-exitcode", exitcode] if exitcode else []
    errors = "1 error" if exitcode else "0 errors"
    tag = how + ("-bad" if exitcode else "")
    log = os.path.join(where, "die-%s.jsonl" % tag)
    trace = os.path.join(where, "die-%s.json" % tag)
    fresh(log, trace)
    p = subprocess.run([hcguard, "run", "--log", log, "--trace", trace, "--slow-ms", "100000"]
                       + opts + ["--", prog, "die", how] + (["bad"] if exitcode else []),
                       capture_output=True, text=True, timeout=120, env=child_env())
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
        slices = check_trace.run_slices(json.load(f))
    if len(slices) != 100:
        bad.append("the trace has %d slices, want 100" % len(slices))
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
    if "host functions: 100 launched, 100 ran" not in p.stderr:
        bad.append("the summary lacks 'host functions: 100 launched, 100 ran'")
    return verdict("check_die", bad, tag)


if __name__ == "__main__":
    sys.exit(main())
