#!/usr/bin/env bash
# The binding built on a loom built elsewhere, as tests/gpu/run.sh builds it on a GPU machine: bundle
# BUILD_DIR as tests/gpu/bundle.sh does for that machine, compile bindings/torch alone against it
# (-DLOOM_PREBUILT) and against the torch of PYTHON, then run the collectives suite on 2 ranks with
# that package, from a folder outside the source tree.
#   run_prebuilt.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
py=$1 src=$(realpath "$2") build=$(realpath "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$src/tests/gpu/bundle.sh" "$build" "$work/bundle" > /dev/null
cmake -S "$src/bindings/torch" -B "$work/torch" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_PREBUILT="$work/bundle" \
      -DPython3_EXECUTABLE="$py" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/torch" -j 2 > "$work/build.log" || { tail -40 "$work/build.log"; exit 1; }
module=$(ls "$work"/torch/python/loom_torch/_C*.so)
# It must load the bundle's libloom (no loom linked in), found by its run path.  (ldd's whole answer
# first: under pipefail, grep -q leaving early fails the pipe with ldd's SIGPIPE.)
libs=$(ldd "$module")
grep -q "libloom.so.0 => $work/bundle/lib/libloom.so.0" <<< "$libs" || { echo "$libs"; echo "FAIL: not on the bundle's libloom"; exit 1; }
cd "$work"
LD_LIBRARY_PATH="$work/bundle/lib" PYTHONPATH="$work/torch/python" OMP_NUM_THREADS=1 \
  "$py" -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q -p no:cacheprovider \
  "$src/bindings/torch/tests/test_collectives.py"
echo "loom_torch built on a prebuilt loom ran the collectives suite on 2 ranks"
