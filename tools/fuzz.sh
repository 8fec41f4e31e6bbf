#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (installed if missing) and runs
# each from its committed corpus (tests/fuzz/corpus/<target>) for a bounded
# time; a crash fails the run and leaves the input in build-fuzz/artifacts.
#   tools/fuzz.sh [SECONDS_PER_TARGET]      (default 25)
#   tools/fuzz.sh --runs N                   N executions each instead
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HCGUARD_FUZZ=1 "$root/tools/deps.sh"
cuda=${HCGUARD_CUDA_ROOT:-/usr/local/cuda}
dir="$root/build-fuzz"
limit=(-max_total_time="${1:-25}")
if [ "${1:-}" = --runs ]; then limit=(-runs="$2"); fi
targets=(fuzz_validate fuzz_elfsym fuzz_config fuzz_jsonl fuzz_oracle)
CC=clang cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHCGUARD_CUDA_ROOT="$cuda" >/dev/null
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}"
mkdir -p "$dir/artifacts"
for t in "${targets[@]}"; do
    name=${t#fuzz_}
    work="$dir/corpus-$name"   # grows here; the committed corpus stays small
    mkdir -p "$work"
    echo "=== $t (${limit[*]})"
    rc=0
    "$dir/tests/fuzz/$t" "${limit[@]}" -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/$name-" "$work" "$root/tests/fuzz/corpus/$name" \
        >"$dir/$t.log" 2>&1 || rc=$?
    grep -E '^(Done|stat::number_of_executed_units|==.*ERROR|SUMMARY)' "$dir/$t.log" || true
    if [ "$rc" != 0 ]; then
        tail -40 "$dir/$t.log" >&2
        echo "hcguard: $t failed (exit $rc); the input is in $dir/artifacts" >&2
        exit 1
    fi
done
echo "=== hcguard fuzzing: all passed"
