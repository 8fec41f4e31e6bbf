#!/usr/bin/env bash
# Builds of libhcguard compared on one machine: bench_hostfn run under each
# in turn (A, B, ..., A, B, ...), ROUNDS times, in guard mode. Each run
# already times hcguard against the driver in one process; alternating the
# builds puts them on the same host, load and GPU, so that a change is told
# from a change of machine (the device machines differ by more than the
# budget between calls).
#   bench/ab.sh BENCH_BIN ROUNDS LIB_A LIB_B [LIB_C ...]
# A build may be given as VAR=VALUE@LIB: that library run with VAR=VALUE
# set (a setting compared with another, e.g. HCGUARD_BUFFER=64K@lib.so).
# Prints, per figure, the median ratio (hcguard / driver) of each build and
# its ratio to A's, and the callback thread's cost (cb_gap, hcg - drv, ns)
# of each build round by round with its median.
set -euo pipefail
usage="usage: bench/ab.sh BENCH_BIN ROUNDS LIB_A LIB_B [LIB_C ...]"
[ $# -ge 4 ] || { echo "$usage" >&2; exit 2; }
bin=$1
rounds=$2
shift 2
libs=("$@")
case $rounds in '' | *[!0-9]* | 0) echo "bench/ab.sh: ROUNDS must be a count: $rounds" >&2; exit 2 ;; esac
for f in "$bin" "${libs[@]}"; do
    f=${f#*=*@}
    [ -e "$f" ] || { echo "bench/ab.sh: no such file: $f" >&2; exit 2; }
done
names=(A B C D E F G H)
[ ${#libs[@]} -le ${#names[@]} ] || { echo "bench/ab.sh: at most ${#names[@]} builds" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    for i in "${!libs[@]}"; do
        out="$tmp/${names[$i]}.$r"
        lib=${libs[$i]#*=*@}
        set=()
        [ "$lib" = "${libs[$i]}" ] || set=("${libs[$i]%%@*}")
        env HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 "${set[@]}" LD_PRELOAD="$lib" "$bin" >"$out"
        grep -q '^hcguard yes' "$out" ||
            { echo "bench/ab.sh: hcguard did not load from $lib" >&2; exit 1; }
    done
done
med() { # awk-expression files...: the median of the expression over the files
    local e=$1; shift
    awk "$e" "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
printf '%-14s' metric
for i in "${!libs[@]}"; do printf ' %9s %7s' "${names[$i]}:ratio" "/A"; done
echo
for m in enqueue_plain enqueue_copy gated_plain gated_copy dispatch_min dispatch_med copy_mbps \
         ctx_get_ns10 wait_event wait_fresh; do
    printf '%-14s' "$m"
    a=
    for i in "${!libs[@]}"; do
        v=$(med "\$1 == \"$m\" { print \$4 }" "$tmp/${names[$i]}".*)
        a=${a:-$v}
        printf ' %9s %7s' "$v" "$(awk -v a="$a" -v b="$v" \
            'BEGIN { if (a > 0) printf "%.3f", b / a; else print "-" }')"
    done
    echo
done
for m in cb_gap_plain cb_gap_copy; do
    for i in "${!libs[@]}"; do
        n=${names[$i]}
        printf '%s %s ns (hcg - drv): median %+d; per round:' "$m" "$n" \
            "$(med "\$1 == \"$m\" { print \$3 - \$2 }" "$tmp/$n".*)"
        for r in $(seq "$rounds"); do
            awk -v m="$m" '$1 == m { printf " %+d", $3 - $2 }' "$tmp/$n.$r"
        done
        echo
    done
done
for i in "${!libs[@]}"; do echo "${names[$i]}: ${libs[$i]}"; done
echo "(ratio: hcguard / driver, the median of $rounds rounds, the builds' runs alternating)"
