#!/usr/bin/env bash
# The GPU check, to run as is on a machine with a GPU (the device tool's machine; CI has no GPU and only
# compiles this).  Under 5 minutes on one H200.
#   tests/gpu/run.sh [RESULTS_FILE]        default: $OUT/gpu_results.txt, else ./gpu_results.txt
# Runs build/gpu_check: the reduction kernels for every type and op against the CPU reference, the
# device-to-device copy bandwidth (the limit), and 1, 2 and 4 ranks on GPU 0 (every collective on device
# buffers on a CUDA stream, checked; allreduce busbw from 1 to 256 MB); then, when mpirun is there, the
# perf tools with --memory device at 2 and 4 ranks; then nccl_bench, one harness written against nccl.h,
# on the machine's NCCL and on loom's drop-in libnccl.so.2 (1 rank per GPU for NCCL; 1, 2 and 4 ranks on
# GPU 0 for loom).  gpu_check comes from, in this order:
#   - .gpu-bundle/ (made on a machine without a GPU by tests/gpu/bundle.sh: gpu_check and the shared
#     libraries it needs, for a machine that lacks loom's build dependencies; no perf tools then), or
#   - a build made here (needs cmake, ninja, nvcc, libxml2 headers; hwloc/ucx/verbs are optional).
# Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
results=${1:-${OUT:-.}/gpu_results.txt}
: > "$results" || { echo "cannot write $results" >&2; exit 2; }
log() { echo "$*" | tee -a "$results"; }
log "# loom GPU check, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode,mig.mode.current --format=csv 2>&1 | tee -a "$results"

if [ -x .gpu-bundle/bin/gpu_check ]; then
  # The bundle's C++ runtime only where this machine's is older than the bundle needs: a newer one serves
  # the bundle, and the torch binding compiled here may need what the bundle's lacks.
  cxx_lib=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 / {print $NF; exit}')
  if [ -n "$cxx_lib" ] && grep -qa "$(cat .gpu-bundle/cxx-needs 2>/dev/null || echo GLIBCXX_unknown)" "$cxx_lib"; then
    bundle_libs=$PWD/.gpu-bundle/lib
  else
    bundle_libs=$PWD/.gpu-bundle/lib:$PWD/.gpu-bundle/lib-cxx
  fi
  export LD_LIBRARY_PATH=$bundle_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  check=.gpu-bundle/bin/gpu_check perfdir=none
  bench=.gpu-bundle/bin/nccl_bench dropin=$PWD/.gpu-bundle/dropin
  log "# gpu_check from .gpu-bundle (built elsewhere)"
else
  build=${LOOM_GPU_BUILD_DIR:-build-gpu}
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
  log "# building in $build for sm_${arch:-90}"
  mkdir -p "$build"
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WITH_CUDA=ON -DLOOM_WITH_TORCH=OFF \
        -DLOOM_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" > "$build/cmake.log" 2>&1; then
    tail -30 "$build/cmake.log" | tee -a "$results"; log "FAILED: cmake"; exit 1
  fi
  if ! cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1; then
    tail -30 "$build/build.log" | tee -a "$results"; log "FAILED: build"; exit 1
  fi
  check=$build/tests/gpu/gpu_check perfdir=$build/perf
  bench=$build/tests/gpu/nccl_bench dropin=$PWD/$build/bindings/nccl/dropin
fi

status=0
timeout 240 "$check" "$results.check" || status=1
cat "$results.check" >> "$results" && rm -f "$results.check"

if command -v mpirun > /dev/null && [ -x "$perfdir/all_reduce_perf" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for np in 2 4; do
    for tool in all_reduce_perf all_gather_perf; do
      log "# mpirun -np $np $tool --memory device -b 1M -e 256M -f 4"
      timeout 60 mpirun -np "$np" --oversubscribe "$perfdir/$tool" --memory device -b 1M -e 256M -f 4 -n 10 -w 2 \
        2>&1 | tee -a "$results" || status=1
    done
  done
else
  log "# perf tools skipped: no mpirun (or no perf tools) on this machine; gpu_check's busbw above stands in"
fi
# loom beside NCCL through one harness: nccl_bench (written against nccl.h) on this machine's NCCL (its
# nvidia-nccl wheel, else the CUDA toolkit's) and on loom's drop-in libnccl.so.2.  NCCL takes one rank per
# GPU; loom also runs 2 and 4 ranks on GPU 0.
nccl_dir=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(next(iter(s.submodule_search_locations)) + '/lib' if s else '')" 2>/dev/null)
[ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ] || nccl_dir=$(dirname "$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')" 2>/dev/null)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
bench_run() {  # LIBDIR NRANKS GPUS
  log "# nccl_bench $2 rank(s) on $3 GPU(s), libnccl.so.2 from $1"
  LD_LIBRARY_PATH=$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 90 "$bench" "$2" --gpus "$3" -b 1M -e 256M -f 4 -n 10 -w 2 \
    2>&1 | tee -a "$results"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
}
if [ -x "$bench" ]; then
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ]; then bench_run "$nccl_dir" 1 1; else log "# no NCCL library found on this machine"; fi
  for np in 1 2 4; do bench_run "$dropin" "$np" 1; done
  if [ "${ngpu:-0}" -ge 2 ]; then
    [ -n "$nccl_dir" ] && bench_run "$nccl_dir" "$ngpu" "$ngpu"
    bench_run "$dropin" "$ngpu" "$ngpu"
  fi
else
  log "# nccl_bench not built (needs nccl.h and libnccl.so.2 at build time): no comparison with NCCL"
fi
# A DDP step on CUDA tensors through loom and through NCCL, where loom_torch with CUDA tensors imports here:
# a build of this tree with -DLOOM_WITH_TORCH=ON against this machine's torch (LOOM_GPU_BUILD_DIR/python),
# else the binding alone, compiled here against this machine's torch on the bundle's libloom (about a
# minute: one translation unit).
torch_py=${LOOM_GPU_BUILD_DIR:-build-gpu}/python
torch_ok() {
  PYTHONPATH=$torch_py${PYTHONPATH:+:$PYTHONPATH} python3 -c \
    "import loom_torch, sys; sys.exit(0 if loom_torch._C.build_info()['cuda_tensors'] else 1)" 2>/dev/null
}
if ! torch_ok && [ -e .gpu-bundle/include/loom.h ]; then
  torch_build=build-gpu-torch torch_py=build-gpu-torch/python
  log "# building loom_torch here against $(python3 -c 'import torch; print(torch.__version__)' 2>&1) on the bundle's libloom"
  mkdir -p "$torch_build"
  if ! { cmake -S bindings/torch -B "$torch_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_PREBUILT="$PWD/.gpu-bundle" \
           -DPython3_EXECUTABLE="$(command -v python3)" && timeout 300 cmake --build "$torch_build" -j "$(nproc)"; } \
         > "$torch_build/build.log" 2>&1; then
    tail -30 "$torch_build/build.log" | tee -a "$results"; log "FAILED: building loom_torch"; status=1
  fi
fi
if torch_ok; then
  log "# torch DDP step on CUDA tensors: loom vs nccl"
  PYTHONPATH=$torch_py${PYTHONPATH:+:$PYTHONPATH} timeout 180 python3 tests/gpu/torch_ddp_cuda.py 2>&1 | tee -a "$results"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
else
  log "# torch DDP on CUDA skipped: no loom_torch with CUDA tensors for this machine's torch in $torch_py"
fi
log "# run.sh: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
