#!/usr/bin/env bash
# Runs bench_hostfn ROUNDS times in each of three set-ups and prints, per
# figure, the median over the rounds of the two columns and of the ratio.
# Each run times the driver's own cuLaunchHostFunc and the one the program
# links, side by side in one process, so a ratio compares hcguard with no
# hcguard on the same process, thread and stream:
#   none    hcguard not loaded: both columns are the driver's (the method's noise)
#   off     hcguard preloaded, HCGUARD_MODE=off (its exported wrapper only)
#   guard   hcguard preloaded, default mode (what a user runs)
#   audit   hcguard preloaded, HCGUARD_MODE=audit
#   captured  (only when named in BENCH_SETUPS) guard, after the process
#           made one stream capture (launches then take the capture lock)
#   bench/run.sh BUILD_DIR [ROUNDS] [SCALE]
# BENCH_SETUPS: the set-ups to run, by default "none off guard audit".
set -euo pipefail
build=${1:?usage: bench/run.sh BUILD_DIR [ROUNDS] [SCALE]}
rounds=${2:-3}
scale=${3:-1}
bin="$build/bench/bench_hostfn"
lib="$build/lib/libhcguard.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
setups=${BENCH_SETUPS:-none off guard audit}
one() { # setup: one run of it, to stdout
    case $1 in
    none) "$bin" "$scale" ;;
    off) HCGUARD_MODE=off HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" ;;
    guard) HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" ;;
    audit) HCGUARD_MODE=audit HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" \
        "$bin" "$scale" ;;
    captured) BENCH_CAPTURE_FIRST=1 HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" \
        "$bin" "$scale" ;;
    *) echo "bench: unknown set-up $1" >&2; exit 2 ;;
    esac
}
for r in $(seq "$rounds"); do
    for s in $setups; do one "$s" >"$tmp/$s.$r"; done
done
for s in $setups; do
    want=yes
    [ "$s" = none ] && want=no
    grep -q "^hcguard $want" "$tmp/$s.1" || { echo "bench: hcguard loaded in $s: not $want" >&2; exit 1; }
done
med() { # metric column files...
    local m=$1 c=$2; shift 2
    awk -v m="$m" -v c="$c" '$1 == m { print $c }' "$@" | sort -g |
        awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
printf '%-14s' metric
for s in $setups; do printf ' %9s %9s %7s' "$s:drv" "$s:hcg" ratio; done
echo
for m in enqueue_plain enqueue_copy gated_plain gated_copy dispatch_min dispatch_med copy_mbps \
         ctx_get_ns10 cb_gap_plain cb_gap_copy wait_event wait_fresh mt1_plain mt8_plain; do
    printf '%-14s' "$m"
    for s in $setups; do
        printf ' %9s %9s %7s' "$(med "$m" 2 "$tmp/$s".*)" "$(med "$m" 3 "$tmp/$s".*)" \
            "$(med "$m" 4 "$tmp/$s".*)"
    done
    echo
done
echo "(drv: the driver's own cuLaunchHostFunc; hcg: the program's, through hcguard when"
echo " preloaded; ns per call, MB/s for copy_mbps, tenths of a ns for ctx_get_ns10;"
echo " ratio hcg/drv; medians of $rounds rounds)"
# The ratios' spread over the rounds, lowest to highest: hcguard absent
# (none) is the method's own scatter, to read the other set-ups against.
if [ "$rounds" -gt 1 ]; then
    printf '%-14s' "ratio range"
    for s in $setups; do printf ' %13s' "$s"; done
    echo "   (lowest..highest over the rounds)"
    for m in enqueue_plain enqueue_copy gated_plain gated_copy dispatch_min; do
        printf '%-14s' "$m"
        for s in $setups; do
            printf ' %13s' "$(awk -v m="$m" '$1 == m { print $4 }' "$tmp/$s".* | sort -g |
                awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo ".." hi }')"
        done
        echo
    done
fi
# What the budget speaks of, from the medians above (guard and audit):
# the callback thread's cost per host function (hcg - drv of cb_gap, in
# ns; budget 50) and the enqueue's scaling with 8 threads (mt8 / mt1 of
# each column: hcguard's against the driver's).
for s in $setups; do
    case $s in none | off) continue ;; esac
    awk -v s="$s" '
        function med(m, c,   n, i, j, t, v) { n = 0
            for (i = 1; i <= NR0; i++) if (M[i] == m) v[++n] = V[i, c]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            return v[int((n + 1) / 2)] }
        { NR0++; M[NR0] = $1; V[NR0, 2] = $2; V[NR0, 3] = $3 }
        END {
            printf "%s: callback thread +%d ns per host function (plain), +%d ns (copy);", s,
                med("cb_gap_plain", 3) - med("cb_gap_plain", 2), med("cb_gap_copy", 3) - med("cb_gap_copy", 2)
            d1 = med("mt1_plain", 2); h1 = med("mt1_plain", 3); d8 = med("mt8_plain", 2); h8 = med("mt8_plain", 3)
            if (d1 > 0 && h1 > 0 && d8 > 0)
                printf " 8-thread scaling mt8/mt1: driver %.2f, hcguard %.2f (ratio %.3f)", d8 / d1, h8 / h1, (h8 / h1) / (d8 / d1)
            printf "\n" }' "$tmp/$s".*
done
# The fault-contained copy hcguard makes against a plain memcpy, in one
# process (src/check/fault.c; ratio 1.000: no difference).
if [ -x "$build/bench/bench_copy" ]; then
    echo
    echo "copy bandwidth: hcguard's fault-contained copy against plain memcpy"
    "$build/bench/bench_copy" $((rounds * 5 + 1))
fi
