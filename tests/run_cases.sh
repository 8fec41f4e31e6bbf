#!/bin/sh
# Runs each case of a test program (tests/common/check.h) alone, one process
# a case, so that no case passes only because of what an earlier one left
# behind. Cases listed as "named-only" need an environment of their own and
# have their own CTest test.
#   run_cases.sh [EMULATOR [ARGS]] PROGRAM
# (an emulator, such as qemu-aarch64 -L SYSROOT, runs a cross-built one).
# Exit: 0 all passed, 1 a case failed, 77 the program skips (its --list
# exits 77, e.g. the test driver's self-test on the real driver).
set -u
for prog in "$@"; do :; done
list=$("$@" --list)
rc=$?
[ "$rc" -eq 77 ] && { echo "SKIP: $prog skips"; exit 77; }
[ "$rc" -ne 0 ] && { echo "run_cases: $prog --list exited $rc"; exit 1; }
cases=$(printf '%s\n' "$list" | awk 'NF == 1 { print $1 }')
[ -n "$cases" ] || { echo "run_cases: $prog lists no case"; exit 1; }
failed=0
total=0
# A case that hangs is stopped after HCG_CASE_TIMEOUT seconds (120: the
# slowest takes about 20 s under ThreadSanitizer), so that the failure
# names it; CTest's own limit for the whole program would say nothing.
limit=${HCG_CASE_TIMEOUT:-120}
for c in $cases; do
    total=$((total + 1))
    echo "case $c"
    timeout --kill-after=10 "$limit" "$@" "$c" >/dev/null 2>"${TMPDIR:-/tmp}/run_cases.$$"
    rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "case $c: FAILED (hung: stopped after $limit s)"
        cat "${TMPDIR:-/tmp}/run_cases.$$"
        failed=$((failed + 1))
    elif [ "$rc" -ne 0 ]; then
        echo "case $c: FAILED (exit $rc)"
        cat "${TMPDIR:-/tmp}/run_cases.$$"
        failed=$((failed + 1))
    fi
done
rm -f "${TMPDIR:-/tmp}/run_cases.$$"
echo "$prog: $((total - failed)) of $total cases passed alone"
[ "$failed" -eq 0 ]
