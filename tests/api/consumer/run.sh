#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a C program against it twice: through
# find_package(loom) and through pkg-config.  Both binaries must run (a 1-rank allreduce).
set -euo pipefail
build=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
prefix="$work/prefix"
libdir=$(dirname "$(find "$prefix" -name 'libloom.so' -print -quit)")

cmake -S "$here" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log"
cmake --build "$work/cmake-build" > "$work/cmake-build.log"
LD_LIBRARY_PATH="$libdir" "$work/cmake-build/consumer"

PKG_CONFIG_PATH="$libdir/pkgconfig" cc -std=c99 -Wall -Wextra -Werror "$here/consumer.c" -o "$work/consumer-pc" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs loom)
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc"
echo "install_consumer: find_package and pkg-config consumers both ran"
