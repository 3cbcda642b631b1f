#!/usr/bin/env bash
# Runs the PyTorch usage block of README.md, exactly as written, under torchrun with 3 processes, and
# checks the result it promises (t holds the world size everywhere).
#   run_readme_usage.sh PYTHON README PACKAGE_DIR
set -euo pipefail
py=$1 readme=$2 pkg=$3
script=$(mktemp --suffix=.py)
trap 'rm -f "$script"' EXIT
awk '/^```python/{f=1;next} /^```/{if(f){exit}} f' "$readme" > "$script"
[ -s "$script" ] || { echo "FAIL: no python block in $readme"; exit 1; }
echo 'assert bool((t == dist.get_world_size()).all()), t' >> "$script"
PYTHONPATH="$pkg" OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --standalone --nproc-per-node 3 "$script"
echo "README usage ran as written on 3 ranks"
