#!/usr/bin/env bash
# The sustained lossless rate: bench_lossless under hcguard, for 1 and 8
# launching threads, first with the summary only, then with the event log
# written, then with the log and the trace: the log must then hold one
# "run" line per host function launched through hcguard.
#   bench/lossless.sh BUILD_DIR [N] [ROUNDS]
set -euo pipefail
build=${1:?usage: bench/lossless.sh BUILD_DIR [N] [ROUNDS]}
n=${2:-1000000}
rounds=${3:-3}
bin="$build/bench/bench_lossless"
lib="$build/lib/libhcguard.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in 1 8; do
    echo "== summary only"
    HCGUARD_SLOW_MS=100000 HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$t" "$n" "$rounds"
    for trace in "" "$tmp/trace.json"; do
        echo "== with --log${trace:+ and --trace}"
        HCGUARD_LOG="$tmp/log.jsonl" HCGUARD_TRACE="$trace" HCGUARD_SLOW_MS=100000 \
            HCGUARD_SUMMARY=0 LD_PRELOAD="$lib" "$bin" "$t" "$n" "$rounds" | tee "$tmp/out"
        grep -q '^hcguard launched' "$tmp/out" || { echo "bench: hcguard did not load" >&2; exit 1; }
        lines=$(grep -c '"event":"run"' "$tmp/log.jsonl")
        echo "log run events $lines, want $((n * rounds))"
        [ "$lines" = $((n * rounds)) ] || { echo "bench: events are missing from the log" >&2; exit 1; }
        rm -f "$tmp/log.jsonl" "$tmp/trace.json"
    done
done
