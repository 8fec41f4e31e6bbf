#!/usr/bin/env bash
# On a GPU machine: build, run the gpu-labelled tests, the rest of the
# suite, and the benchmark; logs go to $OUT (or ./gpu-out).
#   tools/gpu-check.sh [ROUNDS]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
build="$root/build-gpu"
{
    nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
    grep -m1 "model name" /proc/cpuinfo; nproc
    uname -r; gcc --version | head -1
    python3 -c 'import cuda.bindings, cupy; print("cuda.bindings", cuda.bindings.__version__, "cupy", cupy.__version__)'
} 2>&1 | tee "$out/machine.txt"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHCGUARD_WERROR=OFF >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
grep -E "warning:" "$out/build.log" | sort -u | head -20
cd "$build"
ctest -L gpu -j 4 --output-on-failure --timeout 240 >"$out/ctest-gpu.log" 2>&1
grep -E "tests passed|Failed|Skipped|\*\*\*" "$out/ctest-gpu.log" | head -80
ctest -LE gpu -j 8 --output-on-failure --timeout 240 >"$out/ctest-rest.log" 2>&1
grep -E "tests passed|Failed|\*\*\*" "$out/ctest-rest.log" | head -30
# The full output of the tests a closing note quotes, one after another.
{
    for t in ${HCG_DETAIL_TESTS:-gpu_e2e_direct_bad_guard gpu_e2e_gpa2-self_changed gpu_cudart_shared \
             gpu_cudart_static gpu_bindings gpu_cupy gpu_graph_replay gpu_graph_capture gpu_graph_lifetime \
             gpu_audit_cuda_call_guard gpu_audit_libc_guard gpu_audit_closure gpu_audit_slow \
             gpu_audit_hang gpu_bindings_ctypes gpu_bindings_graph}; do
        echo "=== $t"
        ctest -R "^$t\$" -V --timeout 240 2>&1 | sed -n '/Test command:/,$p' | grep -v "^[0-9]*: Environment variables:"
    done
    echo "=== v2 skip reason"; LD_PRELOAD=$build/lib/libhcguard.so ./tests/e2e/hc_e2e v2 good 2>&1 | tail -2
    echo "=== bindings under --debug"
    ./bin/hcguard run --debug -- python3 "$root/tests/gpu/bindings_hostfn.py" 2>&1 | grep -E "debug|route|cuLaunchHostFunc|FAIL|passed" | head -30
} >"$out/detail.log" 2>&1
grep -E "^=== |hcguard\) passed|: passed|FAIL|Passed|Failed" "$out/detail.log" | head -60
"$root/bench/run.sh" "$build" "${1:-3}" 2>&1 | tee "$out/bench.txt"
