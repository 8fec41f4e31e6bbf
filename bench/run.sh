#!/usr/bin/env bash
# Runs bench_hostfn with and without hcguard preloaded, interleaved, ROUNDS
# times each, and prints the median of each figure and the ratio
# hcguard / plain. Same machine, same command, same binary.
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
    HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$scale" >"$tmp/hcg.$r"
done
grep -q '^hcguard yes' "$tmp/hcg.1" || { echo "bench: hcguard did not load" >&2; exit 1; }
med() { # metric files...
    local m=$1; shift
    awk -v m="$m" '$1 == m { print $2 }' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
printf '%-14s %12s %12s %8s\n' metric plain hcguard ratio
for m in enqueue_plain enqueue_copy gated_plain gated_copy dispatch_min dispatch_med copy_gbps clock_ns; do
    p=$(med "$m" "$tmp"/plain.*)
    h=$(med "$m" "$tmp"/hcg.*)
    awk -v m="$m" -v p="$p" -v h="$h" 'BEGIN { printf "%-14s %12s %12s %8.3f\n", m, p, h, (p > 0 ? h / p : 0) }'
done
echo "(ns per call for enqueue and dispatch; GB/s for copy_gbps; $rounds rounds each, medians)"
