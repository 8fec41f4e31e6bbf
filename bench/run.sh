#!/usr/bin/env bash
# Runs bench_hostfn ROUNDS times in each of three set-ups and prints, per
# figure, the median over the rounds of the two columns and of the ratio.
# Each run times the driver's own cuLaunchHostFunc and the one the program
# links, side by side in one process, so a ratio compares hcguard with no
# hcguard on the same process, thread and stream:
#   none    hcguard not loaded: both columns are the driver's (the method's noise)
#   off     hcguard preloaded, HCGUARD_MODE=off (its exported wrapper only)
#   guard   hcguard preloaded, default mode (what a user runs)
#   bench/run.sh BUILD_DIR [ROUNDS] [SCALE]
set -euo pipefail
build=${1:?usage: bench/run.sh BUILD_DIR [ROUNDS] [SCALE]}
rounds=${2:-3}
scale=${3:-1}
bin="$build/bench/bench_hostfn"
lib="$build/lib/libhcguard.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    "$bin" "$scale" >"$tmp/none.$r"
    HCGUARD_MODE=off HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" >"$tmp/off.$r"
    HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" >"$tmp/guard.$r"
done
grep -q '^hcguard yes' "$tmp/guard.1" || { echo "bench: hcguard did not load" >&2; exit 1; }
grep -q '^hcguard no' "$tmp/none.1" || { echo "bench: hcguard loaded where it must not be" >&2; exit 1; }
med() { # metric column files...
    local m=$1 c=$2; shift 2
    awk -v m="$m" -v c="$c" '$1 == m { print $c }' "$@" | sort -g |
        awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
printf '%-14s' metric
for s in none off guard; do printf ' %9s %9s %7s' "$s:drv" "$s:hcg" ratio; done
echo
for m in enqueue_plain enqueue_copy gated_plain gated_copy dispatch_min dispatch_med copy_mbps \
         ctx_get_ns10; do
    printf '%-14s' "$m"
    for s in none off guard; do
        printf ' %9s %9s %7s' "$(med "$m" 2 "$tmp/$s".*)" "$(med "$m" 3 "$tmp/$s".*)" \
            "$(med "$m" 4 "$tmp/$s".*)"
    done
    echo
done
echo "(drv: the driver's own cuLaunchHostFunc; hcg: the program's, through hcguard when"
echo " preloaded; ns per call, MB/s for copy_mbps, tenths of a ns for ctx_get_ns10;"
echo " ratio hcg/drv; medians of $rounds rounds)"
# The fault-contained copy hcguard makes against a plain memcpy, in one
# process (src/check/fault.c; ratio 1.000: no difference).
if [ -x "$build/bench/bench_copy" ]; then
    echo
    echo "copy bandwidth: hcguard's fault-contained copy against plain memcpy"
    "$build/bench/bench_copy" $((rounds * 5 + 1))
fi
