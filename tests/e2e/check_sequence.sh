#!/bin/sh
# Runs a command (stdout and stderr together); the lines of its output
# that match FILTER (an ERE) must match the EREs in the file EXPECTED one
# for one, in order: what a set of --expect options cannot say (this line
# before that one, and nothing of the kind between). EXPECTED may be
# several files separated by commas, one per outcome the driver may
# choose: one of them must match.
#   check_sequence.sh FILTER EXPECTED[,EXPECTED...] -- CMD ARGS...
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

# 0 if the filtered output matches the file $1, else says where not.
matches() {
    n_want=$(grep -c . "$1")
    i=1
    while [ "$i" -le "$n_want" ]; do
        want=$(sed -n "${i}p" "$1")
        line=$(printf '%s\n' "$got" | sed -n "${i}p")
        if ! printf '%s\n' "$line" | grep -Eq -- "$want"; then
            echo "sequence: against $(basename "$1"), line $i of the filtered output is"
            echo "    $line"
            echo "sequence: expected /$want/"
            return 1
        fi
        i=$((i + 1))
    done
    [ "$n_got" = "$n_want" ] && return 0
    echo "sequence: against $(basename "$1"), $n_got lines, expected $n_want"
    return 1
}

for file in $(printf '%s' "$expected" | tr ',' ' '); do
    if matches "$file"; then
        echo "sequence: passed ($(basename "$file"))"
        exit 0
    fi
done
exit 1
