#!/usr/bin/env bash
# The main job: set up, build, and run the allreduce benchmark on 4 local ranks (nccl-tests format).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
mpirun "${root[@]}" -np 4 --oversubscribe build/perf/all_reduce_perf -b 8 -e 64M -f 4 "$@"
