#!/usr/bin/env bash
# Runs the loom_torch pytest suite as NP ranks started by mpirun (the conftest maps OpenMPI's rank
# variables); torch's store listens on a free loopback port chosen here.
#   run_mpirun.sh NP PYTHON PACKAGE_DIR TEST_DIR
set -euo pipefail
np=$1 py=$2 pkg=$3 tests=$4
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$np" --oversubscribe --bind-to none \
  -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x PYTHONPATH="$pkg" -x OMP_NUM_THREADS=1 \
  "$py" -m pytest -q -p no:cacheprovider "$tests"
