#!/usr/bin/env bash
# hcguard against a CUPTI subscriber, on a GPU: bench_cupti ROUNDS batches
# per way, side by side in one process (see bench/bench_cupti.c), twice:
# without hcguard (the hcg column is then the driver's own: the method's
# noise) and with hcguard preloaded in its default mode.
#   bench/cupti.sh BUILD_DIR [ROUNDS]
set -euo pipefail
build=${1:?usage: bench/cupti.sh BUILD_DIR [ROUNDS]}
rounds=${2:-60}
bin="$build/bench/bench_cupti"
lib="$build/lib/libhcguard.so"
[ -x "$bin" ] || { echo "bench: $bin not built (CUPTI not found at configure time)" >&2; exit 1; }
echo "== without hcguard"
"$bin" "$rounds"
echo
echo "== with hcguard preloaded (guard mode)"
HCGUARD_SLOW_MS=100000 LD_PRELOAD="$lib" "$bin" "$rounds"
