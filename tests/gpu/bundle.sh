#!/usr/bin/env bash
# Makes .gpu-bundle/ for tests/gpu/run.sh: gpu_check from BUILD_DIR (default build), loom linked in
# statically, with the shared libraries they load that are not glibc's, so that they run on a GPU machine whose image
# lacks loom's build dependencies (libxml2, hwloc, ucx, rdma-core).  Carry .gpu-bundle with the device
# tool (it is ignored by git).
#   tests/gpu/bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
[ -x "$build/tests/gpu/gpu_check" ] || { echo "no $build/tests/gpu/gpu_check: build with CUDA first" >&2; exit 2; }
rm -rf .gpu-bundle && mkdir -p .gpu-bundle/bin .gpu-bundle/lib
cp "$build/tests/gpu/gpu_check" .gpu-bundle/bin/
# loom beside NCCL: nccl_bench (built against nccl.h), and libloom_nccl as the drop-in libnccl.so.2.  The
# machine's own NCCL (its nvidia-nccl wheel) is the other side: libnccl.so.2 is never copied.
if [ -x "$build/tests/gpu/nccl_bench" ]; then
  cp "$build/tests/gpu/nccl_bench" .gpu-bundle/bin/
  cp -L "$build/bindings/nccl/libloom_nccl.so" .gpu-bundle/lib/libloom_nccl.so
  mkdir -p .gpu-bundle/dropin && cp .gpu-bundle/lib/libloom_nccl.so .gpu-bundle/dropin/libnccl.so.2  # a copy: links may not travel
fi
# (The perf tools stay out: they need the machine's own MPI and mpirun, and are built there when it has them.)
# Every library the binaries load, except the C runtime's own (those must be the machine's).
for f in .gpu-bundle/bin/* .gpu-bundle/lib/*; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libnccl)\.so' | while read -r lib; do
  cp -L "$lib" .gpu-bundle/lib/
done
# Debug information is not needed there, and the device tool carries at most 64 MiB.
strip --strip-debug .gpu-bundle/bin/* .gpu-bundle/lib/libloom* .gpu-bundle/dropin/* 2>/dev/null || true
du -sh .gpu-bundle
