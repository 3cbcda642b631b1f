#!/usr/bin/env bash
# An installed prefix works as it is: `cmake --install` into a scratch prefix, then, with no
# LD_LIBRARY_PATH, loom-info runs and an installed perf tool runs under mpirun (binaries find libloom
# through their RPATH, $ORIGIN/../lib); and the installed libloom needs neither UCX nor rdma-core to load
# (it opens them when a transport is used), checked on its NEEDED list.
#   installed_tools.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
lib=$(find "$prefix" -name 'libloom.so.*' -type f -print -quit)
[ -n "$lib" ] || { echo "FAIL: no libloom installed under $prefix"; exit 1; }
needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $5}' | tr -d '[]')
echo "libloom NEEDED: $(echo $needed)"
if echo "$needed" | grep -E '^lib(ucp|ucs|uct|ucm|ibverbs|rdmacm|mlx5)\.' ; then
  echo "FAIL: the installed libloom links UCX or rdma-core (they must be opened at run time)"; exit 1
fi
unset LD_LIBRARY_PATH
for bin in "$prefix/bin/loom-info" "$prefix/bin/all_reduce_perf"; do
  runpath=$(readelf -d "$bin" | awk '/RUNPATH|RPATH/ {print $5}')
  case "$runpath" in *'$ORIGIN/../lib'*) ;; *) echo "FAIL: $bin has RPATH '$runpath', not \$ORIGIN/../lib"; exit 1 ;; esac
done
info=$("$prefix/bin/loom-info")
echo "$info" | sed -n 1,3p
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(cd "$work" && timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$prefix/bin/all_reduce_perf" -b 8 -e 1M -f 4 -c 1)
echo "$out" | tail -12
grep -q '# Out of bounds values : 0 OK' <<< "$out" || { echo "FAIL: the installed all_reduce_perf did not check out"; exit 1; }
echo "installed_tools: loom-info and all_reduce_perf under mpirun ran from $prefix without LD_LIBRARY_PATH"
