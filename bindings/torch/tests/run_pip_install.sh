#!/usr/bin/env bash
# Installs loom_torch the way the README tells users to, into a new virtual environment, and runs the
# README's PyTorch example with it from outside the source tree.
#   run_pip_install.sh PYTHON REPO [TORCH_REQUIREMENT]
# Without TORCH_REQUIREMENT the environment sees PYTHON's packages (its torch, scikit-build-core); with
# one (torch==2.5.1) it is isolated and gets that torch from PyPI: the oldest torch loom supports.
set -euo pipefail
py=$1 repo=$(realpath "$2") torch_req=${3:-}
venv=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$venv")"' EXIT
pip_quiet=(-q --disable-pip-version-check --root-user-action=ignore)
if [ -n "$torch_req" ]; then
  "$py" -m venv "$venv"
  # The build backend at the version requirements-python.txt pins, and the torch to build against.
  skb=$(grep -E '^scikit-build-core==' "$repo/scripts/requirements-python.txt")
  numpy=$(grep -E "^numpy==" "$repo/scripts/requirements-python.txt")
  "$venv/bin/python" -m pip install "${pip_quiet[@]}" "$torch_req" "$skb" "$numpy"
else
  "$py" -m venv --system-site-packages "$venv"
fi
# CUDA off: the device kernels add minutes to the build and nothing here can run them.
"$venv/bin/python" -m pip install "${pip_quiet[@]}" --no-build-isolation \
  --config-settings=cmake.define.LOOM_WITH_CUDA=OFF "$repo/bindings/torch"
cd "$(dirname "$venv")"
"$venv/bin/python" -m loom_torch.info
"$repo/bindings/torch/tests/run_readme_usage.sh" "$venv/bin/python" "$repo/README.md"
