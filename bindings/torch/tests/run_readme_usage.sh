#!/usr/bin/env bash
# Runs the PyTorch usage block of README.md, exactly as written, under torchrun with 3 processes from an
# empty folder (nothing of the source tree on the path), and checks the result it promises (t holds the
# world size everywhere).
#   run_readme_usage.sh PYTHON README [PACKAGE_DIR]
# PACKAGE_DIR: where loom_torch was built (build/python); none: the loom_torch installed for PYTHON.
set -euo pipefail
py=$1 readme=$(realpath "$2") pkg=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '/^```python/{f=1;next} /^```/{if(f){exit}} f' "$readme" > "$work/usage.py"
[ -s "$work/usage.py" ] || { echo "FAIL: no python block in $readme"; exit 1; }
echo 'assert bool((t == dist.get_world_size()).all()), t' >> "$work/usage.py"
cd "$work"
PYTHONPATH="$pkg" OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --standalone --nproc-per-node 3 usage.py
echo "README usage ran as written on 3 ranks (${pkg:-installed loom_torch})"
