#!/bin/sh
# Runs a command (stdout and stderr together); the lines of its output
# that match FILTER (an ERE) must match the EREs in the file EXPECTED one
# for one, in order: what a set of --expect options cannot say (this line
# before that one, and nothing of the kind between).
#   check_sequence.sh FILTER EXPECTED -- CMD ARGS...
set -u
filter=$1
expected=$2
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" = 0 ] || { echo "sequence: exit status $rc"; exit "$rc"; }
got=$(grep -E -- "$filter" "$out")
n_got=$(printf '%s\n' "$got" | grep -c .)
n_want=$(grep -c . "$expected")
i=1
while [ "$i" -le "$n_want" ]; do
    want=$(sed -n "${i}p" "$expected")
    line=$(printf '%s\n' "$got" | sed -n "${i}p")
    if ! printf '%s\n' "$line" | grep -Eq -- "$want"; then
        echo "sequence: line $i of the filtered output is"
        echo "    $line"
        echo "sequence: expected /$want/"
        exit 1
    fi
    i=$((i + 1))
done
[ "$n_got" = "$n_want" ] || { echo "sequence: $n_got lines, expected $n_want"; exit 1; }
echo "sequence: passed"
