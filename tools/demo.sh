#!/usr/bin/env bash
# Builds hcguard and runs the demo under `hcguard run`: on the real driver
# where a GPU is present, else on the test driver (tests/fakecuda).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/deps.sh"
dir="$root/build-release"
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DHCGUARD_CUDA_ROOT="${HCGUARD_CUDA_ROOT:-/usr/local/cuda}" >/dev/null
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target hcguard hcguard_launcher hcdemo fakecuda
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "=== hcdemo on the GPU ($(nvidia-smi -L | head -1))"
else
    echo "=== hcdemo on the test driver (no GPU here)"
    export LD_LIBRARY_PATH="$dir/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
exec "$dir/bin/hcguard" run --log "$dir/hcdemo-%p.jsonl" -- "$dir/bin/hcdemo"
