#!/usr/bin/env bash
# Builds hcguard and runs its tests: the normal build, then ASan+UBSan and
# TSan builds of the same suites, then (on x86-64) a 64-bit Arm build
# whose unit tests run under qemu-user (the Arm thunks, the portable
# fault-contained copy, the oracle; the end-to-end tests preload the
# library into programs, which user-mode emulation cannot). Tests labelled
# gpu run where a GPU and the CUDA driver are present, and are reported as
# skipped elsewhere.
#   tools/test.sh            every build
#   tools/test.sh quick      the normal build only
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
aarch64=0
[ "${1:-}" != quick ] && [ "$(uname -m)" = x86_64 ] && aarch64=1
HCGUARD_AARCH64=$aarch64 "$root/tools/deps.sh"
jobs=$(nproc 2>/dev/null || echo 2)
cuda=${HCGUARD_CUDA_ROOT:-/usr/local/cuda}

run_suite() { # name cmake-args...
    local name=$1; shift
    local dir="$root/build-$name"
    echo "=== hcguard tests: $name build ($dir)"
    cmake -S "$root" -B "$dir" -DHCGUARD_CUDA_ROOT="$cuda" "$@" >/dev/null
    cmake --build "$dir" -j "$jobs"
    (cd "$dir" && ctest --output-on-failure -j "$jobs" ${HCGUARD_CTEST_ARGS:-})
}

run_suite release -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "${1:-}" != quick ]; then
    run_suite asan -DCMAKE_BUILD_TYPE=Debug -DHCGUARD_SANITIZE=address,undefined
    run_suite tsan -DCMAKE_BUILD_TYPE=Debug -DHCGUARD_SANITIZE=thread
fi
if [ "$aarch64" = 1 ]; then
    HCGUARD_CTEST_ARGS="-L unit ${HCGUARD_CTEST_ARGS:-}" run_suite aarch64 \
        -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
echo "=== hcguard tests: all passed"
