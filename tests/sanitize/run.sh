#!/usr/bin/env bash
# Builds the core, transport and API suites with a sanitizer and runs them (not part of CI yet: each
# build is ~2 minutes here on top of the 13-14 minute CI run).
#   tests/sanitize/run.sh [address|thread] [BUILD_DIR]
# address = AddressSanitizer + UndefinedBehaviorSanitizer (leak checking on), thread = ThreadSanitizer.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
kind=${1:-address} build=${2:-$here/build-$kind}
case $kind in
  address) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;;
  thread) flags="-fsanitize=thread" ;;
  *) echo "usage: $0 [address|thread] [BUILD_DIR]"; exit 2 ;;
esac
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLOOM_WITH_CUDA=OFF -DLOOM_WITH_TORCH=OFF -DLOOM_WITH_UCX=OFF \
  -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer -O1" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
ninja -C "$build" core_test transport_test api_test
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1:die_after_fork=0
fail=0
for t in core_test transport_test api_test; do
  echo "== $t ($kind)"
  "$build/tests/$t" --gtest_brief=1 || fail=1
done
exit $fail
