#!/bin/bash
# Fails when a file of src/ includes a file of a higher floor (docs/architecture.md draws them):
#   0 ground     base/: imports nothing of loom
#   1 services   topo/ (the machine model), bootstrap/, device_runtime/ (the GPU runtime behind one
#                table), kernels/ (reduction and copy kernels, CPU and GPU), model/ (the cost model's table),
#                sim/ (the what-if simulator over topo/ and model/, which nothing of the library reads)
#   2 transport  transport/
#   3 state      runtime/*.h: the communicator's declarations
#   4 paths      algos/ (the algorithms, the selector, p2p) and device/ (device-buffer paths)
#   5 runtime    runtime/*.cc (api, comm, collective, group, stream, progress, comm_topology): the only
#                floor that ties the others together
# Includes within a floor, and downwards, are fine.  Usage: tools/check_layers.sh [src-dir]
set -u
src=${1:-$(dirname "$0")/../src}
cd "$src" || exit 2

floor_of() {
  case $1 in
    base/*) echo 0 ;;
    topo/* | bootstrap/* | device_runtime/* | kernels/* | model/* | sim/*) echo 1 ;;
    transport/*) echo 2 ;;
    runtime/*.h) echo 3 ;;
    algos/* | device/*) echo 4 ;;
    runtime/*) echo 5 ;;
    *) echo "" ;;
  esac
}

bad=0 checked=0
while IFS= read -r file; do
  from=$(floor_of "$file")
  [ -z "$from" ] && { echo "check_layers: $file is on no floor (add it to tools/check_layers.sh)"; bad=$((bad + 1)); continue; }
  while IFS= read -r target; do
    [ -f "$target" ] || continue  # a generated or system header
    to=$(floor_of "$target")
    checked=$((checked + 1))
    if [ -n "$to" ] && [ "$to" -gt "$from" ]; then
      echo "check_layers: $file (floor $from) includes $target (floor $to)"
      bad=$((bad + 1))
    fi
  done < <(sed -n 's/^#include "\([a-z_]*\/[a-z_./]*\)".*/\1/p' "$file")
done < <(find . -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.inc' | sed 's|^\./||' | sort)

if [ $bad -ne 0 ]; then
  echo "check_layers: $bad include(s) against the floors"
  exit 1
fi
echo "check_layers: $checked includes, none from a lower floor to a higher one"
