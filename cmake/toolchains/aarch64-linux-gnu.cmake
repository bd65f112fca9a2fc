# Cross-compiles smax for aarch64 (NEON) with Debian's g++-aarch64-linux-gnu
# and runs the results under QEMU user-mode emulation (qemu-user), so that
# `ctest` in a build configured with this file runs the NEON kernels on an
# x86-64 machine:
#
#   cmake -S . -B build/neon -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#   cmake --build build/neon -j2 && ctest --test-dir build/neon
#
# (or `cmake --workflow --preset neon`). binfmt_misc is usually not mounted in
# containers, so the emulator is named explicitly rather than relying on the
# kernel to run aarch64 binaries.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# -L: where QEMU finds the aarch64 dynamic loader and libc/libstdc++.
set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-L;/usr/aarch64-linux-gnu")

# xsimd and Catch2 (v2) are header-only as far as smax uses them, and the
# cross compiler searches /usr/include after its own sysroot, so the x86-64
# packages' CMake configs serve the aarch64 build too. (Catch2WithMain is a
# prebuilt x86-64 library: tests/CMakeLists.txt compiles its own main when
# cross-compiling.)
set(xsimd_DIR "/usr/lib/x86_64-linux-gnu/cmake/xsimd" CACHE PATH "xsimd package config (header-only, shared with x86-64)")
set(Catch2_DIR "/usr/lib/cmake/Catch2" CACHE PATH "Catch2 v2 package config (header-only part)")
