#!/usr/bin/env bash
# On a GPU machine, in one go: build, run the gpu-labelled tests verbosely
# (their output, hcguard's summaries included, is what a report quotes),
# the rest of the suite, a routing trace of cuda.bindings, and the
# benchmark. Logs go to $OUT (or ./gpu-out); a digest to stdout.
#   [HCG_GPU_ONLY=1] tools/gpu-check.sh [ROUNDS]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
build="$root/build-gpu"
{
    date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
    grep -m1 "model name" /proc/cpuinfo; nproc; uname -r; gcc --version | head -1
    ls -l /usr/local/cuda/lib64/stubs/libcuda.so
    python3 -c 'import cuda.bindings, cupy; print("cuda.bindings", cuda.bindings.__version__, "cupy", cupy.__version__)'
} 2>&1 | tee "$out/machine.txt"
{ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHCGUARD_WERROR=OFF &&
  cmake --build "$build" -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
grep -E "warning:|hcguard:" "$out/build.log" | sort -u | head -20
cd "$build"
limit=${HCG_TEST_TIMEOUT:-120}
ctest -L gpu -j 8 -V --timeout "$limit" >"$out/ctest-gpu.log" 2>&1
grep -E "tests passed|\*\*\*Failed|\*\*\*Timeout|Passed|SKIP:" "$out/ctest-gpu.log" | head -90
"$root/bench/run.sh" "$build" "${1:-2}" 2>&1 | tee "$out/bench.txt"
# HCG_GPU_ONLY=1 leaves out the tests that need no GPU (CI runs them).
if [ -z "${HCG_GPU_ONLY:-}" ]; then
    ctest -LE gpu -j "$(nproc)" --output-on-failure --timeout "$limit" >"$out/ctest-rest.log" 2>&1
    grep -E "tests passed|\*\*\*Failed|\*\*\*Timeout" "$out/ctest-rest.log" | head -20
fi
{
    echo "=== cuda.bindings under --debug"
    timeout 60 ./bin/hcguard run --debug -- python3 "$root/tests/gpu/bindings_hostfn.py" 2>&1 |
        grep -E "route|cuLaunchHostFunc|FAIL|passed" | head -30
    echo "=== v2"; LD_PRELOAD=$build/lib/libhcguard.so timeout 30 ./tests/e2e/hc_e2e v2 good 2>&1 | tail -2
} >"$out/detail.log" 2>&1
cat "$out/detail.log"
