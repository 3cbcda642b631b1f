#!/usr/bin/env bash
# Makes .gpu-bundle/ for tests/gpu/run.sh: gpu_check from BUILD_DIR (default build), loom linked in
# statically, with the shared libraries they load that are not glibc's, so that they run on a GPU machine whose image
# lacks loom's build dependencies (libxml2, hwloc, ucx, rdma-core).  Carry .gpu-bundle with the device
# tool (it is ignored by git).
#   tests/gpu/bundle.sh [BUILD_DIR [BUNDLE_DIR]]      BUNDLE_DIR default .gpu-bundle
# The bundle also holds libloom.so.0 and its headers (include/), a loom to build the torch binding on
# there (bindings/torch with -DLOOM_PREBUILT=BUNDLE_DIR): a torch extension must be compiled against the
# very torch that loads it, and the GPU machine's torch is not this one's.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bundle=${2:-.gpu-bundle}
[ -x "$build/tests/gpu/gpu_check" ] || { echo "no $build/tests/gpu/gpu_check: build with CUDA first" >&2; exit 2; }
rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/include"
cp "$build/tests/gpu/gpu_check" "$bundle/bin/"
cp -L "$build/src/libloom.so.0" "$bundle/lib/libloom.so.0"
cp include/loom.h "$build/generated/loom_build_config.h" "$bundle/include/"
# loom beside NCCL: nccl_bench (built against nccl.h), and libloom_nccl as the drop-in libnccl.so.2.  The
# machine's own NCCL (its nvidia-nccl wheel) is the other side: libnccl.so.2 is never copied.
if [ -x "$build/tests/gpu/nccl_bench" ]; then
  cp "$build/tests/gpu/nccl_bench" "$bundle/bin/"
  cp -L "$build/bindings/nccl/libloom_nccl.so" "$bundle/lib/libloom_nccl.so"
  mkdir -p "$bundle/dropin" && cp "$bundle/lib/libloom_nccl.so" "$bundle/dropin/libnccl.so.2"  # a copy: links may not travel
fi
# (The perf tools stay out: they need the machine's own MPI and mpirun, and are built there when it has them.)
# Every library the binaries load, except the C runtime's own (those must be the machine's).
for f in "$bundle"/bin/* "$bundle"/lib/*; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libnccl)\.so' | while read -r lib; do
  cp -L "$lib" "$bundle/lib/"
done
# The C++ runtime apart (run.sh uses it only where the machine's own is older), with the newest symbol
# version the bundle needs of it.
mkdir -p "$bundle/lib-cxx"
mv "$bundle"/lib/libstdc++.so.6 "$bundle"/lib/libgcc_s.so.1 "$bundle/lib-cxx/" 2>/dev/null || true
objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1 > "$bundle/cxx-needs"
# Debug information is not needed there, and the device tool carries at most 64 MiB.
strip --strip-debug "$bundle"/bin/* "$bundle"/lib/libloom* "$bundle"/dropin/* 2>/dev/null || true
du -sh "$bundle"
