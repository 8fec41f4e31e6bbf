#!/usr/bin/env bash
# Installs what building and testing hcguard needs, from Debian's packages,
# if it is missing. The CUDA toolkit's headers (cuda.h) are required too;
# they are not a Debian package here and must already be installed.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v objcopy >/dev/null 2>&1 || need+=(binutils)
# The package tests (tests/package): pkg-config, and groff for the man page.
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v groff >/dev/null 2>&1 || need+=(groff-base)
# The instruction counts of bench/callgrind.py (.ci/run): valgrind and
# its client-request header valgrind/callgrind.h (the same package).
if ! command -v valgrind >/dev/null 2>&1 || [ ! -f /usr/include/valgrind/callgrind.h ]; then
    need+=(valgrind)
fi
# The Cython stand-in of cuda.core's _host_callback module that
# tests/gpu/core_host_copy.py builds (on the test driver too): a Cython
# compiler and the headers of the python3 that runs the tests.
if ! command -v cython3 >/dev/null 2>&1 && ! command -v cython >/dev/null 2>&1 &&
   ! python3 -c 'import Cython' >/dev/null 2>&1; then
    need+=(cython3)
fi
python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    >/dev/null 2>&1 || need+=(python3-dev)
# The 64-bit Arm build of tools/test.sh (x86-64 hosts, not "quick"): a
# cross compiler with its C library, and qemu-user to run the unit tests.
if [ "${HCGUARD_AARCH64:-0}" = 1 ]; then
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)
    [ -f /usr/aarch64-linux-gnu/include/stdio.h ] || need+=(libc6-dev-arm64-cross)
    command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
fi
# Sanitizer runtimes come with gcc; libFuzzer with clang's runtime.
if [ "${HCGUARD_FUZZ:-0}" = 1 ]; then
    command -v clang >/dev/null 2>&1 || need+=(clang)
fi
install() {
    echo "hcguard: installing $*"
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}
if [ ${#need[@]} -gt 0 ]; then
    install "${need[@]}"
fi
# libFuzzer is in the runtime package of clang's own version.
if [ "${HCGUARD_FUZZ:-0}" = 1 ] &&
   ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n ? 0 : 0; }\n' |
     clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null; then
    major=$(clang -dumpversion | cut -d. -f1)
    install "libclang-rt-$major-dev"
fi
cuda=${HCGUARD_CUDA_ROOT:-/usr/local/cuda}
if [ ! -f "$cuda/include/cuda.h" ]; then
    echo "hcguard: $cuda/include/cuda.h not found: install the CUDA toolkit (12.x or 13.x)," >&2
    echo "         or set HCGUARD_CUDA_ROOT to where it is" >&2
    exit 1
fi
