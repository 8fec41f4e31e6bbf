#!/usr/bin/env python3
"""A log cut off by a write error (the file size limit: fsize_limited.sh)
counts as written exactly the events whose lines are whole in the file,
and the rest as lost.

  check_write_error.py LIBHCGUARD FSIZE_LIMITED LOG CMD ARGS...

LOG is the log's path; HCG_CHILD_PRELOAD, if set, goes ahead of
LIBHCGUARD in the command's LD_PRELOAD (a sanitizer's runtime)."""

import json
import os
import re
import subprocess
import sys

import checklib


def main():
    lib, limited, log, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if os.path.exists(log):
        os.unlink(log)
    env = dict(checklib.child_env(lib), HCGUARD_LOG=log)
    p = subprocess.run([limited] + cmd, env=env, capture_output=True, text=True, timeout=120)
    sys.stdout.write(p.stdout)
    m = re.search(r"writing the event log .* failed: File too large; (\d+) events? written, "
                  r"(\d+) lost", p.stdout)
    if not m:
        print("write error: FAILED: no line saying what was written and lost")
        sys.exit(1)
    written, lost = int(m.group(1)), int(m.group(2))
    whole = 0
    with open(log, "rb") as f:
        for line in f.read().split(b"\n")[:-1]:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            whole += ev.get("event") != "header"
    if written != whole:
        print("write error: FAILED: %d events said written, %d whole in the file" % (written, whole))
        sys.exit(1)
    print("write error: passed (%d written, %d lost)" % (written, lost))


if __name__ == "__main__":
    main()
