# Cross-building for 64-bit Arm (Debian's crossbuild-essential-arm64), the
# tests run under qemu-user (qemu-aarch64): tools/test.sh aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
# cuda.h is the same for every processor: the host toolkit's.
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
