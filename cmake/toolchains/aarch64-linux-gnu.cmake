# Cross-compiles trainbench for 64-bit Arm Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu) against a Debian arm64 root holding the -dev packages, as
# scripts/cross_build_check.sh builds it. Usage:
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DTRAINBENCH_SYSROOT=/path/to/arm64/root ...
# (or TRAINBENCH_SYSROOT in the environment). CUDA is off: nvcc for Grace is an arm64 host tool.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT TRAINBENCH_SYSROOT AND DEFINED ENV{TRAINBENCH_SYSROOT})
  set(TRAINBENCH_SYSROOT "$ENV{TRAINBENCH_SYSROOT}")
endif()
if(NOT TRAINBENCH_SYSROOT)
  message(FATAL_ERROR "set TRAINBENCH_SYSROOT to a Debian arm64 root (scripts/cross_build_check.sh makes one)")
endif()
# try_compile projects see the variable too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TRAINBENCH_SYSROOT)
set(CMAKE_SYSROOT "${TRAINBENCH_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${TRAINBENCH_SYSROOT}")

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Programs from the host, everything else from the root only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(TRAINBENCH_BACKEND_CUDA OFF CACHE STRING "" FORCE)

# ctest (and gtest's test listing) run the programs under qemu-user where it is installed.
find_program(TRAINBENCH_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(TRAINBENCH_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${TRAINBENCH_QEMU_AARCH64};-L;${TRAINBENCH_SYSROOT}")
endif()
