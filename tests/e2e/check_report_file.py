"""Runs `hcguard run --log-file FILE -- PROG ARGS...` and prints FILE, the
text report, for run_check.sh to match; the command's exit status is not
this script's (a program killed by a signal is one of the cases).

  check_report_file.py HCGUARD FILE PROG ARGS...
HCG_CHILD_PRELOAD, if set, becomes the command's LD_PRELOAD (a sanitizer's
runtime, which hcguard run keeps ahead of libhcguard.so): it is not given
to this script's own process, nor to a shell.
"""
import subprocess
import sys

from checklib import child_env, fresh


def main():
    hcguard, report = sys.argv[1:3]
    fresh(report)
    p = subprocess.run([hcguard, "run", "--log-file", report, "--"] + sys.argv[3:],
                       capture_output=True, text=True, timeout=120, env=child_env())
    print("exit status %d" % p.returncode)
    with open(report) as f:
        sys.stdout.write(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
