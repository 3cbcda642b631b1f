#!/usr/bin/env bash
# The test command: sets up a fresh machine, builds with warnings as errors, runs every suite.
#   scripts/test.sh            all suites
#   scripts/test.sh -R Comm    only tests whose name matches (passed to ctest)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_WERROR=ON -DLOOM_WITH_TORCH=ON \
  -DPython3_EXECUTABLE="$(command -v python3)"
cmake --build build -j "$(nproc)"
# Multi-process tests fork up to 8 ranks each; two at a time keep a 2-core machine busy but not starved.
ctest --test-dir build -j 2 --output-on-failure --timeout 900 "$@"
