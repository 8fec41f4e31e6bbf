#!/usr/bin/env bash
# Runs bench_hostfn without hcguard, with hcguard in mode off (its wrappers
# only) and in guard mode, interleaved, ROUNDS times each, and prints the
# median of each figure and the ratios to the run without hcguard. Same
# machine, same command, same binary.
#   bench/run.sh BUILD_DIR [ROUNDS] [SCALE]
set -euo pipefail
build=${1:?usage: bench/run.sh BUILD_DIR [ROUNDS] [SCALE]}
rounds=${2:-5}
scale=${3:-1}
bin="$build/bench/bench_hostfn"
lib="$build/lib/libhcguard.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    "$bin" "$scale" >"$tmp/plain.$r"
    HCGUARD_MODE=off HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" >"$tmp/off.$r"
    HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" >"$tmp/hcg.$r"
done
grep -q '^hcguard yes' "$tmp/hcg.1" || { echo "bench: hcguard did not load" >&2; exit 1; }
med() { # metric files...
    local m=$1; shift
    awk -v m="$m" '$1 == m { print $2 }' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
printf '%-14s %10s %10s %8s %10s %8s\n' metric plain off ratio guard ratio
for m in enqueue_plain enqueue_copy gated_plain gated_copy dispatch_min dispatch_med copy_gbps clock_ns; do
    p=$(med "$m" "$tmp"/plain.*)
    o=$(med "$m" "$tmp"/off.*)
    h=$(med "$m" "$tmp"/hcg.*)
    awk -v m="$m" -v p="$p" -v o="$o" -v h="$h" 'BEGIN { printf "%-14s %10s %10s %8.3f %10s %8.3f\n", m, p, o, (p > 0 ? o / p : 0), h, (p > 0 ? h / p : 0) }'
done
echo "(ns per call for enqueue and dispatch; GB/s for copy_gbps; $rounds rounds each, medians)"
